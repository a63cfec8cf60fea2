"""The skrl adapter: what it records of skrl's own behaviour, on scenarios small enough to
derive every expected value by hand. Skipped when skrl is not installed."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import pytest

pytest.importorskip("skrl")

from tests.adapters.learner_scenarios import two_step_episodes
from xpspec.adapters.skrl import SkrlAdapter, SkrlConfig
from xpspec.adapters.skrl_tlb import SkrlTlbAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
Ending = Literal["terminated", "truncated"]
ADAPTER = SkrlAdapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def test_info_names_the_installed_version_and_configuration() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("skrl", "2.1.1")
    assert set(info.capabilities) == {
        "env",
        "trainer",
        "replay",
        "learner",
        "update-counter",
        "state",
        "recurrent",
        "checkpoint",
    }
    assert "replacement=False" in info.notes and "time_limit_bootstrap=False" in info.notes
    tlb = SkrlTlbAdapter().info()
    assert tlb.name == "skrl_tlb"
    assert "replacement=True" in tlb.notes and "time_limit_bootstrap=True" in tlb.notes
    ADAPTER.smoke()


@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_passes_the_next_step_autoreset_through(ending: Ending, discount: float) -> None:
    # One env, episodes of 2 transitions: reset -> (0,0,0); steps -> (0,0,1), the LAST (0,0,2),
    # then the next episode's FIRST (0,1,0) with reward 0, and (0,1,1).
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    trace = ADAPTER.run_env(EnvScenario(spec, steps=5))
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


def _replay(replacement: bool, length: int, fill: int, batch: int) -> Trace:
    # One env, one long episode: the stored rows are t = 0 .. fill - 1.
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(50),)),
        capacity=4,
        fill_steps=fill,
        sampling=SamplingSpec(window_length=length),
        batch_size=batch,
        draws=3,
    )
    return SkrlAdapter(SkrlConfig(replacement=replacement)).run_replay(scenario)


def test_replay_without_replacement_draws_each_start_once() -> None:
    # 3 rows stored, windows of 2: starts t = 0 and 1 only; a batch of 5 comes back as both.
    trace = _replay(replacement=False, length=2, fill=3, batch=5)
    assert [len(s) for s in _items(trace, "store")] == [1, 1, 1]
    for draw in trace.of_kind("sampled"):
        assert sorted(tuple(i[2] for i in w) for w in draw.windows) == [(0, 1), (1, 2)]


def test_replay_with_replacement_crosses_the_write_head() -> None:
    # 6 rows into a ring of 4: the ring holds t = 4, 5, 2, 3 (physical order), the newest at
    # physical row 1. skrl draws starts at physical rows 0..2, so windows are (4,5), (5,2)
    # across the write head, (2,3); the stored sequence (3,4) is never drawn.
    trace = _replay(replacement=True, length=2, fill=6, batch=64)
    seen = {tuple(i[2] for i in w) for d in trace.of_kind("sampled") for w in d.windows}
    assert seen == {(4, 5), (5, 2), (2, 3)}
    assert all(len(d.windows) == 64 for d in trace.of_kind("sampled"))


def test_replay_too_short_is_an_empty_draw() -> None:
    # 1 row stored, windows of 3: torch.randperm of a negative size raises; recorded empty.
    for replacement in (False, True):
        trace = _replay(replacement=replacement, length=3, fill=1, batch=4)
        assert [d.windows for d in trace.of_kind("sampled")] == [(), (), ()]


def test_learner_refuses_what_skrl_cannot_run() -> None:
    with pytest.raises(Unsupported, match="learners"):
        ADAPTER.run_learner(two_step_episodes(learners=2))


def test_learner_runs_one_env() -> None:
    # SequentialTrainer's "not supported for single environment" error is on its multi-agent
    # path only (trainers/torch/sequential.py): one PPO agent trains on one env.
    trace = ADAPTER.run_learner(two_step_episodes(num_envs=1))
    assert {e.env for e in trace.of_kind("advantages")} == {0}
    assert len(list(trace.of_kind("update_plan"))) == 1


def test_learner_trains_on_the_final_observation_rows() -> None:
    # Episodes of 2 transitions (rewards 1, 2 into t = 1, 2), 6 time steps per env: (0,0,0..2),
    # (0,1,0..2). skrl acts on 5 of them, the LAST (0,0,2) included, so its memory holds
    # 5 rows per env: 10 rows in ceil(10 / 4) = 3 mini-batches of 4, 3, 3 (np.array_split).
    # With V = 0, gamma 1/2, lambda 1: episode 0's returns are 1 + 2/2 = 2 and 2; its
    # final-observation row continues into episode 1 (reward 0, then 1 + 2/2 discounted).
    trace = SkrlTlbAdapter().run_learner(two_step_episodes())
    (plan,) = trace.of_kind("update_plan")
    assert [len(b) for b in plan.minibatch_rows] == [4, 3, 3]
    assert sorted(r for b in plan.minibatch_rows for r in b) == list(range(10))
    episodes = {(e.env, e.episode): e for e in trace.of_kind("advantages")}
    first = episodes[(0, 0)]
    assert first.t == (0, 1, 2)
    assert first.value_target[:2] == pytest.approx((2.0, 2.0))
    assert first.value_target[2] == pytest.approx(0.5 * (1.0 + 0.5 * 2.0))
    last = episodes[(0, 1)]  # in progress: no final-observation row, a stand-in
    assert last.t == (0, 1, 2)


def _trainer(
    num_envs: int = 2,
    ending: Ending = "terminated",
    preprocess: PreprocessorSpec | None = None,
    sampling: SamplingSpec | None = None,
    **knobs: object,
) -> TrainerScenario:
    """Episodes of 2 transitions (rewards 1, 2 into t = 1, 2) in every env."""
    config = TrainerConfig(**{"num_iterations": 4, **knobs})  # type: ignore[arg-type]
    return TrainerScenario(
        EnvSpec(num_envs, (FixedSchedule(2, ending),)),
        config,
        *(() if preprocess is None else (preprocess,)),
        **({} if sampling is None else {"sampling": sampling}),
    )


def _statuses(trace: Trace) -> list[str]:
    return [c.status for c in trace.of_kind("train_call")]


def test_trainer_stores_every_time_step_named_from_the_previous_row() -> None:
    # u = 1: one vector step, one add_samples and one DQN.update per timestep. Every time step
    # is acted on (NEXT_STEP autoreset), the LAST (e,0,2) too, and stored as its own row; the
    # row of t = 2 follows a terminated row (LAST, discount 0, reward 2), the next one follows
    # the LAST's reset row (FIRST, its reward 0).
    trace = ADAPTER.run_trainer(_trainer())
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [1, 1, 1, 1]
    assert _items(trace, "store") == _items(trace, "env_step")
    assert [s.t for s in trace.of_kind("store")] == [(0, 0), (1, 1), (2, 2), (0, 0)]
    assert [s.step_type for s in trace.of_kind("store")] == [(F, F), (M, M), (L, L), (F, F)]
    assert [s.reward for s in trace.of_kind("store")] == [
        (0.0,) * 2,
        (1.0,) * 2,
        (2.0,) * 2,
        (0.0,) * 2,
    ]
    assert [s.discount for s in trace.of_kind("store")] == [
        (1.0,) * 2,
        (1.0,) * 2,
        (0.0,) * 2,
        (1.0,) * 2,
    ]
    assert _statuses(trace) == ["trained"] * 4
    updates = list(trace.of_kind("update"))
    assert [len(u.windows) for u in updates] == [2] * 4  # batch_size B
    # the first update draws both rows stored so far
    assert sorted(w[0] for w in updates[0].windows) == [(0, 0, 0), (1, 0, 0)]


def test_trainer_memory_holds_no_truncation() -> None:
    # DQN's memory stores terminated only: a truncated LAST (e,0,2) follows an unflagged row
    # and is stored as MID with its reward 2, and the next episode's first row as MID with the
    # reset row's reward 0, where the env steps say LAST and FIRST.
    trace = ADAPTER.run_trainer(_trainer(ending="truncated"))
    stores = list(trace.of_kind("store"))
    steps = list(trace.of_kind("env_step"))
    assert [s.step_type for s in steps[2:]] == [(L, L), (F, F)]
    assert [(s.step_type, s.reward, s.discount) for s in stores[2:]] == [
        ((M, M), (2.0, 2.0), (1.0, 1.0)),
        ((M, M), (0.0, 0.0), (1.0, 1.0)),
    ]


def test_update_interval_trains_after_the_first_timestep() -> None:
    # u = 2, 2 iterations: timesteps = 4, DQN.update at timesteps 0 and 2, i.e. after vector
    # steps 1 and 3; the last vector step is a last iteration with no train call.
    trace = ADAPTER.run_trainer(_trainer(unroll_length=Fraction(2), num_iterations=2))
    assert [e.unroll_steps for e in trace.of_kind("iteration")] == [1, 2, 1]
    assert [(c.iteration, c.status) for c in trace.of_kind("train_call")] == [
        (1, "trained"),
        (2, "trained"),
    ]
    (end,) = trace.of_kind("run_end")
    assert (end.iterations, end.env_steps) == (3, 8)


def test_each_update_carries_the_update_counter_after_its_gradient_step() -> None:
    """update-counter: skrl's _update_counter after each gradient step (1, 2, ...), the value
    its target-network schedule reads; iterations start with every earlier step counted."""
    trace = ADAPTER.run_trainer(
        _trainer(num_iterations=3, num_updates_per_train_iter=2, counter_mode="per-mini-batch")
    )
    assert [u.counter for u in trace.of_kind("update")] == [1, 2, 3, 4, 5, 6]
    assert [i.counter for i in trace.of_kind("iteration")] == [0, 2, 4]


@pytest.mark.parametrize(
    ("threshold", "gate", "statuses"),
    [
        (3, "stored>=", ["warmup", "trained", "trained", "trained"]),  # learning_starts 1
        (4, "stored>=", ["warmup", "trained", "trained", "trained"]),  # learning_starts 1
        (4, "stored>", ["warmup", "warmup", "trained", "trained"]),  # learning_starts 2
        (0, "stored>=", ["trained"] * 4),  # learning_starts 0
    ],
)
def test_warm_up_is_learning_starts_in_timesteps(
    threshold: int, gate: str, statuses: list[str]
) -> None:
    # 2 envs: the memory holds 2, 4, 6, 8 items at the post_interaction of timesteps 0..3.
    trace = ADAPTER.run_trainer(_trainer(initial_collect_steps=threshold, warmup_gate=gate))
    assert _statuses(trace) == statuses
    assert [c.stored_total for c in trace.of_kind("train_call")] == [2, 4, 6, 8]
    assert len(list(trace.of_kind("update"))) == statuses.count("trained")


def test_rewards_shaper_shapes_every_stored_row() -> None:
    # One env (the base loop's one-env path), RewardTransform(1/2, -1): the rows of t = 1, 2
    # follow rows of reward 1, 2 (shaped -0.5, 0.0); the next episode's FIRST follows the
    # reset row of reward 0 (shaped -1); the env's first observation follows no row (0).
    trace = ADAPTER.run_trainer(
        _trainer(1, preprocess=RewardTransform(Fraction(1, 2), Fraction(-1)), num_iterations=5)
    )
    stores = list(trace.of_kind("store"))
    assert [s.t for s in stores] == [(0,), (1,), (2,), (0,), (1,)]
    assert [s.reward for s in stores] == [(0.0,), (-0.5,), (0.0,), (-1.0,), (-0.5,)]
    assert [s.reward for s in trace.of_kind("env_step")] == [(0.0,), (1.0,), (2.0,), (0.0,), (1.0,)]


def test_mini_batches_without_replacement_are_cut_to_the_stored_rows() -> None:
    # batch_size 3 with 2 envs: the first update finds 2 rows; without replacement (skrl's
    # default) it trains on those 2, with replacement on 3 draws of them.
    scenario = _trainer(mini_batch_size=3, num_iterations=2)
    plain = [len(u.windows) for u in ADAPTER.run_trainer(scenario).of_kind("update")]
    drawn = [len(u.windows) for u in SkrlTlbAdapter().run_trainer(scenario).of_kind("update")]
    assert (plain, drawn) == ([2, 3], [3, 3])


def test_env_step_budget_is_timesteps() -> None:
    # num_env_steps 5 with 2 envs: timesteps = ceil(5 / 2) = 3, one iteration each.
    trace = ADAPTER.run_trainer(_trainer(num_iterations=0, num_env_steps=5))
    assert [e.env_steps for e in trace.of_kind("iteration_end")] == [2, 4, 6]
    assert _statuses(trace) == ["trained"] * 3


def test_trainer_is_deterministic() -> None:
    scenario = _trainer(mini_batch_size=3, capacity=2, num_iterations=6)
    assert ADAPTER.run_trainer(scenario).to_jsonl() == ADAPTER.run_trainer(scenario).to_jsonl()


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"unroll_length": Fraction(1, 2)}, "update_interval"),
        ({"mini_batch_length": 2}, "single rows"),
        ({"whole_buffer": True}, "memory_size = rollouts"),
        ({"initial_collect_steps": 4, "warmup_gate": "size>="}, "buffer size"),
        ({"mode": "on-policy", "unroll_length": Fraction(2)}, "on-policy"),
        ({"num_iterations": 3, "num_env_steps": 4}, "after the env-step budget"),
        ({"preprocess": OverwriteStepType()}, "step type"),
        ({"preprocess": ExcludeTasks((0,))}, "never infos"),
        ({"preprocess": ExcludeSteps(2, 0), "initial_collect_steps": 2}, "stored count"),
        ({"preprocess": EpisodeDelayed(), "capacity": 3}, "one ring"),
        ({"sampling": SamplingSpec(period=2)}, "period 2"),
    ],
)
def test_trainer_refuses_what_skrl_cannot_express(knobs: dict[str, object], match: str) -> None:
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(_trainer(**knobs))  # type: ignore[arg-type]


def test_a_user_memory_leaves_out_whole_episodes() -> None:
    # One env, ExcludeEpisodes(2, 1): episode 1's rows (its FIRST, MID, LAST and the LAST's
    # reset row are t = 0, 1, 2) are dropped by the memory's add_samples, one Exclude each;
    # episode 2's first row follows episode 0's reset row in the memory: FIRST, reward 0.
    trace = ADAPTER.run_trainer(_trainer(1, preprocess=ExcludeEpisodes(2, 1), num_iterations=9))
    excluded = [(e.episode, e.t, e.reason) for e in trace.of_kind("exclude")]
    assert excluded == [((1,), (0,), "episode"), ((1,), (1,), "episode"), ((1,), (2,), "episode")]
    stores = list(trace.of_kind("store"))
    assert [(s.episode[0], s.t[0]) for s in stores] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    assert [s.step_type for s in stores] == [(F,), (M,), (L,), (F,), (M,), (L,)]
    assert [s.reward for s in stores] == [(0.0,), (1.0,), (2.0,), (0.0,), (1.0,), (2.0,)]
    # every timestep trains, whatever was stored (train.synced-schedule, variant plain)
    assert _statuses(trace) == ["trained"] * 9
    assert [c.stored_total for c in trace.of_kind("train_call")] == [1, 2, 3, 3, 3, 3, 4, 5, 6]


def test_a_user_memory_leaves_out_rows_of_several_envs() -> None:
    # Two envs, ExcludeSteps(3, 1): the rows of t = 1 are dropped; the others are added one at
    # a time, so the memory's flat order is the write order and each is read back where
    # Memory.add_samples put it. The row of t = 2 follows the row of t = 0 in its env, and
    # reads that row's reward (1, the reward into t = 1): the reward into t = 2 was in the
    # row left out.
    trace = ADAPTER.run_trainer(_trainer(2, preprocess=ExcludeSteps(3, 1), num_iterations=4))
    assert [(e.env, e.t) for e in trace.of_kind("exclude")] == [((0, 1), (1, 1))]
    stores = list(trace.of_kind("store"))
    assert [(s.env, s.t) for s in stores] == [((0, 1), (0, 0)), ((0, 1), (2, 2)), ((0, 1), (0, 0))]
    assert [s.reward for s in stores][1] == (1.0, 1.0)
    sampled = {w[0] for u in trace.of_kind("update") for w in u.windows}
    stored = {(e, ep, t) for s in stores for e, ep, t in zip(s.env, s.episode, s.t)}
    assert sampled <= stored


def test_an_update_on_a_memory_that_stored_nothing_ends_the_run() -> None:
    # EpisodeDelayed with no warm-up: DQN.update runs after the first timestep, while the
    # memory holds every row back; skrl raises there, and the trace says so.
    for adapter, message in ((ADAPTER, "numel() == 0"), (SkrlTlbAdapter(), "from=0 >= to=0")):
        trace = adapter.run_trainer(_trainer(1, preprocess=EpisodeDelayed()))
        assert message in trace.header["stopped"]
        assert [(h.t) for h in trace.of_kind("hold")] == [(0,)]
        assert not list(trace.of_kind("store"))
        assert [(c.status, c.stored_total) for c in trace.of_kind("train_call")] == [("trained", 0)]
        (end,) = trace.of_kind("iteration_end")
        assert end.pending == 1
        (run_end,) = trace.of_kind("run_end")
        assert run_end.t == (0,)
