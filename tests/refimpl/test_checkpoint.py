"""refimpl's checkpoint and resume (xpspec.refimpl.checkpoint): a trainer saved to bytes and
restored from them alone goes on as the uninterrupted run does, and what is restored comes
from the bytes (clauses ``resume.*``)."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from hypothesis import given, settings

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.strategies import trainer_scenarios
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Resume
from xpspec.refimpl.checkpoint import PARTS, restore, run_checkpointed, save
from xpspec.refimpl.trainer import Trainer, train

RESUMED = [name for name, s in CATALOG.items() if getattr(s, "checkpoint", None) is not None]


def _uninterrupted(scenario: TrainerScenario) -> list[object]:
    s = scenario
    return list(train(s.env, s.trainer, s.preprocess, s.sampling, s.seed).trace.events)


def _without_resume(events: tuple[object, ...]) -> list[object]:
    return [e for e in events if not isinstance(e, Resume)]


@pytest.mark.parametrize("name", RESUMED)
def test_a_resumed_catalogue_run_is_the_uninterrupted_one(name: str) -> None:
    scenario = CATALOG[name]
    assert isinstance(scenario, TrainerScenario)
    trace = run_checkpointed(scenario)
    marks = [e for e in trace.events if isinstance(e, Resume)]
    assert len(marks) == 1 and marks[0].saved == marks[0].restored
    assert _without_resume(trace.events) == _uninterrupted(scenario)


@settings(max_examples=25, deadline=None)
@given(trainer_scenarios(checkpoint=True))
def test_a_resumed_generated_run_is_the_uninterrupted_one(scenario: TrainerScenario) -> None:
    assert _without_resume(run_checkpointed(scenario).events) == _uninterrupted(scenario)


def _first_trainer(scenario: TrainerScenario) -> Trainer:
    s = scenario
    trainer = Trainer(s.env, s.trainer, s.preprocess, s.sampling, s.seed, record=True)
    trainer.start()
    assert s.checkpoint is not None
    while trainer.iteration < s.checkpoint.after_iteration:
        trainer.run_iteration()
    return trainer


def test_what_is_restored_comes_from_the_bytes() -> None:
    """Perturb the saved counter in the bytes: the restored run counts from the perturbed
    value, so nothing but the bytes crosses the checkpoint."""
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    first = _first_trainer(scenario)
    saved = save(first)
    payload = pickle.loads(saved.data)
    payload["arguments"][1]["run"]["counter"] += 100
    perturbed = restore(pickle.dumps(payload), first.env)
    perturbed.run_iteration()
    start = next(e for e in perturbed.recorder.drain() if e.kind == "iteration")
    assert start.counter == first.counter + 100 + 1


def test_one_checkpoint_restores_twice_into_the_same_run() -> None:
    scenario = CATALOG["resume-fractional"]
    assert isinstance(scenario, TrainerScenario)
    first = _first_trainer(scenario)
    saved = save(first)
    a = restore(saved.data, first.env)
    b = restore(saved.data, first.env)
    assert a is not b and a.buffer is not b.buffer
    assert a.state_dict()["run"] == b.state_dict()["run"] == first.state_dict()["run"]


def test_forgetting_a_part_is_refused_unless_it_is_one() -> None:
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    with pytest.raises(ValueError, match="forget"):
        run_checkpointed(scenario, forget=["everything"])
    assert set(PARTS) == set(_first_trainer(scenario).state_dict())


def test_a_scenario_without_a_checkpoint_is_refused() -> None:
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    with pytest.raises(ValueError, match="no checkpoint"):
        run_checkpointed(replace(scenario, checkpoint=None))
