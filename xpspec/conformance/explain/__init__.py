"""``xpspec explain``: see where a trace parts from its reference.

A trace (an adapter's run of a scenario, or a trace file) and its reference (the committed
vector of a catalogue scenario, refimpl's run, or another trace file) are laid out as
timelines, one lane per env and one for the trainer, iterations across
(:mod:`.timeline`); the first event where they differ is found (:mod:`.divergence`); and the
suite's checks, ranked as a run ranks them (:mod:`xpspec.conformance.blame`), name the clause
the trace breaks (:mod:`.verdict`). The result renders as a self-contained HTML page with
inline SVG (:mod:`.html_page`) or as text for a terminal (:mod:`.text_view`). The same
timelines, and strips of buffer cells, draw the figures of the specification's pages
(:mod:`.figure`).
"""

from xpspec.conformance.explain.divergence import Divergence, first_divergence
from xpspec.conformance.explain.explanation import Explanation, explain
from xpspec.conformance.explain.html_page import render_html
from xpspec.conformance.explain.text_view import render_text
from xpspec.conformance.explain.timeline import TRAINER, Column, Mark, Timeline, build_timeline
from xpspec.conformance.explain.verdict import FailedCheck, Verdict, judge

__all__ = [
    "TRAINER",
    "Column",
    "Divergence",
    "Explanation",
    "FailedCheck",
    "Mark",
    "Timeline",
    "Verdict",
    "build_timeline",
    "explain",
    "first_divergence",
    "judge",
    "render_html",
    "render_text",
]
