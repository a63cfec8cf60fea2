"""Frame stacking in the d3rlpy adapter (xpspec/adapters/d3rlpy_stack.py): d3rlpy's
``FrameStack`` env wrapper under ``collect``, a ``ReplayBuffer`` of last frames
(``LastFrameWriterPreprocess``) stacked at sample time by ``FrameStackTransitionPicker``.
Skipped when d3rlpy is not installed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("d3rlpy")

from d3rlpy.dataset import transition_pickers

from xpspec.adapters.d3rlpy import D3rlpyAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.stack import check_sample_equals_rollout
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.schedule import FixedSchedule

ADAPTER = D3rlpyAdapter()
SCENARIO = StackScenario(
    EnvSpec(schedules=(FixedSchedule(4),)),
    steps=10,
    num_frames=3,
    capacity=6,
    batch_size=8,
    draws=3,
)
ZERO = (0, 0, 0)


def _split(trace: object) -> tuple[dict, list]:
    rollout: dict = {}
    sampled: list = []
    for e in trace.of_kind("stacked"):  # type: ignore[attr-defined]
        rows = list(zip(zip(e.env, e.episode, e.t), e.frames))
        (rollout.update if e.source == "rollout" else sampled.extend)(rows)
    return rollout, sampled


def test_the_policy_receives_zero_filled_stacks_and_a_fresh_stack_at_each_reset() -> None:
    rollout, _ = _split(ADAPTER.run_stack(SCENARIO))
    assert len(rollout) == SCENARIO.steps
    # same-step auto-reset: an episode of 4 transitions is the rows t = 0 .. 3
    assert rollout[(0, 0, 0)] == (ZERO, ZERO, (0, 0, 0))
    assert rollout[(0, 0, 3)] == ((0, 0, 1), (0, 0, 2), (0, 0, 3))
    assert rollout[(0, 1, 0)] == (ZERO, ZERO, (0, 1, 0))
    assert rollout[(0, 1, 1)] == (ZERO, (0, 1, 0), (0, 1, 1))


def test_sampled_stacks_are_rebuilt_as_the_policy_received_them() -> None:
    for padding in ("repeat-first", "zeros"):
        rollout, sampled = _split(ADAPTER.run_stack(replace(SCENARIO, padding=padding)))
        assert len(sampled) == SCENARIO.batch_size * SCENARIO.draws
        for item, stack in sampled:
            assert stack[-1] == item
            assert stack == rollout[item]


def test_a_draw_from_an_empty_buffer_is_an_empty_batch() -> None:
    # one step: the writer stores an entry one step after it (finding on
    # preprocess.conservation), and collect's closing clip_episode(False) writes none
    _, sampled = _split(ADAPTER.run_stack(replace(SCENARIO, steps=1)))
    assert sampled == []


def test_a_picker_that_pads_with_the_first_frame_changes_the_sampled_stacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation: ``stack_recent_observations`` (``dataset/utils.py``, as
    ``FrameStackTransitionPicker`` calls it) made to pad with the episode's first frame
    instead of zeros; the recorded sampled stacks change and the check fails. The ring holds every step (capacity
    12 of 10): with a shorter one, the items d3rlpy holds are not the last ``capacity`` the
    policy received (the finding on stack.sample-equals-rollout)."""
    sc = replace(SCENARIO, capacity=12)
    trace = ADAPTER.run_stack(sc)
    context = Context(ADAPTER.run_stack, ADAPTER.run_stack)
    check_sample_equals_rollout(sc, trace, context)

    stack = transition_pickers.stack_recent_observations

    def repeat_first(observations: Any, index: int, n_frames: int) -> Any:
        stacked = np.array(stack(observations, index, n_frames))
        stacked[: max(n_frames - index - 1, 0)] = observations[0]
        return stacked

    monkeypatch.setattr(transition_pickers, "stack_recent_observations", repeat_first)
    perturbed = ADAPTER.run_stack(sc)
    assert _split(perturbed)[0] == _split(trace)[0]  # the rollout does not use the buffer
    assert _split(perturbed)[1] != _split(trace)[1]
    with pytest.raises(CheckFailure):
        check_sample_equals_rollout(sc, perturbed, context)
