"""The AgileRL adapter's recurrent operation (recurrent ``PPO`` with a counting encoder as its
actor and critic network): what it records of AgileRL's own rollout, stored states, sequences
and loss, on a scenario small enough to derive every value by hand. Skipped when AgileRL is
not installed."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("agilerl")

import torch

from xpspec.adapters.agilerl import AgileRLAdapter
from xpspec.adapters.agilerl_recurrent import CountingEncoder, run_recurrent
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace, TrainSequence

F, M, L = 0, 1, 2


def _scenario(**fields: object) -> RecurrentScenario:
    """Two envs, terminated episodes of 3 transitions (items t = 0 .. 3), 8 vector steps,
    padded sequences of at most 4, 2 sequences a mini-batch, 2 epochs."""
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(3, "terminated"),))
    values: dict[str, object] = {
        "env": env,
        "steps": 8,
        "sequence_length": 4,
        "boundary": "pad",
        "batch_size": 2,
        "draws": 2,
    }
    values.update(fields)
    return RecurrentScenario(**values)  # type: ignore[arg-type]


def _sequences(trace: Trace) -> list[TrainSequence]:
    return [e for e in trace.events if isinstance(e, TrainSequence)]


def _expected(env: int) -> list[tuple[object, ...]]:
    """Env ``env``'s sequences: the rows up to the done row of episode 0 (t = 0 .. 2), the
    final observation's row and episode 1's rows up to its done row, its final observation's
    row; each from its first row's stored state 0, padding masked out."""
    return [
        (((env, 0, 0), (env, 0, 1), (env, 0, 2), None), (0, 1, 2, 3), (1, 1, 1, 0)),
        (((env, 0, 3), (env, 1, 0), (env, 1, 1), (env, 1, 2)), (0, 1, 2, 3), (1, 1, 1, 1)),
        (((env, 1, 3), None, None, None), (0, 1, 2, 3), (1, 0, 0, 0)),
    ]


def test_info_declares_recurrent() -> None:
    assert "recurrent" in AgileRLAdapter().info().capabilities


def test_the_rollout_records_the_state_the_encoder_received() -> None:
    # AgileRL resets the state after the step into t = 3 (the LAST): the policy acts on t = 3
    # from 0 and on the next episode's t = 0 from 1 (timestep.state-reset finding).
    trace = AgileRLAdapter().run_recurrent(_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.t for s in steps] == [(t, t) for t in (0, 1, 2, 3, 0, 1, 2, 3)]
    assert [s.episode[0] for s in steps] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [s.step_type[0] for s in steps] == [F, M, M, L, F, M, M, L]
    assert [s.discount[0] for s in steps] == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert [s.policy_state for s in steps] == [(p, p) for p in (0, 1, 2, 0, 1, 2, 3, 0)]
    assert all(a in (0, 1) for s in steps for a in s.action)


def test_every_epoch_trains_every_sequence_in_mini_batches() -> None:
    # 6 sequences (3 per env) in mini-batches of 2: 3 forwards an epoch, 2 epochs, each epoch
    # every sequence once, in AgileRL's randperm order.
    sequences = _sequences(run_recurrent(_scenario()))
    assert [(s.draw, s.index) for s in sequences] == [(d, i) for d in range(6) for i in (0, 1)]
    expected = Counter(_expected(0) + _expected(1))
    for epoch in (0, 1):
        got = Counter((s.items, s.state_in, s.loss_mask) for s in sequences if s.draw // 3 == epoch)
        assert got == expected


def test_a_shorter_max_seq_len_chunks_an_episode_and_leaves_out_its_rest() -> None:
    # max_seq_len 3: the piece of rows 3 .. 6 (4 rows) gives one chunk of 3 (rows 3 .. 5);
    # row 6 (t = 2 of episode 1) is in no sequence (BPTTSequenceType.CHUNKED).
    sequences = _sequences(run_recurrent(_scenario(sequence_length=3, draws=1)))
    env0 = sorted(s.items for s in sequences if s.items[0] is not None and s.items[0][0] == 0)
    assert env0 == sorted(
        [
            ((0, 0, 0), (0, 0, 1), (0, 0, 2)),
            ((0, 0, 3), (0, 1, 0), (0, 1, 1)),
            ((0, 1, 3), None, None),
        ]
    )


def test_the_states_are_agilerls_initial_and_stored_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbing AgileRL's side: a PPO whose initial hidden state counts from 10 changes what
    # the encoder received in the rollout and where each stored sequence starts; nothing of
    # the recorded states is the adapter's.
    from agilerl.algorithms import PPO

    initial = PPO.get_initial_hidden_state

    def from_ten(self: PPO, num_envs: int = 1) -> dict[str, torch.Tensor]:
        return {k: v + 10 for k, v in initial(self, num_envs).items()}

    monkeypatch.setattr(PPO, "get_initial_hidden_state", from_ten)
    trace = run_recurrent(_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.policy_state[0] for s in steps] == [10, 11, 12, 10, 11, 12, 13, 10]
    assert {s.state_in for s in _sequences(trace)} == {(10, 11, 12, 13)}


def test_the_encoder_counts_in_agilerls_hidden_state_layout() -> None:
    encoder = CountingEncoder("actor_encoder")
    x = torch.zeros(6, 3)  # 2 sequences of 3 steps
    out, state = encoder(x, hidden_state={"actor_encoder_count": torch.tensor([[[4.0], [7.0]]])})
    assert out.reshape(2, 3).tolist() == [[5, 6, 7], [8, 9, 10]]
    assert state["actor_encoder_count"].reshape(-1).tolist() == [7, 10]
    assert encoder.recorder.calls[0].received.tolist() == [[4, 5, 6], [7, 8, 9]]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"burn_in": 1}, "burn_in 1"),
        ({"boundary": "cross"}, "boundary 'cross'"),
        ({"initial_state": "zeros"}, "initial_state 'zeros'"),
    ],
)
def test_what_agilerl_cannot_express_is_unsupported(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(Unsupported, match=reason):
        run_recurrent(_scenario(**fields))
