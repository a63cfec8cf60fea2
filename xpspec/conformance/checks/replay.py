"""Checks of replay sampling on its own (capability ``replay``, clauses ``replay.*``): a buffer
filled with every item of the toy env, then sampled draw after draw. The windows a trainer
samples for its updates are checked in :mod:`xpspec.conformance.checks.windows`."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.views import BufferModel, window_name
from xpspec.protocol.scenario import ReplayScenario, Scenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Sampled, Trace, Window

__all__ = ["check_no_window", "check_replay_windows", "check_uniform", "within_batch_dispersion"]


def _replay(scenario: Scenario, trace: Trace) -> tuple[ReplayScenario, BufferModel, list[Sampled]]:
    assert isinstance(scenario, ReplayScenario)
    model = BufferModel(scenario.capacity)
    for e in trace.of_kind("store"):
        model.add(e)
    return scenario, model, list(trace.of_kind("sampled"))


def _start(model: BufferModel, window: Window) -> tuple[int, int]:
    """The window's ``(env, start)``, ``start`` the absolute position of its first item."""
    located = model.locate(window)
    if located is None:
        raise CheckFailure(
            f"sampled window {window}",
            "starts at an item still in the buffer",
            "evicted or never stored",
        )
    env, index = located
    return env, model.position(env, index)


def check_replay_windows(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.window-validity, replay.eviction, replay.boundary-policy, replay.period-anchor.
    Each draw is judged against the buffer the stores before it imply (a prioritized
    scenario stores more items between draws)."""
    assert isinstance(scenario, ReplayScenario)
    sc, model = scenario, BufferModel(scenario.capacity)
    draws = list(trace.of_kind("sampled"))
    if len(draws) != sc.draws:
        raise CheckFailure("sampled batches", sc.draws, len(draws))
    s = sc.sampling
    for d in trace.events:
        if d.kind == "store":
            model.add(d)
        if d.kind != "sampled":
            continue
        # An empty draw reports that no window was valid; replay-no-window judges whether
        # that was so.
        if len(d.windows) not in (0, sc.batch_size):
            raise CheckFailure(
                f"windows in draw {d.draw}",
                f"{sc.batch_size} (or 0: no valid window)",
                len(d.windows),
            )
        for window in d.windows:
            if len(window) != s.window_length:
                raise CheckFailure("window length", s.window_length, len(window))
            env, position = _start(model, window)
            index = position - model.start[env]
            live = model.live(env)
            real = [(w[0], w[1], w[2]) for w in window if w is not None]
            name = window_name(env, position)
            if real != live[index : index + len(real)]:
                raise CheckFailure(
                    f"items of sampled window {name} vs those stored at its positions",
                    live[index : index + len(window)],
                    window,
                )
            crosses = any(
                model.step_type[a] == StepType.LAST or model.step_type[b] == StepType.FIRST
                for a, b in itertools.pairwise(real)
            )
            if s.boundary != "cross" and crosses:
                raise CheckFailure(
                    f"window {name} under boundary policy {s.boundary!r}",
                    "no boundary inside",
                    window,
                )
            if s.boundary != "pad" and len(real) != len(window):
                raise CheckFailure(
                    f"padding of window {name} under boundary policy {s.boundary!r}",
                    "none",
                    window,
                )
            anchor = 0 if s.anchor == "absolute" else model.start[env]
            if (position - anchor) % s.period:
                raise CheckFailure(
                    f"start of window {name} (period {s.period}, anchor {s.anchor})",
                    f"≡ {anchor % s.period} mod {s.period}",
                    position,
                )


def within_batch_dispersion(batches: Sequence[Sequence[Hashable]], num_windows: int) -> float:
    """The z-score of the within-batch dispersion of ``batches`` (clause
    ``replay.uniform-windows``, joint law): each batch's Pearson statistic
    ``X² = Σ_w (c_w − b/W)² / (b/W)`` over the ``W = num_windows`` valid windows, summed over
    the batches of ``b >= 2`` windows. For independent uniform draws with replacement the
    counts of one batch are Multinomial(b, 1/W), so ``X²`` has mean ``W − 1`` and variance
    ``2(W − 1)(1 − 1/b)`` exactly; the sum, scaled to a chi-square with those two moments, is
    turned into a standard normal z by the Wilson–Hilferty cube root. ``z`` far below 0: too
    few repeats in a batch (draws without replacement); far above 0: too many (draws that
    share their window or their env). 0.0 when no batch has two windows."""
    total = mean = variance = 0.0
    for batch in batches:
        b = len(batch)
        if b < 2:
            continue
        counts = Counter(batch)
        total += num_windows / b * sum(c * c for c in counts.values()) - b
        mean += num_windows - 1
        variance += 2 * (num_windows - 1) * (1 - 1 / b)
    if mean == 0 or variance == 0:
        return 0.0
    nu = 2 * mean * mean / variance
    return ((total / mean) ** (1 / 3) - 1 + 2 / (9 * nu)) / math.sqrt(2 / (9 * nu))


def check_uniform(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.uniform-windows: every valid window equally likely, the windows of a batch drawn
    independently with replacement; under the clause's variants ``env-balanced`` and
    ``uniform-episodes``, each window as likely as that variant's law makes it
    (:func:`_window_law`), so a framework that declares one is held to it. Period 1, under
    ``cross`` or ``forbid``.

    Marginal: each window's count is Binomial(N, p_w); the check fails if any count is more
    than 5 standard deviations from N·p_w (false alarm below W * 6e-7 per run; under the
    uniform law a window twice as likely as it should be is caught whenever N/W >= 100).

    Joint (uniform law only): :func:`within_batch_dispersion` of the draws must lie within 5 of 0 (the same
    false-alarm rate, 6e-7 per run: one two-sided test at 5 standard deviations; measured
    null z over 4000 simulated runs of ``replay-uniform``: mean -0.02, sd 1.01). Power at
    ``replay-uniform``'s size (W = 12 valid windows, 40 batches of 64), measured by
    simulation (``tests/conformance/test_replay_checks.py``): a sampler without replacement
    (each batch deals permutations of the valid windows) gives z = -28.8 and is always
    caught; one that draws a batch's windows from a single env gives z near 40 and is always
    caught; one that repeats the previous window of the batch with probability ρ is caught
    with probability >= 0.99 for ρ >= 1/4 (about 0.9 at ρ = 0.2, 0.4 at ρ = 0.15).
    """
    sc, model, draws = _replay(scenario, trace)
    law = _window_law(sc, model)
    batches = [[_start(model, w) for w in d.windows] for d in draws]
    counts = Counter(start for batch in batches for start in batch)
    n, w = sum(counts.values()), len(law)
    if w == 0:
        if n == 0:
            return  # nothing valid and nothing drawn: replay-no-window judges the draws
        raise CheckFailure("valid windows in the buffer the stores imply", "at least one", 0)
    dist = sc.sampling.distribution
    # A law is a law of full batches: a short draw while a full batch is owed would let a
    # sampler that draws nothing pass the count tests below vacuously. replay.no-window owes
    # one when some window is valid (under env-balanced: a valid window in every env).
    owed = dist != "env-balanced" or {env for env, _ in law} == set(range(sc.env.num_envs))
    for d in draws if owed else ():
        if len(d.windows) != sc.batch_size:
            raise CheckFailure(
                f"windows in draw {d.draw} while the buffer holds {w} valid windows",
                sc.batch_size,
                len(d.windows),
            )
    for window, p in law.items():
        mean, sd = n * p, math.sqrt(n * p * (1 - p))
        if abs(counts[window] - mean) > 5 * sd:
            raise CheckFailure(
                f"draws of window {window_name(*window)} out of {n} over {w} valid windows ({dist}, "
                f"boundary {sc.sampling.boundary!r}: probability {p:.4f})",
                f"{mean:.1f} ± {5 * sd:.1f}",
                counts[window],
            )
    outside = set(counts) - set(law)
    if outside:
        raise CheckFailure(
            "windows drawn that are not valid, as (env, start)", [], sorted(outside)[:5]
        )
    if dist != "uniform-windows":
        return  # the joint test below is the uniform law's
    z = within_batch_dispersion(batches, w)
    if abs(z) > 5:
        raise CheckFailure(
            f"within-batch dispersion z of {len(batches)} batches over {w} valid windows "
            "(below: fewer repeats than independent draws with replacement give; above: more)",
            "|z| <= 5",
            round(z, 2),
        )


def _window_law(sc: ReplayScenario, model: BufferModel) -> dict[tuple[int, int], float]:
    """Each valid window ``(env, start)`` (``start`` absolute) with its probability under the
    scenario's distribution: ``uniform-windows`` 1/W; the variants of
    ``replay.uniform-windows`` ``env-balanced`` (an env uniformly, then one of its windows)
    and ``uniform-episodes`` (an episode segment uniformly among those holding a valid
    window, then one of its windows; a window's segment is its first item's episode). Under
    ``forbid`` a window may not cross a LAST or a FIRST (``replay.boundary-policy``)."""
    length = sc.sampling.window_length
    forbid = sc.sampling.boundary == "forbid"
    groups: dict[Any, list[tuple[int, int]]] = {}
    for env in sorted(model.stored):
        live = model.live(env)
        steps = [model.step_type[item] for item in live]
        for i in range(len(live) - length + 1):
            if forbid and any(
                steps[q] == StepType.LAST or steps[q + 1] == StepType.FIRST
                for q in range(i, i + length - 1)
            ):
                continue
            key: Any = {
                "uniform-windows": None,
                "env-balanced": env,
                "uniform-episodes": (env, live[i][1]),
            }[sc.sampling.distribution]
            groups.setdefault(key, []).append((env, model.position(env, i)))
    return {
        window: 1 / (len(groups) * len(members))
        for members in groups.values()
        for window in members
    }


def check_no_window(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.no-window: a draw is empty exactly when the buffer holds no valid window for the
    sampling spec. Whether one exists does not depend on the random draw, so the reference
    trace's empty draws say where: the same draws must be empty here, and the others full."""
    sc, _, draws = _replay(scenario, trace)
    reference = list(ctx.reference(scenario).of_kind("sampled"))
    if len(draws) != len(reference):
        raise CheckFailure("sampled batches", len(reference), len(draws))
    for got, want in zip(draws, reference):
        if not want.windows and got.windows:
            raise CheckFailure(
                f"windows in draw {got.draw}, from a buffer holding no valid window "
                f"(window_length {sc.sampling.window_length}, boundary {sc.sampling.boundary!r})",
                0,
                len(got.windows),
            )
        if want.windows and not got.windows:
            raise CheckFailure(
                f"windows in draw {got.draw}, from a buffer holding valid windows",
                sc.batch_size,
                0,
            )
