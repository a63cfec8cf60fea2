"""The suite's checks on one trace, ranked as a run ranks them: which clause the trace breaks.

The checks that concern the scenario run on the trace as a run's blame runs them
(:func:`xpspec.conformance.failing.check_trace`): the determinism checks are left out (they run
the adapter again from scratch), and so is every check that needs another run of the adapter
when there is none to ask. The failures are ranked by :func:`xpspec.conformance.blame.cause_of`:
the first is the cause, the clause to fix; those that follow from it
(:func:`xpspec.conformance.blame.follows`) are downstream of it. A malformed trace
(:func:`xpspec.conformance.validate.validate_trace`) is not checked: the checks assume a
well-formed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xpspec.conformance.blame import cause_of, follows
from xpspec.conformance.checks.base import Context
from xpspec.conformance.failing import check_trace
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
    cause_check: str = ""
    """The check whose failure is the cause, as :func:`xpspec.conformance.blame.cause_of`
    ranks them ("" if nothing fails)."""
    broken: tuple[tuple[str, str], ...] = ()
    """The checks that broke instead of judging the trace, each with its error: they neither
    pass nor fail it."""

    @property
    def cause(self) -> FailedCheck | None:
        """The failure the others follow from, if they follow from one (``None`` if nothing
        fails). Failures that do not follow from it (two learner outputs, say) are not
        downstream of it, and each is its own."""
        return next((f for f in self.failures if f.check == self.cause_check), None)

    @property
    def independent(self) -> tuple[FailedCheck, ...]:
        """The failures that neither are the cause nor follow from it: each is a failure of
        its own (:func:`xpspec.conformance.blame.follows`)."""
        return tuple(f for f in self.failures if f.check != self.cause_check and not f.downstream)


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

    checked = check_trace(scenario, trace, Context(reference, rerun or no_rerun), capabilities)
    found = checked.failures
    cause = cause_of([f for f, _ in found]) if found else None
    failures = tuple(
        FailedCheck(
            f.check, f.charged, f.iteration, message, cause is not None and follows(f, cause)
        )
        for f, message in found
    )
    return Verdict(
        checked.checks,
        failures,
        cause_check="" if cause is None else cause.check,
        broken=checked.broken,
    )
