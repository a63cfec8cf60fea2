"""The torch-batched face of the toy env, used by the reference trainer.

All ``B`` sub-envs advance together with no per-env Python loop; episode plans are read from
a table filled from the schedule and extended (outside the hot path) when episodes run out.
The dynamics are those stated in :mod:`refimpl.toy_envs.spec`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from refimpl.errors import ConfigError
from refimpl.step_type import StepType
from refimpl.toy_envs.spec import EnvSpec

__all__ = ["TimeStep", "ToyBatchEnv"]


class TimeStep(NamedTuple):
    """A batch of ``B`` time steps (one per env). Goals are ``None`` without ``spec.goals``."""

    step_type: torch.Tensor  # int64 [B]
    reward: torch.Tensor  # float32 [B]
    discount: torch.Tensor  # float32 [B]
    observation: torch.Tensor  # float32 [B, 3] = [env, episode, t]
    env_id: torch.Tensor  # int64 [B]
    task_id: torch.Tensor  # int64 [B]
    achieved_goal: torch.Tensor | None  # float32 [B, 3]
    desired_goal: torch.Tensor | None  # float32 [B, 3]


class ToyBatchEnv:
    """``spec.num_envs`` toy envs stepped as one batch; ``reset()`` then ``step(action)``."""

    def __init__(self, spec: EnvSpec, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self.num_envs = spec.num_envs
        self._env_ids = torch.arange(self.num_envs)
        self._lengths = torch.empty(self.num_envs, 0, dtype=torch.int64)
        self._goal_t = torch.empty(self.num_envs, 0, dtype=torch.int64)
        self._terminates = torch.empty(self.num_envs, 0, dtype=torch.bool)
        self._steps = 0
        self._ensure_episodes(64)
        self._ids = torch.zeros(self.num_envs, 3, dtype=torch.int64)
        self._ids[:, 0] = self._env_ids
        self._current: TimeStep | None = None

    # -- plan table -------------------------------------------------------------------------
    def _ensure_episodes(self, count: int) -> None:
        have = self._lengths.shape[1]
        if count <= have:
            return
        count = max(count, 2 * have)
        plans = [
            [self.spec.episode(self.seed, e, k) for k in range(have, count)]
            for e in range(self.num_envs)
        ]
        lengths = torch.tensor([[p.length for p in row] for row in plans], dtype=torch.int64)
        term = torch.tensor([[p.ending == "terminated" for p in row] for row in plans])
        self._lengths = torch.cat([self._lengths, lengths], 1)
        self._terminates = torch.cat([self._terminates, term], 1)
        self._goal_t = torch.where(self._terminates, self._lengths, self._lengths + 1)

    # -- stepping ---------------------------------------------------------------------------
    def reset(self) -> TimeStep:
        """Start episode 0 of every env; every step type is FIRST."""
        self._ids[:, 1:] = 0
        self._steps = 0
        step_type = torch.full((self.num_envs,), int(StepType.FIRST), dtype=torch.int64)
        self._current = self._make(step_type, torch.zeros(self.num_envs, dtype=torch.bool))
        return self._current

    def step(self, action: torch.Tensor) -> TimeStep:
        """Advance every env by one time step. The action is checked for shape only: the
        dynamics do not depend on it, and the one given at LAST is discarded."""
        if self._current is None:
            raise RuntimeError("step() before reset(): call reset() first")
        if action.shape[:1] != (self.num_envs,):
            raise ConfigError(
                "action.shape", tuple(action.shape), f"a leading dimension of {self.num_envs}"
            )
        self._steps += 1
        # An env advances at most one episode per two steps; keep the table ahead of that.
        if self._steps // 2 + 2 >= self._lengths.shape[1]:
            self._ensure_episodes(self._steps // 2 + 3)
        restart = self._current.step_type == StepType.LAST
        ids = self._ids
        ids[:, 1] += restart
        ids[:, 2] = torch.where(restart, 0, ids[:, 2] + 1)
        length = self._lengths[self._env_ids, ids[:, 1]]
        step_type = torch.where(
            restart,
            int(StepType.FIRST),
            torch.where(ids[:, 2] == length, int(StepType.LAST), int(StepType.MID)),
        )
        self._current = self._make(step_type, restart)
        return self._current

    def _make(self, step_type: torch.Tensor, restart: torch.Tensor) -> TimeStep:
        ids = self._ids
        episode, t = ids[:, 1], ids[:, 2]
        is_last = step_type == StepType.LAST
        terminal = is_last & self._terminates[self._env_ids, episode]
        discount = (~terminal).to(torch.float32)
        observation = ids.to(torch.float32)
        achieved = desired = None
        if self.spec.goals:
            achieved = observation.clone()  # never alias the observation: buffers write in place
            desired = observation.clone()
            desired[:, 2] = self._goal_t[self._env_ids, episode].to(torch.float32)
            reward = (t == self._goal_t[self._env_ids, episode]).to(torch.float32) - 1.0
        else:
            reward = t.to(torch.float32)
        reward = torch.where(t == 0, 0.0, reward)
        task_id = (self._env_ids + episode) % self.spec.num_tasks
        env_id = self._env_ids.clone()
        return TimeStep(
            step_type, reward, discount, observation, env_id, task_id, achieved, desired
        )

    @property
    def current(self) -> TimeStep:
        if self._current is None:
            raise RuntimeError("no current time step: call reset() first")
        return self._current
