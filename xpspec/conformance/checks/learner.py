"""Checks of learner-side preprocessing (capability ``learner``).

What the data is follows from the scenario alone: the first ``steps`` time steps of every env
of the toy env, cut at each LAST into episodes, each env's trailing chunk in progress (a chunk
holding only its FIRST has no transition and carries nothing to check). Episode ``(e, k)``
then has ``L`` transitions, rows ``t = 0..L`` (row ``L`` is the bootstrap row), rewards
``r_t = EnvSpec.reward(seed, e, k, t + 1)`` (as on the spec page, ``r_t`` is the reward that
follows ``a_t``, carried by row ``t + 1``) and values ``V_t = value_scale * t``.
The checks recompute what they need from that description with exact rationals and compare
within the tolerances stated on each. A scenario's variant fields (``advantage_variant``,
``normalization``, ``nstep_variant``, ``update_variant``, ``shard_variant``) make the checks of
those clauses verify the variant instead (:mod:`xpspec.conformance.variants`); RLlib's split shards
are compared with :func:`xpspec.refimpl.learner.shard_episodes` run as that variant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.scenario import LearnerScenario, Scenario
from xpspec.protocol.trace import Advantages, CallerEpisode, Trace, UpdatePlan
from xpspec.refimpl.learner import shard_episodes

__all__ = [
    "ATOL",
    "NORM_ATOL",
    "LearnerEpisode",
    "check_bootstrap_masked",
    "check_episode_unmodified",
    "check_gae",
    "check_nstep",
    "check_shards",
    "check_stats",
    "check_truncation",
    "check_update_count",
    "learner_episodes",
]

ATOL = 1e-5
"""Tolerance of advantages, value targets and n-step targets: ``ATOL * max(1, |expected|)``."""

NORM_ATOL = 1e-3
"""Tolerance of normalised advantages (admits an ``eps`` added to the standard deviation)."""

_EPS = 1e-4  # the spec's lower bound on the standard deviation: (A - mean) / max(eps, std)


@dataclass(frozen=True)
class LearnerEpisode:
    """Episode ``episode`` of env ``env`` as a learner scenario sees it: ``length``
    transitions, ending ``terminated``, ``truncated`` or ``in-progress``."""

    env: int
    episode: int
    length: int
    ending: Literal["terminated", "truncated", "in-progress"]


def learner_episodes(scenario: LearnerScenario) -> list[LearnerEpisode]:
    """The episodes of the first ``steps`` time steps of every env, env-major, oldest first;
    a trailing chunk without a transition is left out."""
    out = []
    for env in range(scenario.env.num_envs):
        remaining, k = scenario.steps, 0
        while remaining > 0:
            plan = scenario.env.episode(scenario.seed, env, k)
            if remaining >= plan.length + 1:
                out.append(LearnerEpisode(env, k, plan.length, plan.ending))
                remaining -= plan.length + 1
            else:
                if remaining >= 2:
                    out.append(LearnerEpisode(env, k, remaining - 1, "in-progress"))
                remaining = 0
            k += 1
    return out


def _sc(scenario: Scenario) -> LearnerScenario:
    assert isinstance(scenario, LearnerScenario)
    return scenario


def _reward(sc: LearnerScenario, ep: LearnerEpisode, t: int) -> Fraction:
    """The reward into row ``t`` (the spec page's ``r_{t-1}``)."""
    return Fraction(sc.env.reward(sc.seed, ep.env, ep.episode, t))


def _close(actual: float, expected: Fraction | float, atol: float = ATOL) -> bool:
    return abs(actual - float(expected)) <= atol * max(1.0, abs(float(expected)))


def _advantage_events(sc: LearnerScenario, trace: Trace) -> dict[tuple[int, int], Advantages]:
    """The Advantages event of each expected episode; fails on a missing, duplicate or
    unexpected episode (a one-row event for a chunk without a transition is tolerated)."""
    expected = {(ep.env, ep.episode) for ep in learner_episodes(sc)}
    found: dict[tuple[int, int], Advantages] = {}
    for e in trace.of_kind("advantages"):
        key = (e.env, e.episode)
        if key in found:
            raise CheckFailure(f"Advantages events for episode {key}", 1, 2)
        if key not in expected and len(e.t) > 1:
            raise CheckFailure(
                f"Advantages event for episode {key}",
                "only the episodes of the scenario's steps",
                key,
            )
        found[key] = e
    missing = sorted(expected - set(found))
    if missing:
        raise CheckFailure("episodes of the scenario without an Advantages event", [], missing[:5])
    return found


def _rows(event: Advantages, length: int) -> dict[int, int]:
    """Column index of each row ``t`` of an Advantages event; fails unless rows are
    ``0..L``."""
    if tuple(event.t) != tuple(range(length + 1)):
        raise CheckFailure(
            f"rows of episode {(event.env, event.episode)} ({length} transitions)",
            f"t = 0..{length} (the bootstrap row last)",
            event.t,
        )
    return {t: i for i, t in enumerate(event.t)}


# -- learner.gae ----------------------------------------------------------------------------
def check_gae(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.gae: advantages and value targets of every training row equal refimpl's
    (per-episode GAE recursion) within ``ATOL``."""
    sc = _sc(scenario)
    got, want = _advantage_events(sc, trace), _advantage_events(sc, ctx.reference(sc))
    for ep in learner_episodes(sc):
        a, b = got[(ep.env, ep.episode)], want[(ep.env, ep.episode)]
        rows_a, rows_b = _rows(a, ep.length), _rows(b, ep.length)
        for t in range(ep.length):
            for name in ("advantage", "value_target"):
                x, y = getattr(a, name)[rows_a[t]], getattr(b, name)[rows_b[t]]
                if not _close(x, y):
                    raise CheckFailure(
                        f"{name} of row {t} of {ep.ending} episode {(ep.env, ep.episode)}", y, x
                    )


# -- learner.truncation-bootstraps ----------------------------------------------------------
def check_truncation(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.truncation-bootstraps: the last transition's value target is
    ``r_{L-1} + gamma * V_L`` for a truncated or in-progress episode and ``r_{L-1}`` for a terminated
    one (it does not depend on lambda)."""
    sc = _sc(scenario)
    events = _advantage_events(sc, trace)
    for ep in learner_episodes(sc):
        event = events[(ep.env, ep.episode)]
        last = ep.length - 1
        rows = _rows(event, ep.length)
        bootstrap = 0 if ep.ending == "terminated" else sc.gamma * sc.value_scale * ep.length
        want = _reward(sc, ep, ep.length) + bootstrap
        got = event.value_target[rows[last]]
        if not _close(got, want):
            how = "no bootstrap" if ep.ending == "terminated" else "bootstrap from V(final obs)"
            raise CheckFailure(
                f"value target of the last transition (t={last}) of {ep.ending} episode "
                f"{(ep.env, ep.episode)} ({how})",
                float(want),
                got,
            )


# -- learner.bootstrap-timestep-masked ------------------------------------------------------
def check_bootstrap_masked(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.bootstrap-timestep-masked: each episode's rows are ``t = 0..L``; the loss mask is
    1 on rows ``0..L-1`` and 0 on the bootstrap row ``L``."""
    sc = _sc(scenario)
    events = _advantage_events(sc, trace)
    for ep in learner_episodes(sc):
        event = events[(ep.env, ep.episode)]
        rows = _rows(event, ep.length)
        mask = [event.loss_mask[rows[t]] for t in range(ep.length + 1)]
        want = [1] * ep.length + [0]
        if mask != want:
            raise CheckFailure(f"loss mask of episode {(ep.env, ep.episode)}", want, mask)


# -- learner.episode-unmodified -------------------------------------------------------------
def check_episode_unmodified(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.episode-unmodified: for every episode the learner was given, the caller's object
    holds the same ``(transitions, terminated, truncated)`` after the call as before it, and
    held the scenario episode's transitions before it (so the observable is tied to the data).

    Variant ``episode_handling="rllib-2.60"``: after the call the episode holds one transition
    more and an episode that is not done is flagged truncated."""
    sc = _sc(scenario)
    handed: dict[tuple[int, int], CallerEpisode] = {}
    for event in trace.of_kind("caller_episode"):
        key = (event.env, event.episode)
        if key in handed:
            raise CheckFailure(f"caller_episode events of episode {key}", 1, 2)
        handed[key] = event
    for ep in learner_episodes(sc):
        key = (ep.env, ep.episode)
        if key not in handed:
            raise CheckFailure(
                f"caller_episode events of episode {key} (one per episode handed in)", 1, 0
            )
        event = handed[key]
        held = tuple(event.before)
        if held[0] != ep.length:  # the observable is tied to the data the learner was given
            raise CheckFailure(
                f"transitions of episode {key} as its caller held it before the learner call",
                ep.length,
                held[0],
            )
        want = held
        if sc.episode_handling == "rllib-2.60":
            want = (ep.length + 1, held[1], int(held[2] or not held[1]))
        if tuple(event.after) != want:
            raise CheckFailure(
                f"episode {key} as its caller holds it after the learner call "
                f"(transitions, terminated, truncated; before: {held})",
                want,
                tuple(event.after),
            )


# -- learner.stats-exclude-bootstrap --------------------------------------------------------
def check_stats(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.stats-exclude-bootstrap: normalised advantages are the trace's own advantages
    standardised with the mean and population std of the training rows of the whole batch
    (bootstrap rows left out), within ``NORM_ATOL``; bootstrap rows get 0.

    Variants: ``advantage_variant="rllib-2.60"`` standardises over every row, bootstrap rows
    included (their normalised value is checked like the others'); ``normalization="sample"``
    uses the Bessel-corrected std (``n - 1``; 0 with a single row)."""
    sc = _sc(scenario)
    every_row = sc.advantage_variant == "rllib-2.60"
    events = _advantage_events(sc, trace)
    used: list[tuple[LearnerEpisode, int, Advantages, int]] = []
    for ep in learner_episodes(sc):
        event = events[(ep.env, ep.episode)]
        rows = _rows(event, ep.length)
        last = ep.length + 1 if every_row else ep.length
        used.extend((ep, t, event, rows[t]) for t in range(last))
        boot = event.normalized[rows[ep.length]]
        if not every_row and abs(boot) > NORM_ATOL:
            raise CheckFailure(
                f"normalised advantage of the bootstrap row of episode {(ep.env, ep.episode)}",
                0.0,
                boot,
            )
    if not used:
        return
    values = [event.advantage[i] for _, _, event, i in used]
    mean = math.fsum(values) / len(values)
    correction = 1 if sc.normalization == "sample" else 0
    spread = math.fsum((v - mean) ** 2 for v in values)
    std = math.sqrt(spread / (len(values) - correction)) if len(values) > correction else 0.0
    scale = max(_EPS, std)
    which = "every row" if every_row else "training rows only"
    for (ep, t, event, i), value in zip(used, values):
        want = (value - mean) / scale
        if abs(event.normalized[i] - want) > NORM_ATOL:
            raise CheckFailure(
                f"normalised advantage of row {t} of episode {(ep.env, ep.episode)} "
                f"({which}: mean {mean:.6g}, {sc.normalization} std {std:.6g})",
                want,
                event.normalized[i],
            )


# -- learner.nstep-episode-end --------------------------------------------------------------
def check_nstep(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.nstep-episode-end: one target per transition start; with ``k = min(n, L - t)``
    (``L`` the episode's LAST, or its newest observed step if in progress),
    ``G = sum_{i<k} gamma^i r_{t+i} + gamma^k D V_{t+k}``, ``D = 0`` iff ``t + k`` is the LAST
    of a terminated episode; ``steps == k`` exactly, targets within ``ATOL``.

    Variant ``nstep_variant="rllib-2.60"``: the bootstrap factor is ``gamma^n`` for the
    requested ``n`` whatever ``k`` is, and ``D = 0`` only when ``k = n`` and ``t + k`` is the
    LAST of a terminated episode."""
    sc = _sc(scenario)
    got: dict[tuple[int, int, int], tuple[float, int]] = {}
    for e in trace.of_kind("nstep"):
        for item, target, steps in zip(zip(e.env, e.episode, e.t), e.target, e.steps):
            if item in got:
                raise CheckFailure(f"n-step targets for the transition at {item}", 1, 2)
            got[item] = (target, steps)
    want: dict[tuple[int, int, int], tuple[Fraction, int]] = {}
    gamma, n = sc.gamma, sc.nstep
    requested = sc.nstep_variant == "rllib-2.60"
    for ep in learner_episodes(sc):
        for t in range(ep.length):
            k = min(n, ep.length - t)
            ret = sum((gamma**i * _reward(sc, ep, t + i + 1) for i in range(k)), start=Fraction(0))
            at_terminal = ep.ending == "terminated" and t + k == ep.length
            if requested:
                if not (at_terminal and k == n):
                    ret += gamma**n * sc.value_scale * (t + k)
            elif not at_terminal:
                ret += gamma**k * sc.value_scale * (t + k)
            want[(ep.env, ep.episode, t)] = (ret, k)
    if set(got) != set(want):
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        raise CheckFailure(
            "transitions with an n-step target (missing, unexpected)",
            ([], []),
            (missing[:5], extra[:5]),
        )
    factor = f"gamma^{n}" if requested else "gamma^k"
    for item, (expected, k) in want.items():
        got_target, got_k = got[item]
        if got_k != k:
            raise CheckFailure(f"rewards summed for the transition at {item} (n={n})", k, got_k)
        if not _close(got_target, expected):
            raise CheckFailure(
                f"{n}-step target of the transition at {item} ({k} steps, bootstrap {factor})",
                float(expected),
                got_target,
            )


# -- learner.update-count -------------------------------------------------------------------
def _alf_size(rows: int, size: int) -> int:
    """ALF's resized mini-batch: ``ceil(N / floor(N / M))`` when ``N mod M > 0`` and
    ``N >= M`` (snapshot ``23aca492``, ``Algorithm._train_experience``)."""
    if rows % size and rows >= size:
        return -(-rows // (rows // size))
    return size


def _plan(trace: Trace) -> UpdatePlan:
    plans = list(trace.of_kind("update_plan"))
    if len(plans) != 1:
        raise CheckFailure("UpdatePlan events", 1, len(plans))
    return plans[0]


def check_update_count(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.update-count: ``num_epochs * ceil(N / minibatch_size)`` updates over the ``N``
    training rows (bootstrap rows are not items); each epoch is ``ceil(N / M)`` consecutive
    minibatches of ``M`` rows but the last, together using every row ``0..N-1`` once.

    Variants of ``update_variant``: ``"alf"`` is the same with ``M`` resized to
    ``ceil(N / floor(N / M))`` when ``N mod M > 0`` and ``N >= M``; ``"rllib-2.60"`` is
    :func:`_check_cyclic_updates`."""
    sc = _sc(scenario)
    if sc.update_variant == "rllib-2.60":
        _check_cyclic_updates(sc, trace)
        return
    plan = _plan(trace)
    rows = sum(ep.length for ep in learner_episodes(sc))
    size, epochs = sc.minibatch_size, sc.num_epochs
    if sc.update_variant == "alf":
        size = _alf_size(rows, size)
    per_epoch = math.ceil(rows / size)
    want = epochs * per_epoch
    resized = (
        f" (resized by ALF's rule from {sc.minibatch_size})" if size != sc.minibatch_size else ""
    )
    if plan.num_updates != want:
        raise CheckFailure(
            f"gradient updates for {rows} rows, {epochs} epochs, minibatches of {size}{resized}",
            want,
            plan.num_updates,
        )
    if len(plan.minibatch_rows) != want:
        raise CheckFailure("minibatches listed in the update plan", want, len(plan.minibatch_rows))
    sizes = [size] * (per_epoch - 1) + [rows - size * (per_epoch - 1)] if per_epoch else []
    for epoch in range(epochs):
        group = plan.minibatch_rows[epoch * per_epoch : (epoch + 1) * per_epoch]
        got_sizes = [len(mb) for mb in group]
        if got_sizes != sizes:
            raise CheckFailure(f"minibatch sizes in epoch {epoch}", sizes, got_sizes)
        used = sorted(r for mb in group for r in mb)
        if used != list(range(rows)):
            raise CheckFailure(f"rows used in epoch {epoch}", f"each of 0..{rows - 1} once", used)


def _check_cyclic_updates(sc: LearnerScenario, trace: Trace) -> None:
    """Variant ``rllib-cyclic`` of learner.update-count: over ``N' = N + #episodes`` rows
    (bootstrap rows counted), ``ceil(E * N' / M)`` updates of exactly ``M`` rows; laid end to
    end, the updates' rows are blocks of ``N'`` consecutive rows each a permutation of
    ``0..N'-1`` (a cursor cycling over the rows, re-ordered at each wrap), the trailing
    partial block without a repeated row."""
    plan = _plan(trace)
    episodes = learner_episodes(sc)
    rows = sum(ep.length for ep in episodes) + len(episodes)
    size, epochs = sc.minibatch_size, sc.num_epochs
    want = math.ceil(epochs * rows / size)
    if plan.num_updates != want:
        raise CheckFailure(
            f"gradient updates for {rows} rows (bootstrap rows counted), {epochs} epochs, "
            f"minibatches of exactly {size} taken cyclically",
            want,
            plan.num_updates,
        )
    if len(plan.minibatch_rows) != want:
        raise CheckFailure("minibatches listed in the update plan", want, len(plan.minibatch_rows))
    sizes = [len(mb) for mb in plan.minibatch_rows]
    if any(n != size for n in sizes):
        raise CheckFailure("minibatch sizes (every one exactly M)", [size] * want, sizes)
    stream = [r for mb in plan.minibatch_rows for r in mb]
    for start in range(0, len(stream), rows):
        block = stream[start : start + rows]
        ordered = sorted(block)
        full = len(block) == rows
        if (full and ordered != list(range(rows))) or (
            not full and (len(set(block)) != len(block) or not set(block) <= set(range(rows)))
        ):
            raise CheckFailure(
                f"rows {start}..{start + len(block) - 1} of the cyclic stream of updates",
                f"each of 0..{rows - 1} once" if full else f"distinct rows of 0..{rows - 1}",
                block,
            )


# -- learner.shard-episodes -----------------------------------------------------------------
def _check_tiling(
    lengths: dict[tuple[int, int], int], by_learner: dict[int, list[tuple[int, ...]]]
) -> None:
    """Split episodes: the pieces of each episode, over all learners, cover its rows
    ``0..L-1`` once each (contiguous, no overlap, nothing left out). Stated here, not taken
    from :func:`xpspec.refimpl.learner.shard_episodes`, so it holds that function too."""
    spans: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for learner, pieces in by_learner.items():
        for env, episode, start, stop in pieces:
            spans.setdefault((env, episode), []).append((start, stop, learner))
    for key in spans:
        if key not in lengths:
            raise CheckFailure(f"sharded episode {key}", "an episode of the scenario", key)
    for key, length in lengths.items():
        found = sorted(spans.get(key, []))
        bounds = [0, *(b for start, stop, _ in found for b in (start, stop)), length]
        if length and any(bounds[k] != bounds[k + 1] for k in range(0, len(bounds), 2)):
            raise CheckFailure(
                f"pieces (start, stop, learner) of episode {key} of {length} rows (each row "
                "to exactly one learner)",
                f"pieces that tile [0, {length})",
                found,
            )


def _pieces_by_learner(sc: LearnerScenario, trace: Trace) -> dict[int, list[tuple[int, ...]]]:
    """Non-empty pieces ``(env, episode, start, stop)`` of each learner; fails on a learner id
    out of range or repeated."""
    by_learner: dict[int, list[tuple[int, ...]]] = {}
    for e in trace.of_kind("shard"):
        if not 0 <= e.learner < sc.num_learners or e.learner in by_learner:
            raise CheckFailure(
                "Shard event learner ids", f"distinct, in [0, {sc.num_learners})", e.learner
            )
        by_learner[e.learner] = [
            piece for piece in zip(e.env, e.episode, e.start, e.stop) if piece[3] > piece[2]
        ]
    return by_learner


def check_shards(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """learner.shard-episodes: each episode goes whole (rows ``0..L-1``) to exactly one of the
    ``num_learners`` learners, namely the one :func:`xpspec.refimpl.learner.shard_episodes` (longest
    first to the least-loaded learner, lowest index on ties) gives it over the episodes'
    lengths in canonical order; the load bound (max - min <= longest episode) follows and is
    reported first, as it names the imbalance.

    Variant ``shard_variant="rllib-2.60"``: the pieces of each episode tile its rows (each row
    to one learner), and each learner's pieces are exactly those of
    :func:`xpspec.refimpl.learner.shard_episodes` with that variant over the episodes' lengths in
    canonical order (compared as sets). RLlib's greedy placement has no closed form, so that
    function is the expectation; the suite pins it by the digests of its model scenarios
    (check ``pinned-model``, :mod:`xpspec.conformance.vectors.digests`)."""
    sc = _sc(scenario)
    if sc.shard_variant == "rllib-2.60":
        _check_split_shards(sc, trace)
        return
    episodes = {(ep.env, ep.episode): ep.length for ep in learner_episodes(sc)}
    loads = [0] * sc.num_learners
    owner: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for learner, pieces in _pieces_by_learner(sc, trace).items():
        for env, episode, start, stop in pieces:
            owner.setdefault((env, episode), []).append((learner, start, stop))
            loads[learner] += stop - start
    for key, found in owner.items():
        if key not in episodes:
            raise CheckFailure(f"sharded episode {key}", "an episode of the scenario", key)
        if len(found) > 1 or found[0][1:] != (0, episodes[key]):
            raise CheckFailure(
                f"pieces (learner, start, stop) of episode {key} of {episodes[key]} rows",
                f"one piece (learner, 0, {episodes[key]})",
                found,
            )
    missing = sorted(set(episodes) - set(owner))
    if missing:
        raise CheckFailure("episodes given to no learner", [], missing[:5])
    longest = max(episodes.values(), default=0)
    if max(loads) - min(loads) > longest:
        raise CheckFailure(
            f"learner loads (timesteps) differ by at most the longest episode ({longest})",
            f"max - min <= {longest}",
            loads,
        )
    canonical = learner_episodes(sc)
    expected = shard_episodes([ep.length for ep in canonical], sc.num_learners)
    for learner, group in enumerate(expected):
        want = sorted((canonical[p.episode].env, canonical[p.episode].episode) for p in group)
        got = sorted(key for key, found in owner.items() if found[0][0] == learner)
        if got != want:
            raise CheckFailure(
                f"episodes (env, episode) of learner {learner}, loads {loads} (longest first to "
                "the least-loaded learner, lowest index on ties)",
                want,
                got,
            )


def _check_split_shards(sc: LearnerScenario, trace: Trace) -> None:
    episodes = learner_episodes(sc)
    got = _pieces_by_learner(sc, trace)
    _check_tiling({(ep.env, ep.episode): ep.length for ep in episodes}, got)
    expected = shard_episodes([ep.length for ep in episodes], sc.num_learners, variant="rllib-2.60")
    for learner, group in enumerate(expected):
        want = sorted(
            (episodes[p.episode].env, episodes[p.episode].episode, p.start, p.stop)
            for p in group
            if p.stop > p.start
        )
        found = sorted(got.get(learner, []))
        if found != want:
            raise CheckFailure(
                f"pieces (env, episode, start, stop) of learner {learner} (targets "
                f"remaining // (S - s), episodes split to meet them)",
                want,
                found,
            )
