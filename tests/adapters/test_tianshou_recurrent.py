"""The Tianshou adapter's recurrent runs (xpspec.adapters.tianshou_recurrent): what it records of
Tianshou 2.0.1's Collector, VectorReplayBuffer(stack_num=...) and DQN on scenarios small enough
to name every expected value. Skipped when Tianshou is not installed."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tianshou")

import torch
from tianshou.algorithm import DQN
from tianshou.data import Collector

from xpspec.adapters.tianshou import TianshouAdapter
from xpspec.adapters.tianshou_recurrent import CountingRecurrent, run_recurrent
from xpspec.conformance.checks.recurrent import rollout_of
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace, TrainSequence

ADAPTER = TianshouAdapter()
TWO = EnvSpec(num_envs=2, schedules=(FixedSchedule(3), FixedSchedule(5)))
PAD = RecurrentScenario(TWO, steps=10, sequence_length=4, boundary="pad", batch_size=5, draws=2)


def _sequences(trace: Trace) -> list[TrainSequence]:
    return [e for e in trace.events if isinstance(e, TrainSequence)]


def test_declares_recurrent() -> None:
    assert "recurrent" in ADAPTER.info().capabilities


def test_rollout_state_is_the_count_since_the_collectors_reset() -> None:
    trace = ADAPTER.run_recurrent(PAD)
    received = rollout_of(trace).state
    assert len(received) == 20  # 10 vector steps of 2 envs; no LAST is acted on
    assert all(state == t for (_, _, t), state in received.items())
    assert (0, 3, 0) in received  # env 0's episodes of 3 transitions: 3 rows each


def test_stacks_are_front_padded_zero_started_and_trained_at_the_last_position() -> None:
    trace = ADAPTER.run_recurrent(PAD)
    sequences = _sequences(trace)
    assert [(s.draw, s.index) for s in sequences] == [(d, i) for d in range(2) for i in range(5)]
    padded = 0
    for s in sequences:
        assert len(s.items) == 4 and s.items[-1] is not None
        real = [item for item in s.items if item is not None]
        pads = 4 - len(real)
        assert s.items[:pads] == (None,) * pads  # the repeats come first
        padded += pads > 0
        for a, b in pairwise(real):
            assert (b[0], b[1], b[2]) == (a[0], a[1], a[2] + 1)  # consecutive, one episode
        if pads:
            assert real[0][2] == 0  # only an episode's start is repeated
        assert s.state_in == (0, 1, 2, 3)  # from zeros, carried through the repeats
        assert s.loss_mask == (0, 0, 0, 1)
    assert padded, "no stack reached its episode's start"


def test_initial_state_zeros_is_the_same_run() -> None:
    # DQN passes no state either way: both scenarios drive the same Tianshou calls
    stored = ADAPTER.run_recurrent(PAD)
    zeros = ADAPTER.run_recurrent(replace(PAD, initial_state="zeros"))
    assert stored.events == zeros.events


def test_a_stack_of_one_is_its_own_sequence() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=3, sequence_length=1, boundary="pad", batch_size=4, draws=1)
    )
    received = rollout_of(trace).state
    for s in _sequences(trace):
        assert s.items[0] in received and s.state_in == (0,) and s.loss_mask == (1,)


def test_boundary_cross_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="never runs across an episode end"):
        ADAPTER.run_recurrent(RecurrentScenario(TWO, steps=10, sequence_length=4))


def test_recorded_states_come_from_the_model_that_ran() -> None:
    trace = run_recurrent(PAD, model=lambda n: CountingRecurrent(n, step=2))
    assert all(state == 2 * t for (_, _, t), state in rollout_of(trace).state.items())
    assert {s.state_in for s in _sequences(trace)} == {(0, 2, 4, 6)}


def test_a_collector_that_never_resets_changes_the_rollout_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Collector, "_reset_hidden_state_based_on_type", lambda *args: None)
    received = rollout_of(ADAPTER.run_recurrent(PAD)).state
    assert received[(0, 1, 0)] == 3  # carried on from episode 0's three steps


def test_the_loss_mask_is_where_the_loss_sends_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    # DQN's loss weighs each stack by batch.weight (DQN._update_with_batch pops it): weight 0
    # for the first stack of every draw leaves its last position without gradient.
    preprocess = DQN._preprocess_batch

    def weighted(self: Any, batch: Any, buffer: Any, indices: np.ndarray) -> Any:
        batch = preprocess(self, batch, buffer, indices)
        batch.weight = torch.tensor([0.0] + [1.0] * (len(indices) - 1))
        return batch

    monkeypatch.setattr(DQN, "_preprocess_batch", weighted)
    for s in _sequences(ADAPTER.run_recurrent(PAD)):
        assert s.loss_mask == ((0, 0, 0, 0) if s.index == 0 else (0, 0, 0, 1))


def test_a_state_given_to_the_training_forward_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Had DQN passed the stacks a state, the recorded state_in would start from it.
    update = DQN._update_with_batch

    def with_state(self: Any, batch: Any) -> Any:
        forward = self.policy.forward

        def given(batch: Any, state: Any = None, model: Any = None) -> Any:
            if state is None and model is None:
                state = {"hidden": np.full((len(batch), 1), 5.0)}
            return forward(batch, state=state, model=model)

        self.policy.forward = given
        try:
            return update(self, batch)
        finally:
            del self.policy.forward

    monkeypatch.setattr(DQN, "_update_with_batch", with_state)
    assert {s.state_in for s in _sequences(ADAPTER.run_recurrent(PAD))} == {(5, 6, 7, 8)}
