"""The resource budget (xpspec/protocol/budget.py): a scenario that asks for too much is refused
at construction, before anything is allocated, with one BudgetError naming the fields, the
limit and what they ask for; the bounds it derives for a train run hold."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.strategies import trainer_scenarios
from xpspec.conformance.vectors import vectors as committed_vectors
from xpspec.protocol.budget import BUDGET, BudgetError, trainer_extent
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.scenario import TrainerScenario, scenario_from_json, scenario_to_json
from xpspec.refimpl.adapter import RefimplAdapter


def _json(name: str, **changes: Any) -> dict[str, Any]:
    """The JSON of catalogue scenario ``name`` with ``changes`` (dotted keys reach inside)."""
    data = json.loads(scenario_to_json(CATALOG[name]))
    for key, value in changes.items():
        *path, last = key.split("__")
        target = data
        for part in path:
            target = target[part]
        target[last] = value
    return data


@pytest.mark.parametrize(
    ("data", "field", "limit", "unit", "got"),
    [
        (
            _json("plain-u1-b1", env__num_envs=10**6),
            "env.num_envs",
            "1,024",
            "envs",
            "1,000,000",
        ),
        (
            _json("plain-u1-b1", env__num_actions=10**9),
            "env.num_actions",
            "1,024",
            "actions",
            "1,000,000,000",
        ),
        (
            _json("plain-u1-b1", trainer__capacity=10**18),
            "env.num_envs × trainer.capacity",
            "2,000,000",
            "buffer items",
            "1,000,000,000,000,000,000",
        ),
        (
            _json("env-mixed", env__num_envs=1000, steps=10**7),
            "env.num_envs × steps",
            "2,000,000",
            "env steps",
            "10,000,000,000",
        ),
        (
            _json("replay-uniform", fill_steps=10**12),
            "env.num_envs × fill_steps",
            "2,000,000",
            "env steps",
            "2,000,000,000,000",
        ),
        (
            _json("replay-uniform", capacity=10**7, fill_steps=3),
            "env.num_envs × capacity",
            "2,000,000",
            "buffer items",
            "20,000,000",
        ),
        (
            _json("replay-uniform", batch_size=10**5),
            "batch_size × sampling.window_length × draws",
            "2,000,000",
            "sampled items",
            "12,000,000",
        ),
        (
            _json("replay-uniform", draws=10**9),
            "batch_size × sampling.window_length × draws",
            "2,000,000",
            "sampled items",
            "192,000,000,000",
        ),
        (
            _json("replay-uniform", capacity=10**6, sampling__window_length=10**6),
            "batch_size × sampling.window_length × draws",
            "2,000,000",
            "sampled items",
            "2,560,000,000",
        ),
        (
            _json("plain-u1-b1", trainer__num_iterations=10**9),
            "env.num_envs × trainer.num_iterations × ceil(trainer.unroll_length)",
            "2,000,000",
            "env steps",
            "up to 1,000,000,000",
        ),
        (
            _json("drain-b2", trainer__num_iterations=200_000, trainer__drain__max_unroll_length=1),
            "trainer.num_iterations",
            "100,000",
            "train iterations",
            "200,000",
        ),
        (
            _json("env-steps-limit-b3", trainer__num_env_steps=10**9),
            "env.num_envs × vector steps to count trainer.num_env_steps "
            "(plus one iteration's unroll)",
            "2,000,000",
            "env steps",
            "up to 1,000,000,047",
        ),
        (
            _json(
                "env-steps-limit-b3", trainer__num_env_steps=10**5, trainer__unroll_length="1/1000"
            ),
            "iterations to count trainer.num_env_steps",
            "100,000",
            "train iterations",
            "up to 33,347,001",
        ),
        (
            _json("plain-u1-b1", trainer__num_updates_per_train_iter=10**6),
            "trainer.num_updates_per_train_iter × env.num_envs × trainer.mini_batch_length per "
            "train call, over up to 12 train calls",
            "2,000,000",
            "sampled items",
            "up to 12,000,000",
        ),
        (
            _json("whole-buffer", trainer__num_iterations=10**4, trainer__capacity=10**4),
            "trainer.num_updates_per_train_iter × trainer.capacity × env.num_envs per train "
            "call, over up to 10,000 train calls",
            "2,000,000",
            "sampled items",
            "up to 600,000,000",
        ),
        (
            _json("learner-mixed", nstep=10**9),
            "env.num_envs × steps × (nstep + 1)",
            "2,000,000",
            "items of n-step windows",
            "51,000,000,051",
        ),
        (
            _json("learner-mixed", num_epochs=10**6),
            "env.num_envs × steps × num_epochs",
            "2,000,000",
            "minibatch rows",
            "51,000,000",
        ),
        (
            _json("learner-mixed", num_learners=10**9),
            "num_learners",
            "1,024",
            "learners",
            "1,000,000,000",
        ),
        (
            _json("relabel-future", batch_size=10**9),
            "batch_size × 2 × draws (transitions of two items)",
            "2,000,000",
            "sampled items",
            "80,000,000,000",
        ),
    ],
)
def test_a_scenario_over_budget_is_refused_naming_the_fields(
    data: dict, field: str, limit: str, unit: str, got: str
) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(BudgetError) as info:
            scenario_from_json(json.dumps(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == (
        f"{field}: expected at most {limit} {unit} in one scenario (the suite's resource "
        f"budget), got {got}"
    )
    assert info.value.field == field and isinstance(info.value, ValueError)
    assert peak < 2**20, f"{peak} bytes allocated before the refusal"


def test_every_shipped_scenario_is_well_within_budget() -> None:
    vectors = [v.scenario() for v in committed_vectors()]
    assert vectors
    for scenario in [*CATALOG.values(), *vectors]:
        assert scenario.env.num_envs * 100 <= BUDGET.envs
        if isinstance(scenario, TrainerScenario):
            assert trainer_extent(scenario).iterations * 100 <= BUDGET.iterations


def _observed(scenario: TrainerScenario) -> tuple[int, int, int]:
    """Iterations, vector steps and train calls of the reference run."""
    trace = RefimplAdapter().run_trainer(scenario)
    return (
        sum(1 for _ in trace.of_kind("iteration")),
        sum(1 for _ in trace.of_kind("env_step")),
        sum(1 for _ in trace.of_kind("train_call")),
    )


def _assert_bounded(scenario: TrainerScenario) -> None:
    extent = trainer_extent(scenario)
    iterations, steps, calls = _observed(scenario)
    assert iterations <= extent.iterations and steps <= extent.vector_steps, extent
    assert calls <= extent.train_calls, extent


@pytest.mark.parametrize("name", [n for n, s in CATALOG.items() if isinstance(s, TrainerScenario)])
def test_the_derived_bounds_hold_on_the_catalogue(name: str) -> None:
    _assert_bounded(CATALOG[name])  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(trainer_scenarios())
def test_the_derived_bounds_hold_on_generated_scenarios(scenario: TrainerScenario) -> None:
    _assert_bounded(scenario)


@pytest.mark.parametrize(
    "changes",
    [
        {"env_step_count": "non-first"},
        {"env_step_count": "non-first", "train_accounting": "alf-pr1768-floor"},
        {"unroll_length": 0, "num_iterations": 0, "num_env_steps": 30},
    ],
)
def test_the_derived_bounds_hold_when_env_steps_end_the_run(changes: dict) -> None:
    from xpspec.protocol.config import DrainSpec
    from xpspec.protocol.preprocessors import EpisodeDelayed

    base = CATALOG["env-steps-limit-b3"]
    assert isinstance(base, TrainerScenario)
    knobs = dict(changes)
    if knobs.get("unroll_length") == 0:
        knobs["drain"] = DrainSpec((0, 2, 0, 1), 3, 4)
    scenario = replace(base, trainer=replace(base.trainer, **knobs))
    _assert_bounded(scenario)
    _assert_bounded(replace(scenario, preprocess=EpisodeDelayed()))
    same_step = replace(scenario, env=replace(scenario.env, autoreset="same-step"))
    _assert_bounded(same_step)


def test_a_run_no_env_step_would_ever_end_is_refused() -> None:
    env = {"schedules": [{"kind": "fixed", "length": 1}], "autoreset": "same-step"}
    trainer = {"num_env_steps": 5, "env_step_count": "non-first"}
    with pytest.raises(ConfigError) as info:
        scenario_from_json({"kind": "trainer", "env": env, "trainer": trainer})
    assert info.value.field == "scenario.trainer.env_step_count" and info.value.value == "non-first"
    assert "the run would never end" in str(info.value)
