"""The toy env's definition, shared by every face of it (the toy env contract of ``spec/timesteps.md``).

Dynamics of env ``e`` (all faces implement exactly this):

- time steps are named ``(e, k, t)``: ``k`` counts the env's episodes from 0 and ``t`` the
  steps within the episode; the observation is float32 ``[e, k, t]``;
- episode ``k`` has ``L = plan.length`` transitions: ``t = 0`` is FIRST, ``0 < t < L`` MID,
  ``t = L`` LAST; a terminated LAST has discount 0, a truncated one discount 1, every other
  step discount 1;
- the step after LAST is FIRST of episode ``k + 1`` with reward 0; the action given at LAST
  is discarded (clause ``timestep.auto-reset``);
- the reward at step ``t > 0`` is ``float(t)``, or with goals ``0.0`` when the achieved goal
  equals the desired goal and ``-1.0`` otherwise;
- with goals, the achieved goal is ``[e, k, t]`` and the desired goal ``[e, k, g]`` with
  ``g = L`` for a terminated episode and ``g = L + 1`` (never reached) for a truncated one,
  so a terminated episode is exactly a successful one;
- the task id of episode ``k`` of env ``e`` is ``(e + k) % num_tasks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import MAX_COORDINATE
from xpspec.protocol.schedule import (
    CycleSchedule,
    EpisodePlan,
    FixedSchedule,
    RandomSchedule,
    Schedule,
)

__all__ = ["EnvSpec", "goal_reward"]


def goal_reward(achieved: tuple[float, ...], desired: tuple[float, ...]) -> float:
    """The sparse goal reward: 0.0 iff the goals are equal, else -1.0."""
    return 0.0 if tuple(achieved) == tuple(desired) else -1.0


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class EnvSpec:
    """``num_envs`` toy envs; ``schedules`` has one entry shared by all or one per env."""

    num_envs: int = 1
    schedules: tuple[Schedule, ...] = (FixedSchedule(4),)
    goals: bool = False
    num_tasks: int = 1
    num_actions: int = 2
    autoreset: Literal["next-step", "same-step"] = "next-step"
    """``next-step`` (the spec, also ALF and RLlib 2.60): the step after LAST returns FIRST.
    ``same-step`` (variant of ``timestep.auto-reset``; SB3 2.9.2, TorchRL 0.14.1 and Tianshou
    2.0.1 trainers): the step that reaches LAST returns the next episode's FIRST instead, so
    LAST is never a time step the trainer acts on or stores; an episode of ``L`` transitions
    is ``L`` rows."""

    def __post_init__(self) -> None:
        if not _is_int(self.num_envs) or not 1 <= self.num_envs < MAX_COORDINATE:
            raise ConfigError("env.num_envs", self.num_envs, f"an integer in [1, {MAX_COORDINATE})")
        if len(self.schedules) not in (1, self.num_envs):
            raise ConfigError(
                "env.schedules",
                len(self.schedules),
                f"1 shared schedule or one per env ({self.num_envs})",
            )
        for schedule in self.schedules:
            if not isinstance(schedule, (FixedSchedule, CycleSchedule, RandomSchedule)):
                raise ConfigError(
                    "env.schedules", schedule, "FixedSchedule, CycleSchedule or RandomSchedule"
                )
        if not isinstance(self.goals, bool):
            raise ConfigError("env.goals", self.goals, "True or False")
        # Task ids and actions are int64 tensors here and int32 columns in some frameworks.
        if not _is_int(self.num_tasks) or not 1 <= self.num_tasks < 2**31:
            raise ConfigError("env.num_tasks", self.num_tasks, "an integer in [1, 2**31)")
        if not _is_int(self.num_actions) or not 1 <= self.num_actions < 2**31:
            raise ConfigError("env.num_actions", self.num_actions, "an integer in [1, 2**31)")
        if self.autoreset not in ("next-step", "same-step"):
            raise ConfigError("env.autoreset", self.autoreset, "'next-step' or 'same-step'")

    def schedule(self, env: int) -> Schedule:
        return self.schedules[env if len(self.schedules) > 1 else 0]

    def episode(self, seed: int, env: int, k: int) -> EpisodePlan:
        """The plan of episode ``k`` of env ``env`` under ``seed``."""
        return self.schedule(env).episode(seed, env, k)

    def task_id(self, env: int, k: int) -> int:
        return (env + k) % self.num_tasks

    def achieved_goal(self, env: int, k: int, t: int) -> tuple[float, float, float]:
        """The achieved goal observed at time step ``(env, k, t)`` of a goal env."""
        return (float(env), float(k), float(t))

    def desired_goal(self, seed: int, env: int, k: int) -> tuple[float, float, float]:
        plan = self.episode(seed, env, k)
        g = plan.length if plan.ending == "terminated" else plan.length + 1
        return (float(env), float(k), float(g))

    def reward(self, seed: int, env: int, k: int, t: int) -> float:
        """Reward carried by time step ``(env, k, t)``."""
        if t == 0:
            return 0.0
        if self.goals:
            return goal_reward(self.achieved_goal(env, k, t), self.desired_goal(seed, env, k))
        return float(t)
