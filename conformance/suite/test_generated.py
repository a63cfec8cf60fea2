"""Invariant checks over Hypothesis-generated trainer scenarios (profiles ``ci`` and
``thorough``). A falsifying scenario is printed as JSON, ready for ``xpspec trace``."""

from __future__ import annotations

import pytest
from hypothesis import given

from conformance.checks import ALL_CHECKS, Check
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
    @given(trainer_scenarios())
    def run(scenario: TrainerScenario) -> None:
        if check.applies(scenario):
            xpspec_session.assert_outcome(check, "generated", scenario)

    run()
