"""Episode schedules of the toy envs (clause ``toyenv.schedule``).

A schedule answers, for env ``e`` and its ``k``-th episode, how many transitions the episode
has and whether it ends by termination (discount 0) or truncation (time limit, discount 1).
Every schedule is a pure function of ``(seed, e, k)``, so any framework that steps the same
env in any order sees the same episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from refimpl.errors import ConfigError

__all__ = [
    "CycleSchedule",
    "EpisodePlan",
    "FixedSchedule",
    "RandomSchedule",
    "Schedule",
]

Ending = Literal["terminated", "truncated"]
_ENDINGS = ("terminated", "truncated")
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class EpisodePlan:
    """One scheduled episode: ``length`` transitions, then the given ending."""

    length: int
    ending: Ending

    def __post_init__(self) -> None:
        if not isinstance(self.length, int) or isinstance(self.length, bool) or self.length < 1:
            raise ConfigError("length", self.length, "an integer >= 1")
        if self.ending not in _ENDINGS:
            raise ConfigError("ending", self.ending, "'terminated' or 'truncated'")


@dataclass(frozen=True)
class FixedSchedule:
    """Every episode has ``length`` transitions and the same ending."""

    length: int
    ending: Ending = "terminated"
    kind: Literal["fixed"] = "fixed"

    def __post_init__(self) -> None:
        EpisodePlan(self.length, self.ending)

    def episode(self, seed: int, env: int, k: int) -> EpisodePlan:
        return EpisodePlan(self.length, self.ending)


@dataclass(frozen=True)
class CycleSchedule:
    """Episodes follow ``episodes`` in order, cycling; env ``e`` starts at entry ``e * offset``."""

    episodes: tuple[EpisodePlan, ...]
    offset: int = 0
    kind: Literal["cycle"] = "cycle"

    def __post_init__(self) -> None:
        if not self.episodes:
            raise ConfigError("episodes", self.episodes, "a non-empty list of episode plans")
        if not all(isinstance(p, EpisodePlan) for p in self.episodes):
            raise ConfigError("episodes", self.episodes, "EpisodePlan values")
        if not isinstance(self.offset, int) or self.offset < 0:
            raise ConfigError("offset", self.offset, "an integer >= 0")

    def episode(self, seed: int, env: int, k: int) -> EpisodePlan:
        return self.episodes[(k + env * self.offset) % len(self.episodes)]


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


@dataclass(frozen=True)
class RandomSchedule:
    """Lengths uniform in ``[min_length, max_length]``; an episode is truncated with
    probability ``truncate_per_mille / 1000``. Draws hash ``(seed, env, k)``: no hidden state."""

    min_length: int
    max_length: int
    truncate_per_mille: int = 0
    kind: Literal["random"] = "random"

    def __post_init__(self) -> None:
        if not isinstance(self.min_length, int) or self.min_length < 1:
            raise ConfigError("min_length", self.min_length, "an integer >= 1")
        if not isinstance(self.max_length, int) or self.max_length < self.min_length:
            raise ConfigError("max_length", self.max_length, f"an integer >= {self.min_length}")
        if not isinstance(self.truncate_per_mille, int) or not 0 <= self.truncate_per_mille <= 1000:
            raise ConfigError("truncate_per_mille", self.truncate_per_mille, "0..1000")

    def episode(self, seed: int, env: int, k: int) -> EpisodePlan:
        h = _splitmix64(_splitmix64(_splitmix64(seed & _MASK64) ^ env) ^ k)
        span = self.max_length - self.min_length + 1
        length = self.min_length + (h % span)
        truncated = (h >> 32) % 1000 < self.truncate_per_mille
        return EpisodePlan(length, "truncated" if truncated else "terminated")


Schedule = Union[FixedSchedule, CycleSchedule, RandomSchedule]
