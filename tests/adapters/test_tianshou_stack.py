"""Frame stacking in the Tianshou adapter (xpspec/adapters/tianshou_stack.py): Gymnasium's
``FrameStackObservation`` in the rollout, ``VectorReplayBuffer(stack_num=k,
save_only_last_obs=True)`` rebuilding the stacks at sample time. Skipped when Tianshou is not
installed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("tianshou")

from tianshou.data.buffer import manager

from xpspec.adapters.tianshou import TianshouAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.stack import check_sample_equals_rollout
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.schedule import FixedSchedule

ADAPTER = TianshouAdapter()
SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(4),)),
    steps=10,
    num_frames=3,
    capacity=6,
    batch_size=8,
    draws=3,
)


def _split(trace: object) -> tuple[dict, list]:
    rollout: dict = {}
    sampled: list = []
    for e in trace.of_kind("stacked"):  # type: ignore[attr-defined]
        rows = list(zip(zip(e.env, e.episode, e.t), e.frames))
        (rollout.update if e.source == "rollout" else sampled.extend)(rows)
    return rollout, sampled


def test_the_policy_receives_the_first_frame_repeated_and_a_fresh_stack_at_each_reset() -> None:
    rollout, _ = _split(ADAPTER.run_stack(SCENARIO))
    # same-step auto-reset: an episode of 4 transitions is the rows t = 0 .. 3
    assert rollout[(1, 0, 3)] == ((1, 0, 1), (1, 0, 2), (1, 0, 3))
    assert rollout[(1, 1, 0)] == ((1, 1, 0), (1, 1, 0), (1, 1, 0))
    assert rollout[(1, 1, 1)] == ((1, 1, 0), (1, 1, 0), (1, 1, 1))


def test_a_sampled_stack_whose_frames_are_held_is_the_rollout_stack() -> None:
    rollout, sampled = _split(ADAPTER.run_stack(SCENARIO))
    assert len(sampled) == SCENARIO.batch_size * SCENARIO.draws
    # items of rows 4 .. 9 are held (capacity 6 of 10); row 4 is t = 0 of episode 1
    whole = [(item, stack) for item, stack in sampled if item[1] == 1 or item[1] == 2]
    assert whole
    for item, stack in whole:
        assert stack == rollout[item]


def test_the_oldest_held_item_of_a_full_ring_gets_its_oldest_frame_repeated() -> None:
    sc = replace(SCENARIO, env=EnvSpec(num_envs=2, schedules=(FixedSchedule(8),)), draws=8)
    rollout, sampled = _split(ADAPTER.run_stack(sc))
    oldest = {stack for item, stack in sampled if item == (0, 0, 4)}
    assert rollout[(0, 0, 4)] == ((0, 0, 2), (0, 0, 3), (0, 0, 4))
    assert oldest == {((0, 0, 4),) * 3}


def test_zero_padding_is_stored_whole_and_sampled_as_received() -> None:
    zero = (0, 0, 0)
    rollout, sampled = _split(ADAPTER.run_stack(replace(SCENARIO, padding="zeros")))
    assert rollout[(1, 1, 0)] == (zero, zero, (1, 1, 0))
    assert rollout[(1, 1, 1)] == (zero, (1, 1, 0), (1, 1, 1))
    assert sampled
    for item, stack in sampled:
        assert stack == rollout[item]


def test_a_buffer_whose_prev_crosses_episodes_changes_the_sampled_stacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation: ``VectorReplayBuffer.prev`` (``data/buffer/manager.py``, ``_prev_index``)
    made to ignore ``done`` rebuilds stacks across the episode boundary; the recorded sampled
    stacks change and the check fails."""
    trace = ADAPTER.run_stack(SCENARIO)
    context = Context(ADAPTER.run_stack, ADAPTER.run_stack)
    check_sample_equals_rollout(SCENARIO, trace, context)

    prev_index = manager._prev_index

    def crossing(index: np.ndarray, offset: np.ndarray, done: np.ndarray, *rest: object) -> object:
        return prev_index(index, offset, np.zeros_like(done), *rest)

    monkeypatch.setattr(manager, "_prev_index", crossing)
    perturbed = ADAPTER.run_stack(SCENARIO)
    assert _split(perturbed)[0] == _split(trace)[0]  # the rollout does not use the buffer
    assert _split(perturbed)[1] != _split(trace)[1]
    with pytest.raises(CheckFailure):
        check_sample_equals_rollout(SCENARIO, perturbed, context)
