"""Asynchronous actors checks held to account: each fails on the breakage its clause names and
on no other, judges a run by the arrival order it recorded, and is not applicable (never a
pass) when a run gives its clause nothing to judge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from xpspec.conformance.checks.asynchronous import (
    check_behaviour_logits,
    check_env_steps_counted,
    check_lag_bounded,
    check_version_recorded,
)
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Arrived, Trace, Trained
from xpspec.refimpl.asynchronous import run_async

Check = Callable[[Scenario, Trace, Context], None]
ALL: tuple[Check, ...] = (
    check_version_recorded,
    check_behaviour_logits,
    check_lag_bounded,
    check_env_steps_counted,
)
SCENARIO = AsyncScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    fragment_length=2,
    arrivals=(0, 1, 1, 0, 0),
    max_lag=1,
)
CTX = Context(run_async, run_async)  # type: ignore[arg-type]


def _verdicts(scenario: AsyncScenario, trace: Trace) -> dict[str, str]:
    out = {}
    for check in ALL:
        try:
            check(scenario, trace, CTX)
            out[check.__name__] = "pass"
        except Unsupported:
            out[check.__name__] = "n/a"
        except CheckFailure:
            out[check.__name__] = "fail"
    return out


def _edit(trace: Trace, index: int, **fields: object) -> Trace:
    """``trace`` with arrival ``index`` changed."""
    events = tuple(
        replace(e, **fields) if isinstance(e, Arrived) and e.index == index else e
        for e in trace.events
    )
    return Trace(events, trace.header)


def _failing(verdicts: dict[str, str]) -> set[str]:
    return {name for name, v in verdicts.items() if v == "fail"}


def test_refimpl_passes_every_check() -> None:
    assert set(_verdicts(SCENARIO, run_async(SCENARIO)).values()) == {"pass"}


def test_a_version_the_logits_do_not_name_fails_version_recorded_only() -> None:
    trace = run_async(SCENARIO)
    arrival = next(e for e in trace.of_kind("arrived") if e.index == 3)  # acted with 0, U = 3
    broken = _edit(trace, 3, version=(1, 1))
    assert _failing(_verdicts(SCENARIO, broken)) == {"check_version_recorded"}
    assert arrival.version == (0, 0)


def test_a_version_from_the_future_fails_version_recorded() -> None:
    trace = run_async(SCENARIO)
    arrival = next(e for e in trace.of_kind("arrived") if e.index == 1)  # arrived at U = 1
    ahead = tuple(tuple(k * 2 * 0.25 for k in range(2)) for _ in arrival.t)
    broken = _edit(trace, 1, version=(2, 2), logits=ahead, log_prob=arrival.log_prob)
    with pytest.raises(CheckFailure, match=r"in \[0, 1\]"):
        check_version_recorded(SCENARIO, broken, CTX)


def test_a_log_prob_of_other_logits_fails_behaviour_logits_only() -> None:
    trace = run_async(SCENARIO)
    arrival = next(e for e in trace.of_kind("arrived") if e.index == 3)
    broken = _edit(trace, 3, log_prob=tuple(p - 0.5 for p in arrival.log_prob))
    assert _failing(_verdicts(SCENARIO, broken)) == {"check_behaviour_logits"}


def test_training_on_a_stale_item_fails_lag_bounded_only() -> None:
    trace = run_async(SCENARIO)
    stale = next(e for e in trace.of_kind("arrived") if e.index == 3)  # lag 3, dropped
    events = list(trace.events)
    at = events.index(stale) + 1
    events.insert(at, Trained(3, stale.env, stale.episode, stale.t))
    broken = Trace(tuple(events), trace.header)
    assert _failing(_verdicts(SCENARIO, broken)) == {"check_lag_bounded"}


def test_a_counter_that_skips_dropped_items_fails_env_steps_counted_only() -> None:
    trace = run_async(SCENARIO)
    broken = _edit(trace, 3, env_steps=6)
    assert _failing(_verdicts(SCENARIO, broken)) == {"check_env_steps_counted"}


def test_a_run_before_any_update_or_without_a_bound_judges_nothing() -> None:
    one = replace(SCENARIO, arrivals=(0,))
    verdicts = _verdicts(one, run_async(one))
    assert verdicts["check_version_recorded"] == "n/a"
    assert verdicts["check_behaviour_logits"] == "n/a"
    assert verdicts["check_lag_bounded"] == "n/a"
    unbounded = replace(SCENARIO, max_lag=None)
    assert _verdicts(unbounded, run_async(unbounded))["check_lag_bounded"] == "n/a"


def test_the_verdict_follows_the_recorded_order_not_the_scenarios() -> None:
    """A real engine's arrivals are its own: a run recorded in another order than the
    scenario's is judged by the order it recorded."""
    other = replace(SCENARIO, arrivals=(1, 0, 0, 1, 1))
    assert set(_verdicts(SCENARIO, run_async(other)).values()) == {"pass"}
