"""The Stable-Baselines3 adapter: what it records of SB3's own behaviour, on scenarios small
enough to derive every expected value by hand. Skipped when SB3 is not installed."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Literal

import pytest

pytest.importorskip("stable_baselines3")

from xpspec.adapters.sb3 import SB3Adapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.relabel import check_same_episode
from xpspec.kit.transition_rings import rows_within_capacity
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    OverwriteStepType,
    RewardTransform,
)
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
ADAPTER = SB3Adapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def test_info_names_the_installed_version() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("sb3", "2.9.2")
    assert set(info.capabilities) == {
        *("env", "trainer", "replay", "learner", "relabel", "update-counter", "nstep"),
        *("checkpoint", "stack"),
    }
    ADAPTER.smoke()


@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_splits_the_same_step_reset(ending: Ending, discount: float) -> None:
    # One env, episodes of 2 transitions: reset -> (0,0,0); step 1 -> (0,0,1); step 2 ends
    # the episode and returns its LAST (terminal_observation) together with the FIRST of
    # episode 1, recorded as two events; step 3 -> (0,1,1).
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    trace = ADAPTER.run_env(EnvScenario(spec, steps=4))
    events = list(trace.of_kind("env_step"))
    assert _items(trace, "env_step") == [
        [(0, 0, 0)],
        [(0, 0, 1)],
        [(0, 0, 2)],
        [(0, 1, 0)],
        [(0, 1, 1)],
    ]
    assert [e.step_type for e in events] == [(F,), (M,), (L,), (F,), (M,)]
    assert [e.reward for e in events] == [(0.0,), (1.0,), (2.0,), (0.0,), (1.0,)]
    assert [e.discount for e in events] == [(1.0,), (1.0,), (discount,), (1.0,), (1.0,)]


def _trainer(spec: EnvSpec, **knobs: Any) -> TrainerScenario:
    return TrainerScenario(spec, TrainerConfig(**knobs))


def test_trainer_never_unrolls_the_last_time_step() -> None:
    # Episodes of 2 transitions take 2 vector steps in SB3 (t = 0, 1): the LAST (0, k, 2) is
    # only the final transition's next observation, so 4 iterations of u = 1 act on
    # (0,0,0), (0,0,1), (0,1,0), (0,1,1) and store exactly those rows.
    trace = ADAPTER.run_trainer(_trainer(EnvSpec(1, (FixedSchedule(2),)), num_iterations=4))
    want = [[(0, 0, 0)], [(0, 0, 1)], [(0, 1, 0)], [(0, 1, 1)]]
    assert _items(trace, "env_step") == want
    assert _items(trace, "store") == want
    stores = list(trace.of_kind("store"))
    assert [s.step_type for s in stores] == [(F,), (M,), (F,), (M,)]
    assert [s.reward for s in stores] == [(0.0,), (1.0,), (0.0,), (1.0,)]
    assert [e.iteration for e in trace.of_kind("iteration")] == [1, 2, 3, 4]
    assert len(list(trace.of_kind("hook"))) == 0  # SB3 has no such hooks


def test_learning_starts_is_strict() -> None:
    # 2 envs, u = 1: 2, 4, 6, 8 items stored after iterations 1..4. learning_starts = 4 opens
    # the gate only when num_timesteps > 4, i.e. from iteration 3 (the spec's >= would open
    # it at iteration 2).
    trace = ADAPTER.run_trainer(
        _trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=4, initial_collect_steps=4)
    )
    calls = list(trace.of_kind("train_call"))
    assert [c.status for c in calls] == ["warmup", "warmup", "trained", "trained"]
    assert [c.stored_total for c in calls] == [2, 4, 6, 8]


def test_updates_per_call_and_counters() -> None:
    # gradient_steps = 3 samples of batch_size 2 per call, each a window of one stored item.
    # Counter per iteration: SB3's num_timesteps (0, 3, 6 at the starts of iterations 1..3).
    trace = ADAPTER.run_trainer(
        _trainer(
            EnvSpec(3, (FixedSchedule(4),)),
            num_iterations=3,
            num_updates_per_train_iter=3,
            mini_batch_size=2,
        )
    )
    updates = list(trace.of_kind("update"))
    assert [(u.call, u.index) for u in updates] == [(c, i) for c in range(3) for i in range(3)]
    assert all(len(u.windows) == 2 and all(len(w) == 1 for w in u.windows) for u in updates)
    assert [e.counter for e in trace.of_kind("iteration")] == [0, 3, 6]
    stored = {item for items in _items(trace, "store") for item in items}
    assert all(w[0] in stored for u in updates for w in u.windows)


def test_per_mini_batch_counter_is_n_updates_after_the_loop() -> None:
    # DQN.train adds gradient_steps to _n_updates after its loop: both updates of call c see
    # 2 * c.
    trace = ADAPTER.run_trainer(
        _trainer(
            EnvSpec(1, (FixedSchedule(4),)),
            num_iterations=2,
            num_updates_per_train_iter=2,
            counter_mode="per-mini-batch",
        )
    )
    assert [u.counter for u in trace.of_kind("update")] == [0, 0, 2, 2]


@pytest.mark.parametrize(
    "knobs",
    [
        {"unroll_length": Fraction(1, 2)},
        {"mini_batch_length": 2},
        {"whole_buffer": True},
        {"warmup_gate": "size>="},
        # 2 envs, u = 2: the 4-item budget is spent in iteration 1, iterations 2..4 train only
        {"unroll_length": Fraction(2), "num_env_steps": 4},
    ],
)
def test_trainer_knobs_sb3_lacks_are_unsupported(knobs: dict[str, Any]) -> None:
    with pytest.raises(Unsupported):
        ADAPTER.run_trainer(_trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=4, **knobs))


def _preprocessed(spec: EnvSpec, preprocess: Any, **knobs: Any) -> TrainerScenario:
    return TrainerScenario(spec, TrainerConfig(**knobs), preprocess=preprocess)


_TWO_ENDINGS = EnvSpec(
    1, (CycleSchedule((EpisodePlan(2, "terminated"), EpisodePlan(2, "truncated"))),)
)


def test_reward_transform_is_read_back_from_the_buffer() -> None:
    # Rows hold r_{t+1} * 1/2 - 1; the reward into (0, k, 1) is that of row (0, k, 0), i.e.
    # 1 * 1/2 - 1. A FIRST has no row holding its reward: 0.
    spec = EnvSpec(1, (FixedSchedule(2),))
    trace = ADAPTER.run_trainer(
        _preprocessed(spec, RewardTransform(Fraction(1, 2), Fraction(-1)), num_iterations=4)
    )
    stores = list(trace.of_kind("store"))
    assert _items(trace, "store") == [[(0, 0, 0)], [(0, 0, 1)], [(0, 1, 0)], [(0, 1, 1)]]
    assert [s.reward for s in stores] == [(0.0,), (-0.5,), (0.0,), (-0.5,)]
    assert [s.step_type for s in stores] == [(F,), (M,), (F,), (M,)]


@pytest.mark.parametrize(
    ("preprocess", "reason"), [(ExcludeEpisodes(2, 1), "episode"), (ExcludeTasks((1,)), "task")]
)
def test_excluded_rows_never_reach_the_buffer_and_still_earn_calls(
    preprocess: Any, reason: str
) -> None:
    # One env, episodes of 2 rows, task id k % 2: the odd episodes are excluded (by number,
    # or by the task id the step's info names): 4 of 8 rows stored, and learn() still
    # trains after each of the 8 collections.
    spec = EnvSpec(1, (FixedSchedule(2),), num_tasks=2)
    trace = ADAPTER.run_trainer(_preprocessed(spec, preprocess, num_iterations=8))
    assert _items(trace, "store") == [[(0, 0, 0)], [(0, 0, 1)], [(0, 2, 0)], [(0, 2, 1)]]
    excluded = list(trace.of_kind("exclude"))
    assert [(e.episode, e.t, e.reason) for e in excluded] == [
        ((k,), (t,), reason) for k in (1, 3) for t in (0, 1)
    ]
    calls = list(trace.of_kind("train_call"))
    assert [c.status for c in calls] == ["trained"] * 8
    assert calls[-1].stored_total == 4


def test_episode_delayed_releases_annotated_episodes_at_their_done_row() -> None:
    # Episodes of 2 rows, terminated then truncated; learning_starts 5 keeps training off
    # until the buffer holds rows. Each row is held; the done row releases its episode with
    # annotation 1.0 (terminated) or 0.0 (truncated); the fifth row is still held at the end.
    trace = ADAPTER.run_trainer(
        _preprocessed(_TWO_ENDINGS, EpisodeDelayed(), num_iterations=5, initial_collect_steps=5)
    )
    assert _items(trace, "hold") == [
        [(0, 0, 0)],
        [(0, 0, 1)],
        [(0, 1, 0)],
        [(0, 1, 1)],
        [(0, 2, 0)],
    ]
    stores = list(trace.of_kind("store"))
    assert [(s.iteration, list(zip(s.episode, s.t))) for s in stores] == [
        (2, [(0, 0), (0, 1)]),
        (4, [(1, 0), (1, 1)]),
    ]
    assert [s.annotation for s in stores] == [(1.0, 1.0), (0.0, 0.0)]
    assert [s.step_type for s in stores] == [(F, M), (F, M)]
    (end,) = trace.of_kind("run_end")
    assert list(zip(end.env, end.episode, end.t)) == [(0, 2, 0)]
    assert [e.pending for e in trace.of_kind("iteration_end")] == [1, 0, 1, 0, 1]


def test_episode_delayed_keep_and_flush() -> None:
    # keep="success": the truncated episode is dropped with reason outcome; flush adds the
    # held row after the last iteration, unannotated, and leaves nothing pending.
    trace = ADAPTER.run_trainer(
        _preprocessed(
            _TWO_ENDINGS,
            EpisodeDelayed("success"),
            num_iterations=5,
            initial_collect_steps=5,
            pending_at_end="flush",
        )
    )
    assert _items(trace, "store") == [[(0, 0, 0), (0, 0, 1)], [(0, 2, 0)]]
    (excluded,) = trace.of_kind("exclude")
    assert (list(zip(excluded.episode, excluded.t)), excluded.reason) == (
        [(1, 0), (1, 1)],
        "outcome",
    )
    assert list(trace.of_kind("store"))[-1].annotation == (0.0,)
    (end,) = trace.of_kind("run_end")
    assert end.t == ()


def test_training_before_any_release_stops_the_run() -> None:
    # learning_starts 0: the first train call samples a buffer whose only row is held.
    trace = ADAPTER.run_trainer(_preprocessed(_TWO_ENDINGS, EpisodeDelayed(), num_iterations=3))
    assert "high <= 0" in trace.header["stopped"]
    assert [e.kind for e in trace.events][-2:] == ["train_call", "run_end"]


@pytest.mark.parametrize(
    ("preprocess", "match"),
    [
        (ExcludeSteps(2, 0), "shared position"),
        (ExcludeTasks((1,)), "shared position"),
        (EpisodeDelayed(), "shared position"),
        (OverwriteStepType("MID", "truncated-last"), "no step type"),
    ],
)
def test_preprocessing_sb3_cannot_express_is_unsupported(preprocess: Any, match: str) -> None:
    spec = EnvSpec(2 if match == "shared position" else 1, (FixedSchedule(2),))
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(_preprocessed(spec, preprocess, num_iterations=2))


def test_replay_samples_stored_rows_only() -> None:
    # Capacity 3 rows per env, 5 rows written per env: only the newest 3 can be sampled.
    spec = EnvSpec(2, (FixedSchedule(2),))
    trace = ADAPTER.run_replay(
        ReplayScenario(spec, capacity=3, fill_steps=5, batch_size=32, draws=4)
    )
    stores = _items(trace, "store")
    # SB3 rows of env e: (e,0,0), (e,0,1), (e,1,0), (e,1,1), (e,2,0); no LAST row.
    assert [row[0] for row in stores] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 2, 0)]
    live = {(e, 1, 0) for e in (0, 1)} | {(e, 1, 1) for e in (0, 1)} | {(e, 2, 0) for e in (0, 1)}
    sampled = {w[0] for d in trace.of_kind("sampled") for w in d.windows}
    assert sampled <= live and len(sampled) == 6  # 128 uniform draws over 6 rows miss none


def test_replay_windows_longer_than_one_are_unsupported() -> None:
    spec = EnvSpec(2, (FixedSchedule(2),))
    scenario = ReplayScenario(spec, 8, 4, sampling=SamplingSpec(window_length=2))
    with pytest.raises(Unsupported, match="single transitions"):
        ADAPTER.run_replay(scenario)


@pytest.mark.parametrize(
    ("ratio", "supported"),
    [(Fraction(3, 4), True), (Fraction(2, 3), True), (Fraction(1), False), (Fraction(3, 5), False)],
)
def test_relabel_ratio_maps_to_n_sampled_goal(ratio: Fraction, supported: bool) -> None:
    # her_ratio = 1 - 1/(n + 1): 3/4 is n = 3, 2/3 is n = 2; 1 and 3/5 have no integer n.
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    scenario = RelabelScenario(spec, fill_steps=9, capacity=20, ratio=ratio, batch_size=12, draws=3)
    if not supported:
        with pytest.raises(Unsupported, match="n_sampled_goal"):
            ADAPTER.run_relabel(scenario)
        return
    trace = ADAPTER.run_relabel(scenario)
    virtual = math.floor(ratio * 12)
    for event in trace.of_kind("relabel"):
        # SB3 returns real rows first, then its virtual (relabeled) ones.
        assert event.goal_t[: 12 - virtual] == (-1,) * (12 - virtual)
        # future: the next achieved goal of a step in t .. L - 1, i.e. a step in t + 1 .. 3.
        assert all(
            t < g <= 3 for t, g in zip(event.t[12 - virtual :], event.goal_t[12 - virtual :])
        )
        # Goals as SB3's batch holds them: the real rows their episode's desired goal, the
        # virtual ones the achieved goal [0, k, g] of their goal step.
        for k, g, goal in zip(event.episode, event.goal_t, event.goal):
            want = spec.desired_goal(0, 0, k) if g == -1 else spec.achieved_goal(0, k, g)
            assert goal == want


def test_relabel_samples_only_what_the_spec_ring_holds() -> None:
    # 23 vector steps into rings of 12 time steps: SB3's ring wraps, and every sampled
    # transition and goal is one the spec's ring of 12 still holds.
    scenario = CATALOG["relabel-future"]
    assert isinstance(scenario, RelabelScenario)
    trace = ADAPTER.run_relabel(scenario)
    check_same_episode(scenario, trace, None)  # type: ignore[arg-type]
    assert rows_within_capacity(scenario) < scenario.fill_steps


def test_relabel_stores_name_the_terminal_observation() -> None:
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


@pytest.mark.parametrize(
    ("ending", "advantage", "target", "normalized", "nstep"),
    [
        # gamma = lam = 1/2, V = t/2, rewards 1 and 2. Terminated: A_1 = 2 - 1/2 = 3/2,
        # A_0 = (1 + 1/4) + 1/4 * 3/2 = 13/8; targets 13/8 and 2. 3-step targets: 1 + 2/2 = 2
        # (2 steps, no bootstrap) and 2 (1 step).
        ("terminated", (1.625, 1.5), (1.625, 2.0), (1, -1), (2.0, 2.0)),
        # Truncated: A_1 = 2 + 1/2 * 1 - 1/2 = 2, A_0 = 5/4 + 1/4 * 2 = 7/4; targets 7/4, 5/2.
        # 3-step targets: 1 + 1 + 1/4 * 1 = 9/4 and 2 + 1/2 * 1 = 5/2.
        ("truncated", (1.75, 2.0), (1.75, 2.5), (-1, 1), (2.25, 2.5)),
    ],
)
def test_learner_gae_and_nstep_by_hand(
    ending: Ending,
    advantage: tuple[float, ...],
    target: tuple[float, ...],
    normalized: tuple[int, int],
    nstep: tuple[float, ...],
) -> None:
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    scenario = LearnerScenario(
        spec,
        steps=3,
        gamma=Fraction(1, 2),
        lam=Fraction(1, 2),
        nstep=3,
        num_epochs=2,
        minibatch_size=2,
        num_learners=1,
    )
    trace = ADAPTER.run_learner(scenario)
    (event,) = trace.of_kind("advantages")
    assert event.t == (0, 1, 2) and event.loss_mask == (1, 1, 0)
    assert event.advantage[:2] == pytest.approx(advantage)
    assert event.value_target[:2] == pytest.approx(target)
    # PPO normalises with torch's sample std (n - 1 = 1): two rows become +-1/sqrt(2), where
    # the population std of the spec gives +-1.
    want = tuple(sign / math.sqrt(2) for sign in normalized)
    assert event.normalized[:2] == pytest.approx(want, abs=1e-5)
    (ns,) = trace.of_kind("nstep")
    assert (ns.t, ns.steps) == ((0, 1), (2, 1))
    assert ns.target == pytest.approx(nstep)
    (plan,) = trace.of_kind("update_plan")
    assert plan.num_updates == 2 and all(sorted(rows) == [0, 1] for rows in plan.minibatch_rows)


def test_learner_needs_one_learner_and_equal_spans() -> None:
    spec = EnvSpec(1, (FixedSchedule(3),))
    with pytest.raises(Unsupported, match="learners"):
        ADAPTER.run_learner(LearnerScenario(spec, steps=6, num_learners=2))
    # Env 0 starts with an episode of 1 transition, env 1 with one of 3: in 4 time steps env 0
    # has 2 transitions (its LAST at t = 1 is one of the 4), env 1 has 3.
    plans = (EpisodePlan(1, "terminated"), EpisodePlan(3, "terminated"))
    mixed = CycleSchedule(plans, offset=1)
    with pytest.raises(Unsupported, match="per-env transitions"):
        ADAPTER.run_learner(LearnerScenario(EnvSpec(2, (mixed,)), steps=4, num_learners=1))


def test_traces_are_deterministic() -> None:
    scenario = _trainer(EnvSpec(2, (FixedSchedule(3),)), num_iterations=3, mini_batch_size=4)
    assert ADAPTER.run_trainer(scenario).to_jsonl() == ADAPTER.run_trainer(scenario).to_jsonl()
