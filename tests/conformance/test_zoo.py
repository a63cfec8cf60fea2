"""Each mutant of refimpl fails the clause it breaks, and blame charges its failures to that
clause alone: every other failure is marked downstream of it."""

from __future__ import annotations

import pytest

from tests.conformance.helpers import blamed
from tests.conformance.zoo import MUTANTS, Mutant, MutantAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS

CLAUSES = {check.name: check.clauses for check in ALL_CHECKS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    causes, downstream = blamed(MutantAdapter(mutant), mutant.capability)
    assert mutant.breaks in causes, (
        f"{mutant.name} was not caught by {mutant.breaks}: causes {causes}, downstream {downstream}"
    )
    # Where the mutant's trace is another mutant's, blame can only name that one's clause.
    twins = {(f"{scenario} ", clause) for scenario, _, clause in mutant.same_trace_as}
    unexplained = {
        clause: where
        for clause, where in causes.items()
        if clause != mutant.breaks
        and not all(any(w.startswith(s) and clause == c for s, c in twins) for w in where)
    }
    assert not unexplained, (
        f"{mutant.name} is blamed on {sorted(unexplained)}, expected {mutant.breaks}: {unexplained}"
    )


TWINS = [
    pytest.param(m, scenario, twin, id=f"{m.name}={twin}[{scenario}]")
    for m in MUTANTS
    for scenario, twin, _ in m.same_trace_as
]


@pytest.mark.parametrize(("mutant", "scenario", "twin"), TWINS)
def test_a_mutant_whose_blame_is_ambiguous_has_its_twins_trace(
    mutant: Mutant, scenario: str, twin: str
) -> None:
    other = next(m for m in MUTANTS if m.name == twin)
    ours = MutantAdapter(mutant).run_trainer(CATALOG[scenario]).to_jsonl()
    assert ours == MutantAdapter(other).run_trainer(CATALOG[scenario]).to_jsonl()
