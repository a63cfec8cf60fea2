"""The AgileRL adapter's recurrent PPO trainer row (``train_on_policy``, whole-buffer scenarios,
observable ``state``): what it records of AgileRL's own rollout states, schedule and BPTT
sequences, on a scenario small enough to derive every value by hand, and that perturbing
AgileRL changes the verdicts. Skipped when AgileRL is not installed."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("agilerl")

import torch
from agilerl.algorithms import PPO
from agilerl.components.rollout_buffer import RolloutBuffer

from tests.adapters.whole_buffer_runs import reference_context, whole_buffer_scenario
from xpspec.adapters.agilerl import AgileRLAdapter
from xpspec.adapters.agilerl_state import ppo_plan
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.timesteps import check_state_reset
from xpspec.conformance.checks.train_accounting import check_updates_per_call
from xpspec.conformance.checks.windows import check_whole_buffer
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import RewardTransform
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule

F, M, L = 0, 1, 2
ADAPTER = AgileRLAdapter()


def _item(env: int, episode: int, t: int) -> tuple[int, int, int]:
    return (env, episode, t)


def test_the_policy_state_is_the_state_the_rollout_handed_the_encoder() -> None:
    # collect_rollouts_recurrent resets the state after the step into t = 2 (the LAST): the
    # policy acts on t = 2 from 0 and on the next episode's t = 0 from 1 (timestep.state-reset
    # finding); the state goes on from one collection to the next (t = 1 of iteration 2: 2).
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.t for s in steps] == [(t, t) for t in (0, 1, 2, 0, 1, 2, 0, 1)]
    assert [s.step_type[0] for s in steps] == [F, M, L, F, M, L, F, M]
    assert [s.policy_state for s in steps] == [(p, p) for p in (0, 1, 0, 1, 2, 0, 1, 2)]
    assert "stateless" not in trace.header
    with pytest.raises(CheckFailure, match="policy state"):
        check_state_reset(whole_buffer_scenario(), trace, reference_context())


def test_iterations_end_at_the_loops_learn_calls_on_its_bptt_sequences() -> None:
    # learn_step = 4 * 2: one collection of 4 vector steps, then PPO.learn. Iteration 1's rows
    # per env are t = 0, 1, 2, 0 (done after t = 1): pieces [0, 1] and [2, 0]; iteration 2's
    # t = 1, 2, 0, 1 (done at its first row): pieces [1] (padded) and [2, 0, 1], cut to [2, 0]
    # (its t = 1 left out). Two sequences a mini-batch, one epoch: two updates a call.
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [4, 4]
    assert [(c.iteration, c.status, c.stored_total) for c in trace.of_kind("train_call")] == [
        (1, "trained", 8),
        (2, "trained", 16),
    ]
    updates = list(trace.of_kind("update"))
    assert [(u.iteration, u.index) for u in updates] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    windows = [set(u.windows) for u in updates]
    assert windows[0] | windows[1] == {(_item(e, 0, 0), _item(e, 0, 1)) for e in (0, 1)} | {
        (_item(e, 0, 2), _item(e, 1, 0)) for e in (0, 1)
    }
    assert windows[2] | windows[3] == {(_item(e, 1, 1), None) for e in (0, 1)} | {
        (_item(e, 1, 2), _item(e, 2, 0)) for e in (0, 1)
    }
    masks = {w: m for u in updates for w, m in zip(u.windows, u.loss_mask, strict=True)}
    assert all(m == ((1, 0) if w[1] is None else (1, 1)) for w, m in masks.items())
    check_updates_per_call(whole_buffer_scenario(), trace, reference_context())
    with pytest.raises(CheckFailure, match="whole-buffer call 1"):
        check_whole_buffer(whole_buffer_scenario(), trace, reference_context())
    (end,) = trace.of_kind("run_end")
    assert (end.iterations, end.env_steps, end.env) == (2, 16, ())


def test_stores_are_read_back_from_the_rollout_buffer() -> None:
    # one done flag: the LAST follows a done row (discount 0, reward 2), the next episode's
    # first row the LAST's reset row (FIRST, reward 0)
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    stores = list(trace.of_kind("store"))
    assert [s.step_type[0] for s in stores] == [F, M, L, F, M, L, F, M]
    assert [s.reward[0] for s in stores[:4]] == [0.0, 1.0, 2.0, 0.0]
    assert [s.discount[0] for s in stores[:4]] == [1.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"mode": "on-policy", "whole_buffer": False, "clear": "none"}, "keeps no row"),
        ({"clear": "keep-one-step"}, "keep-one-step"),
        ({"clear": "none", "capacity": 8}, "reset by every collection"),
        ({"capacity": 3, "mini_batch_length": 1}, "reset by every collection"),
        ({"mini_batch_length": 3, "capacity": 8}, "not dividing"),
        ({"initial_collect_steps": 2}, "no learning delay"),
        ({"counter_mode": "per-mini-batch"}, "counts no gradient steps"),
        ({"unroll_length": Fraction(1, 2), "num_iterations": 8}, "whole vector steps"),
        ({"num_iterations": 0, "num_env_steps": 12}, "whole collections"),
        ({"preprocess": RewardTransform(scale=2, shift=1)}, "takes no memory"),
    ],
)
def test_what_agilerl_cannot_express_is_unsupported(knobs: dict[str, object], match: str) -> None:
    knobs = dict(knobs)
    preprocess = knobs.pop("preprocess", None)
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(whole_buffer_scenario(preprocess, **knobs))


def test_a_one_row_rollout_is_unsupported() -> None:
    one = TrainerScenario(
        EnvSpec(1, (FixedSchedule(1),)),
        TrainerConfig(num_iterations=1, unroll_length=Fraction(1), whole_buffer=True, capacity=1),
    )
    with pytest.raises(Unsupported, match="NaN for one row"):
        ADAPTER.run_trainer(one)


def test_the_plan_is_agilerls_configuration() -> None:
    plan = ppo_plan(whole_buffer_scenario(num_updates_per_train_iter=3, mini_batch_size=1))
    assert (plan.n_steps, plan.max_seq_len, plan.update_epochs) == (4, 2, 3)
    assert (plan.batch_size, plan.max_steps) == (1, 16)
    assert ppo_plan(whole_buffer_scenario(num_iterations=0, num_env_steps=16)).max_steps == 16


def test_the_dqn_rows_traces_say_their_policy_holds_no_state() -> None:
    sampled = TrainerScenario(EnvSpec(2, (FixedSchedule(2),)), TrainerConfig(num_iterations=2))
    trace = ADAPTER.run_trainer(sampled)
    assert "DQN.get_action" in trace.header["stateless"]
    with pytest.raises(Unsupported, match="holds no state"):
        check_state_reset(sampled, trace, reference_context())


def test_a_rollout_that_resets_at_first_passes_the_state_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbing AgileRL itself: a PPO.get_action that undoes the rollout's reset of an env
    # whose step ended (handing the encoder the state it returned before) and resets the env
    # one act later (so the policy acts on the LAST with its count and on the FIRST from 0)
    # gives states equal to t: the check passes.
    original = PPO.get_action
    memo: dict[str, Any] = {}

    def get_action(self: Any, obs: Any, *args: Any, **kwargs: Any) -> Any:
        state = kwargs.get("hidden_state")
        if state is None:
            return original(self, obs, *args, **kwargs)
        state = {k: v.clone() for k, v in state.items()}
        out, reset = memo.get("out"), memo.get("reset", {})
        if out is not None:
            ended = {k: (state[k] != out[k]).reshape(-1) for k in state}
            for k in state:
                state[k][:, ended[k]] = out[k][:, ended[k]]
                if k in reset:
                    state[k][:, reset[k]] = 0
            memo["reset"] = ended
        result = original(self, obs, *args, **{**kwargs, "hidden_state": state})
        memo["out"] = {k: v.clone() for k, v in result[-1].items()}
        return result

    monkeypatch.setattr(PPO, "get_action", get_action)
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.policy_state for s in steps] == [(t, t) for t in (0, 1, 2, 0, 1, 2, 0, 1)]
    check_state_reset(whole_buffer_scenario(), trace, reference_context())


def test_chunks_cut_from_the_oldest_row_pass_the_whole_buffer_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbing AgileRL itself: a RolloutBuffer.prepare_sequence_tensors that sees no done
    # row cuts each env's rows into chunks of max_seq_len from its oldest row, the spec's
    # chunks: the whole-buffer check then passes (unperturbed, it fails at call 1).
    original = RolloutBuffer.prepare_sequence_tensors

    def prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
        dones = self.buffer["dones"].clone()
        self.buffer["dones"] = torch.zeros_like(dones)
        try:
            return original(self, *args, **kwargs)
        finally:
            self.buffer["dones"] = dones

    monkeypatch.setattr(RolloutBuffer, "prepare_sequence_tensors", prepare)
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    assert all(None not in w for u in trace.of_kind("update") for w in u.windows)
    check_whole_buffer(whole_buffer_scenario(), trace, reference_context())
    check_updates_per_call(whole_buffer_scenario(), trace, reference_context())


def test_the_schedule_is_the_loops() -> None:
    # learn_step and the budget are AgileRL's: three iterations of 2 vector steps from
    # num_env_steps = 12 (ceil(evo_steps / learn_step) collections of n_steps = 2).
    scenario = whole_buffer_scenario(num_iterations=0, num_env_steps=12, unroll_length=Fraction(2))
    trace = ADAPTER.run_trainer(scenario)
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [2, 2, 2]
    assert [c.stored_total for c in trace.of_kind("train_call")] == [4, 8, 12]
