"""Minimal reproductions, with Tianshou 2.0.1 alone, of the behaviours behind the preprocessing
findings in ``xpspec/adapters/tianshou.expectations.toml``: a one-env gymnasium env whose observation is
the step count ``t`` and whose step out of ``t`` earns reward ``t + 1``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tianshou")

import gymnasium
from tianshou.algorithm.algorithm_base import Policy
from tianshou.data import Batch, CachedReplayBuffer, Collector, ReplayBuffer, VectorReplayBuffer
from tianshou.env import DummyVectorEnv


class _Counter(gymnasium.Env[np.ndarray, np.int64]):
    """Episodes of ``length`` steps, ending terminated or truncated."""

    observation_space = gymnasium.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, length: int, truncate: bool) -> None:
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        end = self.t == self.length
        obs = np.array([float(self.t)], np.float32)
        return obs, float(self.t), end and not self.truncate, end and self.truncate, {}


class _Zero(Policy):
    def __init__(self) -> None:
        super().__init__(_Counter.action_space, _Counter.observation_space)

    def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
        return Batch(act=np.zeros(len(batch.obs), np.int64))


def _collector(buffer: Any, truncate: bool = False, **hooks: Any) -> Collector:
    envs = DummyVectorEnv([lambda: _Counter(3, truncate)])
    collector = Collector(_Zero(), envs, buffer, **hooks)
    collector.reset()
    return collector


def test_a_first_observation_has_no_reward_to_transform() -> None:
    # on_step_hook scales the reward of each transition before its add; an episode of 3
    # transitions stores 3 rewards, each the one *out of* its row's obs: none is the reward
    # into the first observation t = 0, so no shift ever reaches it.
    def scale(action_batch: Any, rollout: Any) -> None:
        rollout.rew = rollout.rew * 0.5 - 1.0

    buffer = VectorReplayBuffer(3, 1)
    _collector(buffer, on_step_hook=scale).collect(n_step=3)
    assert buffer.obs[:3, 0].tolist() == [0.0, 1.0, 2.0]
    assert buffer.rew[:3].tolist() == [-0.5, 0.0, 0.5]  # env rewards 1, 2, 3


def test_clearing_truncated_joins_the_next_episode_in_the_buffer() -> None:
    # The hook assigns a new truncated array (in-place writes would not reach done_R, which
    # decides the reset): the env is still reset after 3 steps, but no stored row is done, so
    # the buffer's walk goes from the next episode's first row back into the truncated one.
    def clear(action_batch: Any, rollout: Any) -> None:
        rollout.truncated = np.zeros_like(rollout.truncated)

    buffer = VectorReplayBuffer(6, 1)
    _collector(buffer, truncate=True, on_step_hook=clear).collect(n_step=6)
    assert buffer.obs[:6, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert not buffer.done[:6].any()
    assert int(buffer.prev(3)) == 2  # the reset observation continues the truncated episode


def test_cached_replay_buffer_samples_its_caches() -> None:
    # One step of an episode in progress: the main buffer is empty, the env's cache holds the
    # row, and sample() draws it (sub-buffers are drawn in proportion to their lengths).
    buffer = CachedReplayBuffer(ReplayBuffer(10), 1, 10)
    _collector(buffer).collect(n_step=1)
    assert len(buffer.main_buffer) == 0
    batch, _ = buffer.sample(4)
    assert batch.obs[:, 0].tolist() == [0.0] * 4


def test_an_episode_annotation_stops_step_collection() -> None:
    # on_episode_done_hook returning a field (the documented way to annotate an ended
    # episode) raises under collect(n_step=...), which every trainer's collection step uses.
    def annotate(episode: Any) -> dict[str, np.ndarray]:
        return {"annotation": np.full(len(episode), float(episode.terminated[-1]))}

    buffer = CachedReplayBuffer(ReplayBuffer(10), 1, 10)
    collector = _collector(buffer, on_episode_done_hook=annotate)
    with pytest.raises(ValueError, match="not supported for n_step collection"):
        collector.collect(n_step=3)
    assert len(buffer.main_buffer) == 3  # the ended episode was moved before the hook ran
