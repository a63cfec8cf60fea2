"""Each mutant of refimpl fails the clause it breaks, and blame charges its failures to that
clause alone: every other failure is marked downstream of it."""

from __future__ import annotations

import pytest

from conformance.checks import ALL_CHECKS
from tests.conformance.helpers import blamed
from tests.conformance.zoo import MUTANTS, Mutant, MutantAdapter

CLAUSES = {check.name: check.clauses for check in ALL_CHECKS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    causes, downstream = blamed(MutantAdapter(mutant), mutant.capability)
    assert mutant.breaks in causes, (
        f"{mutant.name} was not caught by {mutant.breaks}: causes {causes}, downstream {downstream}"
    )
    assert set(causes) == {mutant.breaks}, (
        f"{mutant.name} is blamed on {sorted(causes)}, expected {mutant.breaks} only: {causes}"
    )
