"""Scenarios: frozen, JSON-serialisable inputs of the conformance suite.

A scenario says, in the spec's vocabulary, what to run: the toy env, the trainer knobs, the
preprocessing, the sampling and the seed. Each family of operations has its own scenario type,
told apart in JSON by ``kind``. Construction validates every field; an invalid scenario
raises :class:`~refimpl.errors.ConfigError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Literal, Union

from refimpl.config import TrainerConfig
from refimpl.errors import ConfigError
from refimpl.preprocess import Identity, PreprocessorSpec
from refimpl.replay import SamplingSpec
from refimpl.serial import canonical_json, from_jsonable
from refimpl.toy_envs.spec import EnvSpec

__all__ = [
    "EnvScenario",
    "ReplayScenario",
    "Scenario",
    "TrainerScenario",
    "scenario_from_json",
    "scenario_to_json",
]


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")


@dataclass(frozen=True)
class TrainerScenario:
    """A full train run: unroll, preprocess, store, train (capability ``trainer``)."""

    env: EnvSpec
    trainer: TrainerConfig
    preprocess: PreprocessorSpec = field(default_factory=Identity)
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    seed: int = 0
    kind: Literal["trainer"] = "trainer"

    def __post_init__(self) -> None:
        _check_int("seed", self.seed, 0)
        if self.sampling.window_length != self.trainer.mini_batch_length:
            object.__setattr__(
                self, "sampling", _with_length(self.sampling, self.trainer.mini_batch_length)
            )


def _with_length(sampling: SamplingSpec, length: int) -> SamplingSpec:
    return replace(sampling, window_length=length)


@dataclass(frozen=True)
class ReplayScenario:
    """Fill a replay buffer with ``fill_steps`` vector steps of the toy env (every item
    stored), then draw ``draws`` batches of ``batch_size`` windows (capability ``replay``)."""

    env: EnvSpec
    capacity: int
    fill_steps: int
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    batch_size: int = 16
    draws: int = 1
    seed: int = 0
    kind: Literal["replay"] = "replay"

    def __post_init__(self) -> None:
        _check_int("capacity", self.capacity, 1)
        _check_int("fill_steps", self.fill_steps, 0)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("draws", self.draws, 1)
        _check_int("seed", self.seed, 0)
        if self.sampling.window_length > self.capacity:
            raise ConfigError(
                "sampling.window_length", self.sampling.window_length, f"at most capacity ({self.capacity})"
            )


@dataclass(frozen=True)
class EnvScenario:
    """Step the toy env ``steps`` vector steps through the framework's own env handling
    (capability ``env``)."""

    env: EnvSpec
    steps: int
    seed: int = 0
    kind: Literal["env"] = "env"

    def __post_init__(self) -> None:
        _check_int("steps", self.steps, 1)
        _check_int("seed", self.seed, 0)


Scenario = Union[TrainerScenario, ReplayScenario, EnvScenario]


def scenario_to_json(scenario: Scenario) -> str:
    """The canonical JSON text of a scenario (sorted keys, no spaces)."""
    return canonical_json(scenario)


def scenario_from_json(text: str | dict) -> Scenario:
    """Parse a scenario from JSON text or a decoded object; errors name the field."""
    data = json.loads(text) if isinstance(text, str) else text
    result: Scenario = from_jsonable(Scenario, data, "scenario")
    return result
