"""Deterministic toy envs whose observations encode their own identity ``(env, episode, t)``."""

from xpspec.protocol.env_spec import EnvSpec, goal_reward
from xpspec.protocol.schedule import (
    CycleSchedule,
    EpisodePlan,
    FixedSchedule,
    RandomSchedule,
    Schedule,
)
from xpspec.refimpl.toy_envs.batched import TimeStep, ToyBatchEnv

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
