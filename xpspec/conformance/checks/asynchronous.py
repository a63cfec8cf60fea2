"""Checks of asynchronous actors and policy lag (``spec/async.md``, clauses ``async.*``).

Each check judges a run by the arrivals it recorded, in the order the learner received them:
an implementation whose actors run on their own timing (remote processes, a Ray cluster)
produces its own arrival order, and every rule below is stated against the recorded order,
so a verdict does not depend on which actor happened to be first. The version an actor may
act with is bounded by the learner's version at two recorded moments: when the actor's
previous fragment was handed over (it resumed then, with the weights of the updates made
before) and when this fragment arrived (no weights from the future).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Arrived, Floats, Item, Trace

__all__ = [
    "TOLERANCE",
    "check_behaviour_logits",
    "check_env_steps_counted",
    "check_lag_bounded",
    "check_version_recorded",
]

TOLERANCE = 1e-5
"""Absolute tolerance on logits and log-probabilities (single-precision frameworks)."""

Row = tuple[Arrived, int, Item]
"""An arrival, a row index in it and the row's item."""


def _sc(scenario: Scenario) -> AsyncScenario:
    assert isinstance(scenario, AsyncScenario)
    return scenario


def _arrivals(trace: Trace) -> list[Arrived]:
    arrivals = list(trace.of_kind("arrived"))
    if not arrivals:
        raise CheckFailure("arrived fragments", "at least one arrived event", 0)
    return arrivals


def _rows(arrivals: list[Arrived]) -> Iterator[Row]:
    for a in arrivals:
        for i, item in enumerate(zip(a.env, a.episode, a.t)):
            yield a, i, item


def _where(a: Arrived, row: int) -> str:
    return f"arrival {a.index} (actor {a.actor}) row {row}"


def _released(arrivals: list[Arrived]) -> dict[int, int]:
    """For each arrival's index, the learner's version when its actor was last released: at
    the hand-over of the actor's previous fragment (0 for its first)."""
    last: dict[int, int] = {}
    out = {}
    for a in arrivals:
        out[a.index] = last.get(a.actor, 0)
        last[a.actor] = a.learner_version
    return out


def _close(a: float, b: float) -> bool:
    return math.isfinite(a) and abs(a - b) <= TOLERANCE


def check_version_recorded(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """async.version-recorded: each item's recorded version ``v`` is that of the weights that
    acted (their logits are the toy versioned policy's under ``v``), at least the learner's
    version when the actor was released and at most its version when the fragment arrived,
    and an actor's versions never decrease."""
    sc = _sc(scenario)
    arrivals = _arrivals(trace)
    released = _released(arrivals)
    newest: dict[int, int] = {}
    if all(a.learner_version == 0 for a in arrivals):
        raise Unsupported(
            "every fragment arrived before the learner's first update, so every version that "
            "could act is 0 and the clause cannot be judged on this run"
        )
    for a, row, item in _rows(arrivals):
        v, logits = a.version[row], a.logits[row]
        want = tuple(k * v * LOGIT_STEP for k in range(sc.env.num_actions))
        if len(logits) != len(want) or not all(map(_close, logits, want)):
            raise CheckFailure(
                f"{_where(a, row)}: behaviour logits of item {item}, recorded with version {v}",
                want,
                logits,
            )
        low, high = released[a.index], a.learner_version
        if not low <= v <= high:
            raise CheckFailure(
                f"{_where(a, row)}: version of item {item}",
                f"in [{low}, {high}] (the learner's versions when actor {a.actor} was "
                "released and when the fragment arrived)",
                v,
            )
        if v < newest.get(a.actor, 0):
            raise CheckFailure(
                f"{_where(a, row)}: version of item {item}",
                f"at least {newest[a.actor]} (actor {a.actor} acted with it before)",
                v,
            )
        newest[a.actor] = v


def _log_softmax(logits: Floats, action: int) -> float:
    top = max(logits)
    return logits[action] - top - math.log(sum(math.exp(x - top) for x in logits))


def check_behaviour_logits(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """async.behaviour-logits: the log-probability stored with each item is that of its
    action under the behaviour logits that acted (V-trace's behaviour policy), not under the
    learner's newer weights."""
    sc = _sc(scenario)
    lagged = False
    for a, row, item in _rows(_arrivals(trace)):
        action, logits = a.action[row], a.logits[row]
        if not 0 <= action < min(sc.env.num_actions, len(logits)):
            raise CheckFailure(f"{_where(a, row)}: action of item {item}", "a valid action", action)
        want = _log_softmax(logits, action)
        if not _close(a.log_prob[row], want):
            raise CheckFailure(
                f"{_where(a, row)}: stored log-probability of action {action} of item {item}",
                want,
                a.log_prob[row],
            )
        lagged = lagged or a.version[row] < a.learner_version
    if not lagged:
        raise Unsupported(
            "no item of this run was acted by weights older than the learner's when it "
            "arrived, so the behaviour and the learner's log-probabilities coincide and the "
            "clause cannot be judged on this run"
        )


def check_lag_bounded(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """async.lag-bounded: with ``max_lag`` no update trains on an item whose version is more
    than ``max_lag`` below the learner's; such items are dropped. Not applicable without a
    bound, or when no arrived item ever exceeded it."""
    sc = _sc(scenario)
    if sc.max_lag is None:
        raise Unsupported(
            "the scenario sets no lag bound (max_lag), so the clause cannot be judged"
        )
    versions: dict[Item, int] = {}
    exposed = False
    for event in trace.events:
        if event.kind == "arrived":
            for a, row, item in _rows([event]):
                versions[item] = a.version[row]
        elif event.kind == "trained":
            exposed = exposed or any(event.version - v > sc.max_lag for v in versions.values())
            for i, item in enumerate(zip(event.env, event.episode, event.t)):
                if item not in versions:
                    raise CheckFailure(
                        f"update {event.version} row {i}: item {item}",
                        "an item that arrived before the update",
                        item,
                    )
                lag = event.version - versions[item]
                if lag > sc.max_lag:
                    raise CheckFailure(
                        f"update {event.version} row {i}: lag of item {item} (version "
                        f"{versions[item]})",
                        f"at most max_lag ({sc.max_lag})",
                        lag,
                    )
    _arrivals(trace)
    if not exposed:
        raise Unsupported(
            f"no arrived item was more than max_lag ({sc.max_lag}) updates old at an update, "
            "so the bound had nothing to drop and the clause cannot be judged on this run"
        )


def check_env_steps_counted(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """async.env-steps-counted: every arrived item counts once toward the env-step counter,
    when its fragment arrives, trained on or dropped; the arrivals are numbered in order and
    each holds ``fragment_length`` items."""
    sc = _sc(scenario)
    total = 0
    for n, a in enumerate(_arrivals(trace)):
        if a.index != n:
            raise CheckFailure("arrival index", n, a.index)
        if len(a.env) != sc.fragment_length:
            raise CheckFailure(f"items of arrival {n}", sc.fragment_length, len(a.env))
        total += len(a.env)
        if a.env_steps != total:
            raise CheckFailure(
                f"env-step counter after arrival {n} (actor {a.actor})",
                f"{total} (the items of arrivals 0 to {n})",
                a.env_steps,
            )
