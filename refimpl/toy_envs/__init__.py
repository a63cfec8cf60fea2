"""Deterministic toy envs whose observations encode their own identity ``(env, episode, t)``."""

from refimpl.toy_envs.batched import TimeStep, ToyBatchEnv
from refimpl.toy_envs.schedule import (
    CycleSchedule,
    EpisodePlan,
    FixedSchedule,
    RandomSchedule,
    Schedule,
)
from refimpl.toy_envs.spec import EnvSpec, goal_reward

__all__ = [
    "CycleSchedule",
    "EnvSpec",
    "EpisodePlan",
    "FixedSchedule",
    "RandomSchedule",
    "Schedule",
    "TimeStep",
    "ToyBatchEnv",
    "goal_reward",
]
