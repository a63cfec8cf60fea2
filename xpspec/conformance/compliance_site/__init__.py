"""The compliance site: the matrix of a compliance document as a page in the spirit of
wpt.fyi's and Bowtie's reports — a header with each implementation's framework, version and
run dates, a legend of the outcomes (colour and symbol), the clause column kept in view with
each clause's statement on hover, filters by area and outcome, and per cell that is not a
pass a detail with its message, expected and actual values, scenario and commands.

:func:`build_matrix` makes the view (:mod:`.model`), :func:`build_sweep_page` that of a version
sweep (:mod:`.sweep`), the ``render_*`` functions the pages (:mod:`.render`), :class:`Links`
says where their links go (:mod:`.links`).
"""

from xpspec.conformance.compliance_site.links import DETAILS_DIR, Links, rewrite_md_links
from xpspec.conformance.compliance_site.model import (
    Cell,
    Column,
    Detail,
    Matrix,
    Row,
    build_matrix,
    slugs,
)
from xpspec.conformance.compliance_site.outcomes import LOOKS, Look, cell_label, classify, look
from xpspec.conformance.compliance_site.render import (
    SCRIPT,
    render_details_page,
    render_docs_page,
    render_standalone,
    render_sweep_page,
)
from xpspec.conformance.compliance_site.sweep import (
    SWEEPS_DIR,
    SweepLink,
    SweepPage,
    build_sweep_page,
    sweep_links,
)

__all__ = [
    "DETAILS_DIR",
    "LOOKS",
    "SCRIPT",
    "SWEEPS_DIR",
    "Cell",
    "Column",
    "Detail",
    "Links",
    "Look",
    "Matrix",
    "Row",
    "SweepLink",
    "SweepPage",
    "build_matrix",
    "build_sweep_page",
    "cell_label",
    "classify",
    "look",
    "render_details_page",
    "render_docs_page",
    "render_standalone",
    "render_sweep_page",
    "rewrite_md_links",
    "slugs",
    "sweep_links",
]
