"""Every check on every catalogue scenario it applies to. Test ids read
``<check>[<scenario>]``; each test carries its clause ids as ``clause`` markers."""

from __future__ import annotations

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.pytest_plugin import XpspecSession
from xpspec.protocol.scenario import Scenario

CASES = [
    pytest.param(
        check,
        name,
        scenario,
        id=f"{check.name}[{name}]",
        marks=[pytest.mark.clause(*check.clauses)],
    )
    for check in ALL_CHECKS
    for name, scenario in CATALOG.items()
    if check.capability == scenario.kind and check.applies(scenario)
]


@pytest.mark.parametrize("check, name, scenario", CASES)
def test_check(xpspec_session: XpspecSession, check: Check, name: str, scenario: Scenario) -> None:
    xpspec_session.assert_outcome(check, name, scenario)
