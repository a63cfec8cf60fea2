"""The Tianshou adapter: what it records of Tianshou's own behaviour, on scenarios small enough
to derive every expected value by hand. Skipped when Tianshou is not installed."""

from __future__ import annotations

import statistics
from fractions import Fraction
from typing import Any, Literal

import pytest

pytest.importorskip("tianshou")

from xpspec.adapters.tianshou import TianshouAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RelabelScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
Ending = Literal["terminated", "truncated"]
ADAPTER = TianshouAdapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def _trainer_pre(
    preprocess: PreprocessorSpec, ending: Ending = "terminated", **knobs: Any
) -> TrainerScenario:
    """One env of episodes of 3 transitions with ``preprocess``."""
    spec = EnvSpec(1, (CycleSchedule((EpisodePlan(3, ending),)),))
    return TrainerScenario(spec, TrainerConfig(**knobs), preprocess=preprocess)


def _trainer(spec: EnvSpec, sampling: SamplingSpec | None = None, **knobs: Any) -> TrainerScenario:
    config = TrainerConfig(**knobs)
    return TrainerScenario(spec, config, sampling=sampling or SamplingSpec())


def test_info_names_the_installed_version() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("tianshou", "2.0.1")
    assert set(info.capabilities) == {
        "env",
        "trainer",
        "replay",
        "learner",
        "relabel",
        "counter",
        "state",
        "nstep",
        "priorities",
        "importance-weights",
        "recurrent",
        "stack",
        "checkpoint",
    }
    ADAPTER.smoke()


@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_splits_the_same_step_reset(ending: Ending, discount: float) -> None:
    # One env, episodes of 2 transitions, 3 vector steps of the collector: it acts on (0,0,0)
    # and (0,0,1); the second step returns the LAST (0,0,2), recorded on its own with action
    # -1; the collector resets in that step, so the third step acts on (0,1,0). The counting
    # policy receives states 0, 1 (acting 0, 1) and, after the collector zeroed it, 0 again.
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    trace = ADAPTER.run_env(EnvScenario(spec, steps=3))
    events = list(trace.of_kind("env_step"))
    assert _items(trace, "env_step") == [[(0, 0, 0)], [(0, 0, 1)], [(0, 0, 2)], [(0, 1, 0)]]
    assert [e.step_type for e in events] == [(F,), (M,), (L,), (F,)]
    assert [e.reward for e in events] == [(0.0,), (1.0,), (2.0,), (0.0,)]
    assert [e.discount for e in events] == [(1.0,), (1.0,), (discount,), (1.0,)]
    assert [e.action for e in events] == [(0,), (1,), (-1,), (0,)]
    assert [e.policy_state for e in events] == [(0,), (1,), (2,), (0,)]


def test_trainer_never_unrolls_the_last_time_step() -> None:
    # Episodes of 2 transitions take 2 vector steps (t = 0, 1): the LAST (0, k, 2) is only the
    # final transition's obs_next, so 4 training steps of u = 1 act on and store (0,0,0),
    # (0,0,1), (0,1,0), (0,1,1). Each training step collects 1 transition and makes
    # round(1 * 1) = 1 gradient step; the counter is the trainer's training-step number.
    trace = ADAPTER.run_trainer(_trainer(EnvSpec(1, (FixedSchedule(2),)), num_iterations=4))
    want = [[(0, 0, 0)], [(0, 0, 1)], [(0, 1, 0)], [(0, 1, 1)]]
    assert _items(trace, "env_step") == want
    assert _items(trace, "store") == want
    stores = list(trace.of_kind("store"))
    assert [s.step_type for s in stores] == [(F,), (M,), (F,), (M,)]
    assert [s.reward for s in stores] == [(0.0,), (1.0,), (0.0,), (1.0,)]
    assert [e.counter for e in trace.of_kind("iteration")] == [1, 2, 3, 4]
    assert [c.stored_total for c in trace.of_kind("train_call")] == [1, 2, 3, 4]
    # every update samples one window of one item, from the rows stored so far
    for update in trace.of_kind("update"):
        stored = [
            i for s in stores if s.iteration <= update.iteration for i in zip(s.env, s.episode, s.t)
        ]
        assert len(update.windows) == 1 and update.windows[0][0] in stored
    hooks = [h.name for h in trace.of_kind("hook")]
    assert hooks == ["after_update"] * 4  # nothing after a training step


def test_gradient_steps_per_collect() -> None:
    # 2 envs, u = 1: each collect adds 2 transitions; 3 updates per call is
    # update_step_num_gradient_steps_per_sample = 3/2 and round(3/2 * 2) = 3 gradient steps,
    # each of batch_size = B = 2 transitions.
    trace = ADAPTER.run_trainer(
        _trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=2, num_updates_per_train_iter=3)
    )
    updates = list(trace.of_kind("update"))
    assert [(u.call, u.index) for u in updates] == [(c, i) for c in range(2) for i in range(3)]
    assert all(len(u.windows) == 2 for u in updates)


def test_env_step_budget_rounds_up_to_whole_training_steps() -> None:
    # 2 envs, u = 2: 4 transitions per training step; a budget of 10 env steps runs
    # ceil(10 / 4) = 3 training steps (12 transitions), an epoch each (Tianshou's own count
    # for one epoch of epoch_num_steps = 10, TrainerParams.max_epochs).
    trace = ADAPTER.run_trainer(
        _trainer(EnvSpec(2, (FixedSchedule(5),)), unroll_length=Fraction(2), num_env_steps=10)
    )
    assert [e.env_steps for e in trace.of_kind("iteration_end")] == [4, 8, 12]


def test_forbid_windows_are_frame_stacks_inside_one_episode() -> None:
    # One env, episodes of 2 transitions, u = 2, windows of 2: each training step stores one
    # whole episode's rows (0,k,0), (0,k,1), so the only window of each episode is that pair.
    trace = ADAPTER.run_trainer(
        _trainer(
            EnvSpec(1, (FixedSchedule(2),)),
            SamplingSpec(window_length=2, boundary="forbid"),
            unroll_length=Fraction(2),
            num_iterations=3,
            mini_batch_length=2,
        )
    )
    windows = {w for u in trace.of_kind("update") for w in u.windows}
    assert windows <= {((0, k, 0), (0, k, 1)) for k in range(3)}


def test_no_window_to_sample_stops_tianshou() -> None:
    # Windows of 3 after one step of u = 1: no sub-buffer holds 3 transitions, so
    # VectorReplayBuffer.sample raises and the trainer stops inside the first update step.
    trace = ADAPTER.run_trainer(
        _trainer(
            EnvSpec(1, (FixedSchedule(5),)),
            SamplingSpec(window_length=3, boundary="forbid"),
            num_iterations=4,
            mini_batch_length=3,
        )
    )
    assert "stopped" in trace.header
    assert len(list(trace.of_kind("iteration"))) == 1
    assert list(trace.of_kind("update")) == []


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"unroll_length": Fraction(1, 2)}, "unroll_length"),
        ({"initial_collect_steps": 3}, "warm-up"),
        ({"whole_buffer": True}, "whole-buffer"),
        # 2 envs, u = 2: the 4-item budget is spent in training step 1, steps 2..4 train only
        ({"unroll_length": Fraction(2), "num_env_steps": 4}, "budget"),
    ],
)
def test_trainer_knobs_tianshou_lacks_are_unsupported(knobs: dict[str, Any], match: str) -> None:
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(_trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=4, **knobs))


def test_warm_up_already_open_at_the_first_call_is_expressible() -> None:
    # 2 envs, u = 1: 2 items are stored before the first call, so initial_collect_steps = 2
    # (gate stored >= 2) holds there and Tianshou's ungated trainer is the same run.
    scenario = _trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=2, initial_collect_steps=2)
    calls = list(ADAPTER.run_trainer(scenario).of_kind("train_call"))
    assert [c.status for c in calls] == ["trained", "trained"]


@pytest.mark.parametrize(
    ("preprocess", "knobs", "match"),
    [
        (EpisodeDelayed("success"), {}, "keep='success'"),
        (OverwriteStepType("MID", "t", 1), {}, "step type"),
    ],
)
def test_preprocessing_without_a_route_is_unsupported(
    preprocess: PreprocessorSpec, knobs: dict[str, Any], match: str
) -> None:
    scenario = TrainerScenario(
        EnvSpec(), TrainerConfig(num_iterations=2, **knobs), preprocess=preprocess
    )
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(scenario)


def test_exclusion_is_the_users_buffer_leaving_rows_out() -> None:
    # ExcludeEpisodes(2, 1) on 2 envs of 3-step episodes: the user's buffer leaves out every
    # row of episode 1 (Exclude events) and stores the rest; the trainer still makes one call
    # per training step.
    scenario = TrainerScenario(
        EnvSpec(2, (FixedSchedule(3),)),
        TrainerConfig(num_iterations=8),
        preprocess=ExcludeEpisodes(2, 1),
    )
    trace = ADAPTER.run_trainer(scenario)
    excluded = {i for e in trace.of_kind("exclude") for i in zip(e.env, e.episode, e.t)}
    stored = set(_stored(trace))
    assert excluded == {(e, 1, t) for e in (0, 1) for t in range(3)}
    assert stored and all(k != 1 for _, k, _ in stored)
    assert {e.reason for e in trace.of_kind("exclude")} == {"episode"}
    assert len(list(trace.of_kind("train_call"))) == 8


def test_a_left_out_row_is_answered_as_an_unfinished_episode() -> None:
    # ExcludeSteps(2, 1) on one env: the row of t = 1 is left out; add answers for it with
    # the newest stored index and length 0, for the kept rows with VectorReplayBuffer's own.
    from tianshou.data import Collector

    from xpspec.adapters.tianshou import _CountingPolicy, _vector_env
    from xpspec.adapters.tianshou_preprocess import ExcludingVectorBuffer

    spec = EnvSpec(1, (FixedSchedule(3),))
    buffer = ExcludingVectorBuffer(6, 1, rule=ExcludeSteps(2, 1))
    answers: list[tuple[int, int]] = []
    add = buffer.add

    def recorded(batch: Any, buffer_ids: Any = None) -> Any:
        ptr, _, length, _ = add(batch, buffer_ids)
        answers.append((int(ptr[0]), int(length[0])))
        return ptr, _, length, _

    buffer.add = recorded  # type: ignore[method-assign]
    collector = Collector(_CountingPolicy(spec), _vector_env(spec, 0), buffer)
    collector.reset()
    collector.collect(n_step=3)
    assert buffer.obs[:2, 2].tolist() == [0, 2]  # t of the stored rows
    assert answers == [(0, 0), (0, 0), (1, 2)]  # t = 2 ends an episode of 2 stored rows


def _stored(trace: Trace) -> dict[tuple[int, int, int], tuple[int, float]]:
    return {
        item: (st, r)
        for s in trace.of_kind("store")
        for item, st, r in zip(zip(s.env, s.episode, s.t), s.step_type, s.reward)
    }


def test_reward_transform_is_stored_except_at_first() -> None:
    # FixedSchedule(3): rewards into t = 1, 2 are 1, 2; the buffer holds them halved minus 1
    # and has no reward into t = 0.
    trace = ADAPTER.run_trainer(
        _trainer_pre(RewardTransform(Fraction(1, 2), Fraction(-1)), num_iterations=4)
    )
    stored = _stored(trace)
    assert stored[(0, 0, 1)] == (1, -0.5) and stored[(0, 0, 2)] == (1, 0.0)
    assert stored[(0, 0, 0)] == stored[(0, 1, 0)] == (0, 0.0)


def test_cleared_truncation_stores_the_next_first_as_mid() -> None:
    trace = ADAPTER.run_trainer(
        _trainer_pre(OverwriteStepType("MID", "truncated-last"), "truncated", num_iterations=4)
    )
    stored = _stored(trace)
    assert stored[(0, 0, 0)] == (0, 0.0)
    assert stored[(0, 1, 0)] == (1, 3.0)  # after (0, 0, 2), whose step out earned 3


def test_episode_delayed_stores_into_the_caches_and_stops_at_the_first_end() -> None:
    trace = ADAPTER.run_trainer(_trainer_pre(EpisodeDelayed(), num_iterations=6))
    assert "not supported for n_step collection" in trace.header["stopped"]
    assert _items(trace, "store") == [[(0, 0, 0)], [(0, 0, 1)], [(0, 0, 2)]]
    # an update after each of the first two steps; the first drew the one row there was,
    # in the env's cache (the main buffer receives the episode only at its end)
    updates = list(trace.of_kind("update"))
    assert len(updates) == 2 and updates[0].windows == (((0, 0, 0),),)
    (end,) = trace.of_kind("run_end")
    assert end.env == ()


def test_replay_samples_stored_rows_only() -> None:
    # Sub-buffers of 3 transitions, 5 rows written per env: (e,0,0), (e,0,1), (e,1,0),
    # (e,1,1), (e,2,0); only the newest 3 can be sampled.
    spec = EnvSpec(2, (FixedSchedule(2),))
    trace = ADAPTER.run_replay(
        ReplayScenario(spec, capacity=3, fill_steps=5, batch_size=32, draws=4)
    )
    stores = _items(trace, "store")
    assert [row[0] for row in stores] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 2, 0)]
    live = {(e, k, t) for e in (0, 1) for k, t in ((1, 0), (1, 1), (2, 0))}
    sampled = {w[0] for d in trace.of_kind("sampled") for w in d.windows}
    assert sampled <= live and len(sampled) == 6  # 128 uniform draws over 6 rows miss none


def test_replay_pad_repeats_the_first_stored_observation() -> None:
    # One env, episodes of 2 transitions, 4 rows (0,0,0), (0,0,1), (0,1,0), (0,1,1): a stack
    # of 3 ending at index i repeats the episode's first row in front, e.g. ending at (0,1,1)
    # gives ((0,1,0), (0,1,0), (0,1,1)).
    spec = EnvSpec(1, (FixedSchedule(2),))
    sampling = SamplingSpec(window_length=3, boundary="pad")
    trace = ADAPTER.run_replay(ReplayScenario(spec, 8, 4, sampling, batch_size=32, draws=2))
    want = {((0, k, 0), (0, k, 0), (0, k, 0)) for k in (0, 1)} | {
        ((0, k, 0), (0, k, 0), (0, k, 1)) for k in (0, 1)
    }
    windows = {w for d in trace.of_kind("sampled") for w in d.windows}
    assert windows == want


@pytest.mark.parametrize(
    "sampling",
    [SamplingSpec(period=2), SamplingSpec(distribution="env-balanced")],
)
def test_replay_grids_and_other_distributions_are_unsupported(sampling: SamplingSpec) -> None:
    with pytest.raises(Unsupported):
        ADAPTER.run_replay(ReplayScenario(EnvSpec(), 8, 4, sampling))


def _prioritized(**knobs: Any) -> ReplayScenario:
    """One env of one long episode, a ring of 3, one vector step stored after each draw."""
    return ReplayScenario(
        EnvSpec(1, (FixedSchedule(100),)),
        capacity=3,
        fill_steps=3,
        batch_size=4,
        draws=3,
        priority=PrioritySpec(alpha=Fraction(1), beta=Fraction(1), add_steps=1),
        **knobs,
    )


def test_prioritized_replay_reads_masses_from_the_segment_tree() -> None:
    # alpha = 1: a transition's mass is its priority. Every row starts at 1; after draw 0 the
    # sampled rows hold |td| + float32 eps and the row stored next the largest priority seen.
    trace = ADAPTER.run_replay(_prioritized())
    held = list(trace.of_kind("priorities"))
    assert [list(zip(e.t, e.mass)) for e in held[:1]] == [[(0, 1.0), (1, 1.0), (2, 1.0)]]
    sampled = next(trace.of_kind("sampled"))
    td = {w[0][2]: float(PrioritySpec(levels=4).priority(w[0], 0)) for w in sampled.windows}
    after = dict(zip(held[1].t, held[1].mass))
    for t, p in td.items():
        if t in after:
            assert after[t] == pytest.approx(p, rel=1e-6)
    assert after[3] == pytest.approx(max([1.0, *td.values()]), rel=1e-6)
    drawn = next(trace.of_kind("prioritized"))
    total = sum(held[0].mass)
    assert drawn.probability == pytest.approx([1 / total] * 4)
    assert drawn.weight == pytest.approx([1.0] * 4)


def test_prioritized_windows_longer_than_one_row_are_unsupported() -> None:
    with pytest.raises(Unsupported, match="keyed by its last frame"):
        ADAPTER.run_replay(_prioritized(sampling=SamplingSpec(window_length=2)))


@pytest.mark.parametrize("ending", ["terminated", "truncated"])
def test_learner_on_two_short_episodes(ending: Ending) -> None:
    # One env, episodes of 2 transitions, steps = 6: two whole episodes, rewards r1 = 1,
    # r2 = 2, V(t) = t / 2, gamma = lam = 1/2, n = 3.
    # GAE, terminated: A1 = 2 - 0.5 = 1.5, A0 = (1 + 0.5 * 0.5 - 0) + 0.25 * 1.5 = 1.625;
    # truncated adds gamma * V(2) = 0.5 at t = 1: A1 = 2.0, A0 = 1.25 + 0.25 * 2 = 1.75.
    # n-step (k = 2 then 1): terminated 1 + 0.5 * 2 = 2 and 2; truncated bootstraps
    # 0.25 * V(2) = 0.25 and 0.5 * V(2) = 0.5: 2.25 and 2.5.
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    scenario = LearnerScenario(
        spec,
        steps=6,
        gamma=Fraction(1, 2),
        lam=Fraction(1, 2),
        nstep=3,
        num_epochs=1,
        minibatch_size=3,
        num_learners=1,
    )
    trace = ADAPTER.run_learner(scenario)
    advantages = list(trace.of_kind("advantages"))
    assert [(a.env, a.episode, a.t) for a in advantages] == [(0, k, (0, 1, 2)) for k in (0, 1)]
    want = (1.625, 1.5) if ending == "terminated" else (1.75, 2.0)
    for a in advantages:
        assert a.advantage[:2] == pytest.approx(want)
        assert a.value_target[:2] == pytest.approx((want[0], want[1] + 0.5))
        assert a.loss_mask == (1, 1, 0)
    nstep = next(trace.of_kind("nstep"))
    targets = (2.0, 2.0) if ending == "terminated" else (2.25, 2.5)
    assert nstep.t == (0, 1, 0, 1) and nstep.steps == (2, 1, 2, 1)
    assert nstep.target == pytest.approx(targets * 2)
    # 4 rows in mini-batches of 3: Batch.split(3, merge_last=True) merges the short last
    # one, so one update of all 4 rows (the spec's plan has 2).
    plan = next(trace.of_kind("update_plan"))
    assert plan.num_updates == 1 and sorted(plan.minibatch_rows[0]) == [0, 1, 2, 3]
    # PPO normalises per mini-batch with the sample standard deviation
    values = [v for a in advantages for v in a.advantage[:2]]
    mean, std = statistics.mean(values), statistics.stdev(values)
    normalized = [v for a in advantages for v in a.normalized[:2]]
    assert normalized == pytest.approx([(v - mean) / (std + 1e-8) for v in values])


def test_learner_sharding_is_unsupported() -> None:
    scenario = LearnerScenario(EnvSpec(), steps=5, num_learners=2)
    with pytest.raises(Unsupported, match="learners"):
        ADAPTER.run_learner(scenario)


def test_relabel_stores_name_the_final_observation() -> None:
    # Episodes of 2 transitions: rows (0,k,0), (0,k,1); the second also holds (0,k,2), LAST.
    spec = EnvSpec(1, (FixedSchedule(2),), goals=True)
    trace = ADAPTER.run_relabel(RelabelScenario(spec, fill_steps=4, capacity=20, draws=1))
    assert _items(trace, "store") == [
        [(0, 0, 0)],
        [(0, 0, 1), (0, 0, 2)],
        [(0, 1, 0)],
        [(0, 1, 1), (0, 1, 2)],
    ]
    assert [s.step_type for s in trace.of_kind("store")][1] == (M, L)


def test_relabel_stores_name_the_next_step_of_a_running_episode() -> None:
    # Episodes of 3 transitions, 5 rows: the newest, (0, 1, 1), is not done and holds
    # (0, 1, 2) as its next observation, stored after the fill (MID, its reward -1: the
    # goal [0, 1, 3] is not reached).
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    trace = ADAPTER.run_relabel(RelabelScenario(spec, fill_steps=5, capacity=20, draws=1))
    stores = list(trace.of_kind("store"))
    assert _items(trace, "store")[-2:] == [[(0, 1, 1)], [(0, 1, 2)]]
    assert (stores[-1].step_type, stores[-1].reward) == ((M,), (-1.0,))


@pytest.mark.parametrize(("ratio", "relabeled"), [(Fraction(1), True), (Fraction(0), False)])
def test_relabel_every_or_no_episode(ratio: Fraction, relabeled: bool) -> None:
    # future_p = 1 - 1/future_k equals the ratio: at 1 every sampled episode is relabeled
    # (int(E * 1) = E), at 0 none. A relabeled goal is the achieved goal of obs_next at a
    # future index of the episode's latest sampled transition: a step t' in t + 1 .. t_end,
    # and the reward is 0 iff t' = t + 1. Episodes of 3 transitions, 5 rows stored:
    # episode 0 whole (t_end 3), episode 1 with rows 0, 1 (t_end 2).
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    scenario = RelabelScenario(spec, fill_steps=5, capacity=8, ratio=ratio, batch_size=16, draws=5)
    for event in ADAPTER.run_relabel(scenario).of_kind("relabel"):
        for k, t, g, goal, r in zip(event.episode, event.t, event.goal_t, event.goal, event.reward):
            if not relabeled:
                assert g == -1
                assert goal == spec.desired_goal(0, 0, k)  # the batch's goal is the stored one
                continue
            assert goal == spec.achieved_goal(0, k, g)
            t_end = 3 if k == 0 else 2
            assert t < g <= t_end
            assert r == (0.0 if g == t + 1 else -1.0)
            rows = [(kk, gg) for kk, gg in zip(event.episode, event.goal_t) if kk == k]
            assert len({gg for _, gg in rows}) == 1  # one goal per episode and batch


def test_relabel_other_strategies_are_unsupported() -> None:
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    with pytest.raises(Unsupported, match="future"):
        ADAPTER.run_relabel(RelabelScenario(spec, fill_steps=5, strategy="final"))


def test_traces_are_deterministic() -> None:
    spec = EnvSpec(2, (FixedSchedule(3),), goals=True)
    scenario = RelabelScenario(spec, fill_steps=7, capacity=5, ratio=Fraction(1, 2), draws=3)
    assert ADAPTER.run_relabel(scenario).to_jsonl() == ADAPTER.run_relabel(scenario).to_jsonl()
    replay = ReplayScenario(EnvSpec(2, (FixedSchedule(3),)), 4, 9, SamplingSpec(window_length=2))
    assert ADAPTER.run_replay(replay).to_jsonl() == ADAPTER.run_replay(replay).to_jsonl()


def test_episode_delayed_flush_is_the_same_run_as_report() -> None:
    # Nothing is held out of sampling, so there is nothing for the run end to name or flush.
    runs = {
        policy: ADAPTER.run_trainer(
            _trainer_pre(EpisodeDelayed(), num_iterations=6, pending_at_end=policy)
        )
        for policy in ("report", "flush")
    }
    ends = {policy: next(iter(t.of_kind("run_end"))) for policy, t in runs.items()}
    assert [(e.pending_policy, e.env) for e in ends.values()] == [("report", ()), ("flush", ())]
    assert runs["report"].events[:-1] == runs["flush"].events[:-1]
