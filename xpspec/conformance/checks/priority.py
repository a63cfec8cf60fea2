"""Checks of prioritized replay (capability ``priorities``, clauses ``priority.*``).

A framework's draws come from its own random generator, so its trace cannot be compared with
refimpl's draw by draw. What can be: given the windows the framework drew, the spec fixes
every priority it must hold afterwards. The mass checks (``priority-new-at-max``,
``priority-update-sampled``, ``priority-eviction``) replay the framework's trace
through refimpl's model (:class:`~xpspec.refimpl.priority.PriorityModel`, fed with the
trace's own stores and draws) and compares the masses the framework reported from its sum
tree with the model's. The other checks judge what the framework does with the masses it
holds: the probabilities and importance weights it computed for the windows it drew
(exact, up to float32 rounding) and the draws themselves (statistical). A wrong priority is
so charged to the priority clause alone, not to the law computed from it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.scenario import ReplayScenario, Scenario
from xpspec.protocol.trace import Priorities, Prioritized, Sampled, Trace
from xpspec.refimpl.priority import Item, PriorityModel, StoredItems

__all__ = [
    "REL_TOLERANCE",
    "batch_dispersion",
    "check_eviction",
    "check_new_at_max",
    "check_priority_law",
    "check_priority_probabilities",
    "check_priority_weights",
    "check_update_sampled",
]

REL_TOLERANCE = 1e-4
"""Relative tolerance of a reported mass, probability or weight: float32 sum trees (Flashbax
0.1.3 under JAX's default precision) round ``p^alpha`` to about 1e-7 relative, and a
framework's own priority offset (Tianshou 2.0.1 adds float32 eps, 1.2e-7) moves it by less."""


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOLERANCE * max(abs(a), abs(b)) + 1e-9


@dataclass(frozen=True)
class _Draw:
    """One draw of the trace: what the framework reported and drew, and what the model (fed
    with the trace's stores and earlier draws) expects of it."""

    draw: int
    reported: Priorities | None
    held: dict[Item, float]  # the masses the framework reported before the draw
    expected: dict[Item, float]  # the model's mass of every valid window
    law: dict[Item, float]  # each held window's probability, mass / total held mass
    sampled: Sampled
    computed: Prioritized | None
    batch: list[Item]
    weights: list[float]  # the weights the held masses give the batch (empty: none can)
    new: frozenset[Item]  # windows that became valid since the previous draw
    updated: frozenset[Item]  # windows the previous draw updated


def _weights(held: dict[Item, float], batch: list[Item], spec: PrioritySpec) -> list[float]:
    """``(m_w / m_min)^(-beta)`` of each window of ``batch``, ``m_min`` the smallest held mass
    (``buffer-max``) or the batch's smallest (``batch-max``); empty when a drawn window holds
    no positive mass (the checks fail it by name)."""
    if not batch or any(held.get(s, 0.0) <= 0 for s in batch):
        return []
    pool = batch if spec.weights == "batch-max" else [s for s, m in held.items() if m > 0]
    smallest = min(held[s] for s in pool)
    return [(held[s] / smallest) ** -float(spec.beta) for s in batch]


def _draws(scenario: Scenario, trace: Trace) -> Iterator[_Draw]:
    """The trace's draws. A draw is its :class:`Sampled` event, the :class:`Priorities`
    event before it and the :class:`Prioritized` event after it. The law and the weights are
    computed from the masses the framework reported (so ``priority.sampling-law`` and
    ``priority.importance-weights`` judge what it does with the priorities it holds); the
    model's masses judge the priorities themselves."""
    assert isinstance(scenario, ReplayScenario) and scenario.priority is not None
    spec, length = scenario.priority, scenario.sampling.window_length
    forbid = scenario.sampling.boundary == "forbid"
    stored = StoredItems(scenario.env.num_envs, scenario.capacity)
    model = PriorityModel(spec)
    reported: Priorities | None = None
    updated: frozenset[Item] = frozenset()
    open_draw: tuple[Sampled, dict[Item, float], frozenset[Item]] | None = None

    def close(computed: Prioritized | None) -> _Draw:
        nonlocal open_draw, reported, updated
        assert open_draw is not None
        sampled, expected, new = open_draw
        batch = [w[0] for w in sampled.windows if w and w[0] is not None]
        held: dict[Item, float] = {}
        if reported is not None:
            columns = (reported.env, reported.episode, reported.t, reported.mass)
            held = {(e, k, t): m for e, k, t, m in zip(*columns)}
        total = sum(m for m in held.values() if m > 0)
        law = {s: m / total for s, m in held.items() if m > 0} if total > 0 else {}
        out = _Draw(
            sampled.draw,
            reported,
            held,
            expected,
            law,
            sampled,
            computed,
            batch,
            _weights(held, batch, spec),
            new,
            updated,
        )
        model.update(batch, sampled.draw)
        open_draw, reported, updated = None, None, frozenset(batch)
        return out

    for event in trace.events:
        if event.kind == "prioritized":
            if open_draw is not None:
                yield close(event)
            continue
        if open_draw is not None:
            yield close(None)
        if event.kind == "store":
            stored.add(event)
        elif event.kind == "priorities":
            reported = event
        elif event.kind == "sampled":
            before = set(model.priority)
            model.sync(stored.valid_starts(length, forbid))
            expected = {s: model.mass(s) for s in model.priority}
            open_draw = (event, expected, frozenset(set(model.priority) - before))
    if open_draw is not None:
        yield close(None)


def _held(d: _Draw) -> dict[Item, float]:
    """The masses reported before draw ``d``; a draw without them fails."""
    if d.reported is None:
        raise CheckFailure(
            f"priorities reported before draw {d.draw}", "an event", None, iteration=d.draw
        )
    return d.held


def _name(item: Item) -> str:
    return f"(env {item[0]}, episode {item[1]}, t {item[2]})"


def _mass_failures(scenario: Scenario, trace: Trace) -> Iterator[CheckFailure]:
    """Every violation of the priorities a framework reported before its draws, each charged
    to its clause: a window holding a mass that is not valid, or a valid one holding none
    that is not new (``priority.eviction``); a window sampled by the last draw whose mass is
    not the spec's ``(|td| + eps)^alpha``, or one it did not sample whose mass changed
    (``priority.update-sampled``, judged against the framework's own previous report, so a
    wrong mass is blamed once, where it arose); a window that became valid since the last draw
    whose mass is not the largest priority ever assigned to the power ``alpha``, or that holds
    none (``priority.new-at-max``)."""
    seen = 0
    before: dict[Item, float] = {}
    for d in _draws(scenario, trace):
        seen += 1
        got = _held(d)
        for start in sorted(set(got) - set(d.expected)):
            yield CheckFailure(
                f"window {_name(start)} holds a mass before draw {d.draw} though it is not "
                "valid (evicted, or not yet a whole window)",
                "no mass",
                got[start],
                clause="priority.eviction",
                iteration=d.draw,
            )
        for start in sorted(set(d.expected) - set(got)):
            new = start in d.new
            yield CheckFailure(
                f"mass of window {_name(start)} before draw {d.draw}, valid "
                + ("since the last draw" if new else "and holding a mass before it"),
                d.expected[start],
                "none",
                clause="priority.new-at-max" if new else "priority.eviction",
                iteration=d.draw,
            )
        for start in sorted(set(d.expected) & set(got)):
            if start in d.new:
                if not _close(got[start], d.expected[start]):
                    yield CheckFailure(
                        f"mass p^alpha of window {_name(start)}, valid since the last draw, "
                        f"before draw {d.draw} (the largest priority assigned so far)",
                        d.expected[start],
                        got[start],
                        clause="priority.new-at-max",
                        iteration=d.draw,
                    )
            elif start in d.updated:
                if not _close(got[start], d.expected[start]):
                    yield CheckFailure(
                        f"mass p^alpha of window {_name(start)} before draw {d.draw}, after the "
                        "last draw sampled it",
                        d.expected[start],
                        got[start],
                        clause="priority.update-sampled",
                        iteration=d.draw,
                    )
            elif start in before and not _close(got[start], before[start]):
                yield CheckFailure(
                    f"mass p^alpha of window {_name(start)} before draw {d.draw}, which the "
                    "last draw did not sample (as reported before it)",
                    before[start],
                    got[start],
                    clause="priority.update-sampled",
                    iteration=d.draw,
                )
        before = dict(got)
    if seen != getattr(scenario, "draws", seen):
        yield CheckFailure("sampled batches", getattr(scenario, "draws", seen), seen)


def _first_mass_failure(scenario: Scenario, trace: Trace, clause: str) -> None:
    for failure in _mass_failures(scenario, trace):
        if failure.clause in (clause, None):
            raise failure


def check_new_at_max(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.new-at-max: before every draw, each window that became valid since the last
    one holds the mass ``q^alpha``, ``q`` the largest priority assigned to any window so far
    (1 before any), as the framework's own store reports it (:func:`_mass_failures`)."""
    _first_mass_failure(scenario, trace, "priority.new-at-max")


def check_update_sampled(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.update-sampled: before every draw, each window the last draw sampled holds
    the mass ``(|td| + eps)^alpha`` of the scenario's TD error, and every other window the
    mass the framework reported for it before the last draw (:func:`_mass_failures`)."""
    _first_mass_failure(scenario, trace, "priority.update-sampled")


def check_eviction(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.eviction: before every draw, the windows holding a mass in the framework's
    store are exactly the valid ones (:func:`_mass_failures`)."""
    _first_mass_failure(scenario, trace, "priority.eviction")


def _computed(d: _Draw) -> Prioritized:
    if d.computed is None:
        raise CheckFailure(
            f"probabilities reported for draw {d.draw}", "an event", None, iteration=d.draw
        )
    if len(d.computed.probability) != len(d.batch):
        raise CheckFailure(
            f"probabilities reported for the windows of draw {d.draw}",
            len(d.batch),
            len(d.computed.probability),
            iteration=d.draw,
        )
    return d.computed


def _drawable(d: _Draw, start: Item) -> None:
    """A window drawn in ``d`` must hold a positive mass the framework reported."""
    if start not in d.law:
        raise CheckFailure(
            f"window {_name(start)} drawn in draw {d.draw}",
            "a window holding a positive reported mass",
            "none reported",
            iteration=d.draw,
        )


def check_priority_probabilities(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.sampling-law (what the framework computes): the probability it reports for
    each window it drew is that window's mass over the total of the masses it reported
    before the draw (whether those masses are the spec's is the mass checks' question)."""
    for d in _draws(scenario, trace):
        _held(d)
        computed = _computed(d)
        for start, p in zip(d.batch, computed.probability):
            _drawable(d, start)
            if not _close(p, d.law[start]):
                raise CheckFailure(
                    f"probability of window {_name(start)} in draw {d.draw}",
                    d.law[start],
                    p,
                    iteration=d.draw,
                )


def check_priority_weights(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.importance-weights: the weight the framework returns for each window it drew
    is ``(N·P(w))^(-beta)`` over its maximum (over the windows holding a mass, or over the
    batch under the variant ``batch-max``), ``P`` from the masses it reported before the
    draw."""
    assert isinstance(scenario, ReplayScenario) and scenario.priority is not None
    for d in _draws(scenario, trace):
        _held(d)
        computed = _computed(d)
        if len(computed.weight) != len(d.batch):
            raise CheckFailure(
                f"importance weights reported for the windows of draw {d.draw}",
                len(d.batch),
                len(computed.weight),
                iteration=d.draw,
            )
        for start in d.batch:
            _drawable(d, start)
        for start, want, got in zip(d.batch, d.weights, computed.weight):
            if not _close(got, want):
                raise CheckFailure(
                    f"importance weight of window {_name(start)} in draw {d.draw} "
                    f"(beta {scenario.priority.beta}, normalised by the "
                    f"{scenario.priority.weights} weight)",
                    want,
                    got,
                    iteration=d.draw,
                )


def batch_dispersion(batches: Sequence[tuple[Sequence[Item], dict[Item, float]]]) -> float:
    """The z-score of the within-batch dispersion of prioritized draws (clause
    ``priority.sampling-law``, joint law): for each batch of ``b >= 2`` windows drawn by a law
    ``P`` over ``W >= 2`` windows, Pearson's ``X² = Σ_w (c_w − b·P_w)² / (b·P_w)``. For
    independent draws the counts are Multinomial(b, P), so ``X²`` has mean ``W − 1`` and
    variance ``2(W − 1) + (Σ_w 1/P_w − W² − 2W + 2) / b`` exactly; the sum over batches,
    scaled to a chi-square with those two moments, becomes a standard normal z by the
    Wilson–Hilferty cube root (as
    :func:`xpspec.conformance.checks.replay.within_batch_dispersion` does for the uniform
    law). Far below 0: a batch is spread more evenly than independent draws spread it
    (stratified sampling, draws without replacement). 0.0 when no batch qualifies."""
    total = mean = variance = 0.0
    for batch, law in batches:
        b, w = len(batch), len(law)
        if b < 2 or w < 2:
            continue
        counts = Counter(batch)
        total += sum(c * c / (b * law[s]) for s, c in counts.items()) - b
        mean += w - 1
        variance += 2 * (w - 1) + (sum(1 / p for p in law.values()) - w * w - 2 * w + 2) / b
    if mean == 0 or variance <= 0:
        return 0.0
    nu = 2 * mean * mean / variance
    return ((max(total, 0.0) / mean) ** (1 / 3) - 1 + 2 / (9 * nu)) / math.sqrt(2 / (9 * nu))


def _level(d: _Draw, start: Item) -> float:
    """The priority level of a held window: its reported mass, to 6 significant digits (a
    float32 tree stores one level as one value)."""
    return float(f"{d.held[start]:.6g}")


def check_priority_law(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """priority.sampling-law (the draws): windows are drawn as often as the model's law makes
    it likely. The law of draw ``d`` depends on the earlier draws, and is fixed by them; so a
    count of draws summed over ``d`` has mean ``Σ_d b·P_d`` and, as a sum of martingale
    differences, variance ``Σ_d b·P_d(1 − P_d)``; ``P_d`` is computed from the masses the
    framework reported before draw ``d``. Two families of counts are tested, each
    within 5 standard deviations (false alarm about 6e-7 per count and run): each window's
    count, and the count of draws that picked a window of mass ``q``, for each mass level
    ``q`` (a window's level changes from draw to draw as it is updated, so the first
    family alone averages a wrong exponent away). A drawn window that was not valid fails.
    Unless the scenario declares ``draws="stratified"`` (a variant), the draws of each batch
    must also be as dispersed as independent draws make them: :func:`batch_dispersion` within
    5 of 0 (the same false-alarm rate). Power at the catalogue's size, measured by simulation
    (``tests/conformance/test_priority_checks.py``, 20 seeds): on ``priority-law`` (16
    windows, 60 draws of 64) a sampler that ignores the priorities (uniform; its lightest
    level drawn about 17 standard deviations too often), one that samples by ``p`` instead of
    ``p^alpha`` (about 9) and a stratified sampler (z about -36) are caught in every run, and
    refimpl in none."""
    assert isinstance(scenario, ReplayScenario)
    families: dict[str, tuple[defaultdict[object, float], defaultdict[object, float]]] = {
        "window": (defaultdict(float), defaultdict(float)),
        "level": (defaultdict(float), defaultdict(float)),
    }
    counts: Counter[tuple[str, object]] = Counter()
    batches: list[tuple[Sequence[Item], dict[Item, float]]] = []
    for d in _draws(scenario, trace):
        b = len(d.batch)
        _held(d)
        batches.append((d.batch, d.law))
        if d.law and b != scenario.batch_size:
            raise CheckFailure(
                f"windows in draw {d.draw} while {len(d.law)} windows hold a mass",
                scenario.batch_size,
                b,
                iteration=d.draw,
            )
        for start in d.batch:
            _drawable(d, start)
            counts["window", start] += 1
            counts["level", _level(d, start)] += 1
        levels: defaultdict[object, float] = defaultdict(float)
        for start, p in d.law.items():
            levels[_level(d, start)] += p
        for family, probabilities in (("window", d.law), ("level", levels)):
            mean, variance = families[family]
            for key, p in probabilities.items():
                mean[key] += b * p
                variance[key] += b * p * (1 - p)
    total = sum(counts.values()) // 2
    for family, (mean, variance) in families.items():
        for key in sorted(mean, key=str):
            sd = math.sqrt(max(variance[key], 0.0))  # p may round a hair above 1
            if abs(counts[family, key] - mean[key]) > 5 * sd + 1e-6:
                what = (
                    f"draws of window {_name(key)}"  # type: ignore[arg-type]
                    if family == "window"
                    else f"draws of a window of mass {key}"
                )
                raise CheckFailure(
                    f"{what} over {total} windows drawn (the law of the masses it reported, given the "
                    "earlier draws)",
                    f"{mean[key]:.1f} ± {5 * sd:.1f}",
                    counts[family, key],
                )
    assert scenario.priority is not None
    if scenario.priority.draws == "stratified":
        return  # the joint test is the independent draws' law
    z = batch_dispersion(batches)
    if abs(z) > 5:
        raise CheckFailure(
            f"within-batch dispersion z of {len(batches)} prioritized batches (below: the "
            "windows of a batch spread more evenly than independent draws spread them; above: "
            "less evenly)",
            "|z| <= 5",
            round(z, 2),
        )
