"""The reference trainer of xpspec: the spec's semantics, executable and exact.

Start with :func:`train`; every knob is a field of :class:`TrainerConfig`.
"""

from refimpl.accounting import exact_unroll_steps
from refimpl.config import DrainSpec, TrainerConfig
from refimpl.errors import ConfigError
from refimpl.identity import ItemId, decode_observation, encode_observation
from refimpl.preprocess import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from refimpl.replay import ReplayBuffer, SamplingSpec
from refimpl.step_type import StepType
from refimpl.toy_envs import (
    CycleSchedule,
    EnvSpec,
    EpisodePlan,
    FixedSchedule,
    RandomSchedule,
)
from refimpl.trace import Trace
from refimpl.trainer import RunResult, Trainer, train

__all__ = [
    "ConfigError",
    "CycleSchedule",
    "DrainSpec",
    "EnvSpec",
    "EpisodeDelayed",
    "EpisodePlan",
    "ExcludeEpisodes",
    "ExcludeSteps",
    "ExcludeTasks",
    "FixedSchedule",
    "Identity",
    "ItemId",
    "OverwriteStepType",
    "PreprocessorSpec",
    "RandomSchedule",
    "ReplayBuffer",
    "RewardTransform",
    "RunResult",
    "SamplingSpec",
    "StepType",
    "Trace",
    "Trainer",
    "TrainerConfig",
    "decode_observation",
    "encode_observation",
    "exact_unroll_steps",
    "train",
]
