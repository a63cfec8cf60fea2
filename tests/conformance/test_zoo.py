"""Each mutant of refimpl fails the clause it breaks, and only clauses it must drag along."""

from __future__ import annotations

import pytest

from conformance.catalog import CATALOG
from conformance.checks import ALL_CHECKS
from conformance.engine import Session
from tests.conformance.zoo import MUTANTS, Mutant, MutantAdapter


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    session = Session(MutantAdapter(mutant), f"mutant:{mutant.name}", timeout=60)
    failed: set[str] = set()
    for name, scenario in CATALOG.items():
        for check in ALL_CHECKS:
            if (
                check.capability != "trainer"
                or scenario.kind != "trainer"
                or not check.applies(scenario)
            ):
                continue
            outcome = session.evaluate(check, name, scenario)
            assert outcome.status != "error", outcome.message
            if outcome.status == "fail":
                failed.update(check.clauses)
    assert mutant.breaks in failed, f"{mutant.name} was not caught by {mutant.breaks}"
    unexpected = failed - {mutant.breaks, *mutant.also}
    assert not unexpected, f"{mutant.name} also failed unrelated clauses {sorted(unexpected)}"
