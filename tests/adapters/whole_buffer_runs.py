"""The whole-buffer trainer scenario the recurrent-PPO trainer rows' unit tests share (skrl's
PPO_RNN, AgileRL's train_on_policy): two envs of terminated two-transition episodes, a ring of
u = 4 items cleared after each of two iterations, chunks of 2 — small enough to derive every
value by hand — and a context whose reference is refimpl's run of the scenario."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from xpspec.conformance.checks.base import Context
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace
from xpspec.refimpl import train

__all__ = ["reference_context", "whole_buffer_scenario"]


def whole_buffer_scenario(preprocess: Any = None, **knobs: object) -> TrainerScenario:
    """Two envs, terminated episodes of 2 transitions (items t = 0 .. 2); whole-buffer
    training with clearing of a ring of u = 4 items, chunks of 2, two iterations; ``knobs``
    replace any of those trainer settings."""
    values: dict[str, object] = {
        "num_iterations": 2,
        "unroll_length": Fraction(4),
        "whole_buffer": True,
        "clear": "all",
        "capacity": 4,
        "mini_batch_length": 2,
    }
    values.update(knobs)
    config = TrainerConfig(**values)  # type: ignore[arg-type]
    env = EnvSpec(2, (FixedSchedule(2),))
    if preprocess is None:
        return TrainerScenario(env, config)
    return TrainerScenario(env, config, preprocess)


def reference_context() -> Context:
    """A check context whose reference is refimpl's run; a check that re-runs the adapter is
    not expected here."""

    def reference(scenario: Scenario) -> Trace:
        assert isinstance(scenario, TrainerScenario)
        return train(scenario.env, scenario.trainer, scenario.preprocess, seed=scenario.seed).trace

    def rerun(scenario: Scenario) -> Trace:
        raise AssertionError("no re-run expected")

    return Context(reference, rerun)
