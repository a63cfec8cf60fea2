"""Invariant checks over Hypothesis-generated trainer, relabel, prioritized replay, recurrent,
frame stacking, offline and asynchronous actors scenarios (profiles ``ci`` and
``thorough``). A falsifying scenario is shrunk and printed as JSON, ready for ``xpspec trace``.

The recorded outcome is the test's over all its examples: a MUST-level failure (shrunk to
its smallest scenario) makes it fail; an adapter failure (error, crash, timeout, resource)
is recorded as it happened, without shrinking (it says nothing about the scenario, and
repeating a hang or a crash to shrink it would only cost time); else the worst of the
examples' verdicts (a SHOULD-level failure, a deviation, a pass). A problem of Hypothesis
itself (a failed health check, a flaky example) is an ``error``, never a pass.
"""

from __future__ import annotations

import traceback
import zlib

import pytest
from hypothesis import given, seed

from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.engine import GENERATED, Outcome
from xpspec.conformance.outcomes import ADAPTER_FAILURES
from xpspec.conformance.pytest_plugin import XpspecSession
from xpspec.conformance.strategies import scenarios_for
from xpspec.protocol.scenario import Scenario

INVARIANTS = [
    pytest.param(c, id=c.name, marks=[pytest.mark.clause(*c.clauses)])
    for c in ALL_CHECKS
    if c.kind == "invariant"
    and (
        c.capability in ("trainer", "relabel", "recurrent", "stack", "offline", "async")
        or "priorities" in c.requires
    )
]


class _Falsified(Exception):
    """Raised inside an example so that Hypothesis shrinks the failing scenario."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def _summary(check: Check, seen: list[Outcome]) -> Outcome:
    """The outcome of a run of examples none of which failed at MUST level."""
    counts = {s: sum(1 for o in seen if o.status == s) for s in {o.status for o in seen}}
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    for status in ("fail", "deviation", "pass"):
        first = next((o for o in seen if o.status == status), None)
        if first is not None:
            note = f"{len(seen)} generated scenarios ({tally})"
            message = f"{note}; first {status}: {first.message}" if first.message else note
            return Outcome(**{**first.__dict__, "message": message})
    return Outcome(
        check.name,
        check.clauses,
        GENERATED,
        "not-applicable",
        f"no generated scenario was expressible by the adapter ({len(seen)} tried)",
    )


@pytest.mark.parametrize("check", INVARIANTS)
def test_invariant(xpspec_session: XpspecSession, check: Check) -> None:
    """Every generated scenario is one the check concerns (:func:`scenarios_for`); one the
    adapter cannot express counts as not applicable, the others must pass."""
    engine = xpspec_session.engine
    if check.capability not in engine.info.capabilities:
        xpspec_session.report(engine.undeclared(check, GENERATED, check.capability))
    seen: list[Outcome] = []
    broke: list[Outcome] = []

    @seed(zlib.crc32(check.name.encode()))  # each check its own (reproducible) scenarios
    @given(scenarios_for(check))
    def run(scenario: Scenario) -> None:
        if broke:  # the adapter broke: stop evaluating, let Hypothesis finish quietly
            return
        outcome = engine.evaluate(check, GENERATED, scenario)
        if outcome.status in ADAPTER_FAILURES:
            broke.append(outcome)
            return
        seen.append(outcome)
        if outcome.status == "fail" and (outcome.level == "MUST" or xpspec_session.strict):
            raise _Falsified(outcome)

    try:
        run()
    except _Falsified as falsified:  # re-raised by Hypothesis from the shrunk example
        xpspec_session.report(falsified.outcome)
    except Exception as exc:  # several distinct failures, or Hypothesis could not complete
        grouped = getattr(exc, "exceptions", ())  # an ExceptionGroup: report the first failure
        first_failure = next((e for e in grouped if isinstance(e, _Falsified)), None)
        if first_failure is not None:
            xpspec_session.report(first_failure.outcome)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            first += f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})"
        xpspec_session.report(
            Outcome(
                check.name,
                check.clauses,
                GENERATED,
                "error",
                f"Hypothesis could not complete the generated examples: {type(exc).__name__}: {first}",
            )
        )
    if broke:
        xpspec_session.report(broke[0])
    xpspec_session.report(_summary(check, seen))
