"""Where the compliance site's links point, on each of its pages.

Four pages show the matrix or its details: the standalone file ``xpspec report`` writes
(``compliance.html``: everything on one page, clause ids linking to its list of clauses),
the docs site's matrix page (``compliance.md``: clause ids linking to the spec pages, cells
to a details page per implementation, ``compliance/<slug>.md``), those details pages, and the
page of a version sweep (``compliance/sweeps/<slug>.md``: a column per release, its details on
the page itself).
The docs pages name their targets as Markdown sources (``spec/replay.md#replay.clear``);
:func:`rewrite_md_links` turns those into the built site's URLs (the docs hook calls it).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from xpspec.conformance.compliance_site.model import Detail

__all__ = ["DETAILS_DIR", "Links", "rewrite_md_links"]

DETAILS_DIR = "compliance"
"""The docs folder of the generated details pages, beside ``compliance.md``."""

PageKind = Literal["standalone", "matrix", "details", "sweep"]


@dataclass(frozen=True)
class Links:
    """The hrefs of one kind of page."""

    kind: PageKind

    def anchor(self, d: Detail) -> str:
        """The id of a detail's section: the clause on its implementation's details page,
        ``<slug>.<clause>`` on the standalone page (a slug has no dot)."""
        return d.clause if self.kind == "details" else f"{d.column.slug}.{d.clause}"

    def detail(self, d: Detail) -> str:
        if self.kind == "matrix":
            return f"{DETAILS_DIR}/{d.column.slug}.md#{d.clause}"
        return f"#{self.anchor(d)}"

    def details_page(self, slug: str) -> str:
        """An implementation's details: its page in the docs, its section here (a sweep's
        releases have theirs on the sweep's page)."""
        if self.kind == "matrix":
            return f"{DETAILS_DIR}/{slug}.md"
        return f"{slug}.md" if self.kind == "details" else f"#details-{slug}"

    def clause(self, clause: str, page: str) -> str:
        """A clause's statement: its spec page in the docs ("" when its page is not known),
        the list of clauses on the standalone page."""
        if self.kind == "standalone":
            return f"#clause-{clause}"
        if not page:
            return ""
        up = {"details": "../", "sweep": "../../"}.get(self.kind, "")
        return f"{up}spec/{page}.md#{clause}"

    def row(self, clause: str) -> str:
        """A clause's row of the matrix."""
        return f"{'../compliance.md' if self.kind == 'details' else ''}#m-{clause}"


_HREF = re.compile(r'href="(?P<path>[^":?#/][^":?#]*\.md)(?P<fragment>#[^"]*)?"')


def rewrite_md_links(
    html: str, page_src: str, url_of: Callable[[str], str | None]
) -> tuple[str, list[str]]:
    """``html`` (of the docs page built from ``page_src``) with each relative ``href`` to a
    Markdown source replaced by ``url_of(source path)``, the URL of that page relative to
    this one; and the sources ``url_of`` did not know (their links are left as they are).
    Absolute URLs, other schemes and links that are not to ``.md`` files are not touched."""
    missing: list[str] = []

    def replace(m: re.Match[str]) -> str:
        source = posixpath.normpath(posixpath.join(posixpath.dirname(page_src), m["path"]))
        url = url_of(source)
        if url is None:
            missing.append(source)
            return m[0]
        return f'href="{url}{m["fragment"] or ""}"'

    return _HREF.sub(replace, html), missing
