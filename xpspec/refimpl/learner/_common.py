"""Helpers and variant names shared by the learner modules."""

from __future__ import annotations

from typing import Literal

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.step_type import StepType

AdvantageVariant = Literal["spec", "rllib-2.60"]
Layout = Literal["episodes", "rows"]
"""How the spec's GAE and n-step targets are computed: per episode, or on the rows layout
(clause ``learner.gae``: both give the same numbers)."""
NStepVariant = Literal["spec", "rllib-2.60"]
UpdateVariant = Literal["spec", "rllib-2.60", "alf"]
ShardVariant = Literal["spec", "rllib-2.60"]

FIRST, MID, LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_variant(field: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(field, value, " or ".join(repr(a) for a in allowed))


def check_unit_interval(field: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(field, value, "a number in [0, 1]")
