"""MkDocs hook: the compliance matrix's details pages, built from the committed runs.

``docs/compliance.md`` is generated from the committed runs in ``docs/runs/`` (``nox -s
report``); each of its cells that is not a pass links to its detail on one page per
implementation, ``compliance/<slug>.md``, which this hook renders from the same runs at build
time (they are never committed), and it links to a page per version sweep committed in
``docs/sweeps/``, ``compliance/sweeps/<slug>.md``, rendered here too. The links of these pages sit in raw HTML, which MkDocs does
not resolve, and name Markdown sources (``spec/replay.md#replay.clear``): this hook turns them
into the built site's URLs, and a link to no page of the site is a warning (an error under
``--strict``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

from xpspec.conformance.compliance_site import (
    DETAILS_DIR,
    build_matrix,
    build_sweep_page,
    render_details_page,
    render_sweep_page,
    rewrite_md_links,
    sweep_links,
)
from xpspec.conformance.runs import committed_compliance
from xpspec.conformance.sweeps import load_sweeps, summaries

RUNS = Path(__file__).resolve().parents[1] / "runs"
SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"
MATRIX_PAGE = "compliance.md"
log = logging.getLogger("mkdocs.hooks.compliance_pages")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    matrix = build_matrix(committed_compliance(RUNS))
    for column in matrix.columns:
        files.append(
            File.generated(
                config,
                f"{DETAILS_DIR}/{column.slug}.md",
                content=render_details_page(matrix, column),
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    sweeps = load_sweeps(SWEEPS)
    paths = {link.adapter: link.path for link in sweep_links(summaries(sweeps.values()))}
    for adapter, sweep in sweeps.items():
        files.append(
            File.generated(
                config,
                paths[adapter],
                content=render_sweep_page(build_sweep_page(sweep)),
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    return files


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    source = page.file.src_uri
    if source != MATRIX_PAGE and not source.startswith(f"{DETAILS_DIR}/"):
        return html

    def url_of(path: str) -> str | None:
        target = files.get_file_from_path(path)
        return None if target is None else target.url_relative_to(page.file)

    html, missing = rewrite_md_links(html, source, url_of)
    for path in sorted(set(missing)):
        log.warning(f"{source}: a link to {path}, which is no page of the site")
    return html
