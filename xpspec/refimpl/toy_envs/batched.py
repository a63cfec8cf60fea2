"""The torch-batched face of the toy env, used by the reference trainer.

All ``B`` sub-envs advance together with no per-env Python loop. The dynamics (stated in
:mod:`xpspec.protocol.env_spec`) do not depend on the actions, and every env starts its episode
0 at the same reset, so the time step of every env after ``n`` steps is a pure function of
``n`` and the episode plans. The env therefore computes its time steps ahead in blocks of
``block`` steps, for all envs at once (one vectorised pass per block, with the episode plans
of the block hashed in bulk), and :meth:`ToyBatchEnv.step` hands out the next precomputed time
step. Every time step holds its own tensors: none aliases another step's, and none is
written after it is handed out.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.schedule import CycleSchedule, FixedSchedule, RandomSchedule, Schedule
from xpspec.protocol.step_type import StepType

__all__ = ["TimeStep", "ToyBatchEnv"]

_MASK64 = (1 << 64) - 1
_FIRST_BLOCK = 16
"""The most time steps computed at a reset (then twice as many each time, up to ``block``)."""
_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


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


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """:func:`xpspec.protocol.schedule._splitmix64` on uint64 arrays (wrapping arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Plans:
    """Episode plans of a group of envs, computed in bulk: all with fixed schedules, all with
    random ones (parameters may differ per env), or all sharing one cycle. Equal, entry by
    entry, to ``schedule.episode(seed, env, k)`` (checked against it step for step by the
    toy-env tests)."""

    def __init__(self, schedules: list[Schedule], seed: int, envs: np.ndarray) -> None:
        self.envs = envs
        self.kind = schedules[0].kind
        self.min_length = 1  # a lower bound on the episode lengths
        if isinstance(schedules[0], CycleSchedule):
            cycle = self.cycle = schedules[0]
            m = len(cycle.episodes)
            self._cycle_len = np.array([p.length for p in cycle.episodes], dtype=np.int64)
            self._cycle_term = np.array([p.ending == "terminated" for p in cycle.episodes])
            self._env_shift = ((envs * (cycle.offset % m)) % m)[:, None]
            self.min_length = int(self._cycle_len.min())
            return
        fixed = [x for x in schedules if isinstance(x, FixedSchedule)]
        random = [x for x in schedules if isinstance(x, RandomSchedule)]
        if fixed:
            self._length = np.array([[x.length] for x in fixed], dtype=np.int64)
            self._term = np.array([[x.ending == "terminated"] for x in fixed])
            self.min_length = int(self._length.min())
        if random:
            self._low = np.array([[x.min_length] for x in random], dtype=np.int64)
            span = [[x.max_length - x.min_length + 1] for x in random]
            self._span = np.array(span, dtype=np.uint64)
            self._tpm = np.array([[x.truncate_per_mille] for x in random], dtype=np.uint64)
            seed_hash = _splitmix64(np.array([seed & _MASK64], dtype=np.uint64))
            self._env_hash = _splitmix64(seed_hash ^ envs.astype(np.uint64))[:, None]
            self.min_length = int(self._low.min())

    def table(self, first: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Lengths (int64) and terminated flags of episodes ``first[i] + j`` of
        ``envs[i]``, ``0 <= j < count``: two ``[len(envs), count]`` arrays."""
        k = first[:, None] + np.arange(count, dtype=np.int64)
        if self.kind == "fixed":
            shape = k.shape
            return np.broadcast_to(self._length, shape).copy(), np.broadcast_to(
                self._term, shape
            ).copy()
        if self.kind == "cycle":
            m = len(self.cycle.episodes)
            idx = (k % m + self._env_shift) % m
            return self._cycle_len[idx], self._cycle_term[idx]
        h = _splitmix64(self._env_hash ^ k.astype(np.uint64))
        lengths = (h % self._span).astype(np.int64) + self._low
        truncated = (h >> np.uint64(32)) % np.uint64(1000) < self._tpm
        return lengths, ~truncated


class ToyBatchEnv:
    """``spec.num_envs`` toy envs stepped as one batch; ``reset()`` then ``step(action)``.

    ``block`` is the number of time steps computed ahead at once (default: about 8k env
    steps per block, between 16 and 256 vector steps). The first block after a reset is at
    most 16 steps and each next one twice the last, up to ``block``: a short
    run (the suite's scenarios step a few dozen times) computes no steps it never takes, and
    a long one reaches full blocks within a few."""

    def __init__(self, spec: EnvSpec, seed: int = 0, block: int | None = None) -> None:
        self.spec = spec
        self.seed = seed
        self.num_envs = b = spec.num_envs
        self._block = block if block is not None else max(16, min(256, 8192 // b))
        self._env_ids = torch.arange(b)
        groups: dict[object, list[int]] = {}  # fixed envs, random envs, each distinct cycle
        for e in range(b):
            schedule = spec.schedule(e)
            key = schedule if isinstance(schedule, CycleSchedule) else schedule.kind
            groups.setdefault(key, []).append(e)
        self._groups = [
            _Plans([spec.schedule(e) for e in envs], seed, np.array(envs, dtype=np.int64))
            for envs in groups.values()
        ]
        # Under same-step auto-reset the LAST time step is never returned: an episode of m
        # transitions spans m steps instead of m + 1 (clause ``timestep.auto-reset``).
        self._span_extra = 0 if spec.autoreset == "same-step" else 1
        self._shortest = min(g.min_length for g in self._groups) + self._span_extra
        """Steps the shortest possible episode spans."""
        self._ahead: list[TimeStep] = []  # time steps base .. base + len - 1
        self._base = 0
        self._index = 0  # of the current time step within _ahead
        self._next_episode = torch.zeros(b, dtype=torch.int64)  # at step base + len(_ahead)
        self._next_start = torch.zeros(b, dtype=torch.int64)  # first step of that episode
        self._current: TimeStep | None = None

    # -- stepping ---------------------------------------------------------------------------
    def reset(self) -> TimeStep:
        """Start episode 0 of every env; every step type is FIRST."""
        self._next_episode.zero_()
        self._next_start.zero_()
        self._base = 0
        self._ahead = self._compute(0, min(self._block, _FIRST_BLOCK))
        self._index = 0
        self._current = self._ahead[0]
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
        self._index += 1
        if self._index == len(self._ahead):
            self._base += len(self._ahead)
            self._ahead = self._compute(self._base, min(self._block, 2 * len(self._ahead)))
            self._index = 0
        self._current = self._ahead[self._index]
        return self._current

    @property
    def current(self) -> TimeStep:
        if self._current is None:
            raise RuntimeError("no current time step: call reset() first")
        return self._current

    # -- the block computation --------------------------------------------------------------
    def _plans(self, first: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Lengths and terminated flags of episodes ``first[e] + j`` (``[B, count]``)."""
        if len(self._groups) == 1:
            lengths, term = self._groups[0].table(first.numpy(), count)
            return torch.from_numpy(lengths), torch.from_numpy(term)
        lengths = np.empty((self.num_envs, count), dtype=np.int64)
        term = np.empty((self.num_envs, count), dtype=bool)
        first_np = first.numpy()
        for g in self._groups:
            lengths[g.envs], term[g.envs] = g.table(first_np[g.envs], count)
        return torch.from_numpy(lengths), torch.from_numpy(term)

    def _compute(self, base: int, n: int) -> list[TimeStep]:
        """The ``n`` time steps ``base .. base + n - 1``; env ``e`` is at episode
        ``_next_episode[e]``, begun at step ``_next_start[e] <= base``, at step ``base``.
        Computed step-major (``[n, B]``), so each step's tensors are contiguous rows."""
        b = self.num_envs
        k0, s0 = self._next_episode, self._next_start
        # An episode of at least m transitions spans m + 1 steps (m under same-step
        # auto-reset), so the block's last step lies at most ceil((n - 1) / (m + 1))
        # episodes after the one holding its first.
        count = -(-(n - 1) // self._shortest) + 1
        lengths, terminates = self._plans(k0, count)  # [B, count]
        span = lengths + self._span_extra  # steps the env returns per episode
        ends = s0[:, None] + torch.cumsum(span, 1)  # first step after episode k0 + j
        starts = torch.cat([s0[:, None], ends[:, :-1]], 1)
        steps = torch.arange(base, base + n)
        j = torch.searchsorted(ends, steps.expand(b, n).contiguous(), right=True).T.contiguous()
        t = steps[:, None] - starts.T.gather(0, j)  # [n, B]: j = episode offset from k0
        length = lengths.T.gather(0, j)
        first, last = t == 0, t == length  # never t == length under same-step auto-reset
        final = t == span.T.gather(0, j) - 1  # the episode's last returned step
        episode = k0 + j
        step_type = torch.where(first, _FIRST, torch.where(last, _LAST, _MID))
        terminated = terminates.T.gather(0, j)
        discount = (~(last & terminated)).to(torch.float32)
        env = self._env_ids.repeat(n, 1)
        observation = torch.stack([env, episode, t], 2).to(torch.float32)
        if self.spec.goals:
            goal_t = torch.where(terminated, length, length + 1)
            reward = (t == goal_t).to(torch.float32) - 1.0
        else:
            reward = t.to(torch.float32)
        reward = torch.where(first, 0.0, reward)
        tasks = self.spec.num_tasks
        task_id = (env + episode) % tasks if tasks > 1 else torch.zeros_like(env)
        self._next_episode = episode[-1] + final[-1]
        self._next_start = torch.where(final[-1], base + n, starts.gather(1, j[-1:].T)[:, 0])
        st, rw, dc, ob, ei, ti = (
            f.unbind(0) for f in (step_type, reward, discount, observation, env, task_id)
        )
        if not self.spec.goals:
            return [
                TimeStep(s, r, d, o, e, k, None, None)
                for s, r, d, o, e, k in zip(st, rw, dc, ob, ei, ti)
            ]
        # Goals never alias the observation: a buffer may write them in place.
        achieved = observation.clone()
        desired = observation.clone()
        desired[:, :, 2] = goal_t
        return [
            TimeStep(*r) for r in zip(st, rw, dc, ob, ei, ti, achieved.unbind(0), desired.unbind(0))
        ]
