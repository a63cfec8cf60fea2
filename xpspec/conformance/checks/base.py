"""What a check is, and the failure it raises.

A check is a pure function of a scenario and the trace an adapter produced for it (plus, for
exact checks, the reference trace). It returns nothing when the trace conforms and raises
:class:`CheckFailure` naming what was expected and what was found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["Check", "CheckFailure", "Context"]


class CheckFailure(AssertionError):
    """A trace violates a clause: ``what`` went wrong, ``expected`` vs ``actual``.

    ``expected`` and ``actual`` are values of the one property ``what`` names (two counts,
    two lists of the same kind of thing; a list of what is missing is the actual value of a
    property whose expected value is ``[]``). A window is named as the spec names it,
    ``(env e, start s)`` with ``s`` the absolute position of its first item
    (:func:`xpspec.conformance.checks.views.window_name`), never by its offset in a ring.

    ``clause`` names which of the check's clauses the violation belongs to when the check
    covers several (an exact comparison charges its first difference to the clause of the
    field that differs); ``None`` charges all of them. ``iteration`` is the iteration in which
    the violation first shows, when the check knows it: blame ranks the failures of one
    scenario by it (the earliest violation is the cause, later ones are downstream of it).
    ``diverged`` is set by a check that compares whole event sequences (with another run of
    the adapter, or the reference): the kind of the first event that differs, which tells
    blame the stage of the pipeline where the runs part.
    """

    def __init__(
        self,
        what: str,
        expected: object,
        actual: object,
        *,
        clause: str | None = None,
        iteration: int | None = None,
        diverged: str | None = None,
    ) -> None:
        self.what, self.expected, self.actual = what, expected, actual
        self.clause, self.iteration, self.diverged = clause, iteration, diverged
        super().__init__(f"{what}\n  expected: {_short(expected)}\n  actual:   {_short(actual)}")


def _short(value: object, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


class Context:
    """What a check may ask for beyond its own trace: the reference trace of a scenario, and
    another run of the adapter under test (for checks that compare two scenarios)."""

    def __init__(
        self,
        reference: Callable[[Scenario], Trace],
        rerun: Callable[[Scenario], Trace],
        fresh: Callable[[Scenario], Trace] | None = None,
    ) -> None:
        self.reference = reference
        self.rerun = rerun
        self.fresh = fresh or rerun


@dataclass(frozen=True)
class Check:
    """One check of one or more clauses, for one capability.

    ``verify(scenario, trace, context)`` raises :class:`CheckFailure` on violation.
    ``applies(scenario)`` says whether the check concerns a scenario at all; a check that
    does not apply is not reported for that scenario.
    """

    name: str
    clauses: tuple[str, ...]
    capability: Literal[
        "env",
        "trainer",
        "replay",
        "learner",
        "relabel",
        "recurrent",
        "stack",
        "offline",
        "async",
    ]
    kind: Literal["exact", "invariant", "statistical"]
    verify: Callable[[Scenario, Trace, Context], None]
    applies: Callable[[Scenario], bool] = lambda scenario: True
    requires: tuple[str, ...] = ()
    """Observables (capabilities beyond ``capability``) the check needs the trace to have."""
    whole_trace: bool = False
    """The check judges a trace as a whole, one the framework ended early included (a second
    run must give the same bytes, stop and all); any other check that passes on a stopped run
    saw only what came before the stop, and the engine does not count it a pass."""

    def charged(self, exc: CheckFailure) -> tuple[str, ...]:
        """The clauses ``exc`` is charged to: the one its first violation names, or every
        clause of the check when it names none of them."""
        return (exc.clause,) if exc.clause in self.clauses else self.clauses
