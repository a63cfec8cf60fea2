"""The TorchRL adapter's recurrent runs (xpspec.adapters.torchrl_recurrent): what it records of
TorchRL 0.14.1's GRUModule, SliceSampler, BurnInTransform and DQNLoss on scenarios small enough
to name every expected value. Skipped when TorchRL is not installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torchrl")

from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.adapters.torchrl_recurrent import CountingCore, run_recurrent
from xpspec.conformance.checks.recurrent import rollout_of
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace, TrainSequence

ADAPTER = TorchRLAdapter()
TWO = EnvSpec(num_envs=2, schedules=(FixedSchedule(3), FixedSchedule(5)))


def _sequences(trace: Trace) -> list[TrainSequence]:
    return [e for e in trace.events if isinstance(e, TrainSequence)]


def test_declares_recurrent() -> None:
    assert "recurrent" in ADAPTER.info().capabilities


def test_rollout_state_is_the_count_since_reset() -> None:
    trace = ADAPTER.run_recurrent(RecurrentScenario(TWO, steps=8, sequence_length=4))
    received = rollout_of(trace).state
    assert received, "no EnvStep recorded"
    assert all(state == t for (_, _, t), state in received.items())


def test_cross_chunks_start_from_the_stored_state_and_reset_at_first() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=12, sequence_length=4, batch_size=3, draws=2, seed=1)
    )
    received = rollout_of(trace).state
    sequences = _sequences(trace)
    assert len(sequences) == 6
    crossing = 0
    for s in sequences:
        assert len(s.items) == 4 and None not in s.items
        first = s.items[0]
        assert first is not None
        assert s.state_in[0] == received[tuple(first)]  # the stored state
        for j in range(1, 4):
            item = s.items[j]
            assert item is not None
            expected = 0 if item[2] == 0 else s.state_in[j - 1] + 1
            crossing += item[2] == 0
            assert s.state_in[j] == expected, s
        assert s.loss_mask == (1, 1, 1, 1)
    assert crossing, "no chunk crossed an episode end: the scenario tests nothing"


def test_pad_slices_are_masked_by_the_loss_after_their_episode() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=12, sequence_length=4, boundary="pad", batch_size=3, seed=3)
    )
    padded = 0
    for s in _sequences(trace):
        real = [i for i in s.items if i is not None]
        assert len({(i[0], i[1]) for i in real}) == 1, s  # one episode
        for j, item in enumerate(s.items):
            assert s.loss_mask[j] == (0 if item is None else 1), s
            padded += item is None
    assert padded, "no slice was padded: the scenario tests nothing"


def test_pad_with_one_stored_step_per_env() -> None:
    # one frame per env: every slice is that frame and padding the loss masks
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=1, sequence_length=3, boundary="pad", batch_size=2)
    )
    for s in _sequences(trace):
        assert s.items[1:] == (None, None) and s.loss_mask == (1, 0, 0), s
        assert s.items[0] is not None and s.items[0][2] == 0 and s.state_in[0] == 0, s


def test_burn_in_positions_get_no_gradient() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=12, sequence_length=4, burn_in=2, boundary="pad", seed=3)
    )
    for s in _sequences(trace):
        assert s.loss_mask[:2] == (0, 0), s
        assert all(m == 1 for m, i in zip(s.loss_mask[2:], s.items[2:]) if i is not None), s


def test_zero_start_trains_every_sequence_from_zeros() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=12, sequence_length=4, batch_size=3, initial_state="zeros")
    )
    sequences = _sequences(trace)
    assert sequences
    assert all(s.state_in[0] == 0 for s in sequences)
    assert any(s.items[0] is not None and s.items[0][2] > 0 for s in sequences), (
        "no mid-episode start"
    )


def test_zero_start_with_burn_in_stops_where_burn_in_transform_raises() -> None:
    trace = ADAPTER.run_recurrent(
        RecurrentScenario(TWO, steps=8, sequence_length=4, burn_in=2, initial_state="zeros")
    )
    assert not _sequences(trace)
    assert "has no attribute 'shape'" in trace.header["stopped"]


def test_the_loss_mask_is_the_one_the_loss_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    # a DQNLoss told to read no mask trains the padding: the recorded masks follow the loss
    import xpspec.adapters.torchrl_recurrent as module

    class Unmasked(module.DQNLoss):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.loss_mask_key = None

    sc = RecurrentScenario(TWO, steps=12, sequence_length=4, boundary="pad", batch_size=3, seed=3)
    masked = [s.loss_mask for s in _sequences(ADAPTER.run_recurrent(sc))]
    monkeypatch.setattr(module, "DQNLoss", Unmasked)
    unmasked = _sequences(ADAPTER.run_recurrent(sc))
    assert any(0 in m for m in masked)
    assert all(s.loss_mask == (1, 1, 1, 1) for s in unmasked), unmasked


class _Skewed(CountingCore):
    """A core that counts in steps of 2: what the rollout and training record must change."""

    def __init__(self) -> None:
        super().__init__()
        with __import__("torch").no_grad():
            self.step.fill_(2.0)


def test_recorded_states_come_from_the_network_that_ran() -> None:
    sc = RecurrentScenario(TWO, steps=8, sequence_length=4, batch_size=2, seed=1)
    plain = run_recurrent(sc)
    skewed = run_recurrent(sc, _Skewed())
    assert all(state == 2 * t for (_, _, t), state in rollout_of(skewed).state.items())
    assert [s.state_in for s in _sequences(plain)] != [s.state_in for s in _sequences(skewed)]
    for s in _sequences(skewed):
        for j in range(1, len(s.items)):
            item = s.items[j]
            if item is not None and item[2] != 0:
                assert s.state_in[j] == s.state_in[j - 1] + 2
