"""Episode schedules of the toy envs (the toy env contract of ``spec/timesteps.md``).

A schedule answers, for env ``e`` and its ``k``-th episode, how many transitions the episode
has and whether it ends by termination (discount 0) or truncation (time limit, discount 1).
Every schedule is a pure function of ``(seed, e, k)``, so any framework that steps the same
env in any order sees the same episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import MAX_COORDINATE

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
_MAX_LENGTH = MAX_COORDINATE - 2
"""The longest episode: ``t`` and a truncated episode's goal ``L + 1`` stay below 2**24."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class EpisodePlan:
    """One scheduled episode: ``length`` transitions, then the given ending."""

    length: int
    ending: Ending

    def __post_init__(self) -> None:
        if not _is_int(self.length) or not 1 <= self.length <= _MAX_LENGTH:
            raise ConfigError("length", self.length, f"an integer in [1, {_MAX_LENGTH}]")
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
        if not _is_int(self.offset) or self.offset < 0:
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
        if not _is_int(self.min_length) or not 1 <= self.min_length <= _MAX_LENGTH:
            raise ConfigError("min_length", self.min_length, f"an integer in [1, {_MAX_LENGTH}]")
        if not _is_int(self.max_length) or not self.min_length <= self.max_length <= _MAX_LENGTH:
            raise ConfigError(
                "max_length", self.max_length, f"an integer in [{self.min_length}, {_MAX_LENGTH}]"
            )
        tpm = self.truncate_per_mille
        if not _is_int(tpm) or not 0 <= tpm <= 1000:
            raise ConfigError("truncate_per_mille", self.truncate_per_mille, "0..1000")

    def episode(self, seed: int, env: int, k: int) -> EpisodePlan:
        h = _splitmix64(_splitmix64(_splitmix64(seed & _MASK64) ^ env) ^ k)
        span = self.max_length - self.min_length + 1
        length = self.min_length + (h % span)
        truncated = (h >> 32) % 1000 < self.truncate_per_mille
        return EpisodePlan(length, "truncated" if truncated else "terminated")


Schedule = FixedSchedule | CycleSchedule | RandomSchedule
