"""Invariant checks over Hypothesis-generated trainer scenarios (profiles ``ci`` and
``thorough``). A falsifying scenario is printed as JSON, ready for ``xpspec trace``."""

from __future__ import annotations

import pytest
from hypothesis import given, reject
from hypothesis.errors import Unsatisfiable

from conformance.checks import ALL_CHECKS, Check
from conformance.engine import GENERATED
from conformance.pytest_plugin import XpspecSession
from conformance.scenario import TrainerScenario
from conformance.strategies import trainer_scenarios

INVARIANTS = [
    pytest.param(c, id=c.name, marks=[pytest.mark.clause(*c.clauses)])
    for c in ALL_CHECKS
    if c.capability == "trainer" and c.kind == "invariant"
]


@pytest.mark.parametrize("check", INVARIANTS)
def test_invariant(xpspec_session: XpspecSession, check: Check) -> None:
    """Generated scenarios the check does not concern, or that the adapter cannot express,
    are rejected (not counted); the others must pass."""
    if check.capability not in xpspec_session.engine.info.capabilities:
        pytest.skip(f"adapter declares no capability {check.capability!r}")

    @given(trainer_scenarios())
    def run(scenario: TrainerScenario) -> None:
        if not check.applies(scenario):
            reject()
        outcome = xpspec_session.engine.evaluate(check, GENERATED, scenario)
        if outcome.status == "not-applicable":
            reject()
        xpspec_session.report(outcome)

    try:
        run()
    except Unsatisfiable:
        pytest.skip(
            "no generated scenario was both concerned by the check and expressible by the adapter"
        )
