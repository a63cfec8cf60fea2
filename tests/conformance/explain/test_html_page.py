"""The HTML page: self-contained, a timeline per trace with a mark per event and lane, the
divergence and the clause, and everything from a trace shown inert."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

from tests.conformance.explain.perturb import (
    extra_update,
    reference,
    store_one_iteration_later,
    with_events,
)
from xpspec.conformance.explain import explain, render_html
from xpspec.protocol.trace import Trace


class Page(HTMLParser):
    """The elements of a page (tag, attributes, the timeline they are in) and its texts."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], str]] = []
        self.titles: list[str] = []
        self._timeline = ""
        self._in_title = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "svg" and "data-timeline" in values:
            self._timeline = values["data-timeline"]
        self._in_title = tag == "title"
        if self._in_title:
            self.titles.append("")
        self.elements.append((tag, values, self._timeline))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._timeline = ""
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles[-1] += data

    def marks(self, timeline: str, diverged: bool = False) -> list[dict[str, str]]:
        return [
            a
            for tag, a, where in self.elements
            if tag == "g"
            and where == timeline
            and "mark" in a.get("class", "").split()
            and (not diverged or "diverged" in a["class"].split())
        ]

    def by_id(self, name: str) -> dict[str, str]:
        (found,) = [a for _, a, _ in self.elements if a.get("id") == name]
        return found


def _page(name: str, events: list[Any] | None = None, **header: Any) -> tuple[Page, str, Trace]:
    scenario, trace = reference(name)
    perturbed = with_events(trace, list(trace.events) if events is None else events, **header)
    x = explain(scenario, perturbed, trace, name=name, subject="t", against="r")
    text = render_html(x)
    return Page(text), text, perturbed


def _kinds(marks: list[dict[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for mark in marks:
        counts[mark["data-kind"]] = counts.get(mark["data-kind"], 0) + 1
    return counts


def test_each_timeline_has_its_lanes_and_a_mark_per_event_and_lane() -> None:
    page, _, _ = _page("plain-u2-b3")
    for timeline in ("trace", "reference"):
        lanes = {
            a["data-lane"]
            for t, a, w in page.elements
            if w == timeline and a.get("class") == "lane"
        }
        assert lanes == {"env 0", "env 1", "env 2", "trainer"}
        counts = _kinds(page.marks(timeline))
        # 20 vector steps and 20 stores of 3 envs; per iteration a call, an update, two hooks
        assert {k: counts[k] for k in ("env_step", "store", "train_call", "update", "hook")} == {
            "env_step": 60,
            "store": 60,
            "train_call": 10,
            "update": 10,
            "hook": 20,
        }
        assert counts["window"] > 0 and counts["run_end"] == 1
    assert page.by_id("headline")["class"] == "headline ok"
    assert not page.marks("trace", diverged=True)


def test_a_late_store_is_ringed_in_the_reference_with_its_clause() -> None:
    _, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    where = store_one_iteration_later(events, iteration=4, env=0)
    page, _, _ = _page("delayed-mixed-b3", events)
    divergence = page.by_id("divergence")
    assert (divergence["data-event"], divergence["data-shape"]) == (str(where), "missing")
    assert page.by_id("clause")["data-clauses"] == "preprocess.delayed-per-env"
    ringed = page.marks("reference", diverged=True)
    assert [(m["data-kind"], m["data-lane"], m["data-event"]) for m in ringed] == [
        ("store", "env 0", str(where))
    ]
    assert not page.marks("trace", diverged=True)  # the trace has nothing there to ring
    lines = [w for t, a, w in page.elements if t == "g" and a.get("class") == "divergence"]
    assert lines == ["trace", "reference"]
    columns = [w for t, a, w in page.elements if t == "g" and a.get("class") == "column diverged"]
    assert columns == ["trace", "reference"]


def test_an_extra_update_is_ringed_in_the_trace() -> None:
    _, trace = reference("plain-u2-b3")
    events = list(trace.events)
    where = extra_update(events, call=3)
    page, _, _ = _page("plain-u2-b3", events)
    ringed = page.marks("trace", diverged=True)
    assert {(m["data-kind"], m["data-event"]) for m in ringed if m["data-lane"] == "trainer"} == {
        ("update", str(where)),
        ("hook", str(where + 1)),
    }
    assert not page.marks("reference", diverged=True)
    assert page.by_id("clause")["data-clauses"] == "train.updates-per-call"
    assert _kinds(page.marks("trace"))["update"] == _kinds(page.marks("reference"))["update"] + 1


_SCRIPT = "<script>alert(1)</script>"
_IMG = '<img src=x onerror="alert(2)">'


def test_markup_from_a_trace_renders_inert() -> None:
    scenario, trace = reference("exclude-episodes")
    events = list(trace.events)
    first = next(n for n, e in enumerate(events) if e.kind == "exclude")
    events[first] = replace(events[first], reason=_SCRIPT + "\n\x1b[31m")
    bad = with_events(trace, events, producer=_IMG, stopped="</title>" + _SCRIPT)
    x = explain(scenario, bad, trace, name=_IMG, subject=_SCRIPT, against="<b>ref</b>")
    text = render_html(x)
    page = Page(text)
    tags = {tag for tag, _, _ in page.elements}
    assert "script" not in tags and "img" not in tags and "b" not in tags
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert not [k for _, a, _ in page.elements for k in a if k.startswith("on")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    # the reason is shown as text, in the tooltip of the exclude marks, escapes visible
    assert any(_SCRIPT + "\\n\\x1b[31m" in title for title in page.titles)
    assert any(_IMG in title for title in page.titles)  # the page's title names the scenario


def test_the_page_loads_nothing() -> None:
    _, text, _ = _page("delayed-mixed-b3")
    page = Page(text)
    assert not [k for _, a, _ in page.elements for k in a if k in ("src", "href")]
    assert {tag for tag, _, _ in page.elements}.isdisjoint({"script", "link", "iframe", "object"})
    assert set(re.findall(r"https?://[^\s\"']+", text)) == {"http://www.w3.org/2000/svg"}
    (policy,) = [a for t, a, _ in page.elements if a.get("http-equiv") == "Content-Security-Policy"]
    assert policy["content"].startswith("default-src 'none'")
