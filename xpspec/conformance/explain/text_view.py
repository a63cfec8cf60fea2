"""The explanation for a terminal (``xpspec explain --format text``).

Per column (iteration, draw), one line per lane: a character per slot, so the marks of one
event line up across lanes (see :mod:`.legend` for the characters). The column of the first
divergence is marked ``>``, a caret points at its slot, and the reference's lanes of that
column follow for comparison. Then the divergence and the charged clause are spelled out.
Every string from a trace or an adapter is shown with its control characters escaped.
"""

from __future__ import annotations

import textwrap

from xpspec.conformance.explain.describe import clean, describe
from xpspec.conformance.explain.explanation import Explanation
from xpspec.conformance.explain.legend import LEGEND, symbol
from xpspec.conformance.explain.summary import (
    envs_text,
    headline,
    message_lines,
    shape_text,
    where_text,
)
from xpspec.conformance.explain.timeline import TRAINER, Column, Lane, Timeline

__all__ = ["AROUND", "WIDTH", "render_text"]

WIDTH = 100
"""The width prose (a clause's statement) is wrapped to."""


def _wrap(text: str, first: str, rest: str) -> list[str]:
    """``text`` filled to :data:`WIDTH` on spaces (never inside a word or a clause id)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _lane_name(lane: Lane) -> str:
    return "trainer" if lane is TRAINER else f"env {lane}"


def _lane_lines(timeline: Timeline, column: Column, lanes: list[Lane], width: int) -> list[str]:
    lines = []
    for lane in lanes:
        cells = [" "] * column.slots
        for mark in timeline.marks_of(column.first_event, column.stop_event):
            if mark.lane == lane:
                cells[mark.slot - column.first_slot] = symbol(mark)
        row = "".join(cells).rstrip() or "-"
        lines.append(f"  {_lane_name(lane):<{width}}{row}")
    return lines


def _caret(timeline: Timeline, column: Column, index: int, width: int) -> str:
    slot = timeline.slot_of[index] if index < len(timeline.slot_of) else column.stop_slot
    return " " * (2 + width + slot - column.first_slot) + f"^ first divergence (event #{index})"


AROUND = 2
"""Columns (iterations, draws) shown on each side of the divergence's; the page shows all."""


def _shown(count: int, here: int | None, diverged: bool) -> range:
    """The columns the text shows: all without a divergence, those within :data:`AROUND` of
    the divergence's column, or the last ones when the trace ends before the divergence."""
    if not diverged:
        return range(count)
    if here is None:
        return range(max(0, count - AROUND), count)
    return range(max(0, here - AROUND), min(count, here + AROUND + 1))


def _left_out(t: Timeline, first: int, last: int) -> str:
    """The line that stands for columns ``first`` .. ``last`` (inclusive) left out."""
    span = clean(t.columns[first].label)
    if last > first:
        span += f" to {clean(t.columns[last].label)}"
    return f"  … {span} left out ({last - first + 1}; the page shows every one)"


def _timeline_lines(x: Explanation, lanes: list[Lane], width: int) -> list[str]:
    d = x.divergence
    t, ref = x.timeline, x.reference_timeline
    here = t.column_of[d.index] if d is not None and d.index < len(t.column_of) else None
    shown = _shown(len(t.columns), here, d is not None)
    lines = []
    if shown and shown.start > 0:
        lines.append(_left_out(t, 0, shown.start - 1))
    for c in shown:
        column = t.columns[c]
        lines.append(f"{'>' if c == here else ' '} {clean(column.label)}")
        lines.extend(_lane_lines(t, column, lanes, width))
        if d is not None and c == here:
            lines.append(_caret(t, column, d.index, width))
            lines.extend(_reference_lines(ref, d.index, lanes, width))
    if shown and shown.stop < len(t.columns):
        lines.append(_left_out(t, shown.stop, len(t.columns) - 1))
    if d is not None and here is None:
        lines.append("> (the trace ends here)")
        lines.extend(_reference_lines(ref, d.index, lanes, width))
    return lines


def _reference_lines(ref: Timeline, index: int, lanes: list[Lane], width: int) -> list[str]:
    if not ref.columns:
        return ["  reference: (no events)"]
    c = ref.column_of[index] if index < len(ref.column_of) else len(ref.columns) - 1
    column = ref.columns[c]
    lines = [f"  reference, {clean(column.label)}:"]
    lines.extend(_lane_lines(ref, column, lanes, width))
    if index < len(ref.column_of):
        lines.append(_caret(ref, column, index, width))
    return lines


def _divergence_lines(x: Explanation) -> list[str]:
    d = x.divergence
    if d is None:
        return ["no divergence: " + shape_text(x)]
    lines = [
        f"first divergence: {where_text(x, d)}",
        f"  {shape_text(x)}",
        f"  expected: {describe(d.expected)}",
        f"  actual:   {describe(d.actual)}",
    ]
    if d.shape == "differs" and d.envs and d.fields and "kind" not in d.fields:
        lines.append(f"  in the rows of {envs_text(d.envs)}")
    return lines


def _verdict_lines(x: Explanation) -> list[str]:
    v = x.verdict
    if v.malformed:
        return [f"the trace is malformed, so no check ran: {clean(v.malformed)}"]
    broke = [
        line
        for name, error in v.broken
        for line in [f"check {name} broke and judged nothing:", *_indented(error)]
    ]
    cause = v.cause
    if cause is None:
        return [f"no check fails ({len(v.checked)} checks ran)", *broke]
    at = f", iteration {cause.iteration}" if cause.iteration is not None else ""
    lines = [f"clause: {', '.join(cause.clauses)} (charged by check {cause.check}{at})"]
    for clause in x.clauses:
        statement = f"{clause.id} ({clause.level}): {' '.join(clause.statement.split())}"
        lines.extend(_wrap(statement, "  ", "    "))
    lines.extend(f"    {line}" for line in message_lines(f"{cause.check}: {cause.message}"))
    downstream = [f for f in v.failures if f.downstream]
    if downstream:
        names = ", ".join(f"{f.check} [{', '.join(f.clauses)}]" for f in downstream)
        text = f"downstream of it ({len(downstream)}): {names}"
        lines.extend(_wrap(text, "  ", "    "))
    for f in v.independent:
        lines.append(f"also failing on its own: {', '.join(f.clauses)} (check {f.check})")
        lines.extend(f"    {line}" for line in message_lines(f"{f.check}: {f.message}"))
    return [*lines, *broke]


def _indented(message: str) -> list[str]:
    return [f"    {line}" for line in message_lines(message)]


def render_text(x: Explanation) -> str:
    """The whole explanation as text (lines end with a newline)."""
    lanes: list[Lane] = [*sorted(set(x.timeline.lanes) | set(x.reference_timeline.lanes))]
    lanes.append(TRAINER)
    width = max(len(_lane_name(lane)) for lane in lanes) + 2
    legend = _wrap("marks: " + ", ".join(f"{s.symbol} {s.label}" for s in LEGEND), "", "  ")
    lines = [
        f"xpspec explain: scenario {clean(x.scenario)}",
        f"  trace:     {clean(x.subject)}",
        f"  reference: {clean(x.against)}",
        *legend,
        *_timeline_lines(x, lanes, width),
        "",
        *_divergence_lines(x),
        *_verdict_lines(x),
        "",
        headline(x),
    ]
    return "\n".join(lines) + "\n"
