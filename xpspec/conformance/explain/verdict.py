"""The suite's checks on one trace, ranked as a run ranks them: which clause the trace breaks.

The checks that concern the scenario run on the trace as ``xpspec check`` runs them: the
determinism checks are left out (they run the adapter again from scratch), and so is every
check that needs another run of the adapter when there is none to ask. The failures are ranked
by :func:`xpspec.conformance.blame.cause_of`: the first is the cause, the clause to fix; the
others are downstream of it. A malformed trace (:func:`xpspec.conformance.validate.validate_trace`)
is not checked: the checks assume a well-formed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xpspec.conformance.blame import Failure, cause_of
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.validate import TraceError, validate_trace
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["FailedCheck", "Verdict", "judge"]


@dataclass(frozen=True)
class FailedCheck:
    """One failing check, with the clauses its first violation is charged to."""

    check: str
    clauses: tuple[str, ...]
    iteration: int | None
    message: str
    downstream: bool
    """Whether it follows from the cause (another failure)."""


@dataclass(frozen=True)
class Verdict:
    """What the suite's checks say of the trace."""

    checked: tuple[str, ...]
    """The checks that ran, in the suite's order."""
    failures: tuple[FailedCheck, ...]
    """The failing ones, in the suite's order."""
    malformed: str = ""
    """Why the trace is malformed ("" if it is not; then no check ran)."""

    @property
    def cause(self) -> FailedCheck | None:
        """The failure the others follow from (``None`` if nothing fails)."""
        return next((f for f in self.failures if not f.downstream), None)


def _runs(check: Check, scenario: Scenario, capabilities: Sequence[str] | None) -> bool:
    needed = (check.capability, *check.requires)
    return (
        check.capability == scenario.kind
        and check.applies(scenario)
        and not check.name.startswith("deterministic")
        and (capabilities is None or all(n in capabilities for n in needed))
    )


def judge(
    scenario: Scenario,
    trace: Trace,
    reference: Callable[[Scenario], Trace],
    rerun: Callable[[Scenario], Trace] | None = None,
    capabilities: Sequence[str] | None = None,
) -> Verdict:
    """Run the checks of ``scenario`` on ``trace``. ``reference`` gives the reference trace of
    a scenario, ``rerun`` another run of the adapter (``None``: there is no adapter to ask);
    with ``capabilities`` (the adapter's), checks of observables it lacks do not run."""
    try:
        validate_trace(scenario, trace)
    except TraceError as exc:
        return Verdict((), (), str(exc))

    def no_rerun(other: Scenario) -> Trace:
        raise Unsupported("explain has one trace and no adapter to run another")

    context = Context(reference, rerun or no_rerun)
    order = {c.id: i for i, c in enumerate(ClauseRegistry.load().clauses)}
    checked: list[str] = []
    found: list[tuple[Failure, str]] = []
    for check in ALL_CHECKS:
        if not _runs(check, scenario, capabilities):  # a check needing a rerun: Unsupported
            continue
        try:
            check.verify(scenario, trace, context)
        except CheckFailure as exc:
            charged = (exc.clause,) if exc.clause in check.clauses else check.clauses
            failure = Failure(
                check.name,
                charged,
                check.kind == "exact",
                exc.iteration,
                min(order.get(c, len(order)) for c in charged),
                exc.diverged,
            )
            found.append((failure, str(exc)))
        except Unsupported:
            continue  # the check needed a run the adapter cannot make: not applicable
        checked.append(check.name)
    cause = cause_of([f for f, _ in found]) if found else None
    failures = tuple(
        FailedCheck(f.check, f.charged, f.iteration, message, f is not cause)
        for f, message in found
    )
    return Verdict(tuple(checked), failures)
