"""The reference trainer of xpspec: the spec's semantics, executable and exact.

Start with :func:`train`; every knob is a field of :class:`TrainerConfig`.
"""

from xpspec.protocol.config import DrainSpec, TrainerConfig
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import ItemId, decode_observation, encode_observation
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Trace
from xpspec.refimpl.accounting import exact_unroll_steps
from xpspec.refimpl.replay import ReplayBuffer
from xpspec.refimpl.toy_envs import (
    CycleSchedule,
    EnvSpec,
    EpisodePlan,
    FixedSchedule,
    RandomSchedule,
)
from xpspec.refimpl.trainer import RunResult, Trainer, train

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
