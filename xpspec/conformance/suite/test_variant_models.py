"""The reference implementation run as every spec variant it models: the checks of the
variant's clause, on every catalogue scenario the variant changes (that the model passes every
check of the variant scenario is tests/conformance/test_variants.py's claim). The models are
refimpl's code and decide the verdicts of every framework that declares a variant, so these
tests are marked ``refimpl_only``: selected only when the adapter under test is refimpl. Test
ids read ``<check>[<scenario>@<clause>/<variant>]``.

The same holds for refimpl's second learner layout: every learner check on every learner
scenario computed on the rows layout (``layout="rows"``), whose trace must equal the
episodes layout's committed vector (clause ``learner.gae``). Ids read
``<check>[<scenario>@layout/rows]``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.pytest_plugin import XpspecSession
from xpspec.conformance.variants import VARIANTS, variant_scenario
from xpspec.protocol.scenario import LearnerScenario, Scenario


def _cases() -> list[object]:
    cases: list[object] = []
    for clause, variant in sorted(VARIANTS):
        for name, scenario in CATALOG.items():
            model = variant_scenario(clause, variant, scenario)
            if model is None or model == scenario:
                continue
            label = f"{name}@{clause}/{variant}"
            cases.extend(
                pytest.param(
                    check,
                    label,
                    model,
                    id=f"{check.name}[{label}]",
                    marks=[pytest.mark.clause(*check.clauses), pytest.mark.refimpl_only],
                )
                for check in ALL_CHECKS
                if clause in check.clauses
                and check.capability == model.kind
                and check.applies(model)
            )
    return cases + _layout_cases()


def _layout_cases() -> list[object]:
    cases: list[object] = []
    for name, scenario in CATALOG.items():
        if not isinstance(scenario, LearnerScenario) or "rllib-2.60" in (
            scenario.advantage_variant,
            scenario.nstep_variant,
        ):
            continue
        model, label = replace(scenario, layout="rows"), f"{name}@layout/rows"
        cases.extend(
            pytest.param(
                check,
                label,
                model,
                id=f"{check.name}[{label}]",
                marks=[pytest.mark.clause(*check.clauses), pytest.mark.refimpl_only],
            )
            for check in ALL_CHECKS
            if check.capability == "learner" and check.applies(model)
        )
    return cases


@pytest.mark.parametrize("check, name, scenario", _cases())
def test_variant_model(
    xpspec_session: XpspecSession, check: Check, name: str, scenario: Scenario
) -> None:
    xpspec_session.assert_outcome(check, name, scenario)
