"""Reports: read JSON Lines runs, fold them into ``compliance.json`` and render the matrix.

A run report is a header record, one result record per check and a footer record saying
how the run ended. Only a complete run (a footer with status ``complete``) makes a matrix
column, unless the caller allows incomplete ones (they are then marked so).

The matrix has one row per clause and one column per implementation; a cell is the worst
outcome of that clause's checks for that implementation (fail > the adapter's own failures
— crash, timeout, resource, error — > deviation > pass > not applicable).

Clause ids the spec has since split (aliases, ``old id -> parts``) keep older reports usable:
a result under an old id stands for those of its parts the run has no result of, and
:func:`diff_reports` compares an old document's cell with each part in a newer one.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpspec.conformance.messages import failure_parts
from xpspec.conformance.outcomes import STATUSES

__all__ = [
    "REPORT_FORMAT",
    "IncompleteRun",
    "RunReport",
    "build_compliance",
    "column",
    "column_name",
    "compliance_from_columns",
    "diff_reports",
    "header_record",
    "read_run",
    "render_html",
    "render_markdown",
    "should_miss",
    "summarise",
]

_RANK = {
    "fail": 7,
    "crash": 6,
    "timeout": 5,
    "resource": 4,
    "error": 3,
    "deviation": 2,
    "pass": 1,
    "cut-short": 0.5,
    "not-applicable": 0,
}
assert set(_RANK) == set(STATUSES)


REPORT_FORMAT = "xpspec-report/2"


def header_record(adapter: str, described: dict[str, Any], **run: Any) -> dict[str, Any]:
    """The first record of a run report: the suite and spec versions, the adapter (as
    ``described`` by its info, or with ``adapter_error``), and the run's settings (profile,
    isolation, time limits, command line, start time, versions)."""
    from xpspec.conformance import __version__, spec_version

    return {
        "type": "header",
        "format": REPORT_FORMAT,
        "suite": f"xpspec {__version__}",
        "spec": spec_version(),
        "adapter": adapter,
        **described,
        **run,
    }


def column_name(header: dict[str, Any]) -> str:
    """The name a run's column goes by: the name the adapter gives itself in ``info()``, not
    the way the command line reached it (``package.module:Class``, ``exec:COMMAND``); the
    command line's when the run never got an answer from ``info()``."""
    return str(header.get("name") or header["adapter"])


class IncompleteRun(ValueError):
    """A run report that does not hold a complete run (and was not allowed to)."""


@dataclass(frozen=True)
class RunReport:
    """One run: its header, its result records, and its footer (None: the run died)."""

    path: Path
    header: dict[str, Any]
    results: list[dict[str, Any]]
    footer: dict[str, Any] | None

    @property
    def status(self) -> str:
        """How the run ended: the footer's status, or ``died`` when there is no footer."""
        return str(self.footer.get("status", "complete")) if self.footer is not None else "died"

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def problem(self) -> str:
        """Why the run is not complete, in words ("" when it is)."""
        if self.footer is None:
            return (
                f"{self.path}: the run did not finish (no footer record: the runner was "
                f"killed or crashed after {len(self.results)} results)"
            )
        if not self.complete:
            message = self.footer.get("message") or ""
            return f"{self.path}: the run ended {self.status}" + (f": {message}" if message else "")
        return ""


def read_run(path: Path, allow_incomplete: bool = False) -> RunReport:
    """The records of one run; errors name the file and line. A run that is not complete
    raises :class:`IncompleteRun` unless ``allow_incomplete``."""
    header: dict[str, Any] | None = None
    footer: dict[str, Any] | None = None
    results = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the report ({exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "header":
            header = record
        elif kind == "result":
            missing = [k for k in ("check", "clauses", "status") if k not in record]
            if missing or record["status"] not in _RANK:
                raise ValueError(
                    f"{path}:{n}: expected a result with check, clauses and a status in "
                    f"{list(STATUSES)}, got {line[:200]!r}"
                )
            results.append(record)
        elif kind == "footer":
            footer = record
        else:
            raise ValueError(
                f"{path}:{n}: expected a header, result or footer record, got {line[:200]!r}"
            )
    if header is None:
        raise ValueError(f"{path}: no header record: is this an xpspec run report?")
    run = RunReport(path, header, results, footer)
    if not run.complete and not allow_incomplete:
        raise IncompleteRun(f"{run.problem()}; pass --allow-incomplete to use it anyway")
    return run


_IMPLEMENTATION_KEYS = (
    "framework",
    "framework_version",
    "suite",
    "spec",
    "profile",
    "versions",
    "notes",
)


def column(run: RunReport, aliases: dict[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """One run's column of the matrix: ``implementation`` (who ran, with what, when, how the
    run ended) and ``cells``, per clause the run has a result of, its worst outcome (with an
    n/a cell's most frequent reasons (and ``owed`` when a check of it is n/a for a capability
    whose ``[[absent]]`` entry is ``not-yet``: a row is owed), and a cell that is not a pass the
    parts of its message
    the compliance site shows: :func:`xpspec.conformance.messages.failure_parts`).
    ``aliases`` as for :func:`build_compliance`."""
    aliases = aliases or {}
    header, results = run.header, run.results
    implementation = {
        "adapter": column_name(header),
        **{k: header.get(k) for k in _IMPLEMENTATION_KEYS},
        "run": run.status,
        "started": str(header.get("started", "")),
        "ended": str((run.footer or {}).get("ended", "")),
    }
    worst: dict[str, dict[str, Any]] = {}
    why_not: dict[str, Counter[str]] = {}
    owed: set[str] = set()
    named = {c for r in results for c in r["clauses"]}
    for r in results:
        for clause in _folded(r["clauses"], named, aliases):
            if r["status"] == "not-applicable":
                why_not.setdefault(clause, Counter())[_first_line(r["message"])] += 1
                if r.get("absent") == "not-yet":
                    owed.add(clause)
            cell = {
                "status": r["status"],
                "check": r["check"],
                "scenario": r["scenario"],
                "message": _first_line(r["message"]),
                "full_message": r["message"],
                "variant": r.get("variant", ""),
                "level": r.get("level", "MUST"),
            }
            stopped_at = _stopped_at(r, clause, aliases)
            if stopped_at:
                cell.update(
                    status="cut-short",
                    stopped_at=stopped_at,
                    message=f"no verdict: the check stopped at the declared deviation of "
                    f"{stopped_at} before judging this clause",
                    variant="",
                )
            if r["status"] == "fail":
                cause = _downstream(r, clause, aliases)
                if cause:
                    cell["downstream_of"] = cause
            cur = worst.get(clause)
            if cur is None or _severity(cell) > _severity(cur):
                worst[clause] = cell
    for clause, cell in worst.items():
        if cell["status"] == "not-applicable":
            cell["reasons"] = [why for why, _ in why_not[clause].most_common(_REASONS)]
            if clause in owed:
                cell["owed"] = True
        elif cell["status"] != "pass":
            cell.update(failure_parts(cell.pop("full_message")).fields())
        cell.pop("full_message", None)
    return {"implementation": implementation, "cells": worst}


def build_compliance(
    runs: list[Path],
    clause_ids: list[str],
    pages: dict[str, str] | None = None,
    allow_incomplete: bool = False,
    aliases: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """The compliance document: implementations, and per clause the worst outcome each.
    ``pages`` maps clause ids to their spec page, for links in the rendered matrix. An
    incomplete run is refused unless ``allow_incomplete`` (its column is then marked).
    ``aliases`` maps clause ids the spec has split to their parts: a result of an older run
    under such an id counts for each part the run has no result of its own for."""
    columns = [column(read_run(path, allow_incomplete), aliases) for path in runs]
    return compliance_from_columns(columns, clause_ids, pages, aliases)


def compliance_from_columns(
    columns: list[dict[str, Any]],
    clause_ids: list[str],
    pages: dict[str, str] | None = None,
    aliases: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """The compliance document of columns (:func:`column`, or committed ones), in their order.
    A cell kept under a clause id the spec has since split stands for each part the column
    has no cell of; a clause no cell names is not applicable, for want of a check."""
    aliases = aliases or {}
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for col in columns:
        own = dict(col["cells"])
        for old, parts in aliases.items():
            if old in col["cells"]:
                for part in parts:
                    own.setdefault(part, col["cells"][old])
        cells[col["implementation"]["adapter"]] = own
    matrix = {
        cid: {
            name: cells[name].get(
                cid,
                {"status": "not-applicable", "message": _NO_CHECK, "reasons": [_NO_CHECK]},
            )
            for name in cells
        }
        for cid in clause_ids
    }
    return {
        "format": "xpspec-compliance/1",
        "implementations": [col["implementation"] for col in columns],
        "clauses": matrix,
        "pages": dict(pages or {}),
    }


_REASONS = 3
"""How many of an n/a cell's reasons the matrix keeps (the most frequent first)."""
_NO_CHECK = "no check of this clause ran on this implementation"


def _first_line(message: str) -> str:
    return message.splitlines()[0] if message else ""


def _folded(clauses: list[str], named: set[str], aliases: dict[str, tuple[str, ...]]) -> list[str]:
    """The matrix rows a result of ``clauses`` counts for: an alias id (an older run's name
    for clauses since split) counts for itself when it is still a clause, and for each of its
    parts that no result of the run (``named``) names."""
    rows: list[str] = []
    for clause in clauses:
        parts = aliases.get(clause, (clause,))
        rows += [p for p in parts if (p == clause or p not in named) and p not in rows]
    return rows


def _downstream(
    result: dict[str, Any], clause: str, aliases: dict[str, tuple[str, ...]] | None = None
) -> str:
    """For a failure and one of its check's clauses: the clause the failure follows from when
    it is not charged to ``clause`` itself ("" when ``clause`` is the cause). A failure
    charged to another clause of the same check (an exact comparison whose first difference
    belongs elsewhere) is downstream of that clause for ``clause``; a failure charged to an
    alias of ``clause`` (an older run's name for it) is its own."""
    if result.get("downstream_of"):
        return str(result["downstream_of"])
    charged = result.get("charged") or result["clauses"]
    if clause in charged or any(clause in (aliases or {}).get(c, ()) for c in charged):
        return ""
    return str(charged[0])


def _stopped_at(
    result: dict[str, Any], clause: str, aliases: dict[str, tuple[str, ...]] | None = None
) -> str:
    """For a deviation no variant reproduces (a finding, or one accepted on its reason alone)
    and one of its check's clauses: the clause its first violation is charged to when that is
    another ("" otherwise). The check stopped there and never judged ``clause``, so the
    outcome is no verdict on ``clause``. A deviation a variant reproduces is the variant's,
    and a result without ``charged`` (an older run) is charged to every clause."""
    if result["status"] != "deviation" or result.get("variant") not in ("finding", ""):
        return ""
    return _downstream(result, clause, aliases) if result.get("charged") else ""


def should_miss(result: dict[str, Any]) -> bool:
    """A failure of a check whose clauses are all SHOULD-level: a warning, never a finding,
    and it fails a run only under ``--strict``."""
    return result["status"] == "fail" and result.get("level", "MUST") == "SHOULD"


def _severity(result: dict[str, Any]) -> tuple[float, bool]:
    """Outcomes ordered worst last: a MUST-level failure, the adapter's own failures, a
    SHOULD miss, a deviation (a finding — a deviation no variant reproduces — above a
    reproduced one), a pass, a run cut short by a declared finding (no verdict: a cell shows it
    only when no run of the clause's checks went to its end), not applicable."""
    finding = result["status"] == "deviation" and result.get("variant") == "finding"
    rank = 2.5 if should_miss(result) else _RANK[result["status"]]
    if rank == _RANK["fail"] and result.get("downstream_of"):
        rank -= 0.5  # a failure that follows from another clause's is not this clause's own
    return rank, finding


def render_markdown(doc: dict[str, Any], *, links: bool = False) -> str:
    """The matrix as a Markdown table, clause ids unlinked (a report written anywhere but
    the docs need not have the spec pages beside it). With ``links``: the docs site's page
    of the matrix instead (:func:`xpspec.conformance.compliance_site.render_docs_page`), whose clause
    ids link to the spec pages and whose cells link to their details (and which links to the
    pages of the version sweeps ``doc`` summarises under ``sweeps``)."""
    from xpspec.conformance.compliance_site import (
        build_matrix,
        cell_label,
        render_docs_page,
        sweep_links,
    )

    if links:
        return render_docs_page(build_matrix(doc), sweep_links(doc.get("sweeps", [])))
    names = [i["adapter"] for i in doc["implementations"]]
    lines = [
        "# Compliance matrix",
        "",
        "Generated by `xpspec report` from real runs; do not edit.",
        "",
        "`FAIL ↓ c`: the clause fails only as a consequence of clause `c`'s failure on the same "
        "run (blame: the earliest failure in pipeline order is the cause).",
        "",
    ]
    for i in doc["implementations"]:
        legend = f" — {i['notes']}" if i.get("notes") else ""
        if i.get("run", "complete") != "complete":
            legend += f" — INCOMPLETE RUN ({i['run']})"
        lines.append(
            f"- **{i['adapter']}**: {i['framework']} {i['framework_version']} (suite {i['suite']}, spec {i['spec']}, profile {i['profile']}){legend}"
        )
    lines += ["", "| clause | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    notes: dict[tuple[str, tuple[str, ...]], int] = {}
    for cid, row in doc["clauses"].items():
        cells = []
        for n in names:
            text = cell_label(row[n])
            if row[n]["status"] == "not-applicable" and row[n].get("reasons"):
                key = (n, tuple(row[n]["reasons"]))
                text += f" [{notes.setdefault(key, len(notes) + 1)}]"
            cells.append(text)
        lines.append(f"| `{cid}` | " + " | ".join(cells) + " |")
    if notes:
        lines += [
            "",
            "## Why not applicable",
            "",
            "`n/a [k]`: no check of the clause could run on that implementation, for the "
            "reasons of note k (the most frequent first, at most "
            f"{_REASONS}; the run report has every scenario's).",
            "",
        ]
        for (name, reasons), k in notes.items():
            lines.append(f"{k}. **{name}**: " + "; ".join(_escape_md(r) for r in reasons))
    return "\n".join(lines) + "\n"


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def render_html(doc: dict[str, Any]) -> str:
    """The matrix as one self-contained HTML page: the compliance site's standalone page
    (:func:`xpspec.conformance.compliance_site.render_standalone`), details and clauses included."""
    from xpspec.conformance.compliance_site import build_matrix, render_standalone

    return render_standalone(build_matrix(doc))


def diff_reports(
    a: dict[str, Any], b: dict[str, Any], aliases: dict[str, tuple[str, ...]] | None = None
) -> list[str]:
    """Cells whose outcome changed from ``a`` to ``b``, as readable lines.

    With ``aliases`` (old clause id -> the clauses it was split into), a part that one
    document lacks is compared with the other document's cell under the old id (shown as
    ``part (was old)``), and a row under an old id that is no clause any more is not reported
    apart from its parts."""
    aliases = aliases or {}
    rows_a, rows_b = _with_parts(a["clauses"], aliases), _with_parts(b["clauses"], aliases)
    changes = []
    for cid in sorted(set(rows_a) | set(rows_b)):
        (ra, was_a), (rb, was_b) = rows_a.get(cid, ({}, "")), rows_b.get(cid, ({}, ""))
        was = was_a or was_b
        label = f"{cid} (was {was})" if was else cid
        for name in sorted(set(ra) | set(rb)):
            sa, sb = _diff_status(ra.get(name)), _diff_status(rb.get(name))
            if sa != sb:
                changes.append(f"{label} [{name}]: {sa} -> {sb}")
    return changes


def _with_parts(
    rows: dict[str, Any], aliases: dict[str, tuple[str, ...]]
) -> dict[str, tuple[dict[str, Any], str]]:
    """A document's rows, each with the old id it was taken from ("" for its own row): a
    part the document has no row for takes the row of the old id it was split from, and an
    old id that is not one of its own parts is dropped (its parts stand for it)."""
    out = {cid: (row, "") for cid, row in rows.items()}
    for old, parts in aliases.items():
        if old not in rows:
            continue
        for part in parts:
            if part not in rows:
                out[part] = (rows[old], old)
        if old not in parts:
            del out[old]
    return out


def _diff_status(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "absent"
    return "should-miss" if should_miss(cell) else str(cell.get("status", "absent"))


def regressions(
    a: dict[str, Any],
    b: dict[str, Any],
    strict: bool = False,
    aliases: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """Changes that make a cell worse (e.g. pass -> fail); a new SHOULD miss counts only
    when ``strict``."""
    out = []
    for line in diff_reports(a, b, aliases):
        before, after = line.rsplit(": ", 1)[1].split(" -> ")
        rank = {**_RANK, "should-miss": 2.5}
        worse = rank.get(after, 0) > rank.get(before, 0)
        bad = ("fail", "error", "crash", "timeout", "resource") + (
            ("should-miss",) if strict else ()
        )
        if worse and after in bad:
            out.append(line)
    return out


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Outcome counts per spec area: a SHOULD miss counted as ``should-miss``, and a deviation
    no variant reproduces (a declared finding) as ``finding``, apart from the deviations a
    refimpl variant reproduces."""
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        area = r["clauses"][0].split(".")[0] if r["clauses"] else "?"
        if should_miss(r):
            kind = "should-miss"
        elif r["status"] == "deviation" and r.get("variant") == "finding":
            kind = "finding"
        else:
            kind = r["status"]
        table[area][kind] += 1
    return {k: dict(v) for k, v in sorted(table.items())}
