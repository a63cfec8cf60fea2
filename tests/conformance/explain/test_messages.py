"""A failure's message names the command that draws it next to the one that reproduces it;
an adapter that broke has nothing to draw, and its message names only the reproduction."""

from __future__ import annotations

from tests.conformance.zoo import MUTANTS, MutantAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Session
from xpspec.conformance.harness import load_adapter

CHECKS = {c.name: c for c in ALL_CHECKS}


def test_a_failure_names_the_explain_command_beside_the_repro() -> None:
    mutant = next(m for m in MUTANTS if m.name == "never-release")
    session = Session(MutantAdapter(mutant), "my-adapter")
    outcome = session.evaluate(CHECKS["delayed-per-env"], "delayed-b1", CATALOG["delayed-b1"])
    assert outcome.status == "fail"
    lines = outcome.message.splitlines()
    repro = next(
        n for n, line in enumerate(lines) if "`xpspec trace s.json --adapter my-adapter`" in line
    )
    assert "`xpspec explain s.json --adapter my-adapter --format text`" in lines[repro + 1]


def test_a_broken_adapter_is_not_sent_to_explain() -> None:
    adapter = load_adapter("tests.conformance.third_party:Raises")
    outcome = Session(adapter, "raises").evaluate(
        CHECKS["conservation"], "plain-u2-b3", CATALOG["plain-u2-b3"]
    )
    assert outcome.status == "error" and "xpspec trace s.json" in outcome.message
    assert "xpspec explain" not in outcome.message
