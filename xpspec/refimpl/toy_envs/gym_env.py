"""The Gymnasium ``Env`` face of the toy env: one env of an :class:`EnvSpec` (clause
the toy env contract of ``spec/timesteps.md``).

The dynamics are those stated in :mod:`xpspec.protocol.env_spec`, told in Gymnasium's convention:

- ``reset()`` starts the env's *next* episode and returns its ``t = 0`` observation (FIRST).
  The first reset starts episode 0, and every later reset starts episode ``k + 1`` after
  episode ``k`` -- also a reset in the middle of an episode, which abandons the rest of it.
  Episode numbers therefore never repeat and every observation names a distinct time step
  (clause ``timestep.identity``).
- ``step(a)`` moves from ``t`` to ``t + 1`` and returns observation ``t + 1``, the reward carried
  by time step ``t + 1``, ``terminated`` / ``truncated`` (set on the LAST step of a terminated /
  truncated episode) and the info. The action only has to be valid: the dynamics ignore it.
- ``info`` holds ``"item"`` (an :class:`ItemId` ``(env, episode, t)``) and ``"task_id"``.

The schedule depends only on the constructor's ``seed``. ``reset(seed=...)`` seeds
:attr:`np_random` as Gymnasium requires but neither changes the schedule nor replays an
episode; for that reason the env declares itself ``nondeterministic`` in its Gymnasium
:attr:`spec` (a seeded reset does not reproduce the earlier observations).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec as GymEnvSpec
from gymnasium.error import ResetNeeded

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import MAX_COORDINATE, ItemId, encode_observation
from xpspec.protocol.schedule import EpisodePlan

__all__ = [
    "TOY_ENV_ID",
    "LastObservation",
    "ToyEnv",
    "make_env_fns",
    "register_envs",
    "toy_action_space",
    "toy_observation_space",
]

TOY_ENV_ID = "xpspec/Toy-v0"
"""The id :func:`register_envs` registers (kwargs ``spec``, ``env_index``, ``seed``)."""

_ENTRY_POINT = f"{__name__}:ToyEnv"

Observation = Any  # np.ndarray float32 [3], or a dict of three of them with goals


def toy_observation_space(spec: EnvSpec) -> spaces.Space[Any]:
    """The single-env observation space: Box float32 ``(3,)`` in ``[0, 2**24 - 1]``; with
    ``spec.goals`` a Dict of three such boxes ``observation``, ``achieved_goal``,
    ``desired_goal`` (the layout goal-conditioned replay buffers expect)."""
    box = spaces.Box(0.0, float(MAX_COORDINATE - 1), (3,), np.float32)
    if not spec.goals:
        return box
    return spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})


def toy_action_space(spec: EnvSpec) -> spaces.Discrete:
    """The single-env action space: ``Discrete(spec.num_actions)``."""
    return spaces.Discrete(spec.num_actions)


class ToyEnv(gymnasium.Env[Observation, np.int64]):
    """Env ``env_index`` of ``spec`` under schedule seed ``seed``, in Gymnasium's API."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's class attribute)

    def __init__(self, spec: EnvSpec, env_index: int = 0, seed: int = 0) -> None:
        if not isinstance(spec, EnvSpec):
            raise ConfigError("spec", spec, "an EnvSpec")
        if not _is_int(env_index) or not 0 <= env_index < spec.num_envs:
            raise ConfigError("env_index", env_index, f"an integer in [0, {spec.num_envs})")
        if not _is_int(seed):
            raise ConfigError("seed", seed, "an integer")
        self.toy_spec = spec
        self.env_index = int(env_index)
        self.schedule_seed = int(seed)
        self.observation_space = toy_observation_space(spec)
        self.action_space = toy_action_space(spec)
        self.spec = GymEnvSpec(
            TOY_ENV_ID,
            entry_point=_ENTRY_POINT,
            nondeterministic=True,
            kwargs={"spec": spec, "env_index": self.env_index, "seed": self.schedule_seed},
        )
        self._episode = -1
        self._t = 0
        self._plan: EpisodePlan | None = None
        self._ended = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start the next episode (episode 0 on the first call) and return its FIRST step."""
        super().reset(seed=seed)
        self._episode += 1
        self._t = 0
        self._plan = self.toy_spec.episode(self.schedule_seed, self.env_index, self._episode)
        self._ended = False
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Advance one time step. Raises :class:`gymnasium.error.ResetNeeded` before the first
        reset or after the episode ended, and :class:`ConfigError` for an invalid action."""
        if self._plan is None:
            raise ResetNeeded("step() before reset(): call reset() first")
        if self._ended:
            raise ResetNeeded(
                f"step() after episode {self._episode} of env {self.env_index} ended "
                f"(terminated or truncated): call reset() to start episode {self._episode + 1}"
            )
        if not self.action_space.contains(action):
            raise ConfigError("action", action, f"an integer in [0, {self.toy_spec.num_actions})")
        self._t += 1
        self._ended = self._t == self._plan.length
        terminated = self._ended and self._plan.ending == "terminated"
        truncated = self._ended and not terminated
        reward = self.toy_spec.reward(self.schedule_seed, self.env_index, self._episode, self._t)
        return self._observation(), reward, terminated, truncated, self._info()

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """The goal reward over any leading batch dims: float32 ``0`` where the two goals
        (last axis of size 3) are equal, else ``-1`` (as :func:`spec.goal_reward`). ``info``
        is accepted for the ``compute_reward(achieved, desired, info)`` convention and
        ignored."""
        if not self.toy_spec.goals:
            raise ConfigError("spec.goals", False, "True: compute_reward needs goal observations")
        achieved, desired = np.asarray(achieved_goal), np.asarray(desired_goal)
        if achieved.shape[-1:] != (3,) or desired.shape[-1:] != (3,):
            raise ConfigError(
                "achieved_goal/desired_goal",
                (achieved.shape, desired.shape),
                "arrays whose last axis has size 3",
            )
        return np.where(np.all(achieved == desired, axis=-1), 0.0, -1.0).astype(np.float32)

    @property
    def item(self) -> ItemId:
        """The identity of the current time step."""
        if self._plan is None:
            raise ResetNeeded("no current time step: call reset() first")
        return ItemId(self.env_index, self._episode, self._t)

    def _observation(self) -> Observation:
        obs = np.array(encode_observation(self.item), dtype=np.float32)
        if not self.toy_spec.goals:
            return obs
        desired = self.toy_spec.desired_goal(self.schedule_seed, self.env_index, self._episode)
        return {
            "observation": obs,
            "achieved_goal": obs.copy(),
            "desired_goal": np.array(desired, dtype=np.float32),
        }

    def _info(self) -> dict[str, Any]:
        return {"item": self.item, "task_id": self.toy_spec.task_id(self.env_index, self._episode)}


class LastObservation(gymnasium.Wrapper[Any, Any, Any, Any]):
    """A pass-through wrapper keeping in :attr:`last` the raw observation its env returned
    last, for an adapter that reads which time step a framework's wrapper above it saw."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.last: Any = None

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.last = obs
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.last = obs
        return obs, reward, terminated, truncated, info


def make_env_fns(spec: EnvSpec, seed: int = 0) -> list[Callable[[], ToyEnv]]:
    """One picklable constructor per env of ``spec``, e.g. for
    ``gymnasium.vector.SyncVectorEnv(make_env_fns(spec, seed))``."""
    return [functools.partial(ToyEnv, spec, e, seed) for e in range(spec.num_envs)]


def register_envs() -> None:
    """Register :data:`TOY_ENV_ID` with Gymnasium (idempotent). ``gymnasium.make`` needs the
    kwargs ``spec`` and, optionally, ``env_index`` and ``seed``; note that
    ``gymnasium.make_vec`` gives every sub-env the same ``env_index``, so build vector envs
    from :func:`make_env_fns` or use :class:`~xpspec.refimpl.toy_envs.gym_vector.ToyVectorEnv`."""
    if TOY_ENV_ID not in gymnasium.registry:
        gymnasium.register(TOY_ENV_ID, entry_point=_ENTRY_POINT, nondeterministic=True)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
