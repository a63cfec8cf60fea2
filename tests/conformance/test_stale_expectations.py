"""A declared deviation whose check passes is reported stale only where the scenario could
show the deviation to that check: refimpl run as the declared variant records other events
than refimpl run to the spec, and the check fails the variant's trace. A variant that the
scenario cannot show (a strict warm-up gate on a run that never waits), or one whose events
differ in what the check does not judge (stratified draws, to a check of the probabilities),
leaves a plain pass; one it could show, or a deviation without a variant, is stale."""

from __future__ import annotations

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Outcome, Session
from xpspec.conformance.expectations import Deviation, Expectations
from xpspec.conformance.variants import variant_scenario
from xpspec.refimpl.adapter import RefimplAdapter


def _evaluate(check_name: str, scenario_name: str, deviation: Deviation) -> Outcome:
    session = Session(RefimplAdapter(), "refimpl", Expectations(deviations=(deviation,)))
    check = next(c for c in ALL_CHECKS if c.name == check_name)
    return session.evaluate(check, scenario_name, CATALOG[scenario_name])


def test_a_variant_the_scenario_cannot_show_leaves_a_plain_pass() -> None:
    scenario = CATALOG["whole-buffer"]
    model = variant_scenario("train.warmup-gate", "strict", scenario)
    session = Session(RefimplAdapter(), "refimpl")
    assert model is not None and model != scenario  # the variant is applied ...
    assert session.reference(model).events == session.reference(scenario).events  # ... unseen
    outcome = _evaluate(
        "warmup-gate", "whole-buffer", Deviation("train.warmup-gate", "why", variant="strict")
    )
    assert (outcome.status, outcome.stale, outcome.message) == ("pass", False, "")


def test_a_variant_the_check_cannot_tell_leaves_a_plain_pass() -> None:
    scenario = CATALOG["priority-law"]
    model = variant_scenario("priority.sampling-law", "stratified", scenario)
    session = Session(RefimplAdapter(), "refimpl")
    assert model is not None
    assert session.reference(model).events != session.reference(scenario).events
    deviation = Deviation("priority.sampling-law", "why", variant="stratified")
    probabilities = _evaluate("priority-probabilities", "priority-law", deviation)
    assert (probabilities.status, probabilities.stale) == ("pass", False)
    law = _evaluate("priority-law", "priority-law", deviation)  # the draws are its concern
    assert (law.status, law.stale) == ("pass", True)


def test_a_variant_the_scenario_shows_makes_a_pass_stale() -> None:
    outcome = _evaluate(
        "env-auto-reset", "env-mixed", Deviation("timestep.auto-reset", "why", variant="same-step")
    )
    assert (outcome.status, outcome.stale) == ("pass", True)
    assert "stale expectation: timestep.auto-reset" in outcome.message


@pytest.mark.parametrize("scenario_name", ["whole-buffer", "env-mixed"])
def test_a_deviation_without_a_variant_is_stale_wherever_it_passes(scenario_name: str) -> None:
    check = "warmup-gate" if scenario_name == "whole-buffer" else "env-auto-reset"
    clause = "train.warmup-gate" if check == "warmup-gate" else "timestep.auto-reset"
    outcome = _evaluate(check, scenario_name, Deviation(clause, "why"))
    assert (outcome.status, outcome.stale) == ("pass", True)


def test_a_deviation_limited_to_other_kinds_does_not_apply() -> None:
    deviation = Deviation("timestep.auto-reset", "why", variant="same-step", kinds=("trainer",))
    assert deviation.applies_to("env-mixed", "trainer")
    assert not deviation.applies_to("env-mixed", "env")
    outcome = _evaluate("env-auto-reset", "env-mixed", deviation)
    assert (outcome.status, outcome.stale, outcome.message) == ("pass", False, "")


def test_a_deviation_for_every_kind_but_one_covers_every_other_kind() -> None:
    deviation = Deviation("timestep.auto-reset", "why", variant="same-step", except_kinds=("env",))
    assert not deviation.applies_to("env-mixed", "env")
    assert all(deviation.applies_to("x", kind) for kind in ("trainer", "replay", "async"))
    outcome = _evaluate("env-auto-reset", "env-mixed", deviation)
    assert (outcome.status, outcome.stale, outcome.message) == ("pass", False, "")
