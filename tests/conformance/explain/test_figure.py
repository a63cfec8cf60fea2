"""Figures for the docs, drawn by explain's code: a timeline panel is explain's timeline with
rows of values under it, a cell panel draws strips with their spans and markers, and a figure
is one escaped HTML element without blank lines."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from xpspec.conformance.explain import build_timeline
from xpspec.conformance.explain.figure import (
    Cell,
    CellStrip,
    Marker,
    Span,
    cells_panel,
    render_figure,
    timeline_panel,
)
from xpspec.conformance.explain.layout import draw
from xpspec.protocol.trace import Trace
from xpspec.refimpl import EnvSpec, EpisodeDelayed, FixedSchedule, TrainerConfig, train


def _run() -> Trace:
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(2),))
    return train(
        env, TrainerConfig(num_iterations=4, unroll_length=Fraction(1)), EpisodeDelayed()
    ).trace


def test_a_timeline_panel_draws_every_mark_of_explains_timeline() -> None:
    trace = _run()
    panel = timeline_panel("delayed", trace)
    html = render_figure("f", [panel], "caption")
    assert html.count('class="mark') == len(build_timeline(trace.events).marks)
    entries = html.count("<li>")  # the legend: a style of each kind of mark shown, no other
    assert html.count("<svg") == 1 + entries and len(panel.kinds) <= entries < len(panel.kinds) * 2
    assert "exclude" not in panel.kinds and ">exclude</li>" not in html


def test_rows_of_values_sit_under_their_iterations() -> None:
    panel = timeline_panel("delayed", _run(), {"E_k": {1: "0", 3: "3/2"}})
    (row,) = panel.drawing.rows  # type: ignore[union-attr]
    assert row.label == "E_k"
    shown = [text for _, text in row.cells]
    assert shown[:4] == ["0", "", "3/2", ""] and shown[-1] == ""  # the last column is the end
    xs = [x for x, _ in row.cells]
    assert xs == sorted(xs)


def test_a_row_needs_one_value_per_column() -> None:
    timeline = build_timeline(_run().events)
    with pytest.raises(ValueError, match="one value per column"):
        draw(timeline, [0, 1], rows={"E_k": ["1"]})


def test_a_span_that_wraps_is_drawn_in_two_open_pieces() -> None:
    strip = CellStrip(
        "ring",
        tuple(Cell(str(i)) for i in range(4)),
        (Span(3, 0, "wraps"), Span(1, 2, "inside")),
        (Marker(2, "write head"),),
    )
    panel = cells_panel("ring", [strip])
    (placed,) = panel.drawing.strips  # type: ignore[union-attr]
    wrapped = [s for s in placed.spans if s.open_left or s.open_right]
    assert len(placed.spans) == 3 and len(wrapped) == 2
    assert [s.label for s in wrapped] == ["wraps", ""]
    html = render_figure("ring", [panel], "a ring")
    assert "write head" in html and html.count('class="span window"') == 3


def test_spans_that_share_a_cell_are_stacked() -> None:
    strip = CellStrip(
        "s", tuple(Cell(str(i)) for i in range(5)), (Span(0, 2), Span(2, 4), Span(3, 4))
    )
    (placed,) = cells_panel("s", [strip]).drawing.strips  # type: ignore[union-attr]
    levels = [s.y for s in placed.spans]
    assert levels[0] < levels[1] and levels[2] == levels[0]


def test_a_figure_has_no_blank_line_and_shows_markup_as_text() -> None:
    hostile = "<script>alert(1)</script>"
    strip = CellStrip(hostile, (Cell(hostile, hostile),), (Span(0, 0, hostile),))
    html = render_figure("x", [cells_panel(hostile, [strip])], hostile)
    assert "<script>" not in html and html.count("&lt;script&gt;") >= 5
    assert "\n\n" not in html and re.match(r'<figure class="xpspec-figure"', html)
