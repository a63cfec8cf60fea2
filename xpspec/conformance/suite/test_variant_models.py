"""The reference implementation run as every spec variant it models: the checks of the
variant's clause, on every catalogue scenario the variant changes (that the model passes every
check of the variant scenario is tests/conformance/test_variants.py's claim). The models are
refimpl's code and decide the verdicts of every framework that declares a variant, so these
tests are marked ``refimpl_only``: selected only when the adapter under test is refimpl. Test
ids read ``<check>[<scenario>@<clause>/<variant>]``.

Those checks compare the model with a fresh run of itself, so the check ``pinned-model``
holds each model's trace to its committed digest (``vectors/variant-digests.json``,
:mod:`xpspec.conformance.vectors.digests`), under the variant's clause: what pins the model's
exact behaviour independently of itself. The ``ci`` profile pins the model scenarios the
checks above run (their traces are the session's, cached: no run is added); ``thorough`` pins
every model scenario.

The same holds for refimpl's second learner layout: every learner check on every learner
scenario computed on the rows layout (``layout="rows"``), whose trace must equal the
episodes layout's committed vector (clause ``learner.gae``). Ids read
``<check>[<scenario>@layout/rows]``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.pytest_plugin import XpspecSession, run_profile
from xpspec.conformance.vectors.digests import ModelCase, clause_checks, model_cases, pin_check
from xpspec.protocol.scenario import LearnerScenario, Scenario


def _cases() -> list[object]:
    cases: list[object] = []
    for case in model_cases():
        cases.extend(
            pytest.param(
                check,
                case.label,
                case.scenario,
                id=f"{check.name}[{case.label}]",
                marks=[pytest.mark.clause(*check.clauses), pytest.mark.refimpl_only],
            )
            for check in clause_checks(case)
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


def _pin_cases(every: bool) -> list[object]:
    """One ``pinned-model`` case per model scenario: with ``every`` all of them, else those
    some check of the variant's clause runs on (so their traces are in the session's cache)."""
    return [
        pytest.param(
            case,
            id=f"pinned-model[{case.label}]",
            marks=[pytest.mark.clause(case.clause), pytest.mark.refimpl_only],
        )
        for case in model_cases()
        if every or clause_checks(case)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.name == "test_variant_model_pinned":
        every = run_profile(metafunc.config) == "thorough"
        metafunc.parametrize("case", _pin_cases(every))


@pytest.mark.parametrize("check, name, scenario", _cases())
def test_variant_model(
    xpspec_session: XpspecSession, check: Check, name: str, scenario: Scenario
) -> None:
    xpspec_session.assert_outcome(check, name, scenario)


def test_variant_model_pinned(xpspec_session: XpspecSession, case: ModelCase) -> None:
    """Runs after every ``test_variant_model`` case (pytest keeps definition order), so the
    model's trace is the one its checks used, from the session's cache."""
    xpspec_session.assert_outcome(pin_check(case), case.label, case.scenario)
