"""Render the compliance site's pages from ``templates/`` with Jinja2, autoescaping on.

- :func:`render_standalone`: one self-contained HTML page (``compliance.html`` of
  ``xpspec report``), with a content security policy that admits only its own script;
- :func:`render_docs_page`: the docs site's matrix page (``docs/compliance.md``);
- :func:`render_details_page`: an implementation's details page of the docs site, which the
  docs hook builds from the committed runs;
- :func:`render_sweep_page`: the page of an adapter's version sweep, which the docs hook
  builds from the committed sweeps.

The inline script (``filter.js``) only hides rows and dims cells: every page is complete and
readable without it, its filter form staying hidden.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jinja2
import markupsafe
from markupsafe import Markup

from xpspec.conformance.compliance_site.links import Links
from xpspec.conformance.compliance_site.model import Column, Matrix
from xpspec.conformance.compliance_site.outcomes import LOOKS, look
from xpspec.conformance.compliance_site.sweep import SweepLink, SweepPage

__all__ = [
    "SCRIPT",
    "render_details_page",
    "render_docs_page",
    "render_standalone",
    "render_sweep_page",
]

_TEMPLATES = resources.files(__package__).joinpath("templates")


def _asset(name: str) -> str:
    return _TEMPLATES.joinpath(name).read_text(encoding="utf-8")


SCRIPT = _asset("filter.js").strip()
"""The pages' one script: the matrix's filters."""


def _escape(value: Any) -> Any:
    """Autoescaping, and backticks and tildes as character references: the docs build's
    Markdown (pymdownx.superfences) turns a fence of either inside an HTML block into a code
    block, so a message with a line of ``` would otherwise come out as something else."""
    if isinstance(value, Markup) or value is None:
        return value
    text = str(markupsafe.escape(value))
    return Markup(text.replace("`", "&#96;").replace("~", "&#126;"))


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_asset),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(look=look, looks=LOOKS)
    return env


def _context(m: Matrix, kind: str) -> dict[str, Any]:
    return {
        "m": m,
        "links": Links(kind),  # type: ignore[arg-type]
        "rows": {r.clause: r for r in m.rows},
        "css": Markup(_asset("site.css").strip()),
        "script": Markup(SCRIPT),
    }


def render_standalone(m: Matrix) -> str:
    """The standalone page of ``m``."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    context = _context(m, "standalone") | {"script_hash": f"sha256-{digest}"}
    return _env().get_template("standalone.html.j2").render(context)


def render_docs_page(m: Matrix, sweeps: Sequence[SweepLink] = ()) -> str:
    """The docs site's matrix page of ``m`` (Markdown around one HTML block), linking to
    the pages of ``sweeps``."""
    context = _context(m, "matrix") | {"sweeps": tuple(sweeps)}
    return _env().get_template("docs_page.md.j2").render(context)


def render_sweep_page(page: SweepPage) -> str:
    """The docs site's page of a version sweep (``compliance/sweeps/<slug>.md``)."""
    context = _context(page.matrix, "sweep") | {"s": page}
    return _env().get_template("sweep_page.md.j2").render(context)


def render_details_page(m: Matrix, column: Column) -> str:
    """The docs site's details page of one column of ``m``."""
    context = _context(m, "details")
    only = Matrix((column,), ())
    return (
        _env().get_template("details_page.md.j2").render(context | {"column": column, "only": only})
    )
