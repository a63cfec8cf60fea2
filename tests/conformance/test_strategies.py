"""The generated trainer scenarios: every check's strategy draws only scenarios the check
concerns, and they are scenarios the reference trainer runs and passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from adapters.refimpl import RefimplAdapter
from conformance import strategies
from conformance.checks import ALL_CHECKS, Check
from conformance.checks.base import Context
from conformance.scenario import Scenario, TrainerScenario
from conformance.strategies import scenarios_for, trainer_configs
from conformance.validate import validate_trace
from refimpl.trace import Trace

TRAINER = [c for c in ALL_CHECKS if c.capability == "trainer"]
INVARIANTS = [c for c in TRAINER if c.kind == "invariant"]


@pytest.mark.parametrize("check", TRAINER, ids=lambda c: c.name)
def test_every_drawn_scenario_concerns_the_check(
    check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every scenario drawn is one the check concerns, and none was built only to be thrown
    away (a filter on the scenario would build more scenarios than the test sees)."""
    built = seen = 0
    post_init = TrainerScenario.__post_init__

    def counted(self: TrainerScenario) -> None:
        nonlocal built
        built += 1
        post_init(self)

    monkeypatch.setattr(TrainerScenario, "__post_init__", counted)

    @settings(
        max_examples=200,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=(),  # whatever the loaded profile says
    )
    @given(scenarios_for(check))
    def concerns(scenario: TrainerScenario) -> None:
        nonlocal seen
        seen += 1
        assert check.applies(scenario), scenario

    concerns()
    assert built <= seen * 1.05, f"{built - seen} of {built} scenarios drawn were thrown away"


@pytest.mark.parametrize("check", INVARIANTS, ids=lambda c: c.name)
def test_drawn_scenarios_pass_on_the_reference_trainer(check: Check) -> None:
    adapter = RefimplAdapter()

    def run(scenario: Scenario) -> Trace:
        assert isinstance(scenario, TrainerScenario)
        return adapter.run_trainer(scenario)

    context = Context(run, run)

    @settings(max_examples=8, derandomize=True, database=None, deadline=None)
    @given(scenarios_for(check))
    def passes(scenario: TrainerScenario) -> None:
        trace = run(scenario)
        validate_trace(scenario, trace)
        check.verify(scenario, trace, context)

    passes()


def test_every_trainer_check_has_a_strategy_and_no_other_name_does() -> None:
    names = {c.name for c in ALL_CHECKS if c.capability == "trainer"}
    assert set(strategies._CONCERNS) | strategies._EVERYWHERE == names
    assert not set(strategies._CONCERNS) & strategies._EVERYWHERE


def test_a_check_without_a_strategy_is_refused() -> None:
    new = Check("new-invariant", ("x.y",), "trainer", "invariant", lambda s, t, c: None)
    with pytest.raises(ValueError, match="new-invariant"):
        scenarios_for(new)
    replay = next(c for c in ALL_CHECKS if c.capability == "replay")
    with pytest.raises(ValueError, match="not a trainer check"):
        scenarios_for(replay)


def test_clearing_needs_a_whole_buffer() -> None:
    with pytest.raises(ValueError, match="whole buffer"):
        trainer_configs(clear=True, whole_buffer=False)
