"""The explanation as one self-contained HTML page: inline SVG timelines of the trace and of
its reference, the divergence and the charged clause; no script, no external asset.

The page is rendered from ``explain.html.j2`` with Jinja2's autoescaping on, so markup in
anything a trace or an adapter supplied (names, reasons, header strings) is shown as text;
the page's content security policy also forbids scripts and fetches should a value ever
reach it unescaped.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import jinja2

from xpspec.conformance.explain.describe import clean, describe
from xpspec.conformance.explain.explanation import Explanation
from xpspec.conformance.explain.layout import Placed, draw
from xpspec.conformance.explain.legend import LEGEND
from xpspec.conformance.explain.summary import envs_text, headline, shape_text
from xpspec.conformance.explain.timeline import Lane

__all__ = ["TEMPLATE", "environment", "render_html"]

TEMPLATE = "explain.html.j2"


def _source(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of this package (the page, the figures and the timeline macros they
    share), with autoescaping on."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_source),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _template() -> jinja2.Template:
    return environment().get_template(TEMPLATE)


def _legend() -> list[Placed]:
    return [
        Placed(s.kind, s.shape, s.colour, s.filled, 9, 10, s.label, -1, "", "", False)
        for s in LEGEND
        if s.on_page
    ]


def render_html(x: Explanation) -> str:
    """The page (see the module docstring)."""
    d = x.divergence
    lanes: list[Lane] = [*sorted(set(x.timeline.lanes) | set(x.reference_timeline.lanes))]
    at = None if d is None else d.index
    ours = None if d is None or d.shape == "missing" else range(d.index, d.index + d.span)
    theirs = None if d is None or d.shape == "extra" else range(d.index, d.index + d.span)
    context: dict[str, Any] = {
        "x": x,
        "d": d,
        "cause": x.verdict.cause,
        "downstream": [f for f in x.verdict.failures if f.downstream],
        "independent": list(x.verdict.independent),
        "broken": list(x.verdict.broken),
        "headline": headline(x),
        "shape_text": shape_text(x),
        "where": f"{x.where}, {envs_text(d.envs)}, event #{d.index}" if d else "",
        "divergence_title": f"first divergence: event #{d.index}" if d else "",
        "expected": describe(d.expected) if d else "",
        "actual": describe(d.actual) if d else "",
        "header": [(clean(k), clean(v)) for k, v in sorted(x.trace.header.items())],
        "legend": _legend(),
        "trace_drawing": draw(x.timeline, lanes, ours, at),
        "reference_drawing": draw(x.reference_timeline, lanes, theirs, at),
    }
    return _template().render(context)
