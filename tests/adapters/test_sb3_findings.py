"""Minimal reproductions, with Stable-Baselines3 2.9.2 and Gymnasium alone, of the findings
that xpspec/adapters/sb3.expectations.toml declares for preprocessing through a
``replay_buffer_class`` that overrides ``add``, and for resuming a saved run. Skipped when
SB3 is not installed."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.buffers import ReplayBuffer


class _Shifted(ReplayBuffer):
    """A user's reward transform: every reward minus 1."""

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, *rest: Any) -> None:
        super().add(obs, next_obs, action, np.asarray(reward) - 1.0, *rest)


class _EveryOtherRow(ReplayBuffer):
    """A user's exclusion: every second row is left out."""

    seen = 0

    def add(self, *row: Any) -> None:
        self.seen += 1
        if self.seen % 2:
            super().add(*row)


class _EpisodeDelayed(ReplayBuffer):
    """A user's episode-delayed buffer: rows are held until the episode's done row."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: list[tuple[Any, ...]] = []

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        self.held.append(tuple(np.array(x) for x in (obs, next_obs, action, reward, done)))
        if done[0]:
            for row in self.held:
                super().add(*row, infos)
            self.held = []


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp_path(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3 2.9.2's ``configure_logger`` makes a folder for every ``learn()`` (``$SB3_LOGDIR``, else
    a new ``SB3-<date>`` in the system temporary directory): keep them in the test's own."""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))


def _dqn(buffer: type[ReplayBuffer], learning_starts: int) -> DQN:
    return DQN(
        "MlpPolicy",
        "CartPole-v1",
        train_freq=1,
        batch_size=1,
        learning_starts=learning_starts,
        replay_buffer_class=buffer,
        policy_kwargs={"net_arch": [8]},
        seed=0,
        device="cpu",
    )


def test_no_row_holds_the_reward_of_an_episode_first_observation() -> None:
    # preprocess.transform: RewardTransform(1, -1) gives a FIRST the reward 0 - 1 = -1. A row
    # holds (o_t, r_{t+1}): the episode's first observation 0 gets the reward of reaching 1.
    box = spaces.Box(0.0, 10.0, (1,), np.float32)
    buffer = _Shifted(4, box, spaces.Discrete(2), device="cpu")
    for t, reward in ((0, 1.0), (1, 2.0)):
        obs, nxt = np.array([[t]], np.float32), np.array([[t + 1]], np.float32)
        buffer.add(obs, nxt, np.array([0]), np.array([reward]), np.array([t == 1]), [{}])
    assert buffer.observations[:2, 0, 0].tolist() == [0.0, 1.0]
    assert buffer.rewards[:2, 0].tolist() == [0.0, 1.0]  # r_1 - 1 and r_2 - 1: no -1 anywhere


class _WithoutSecondStep(ReplayBuffer):
    """A user's step exclusion: the row of observation 1 is left out."""

    def add(self, obs: Any, *rest: Any) -> None:
        if float(np.asarray(obs).reshape(-1)[0]) != 1.0:
            super().add(obs, *rest)


def test_leaving_out_a_row_drops_the_next_steps_reward_and_boundary() -> None:
    # preprocess.exclusion: an episode 0 -> 1 -> 2 (done), then the next episode's 0. The
    # row of 1 holds r_2 and the episode's done flag: without it no stored row ends the
    # episode, and the reward into 2 is nowhere, so the next episode's first row follows a
    # row that is not done.
    box = spaces.Box(0.0, 10.0, (1,), np.float32)
    buffer = _WithoutSecondStep(4, box, spaces.Discrete(2), device="cpu")
    for t, nxt, reward, done in ((0, 1, 1.0, False), (1, 2, 2.0, True), (0, 1, 1.0, False)):
        obs, new = np.array([[t]], np.float32), np.array([[nxt]], np.float32)
        buffer.add(obs, new, np.array([0]), np.array([reward]), np.array([done]), [{}])
    assert buffer.observations[: buffer.pos, 0, 0].tolist() == [0.0, 0.0]
    assert buffer.dones[: buffer.pos, 0].tolist() == [0.0, 0.0]
    assert buffer.rewards[: buffer.pos, 0].tolist() == [1.0, 1.0]


def test_rows_left_out_earn_the_same_train_calls() -> None:
    # train.synced-schedule, train.excluded-earn-nothing: 8 vector steps, 4 rows stored, and
    # 8 gradient steps (one train call per collected step, learning_starts 0).
    model = _dqn(_EveryOtherRow, learning_starts=0)
    model.learn(8)
    assert model.replay_buffer is not None
    assert (model.replay_buffer.pos, model._n_updates) == (4, 8)


def test_training_from_a_buffer_still_empty_raises() -> None:
    # train.insufficient-data: the first train call comes after one collected step, while the
    # delaying buffer holds that row back; sampling an empty ReplayBuffer raises.
    with pytest.raises(ValueError, match="high <= 0"):
        _dqn(_EpisodeDelayed, learning_starts=0).learn(4)


def test_a_released_episode_has_no_row_for_its_last_observation() -> None:
    # preprocess.delayed-per-env: the episode of L steps is released as L rows o_0 .. o_{L-1}
    # at its done row; its final observation is only that row's next_observations.
    model = _dqn(_EpisodeDelayed, learning_starts=10_000)
    model.learn(60)
    buffer = model.replay_buffer
    assert buffer is not None
    ends = np.flatnonzero(buffer.dones[: buffer.pos, 0])
    assert ends.size >= 1
    first_episode = ends[0] + 1  # rows 0 .. ends[0]
    observations = buffer.observations[:first_episode, 0]
    final = buffer.next_observations[ends[0], 0]
    assert not any(np.array_equal(final, row) for row in observations)
    assert np.array_equal(buffer.next_observations[: ends[0], 0], observations[1:])


def test_load_reseeds_the_random_streams_replay_sampling_draws_from() -> None:
    """Finding of resume.rng-restored: SB3 2.9.2 saves no random state, and ``load`` calls
    ``_setup_model``, which calls ``set_random_seed(self.seed)``: after a load, the global
    numpy stream ``ReplayBuffer.sample`` draws from starts again from the model's seed."""
    model = DQN(
        "MlpPolicy",
        "CartPole-v1",
        learning_starts=0,
        buffer_size=100,
        policy_kwargs={"net_arch": [8]},
        seed=3,
        device="cpu",
    )
    model.learn(40)
    model_file, buffer_file = io.BytesIO(), io.BytesIO()
    model.save(model_file)
    model.save_replay_buffer(buffer_file)
    state = np.random.get_state()
    uninterrupted = model.replay_buffer.sample(8).observations.numpy()
    np.random.set_state(state)

    loaded = DQN.load(io.BytesIO(model_file.getvalue()), env=model.get_env(), device="cpu")
    loaded.load_replay_buffer(io.BytesIO(buffer_file.getvalue()))
    resumed = loaded.replay_buffer.sample(8).observations.numpy()
    np.random.seed(3)
    fresh = loaded.replay_buffer.sample(8).observations.numpy()
    assert not np.array_equal(resumed, uninterrupted)
    assert np.array_equal(resumed, fresh)  # the stream restarted from the seed
