"""The compliance site's view of a compliance document: its columns (who ran, with which
versions, when), its rows (one per clause, with the clause's statement) and, for every cell
that is not a pass, the detail a reader needs to act on it: the message, the expected and
actual values, the scenario's JSON and the commands that reproduce and explain it.

Everything here comes from a compliance document
(:func:`xpspec.conformance.report.compliance_from_columns`), which an adapter's run supplied:
names, notes, messages and scenarios are untrusted text, kept as text; the templates escape
them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.compliance_site.outcomes import LOOKS, cell_label, cell_note, classify

__all__ = ["TITLE_LIMIT", "Cell", "Column", "Detail", "Matrix", "Row", "build_matrix", "slugs"]

_SHOWS_TRACE = ("fail", "should-miss", "downstream", "deviation", "finding")
"""Outcomes of a run that produced a trace, which ``xpspec explain`` can draw (an adapter that
broke left none, and an n/a cell's adapter refused the scenario)."""


@dataclass(frozen=True)
class Column:
    """One implementation: the matrix's column header and the runs table's row."""

    name: str
    slug: str
    """``name`` reduced to lower-case letters, digits and hyphens, unique in the matrix: the
    file name of its details page and the prefix of its anchors."""
    framework: str
    version: str
    started: str
    ended: str
    run: str
    suite: str
    spec: str
    profile: str
    notes: str
    versions: tuple[tuple[str, str], ...]
    tally: tuple[tuple[str, int], ...]
    """(outcome key, number of cells) in legend order, outcomes with no cell left out."""
    message: str = ""
    """Why a run that is not complete is not (e.g. why the adapter could not run)."""

    @property
    def date(self) -> str:
        """The day the run started (``YYYY-MM-DD``), or "" when it is not known."""
        return self.started[:10] if re.match(r"\d{4}-\d\d-\d\d", self.started) else ""

    @property
    def complete(self) -> bool:
        return self.run == "complete"


@dataclass(frozen=True)
class Detail:
    """What a cell that is not a pass stands for."""

    clause: str
    column: Column
    key: str
    label: str
    check: str
    level: str
    variant: str
    message: str
    """The message's text: its lines before the reproduction block, or its first line."""
    reasons: tuple[str, ...]
    expected: str
    actual: str
    downstream_of: str
    scenario: str
    scenario_json: str
    scenario_source: str
    """Where ``scenario_json`` comes from: ``run`` (the run's own message), ``catalogue``
    (the scenario of that name in this xpspec's catalogue) or "" (no JSON is known)."""
    repro: str
    explain: str


@dataclass(frozen=True)
class Cell:
    column: Column
    key: str
    label: str
    """The cell's words (:func:`~xpspec.conformance.compliance_site.outcomes.cell_label`)."""
    note: str
    """Its variant or the clause it follows from
    (:func:`~xpspec.conformance.compliance_site.outcomes.cell_note`), shown under the outcome."""
    title: str
    detail: Detail | None


@dataclass(frozen=True)
class Row:
    clause: str
    area: str
    level: str
    statement: str
    page: str
    cells: tuple[Cell, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        """The outcome keys of its cells, each once, in legend order."""
        present = {c.key for c in self.cells}
        return tuple(lk.key for lk in LOOKS if lk.key in present)


@dataclass(frozen=True)
class Matrix:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]

    @property
    def areas(self) -> tuple[tuple[str, int], ...]:
        """(area, number of clauses) in row order."""
        return tuple(Counter(r.area for r in self.rows).items())

    @property
    def keys(self) -> tuple[str, ...]:
        """The outcome keys of the matrix's cells, in legend order."""
        present = {k for r in self.rows for k in r.keys}
        return tuple(lk.key for lk in LOOKS if lk.key in present)

    def scenarios(self, column: Column | None = None) -> dict[str, str]:
        """The distinct scenario JSON texts of :meth:`details`, each with the id of the one
        block that shows it (``scenario-1``, …, in order of first appearance)."""
        texts = dict.fromkeys(d.scenario_json for d in self.details(column) if d.scenario_json)
        return {text: f"scenario-{n}" for n, text in enumerate(texts, 1)}

    def details(self, column: Column | None = None) -> list[Detail]:
        """The details of the cells that are not a pass (of one column), row by row."""
        return [
            c.detail
            for r in self.rows
            for c in r.cells
            if c.detail is not None and (column is None or c.column == column)
        ]


def slugs(names: list[str]) -> dict[str, str]:
    """Each name's slug (see :attr:`Column.slug`); a slug already taken gets ``-2``, ``-3``…"""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "implementation"
        slug, n = base, 1
        while slug in taken:
            n += 1
            slug = f"{base}-{n}"
        taken.add(slug)
        out[name] = slug
    return out


def build_matrix(doc: Mapping[str, Any], registry: ClauseRegistry | None = None) -> Matrix:
    """The site's view of the compliance document ``doc``; clause statements from
    ``registry`` (default: the packaged one), a clause it does not know has none."""
    from xpspec.conformance.catalog import CATALOG

    registry = registry or ClauseRegistry.load()
    implementations = list(doc["implementations"])
    slug_of = slugs([str(i["adapter"]) for i in implementations])
    pages = doc.get("pages", {})
    columns = []
    for i in implementations:
        name = str(i["adapter"])
        tally = Counter(classify(row[name]) for row in doc["clauses"].values() if name in row)
        versions = i.get("versions") or {}
        columns.append(
            Column(
                name=name,
                slug=slug_of[name],
                framework=_text(i.get("framework")),
                version=_text(i.get("framework_version")),
                started=_text(i.get("started")),
                ended=_text(i.get("ended")),
                run=_text(i.get("run")) or "complete",
                suite=_text(i.get("suite")),
                spec=_text(i.get("spec")),
                profile=_text(i.get("profile")),
                notes=_text(i.get("notes")),
                versions=tuple((str(k), _text(v)) for k, v in sorted(versions.items()))
                if isinstance(versions, Mapping)
                else (),
                tally=tuple((lk.key, tally[lk.key]) for lk in LOOKS if tally[lk.key]),
                message=_text(i.get("run_message")),
            )
        )
    rows = []
    known = {c.id: c for c in registry.clauses}
    for cid, row in doc["clauses"].items():
        clause = known.get(cid)
        cells = []
        for col in columns:
            cell = row.get(col.name)
            if cell is None:
                continue
            key = classify(cell)
            detail = None if key == "pass" else _detail(cid, col, cell, CATALOG)
            cells.append(Cell(col, key, cell_label(cell), cell_note(cell), _title(cell), detail))
        rows.append(
            Row(
                clause=cid,
                area=cid.split(".", 1)[0],
                level=clause.level if clause else "",
                statement=clause.statement if clause else "",
                page=str(pages.get(cid) or (clause.page if clause else "")),
                cells=tuple(cells),
            )
        )
    return Matrix(tuple(columns), tuple(rows))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


TITLE_LIMIT = 300
"""How many characters of its message or reasons a cell's hover text shows (its detail has
them all)."""


def _title(cell: Mapping[str, Any]) -> str:
    """A cell's hover text: an n/a cell's reasons, else its message's first line."""
    reasons = cell.get("reasons") or []
    text = "\n".join(map(str, reasons)) if reasons else _text(cell.get("message"))
    return text if len(text) <= TITLE_LIMIT else text[: TITLE_LIMIT - 1] + "…"


def _detail(cid: str, col: Column, cell: Mapping[str, Any], catalog: Mapping[str, Any]) -> Detail:
    from xpspec.protocol.scenario import scenario_to_json

    key = classify(cell)
    scenario = _text(cell.get("scenario"))
    scenario_json, source = _text(cell.get("scenario_json")), "run"
    if not scenario_json:
        known = catalog.get(scenario)
        scenario_json, source = (scenario_to_json(known), "catalogue") if known else ("", "")
    repro = explain = ""
    adapter = shlex.quote(col.name)
    target = {"run": "s.json", "catalogue": shlex.quote(scenario)}.get(source, "")
    if target:
        repro = f"xpspec trace {target} --adapter {adapter}"
        if key in _SHOWS_TRACE:
            explain = f"xpspec explain {target} --adapter {adapter}"
    return Detail(
        clause=cid,
        column=col,
        key=key,
        label=cell_label(cell),
        check=_text(cell.get("check")),
        level=_text(cell.get("level")) or "MUST",
        variant=_text(cell.get("variant")),
        message=_text(cell.get("text")) or _text(cell.get("message")),
        reasons=tuple(map(str, cell.get("reasons") or ())),
        expected=_text(cell.get("expected")),
        actual=_text(cell.get("actual")),
        downstream_of=_text(cell.get("downstream_of")),
        scenario=scenario,
        scenario_json=_indented(scenario_json),
        scenario_source=source,
        repro=repro,
        explain=explain,
    )


def _indented(text: str) -> str:
    """A scenario's JSON laid out over lines (JSON still: it can be saved as the ``s.json``
    of the repro command); text that is not a JSON object is kept as it is."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
