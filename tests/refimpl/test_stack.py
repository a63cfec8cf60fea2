"""refimpl's frame stacking model (xpspec/refimpl/stack.py): the rollout's stacks, the ring,
and each rule of spec/stack.md's Stacker, rule by rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.scenario import StackScenario, scenario_from_json, scenario_to_json
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Trace
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.stack import ZERO_FRAME, Held, Stacker, run_stack

FIRST, MID, LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(2), FixedSchedule(4, "truncated"))),
    steps=12,
    num_frames=3,
    capacity=5,
    batch_size=6,
    draws=3,
    seed=3,
)


def test_the_trace_is_the_rollout_then_the_draws() -> None:
    trace = run_stack(SCENARIO)
    events = list(trace.of_kind("stacked"))
    assert [(e.source, e.index) for e in events] == [("rollout", n) for n in range(12)] + [
        ("sample", d) for d in range(3)
    ]
    for e in events:
        assert len(e.env) == len(e.frames) == (2 if e.source == "rollout" else 6)
        for i, stack in enumerate(e.frames):
            assert len(stack) == 3
            assert stack[-1] == (e.env[i], e.episode[i], e.t[i])  # the item itself, newest


def test_the_scenario_round_trips_and_refuses_a_ring_narrower_than_a_stack() -> None:
    assert scenario_from_json(scenario_to_json(SCENARIO)) == SCENARIO
    with pytest.raises(ConfigError, match="capacity"):
        replace(SCENARIO, capacity=2)
    with pytest.raises(ConfigError, match="padding"):
        replace(SCENARIO, padding="edge")  # type: ignore[arg-type]


def test_the_trace_round_trips_through_json_lines() -> None:
    text = RefimplAdapter().run_stack(SCENARIO).to_jsonl()
    assert Trace.from_jsonl(text).to_jsonl() == text


def test_a_first_restarts_the_stack_with_the_padding_rule() -> None:
    stacker = Stacker(SCENARIO)
    previous = ((0, 0, 0), (0, 0, 1), (0, 0, 2))
    assert stacker.restart(previous, (0, 1, 0)) == ((0, 1, 0),) * 3
    zeros = Stacker(replace(SCENARIO, padding="zeros"))
    assert zeros.restart(previous, (0, 1, 0)) == (ZERO_FRAME, ZERO_FRAME, (0, 1, 0))


def test_a_push_drops_the_oldest_frame() -> None:
    stacker = Stacker(SCENARIO)
    assert stacker.push(((0, 1, 0), (0, 1, 0), (0, 1, 1)), (0, 1, 2)) == (
        (0, 1, 0),
        (0, 1, 1),
        (0, 1, 2),
    )


RING = [
    Held((0, 0, 1), MID),
    Held((0, 0, 2), LAST),
    Held((0, 1, 0), FIRST),
    Held((0, 1, 1), MID),
    Held((0, 1, 2), MID),
]


@pytest.mark.parametrize(
    ("position", "stack"),
    [
        (2, ((0, 1, 0), (0, 1, 0), (0, 1, 0))),  # a FIRST: the first frame repeated
        (3, ((0, 1, 0), (0, 1, 0), (0, 1, 1))),  # back to the FIRST, not past it
        (4, ((0, 1, 0), (0, 1, 1), (0, 1, 2))),
    ],
)
def test_a_rebuilt_stack_walks_back_to_the_first(position: int, stack: tuple) -> None:
    assert Stacker(SCENARIO).rebuild(RING, position) == stack


def test_only_items_whose_frames_the_ring_holds_are_samplable() -> None:
    stacker = Stacker(SCENARIO)
    # (0, 0, 1) needs (0, 0, 0) and (0, 0, 2) needs it too: both evicted
    assert [stacker.samplable(RING, p) for p in range(5)] == [False, False, True, True, True]


def test_no_sampled_item_needs_an_evicted_frame_and_each_carries_its_rollout_stack() -> None:
    trace = run_stack(SCENARIO)
    rollout: dict = {}
    sampled = 0
    for e in trace.of_kind("stacked"):
        rows = list(zip(zip(e.env, e.episode, e.t), e.frames))
        if e.source == "rollout":
            rollout.update(rows)
            continue
        for item, stack in rows:
            ring = [i for i in rollout if i[0] == item[0]][-SCENARIO.capacity :]
            assert stack == rollout[item] and set(stack) <= set(ring)
            sampled += 1
    assert sampled == 18
