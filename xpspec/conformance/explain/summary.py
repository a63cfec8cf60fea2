"""The sentences both renderings use: where the divergence is, what happened there, and
which clause is charged."""

from __future__ import annotations

from collections.abc import Sequence

from xpspec.conformance.explain.describe import clean
from xpspec.conformance.explain.divergence import Divergence
from xpspec.conformance.explain.explanation import Explanation

__all__ = ["envs_text", "headline", "message_lines", "shape_text", "where_text"]


def envs_text(envs: Sequence[int]) -> str:
    """``env 0``, ``envs 0, 2``, or ``the trainer`` when no env is concerned."""
    if not envs:
        return "the trainer"
    return ("env " if len(envs) == 1 else "envs ") + ", ".join(str(e) for e in envs)


def _kinds(events: Sequence[object]) -> str:
    names = [str(getattr(e, "kind", "?")) for e in events]
    return ", ".join(names)


def shape_text(x: Explanation) -> str:
    """What happened at the divergence, in one sentence."""
    d = x.divergence
    if d is None:
        return "the trace equals the reference, event for event"
    plural = "s" if d.span > 1 else ""
    if d.shape == "missing":
        lacking = x.reference.events[d.index : d.index + d.span]
        return f"the trace lacks {d.span} event{plural} of the reference here ({_kinds(lacking)})"
    if d.shape == "extra":
        extra = x.trace.events[d.index : d.index + d.span]
        return f"the trace has {d.span} event{plural} the reference has not ({_kinds(extra)})"
    if "kind" in d.fields:
        return "the event is of another kind than the reference's"
    return "the event differs from the reference's in " + ", ".join(d.fields)


def where_text(x: Explanation, d: Divergence) -> str:
    """``iteration 3, env 0, event #27``."""
    return f"{x.where}, {envs_text(d.envs)}, event #{d.index}"


def headline(x: Explanation) -> str:
    """The explanation in one line."""
    d = x.divergence
    part = (
        "no divergence" if d is None else f"first divergence at {where_text(x, d)}: {shape_text(x)}"
    )
    cause = x.verdict.cause
    if x.verdict.malformed:
        verdict = "the trace is malformed, no check ran"
    elif cause is None:
        verdict = f"no check fails ({len(x.verdict.checked)} ran)"
    else:
        verdict = f"clause {', '.join(cause.clauses)} (check {cause.check})"
        others = x.verdict.independent
        if others:
            verdict += "; also, on their own: " + ", ".join(
                f"{', '.join(f.clauses)} (check {f.check})" for f in others
            )
    if x.verdict.broken:
        verdict += "; broken checks: " + ", ".join(name for name, _ in x.verdict.broken)
    return f"{part}; {verdict}"


def message_lines(message: str) -> list[str]:
    """A check's message as lines, each with its control characters escaped (a line break
    inside a value from the trace cannot start a line of its own)."""
    return [clean(line) for line in message.splitlines()]
