"""The preprocessors a scenario can ask for: a closed vocabulary of frozen, serialisable
values (clauses ``preprocess.*``). What each one does to experience is specified in
``spec/preprocessing.md``; the reference implementation's runtimes are in
``xpspec.refimpl.preprocess``. Standard library only.

Modes (ALF PR 1768, seed 000):

- per-step, no delay: :class:`Identity`, :class:`RewardTransform`, :class:`OverwriteStepType`;
- selective: :class:`ExcludeSteps`, :class:`ExcludeEpisodes`, :class:`ExcludeTasks`;
- episode-delayed: :class:`EpisodeDelayed` holds each env's rows until *that* env's LAST and
  then releases only that env's episode, annotated (``preprocess.delayed-per-env``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Union

from xpspec.protocol.codec import parse_fraction
from xpspec.protocol.errors import ConfigError

__all__ = [
    "EpisodeDelayed",
    "ExcludeEpisodes",
    "ExcludeSteps",
    "ExcludeTasks",
    "Identity",
    "OverwriteStepType",
    "PreprocessorSpec",
    "RewardTransform",
    "require_compatible",
]


@dataclass(frozen=True)
class Identity:
    """Store every row unchanged (``preprocess.identity-is-plain``)."""

    kind: Literal["identity"] = "identity"


@dataclass(frozen=True)
class RewardTransform:
    """Store every row with ``reward * scale + shift`` (exact rationals). ``first="unheld"``
    is the variant ``transition-rows`` of ``preprocess.transform``: a FIRST's reward (the
    reward into a first observation, 0) is stored unchanged, as in a framework whose rows are
    transitions and hold no such reward for a transform to reach."""

    scale: Fraction = Fraction(1)
    shift: Fraction = Fraction(0)
    first: Literal["transform", "unheld"] = "transform"
    kind: Literal["reward_transform"] = "reward_transform"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", parse_fraction("scale", self.scale))
        object.__setattr__(self, "shift", parse_fraction("shift", self.shift))
        if self.first not in ("transform", "unheld"):
            raise ConfigError("first", self.first, "'transform' or 'unheld'")


@dataclass(frozen=True)
class OverwriteStepType:
    """Overwrite the step type before storage: of truncated LAST rows
    (``when='truncated-last'``), or of rows at time ``t`` (``when='t'``)."""

    to: Literal["FIRST", "MID", "LAST"] = "MID"
    when: Literal["truncated-last", "t"] = "truncated-last"
    t: int = 0
    kind: Literal["overwrite_step_type"] = "overwrite_step_type"

    def __post_init__(self) -> None:
        if self.to not in ("FIRST", "MID", "LAST"):
            raise ConfigError("to", self.to, "'FIRST', 'MID' or 'LAST'")
        if self.when not in ("truncated-last", "t"):
            raise ConfigError("when", self.when, "'truncated-last' or 't'")
        if not isinstance(self.t, int) or self.t < 0:
            raise ConfigError("t", self.t, "an integer >= 0")


def _check_modulus(every: object, offset: object) -> None:
    if not isinstance(every, int) or every < 1:
        raise ConfigError("every", every, "an integer >= 1")
    if not isinstance(offset, int) or not 0 <= offset < every:
        raise ConfigError("offset", offset, f"an integer in [0, {every})")


@dataclass(frozen=True)
class ExcludeSteps:
    """Exclude rows whose ``t % every == offset``."""

    every: int = 2
    offset: int = 0
    kind: Literal["exclude_steps"] = "exclude_steps"

    def __post_init__(self) -> None:
        _check_modulus(self.every, self.offset)


@dataclass(frozen=True)
class ExcludeEpisodes:
    """Exclude every row of the episodes whose index ``k % every == offset``."""

    every: int = 2
    offset: int = 0
    kind: Literal["exclude_episodes"] = "exclude_episodes"

    def __post_init__(self) -> None:
        _check_modulus(self.every, self.offset)


@dataclass(frozen=True)
class ExcludeTasks:
    """Exclude every row whose task id is in ``task_ids``."""

    task_ids: tuple[int, ...] = (0,)
    kind: Literal["exclude_tasks"] = "exclude_tasks"

    def __post_init__(self) -> None:
        if not self.task_ids or not all(isinstance(i, int) and i >= 0 for i in self.task_ids):
            raise ConfigError("task_ids", self.task_ids, "a non-empty list of integers >= 0")


@dataclass(frozen=True)
class EpisodeDelayed:
    """Hold each env's rows until that env reaches LAST, then release that env's whole
    episode with ``annotation`` = 1.0 if it terminated (success) else 0.0. ``keep`` filters
    released episodes by outcome; the others are excluded with reason ``outcome``."""

    keep: Literal["all", "success", "failure"] = "all"
    kind: Literal["episode_delayed"] = "episode_delayed"

    def __post_init__(self) -> None:
        if self.keep not in ("all", "success", "failure"):
            raise ConfigError("keep", self.keep, "'all', 'success' or 'failure'")


PreprocessorSpec = Union[
    Identity,
    RewardTransform,
    OverwriteStepType,
    ExcludeSteps,
    ExcludeEpisodes,
    ExcludeTasks,
    EpisodeDelayed,
]


def require_compatible(spec: PreprocessorSpec, autoreset: str) -> None:
    """Refuse combinations the env cannot serve: episode-delayed release waits for LAST,
    which a same-step auto-resetting env never returns (clause ``timestep.auto-reset``)."""
    if isinstance(spec, EpisodeDelayed) and autoreset == "same-step":
        raise ConfigError(
            "preprocess", spec, "no episode-delayed preprocessing with same-step auto-reset"
        )
