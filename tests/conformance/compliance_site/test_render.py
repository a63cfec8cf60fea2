"""The rendered pages: header, legend, filters, matrix cells and their links, details, and
everything an adapter or a report supplied shown as text (markup and script inert)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from tests.conformance.compliance_site.dom import Node, parse
from tests.conformance.compliance_site.fixture import (
    CLAUSES,
    EVIL,
    FAIL_MESSAGE,
    MUSTS,
    OUTCOMES,
    SHOULD,
    every_outcome,
    hostile,
)
from xpspec.conformance.compliance_site import (
    LOOKS,
    SCRIPT,
    build_matrix,
    render_details_page,
    render_docs_page,
    render_standalone,
)


def _standalone(doc: dict | None = None) -> Node:
    return parse(render_standalone(build_matrix(doc or every_outcome())))


def _cell(page: Node, clause: str, column: int = 0) -> Node:
    row = page.by_id(f"m-{clause}")
    assert row is not None, clause
    return row.find_all("td")[column]


def test_the_header_names_each_implementation_with_framework_version_and_date() -> None:
    page = _standalone()
    heads = page.find("table", "matrix").find("thead").find_all("th")[1:]
    assert [h.attrs["data-column"] for h in heads] == ["all", "late"]
    assert "all-framework 1.2.3" in heads[0].text and "2026-11-27" in heads[0].text
    assert "INCOMPLETE (interrupted)" in heads[1].text and "date not recorded" in heads[1].text
    runs = page.find("table", "runs").find("tbody").find_all("tr")
    assert "2026-11-27T02:15:08+00:00" in runs[0].text and "notes of all" in runs[0].text
    assert "python 3.11.7, torch 2.13.0" in runs[0].text


def test_the_legend_has_every_outcome_with_colour_and_symbol() -> None:
    legend = _standalone().find("dl", "legend")
    badges = legend.find_all("span", "badge")
    assert [b.classes[1] for b in badges] == [f"o-{lk.key}" for lk in LOOKS]
    for badge, lk in zip(badges, LOOKS):
        assert badge.find("span", "sym").text == lk.symbol and lk.label in badge.text


def test_each_cell_shows_its_outcome_as_class_symbol_and_words() -> None:
    page = _standalone()
    for n, key in enumerate(OUTCOMES):
        td = _cell(page, MUSTS[n])
        lk = next(lk for lk in LOOKS if lk.key == key)
        assert td.classes == [f"o-{key}"] and td.attrs["data-o"] == key
        assert td.find("span", "sym").text == lk.symbol and lk.label in td.text
    assert _cell(page, SHOULD).attrs["data-o"] == "should-miss"
    assert "same-step" in _cell(page, MUSTS[1]).find("span", "note").text
    row = page.by_id(f"m-{MUSTS[0]}")
    assert row is not None and row.attrs["data-area"] == MUSTS[0].split(".")[0]


def test_the_clause_column_has_the_statement_on_hover_and_links_the_clause() -> None:
    page = _standalone()
    th = page.by_id(f"m-{CLAUSES[0]}").find("th", "clause")  # type: ignore[union-attr]
    assert th.attrs["title"].startswith("MUST ") and len(th.attrs["title"]) > 20
    assert th.find("a").attrs["href"] == f"#clause-{CLAUSES[0]}"
    assert page.by_id(f"clause-{CLAUSES[0]}") is not None


def test_every_cell_that_is_not_a_pass_links_to_its_detail_and_pass_cells_do_not() -> None:
    page = _standalone()
    for row in page.find("table", "matrix").find("tbody").find_all("tr"):
        for td in row.find_all("td"):
            links = td.find_all("a")
            if td.attrs["data-o"] == "pass":
                assert links == []
                continue
            (a,) = links
            target = page.by_id(a.attrs["href"].removeprefix("#"))
            assert target is not None and target.tag == "section", a.attrs["href"]


def test_every_anchor_on_the_standalone_page_resolves() -> None:
    page = _standalone()
    hrefs = {a.attrs["href"] for a in page.find_all("a")}
    assert hrefs and all(h.startswith("#") for h in hrefs)
    assert [h for h in hrefs if page.by_id(h[1:]) is None] == []


def test_a_failure_detail_shows_message_values_scenario_and_commands() -> None:
    page = _standalone()
    section = page.by_id(f"all.{MUSTS[list(OUTCOMES).index('fail')]}")
    assert section is not None
    assert section.find("pre", "message").text == FAIL_MESSAGE
    assert section.find("pre", "expected").text == "[(0, 0, 4)]"
    assert section.find("pre", "actual").text == "[(0, 0, 5)]"
    assert section.find("pre", "repro").text == "xpspec trace s.json --adapter all"
    assert section.find("pre", "explain").text == "xpspec explain s.json --adapter all"
    json_link = section.find("a", "scenario-json").attrs["href"]
    block = page.by_id(json_link[1:])
    assert block is not None and '"seed": 3' in block.text
    assert section.find("p", "statement").text.startswith("MUST ")


def test_a_not_applicable_detail_lists_its_reasons() -> None:
    page = _standalone()
    section = page.by_id(f"all.{MUSTS[list(OUTCOMES).index('not-applicable')]}")
    assert section is not None
    assert [li.text for li in section.find_all("li")] == [
        "unsupported: no drain",
        "declares no 'state'",
    ]
    assert section.find_all("pre", "explain") == []


def test_the_filters_are_hidden_until_the_script_shows_them() -> None:
    page = _standalone()
    form = page.find("form", "filters")
    assert "hidden" in form.attrs
    values = [i.attrs["value"] for i in form.find_all("input")]
    areas = list(dict.fromkeys(c.split(".")[0] for c in CLAUSES))
    assert values[: len(areas)] == areas
    assert set(values[len(areas) :]) == {*OUTCOMES, "should-miss"}
    (script,) = page.find_all("script")
    assert script.text == SCRIPT


def test_the_standalone_policy_admits_exactly_its_own_script() -> None:
    page = _standalone()
    policy = next(
        m.attrs["content"]
        for m in page.find_all("meta")
        if m.attrs.get("http-equiv") == "Content-Security-Policy"
    )
    (script,) = page.find_all("script")
    digest = base64.b64encode(hashlib.sha256(script.text.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy


def _inert(text: str) -> None:
    """No element or attribute that ``EVIL`` carries exists: only the page's own script."""
    page = parse(text)
    assert [s.text.strip() for s in page.find_all("script")] in ([SCRIPT], [])
    assert page.find_all("img") == []
    handlers = [(n.tag, k) for n in page.iter() for k in n.attrs if k.startswith("on")]
    assert handlers == []
    assert "<script>window" not in text and "<img" not in text


@pytest.mark.parametrize("render", ["standalone", "docs", "details"])
def test_markup_and_script_from_an_adapter_or_a_report_render_inert(render: str) -> None:
    m = build_matrix(hostile())
    text = {
        "standalone": lambda: render_standalone(m),
        "docs": lambda: render_docs_page(m),
        "details": lambda: render_details_page(m, m.columns[0]),
    }[render]()
    _inert(text)
    # and each field is there, as text
    page = parse(text)
    shown = page.text
    assert shown.count(EVIL) >= {"standalone": 10, "docs": 4, "details": 8}[render]


def test_hostile_text_reaches_no_href_but_its_own_anchors() -> None:
    m = build_matrix(hostile())
    page = parse(render_standalone(m))
    for a in page.find_all("a"):
        assert a.attrs["href"].startswith("#"), a.attrs["href"]


def test_the_docs_page_links_clauses_to_the_spec_and_cells_to_details_pages() -> None:
    m = build_matrix(every_outcome())
    text = render_docs_page(m)
    assert text.startswith("---\nhide:") and "\n# Compliance matrix\n" in text
    page = parse(text)
    th = page.by_id(f"m-{CLAUSES[0]}").find("th", "clause")  # type: ignore[union-attr]
    page_of = m.rows[0].page
    assert th.find("a").attrs["href"] == f"spec/{page_of}.md#{CLAUSES[0]}"
    details = {c.slug: parse(render_details_page(m, c)) for c in m.columns}
    linked = 0
    for a in page.find("table", "matrix").find("tbody").find_all("a"):
        href = a.attrs["href"]
        if href.startswith("spec/"):
            continue
        match = re.fullmatch(r"compliance/([a-z0-9-]+)\.md#(.+)", href)
        assert match, href
        assert details[match[1]].by_id(match[2]) is not None, href
        linked += 1
    assert linked == len(m.details())
    assert "Every clause passes." in details["late"].text


def test_a_fence_in_a_message_stays_text_in_the_docs_pages() -> None:
    """The docs build's Markdown turns a line of ``` or ~~~ into a code block even inside
    HTML: untrusted text never puts one on the page."""
    doc = hostile()
    cell = doc["clauses"][MUSTS[0]][EVIL]
    cell["text"] = "before\n```\n<b>code</b>\n~~~\nafter"
    m = build_matrix(doc)
    for text in (render_docs_page(m), render_details_page(m, m.columns[0])):
        assert "```" not in text and "~~~" not in text
    section = parse(render_details_page(m, m.columns[0])).by_id(MUSTS[0])
    assert section is not None and section.find("pre", "message").text == cell["text"]
