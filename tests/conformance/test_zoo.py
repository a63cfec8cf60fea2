"""Each mutant of refimpl fails the clause it breaks, and only clauses it must drag along."""

from __future__ import annotations

import pytest

from conformance.checks import ALL_CHECKS
from tests.conformance.helpers import failures
from tests.conformance.zoo import MUTANTS, Mutant, MutantAdapter

CLAUSES = {check.name: check.clauses for check in ALL_CHECKS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    adapter = MutantAdapter(mutant)
    failed = {c for name in failures(adapter, mutant.kind) for c in CLAUSES[name]}
    assert mutant.breaks in failed, f"{mutant.name} was not caught by {mutant.breaks}"
    unexpected = failed - {mutant.breaks, *mutant.also}
    assert not unexpected, f"{mutant.name} also failed unrelated clauses {sorted(unexpected)}"
