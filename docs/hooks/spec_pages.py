"""MkDocs hook: publish the specification pages from ``spec/`` under ``spec/`` in the site.

The normative text lives in ``spec/*.md`` at the repository root (the conformance suite parses
its clauses from there); this hook adds those files to the site as if they were in the docs
directory, so the pages are never copied by hand and their clause anchors
(``spec/unroll.md#unroll.fractional-schedule``) are those of the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SPEC = Path(__file__).resolve().parents[2] / "spec"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for page in sorted(SPEC.glob("*.md")):
        files.append(File.generated(config, f"spec/{page.name}", abs_src_path=str(page)))
    return files


def on_serve(server: Any, config: MkDocsConfig, builder: Any) -> Any:
    server.watch(str(SPEC))
    return server
