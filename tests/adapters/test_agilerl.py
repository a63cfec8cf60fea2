"""The AgileRL adapter: what it records of AgileRL 2.58.0's own ReplayBuffer and Sampler, on
scenarios small enough to derive every expected value by hand. Skipped when AgileRL is not
installed."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("agilerl")

from tests.adapters.learner_scenarios import two_step_episodes
from xpspec.adapters.agilerl import AgileRLAdapter
from xpspec.adapters.agilerl_trainer import LoopConfig, loop_config
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeSteps,
    ExcludeTasks,
    OverwriteStepType,
    RewardTransform,
)
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import LearnerScenario, ReplayScenario, TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import EnvStep, IterationEnd, Resume, Trace

F, M, L = 0, 1, 2
ADAPTER = AgileRLAdapter()


def _replay(env: EnvSpec, capacity: int, fill: int, **sampling: Any) -> Trace:
    draws = sampling.pop("draws", 4)
    batch = sampling.pop("batch_size", 4)
    seed = sampling.pop("seed", 0)
    scenario = ReplayScenario(
        env, capacity, fill, SamplingSpec(**sampling), batch_size=batch, draws=draws, seed=seed
    )
    return ADAPTER.run_replay(scenario)


def _sampled(trace: Trace) -> list[tuple[Any, ...]]:
    return [d.windows for d in trace.of_kind("sampled")]


def test_info_names_the_installed_versions() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("agilerl", "2.58.0")
    assert info.capabilities == (
        "trainer",
        "checkpoint",
        "replay",
        "learner",
        "nstep",
        "priorities",
        "importance-weights",
        "recurrent",
        "state",
    )
    ADAPTER.smoke()


def test_every_vector_step_is_one_store_of_every_envs_row() -> None:
    # Two envs, terminated episodes of 2 transitions, 4 vector steps: the rows' obs are
    # t = 0, 1, 2 (the LAST, whose row holds the next FIRST as next_obs), then t = 0 of the
    # next episode; the reward into a step is t (0 at a FIRST), the LAST's discount 0.
    trace = _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4)
    stores = list(trace.of_kind("store"))
    assert [list(zip(s.env, s.episode, s.t)) for s in stores] == [
        [(0, 0, 0), (1, 0, 0)],
        [(0, 0, 1), (1, 0, 1)],
        [(0, 0, 2), (1, 0, 2)],
        [(0, 1, 0), (1, 1, 0)],
    ]
    assert [s.step_type for s in stores] == [(F, F), (M, M), (L, L), (F, F)]
    assert [s.reward for s in stores] == [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (0.0, 0.0)]
    assert [s.discount for s in stores] == [(1.0, 1.0), (1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]
    assert trace.header["stored_rows"] == 8


def test_each_env_keeps_its_newest_capacity_rows() -> None:
    # max_size = capacity * B = 6 rows for 2 envs and rings of 3: after 5 vector steps each
    # env holds t = 2, 3, 4 of its one long episode, and a batch of 6 is all of them.
    trace = _replay(EnvSpec(2, (FixedSchedule(100),)), capacity=3, fill=5, batch_size=6)
    assert trace.header["stored_rows"] == 6
    for windows in _sampled(trace):
        assert sorted(windows) == [((e, 0, t),) for e in (0, 1) for t in (2, 3, 4)]


def test_a_draw_before_any_row_is_an_empty_draw() -> None:
    # ReplayBuffer.sample asserts that something was stored; the adapter records the refusal.
    trace = _replay(EnvSpec(1, (FixedSchedule(4),)), capacity=4, fill=0, draws=2)
    assert _sampled(trace) == [(), ()]


def test_a_batch_larger_than_the_buffer_is_cut_to_it() -> None:
    # 3 rows stored, batches of 8: AgileRL returns the 3 rows, each once (finding, see
    # tests/adapters/test_agilerl_findings.py).
    trace = _replay(EnvSpec(1, (FixedSchedule(100),)), capacity=8, fill=3, batch_size=8)
    for windows in _sampled(trace):
        assert sorted(windows) == [((0, 0, 0),), ((0, 0, 1),), ((0, 0, 2),)]


@pytest.mark.parametrize(
    "sampling",
    [
        {"window_length": 2},
        {"period": 2},
        {"distribution": "env-balanced"},
        {"distribution": "uniform-episodes"},
    ],
)
def test_what_a_row_sampler_cannot_express_is_unsupported(sampling: dict[str, Any]) -> None:
    with pytest.raises(Unsupported, match=r"agilerl 2\.58\.0"):
        _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4, **sampling)


def test_prioritized_replay_reads_its_sum_tree_and_returns_its_weights() -> None:
    # alpha = 1: every row starts at mass 1 (the initial maximum); after draw 0 the sampled
    # rows hold their |td| and the rows stored next the largest priority seen.
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(100),)),
        capacity=3,
        fill_steps=3,
        batch_size=4,
        draws=2,
        priority=PrioritySpec(alpha=Fraction(1), beta=Fraction(1), add_steps=1),
    )
    trace = ADAPTER.run_replay(scenario)
    held = list(trace.of_kind("priorities"))
    assert list(held[0].mass) == [1.0, 1.0, 1.0]
    drawn = next(trace.of_kind("prioritized"))
    assert drawn.probability == pytest.approx([1 / 3] * 4)
    assert drawn.weight == pytest.approx([1.0] * 4)
    sampled = next(trace.of_kind("sampled"))
    td = {w[0]: float(PrioritySpec().priority(w[0], 0)) for w in sampled.windows}
    after = dict(zip(zip(held[1].env, held[1].episode, held[1].t), held[1].mass))
    newest = max(after, key=lambda item: item[2])
    assert after[newest] == pytest.approx(max([1.0, *td.values()]))
    assert all(after[item] == pytest.approx(p) for item, p in td.items() if item in after)


def test_runs_repeat_byte_for_byte_and_follow_the_seed() -> None:
    def run(seed: int) -> str:
        env = EnvSpec(2, (FixedSchedule(3),))
        return _replay(env, 6, 9, batch_size=8, seed=seed).to_jsonl()

    assert run(3) == run(3)
    assert run(3) != run(4)


# -- the training loop --------------------------------------------------------------------------
def _trainer(env: EnvSpec, **knobs: Any) -> TrainerScenario:
    return TrainerScenario(env, TrainerConfig(**knobs))


@pytest.mark.parametrize(
    ("b", "u", "n", "learn_step"),
    [(1, 1, 1, 1), (3, 1, 1, 3), (4, 1, 2, 2), (3, 1, 3, 1), (2, 3, 1, 6)],
)
def test_learn_step_is_the_env_steps_per_update(b: int, u: int, n: int, learn_step: int) -> None:
    scenario = _trainer(
        EnvSpec(b, (FixedSchedule(3),)),
        unroll_length=u,
        num_updates_per_train_iter=n,
        num_iterations=2,
        capacity=8,
    )
    assert loop_config(scenario) == LoopConfig(learn_step, b, 8 * b, 0, 2 * u * b)


@pytest.mark.parametrize(("b", "n"), [(3, 2), (1, 2)])
def test_update_counts_no_learn_step_gives_are_unsupported(b: int, n: int) -> None:
    # B // learn_step takes the values B, B // 2, ...: 3 envs never make 2 updates a step
    scenario = _trainer(EnvSpec(b), num_updates_per_train_iter=n, num_iterations=2)
    with pytest.raises(Unsupported, match="updates"):
        loop_config(scenario)


@pytest.mark.parametrize(("gate", "delay"), [("stored>=", 4), ("stored>", 5), ("size>=", 4)])
def test_the_warmup_gate_is_memory_size_above_learning_delay(gate: str, delay: int) -> None:
    scenario = _trainer(
        EnvSpec(1), num_iterations=2, initial_collect_steps=5, warmup_gate=gate, capacity=8
    )
    assert loop_config(scenario).learning_delay == delay


def test_each_learn_condition_ends_an_iteration_with_its_updates() -> None:
    # One env, episodes of 3 transitions, learn_step 1: every vector step stores one row and
    # evaluates the learn condition once; batch_size 1 opens it from the first row on.
    trace = ADAPTER.run_trainer(
        _trainer(EnvSpec(1, (FixedSchedule(3),)), num_iterations=5, capacity=8)
    )
    starts = list(trace.of_kind("iteration"))
    assert [s.unroll_steps for s in starts] == [1] * 5
    stores = [list(zip(s.env, s.episode, s.t)) for s in trace.of_kind("store")]
    assert stores == [[(0, 0, t)] for t in range(4)] + [[(0, 1, 0)]]
    calls = list(trace.of_kind("train_call"))
    assert [(c.status, c.stored_total) for c in calls] == [("trained", k) for k in range(1, 6)]
    updates = list(trace.of_kind("update"))
    assert [u.call for u in updates] == [0, 1, 2, 3, 4]
    rows = [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 1, 0)]
    for u, k in zip(updates, range(1, 6)):
        (window,) = u.windows  # a batch of 1, drawn among the k rows stored
        assert window[0] in rows[:k]


def test_the_first_learn_step_comes_after_one_vector_step() -> None:
    # learn_step = 2 * B: the loop evaluates its condition at idx_step % 2 == 0, i.e. after
    # vector steps 1, 3, 5; the sixth step is unrolled with no learn condition after it
    # (finding, tests/adapters/test_agilerl_findings.py).
    trace = ADAPTER.run_trainer(
        _trainer(EnvSpec(2, (FixedSchedule(4),)), unroll_length=2, num_iterations=3, capacity=8)
    )
    assert [s.unroll_steps for s in trace.of_kind("iteration")] == [1, 2, 2, 1]
    assert len(list(trace.of_kind("train_call"))) == 3


def test_stored_step_types_are_read_from_the_buffer_alone() -> None:
    """The store events say what AgileRL's ReplayBuffer holds, not what the env said: the
    same rows read differently when the buffer's stored ``done`` differs."""
    import numpy as np
    import torch
    from agilerl.components.data import Transition, transition_to_tensordict
    from agilerl.components.replay_buffer import ReplayBuffer

    from xpspec.adapters.agilerl_rows import StoredRows

    def read(done_after_first: bool) -> list[tuple[int, float, float]]:
        buffer, rows, out = ReplayBuffer(max_size=8), StoredRows(), []
        for t, (reward, done) in enumerate([(2.0, done_after_first), (0.0, False), (5.0, False)]):
            obs = np.array([[0.0, 0.0, float(t)]], dtype=np.float32)
            row = Transition(
                obs=obs,
                action=np.zeros(1, np.int64),
                reward=np.array([reward]),
                next_obs=obs,
                done=np.array([done]),
            )
            data = transition_to_tensordict(row)
            data.batch_size = torch.Size([1])
            cursor = buffer._cursor
            buffer.add(data)
            steps = rows.read(buffer, (cursor + np.arange(1)) % buffer.max_size)
            out += [(s.step_type, s.reward, s.discount) for s in steps]
        return out

    assert read(True) == [(0, 0.0, 1.0), (2, 2.0, 0.0), (0, 0.0, 1.0)]  # FIRST, LAST, FIRST
    assert read(False) == [(0, 0.0, 1.0), (1, 2.0, 1.0), (1, 0.0, 1.0)]  # FIRST, MID, MID


# -- preprocessing: a ReplayBuffer subclass as train_off_policy's memory ---------------------------
def _preprocessed(env: EnvSpec, preprocess: Any, **knobs: Any) -> Trace:
    knobs.setdefault("capacity", 16)
    scenario = TrainerScenario(env, TrainerConfig(**knobs), preprocess)
    return ADAPTER.run_trainer(scenario)


def _columns(event: Any, *names: str) -> list[tuple[Any, ...]]:
    return list(zip(*(getattr(event, n) for n in names)))


@pytest.mark.parametrize(
    ("preprocess", "reason"),
    [
        (ExcludeTasks((1,)), "the task id is in the env's info, which never reaches add"),
        (OverwriteStepType("MID"), "stores no step type"),
        (OverwriteStepType("LAST", "t", 2), "stores no step type"),
    ],
)
def test_preprocessing_no_add_override_can_express_is_unsupported(
    preprocess: Any, reason: str
) -> None:
    scenario = TrainerScenario(EnvSpec(1), TrainerConfig(num_iterations=2), preprocess)
    with pytest.raises(Unsupported, match=reason):
        loop_config(scenario)


def test_a_reward_transform_scales_every_reward_a_row_holds() -> None:
    # One env, terminated episodes of 2 transitions: rows t = 0, 1, 2 (the LAST, whose row is
    # the reset step's, reward 0), then t = 0 again. A row holds the reward out of its step,
    # so the reward into t is the previous row's: 1 -> 2*1+1 = 3, 2 -> 5, and into the second
    # episode's FIRST the reset row's 0 -> 1; the run's first FIRST has no row before it (0).
    trace = _preprocessed(EnvSpec(1, (FixedSchedule(2),)), RewardTransform(2, 1), num_iterations=4)
    stores = [_columns(s, "t", "step_type", "reward") for s in trace.of_kind("store")]
    assert stores == [[(0, F, 0.0)], [(1, M, 3.0)], [(2, L, 5.0)], [(0, F, 1.0)]]


def test_excluded_rows_are_left_out_of_the_buffer_with_their_reason() -> None:
    # Two envs, ExcludeSteps(every=2, offset=1): the rows of t = 1 are never added, so a vector
    # step stores 2 rows or none; the learn gate reads the stored rows only (batch 2: the
    # first call, after one vector step, trains on the 2 rows of t = 0).
    trace = _preprocessed(EnvSpec(2, (FixedSchedule(3),)), ExcludeSteps(2, 1), num_iterations=4)
    excluded = [(_columns(e, "env", "t"), e.reason) for e in trace.of_kind("exclude")]
    assert excluded == [([(0, 1), (1, 1)], "step"), ([(0, 3), (1, 3)], "step")]
    stores = [_columns(s, "env", "t") for s in trace.of_kind("store")]
    assert stores == [[(0, 0), (1, 0)], [(0, 2), (1, 2)]]
    calls = [(c.status, c.stored_total) for c in trace.of_kind("train_call")]
    assert calls == [("trained", 2), ("trained", 2), ("trained", 4), ("trained", 4)]
    (end,) = trace.of_kind("run_end")
    assert end.t == ()


def test_an_episode_is_held_until_the_row_of_its_last_and_released_per_env() -> None:
    # Two envs, terminated episodes of 2 transitions: each vector step's rows are held; the
    # row of t = 2 follows the done row of t = 1 and so closes its env's episode, which is
    # added as one write of 3 rows per env, in env order, annotated 1.0 (terminated).
    trace = _preprocessed(
        EnvSpec(2, (FixedSchedule(2),)), EpisodeDelayed(), num_iterations=4, mini_batch_size=1
    )
    holds = [_columns(h, "env", "t") for h in trace.of_kind("hold")]
    assert holds == [[(0, t), (1, t)] for t in (0, 1, 2)] + [[(0, 0), (1, 0)]]
    stores = [_columns(s, "env", "t", "step_type", "annotation") for s in trace.of_kind("store")]
    assert stores == [[(e, 0, F, 1.0), (e, 1, M, 1.0), (e, 2, L, 1.0)] for e in (0, 1)]
    ends = [(e.stored_total, e.pending) for e in trace.of_kind("iteration_end")]
    assert ends == [(0, 2), (0, 4), (6, 0), (6, 2)]
    # nothing stored: the first two calls find an empty buffer
    statuses = [c.status for c in trace.of_kind("train_call")]
    assert statuses == ["no-data", "no-data", "trained", "trained"]
    (end,) = trace.of_kind("run_end")
    assert (end.pending_policy, _columns(end, "env", "t")) == ("report", [(0, 0), (1, 0)])


def test_rows_held_at_the_end_are_flushed_unannotated_after_the_last_iteration() -> None:
    trace = _preprocessed(
        EnvSpec(1, (FixedSchedule(3),)),
        EpisodeDelayed(),
        num_iterations=2,
        pending_at_end="flush",
    )
    kinds = [e.kind for e in trace.events]
    assert kinds[-3:] == ["iteration_end", "store", "run_end"]
    (flushed,) = trace.of_kind("store")
    assert _columns(flushed, "t", "annotation") == [(0, 0.0), (1, 0.0)]
    (end,) = trace.of_kind("run_end")
    assert (end.pending_policy, end.t) == ("flush", ())


def test_a_keep_that_rejects_the_outcome_excludes_the_released_episode() -> None:
    trace = _preprocessed(
        EnvSpec(1, (FixedSchedule(1),)), EpisodeDelayed("failure"), num_iterations=3
    )
    excluded = [(_columns(e, "episode", "t"), e.reason) for e in trace.of_kind("exclude")]
    assert excluded == [([(0, 0), (0, 1)], "outcome")]
    assert list(trace.of_kind("store")) == []


# -- learner: one collect_rollouts and PPO.learn ------------------------------------------------


def test_learner_refuses_several_learners() -> None:
    with pytest.raises(Unsupported, match="learners"):
        ADAPTER.run_learner(two_step_episodes(learners=2))


def test_learner_records_rollout_buffer_gae() -> None:
    # collect_rollouts acts on 5 time steps per env: (e,0,0), (e,0,1), the final (e,0,2), (e,1,0),
    # (e,1,1); rows' rewards 1, 2, 0, 1, 2 and dones F, T, F, F, T (the last is last_done).
    # RolloutBuffer gates row t by dones[t + 1] (gamma 1/2, lambda 1, V = 0): row 4: 2; row 3
    # cut by row 4's flag: 1; row 2 (final obs): 0 + 1/2 * 1; row 1: 2 + 1/2 * 0.5 = 2.25;
    # row 0 cut by row 1's flag: 1.
    trace = ADAPTER.run_learner(two_step_episodes())
    episodes = {(e.env, e.episode): e for e in trace.of_kind("advantages")}
    assert set(episodes) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    first = episodes[(0, 0)]
    assert first.t == (0, 1, 2) and first.loss_mask == (1, 1, 1)
    assert first.value_target == pytest.approx((1.0, 2.25, 0.5))
    assert first.advantage == pytest.approx((1.0, 2.25, 0.5))
    second = episodes[(0, 1)]  # its final observation is not in the buffer: a stand-in
    assert second.t == (0, 1, 2) and second.loss_mask == (1, 1, 0)
    assert second.value_target == pytest.approx((1.0, 2.0, 0.0))


def test_learner_normalises_over_every_buffer_row() -> None:
    # PPO.learn standardises all 10 rows (finals included) with the Bessel-corrected std.
    trace = ADAPTER.run_learner(two_step_episodes())
    rows = [
        (a, n)
        for e in trace.of_kind("advantages")
        for a, n, m in zip(e.advantage, e.normalized, e.loss_mask)
        if m
    ]
    assert len(rows) == 10
    values = [a for a, _ in rows]
    mean = sum(values) / 10
    std = (sum((v - mean) ** 2 for v in values) / 9) ** 0.5
    assert [n for _, n in rows] == pytest.approx([(v - mean) / (std + 1e-8) for v in values])


def test_learner_plan_is_minibatches_of_batch_size_over_every_row() -> None:
    # 10 rows (8 transitions, 2 final observations), batch_size 4, 1 epoch: 4, 4, 2.
    trace = ADAPTER.run_learner(two_step_episodes())
    (plan,) = trace.of_kind("update_plan")
    assert plan.num_updates == 3
    assert [len(b) for b in plan.minibatch_rows] == [4, 4, 2]
    assert sorted(r for b in plan.minibatch_rows for r in b) == list(range(10))


def test_learner_runs_one_env_and_is_deterministic() -> None:
    scenario = two_step_episodes(num_envs=1, ending="truncated")
    first, second = ADAPTER.run_learner(scenario), ADAPTER.run_learner(scenario)
    assert first == second
    assert {e.env for e in first.of_kind("advantages")} == {0}


# -- learner: MultiStepReplayBuffer and RainbowDQN.learn's n-step targets -----------------------


def _nstep(trace: Trace) -> list[tuple[int, int, int, float, int]]:
    (event,) = trace.of_kind("nstep")
    return sorted(zip(event.env, event.episode, event.t, event.target, event.steps))


def _truncated_pairs(nstep: int = 2) -> LearnerScenario:
    """One env, episodes of 2 transitions (rewards 1, 2) truncated, V = t, gamma 1/2."""
    return LearnerScenario(
        EnvSpec(1, (FixedSchedule(2, "truncated"),)),
        steps=6,
        value_scale=Fraction(1),
        gamma=Fraction(1, 2),
        nstep=nstep,
        minibatch_size=4,
        num_learners=1,
    )


def test_nstep_targets_are_the_multi_step_rows_rainbow_learns_on() -> None:
    # 5 vector steps per env: rows (0,0), (0,1), the final (0,2), (1,0), (1,1); rewards 1, 2,
    # 0, 1, 2; done at (0,1) and (1,1). n_step 3 stores the windows of the first 3 rows only:
    # (0,0): 1 + 1/2 * 2 cut at the done (2 steps); (0,1): its own done is not checked, so
    # 2 + 1/2 * 0 + 1/4 * 1 into the next episode (3 steps); the final observation (0,2):
    # 0 + 1/2 * 1 + 1/4 * 2 into the next episode (3 steps). V = 0.
    trace = ADAPTER.run_learner(two_step_episodes())
    assert _nstep(trace) == [
        (e, 0, t, target, k)
        for e in (0, 1)
        for t, target, k in ((0, 2.0, 2), (1, 2.25, 3), (2, 1.0, 3))
    ]


def test_nstep_windows_run_through_a_truncation_bootstrapped_with_gamma_n() -> None:
    # n_step 2, rows (0,0), (0,1), (0,2) final, (1,0), (1,1) with rewards 1, 2, 0, 1, 2, none
    # done: (0,0): 1 + 1/2 * 2 + 1/4 * V(0,2) = 2.5; (0,1): 2 + 0 + 1/4 * V(1,0) = 2;
    # (0,2): 0 + 1/2 * 1 + 1/4 * V(1,1) = 0.75; (1,0): 2.5. The last row has no window.
    trace = ADAPTER.run_learner(_truncated_pairs())
    assert _nstep(trace) == [
        (0, 0, 0, 2.5, 2),
        (0, 0, 1, 2.0, 2),
        (0, 0, 2, 0.75, 2),
        (0, 1, 0, 2.5, 2),
    ]


def test_nstep_targets_follow_the_buffers_rewards(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbation: one more unit of reward in every n-step row moves every target by one.
    from agilerl.components.replay_buffer import MultiStepReplayBuffer

    info = MultiStepReplayBuffer._get_n_step_info

    def shifted(self: Any) -> Any:
        row = info(self)
        row["reward"] = row["reward"] + 1.0
        return row

    plain = _nstep(ADAPTER.run_learner(_truncated_pairs()))
    monkeypatch.setattr(MultiStepReplayBuffer, "_get_n_step_info", shifted)
    moved = _nstep(ADAPTER.run_learner(_truncated_pairs()))
    assert [r[3] + 1.0 for r in plain] == [r[3] for r in moved]


def test_nstep_bootstrap_factor_is_the_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbation: a RainbowDQN whose n_step is one more than the buffer's bootstraps with
    # (1/2)^3: (0,0): 2 + 1/8 * 2 = 2.25.
    from agilerl.algorithms import RainbowDQN

    from xpspec.adapters import agilerl_nstep

    class Longer(RainbowDQN):
        def __init__(self, *args: Any, n_step: int, **kwargs: Any) -> None:
            super().__init__(*args, n_step=n_step + 1, **kwargs)

    monkeypatch.setattr(agilerl_nstep, "RainbowDQN", Longer)
    assert _nstep(ADAPTER.run_learner(_truncated_pairs()))[0] == (0, 0, 0, 2.25, 2)


# -- checkpoint: save_checkpoint / load_checkpoint around two train_off_policy calls ------------


def _checkpointed() -> TrainerScenario:
    """Two envs, one update per vector step after a warm-up of 2 rows, saved after
    iteration 3 of 8."""
    config = TrainerConfig(num_iterations=8, capacity=5, initial_collect_steps=2, mini_batch_size=2)
    return TrainerScenario(EnvSpec(2), config, checkpoint=CheckpointSpec(3))


def test_a_resumed_run_starts_from_an_empty_memory_and_a_reset_env() -> None:
    # Up to the save the run is the uninterrupted one; AgileRL saves no ReplayBuffer, so the
    # restored memory holds nothing, and train_off_policy resets the env when called again.
    scenario = _checkpointed()
    trace = ADAPTER.run_trainer(scenario)
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    (resume,) = [e for e in trace.events if isinstance(e, Resume)]
    index = list(trace.events).index(resume)
    assert isinstance(trace.events[index - 1], IterationEnd)
    assert trace.events[index - 1].iteration == 3 == resume.iteration
    assert list(trace.events[:index]) == list(uninterrupted.events[:index])
    assert len(resume.saved) == 6 and resume.restored == ()
    first = next(e for e in trace.events[index + 1 :] if isinstance(e, EnvStep))
    assert first.iteration == 4 and set(first.t) == {0}
    ends = [e for e in trace.events if isinstance(e, IterationEnd)]
    assert [e.iteration for e in ends] == list(range(1, 9))


def test_the_resumed_run_follows_the_saved_bytes() -> None:
    # Perturbation: the saved agent's step count rewritten to past the budget; the loaded
    # agent's train_off_policy call then runs no chunk (Population.all_below), so nothing
    # after the resume is the uncorrupted run's.
    import io

    import dill
    import torch

    from xpspec.adapters.agilerl_checkpoint import run_checkpointed

    def finished(data: bytes) -> bytes:
        saved = torch.load(io.BytesIO(data), pickle_module=dill, weights_only=False)
        saved["steps"] = 10**6
        out = io.BytesIO()
        torch.save(saved, out, pickle_module=dill)
        return out.getvalue()

    scenario = _checkpointed()
    plain = run_checkpointed(scenario)
    corrupted = run_checkpointed(scenario, corrupt=finished)
    ends = [e.iteration for e in corrupted.events if isinstance(e, IterationEnd)]
    assert ends == [1, 2, 3]
    assert [e.iteration for e in plain.events if isinstance(e, IterationEnd)] == list(range(1, 9))
