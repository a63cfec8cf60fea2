"""The page of a version sweep, rendered from a fixture sweep (tests/conformance/sweep_fixture.py):
its releases with the reason of the one that did not run, the changes (a finding appearing or
disappearing, with the release), a column per release that ran with per clause its outcome,
links that resolve, the matrix page's link to it, and adapter text kept inert."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conformance.compliance_site.dom import Node, parse
from tests.conformance.compliance_site.fixture import EVIL, every_outcome
from tests.conformance.compliance_site.test_render import _inert
from tests.conformance.sweep_fixture import FIXED, GONE, NEW, SAME, write_sweep
from xpspec.conformance.compliance_site import (
    build_matrix,
    build_sweep_page,
    render_docs_page,
    render_sweep_page,
    sweep_links,
)
from xpspec.conformance.sweeps import load_sweep, record_unavailable, summaries


def _page(tmp_path: Path) -> tuple[str, Node]:
    text = render_sweep_page(build_sweep_page(load_sweep(write_sweep(tmp_path))))
    return text, parse(text)


def test_the_releases_table_lists_every_release_and_why_one_did_not_run(tmp_path: Path) -> None:
    text, page = _page(tmp_path)
    assert text.startswith("---\nhide:") and "\n# Version sweep: fw\n" in text
    rows = page.find("table", "runs").find("tbody").find_all("tr")
    assert [r.attrs["data-column"] for r in rows] == ["fw 1.0.0", "fw 2.0.0", "fw 2.1.0"]
    assert "INCOMPLETE RUN (adapter-unavailable)" in rows[0].text
    assert rows[0].find("div", "why").text == (
        "adapter 'fw' cannot run: ImportError: cannot import name 'Algorithm' from 'fw' "
        "(site-packages/fw/__init__.py)"
    )
    assert "INCOMPLETE" not in rows[1].text + rows[2].text
    # the complete releases' tallies: 2.0.0 has two findings and a failure
    tally = {b.classes[1]: b.text.split()[-1] for b in rows[1].find_all("span", "badge")}
    assert tally["o-finding"] == "2" and tally["o-fail"] == "1"


def test_the_changes_name_the_release_where_a_finding_appeared_or_disappeared(
    tmp_path: Path,
) -> None:
    _, page = _page(tmp_path)
    table = page.find("table", "changes")
    rows = table.find("tbody").find_all("tr")
    got = [(r.attrs["data-clause"], r.attrs["data-kind"], r.find_all("td")[0].text) for r in rows]
    assert got == [
        (GONE, "disappeared", "2.1.0"),
        (NEW, "appeared", "2.1.0"),
        (FIXED, "changed", "2.1.0"),
    ]
    assert rows[0].find_all("td")[3].text == "finding disappeared in 2.1.0"
    assert rows[1].find_all("td")[3].text == "finding appeared in 2.1.0"
    before, after = rows[0].find_all("td")[1:3]
    assert "o-finding" in before.find("span", "badge").classes and "in 2.0.0" in before.text
    assert "o-pass" in after.find("span", "badge").classes
    assert "2 of the 3 changes are a finding" in page.text
    for r in rows:  # each change links to its clause's row
        assert page.by_id(r.find("a").attrs["href"].removeprefix("#")) is not None


def test_each_clause_has_its_outcome_on_each_release_that_ran(tmp_path: Path) -> None:
    _, page = _page(tmp_path)
    matrix = page.find("table", "matrix")
    heads = matrix.find("thead").find_all("th")[1:]
    assert [h.attrs["data-column"] for h in heads] == ["fw 2.0.0", "fw 2.1.0"]
    outcomes = {
        clause: [td.attrs["data-o"] for td in page.by_id(f"m-{clause}").find_all("td")]  # type: ignore[union-attr]
        for clause in (GONE, NEW, FIXED, SAME)
    }
    assert outcomes == {
        GONE: ["finding", "pass"],
        NEW: ["pass", "finding"],
        FIXED: ["fail", "pass"],
        SAME: ["finding", "finding"],
    }
    assert len(matrix.find("tbody").find_all("tr")) == len(build_matrix(every_outcome()).rows)


def test_every_link_on_the_page_resolves(tmp_path: Path) -> None:
    """Cells and headers link to details on the page itself (the release that did not run
    has its section too), clause ids to the spec pages two folders up."""
    _, page = _page(tmp_path)
    local = spec = 0
    for a in page.find_all("a"):
        href = a.attrs["href"]
        if href.startswith("#"):
            assert page.by_id(href[1:]) is not None, href
            local += 1
        else:
            assert re.fullmatch(r"\.\./\.\./(compliance\.md|spec/[a-z-]+\.md#[a-z.-]+)", href), href
            spec += href.startswith("../../spec/")
    assert local > 10 and spec > 10
    section = page.by_id("details-fw-1-0-0")
    assert section is not None
    assert "Not run (adapter-unavailable): adapter 'fw' cannot run" in page.text
    detail = page.by_id(f"fw-2-0-0.{FIXED}")
    assert detail is not None and detail.find("pre", "expected").text == "1"


def test_the_matrix_page_links_each_sweep_with_its_releases(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path))
    links = sweep_links(summaries([sweep]))
    page = parse(render_docs_page(build_matrix(every_outcome()), links))
    (item,) = page.find("ul", "sweeps").find_all("li")
    assert item.find("a").attrs["href"] == "compliance/sweeps/fw.md"
    assert item.text == "fw: Fw 1.0.0 (adapter-unavailable), 2.0.0, 2.1.0"
    assert "Version sweeps" not in render_docs_page(build_matrix(every_outcome()))


def test_a_sweep_with_no_release_that_ran_says_so(tmp_path: Path) -> None:
    record_unavailable("fw", "Fw", "1.0.0", "does not install", tmp_path / "fw")
    page = parse(render_sweep_page(build_sweep_page(load_sweep(tmp_path / "fw"))))
    assert "No release ran: the reasons are above." in page.text
    assert "Fewer than two releases ran" in page.text
    assert page.find_all("table", "matrix") == []


def test_markup_and_script_in_a_sweep_render_inert(tmp_path: Path) -> None:
    out = write_sweep(tmp_path)
    for path in out.glob("*.json"):
        data = json.loads(path.read_text())
        data["implementation"].update(notes=EVIL, framework=EVIL, run_message=EVIL)
        for cell in data["cells"].values():
            cell["message"] = EVIL
            cell["text"] = EVIL
        path.write_text(json.dumps(data))
    text = render_sweep_page(build_sweep_page(load_sweep(out)))
    _inert(text)
    assert parse(text).text.count(EVIL) >= 10
