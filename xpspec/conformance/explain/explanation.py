"""One explanation: a trace and its reference laid out as timelines, where they part, and the
clause the suite's checks charge the trace with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xpspec.conformance.clauses import Clause, ClauseRegistry
from xpspec.conformance.explain.divergence import Divergence, first_divergence
from xpspec.conformance.explain.timeline import Timeline, build_timeline
from xpspec.conformance.explain.verdict import Verdict, judge
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True)
class Explanation:
    """What ``xpspec explain`` shows. The names (``scenario``, ``subject``, ``against``) say
    where the traces came from, for the reader."""

    scenario: str
    subject: str
    """The trace under test: ``adapter 'sb3'``, ``trace t.jsonl``."""
    against: str
    """The reference: ``committed vector NAME``, ``refimpl's run``, ``trace r.jsonl``."""
    trace: Trace
    reference: Trace
    timeline: Timeline
    reference_timeline: Timeline
    divergence: Divergence | None
    verdict: Verdict
    clauses: tuple[Clause, ...]
    """The clauses of the cause, as the registry states them."""

    @property
    def where(self) -> str:
        """The column of the divergence (``iteration 3``, ``draw 1``), or ""."""
        d = self.divergence
        if d is None:
            return ""
        if d.actual is not None:
            return self.timeline.column_label(d.index)
        return self.reference_timeline.column_label(d.index)


def explain(
    scenario: Scenario,
    trace: Trace,
    reference: Trace,
    *,
    name: str,
    subject: str,
    against: str,
    rerun: Callable[[Scenario], Trace] | None = None,
    capabilities: Sequence[str] | None = None,
    reference_of: Callable[[Scenario], Trace] | None = None,
) -> Explanation:
    """Explain ``trace`` of ``scenario`` against ``reference``. The checks take ``reference``
    as the reference of ``scenario`` and ``reference_of`` (default: the reference
    implementation's run) as that of any other scenario a check asks about."""

    def reference_for(other: Scenario) -> Trace:
        if other == scenario:
            return reference
        if reference_of is not None:
            return reference_of(other)
        from xpspec.refimpl.adapter import RefimplAdapter

        run: Callable[[Scenario], Trace] = getattr(RefimplAdapter(), f"run_{other.kind}")
        return run(other)

    verdict = judge(scenario, trace, reference_for, rerun, capabilities)
    registry = ClauseRegistry.load()
    cause = verdict.cause
    clauses = tuple(registry[c] for c in (cause.clauses if cause else ()) if c in registry)
    return Explanation(
        name,
        subject,
        against,
        trace,
        reference,
        build_timeline(trace.events),
        build_timeline(reference.events),
        first_divergence(trace.events, reference.events),
        verdict,
        clauses,
    )
