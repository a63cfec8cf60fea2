"""Failure messages name windows as the spec does, by ``(env, start)`` with ``start`` an
absolute position, and compare the same property on both sides of expected and actual."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.learner import check_episode_unmodified, check_gae
from xpspec.conformance.checks.replay import check_uniform
from xpspec.conformance.checks.windows import check_whole_buffer
from xpspec.protocol.scenario import LearnerScenario, ReplayScenario, TrainerScenario
from xpspec.protocol.trace import Sampled, Trace, Update
from xpspec.refimpl.adapter import RefimplAdapter

_REFIMPL = RefimplAdapter()


def _context() -> Context:
    def reference(s: object) -> Trace:
        return _REFIMPL.run_learner(s)  # type: ignore[arg-type]

    return Context(reference, reference)


def _failure(check: object, scenario: object, trace: Trace) -> CheckFailure:
    with pytest.raises(CheckFailure) as caught:
        check(scenario, trace, _context())  # type: ignore[operator]
    return caught.value


@pytest.mark.clause("replay.uniform-windows")
def test_an_over_drawn_window_is_named_by_its_absolute_start() -> None:
    scenario = CATALOG["replay-uniform"]
    assert isinstance(scenario, ReplayScenario)
    trace = _REFIMPL.run_replay(scenario)
    # env 0 holds its 11 items in a ring of 8: positions 3..10 stay, the oldest is 3
    oldest = next(e for e in trace.of_kind("sampled")).windows
    window = next(w for w in oldest if w[0] == (0, 0, 3))  # episode 0's LAST, position 3
    draws = [Sampled(d.draw, (window,) * len(d.windows)) for d in trace.of_kind("sampled")]
    stores = tuple(e for e in trace.events if e.kind != "sampled")
    failure = _failure(check_uniform, scenario, Trace(stores + tuple(draws), trace.header))
    assert failure.what.startswith("draws of window (env 0, start 3) out of")


@pytest.mark.clause("replay.whole-buffer")
def test_whole_buffer_chunks_are_named_by_env_and_start() -> None:
    scenario = CATALOG["whole-buffer"]
    assert isinstance(scenario, TrainerScenario)
    trace = _REFIMPL.run_trainer(scenario)
    dropped = next(
        n for n, e in enumerate(trace.events) if isinstance(e, Update) and len(e.windows) > 1
    )
    update = trace.events[dropped]
    assert isinstance(update, Update)
    shorter = replace(update, windows=update.windows[:-1], loss_mask=update.loss_mask[:-1])
    events = (*trace.events[:dropped], shorter, *trace.events[dropped + 1 :])
    failure = _failure(check_whole_buffer, scenario, Trace(events, trace.header))
    assert isinstance(failure.expected, list) and isinstance(failure.actual, list)
    named = [*failure.expected, *failure.actual]
    assert named and all(n.startswith("(env ") and " x" in n for n in named), named
    assert failure.actual != failure.expected


@pytest.mark.clause("learner.gae")
def test_a_missing_episode_is_listed_as_missing_on_both_sides() -> None:
    scenario = CATALOG["learner-single"]
    assert isinstance(scenario, LearnerScenario)
    trace = _REFIMPL.run_learner(scenario)
    first = next(e for e in trace.of_kind("advantages"))
    events = tuple(e for e in trace.events if e is not first)
    failure = _failure(check_gae, scenario, Trace(events, trace.header))
    assert failure.what == "episodes of the scenario without an Advantages event"
    assert (failure.expected, failure.actual) == ([], [(first.env, first.episode)])


@pytest.mark.clause("learner.episode-unmodified")
def test_a_missing_caller_episode_is_counted_on_both_sides() -> None:
    scenario = CATALOG["learner-single"]
    trace = _REFIMPL.run_learner(scenario)  # type: ignore[arg-type]
    first = next(e for e in trace.of_kind("caller_episode"))
    events = tuple(e for e in trace.events if e is not first)
    failure = _failure(check_episode_unmodified, scenario, Trace(events, trace.header))
    assert (failure.expected, failure.actual) == (1, 0)
