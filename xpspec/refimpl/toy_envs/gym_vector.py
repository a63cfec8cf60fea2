"""The Gymnasium ``VectorEnv`` face of the toy env (the toy env contract of ``spec/timesteps.md``).

:class:`ToyVectorEnv` steps all ``spec.num_envs`` envs in numpy and returns what
``gymnasium.vector.SyncVectorEnv(make_env_fns(spec, seed), autoreset_mode=mode)`` returns:
the same observations, float64 rewards, flags and infos (one array per key plus a boolean
``_key`` mask), following gymnasium 1.4.0 ``gymnasium/vector/sync_vector_env.py``:

- ``NEXT_STEP`` (default): the call after an env's terminated/truncated returns that env's
  reset observation (next episode, ``t = 0``) with reward 0, both flags False and the reset
  info; its action is ignored. This is the spec's FIRST after LAST (clause
  ``timestep.auto-reset``), so every row is one time step; see :func:`step_types_from_gym`.
- ``SAME_STEP``: an env that ends returns its reward and flags together with the *reset*
  observation and info; the LAST observation goes to ``info["final_obs"][e]`` and its info to
  ``info["final_info"]`` (masks ``_final_obs`` / ``_final_info``). Such a row holds two time
  steps: LAST (the final observation), then FIRST (the returned one).

``reset()`` starts the next episode of every env, or of the envs in ``options["reset_mask"]``,
exactly as :meth:`ToyEnv.reset` does; seeds are accepted and never change the schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import MAX_COORDINATE, ItemId
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.toy_envs.gym_env import toy_action_space, toy_observation_space

__all__ = ["ToyVectorEnv", "step_types_from_gym"]

_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def step_types_from_gym(
    terminated: npt.ArrayLike, truncated: npt.ArrayLike, previous_done: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """The spec's step types of Gymnasium rows under ``NEXT_STEP`` autoreset (clause
    ``timestep.step-types``): FIRST where ``previous_done``, LAST where ``terminated`` or
    ``truncated``, MID elsewhere. The discount is 0 exactly where ``terminated``.

    ``previous_done`` is True for rows returned by ``reset()`` and, for rows returned by
    ``step()``, the previous call's ``terminated | truncated`` (always False for a single
    :class:`ToyEnv`, which never auto-resets). Works on scalars and arrays.
    """
    first = np.asarray(previous_done, dtype=bool)
    last = np.asarray(terminated, dtype=bool) | np.asarray(truncated, dtype=bool)
    if np.any(first & last):
        raise ConfigError(
            "terminated/truncated",
            last,
            "False on every row after a done (under NEXT_STEP that row is a reset)",
        )
    mid_or_last = np.where(last, int(StepType.LAST), int(StepType.MID))
    return np.where(first, int(StepType.FIRST), mid_or_last).astype(np.int64)


class ToyVectorEnv(VectorEnv[Any, np.ndarray, np.ndarray]):
    """All envs of ``spec`` under schedule seed ``seed``, as one Gymnasium vector env."""

    def __init__(
        self,
        spec: EnvSpec,
        seed: int = 0,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        if not isinstance(spec, EnvSpec):
            raise ConfigError("spec", spec, "an EnvSpec")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise ConfigError("seed", seed, "an integer")
        mode = _autoreset_mode(autoreset_mode)
        self.toy_spec = spec
        self.schedule_seed = int(seed)
        self.num_envs = spec.num_envs
        self.autoreset_mode = mode
        self.metadata = {"render_modes": [], "autoreset_mode": mode}
        self.render_mode = None
        self.single_observation_space = toy_observation_space(spec)
        self.single_action_space = toy_action_space(spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        n = self.num_envs
        self._env = np.arange(n, dtype=np.int64)
        self._episode = np.full(n, -1, dtype=np.int64)
        self._t = np.zeros(n, dtype=np.int64)
        self._length = np.zeros(n, dtype=np.int64)
        self._terminates = np.zeros(n, dtype=bool)
        self._autoreset = np.zeros(n, dtype=bool)  # NEXT_STEP: ended on the previous call

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Start the next episode of every env (of ``options["reset_mask"]`` if given)."""
        if isinstance(seed, int):
            super().reset(seed=seed)
        elif seed is not None and len(seed) != self.num_envs:
            raise ConfigError("seed", seed, f"None, an int or a list of {self.num_envs} seeds")
        mask = self._reset_mask(options)
        self._restart(mask)
        self._autoreset[mask] = False
        return self._observations(), self._infos(mask)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every env one row; see the module docstring for the autoreset modes."""
        if np.any(self._episode < 0):
            raise ResetNeeded("step() before reset(): call reset() first")
        self._check_actions(actions)
        restart = self._autoreset.copy()
        self._t[~restart] += 1
        self._restart(restart)
        ended = self._t == self._length  # never on a restarted env: lengths are >= 1
        terminated = ended & self._terminates
        truncated = ended & ~self._terminates
        rewards = self._rewards()
        infos: dict[str, Any] = {}
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._autoreset = ended
        elif ended.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            observations = self._observations()
            for e in np.flatnonzero(ended):
                final_obs[e] = _row(observations, int(e))
            infos = {
                "final_obs": final_obs,
                "_final_obs": ended.copy(),
                "final_info": self._infos(ended),
                "_final_info": ended.copy(),
            }
            self._restart(ended)
        infos.update(self._infos(np.ones(self.num_envs, dtype=bool)))
        return self._observations(), rewards, terminated, truncated, infos

    # -- state ----------------------------------------------------------------------------
    def _restart(self, mask: np.ndarray) -> None:
        """Move the envs in ``mask`` to ``t = 0`` of their next episode."""
        self._episode[mask] += 1
        self._t[mask] = 0
        for e in np.flatnonzero(mask):
            plan = self.toy_spec.episode(self.schedule_seed, int(e), int(self._episode[e]))
            self._length[e] = plan.length
            self._terminates[e] = plan.ending == "terminated"
        if self._episode.max() >= MAX_COORDINATE:
            raise ConfigError("episode", int(self._episode.max()), f"< {MAX_COORDINATE}")

    def _ids(self) -> np.ndarray:
        return np.stack([self._env, self._episode, self._t], axis=1)

    def _observations(self) -> Any:
        obs = self._ids().astype(np.float32)
        if not self.toy_spec.goals:
            return obs
        desired = obs.copy()
        desired[:, 2] = self._goal_t()
        return {"observation": obs, "achieved_goal": obs.copy(), "desired_goal": desired}

    def _goal_t(self) -> np.ndarray:
        return np.where(self._terminates, self._length, self._length + 1)

    def _rewards(self) -> np.ndarray:
        # With goals the achieved goal [e, k, t] equals the desired one [e, k, g] iff t == g.
        reward = np.where(self._t == self._goal_t(), 0, -1) if self.toy_spec.goals else self._t
        return np.where(self._t == 0, 0, reward).astype(np.float64)

    def _infos(self, mask: np.ndarray) -> dict[str, Any]:
        """Infos of the envs in ``mask`` in SyncVectorEnv's layout (arrays plus masks)."""
        items = np.full(self.num_envs, None, dtype=object)
        for e, row in enumerate(self._ids().tolist()):
            if mask[e]:
                items[e] = ItemId(*row)
        task_id = np.where(mask, (self._env + self._episode) % self.toy_spec.num_tasks, 0)
        return {"item": items, "_item": mask.copy(), "task_id": task_id, "_task_id": mask.copy()}

    # -- input checks ---------------------------------------------------------------------
    def _reset_mask(self, options: dict[str, Any] | None) -> np.ndarray:
        if not options or "reset_mask" not in options:
            return np.ones(self.num_envs, dtype=bool)
        mask = options["reset_mask"]
        if (
            not isinstance(mask, np.ndarray)
            or mask.dtype != np.bool_
            or mask.shape != (self.num_envs,)
            or not mask.any()
        ):
            raise ConfigError(
                "options['reset_mask']",
                mask,
                f"a bool numpy array of shape ({self.num_envs},) with at least one True",
            )
        if np.any(self._episode[~mask] < 0):
            raise ConfigError(
                "options['reset_mask']", mask, "all True on the first reset (no env started)"
            )
        return mask.copy()

    def _check_actions(self, actions: Any) -> None:
        a = np.asarray(actions)
        n = self.toy_spec.num_actions
        if (
            a.shape != (self.num_envs,)
            or not np.issubdtype(a.dtype, np.integer)
            or np.any((a < 0) | (a >= n))
        ):
            raise ConfigError(
                "actions", actions, f"{self.num_envs} integers in [0, {n}) (one per env)"
            )


def _autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    try:
        mode = AutoresetMode(value)
    except ValueError:
        mode = None
    if mode not in _MODES:
        allowed = " or ".join(f"AutoresetMode.{m.name}" for m in _MODES)
        raise ConfigError("autoreset_mode", value, allowed)
    return mode


def _row(observations: Any, e: int) -> Any:
    """Env ``e``'s observation, as its :class:`ToyEnv` would return it."""
    if isinstance(observations, dict):
        return {key: value[e].copy() for key, value in observations.items()}
    return observations[e].copy()
