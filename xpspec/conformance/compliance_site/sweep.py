"""The compliance site's view of a version sweep (:mod:`xpspec.conformance.sweeps`): one
page per swept adapter with its releases (how each run ended, with the reason of one the
adapter could not drive), per clause the outcome on each release that ran, and the releases
where a clause's outcome changed — a finding appearing or disappearing.

The releases that ran are the columns of an ordinary :class:`~.model.Matrix` (named
``ADAPTER VERSION``), so the page shows them with the matrix's own parts; everything in it
comes from committed runs, which adapters supplied, and is escaped by the templates.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.compliance_site.links import DETAILS_DIR
from xpspec.conformance.compliance_site.model import Matrix, build_matrix, slugs
from xpspec.conformance.sweeps import Change, Sweep, changes, sweep_compliance

__all__ = ["SWEEPS_DIR", "SweepLink", "SweepPage", "build_sweep_page", "sweep_links"]

SWEEPS_DIR = "sweeps"
"""The folder of the sweep pages, inside the details pages' folder
(``compliance/sweeps/<slug>.md``)."""


@dataclass(frozen=True)
class SweepPage:
    """What a sweep's page shows."""

    adapter: str
    slug: str
    framework: str
    releases: Matrix
    """Every release's run (columns only): the runs table."""
    matrix: Matrix
    """The releases that ran, oldest first: per clause the outcome on each."""
    changes: tuple[Change, ...]
    """Per clause, the releases where its outcome changed (clause order, then release)."""

    @property
    def unavailable(self) -> tuple[tuple[str, str], ...]:
        """(release, reason) of each release that did not run to completion."""
        return tuple((c.version, c.message) for c in self.releases.columns if not c.complete)

    @property
    def findings(self) -> tuple[Change, ...]:
        """The changes where a finding appeared or disappeared."""
        return tuple(c for c in self.changes if c.kind != "changed")


@dataclass(frozen=True)
class SweepLink:
    """What the matrix page says of a sweep: its page and each release with its run status."""

    adapter: str
    slug: str
    framework: str
    releases: tuple[tuple[str, str], ...]
    """(version, how its run ended), oldest first."""

    @property
    def path(self) -> str:
        """The page's source in the docs (and its link from the matrix page)."""
        return f"{DETAILS_DIR}/{SWEEPS_DIR}/{self.slug}.md"


def build_sweep_page(sweep: Sweep, registry: ClauseRegistry | None = None) -> SweepPage:
    """The page of ``sweep``; clause statements from ``registry`` (default: the packaged)."""
    from xpspec.conformance.report import compliance_from_columns

    registry = registry or ClauseRegistry.load()
    everything = compliance_from_columns(
        [
            {
                "implementation": {
                    **r.run.column["implementation"],
                    "adapter": f"{sweep.adapter} {r.version}",
                },
                "cells": {},
            }
            for r in sweep.runs
        ],
        [],
    )
    matrix = build_matrix(sweep_compliance(sweep, registry.ids()), registry)
    ran = {c.name: c for c in matrix.columns}
    releases = [ran.get(c.name, c) for c in build_matrix(everything, registry).columns]
    return SweepPage(
        adapter=sweep.adapter,
        slug=slugs([sweep.adapter])[sweep.adapter],
        framework=sweep.framework,
        releases=Matrix(tuple(releases), ()),
        matrix=matrix,
        changes=tuple(changes(sweep, registry.ids())),
    )


def sweep_links(summaries: list[dict[str, object]]) -> tuple[SweepLink, ...]:
    """The links of the sweeps a compliance document summarises (its ``sweeps``,
    :func:`xpspec.conformance.sweeps.summaries`), slugs as their pages have them."""
    names = [str(s["adapter"]) for s in summaries]
    slug_of = {n: slugs([n])[n] for n in names}
    return tuple(
        SweepLink(
            adapter=str(s["adapter"]),
            slug=slug_of[str(s["adapter"])],
            framework=str(s.get("framework") or ""),
            releases=tuple(
                (str(r["version"]), str(r["run"]))
                for r in s.get("runs", [])  # type: ignore[attr-defined]
            ),
        )
        for s in summaries
    )
