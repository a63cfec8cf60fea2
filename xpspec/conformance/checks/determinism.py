"""The check of clause ``trace.deterministic``: a second run of the same scenario, from
scratch, gives the same bytes (capabilities ``trainer``, ``replay``, ``learner`` and
``relabel``)."""

from __future__ import annotations

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["check_deterministic"]


def check_deterministic(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """trace.deterministic: a second run of the same scenario gives the same bytes."""
    again = ctx.fresh(scenario)
    a, b = trace.to_jsonl(), again.to_jsonl()
    if a != b:
        first = (
            next(i for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())) if x != y)
            if a.splitlines() != b.splitlines()[: len(a.splitlines())]
            else 0
        )
        raise CheckFailure(
            f"second run of the same scenario (first differing line {first})",
            a.splitlines()[first : first + 1],
            b.splitlines()[first : first + 1],
        )
