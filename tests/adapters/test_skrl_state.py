"""The skrl adapter's PPO_RNN trainer row (whole-buffer scenarios, observable ``state``): what it
records of skrl's own rollout states, schedule and mini-batches, on a scenario small enough to
derive every value by hand, and that perturbing skrl changes the verdicts. Skipped when skrl is
not installed."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("skrl")

import torch
from skrl.agents.torch.ppo import PPO_RNN

from tests.adapters.whole_buffer_runs import reference_context, whole_buffer_scenario
from xpspec.adapters.skrl import SkrlAdapter
from xpspec.adapters.skrl_state import ppo_plan
from xpspec.adapters.skrl_tlb import SkrlTlbAdapter
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.timesteps import check_state_reset
from xpspec.conformance.checks.train_accounting import check_updates_per_call
from xpspec.conformance.checks.windows import check_whole_buffer
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import ExcludeSteps, RewardTransform
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule

F, M, L = 0, 1, 2
ADAPTER = SkrlAdapter()


def test_info_declares_state() -> None:
    assert "state" in ADAPTER.info().capabilities
    assert "state" in SkrlTlbAdapter().info().capabilities


def test_the_policy_state_is_the_state_ppo_rnn_handed_the_module() -> None:
    # PPO_RNN.record_transition zeroes the state after the transition into t = 2 (the LAST):
    # the policy acts on t = 2 from 0 and on the next episode's t = 0 from 1
    # (timestep.state-reset finding), in both envs alike.
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.t for s in steps] == [(t, t) for t in (0, 1, 2, 0, 1, 2, 0, 1)]
    assert [s.step_type[0] for s in steps] == [F, M, L, F, M, L, F, M]
    assert [s.policy_state for s in steps] == [(p, p) for p in (0, 1, 0, 1, 2, 0, 1, 2)]
    with pytest.raises(CheckFailure, match="policy state"):
        check_state_reset(whole_buffer_scenario(), trace, reference_context())


def test_iterations_end_at_ppo_rnns_updates_on_its_whole_memory() -> None:
    # rollouts = 4: one update after every 4 timesteps, on the memory's 8 rows cut env after
    # env into 4 sequences of 2 (chunks), in mini_batches = 4 / 2 parts, one epoch.
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [4, 4]
    assert [(c.iteration, c.status, c.stored_total) for c in trace.of_kind("train_call")] == [
        (1, "trained", 8),
        (2, "trained", 16),
    ]
    updates = list(trace.of_kind("update"))
    assert [(u.iteration, u.index) for u in updates] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert updates[0].windows == (((0, 0, 0), (0, 0, 1)), ((0, 0, 2), (0, 1, 0)))
    assert updates[1].windows == (((1, 0, 0), (1, 0, 1)), ((1, 0, 2), (1, 1, 0)))
    assert updates[2].windows == (((0, 1, 1), (0, 1, 2)), ((0, 2, 0), (0, 2, 1)))
    assert all(mask == (1, 1) for u in updates for mask in u.loss_mask)
    check_whole_buffer(whole_buffer_scenario(), trace, reference_context())
    check_updates_per_call(whole_buffer_scenario(), trace, reference_context())
    (end,) = trace.of_kind("run_end")
    assert (end.iterations, end.env_steps, end.env) == (2, 16, ())


def test_stores_are_read_back_from_ppo_rnns_memory() -> None:
    # terminated and truncated are both stored: the LAST follows a terminated row (discount 0,
    # reward 2), the next episode's first row the LAST's reset row (FIRST, reward 0); the
    # rewards_shaper shapes what the memory holds.
    trace = ADAPTER.run_trainer(whole_buffer_scenario(RewardTransform(scale=2, shift=1)))
    stores = list(trace.of_kind("store"))
    assert [s.step_type[0] for s in stores] == [F, M, L, F, M, L, F, M]
    assert [s.reward[0] for s in stores[:4]] == [0.0, 3.0, 5.0, 1.0]
    assert [s.discount[0] for s in stores[:4]] == [1.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"mode": "on-policy", "whole_buffer": False, "clear": "none"}, "keeps none"),
        ({"clear": "keep-one-step"}, "keep-one-step"),
        ({"clear": "none", "capacity": 8}, "memory_size = rollouts"),
        ({"capacity": 3, "mini_batch_length": 1}, "memory_size = rollouts"),
        ({"mini_batch_length": 3, "capacity": 8}, "not dividing"),
        ({"mini_batch_size": 3}, "mini_batches is a count"),
        ({"initial_collect_steps": 2}, "learning_starts"),
        ({"counter_mode": "per-mini-batch"}, "counts no gradient steps"),
        ({"unroll_length": Fraction(1, 2), "num_iterations": 8}, "integer number"),
        ({"preprocess": ExcludeSteps(2, 0)}, "rewards_shaper"),
    ],
)
def test_what_skrl_cannot_express_is_unsupported(knobs: dict[str, object], match: str) -> None:
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(whole_buffer_scenario(**knobs))


def test_the_plan_is_skrls_configuration() -> None:
    plan = ppo_plan(whole_buffer_scenario(num_updates_per_train_iter=3, mini_batch_size=1))
    assert (plan.rollouts, plan.sequence_length, plan.learning_epochs) == (4, 2, 3)
    assert (plan.mini_batches, plan.timesteps) == (4, 8)


def test_the_dqn_rows_traces_say_their_policy_holds_no_state() -> None:
    sampled = TrainerScenario(EnvSpec(2, (FixedSchedule(2),)), TrainerConfig(num_iterations=2))
    trace = ADAPTER.run_trainer(sampled)
    assert "DQN.act" in trace.header["stateless"]
    with pytest.raises(Unsupported, match="holds no state"):
        check_state_reset(sampled, trace, reference_context())


def test_a_rollout_that_resets_at_first_passes_the_state_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbing skrl itself: a PPO_RNN.record_transition that keeps the state of an env whose
    # transition ended and zeroes it one transition later (so the policy acts on the LAST with
    # its count and on the FIRST from 0) gives states equal to t: the check passes.
    original = PPO_RNN.record_transition

    def record_transition(self: Any, **kwargs: Any) -> None:
        before = [s.clone() for s in self._rnn_final_states["policy"]]
        original(self, **kwargs)
        ended = (kwargs["terminated"] | kwargs["truncated"]).view(-1)
        previous = getattr(self, "_previous_ended", torch.zeros_like(ended))
        for state, kept in zip(self._rnn_final_states["policy"], before, strict=True):
            state[:, ended] = kept[:, ended]
            state[:, previous] = 0
        self._previous_ended = ended.clone()

    monkeypatch.setattr(PPO_RNN, "record_transition", record_transition)
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    steps = list(trace.of_kind("env_step"))
    assert [s.policy_state for s in steps] == [(t, t) for t in (0, 1, 2, 0, 1, 2, 0, 1)]
    check_state_reset(whole_buffer_scenario(), trace, reference_context())


def test_the_schedule_is_ppo_rnns(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbing skrl itself: a PPO_RNN that skips its first update makes one iteration of 8
    # vector steps and one train call, which the whole-buffer and schedule checks then see.
    original = PPO_RNN.post_interaction

    def post_interaction(self: Any, *, timestep: int, timesteps: int) -> None:
        if timestep < self.cfg.rollouts:
            self._rollout += 1
            return
        original(self, timestep=timestep, timesteps=timesteps)

    monkeypatch.setattr(PPO_RNN, "post_interaction", post_interaction)
    trace = ADAPTER.run_trainer(whole_buffer_scenario())
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [8]
    assert [c.iteration for c in trace.of_kind("train_call")] == [1]


def test_chunks_of_one_item_follow_the_memory_order_epoch_after_epoch() -> None:
    # T = 1: Memory.sample_all returns the rows in memory order (timestep after timestep,
    # every env in each), cut into mini_batches = 4 / 2 slices; learning_epochs = 2 repeats
    # them.
    scenario = whole_buffer_scenario(
        unroll_length=Fraction(2), capacity=2, mini_batch_length=1, num_updates_per_train_iter=2
    )
    trace = ADAPTER.run_trainer(scenario)
    first = [u.windows for u in trace.of_kind("update") if u.iteration == 1]
    assert first == [(((0, 0, 0),), ((1, 0, 0),)), (((0, 0, 1),), ((1, 0, 1),))] * 2
    check_whole_buffer(scenario, trace, reference_context())
    check_updates_per_call(scenario, trace, reference_context())
