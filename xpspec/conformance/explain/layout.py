"""Where everything of a timeline goes on the page: pixel positions for the SVG template.

Positions depend only on slots and columns, so two timelines that agree on their first
events place them at the same ``x``: the trace and its reference, drawn one above the other,
part visibly where they diverge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xpspec.conformance.explain.describe import describe, tooltip
from xpspec.conformance.explain.legend import style_of
from xpspec.conformance.explain.timeline import TRAINER, Lane, Mark, Timeline

__all__ = [
    "GAP",
    "LANE",
    "LEFT",
    "SLOT",
    "TOP",
    "Drawing",
    "Placed",
    "PlacedColumn",
    "PlacedRow",
    "draw",
]

LEFT = 76
"""Width of the lane labels."""
SLOT = 14
"""Width of one event's slot."""
GAP = 14
"""Space before each column."""
LANE = 26
"""Height of one lane."""
TOP = 30
"""Height of the column headers."""
_CHAR = 6.5
"""About the width of one character of a column header."""


@dataclass(frozen=True)
class Placed:
    """One mark, placed and styled."""

    kind: str
    shape: str
    colour: str
    filled: bool
    x: float
    y: float
    title: str
    event: int
    lane: str
    """``env 0`` or ``trainer``."""
    variant: str
    diverged: bool
    """Whether the mark belongs to the events of the divergence."""


@dataclass(frozen=True)
class PlacedColumn:
    """One column's header and extent."""

    x: float
    width: float
    label: str
    title: str
    diverged: bool


@dataclass(frozen=True)
class PlacedRow:
    """A row of values under the lanes, one per column (a figure's ``E_k``, say)."""

    label: str
    y: float
    cells: tuple[tuple[float, str], ...]
    """(x of the column's middle, the value shown there)."""


@dataclass(frozen=True)
class Drawing:
    """One timeline as the template draws it."""

    width: float
    height: float
    lanes: tuple[tuple[str, float], ...]
    """(label, y of the lane's middle), the trainer lane last."""
    columns: tuple[PlacedColumn, ...]
    marks: tuple[Placed, ...]
    divergence_x: float | None
    """The ``x`` of the divergence's line (``None``: no divergence)."""
    rows: tuple[PlacedRow, ...] = ()
    """Rows of values under the lanes (none on ``xpspec explain``'s page)."""


def lane_label(lane: Lane) -> str:
    return "trainer" if lane is TRAINER else f"env {lane}"


def _slot_x(column: int, slot: int) -> float:
    """The middle of ``slot``, in the ``column``-th column."""
    return LEFT + column * GAP + GAP / 2 + slot * SLOT + SLOT / 2


def _fit(label: str, width: float) -> str:
    """``label`` cut (``…``) to about what ``width`` pixels hold."""
    room = max(1, int(width // _CHAR))
    return label if len(label) <= room else label[: room - 1] + "…"


def _mark_title(timeline: Timeline, mark: Mark) -> str:
    event = timeline.events[mark.event]
    return tooltip(event, mark.event, mark.rows, windows=mark.kind in ("window", "update"))


def _divergence_x(timeline: Timeline, index: int) -> float:
    """Through the slot of event ``index``; before it for an event without marks; past the
    last column when the trace has ended."""
    if index >= len(timeline.events):
        return LEFT + len(timeline.columns) * GAP + timeline.slots * SLOT + GAP / 2
    c = timeline.column_of[index]
    x = LEFT + c * GAP + GAP / 2 + timeline.slot_of[index] * SLOT
    return x + SLOT / 2 if timeline.marks_of(index) else x


def _column_title(timeline: Timeline, first: int, stop: int, label: str) -> str:
    bounds = [
        describe(e) for e in timeline.events[first:stop] if e.kind in ("iteration", "iteration_end")
    ]
    return "\n".join([label, *bounds])


def draw(
    timeline: Timeline,
    lanes: Sequence[Lane],
    diverged: range | None = None,
    at: int | None = None,
    rows: Mapping[str, Sequence[str]] | None = None,
) -> Drawing:
    """``timeline`` placed with ``lanes`` (the trainer lane is added last); the marks of the
    events in ``diverged`` are flagged, and the line of the divergence goes through event
    ``at``. ``rows`` adds, under the lanes, a row of values per label: one value per
    column, in column order."""
    order = [*lanes, TRAINER]
    y = {lane: TOP + i * LANE + LANE / 2 for i, lane in enumerate(order)}
    placed_rows = []
    for r, (label, values) in enumerate((rows or {}).items()):
        if len(values) != len(timeline.columns):
            raise ValueError(
                f"rows[{label!r}]: expected one value per column ({len(timeline.columns)}), "
                f"got {len(values)}"
            )
        middles = (
            LEFT + c * GAP + col.first_slot * SLOT + (GAP + col.slots * SLOT) / 2
            for c, col in enumerate(timeline.columns)
        )
        placed_rows.append(
            PlacedRow(
                label,
                TOP + (len(order) + r) * LANE + LANE / 2,
                tuple(zip(middles, values)),
            )
        )
    columns = tuple(
        PlacedColumn(
            LEFT + c * GAP + col.first_slot * SLOT,
            GAP + col.slots * SLOT,
            _fit(col.short, GAP + col.slots * SLOT),
            _column_title(timeline, col.first_event, col.stop_event, col.label),
            at is not None and col.first_event <= at < col.stop_event,
        )
        for c, col in enumerate(timeline.columns)
    )
    marks = []
    for mark in timeline.marks:
        style = style_of(mark)
        marks.append(
            Placed(
                mark.kind,
                style.shape,
                style.colour,
                style.filled,
                _slot_x(mark.column, mark.slot),
                y.get(mark.lane, y[TRAINER]),
                _mark_title(timeline, mark),
                mark.event,
                lane_label(mark.lane),
                mark.variant,
                diverged is not None and mark.event in diverged,
            )
        )
    width = LEFT + len(timeline.columns) * GAP + timeline.slots * SLOT + GAP
    return Drawing(
        width,
        TOP + (len(order) + len(placed_rows)) * LANE + 6,
        tuple((lane_label(lane), y[lane]) for lane in order),
        columns,
        tuple(marks),
        None if at is None else _divergence_x(timeline, at),
        tuple(placed_rows),
    )
