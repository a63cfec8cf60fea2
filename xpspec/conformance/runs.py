"""Committed runs: the matrix column of each implementation's latest run, kept in the
repository (``docs/runs/NAME.json``), so that the compliance matrix is rebuilt from every
implementation's run even when only some of them were run again.

A run report (``reports/NAME.jsonl``, half a megabyte or more: a record per check and
scenario) stays out of the repository; what the matrix needs of it — who ran, with which
versions, how the run ended, and per clause the worst outcome with its message or reasons —
is its column (:func:`xpspec.conformance.report.column`), a few dozen kilobytes. ``xpspec report
--runs DIR`` merges the runs it is given with the committed ones, the newest run of each
implementation winning, and writes the winners back.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpspec.conformance.report import RunReport, column

__all__ = [
    "RUN_FORMAT",
    "CommittedRun",
    "committed_compliance",
    "from_report",
    "load_runs",
    "newest",
    "ordered",
    "read_committed",
    "write_runs",
]

RUN_FORMAT = "xpspec-run/1"
_DATES = ("started", "ended")


@dataclass(frozen=True)
class CommittedRun:
    """One run as the repository keeps it: when it ran, its outcome counts, and its column
    (``implementation`` and ``cells``, as :func:`xpspec.conformance.report.column` builds it)."""

    name: str
    started: str
    ended: str
    counts: Mapping[str, int]
    column: Mapping[str, Any]

    @property
    def when(self) -> datetime.datetime:
        """The start of the run (the earliest possible time when it is not known)."""
        try:
            moment = datetime.datetime.fromisoformat(self.started)
        except ValueError:
            return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
        return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)

    def to_json(self) -> str:
        """The committed file: the run's dates once, at the top (the column's implementation
        has them too, for the matrix's header; :func:`read_committed` puts them back)."""
        implementation = {k: v for k, v in self.column["implementation"].items() if k not in _DATES}
        data = {
            "format": RUN_FORMAT,
            "name": self.name,
            "started": self.started,
            "ended": self.ended,
            "counts": dict(self.counts),
            **self.column,
            "implementation": implementation,
        }
        return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def from_report(run: RunReport, aliases: dict[str, tuple[str, ...]] | None = None) -> CommittedRun:
    """The committed form of a run report."""
    col = column(run, aliases)
    footer = run.footer or {}
    return CommittedRun(
        name=col["implementation"]["adapter"],
        started=str(run.header.get("started", "")),
        ended=str(footer.get("ended", "")),
        counts=dict(footer.get("counts", {})),
        column=col,
    )


def read_committed(path: Path) -> CommittedRun:
    """A committed run file; errors name the file and what was expected."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the committed run ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected a committed run of format {RUN_FORMAT!r}, got {got!r}")
    missing = [k for k in ("name", "implementation", "cells") if k not in data]
    if missing:
        raise ValueError(f"{path}: expected the fields {missing} in a committed run")
    started, ended = str(data.get("started", "")), str(data.get("ended", ""))
    implementation = {**data["implementation"], "started": started, "ended": ended}
    return CommittedRun(
        name=str(data["name"]),
        started=started,
        ended=ended,
        counts=dict(data.get("counts", {})),
        column={"implementation": implementation, "cells": data["cells"]},
    )


def load_runs(directory: Path) -> dict[str, CommittedRun]:
    """The committed runs of ``directory`` (``NAME.json`` each), by name; none if it is absent."""
    runs: dict[str, CommittedRun] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        run = read_committed(path)
        if run.name in runs:
            raise ValueError(f"{path}: a second committed run of {run.name!r}")
        runs[run.name] = run
    return runs


def newest(
    committed: Mapping[str, CommittedRun], fresh: Iterable[CommittedRun]
) -> dict[str, CommittedRun]:
    """Per implementation the run that started last, of the committed and the fresh ones (a
    fresh run wins a tie: it is the same run or a rerun within the second). No
    implementation is dropped for want of a fresh run."""
    merged = dict(committed)
    for run in fresh:
        kept = merged.get(run.name)
        if kept is None or run.when >= kept.when:
            merged[run.name] = run
    return merged


def ordered(runs: Mapping[str, CommittedRun], order: Sequence[str] = ()) -> list[CommittedRun]:
    """The runs as matrix columns: the names of ``order`` first, in that order, then the
    others by name."""
    first = [runs[name] for name in order if name in runs]
    rest = sorted((r for name, r in runs.items() if name not in order), key=lambda r: r.name)
    return first + rest


def write_runs(directory: Path, runs: Iterable[CommittedRun]) -> list[Path]:
    """Write each run as ``directory/NAME.json``; return the files whose text changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for run in runs:
        path = directory / f"{_file_stem(run.name)}.json"
        text = run.to_json()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def _file_stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "adapter"


def committed_compliance(
    directory: Path, order: Sequence[str] = (), sweeps: Path | None = None
) -> dict[str, Any]:
    """The compliance document of the committed runs of ``directory`` (columns as
    :func:`ordered`), against the packaged clause registry, clause ids linked to their spec
    pages, with the summaries of the version sweeps committed in ``sweeps`` (if given): what
    ``xpspec report --runs DIR --sweeps SWEEPS`` builds when it is given no fresh run."""
    from xpspec.conformance.clauses import ClauseRegistry
    from xpspec.conformance.report import compliance_from_columns

    registry = ClauseRegistry.load()
    columns = [dict(run.column) for run in ordered(load_runs(directory), order)]
    pages = {c.id: c.page for c in registry.clauses}
    doc = compliance_from_columns(columns, registry.ids(), pages, registry.aliases)
    if sweeps is not None:
        from xpspec.conformance.sweeps import load_sweeps, summaries

        doc["sweeps"] = summaries(load_sweeps(sweeps).values())
    return doc
