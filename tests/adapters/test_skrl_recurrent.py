"""The skrl adapter's recurrent operation (``PPO_RNN`` with a counting recurrent model): what
it records of skrl's own rollout, stored states, sequences and loss, on a scenario small
enough to derive every value by hand. Skipped when skrl is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("skrl")

from xpspec.adapters.skrl import SkrlAdapter
from xpspec.adapters.skrl_recurrent import recurrent_plan, run_recurrent
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace, TrainSequence

F, M, L = 0, 1, 2


def _scenario(ending: str = "terminated", **fields: object) -> RecurrentScenario:
    """Two envs, episodes of 3 transitions (items t = 0 .. 3), 8 timesteps, sequences of 4."""
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(3, ending),))  # type: ignore[arg-type]
    values: dict[str, object] = {
        "env": env,
        "steps": 8,
        "sequence_length": 4,
        "batch_size": 2,
        "draws": 2,
    }
    values.update(fields)
    return RecurrentScenario(**values)  # type: ignore[arg-type]


def _sequences(trace: Trace) -> list[TrainSequence]:
    return [e for e in trace.events if isinstance(e, TrainSequence)]


def test_info_declares_recurrent() -> None:
    assert "recurrent" in SkrlAdapter().info().capabilities


def test_the_rollout_records_the_state_the_module_received() -> None:
    # skrl zeroes the state after the transition into t = 3 (the LAST): the policy acts on
    # t = 3 from 0 and on the next episode's t = 0 from 1 (timestep.state-reset finding).
    trace = SkrlAdapter().run_recurrent(_scenario())
    steps = list(trace.of_kind("env_step"))
    assert len(steps) == 8
    assert [s.t for s in steps] == [(t, t) for t in (0, 1, 2, 3, 0, 1, 2, 3)]
    assert [s.episode[0] for s in steps] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [s.step_type[0] for s in steps] == [F, M, M, L, F, M, M, L]
    assert [s.policy_state for s in steps] == [(p, p) for p in (0, 1, 2, 0, 1, 2, 3, 0)]
    assert all(a in (0, 1) for s in steps for a in s.action)


def test_the_update_trains_every_env_in_sequences_of_its_rows() -> None:
    # sample_all: env 0's rows, then env 1's, in sequences of 4; mini_batches = 4 / 2 = 2 in
    # one epoch. A sequence starts from the stored state of its first row: 0 at row 0, and
    # at row 4 (t = 0, received 1) the state the policy returned there, 2 (the stored-state
    # finding); the documented model zeroes the state after the terminated row t = 2.
    sequences = _sequences(run_recurrent(_scenario()))
    assert [(s.draw, s.index) for s in sequences] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for s, (env, episode) in zip(sequences, [(0, 0), (0, 1), (1, 0), (1, 1)]):
        assert s.items == tuple((env, episode, t) for t in range(4))
    assert [s.state_in for s in sequences] == [(0, 1, 2, 0), (2, 3, 4, 0)] * 2
    assert all(s.loss_mask == (1, 1, 1, 1) for s in sequences)


def test_sequences_straddle_envs_when_rollouts_are_not_a_multiple_of_the_length() -> None:
    # 6 rows per env in sequences of 4: the second sequence is env 0's rows 4, 5 then env 1's
    # rows 0, 1 (Memory.sample_all's env-major order); it carries the state across.
    trace = run_recurrent(_scenario(steps=6, batch_size=3, draws=1))
    (middle,) = [s for s in _sequences(trace) if s.index == 1]
    assert middle.items == ((0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1))
    assert middle.state_in == (2, 3, 4, 5)


def test_a_model_that_never_resets_inside_a_sequence_changes_what_is_recorded() -> None:
    # Perturbing skrl's side (the model's reset inside a sequence) changes the recorded states:
    # nothing of them is the adapter's.
    sequences = _sequences(run_recurrent(_scenario(), reset_on="never"))
    assert [s.state_in for s in sequences] == [(0, 1, 2, 3), (2, 3, 4, 5)] * 2


def test_the_documented_model_does_not_reset_after_a_truncated_row() -> None:
    # skrl's rollout zeroes the state after terminated | truncated, the documented model
    # after terminated only: on truncated episodes the training state runs on where the
    # rollout's was reset; a model resetting on both flags follows the rollout.
    documented = _sequences(run_recurrent(_scenario("truncated")))
    assert documented[0].state_in == (0, 1, 2, 3)
    ended = _sequences(run_recurrent(_scenario("truncated"), reset_on="ended"))
    assert ended[0].state_in == (0, 1, 2, 0)


def test_epochs_repeat_the_mini_batches() -> None:
    plan = recurrent_plan(_scenario(draws=6))
    assert (plan.mini_batches, plan.learning_epochs) == (2, 3)
    sequences = _sequences(run_recurrent(_scenario(batch_size=4, draws=2)))
    assert [(s.draw, s.index) for s in sequences] == [(d, i) for d in (0, 1) for i in range(4)]
    assert [s.items for s in sequences[:4]] == [s.items for s in sequences[4:]]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"burn_in": 1}, "burn_in 1"),
        ({"boundary": "pad", "steps": 2}, "boundary 'pad'"),
        ({"initial_state": "zeros"}, "initial_state 'zeros'"),
        ({"steps": 5, "sequence_length": 3}, "10 rows"),
        ({"batch_size": 3}, "batch_size 3 of 4 sequences"),
        ({"draws": 3}, "draws 3 with 2 mini-batches"),
        ({"env": EnvSpec(1), "steps": 1, "sequence_length": 1, "batch_size": 1}, "one row"),
    ],
)
def test_what_skrl_cannot_express_is_unsupported(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(Unsupported, match=r"skrl 2\.1\.1") as info:
        recurrent_plan(_scenario(**fields))
    assert reason in str(info.value)


def test_goal_observations_are_read_through_skrls_unflattening() -> None:
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(3),), goals=True)
    scenario = RecurrentScenario(env=env, steps=8, sequence_length=4, batch_size=2, draws=2)
    sequences = _sequences(run_recurrent(scenario))
    assert sequences[1].items == tuple((0, 1, t) for t in range(4))
    assert sequences[1].state_in == (2, 3, 4, 0)


def test_an_agent_that_stores_the_received_state_changes_what_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbing skrl itself: a PPO_RNN whose record_transition keeps its initial and final
    # states apart (a copy of the dict instead of the dict) stores the state the policy
    # received, and the sequence starting at t = 0 of episode 1 then starts from 1, not 2.
    from skrl.agents.torch.ppo import PPO_RNN

    original = PPO_RNN.record_transition

    def record_transition(self: PPO_RNN, **kwargs: object) -> None:
        original(self, **kwargs)
        self._rnn_initial_states = dict(self._rnn_final_states)

    monkeypatch.setattr(PPO_RNN, "record_transition", record_transition)
    sequences = _sequences(run_recurrent(_scenario()))
    assert [s.state_in for s in sequences] == [(0, 1, 2, 0), (1, 2, 3, 0)] * 2
