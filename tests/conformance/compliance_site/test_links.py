"""Where the pages' links point, and how the docs hook turns their links to Markdown
sources into the built site's URLs."""

from __future__ import annotations

from tests.conformance.compliance_site.fixture import every_outcome
from xpspec.conformance.compliance_site import Links, build_matrix, rewrite_md_links

SITE = {"compliance.md": "compliance/", "spec/replay.md": "spec/replay/"}


def _url_of(page_dir: str):  # type: ignore[no-untyped-def]
    def url_of(source: str) -> str | None:
        url = SITE.get(source)
        if url is None:
            return None
        depth = page_dir.count("/")
        return "../" * depth + url

    return url_of


def test_links_to_markdown_sources_become_site_urls_with_their_fragment() -> None:
    html = '<a href="spec/replay.md#replay.clear">x</a><a href="#m-a.b">y</a>'
    out, missing = rewrite_md_links(html, "compliance.md", _url_of("compliance/"))
    assert out == '<a href="../spec/replay/#replay.clear">x</a><a href="#m-a.b">y</a>'
    assert missing == []


def test_a_link_from_a_details_page_resolves_against_its_folder() -> None:
    html = '<a href="../compliance.md#m-a.b">back</a>'
    out, missing = rewrite_md_links(html, "compliance/sb3.md", _url_of("compliance/sb3/"))
    assert out == '<a href="../../compliance/#m-a.b">back</a>' and missing == []


def test_a_link_to_no_page_is_reported_and_left_alone() -> None:
    html = '<a href="spec/gone.md#x">x</a>'
    out, missing = rewrite_md_links(html, "compliance.md", _url_of("compliance/"))
    assert out == html and missing == ["spec/gone.md"]


def test_absolute_and_foreign_links_are_not_touched() -> None:
    html = '<a href="https://x.org/a.md">a</a><a href="/abs.md">b</a><a href="x.html#y">c</a>'
    out, missing = rewrite_md_links(html, "compliance.md", _url_of("compliance/"))
    assert out == html and missing == []


def test_each_page_kind_links_details_and_clauses_its_own_way() -> None:
    m = build_matrix(every_outcome())
    d = m.details()[0]
    page = m.rows[0].page
    assert Links("standalone").detail(d) == f"#all.{d.clause}"
    assert Links("matrix").detail(d) == f"compliance/all.md#{d.clause}"
    assert Links("details").detail(d) == f"#{d.clause}"
    assert Links("matrix").clause("a.b", page) == f"spec/{page}.md#a.b"
    assert Links("details").clause("a.b", page) == f"../spec/{page}.md#a.b"
    assert Links("standalone").clause("a.b", page) == "#clause-a.b"
    assert Links("matrix").clause("a.b", "") == ""
    assert Links("details").row("a.b") == "../compliance.md#m-a.b"
