"""The RLlib adapter's recurrent row: what it records of RLlib 2.60.0's stateful-module machinery
(PPO's rollout chunks, DQN's replayed sequences with a burn-in), and that what it records moves
when the framework side moves. Skipped when RLlib is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.rllib")

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.adapters.rllib_recurrent import run_recurrent
from xpspec.conformance.validate import validate_trace
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.identity import ItemId
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Item, Trace, TrainSequence

pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment")

LAST = 2

# Two envs, episodes of 4 transitions (t = 0..4, LAST at 4), 9 vector steps in two PPO
# iterations: the first takes the observations of vector steps 0..3, the second those of 4..8,
# so episode 0 is cut at t = 3 and goes on in a continuation chunk.
PPO = RecurrentScenario(
    EnvSpec(2, (FixedSchedule(4),)), steps=9, sequence_length=3, boundary="pad", batch_size=2
)
# Episodes of 5 transitions, 12 vector steps, sequences of 4 with a burn-in of 1 (DQN).
DQN = RecurrentScenario(
    EnvSpec(2, (FixedSchedule(5),)),
    steps=12,
    sequence_length=4,
    burn_in=1,
    boundary="pad",
    batch_size=2,
)


def _acted(trace: Trace) -> dict[Item, tuple[int, int]]:
    """Item -> (state the rollout module received, step type)."""
    out = {}
    for event in trace.of_kind("env_step"):
        for e, k, t, state, kind in zip(
            event.env, event.episode, event.t, event.policy_state, event.step_type, strict=True
        ):
            out[ItemId(e, k, t)] = (state, kind)
    return out


def _real(sequence: TrainSequence) -> list[int]:
    return [i for i, item in enumerate(sequence.items) if item is not None]


@pytest.fixture(scope="module")
def ppo_trace() -> Trace:
    trace = RLlibAdapter().run_recurrent(PPO)
    validate_trace(PPO, trace)
    return trace


@pytest.fixture(scope="module")
def dqn_trace() -> Trace:
    trace = RLlibAdapter().run_recurrent(DQN)
    validate_trace(DQN, trace)
    return trace


def test_info_declares_recurrent() -> None:
    assert "recurrent" in RLlibAdapter().info().capabilities


def test_rollout_states_come_from_the_env_runner(ppo_trace: Trace) -> None:
    events = list(ppo_trace.of_kind("env_step"))
    assert len(events) == PPO.steps
    # The env runner hands the module get_initial_state() at each FIRST, its STATE_OUT after.
    assert [e.t for e in events] == [(t, t) for t in (0, 1, 2, 3, 4, 0, 1, 2, 3)]
    assert [e.policy_state for e in events] == [e.t for e in events]


def test_ppo_pieces_start_from_the_stored_state(ppo_trace: Trace) -> None:
    acted = _acted(ppo_trace)
    sequences = list(ppo_trace.of_kind("train_sequence"))
    assert {s.draw for s in sequences} == {0, 1}
    for s in sequences:
        assert len(s.items) == PPO.sequence_length
        real = _real(s)
        assert real == list(range(len(real))), "padding only after the real positions"
        first = s.items[0]
        assert first is not None
        assert s.state_in[0] == acted[first][0]
    # The continuation chunk of episode 0 (second iteration) starts at t = 3 from the state
    # stored at t = 2 (its lookback): 3, as in the rollout.
    continued = [s for s in sequences if s.draw == 1 and s.items[0] == ItemId(0, 0, 3)]
    assert continued and all(s.state_in[0] == 3 for s in continued)


def test_ppo_loss_mask_drops_padding_and_the_bootstrap_step(ppo_trace: Trace) -> None:
    sequences = list(ppo_trace.of_kind("train_sequence"))
    for s in sequences:
        for i, item in enumerate(s.items):
            if item is None:
                assert s.loss_mask[i] == 0
    # AddOneTsToEpisodesAndTruncate's bootstrap step (a chunk's newest observation) is in
    # the sequence but out of the loss: episode 0's t = 3 in the first iteration (MID) and
    # its t = 4 (LAST) in the second.
    cut = [s for s in sequences if s.draw == 0 and s.items[0] == ItemId(0, 0, 3)]
    assert cut and all(s.loss_mask[0] == 0 for s in cut)
    trained = [s for s in sequences if s.draw == 1 and s.items[0] == ItemId(0, 0, 3)]
    assert trained and all(s.loss_mask[:2] == (1, 0) for s in trained)
    full = [s for s in sequences if s.items[0] == ItemId(0, 0, 0)]
    assert full and all(s.loss_mask == (1, 1, 1) for s in full)


def test_dqn_burn_in_positions_are_out_of_the_loss(dqn_trace: Trace) -> None:
    acted = _acted(dqn_trace)
    sequences = list(dqn_trace.of_kind("train_sequence"))
    assert sequences
    for s in sequences:
        real = _real(s)
        assert real == list(range(len(real))) and len(real) > DQN.burn_in
        assert s.state_in[0] == acted[s.items[0]][0]  # type: ignore[index]
        assert s.loss_mask[: DQN.burn_in] == (0,) * DQN.burn_in
        assert all(s.loss_mask[i] == 1 for i in real[DQN.burn_in :])
        assert all(s.loss_mask[i] == 0 for i in range(len(real), len(s.items)))


def test_recorded_values_follow_the_framework_side() -> None:
    # The module's get_initial_state perturbed (5 instead of 0): RLlib hands it out at every
    # reset and the recording moves with it, in the rollout and in training.
    trace = run_recurrent(PPO, reset_to=5.0)
    events = list(trace.of_kind("env_step"))
    assert [e.policy_state for e in events] == [tuple(t + 5 for t in e.t) for e in events]
    for s in trace.of_kind("train_sequence"):
        assert s.items[0] is not None
        assert s.state_in[0] == s.items[0][2] + 5
    # A longer burn-in (DQNConfig.burn_in_len 2) moves the mask the loss applies.
    longer = RecurrentScenario(
        DQN.env, steps=12, sequence_length=4, burn_in=2, boundary="pad", batch_size=2
    )
    for s in run_recurrent(longer).of_kind("train_sequence"):
        assert s.loss_mask[:2] == (0, 0) and s.loss_mask[2] == 1


@pytest.mark.parametrize(
    ("change", "file"),
    [
        ({"boundary": "cross"}, "add_time_dim_to_batch_and_zero_pad.py"),
        ({"initial_state": "zeros"}, "add_states_from_episodes_to_batch.py"),
        ({"steps": 1}, "single_agent_env_runner.py"),  # no transition before the last step
    ],
)
def test_what_rllib_cannot_express_is_unsupported(change: dict[str, object], file: str) -> None:
    fields: dict[str, object] = {"steps": 9, "sequence_length": 3, "boundary": "pad", **change}
    sc = RecurrentScenario(PPO.env, **fields)  # type: ignore[arg-type]
    with pytest.raises(Unsupported) as raised:
        run_recurrent(sc)
    assert "RLlib 2.60.0" in str(raised.value) and file in str(raised.value.link)
