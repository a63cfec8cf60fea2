"""Frame stacking checks held to account: each fails on the breakage its clause names and on
no other, and a run that gives a clause nothing to judge is not applicable, never a pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.stack import (
    check_earliest_ignored,
    check_episode_start,
    check_frames,
    check_no_cross,
    check_sample_equals_rollout,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import Scenario, StackScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Item, Stacked, Trace
from xpspec.refimpl.stack import run_stack

Check = Callable[[Scenario, Trace, Context], None]
ALL: tuple[Check, ...] = (
    check_frames,
    check_episode_start,
    check_no_cross,
    check_sample_equals_rollout,
    check_earliest_ignored,
)
SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(2),)),
    steps=9,
    num_frames=3,
    capacity=5,
    batch_size=8,
    draws=2,
)
CTX = Context(run_stack, run_stack)  # type: ignore[arg-type]


def _verdicts(scenario: StackScenario, trace: Trace) -> dict[str, str]:
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


def _edit(trace: Trace, source: str, edit: Callable[[Item, tuple[Item, ...]], tuple]) -> Trace:
    events = []
    for e in trace.events:
        if isinstance(e, Stacked) and e.source == source:
            items = zip(e.env, e.episode, e.t)
            e = replace(e, frames=tuple(edit(i, f) for i, f in zip(items, e.frames)))
        events.append(e)
    return Trace(tuple(events), trace.header)


def test_refimpl_passes_every_clause() -> None:
    # the ring (steps 4..8 of each env) holds 4 of its 10 items with an evicted frame: none is
    # sampled in 16 draws, which a sampler ignoring the clause does with probability 0.6**16
    assert _verdicts(SCENARIO, run_stack(SCENARIO)) == {
        "check_frames": "pass",
        "check_episode_start": "pass",
        "check_no_cross": "pass",
        "check_sample_equals_rollout": "pass",
        "check_earliest_ignored": "pass",
    }


def test_earliest_ignored_needs_evicted_items_and_enough_draws_to_miss_them() -> None:
    # a ring that holds every item: nothing was evicted, nothing to judge
    roomy = replace(SCENARIO, capacity=9)
    with pytest.raises(Unsupported, match="no stack of this run has a held item"):
        check_earliest_ignored(roomy, run_stack(roomy), CTX)
    # one draw of one item: a sampler ignoring the clause misses 4 of 10 with probability 0.6
    few = replace(SCENARIO, batch_size=1, draws=1)
    with pytest.raises(Unsupported, match=r"probability 0\.60"):
        check_earliest_ignored(few, run_stack(few), CTX)


def test_a_stale_newest_frame_fails_frames_only() -> None:
    def stale(item: Item, stack: tuple[Item, ...]) -> tuple[Item, ...]:
        return (*stack[:-1], stack[-2]) if item[2] > 0 else stack

    trace = _edit(run_stack(SCENARIO), "rollout", stale)
    verdicts = _verdicts(SCENARIO, trace)
    assert verdicts["check_frames"] == "fail"
    assert verdicts["check_episode_start"] == verdicts["check_no_cross"] == "pass"


def test_a_zero_filled_stack_fails_episode_start_unless_the_scenario_asks_for_it() -> None:
    zeros = replace(SCENARIO, padding="zeros")
    trace = run_stack(zeros)
    assert _verdicts(zeros, trace)["check_episode_start"] == "pass"
    verdicts = _verdicts(SCENARIO, trace)
    assert verdicts["check_episode_start"] == "fail"
    assert verdicts["check_no_cross"] == "pass"  # the zero frame never counts as crossing


def test_a_frame_of_the_previous_episode_fails_no_cross_not_episode_start() -> None:
    def cross(item: Item, stack: tuple[Item, ...]) -> tuple[Item, ...]:
        e, j, t = item
        return ((e, j - 1, 2), *stack[1:]) if j > 0 and t == 0 and e == 1 else stack

    trace = _edit(run_stack(SCENARIO), "rollout", cross)
    verdicts = _verdicts(SCENARIO, trace)
    assert verdicts["check_no_cross"] == "fail"
    assert verdicts["check_episode_start"] == verdicts["check_frames"] == "pass"


def test_no_cross_needs_an_episode_that_follows_another() -> None:
    one_episode = replace(SCENARIO, steps=3)
    with pytest.raises(Unsupported, match="follows another"):
        check_no_cross(one_episode, run_stack(one_episode), CTX)


def test_a_sampled_stack_other_than_the_rollouts_fails_sample_equals_rollout() -> None:
    def shifted(item: Item, stack: tuple[Item, ...]) -> tuple[Item, ...]:
        return (stack[-1],) * len(stack)

    scenario = replace(SCENARIO, num_frames=2, capacity=9)
    trace = _edit(run_stack(scenario), "sample", shifted)
    verdicts = _verdicts(scenario, trace)
    assert verdicts["check_sample_equals_rollout"] == "fail"
    assert verdicts["check_earliest_ignored"] == "n/a"


def test_an_evicted_items_stack_is_judged_by_earliest_ignored() -> None:
    # The rollout's stacks stored whole (as SB3 does): the oldest held item, whose earlier
    # frames the ring evicted, is sampled with its rollout stack and passes; made up from the
    # oldest held frame (as a rebuilding buffer would) it fails.
    trace = run_stack(SCENARIO)
    rollout = [e for e in trace.events if isinstance(e, Stacked) and e.source == "rollout"]
    oldest = rollout[-SCENARIO.capacity]  # vector step 4: the ring's oldest items
    whole = Stacked("sample", 0, oldest.env, oldest.episode, oldest.t, oldest.frames)
    runs = Trace((*rollout, whole))
    assert _verdicts(SCENARIO, runs)["check_earliest_ignored"] == "pass"
    padded = tuple((s[-1],) * 3 for s in oldest.frames)
    broken = Trace((*rollout, replace(whole, frames=padded)))
    verdicts = _verdicts(SCENARIO, broken)
    assert verdicts["check_earliest_ignored"] == "fail"
    assert verdicts["check_sample_equals_rollout"] == "n/a"


@pytest.mark.parametrize("padding", ["repeat-first", "zeros"])
def test_one_zero_filled_env_cannot_tell_the_padding_rules_apart(padding: str) -> None:
    """Env 0's first frame is the zero frame, and the zero frame at its later episodes'
    padding is ambiguous: a zero-filled run of one env judges nothing of stack.episode-start
    (the rules give the same frames wherever they are told apart), whatever the scenario asks."""
    one = replace(SCENARIO, env=EnvSpec(num_envs=1, schedules=(FixedSchedule(2),)))
    trace = run_stack(replace(one, padding="zeros"))
    assert _verdicts(replace(one, padding=padding), trace)["check_episode_start"] == "n/a"
    # repeating the FIRST shows at env 0's later episodes: judged, and told apart
    repeated = run_stack(one)
    assert _verdicts(one, repeated)["check_episode_start"] == "pass"
    assert _verdicts(replace(one, padding="zeros"), repeated)["check_episode_start"] == "fail"
