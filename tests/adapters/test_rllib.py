"""The RLlib adapter: what it records of RLlib 2.60.0's own behaviour, on scenarios small enough
to derive every expected value by hand, and the RLlib facts its mapping rests on. Skipped when
RLlib is not installed."""

from __future__ import annotations

import copy
import dataclasses
import statistics
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pytest
import torch

pytest.importorskip("ray.rllib")

import gymnasium
from gymnasium.vector import AutoresetMode
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.learner import AddOneTsToEpisodesAndTruncate
from ray.rllib.connectors.learner.learner_connector_pipeline import LearnerConnectorPipeline
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
    PrioritizedEpisodeReplayBuffer,
)

import xpspec.adapters.rllib as rllib_adapter
from xpspec.adapters.rllib import RLlibAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import EpisodeDelayed, ExcludeSteps, Identity, OverwriteStepType
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import EnvScenario, LearnerScenario, ReplayScenario, TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace
from xpspec.refimpl import learner as lrn
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment")

F, M, L = 0, 1, 2
Ending = Literal["terminated", "truncated"]
ADAPTER = RLlibAdapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def _runner(spec: EnvSpec, **vector_kwargs: Any) -> SingleAgentEnvRunner:
    """A local runner over the toy env, as the adapter builds it, optionally with other
    ``SyncVectorEnv`` arguments."""

    def make(config: Any) -> gymnasium.vector.SyncVectorEnv:
        return gymnasium.vector.SyncVectorEnv(make_env_fns(spec, 0), **vector_kwargs)

    config = (
        PPOConfig()
        .environment(make)
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=spec.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=2,
        )
    )
    return SingleAgentEnvRunner(config=config)


def _ts(episode: Any) -> list[int]:
    return [int(o[2]) for o in np.asarray(episode.get_observations())]


def test_info_names_the_installed_versions() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("rllib", "2.60.0")
    assert info.extra_versions["gymnasium"] == "1.2.2"
    assert set(info.capabilities) == {
        "env",
        "trainer",
        "replay",
        "learner",
        "counter",
        "update-counter",
        "hooks",
        "state",
        "loss-mask",
        "bootstrap",
        "caller-episodes",
        "nstep",
        "shards",
        "recurrent",
        "priorities",
        "importance-weights",
        "stack",
        "checkpoint",
        "async",
        "offline",
    }
    ADAPTER.smoke()


# -- env ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_records_every_time_step_next_step_autoreset(ending: Ending, discount: float) -> None:
    # Two envs with episodes of 2 transitions, 7 vector steps: each env goes t = 0, 1, 2 (LAST)
    # of episode 0, then 0, 1, 2 of episode 1, then FIRST of episode 2 (NEXT_STEP: the reset
    # observation is a vector step of its own). Rewards are t (0 at FIRST); no action at LAST.
    trace = ADAPTER.run_env(EnvScenario(EnvSpec(2, (FixedSchedule(2, ending),)), steps=7))
    events = list(trace.of_kind("env_step"))
    steps = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert _items(trace, "env_step") == [[(0, k, t), (1, k, t)] for k, t in steps]
    assert [e.step_type for e in events] == [(s, s) for s in (F, M, L, F, M, L, F)]
    assert [e.reward for e in events] == [(r, r) for r in (0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0)]
    assert [e.discount[0] for e in events] == [1.0, 1.0, discount, 1.0, 1.0, discount, 1.0]
    assert [e.policy_state[0] for e in events] == [0, 1, 2, 0, 1, 2, 0]
    assert all((e.action[0] == -1) == (e.step_type[0] == L) for e in events)
    assert trace.header["autoreset_mode"] == str(AutoresetMode.NEXT_STEP)


def test_sample_counts_timesteps_over_sub_envs_and_continues_chunks() -> None:
    runner = _runner(EnvSpec(3, (FixedSchedule(10),)))
    # num_timesteps counts non-reset steps over all sub-envs, checked once per vector step:
    # 10 asked from 3 envs is 4 vector steps = 12 (rllib.md §2.2)
    first = runner.sample(num_timesteps=10)
    assert sorted(len(ep) for ep in first) == [4, 4, 4]
    # no argument: rollout_fragment_length (2) per sub-env, i.e. 6 timesteps; each chunk
    # continues its episode: same id_, t_started = the previous t, and cut() keeps one
    # observation before its first (o_3) as lookback
    second = runner.sample()
    by_id = {ep.id_: ep for ep in first}
    assert {ep.id_ for ep in second} == set(by_id)
    for ep in second:
        assert (ep.t_started, len(ep), _ts(ep)) == (4, 2, [4, 5, 6])
        assert ep.get_observations(-1, neg_index_as_lookback=True)[2] == 3
    runner.stop()


def test_sample_num_episodes_returns_exactly_n_and_drops_the_rest() -> None:
    # 3 envs, episodes of 2: vector step 2 finishes 3 episodes, step 5 the next 3; asked for
    # 4, RLlib returns exactly 4 (the loop breaks at the 4th), not 4..6 as documented.
    runner = _runner(EnvSpec(3, (FixedSchedule(2),)))
    episodes = runner.sample(num_episodes=4)
    assert len(episodes) == 4 and all(ep.is_done and ep.t_started == 0 for ep in episodes)
    runner.stop()


def test_same_step_autoreset_corrupts_rllib_episodes() -> None:
    # Under SAME_STEP the step that ends an episode returns the reset observation: RLlib
    # stores it as the final observation (0, 1, 0) and starts the next episode at its t = 1.
    runner = _runner(EnvSpec(1, (FixedSchedule(2),)), autoreset_mode=AutoresetMode.SAME_STEP)
    episodes = runner.sample(num_timesteps=4)
    obs = [[tuple(int(v) for v in o) for o in np.asarray(ep.get_observations())] for ep in episodes]
    assert obs[0] == [(0, 0, 0), (0, 0, 1), (0, 1, 0)]
    assert obs[1] == [(0, 1, 1), (0, 2, 0)]
    runner.stop()
    with pytest.raises(Unsupported, match="NEXT_STEP"):
        ADAPTER.run_env(EnvScenario(EnvSpec(1, autoreset="same-step"), steps=3))


# -- learner ------------------------------------------------------------------------------------
LEARNER = LearnerScenario(
    EnvSpec(1, (FixedSchedule(2, "terminated"),)),
    steps=5,
    gamma=Fraction(1, 2),
    lam=Fraction(1, 2),
    value_scale=Fraction(1),
    nstep=2,
    num_epochs=2,
    minibatch_size=4,
    num_learners=2,
)
"""Episode (0, 0): t = 0, 1, 2, terminated, rewards 1, 2; chunk (0, 1): t = 0, 1 in
progress, reward 1. V(s) = t, gamma = lambda = 1/2."""


@pytest.fixture(scope="module")
def learner_trace() -> Trace:
    return ADAPTER.run_learner(LEARNER)


def test_learner_gae_rows_with_rllib_bootstrap_rows(learner_trace: Trace) -> None:
    # Batch rows (t): 0, 1, 2* | 0, 1* (* = AddOneTs's bootstrap row, obs o_L, reward 0).
    # terminateds 0 1 0 | 0 0; truncateds 0 0 0 | 1 0 (the chunk is flagged truncated);
    # next_v = V of the following row (0 after the last). compute_value_targets:
    #   row 4: 0 + 0.5*0 - 1 = -1;  row 3: 1 + 0.5*1 - 0 = 1.5 (no propagation: truncated)
    #   row 2: 0 + 0.5*0 - 2 + 0.25*1.5 = -1.625 (leaks the next episode's first row)
    #   row 1: 2 + 0 - 1 = 1 (terminated);  row 0: 1 + 0.5*1 - 0 + 0.25*1 = 1.75
    events = {(e.env, e.episode): e for e in learner_trace.of_kind("advantages")}
    first, chunk = events[(0, 0)], events[(0, 1)]
    assert (first.t, chunk.t) == ((0, 1, 2), (0, 1))
    assert first.advantage == pytest.approx((1.75, 1.0, -1.625))
    assert first.value_target == pytest.approx((1.75, 2.0, 0.375))
    assert chunk.advantage == pytest.approx((1.5, -1.0))
    assert chunk.value_target == pytest.approx((1.5, 0.0))
    assert (first.loss_mask, chunk.loss_mask) == ((1, 1, 0), (1, 0))
    # GeneralAdvantageEstimation standardises over all 5 rows, bootstrap rows included
    raw = [1.75, 1.0, -1.625, 1.5, -1.0]
    mean, std = statistics.fmean(raw), statistics.pstdev(raw)
    got = first.normalized + chunk.normalized
    assert got == pytest.approx(tuple((a - mean) / std for a in raw), rel=1e-5)
    # refimpl's rllib-2.60 advantage variant reproduces the rows (a model for the proposal)
    model = lrn.episode_advantages(
        [_episode((0, 1, 2), (1.0, 2.0), True), _episode((0, 1), (1.0,), False)],
        0.5,
        0.5,
        variant="rllib-2.60",
    )
    assert got == pytest.approx(tuple(model.normalized_advantages.tolist()), rel=1e-5)


def _episode(ts: tuple[int, ...], rewards: tuple[float, ...], terminated: bool) -> lrn.Episode:
    """Episode ``(0, k)`` with time steps ``ts`` and ``V(s) = t`` for refimpl's learner."""
    return lrn.Episode(
        torch.tensor([[0.0, 0.0, float(t)] for t in ts]),
        torch.zeros(len(rewards), dtype=torch.int64),
        torch.tensor(rewards, dtype=torch.float64),
        terminated=terminated,
        values=torch.tensor([float(t) for t in ts], dtype=torch.float64),
    )


def test_learner_update_plan_is_cyclic_over_bootstrap_rows(learner_trace: Trace) -> None:
    # 5 rows (3 + 2, bootstrap rows counted), 2 epochs, minibatches of exactly 4 rows:
    # ceil(2 * 5 / 4) = 3 updates; the first epoch is not shuffled, so the first minibatch is
    # rows 0..3; the second takes row 4 then 3 rows of a shuffled second epoch, the third the
    # last 2 of it and 2 rows of a third pass.
    (plan,) = learner_trace.of_kind("update_plan")
    assert plan.num_updates == 3
    assert [len(mb) for mb in plan.minibatch_rows] == [4, 4, 4]
    first, second, third = plan.minibatch_rows
    assert first == (0, 1, 2, 3) and second[0] == 4
    assert sorted(second[1:] + third[:2]) == [0, 1, 2, 3, 4]


def test_learner_shards_split_episodes_to_meet_targets(learner_trace: Trace) -> None:
    # Lengths 2 and 1 over 2 shards: targets 3 // 2 = 1 and 2. Episode (0, 0) does not fit
    # shard 0's target: [0, 1) goes there, [1, 2) to shard 1; then (0, 1) meets shard 0 at its
    # target and is appended anyway.
    shards = [
        (e.learner, list(zip(e.episode, e.start, e.stop))) for e in learner_trace.of_kind("shard")
    ]
    assert shards == [(0, [(0, 0, 1), (1, 0, 1)]), (1, [(0, 1, 2)])]
    model = lrn.shard_episodes([2, 1], 2, variant="rllib-2.60")
    assert [[(p.episode, p.start, p.stop) for p in s] for s in model] == [s for _, s in shards]


def test_learner_nstep_bootstraps_with_the_requested_n(learner_trace: Trace) -> None:
    # n = 2, gamma = 1/2, V = t. (0,0,0): window ends exactly at the terminated end,
    # 1 + 0.5*2 = 2. (0,0,1): clipped at the end, `terminated` dropped by slice(), so
    # 2 + 0.25*V(o_2) = 2.5 (the spec: 2). (0,1,0): clipped at the newest step,
    # 1 + 0.25*V(o_1) = 1.25 (the spec: 1 + 0.5*1 = 1.5).
    (nstep,) = learner_trace.of_kind("nstep")
    rows = list(zip(zip(nstep.env, nstep.episode, nstep.t), nstep.target, nstep.steps))
    assert rows == [((0, 0, 0), 2.0, 2), ((0, 0, 1), 2.5, 1), ((0, 1, 0), 1.25, 1)]


def test_learner_nstep_sampler_that_never_returns_is_unsupported(monkeypatch: Any) -> None:
    # Episodes of 2 and n = 5: every window is clipped and adds 2 - ts - 3 < 0 to the batch
    # counter, so `while B < batch_size_B` never ends; the adapter stops it.
    monkeypatch.setattr(rllib_adapter, "_DRAW_LIMIT", 300)
    scenario = LearnerScenario(EnvSpec(1, (FixedSchedule(2),)), steps=3, nstep=5, num_learners=1)
    with pytest.raises(Unsupported, match="did not return within 300 draws"):
        ADAPTER.run_learner(scenario)


def test_learner_connector_mutates_episodes_in_place() -> None:
    episode = SingleAgentEpisode(
        id_="a", observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    connector: Any = AddOneTsToEpisodesAndTruncate()
    connector(rl_module=None, batch={}, episodes=[episode], shared_data={})
    # the caller's episode now has the bootstrap step, an id suffix and a truncation flag
    assert (episode.id_, len(episode), episode.is_truncated) == ("a_0", 3, True)


def test_caller_episodes_are_read_from_the_objects_handed_to_the_learner(
    learner_trace: Trace,
) -> None:
    # (transitions, terminated, truncated): the terminated episode grows by the bootstrap
    # step; the chunk in progress grows and is flagged truncated.
    handed = {
        (e.env, e.episode): (e.before, e.after) for e in learner_trace.of_kind("caller_episode")
    }
    assert handed == {(0, 0): ((2, 1, 0), (3, 1, 0)), (0, 1): ((1, 0, 0), (2, 0, 1))}


def test_caller_episodes_follow_what_the_framework_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make RLlib's learner connector pipeline work on copies of the episodes: the recorded
    # "after" must follow the framework (it is read from the objects, not computed).
    original = LearnerConnectorPipeline.__call__

    def on_copies(self: Any, *args: Any, episodes: Any = None, **kwargs: Any) -> Any:
        return original(self, *args, episodes=copy.deepcopy(episodes), **kwargs)

    monkeypatch.setattr(LearnerConnectorPipeline, "__call__", on_copies)
    trace = ADAPTER.run_learner(LEARNER)
    handed = {(e.env, e.episode): (e.before, e.after) for e in trace.of_kind("caller_episode")}
    assert handed == {(0, 0): ((2, 1, 0), (2, 1, 0)), (0, 1): ((1, 0, 0), (1, 0, 0))}


def test_sharding_without_a_minibatch_size_raises() -> None:
    # PPO forwards minibatch_size=None when unset; TrainingData.shard multiplies by it.
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    with pytest.raises(TypeError, match="NoneType"):
        TrainingData(episodes=[episode]).shard(2, 1, minibatch_size=None, num_epochs=1)
    _, kwargs = TrainingData(episodes=[episode]).shard(2, 1, minibatch_size=3, num_epochs=4)[0]
    assert kwargs == {"num_total_minibatches": 4 * 2 // (2 * 3)}  # floor, pre-bootstrap


# -- replay -------------------------------------------------------------------------------------
def test_replay_stores_chunks_and_evicts_whole_episodes() -> None:
    # One env, episodes of 3, 9 vector steps: (0,0,0..3), (0,1,0..3), (0,2,0). RLlib stores
    # an episode once it holds a transition (never the lone FIRST (0,2,0)); capacity 4
    # timesteps: when (0,1,*) passes 2 transitions the total (3 + 2) exceeds 4 and the whole
    # episode (0,0,*) goes. Windows of 2 under forbid are 1-transition sequences of (0,1,*).
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(3),)),
        capacity=4,
        fill_steps=9,
        batch_size=30,
        draws=2,
        sampling=SamplingSpec(window_length=2, boundary="forbid"),
    )
    trace = ADAPTER.run_replay(scenario)
    stored = [i for store in _items(trace, "store") for i in store]
    assert stored == [(0, 0, t) for t in range(4)] + [(0, 1, t) for t in range(4)]
    starts = {w[0] for e in trace.of_kind("sampled") for w in e.windows}
    assert starts == {(0, 1, 0), (0, 1, 1), (0, 1, 2)}
    assert all(w[1] == (0, 1, w[0][2] + 1) for e in trace.of_kind("sampled") for w in e.windows)


def test_replay_cross_rows_continue_into_a_random_episode() -> None:
    # DreamerV3 rows run past an episode end into a randomly drawn stored episode from its
    # t = 0: after (0, 1, 3) comes (0, 0, 0) or (0, 1, 0), never the env's next episode.
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(3),)),
        capacity=16,
        fill_steps=8,
        batch_size=64,
        draws=2,
        sampling=SamplingSpec(window_length=3),
    )
    trace = ADAPTER.run_replay(scenario)
    after_last = {
        w[j + 1]
        for e in trace.of_kind("sampled")
        for w in e.windows
        for j in range(2)
        if w[j] == (0, 1, 3)
    }
    assert after_last == {(0, 0, 0), (0, 1, 0)}


def test_replay_pad_clips_sequences_at_the_episode_end() -> None:
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(2),)),
        capacity=16,
        fill_steps=3,
        batch_size=20,
        sampling=SamplingSpec(window_length=3, boundary="pad"),
    )
    (draw,) = ADAPTER.run_replay(scenario).of_kind("sampled")
    # episode (0,0,0..2): sequences of 2 transitions from t = 0, or clipped from t = 1
    assert set(draw.windows) == {((0, 0, 0), (0, 0, 1), (0, 0, 2)), ((0, 0, 1), (0, 0, 2), None)}


def test_replay_forbid_without_any_full_window_is_unsupported_not_a_hang() -> None:
    # Episodes of 1 transition hold no sequence of 2: RLlib would redraw for ever.
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(1),)),
        capacity=8,
        fill_steps=6,
        batch_size=2,
        sampling=SamplingSpec(window_length=3, boundary="forbid"),
    )
    with pytest.raises(Unsupported, match="would not end"):
        ADAPTER.run_replay(scenario)


def test_replay_without_period_grid_or_balancing_is_unsupported() -> None:
    env = EnvSpec(2, (FixedSchedule(3),))
    for sampling in (
        SamplingSpec(window_length=2, period=2),
        SamplingSpec(distribution="env-balanced"),
    ):
        with pytest.raises(Unsupported):
            ADAPTER.run_replay(ReplayScenario(env, capacity=8, fill_steps=5, sampling=sampling))


def test_buffers_n_step_windows_at_episode_ends() -> None:
    # A terminated episode of 5 transitions with rewards 1: EpisodeReplayBuffer clips n = 3
    # windows at the end and drops `terminated`; the prioritised buffer rejects them (only
    # starts 0..2); a tuple n_step (1, 3) draws n in [1, 3).
    episode = SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        actions=[0] * 5,
        rewards=[1.0] * 5,
        terminated=True,
        len_lookback_buffer=0,
    )
    plain: Any = EpisodeReplayBuffer(capacity=100)
    plain.add(episode)
    plain.rng = np.random.default_rng(0)
    items = plain.sample(batch_size_B=60, n_step=3, gamma=0.5, sample_episodes=True)
    ends = {(it.t_started, float(it.get_observations(-1)), it.is_terminated) for it in items}
    assert ends == {
        (0, 3.0, False),
        (1, 4.0, False),
        (2, 5.0, True),
        (3, 5.0, False),
        (4, 5.0, False),
    }
    prioritized: Any = PrioritizedEpisodeReplayBuffer(capacity=100)
    prioritized.add(episode)
    drawn = prioritized.sample(batch_size_B=60, n_step=3, gamma=0.5)
    assert {it.t_started for it in drawn} == {0, 1, 2}
    ranged = plain.sample(batch_size_B=60, n_step=(1, 3), gamma=0.5, sample_episodes=True)
    assert {int(it.get_extra_model_outputs("n_step")[0]) for it in ranged} == {1, 2}


# -- trainer and configuration ------------------------------------------------------------------
TRAINER = TrainerScenario(EnvSpec(1, (FixedSchedule(2),)), TrainerConfig(num_iterations=5))
"""One env, episodes t = 0, 1, 2 (terminated); DQN with rollout_fragment_length 1, a batch of
1 and no warm-up: one sampling round and one update per train() call."""


@pytest.fixture(scope="module")
def trainer_trace() -> Trace:
    return ADAPTER.run_trainer(TRAINER)


def test_trainer_rounds_take_a_vector_step_more_after_a_reset(trainer_trace: Trace) -> None:
    # A round samples until one non-reset timestep was taken: iterations 3 and 5 begin with
    # the step that returns the reset observation, which RLlib does not count.
    steps = [
        (e.iteration, e.env[0], e.episode[0], e.t[0]) for e in trainer_trace.of_kind("env_step")
    ]
    assert steps == [
        (1, 0, 0, 0),
        (2, 0, 0, 1),
        (3, 0, 0, 2),
        (3, 0, 1, 0),
        (4, 0, 1, 1),
        (5, 0, 1, 2),
        (5, 0, 2, 0),
    ]


def test_trainer_stores_each_chunk_with_its_newest_observation(trainer_trace: Trace) -> None:
    # The buffer receives the round's chunk, the observation the last step returned
    # included; a new episode holding only its reset observation waits for the next round.
    stores = [(e.iteration, list(zip(e.episode, e.t))) for e in trainer_trace.of_kind("store")]
    assert stores == [
        (1, [(0, 0), (0, 1)]),
        (2, [(0, 2)]),
        (3, [(1, 0), (1, 1)]),
        (4, [(1, 2)]),
        (5, [(2, 0), (2, 1)]),
    ]
    stored_types = [t for e in trainer_trace.of_kind("store") for t in e.step_type]
    assert stored_types == [F, M, L, F, M, L, F, M]


def test_trainer_updates_on_stored_transition_starts(trainer_trace: Trace) -> None:
    # The counter is Algorithm.iteration as RLlib holds it during the k-th train(): k - 1.
    calls = list(trainer_trace.of_kind("train_call"))
    assert [(c.status, c.counter, c.stored_total) for c in calls] == [
        ("trained", 0, 2),
        ("trained", 1, 3),
        ("trained", 2, 5),
        ("trained", 3, 6),
        ("trained", 4, 8),
    ]
    assert [e.counter for e in trainer_trace.of_kind("iteration")] == [0, 1, 2, 3, 4]
    assert [e.counter for e in trainer_trace.of_kind("update")] == [0, 1, 2, 3, 4]
    assert [e.counter for e in trainer_trace.of_kind("iteration_end")] == [1, 2, 3, 4, 5]
    stored: set[tuple[int, int, int]] = set()
    for event in trainer_trace.events:
        if event.kind == "store":
            stored |= {
                i
                for i, st in zip(zip(event.env, event.episode, event.t), event.step_type)
                if st != L
            }
        if event.kind == "update":
            (window,) = event.windows
            assert window[0] in stored
    assert sum(1 for _ in trainer_trace.of_kind("update")) == 5
    assert trainer_trace.events[-1].kind == "run_end"


def test_trainer_hooks_follow_each_update_and_end_each_train(trainer_trace: Trace) -> None:
    # after_gradient_based_update right after each _update, on_train_result after the
    # iteration's updates: the order RLlib called them in.
    kinds = [
        e.name if e.kind == "hook" else e.kind
        for e in trainer_trace.events
        if e.kind in ("hook", "update", "iteration_end")
    ]
    assert kinds == ["update", "after_update", "after_train_iter", "iteration_end"] * 5


def test_trainer_reads_rllibs_counter_whatever_convention_is_asked(trainer_trace: Trace) -> None:
    # A variant model's scenario (counter_mode per-iteration-after) asks for the same
    # counter: when it grows is RLlib's.
    scenario = dataclasses.replace(
        TRAINER, trainer=dataclasses.replace(TRAINER.trainer, counter_mode="per-iteration-after")
    )
    trace = ADAPTER.run_trainer(scenario)
    for kind in ("iteration", "train_call", "update", "iteration_end"):
        got = [e.counter for e in trace.of_kind(kind)]
        assert got == [e.counter for e in trainer_trace.of_kind(kind)]


def test_trainer_update_counter_is_the_learners_weights_seq_no() -> None:
    # Two updates per train() (training_intensity twice the native ratio), a warm-up of 2
    # sampled steps: Learner.update increments WEIGHTS_SEQ_NO before its one _update.
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(2),)),
        TrainerConfig(
            num_iterations=3,
            num_updates_per_train_iter=2,
            initial_collect_steps=2,
            counter_mode="per-mini-batch",
        ),
    )
    trace = ADAPTER.run_trainer(scenario)
    assert [e.counter for e in trace.of_kind("iteration")] == [0, 0, 2]
    assert [(c.status, c.counter) for c in trace.of_kind("train_call")] == [
        ("warmup", 0),
        ("trained", 0),
        ("trained", 2),
    ]
    assert [(e.iteration, e.counter) for e in trace.of_kind("update")] == [
        (2, 1),
        (2, 2),
        (3, 3),
        (3, 4),
    ]


@pytest.mark.parametrize(
    ("knobs", "preprocess", "match"),
    [
        ({"unroll_length": Fraction(1, 2)}, Identity(), "rollout_fragment_length"),
        ({"mode": "on-policy"}, Identity(), "on-policy"),
        ({"mini_batch_length": 2}, Identity(), "boundary .cross."),
        ({}, ExcludeSteps(2, 0), "concat_episode"),
    ],
)
def test_trainer_refuses_what_dqn_cannot_express(
    knobs: dict[str, Any], preprocess: Any, match: str
) -> None:
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(2),)), TrainerConfig(num_iterations=2, **knobs), preprocess
    )
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(scenario)


def test_overwriting_a_truncated_last_leaves_the_env_runners_chunks_alone() -> None:
    # on_sample_end clears is_truncated on a copy: the env runner keeps the chunk itself for
    # its metrics and SingleAgentEnvRunner.get_metrics asserts every done chunk it kept is
    # still done (it raised AssertionError in the next train() when the chunk was changed).
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(2, "truncated"),)),
        TrainerConfig(num_iterations=6),
        OverwriteStepType("MID", "truncated-last"),
    )
    trace = ADAPTER.run_trainer(scenario)
    assert sum(1 for _ in trace.of_kind("iteration_end")) == 6
    stored = {
        (k, t): st for e in trace.of_kind("store") for k, t, st in zip(e.episode, e.t, e.step_type)
    }
    assert stored[(0, 2)] == M and stored[(1, 2)] == M  # each truncated LAST stored as MID


# -- findings: RLlib 2.60.0 alone -----------------------------------------------------------------
def test_finding_a_sampling_round_does_not_count_the_reset_step() -> None:
    """Finding unroll.fractional-schedule: sample(num_timesteps=n) steps the vector env until
    n non-reset timesteps were taken; the step that returns a reset observation adds none."""
    calls: list[int] = []

    class CountingVectorEnv(gymnasium.vector.SyncVectorEnv):
        def step(self, actions: Any) -> Any:
            calls.append(1)
            return super().step(actions)

    def make(config: Any) -> gymnasium.vector.SyncVectorEnv:
        return CountingVectorEnv(make_env_fns(EnvSpec(1, (FixedSchedule(2),)), 0))

    config = (
        PPOConfig()
        .environment(make)
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=1,
            gym_env_vectorize_mode="vector_entry_point",
        )
    )
    runner = SingleAgentEnvRunner(config=config)
    per_round = []
    for _ in range(5):
        before = len(calls)
        runner.sample(num_timesteps=1)
        per_round.append(len(calls) - before)
    runner.stop()
    assert per_round == [1, 1, 2, 1, 2]


def test_finding_the_reset_observation_has_no_reward() -> None:
    """Finding preprocess.transform: an episode holds one reward per transition, none for its
    reset observation, so an on_sample_end reward transform cannot reach a FIRST step."""
    runner = _runner(EnvSpec(1, (FixedSchedule(3),)))
    (chunk,) = runner.sample(num_timesteps=2)
    runner.stop()
    assert chunk.t_started == 0
    assert len(chunk.get_observations()) == 3 and len(chunk.get_rewards()) == 2


def test_finding_sampling_an_empty_episode_buffer_raises() -> None:
    """Finding (stopped run): DQN's gate compares sampled env steps with
    num_steps_sampled_before_learning_starts (algorithms/dqn/dqn.py,
    _training_step_new_api_stack), so it opens on an empty buffer when on_sample_end
    dropped every chunk; the buffer's sampler then draws from no timestep."""
    buffer = EpisodeReplayBuffer(capacity=10)
    with pytest.raises(ValueError, match="high <= 0"):
        buffer.sample(num_items=4, n_step=1, gamma=0.99, sample_episodes=True)


def test_a_held_episode_is_glued_annotated_and_stored_whole() -> None:
    """The episode-delayed route with RLlib's own episode API: the env runner's
    truncate_episodes cut (SingleAgentEpisode.cut) continues an episode in a new chunk of the
    same id_; the user's on_sample_end keeps the first chunk, glues the continuation onto it
    (concat_episode) and annotates the whole episode in custom_data; EpisodeReplayBuffer.add
    stores a deep copy that keeps the annotation, as one episode from t = 0."""
    first = SingleAgentEpisode(len_lookback_buffer=0)
    first.add_env_reset(observation=np.array([0.0, 0.0, 0.0]))
    first.add_env_step(observation=np.array([0.0, 0.0, 1.0]), action=0, reward=1.0)
    second = first.cut()
    second.add_env_step(
        observation=np.array([0.0, 0.0, 2.0]), action=0, reward=2.0, terminated=True
    )
    held = copy.deepcopy(first)
    held.concat_episode(second)
    held.custom_data["annotation"] = 1.0
    buffer = EpisodeReplayBuffer(capacity=10)
    buffer.add([held])
    (stored,) = buffer.episodes
    assert stored is not held and stored.custom_data == {"annotation": 1.0}
    assert (stored.t_started, len(stored), stored.is_terminated) == (0, 2, True)
    assert [int(o[2]) for o in stored.get_observations()] == [0, 1, 2]


def test_episode_delayed_holds_every_chunk_and_stores_whole_annotated_episodes() -> None:
    # One env, episodes of 2 steps, u = 1, a warm-up gate never reached (no buffer sample):
    # every unrolled item is held; each episode is stored whole, from FIRST to LAST, with
    # annotation 1 (terminated), read back from the stored episode's custom_data.
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(2),)),
        TrainerConfig(num_iterations=6, initial_collect_steps=1000),
        EpisodeDelayed(),
    )
    trace = ADAPTER.run_trainer(scenario)
    held = {i for e in trace.of_kind("hold") for i in zip(e.env, e.episode, e.t)}
    stores = list(trace.of_kind("store"))
    stored = [i for e in stores for i in zip(e.env, e.episode, e.t)]
    assert "stopped" not in trace.header
    assert stored and set(stored) <= held
    assert all(e.t[0] == 0 and e.step_type[-1] == 2 for e in stores)
    assert {a for e in stores for a in e.annotation} == {1.0}
    (end,) = trace.of_kind("run_end")
    assert not set(zip(end.env, end.episode, end.t)) & set(stored)


def test_auto_rollout_fragment_length_overshoots_the_batch() -> None:
    # 512 over 2 runners x 20 envs = 12.8: both runners take 13 (520 timesteps in total)
    config = (
        PPOConfig()
        .training(train_batch_size_per_learner=512)
        .env_runners(num_env_runners=2, num_envs_per_env_runner=20, rollout_fragment_length="auto")
    )
    lengths = [config.get_rollout_fragment_length(i) for i in (1, 2)]
    assert lengths == [13, 13] and sum(lengths) * 20 == 520


def test_finding_a_buffer_of_one_timestep_keeps_a_whole_episode() -> None:
    """Finding replay.eviction (trainer): capacity counts transitions over all stored episodes
    and eviction removes whole episodes only while over it, so a buffer of capacity 1 keeps
    both observations of a one-transition episode and samples its first."""
    observations = [np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])]
    episode = SingleAgentEpisode(
        observations=observations,
        actions=[0],
        rewards=[1.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    buffer = EpisodeReplayBuffer(capacity=1)
    buffer.add([episode])
    assert buffer.get_num_timesteps() == 1 and len(buffer.episodes) == 1
    drawn = buffer.sample(num_items=4, n_step=1, gamma=0.99, sample_episodes=True)
    assert {int(item.get_observations(0)[2]) for item in drawn} == {0}


def test_finding_iterations_train_whatever_on_sample_end_leaves_to_store() -> None:
    """Finding train.excluded-earn-nothing: DQN's training_step updates once per iteration
    after the warm-up (algorithms/dqn/dqn.py, _training_step_new_api_stack), whether or not
    anything the round sampled reached the buffer: an on_sample_end hook that keeps nothing
    after the fourth round leaves the buffer at 4 timesteps while every iteration still
    trains."""
    import ray
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner

    updates: list[int] = []

    class CountingLearner(DQNTorchLearner):
        def _update(self, batch: Any) -> Any:
            updates.append(1)
            return super()._update(batch)

    rounds = [0]

    def keep_nothing_after_four_rounds(*, samples: list[Any], **_: Any) -> None:
        rounds[0] += 1
        if rounds[0] > 4:
            samples.clear()

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        algo = (
            _tiny_cartpole_dqn(DQNConfig(), CountingLearner)
            .callbacks(on_sample_end=keep_nothing_after_four_rounds)
            .build_algo()
        )
        per_iteration = []
        for _ in range(8):
            before = len(updates)
            algo.train()
            per_iteration.append(len(updates) - before)
        stored = algo.local_replay_buffer.get_num_timesteps()
    finally:
        ray.shutdown()
    assert stored == 4
    assert per_iteration == [0, 1, 1, 1, 1, 1, 1, 1]


def _tiny_cartpole_dqn(config: Any, learner_class: Any) -> Any:
    """RLlib's own DQN on CartPole with the local env runner and learner, one timestep per
    sample, two per train batch, learning from the second stored timestep, and no minimum
    time or timesteps per ``train()``: RLlib alone, as a user configures it."""
    return (
        config.environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=1)
        .training(
            train_batch_size_per_learner=2,
            num_steps_sampled_before_learning_starts=2,
            learner_class=learner_class,
        )
        .rl_module(model_config={"fcnet_hiddens": [8], "head_fcnet_hiddens": [8]})
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .learners(num_learners=0)
    )


def test_dqn_iteration_counts_after_the_step_and_hooks_once_per_update() -> None:
    """Deviation unroll.global-counter (variant iteration-count-before), and the hooks the
    adapter records: in RLlib 2.60.0's DQN, the k-th Algorithm.train() runs training_step with
    Algorithm.iteration == k - 1 (Trainable.train increments it after Algorithm.step), and
    on_train_result, called after the step, sees k; Learner.update makes one _update per call
    (LearnerGroup.update passes no minibatch_size) and calls after_gradient_based_update once
    after it, incrementing WEIGHTS_SEQ_NO before it."""
    import ray
    from ray.rllib.algorithms.dqn import DQN, DQNConfig
    from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    calls: list[tuple[str, int]] = []

    class Learner(DQNTorchLearner):
        def _update(self, batch: Any) -> Any:
            calls.append(("update", int(self.get_state(components=[])[WEIGHTS_SEQ_NO])))
            return super()._update(batch)

        def after_gradient_based_update(self, *, timesteps: Any) -> None:
            super().after_gradient_based_update(timesteps=timesteps)
            calls.append(("after_gradient_based_update", 0))

    class Algo(DQN):
        def training_step(self) -> Any:
            calls.append(("training_step", self.iteration))
            return super().training_step()

    def on_train_result(*, algorithm: Any, **_: Any) -> None:
        calls.append(("on_train_result", algorithm.iteration))

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        config = _tiny_cartpole_dqn(DQNConfig(algo_class=Algo), Learner).callbacks(
            on_train_result=on_train_result
        )
        algo = config.build_algo()
        for _ in range(3):
            algo.train()
        algo.stop()
    finally:
        ray.shutdown()
    assert calls == [
        ("training_step", 0),
        ("on_train_result", 1),
        ("training_step", 1),
        ("update", 1),
        ("after_gradient_based_update", 0),
        ("on_train_result", 2),
        ("training_step", 2),
        ("update", 2),
        ("after_gradient_based_update", 0),
        ("on_train_result", 3),
    ]
