"""Figures for the documentation, drawn by the code of ``xpspec explain``.

Where prose struggles, a specification page shows a figure: a run's timeline as ``xpspec
explain`` lays it out (:func:`timeline_panel`: one lane per env and one for the trainer,
iterations across, the same marks, optionally with rows of values under the lanes such as the
effective iteration count), or a buffer's cells (:func:`cells_panel`: one strip of cells per
env, spans under them for windows or chunks, markers above them such as the write head).
:func:`render_figure` renders panels, the legend of the marks they use and a caption as one
HTML ``<figure>`` with inline SVG and its own scoped style, from the templates the explain
page uses, with autoescaping on. The output holds no blank line, so it can stand in a Markdown
page as a raw HTML block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from xpspec.conformance.explain.html_page import environment
from xpspec.conformance.explain.layout import Drawing, Placed, draw
from xpspec.conformance.explain.legend import LEGEND
from xpspec.conformance.explain.timeline import build_timeline
from xpspec.protocol.trace import Trace

__all__ = [
    "Cell",
    "CellDrawing",
    "CellStrip",
    "CellStyle",
    "Marker",
    "Panel",
    "Span",
    "SpanStyle",
    "cells_panel",
    "render_figure",
    "timeline_panel",
]

TEMPLATE = "figure.html.j2"

CellStyle = Literal["item", "empty", "kept", "untrained"]
SpanStyle = Literal["window", "invalid", "chunk"]

_CELL = 46
"""Width of one cell of a strip."""
_CELL_HEIGHT = 34
_LEVEL = 14
"""Height of one level of spans."""
_MARKER = 26
"""Height above a strip for its markers."""


@dataclass(frozen=True)
class Cell:
    """One cell of a strip: a slot of a buffer, say, with two lines of text."""

    top: str
    bottom: str = ""
    style: CellStyle = "item"


@dataclass(frozen=True)
class Span:
    """A bracket under cells ``first … last`` of a strip (``last`` may be below ``first``
    for a span that wraps around the strip's end, drawn in two pieces)."""

    first: int
    last: int
    label: str = ""
    style: SpanStyle = "window"


@dataclass(frozen=True)
class Marker:
    """A labelled arrow above one cell of a strip."""

    cell: int
    label: str


@dataclass(frozen=True)
class CellStrip:
    """One strip of cells (an env's ring), with its spans and markers."""

    label: str
    cells: tuple[Cell, ...]
    spans: tuple[Span, ...] = ()
    markers: tuple[Marker, ...] = ()


@dataclass(frozen=True)
class _PlacedCell:
    x: float
    y: float
    cell: Cell


@dataclass(frozen=True)
class _PlacedSpan:
    x1: float
    x2: float
    y: float
    label: str
    style: str
    open_left: bool
    open_right: bool


@dataclass(frozen=True)
class _PlacedStrip:
    label: str
    y: float
    cells: tuple[_PlacedCell, ...]
    spans: tuple[_PlacedSpan, ...]
    markers: tuple[tuple[float, float, str], ...]


@dataclass(frozen=True)
class CellDrawing:
    """Cell strips placed for the template."""

    width: float
    height: float
    strips: tuple[_PlacedStrip, ...]
    cell_width: float = _CELL
    cell_height: float = _CELL_HEIGHT


@dataclass(frozen=True)
class Panel:
    """One titled drawing of a figure: a timeline or cell strips."""

    title: str
    kind: Literal["timeline", "cells"]
    drawing: Drawing | CellDrawing
    kinds: frozenset[str] = frozenset()
    """The kinds of marks a timeline shows (for the legend)."""


def timeline_panel(
    title: str,
    trace: Trace,
    rows: Mapping[str, Mapping[int, str]] | None = None,
    lanes: Sequence[int] | None = None,
) -> Panel:
    """``trace`` laid out as ``xpspec explain`` lays it out, with ``rows`` of values under
    the lanes (label -> iteration -> value; blank where an iteration has none); ``lanes``
    (the envs) defaults to those the trace names, so that two panels can share theirs."""
    timeline = build_timeline(trace.events)
    per_column = {
        label: [
            values.get(int(c.label.removeprefix("iteration ")), "")
            if c.label.startswith("iteration ")
            else ""
            for c in timeline.columns
        ]
        for label, values in (rows or {}).items()
    }
    drawing = draw(timeline, list(lanes or timeline.lanes), rows=per_column)
    return Panel(title, "timeline", drawing, frozenset(m.kind for m in drawing.marks))


def _levels(spans: Sequence[Span], size: int) -> list[int]:
    """A level per span so that spans of one level never share a cell."""
    taken: list[set[int]] = []
    out = []
    for span in spans:
        covered = {(span.first + i) % size for i in range((span.last - span.first) % size + 1)}
        level = next((n for n, used in enumerate(taken) if not used & covered), len(taken))
        if level == len(taken):
            taken.append(set())
        taken[level] |= covered
        out.append(level)
    return out


def cells_panel(title: str, strips: Sequence[CellStrip], left: float = 76) -> Panel:
    """Strips of cells one under the other, each with its spans (stacked in levels) under it
    and its markers above it."""
    placed = []
    y = 8.0
    width = left
    for strip in strips:
        y += _MARKER
        cells = tuple(_PlacedCell(left + i * _CELL, y, cell) for i, cell in enumerate(strip.cells))
        width = max(width, left + len(strip.cells) * _CELL + 8)
        levels = _levels(strip.spans, len(strip.cells))
        spans = []
        for span, level in zip(strip.spans, levels):
            sy = y + _CELL_HEIGHT + 8 + level * _LEVEL
            wraps = span.last < span.first
            pieces = (
                [(span.first, len(strip.cells) - 1), (0, span.last)]
                if wraps
                else [(span.first, span.last)]
            )
            for n, (a, b) in enumerate(pieces):
                spans.append(
                    _PlacedSpan(
                        left + a * _CELL + 3,
                        left + (b + 1) * _CELL - 3,
                        sy,
                        span.label if n == 0 else "",
                        span.style,
                        wraps and n == 1,
                        wraps and n == 0,
                    )
                )
        markers = tuple((left + m.cell * _CELL + _CELL / 2, y, m.label) for m in strip.markers)
        placed.append(_PlacedStrip(strip.label, y, cells, tuple(spans), markers))
        y += _CELL_HEIGHT + 8 + (max(levels, default=-1) + 1) * _LEVEL + 6
    return Panel(title, "cells", CellDrawing(width + 60, y, tuple(placed)))


def _legend(kinds: frozenset[str]) -> list[Placed]:
    """The legend entries of the marks shown (one per style that any shown kind uses)."""
    return [
        Placed(s.kind, s.shape, s.colour, s.filled, 9, 10, s.label, -1, "", "", False)
        for s in LEGEND
        if s.on_page and s.kind in kinds
    ]


def render_figure(name: str, panels: Sequence[Panel], caption: str) -> str:
    """The figure as one HTML ``<figure>`` element without blank lines (see the module
    docstring); every text in it is escaped."""
    kinds = frozenset().union(*(p.kinds for p in panels))
    html = (
        environment()
        .get_template(TEMPLATE)
        .render(name=name, panels=panels, caption=caption, legend=_legend(kinds))
    )
    return "\n".join(line for line in html.splitlines() if line.strip()) + "\n"
