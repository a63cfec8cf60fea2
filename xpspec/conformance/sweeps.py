"""Version sweeps: one adapter's conformance run on each of several releases of its framework,
kept in the repository as ``docs/sweeps/ADAPTER/VERSION.json``, and what changed between them.

Each file is a committed run (:mod:`xpspec.conformance.runs`, format ``xpspec-run/1``, as in
``docs/runs/``) of one release. A release the adapter could not drive (the framework did not
install, an import failed, an API the adapter calls is missing) is a run of status
``adapter-unavailable`` with no cells and the one-line reason (``run_message``): it is
recorded, never left out and never a pass. Committed files hold no machine paths
(:func:`scrub`): a framework's traceback names its files from ``site-packages/``.

:func:`record_run` writes a release's file from its run report (``nox -s sweep`` calls it
through ``xpspec sweep-record``), :func:`record_unavailable` one for a release that never ran,
:func:`load_sweeps` reads them back (oldest release first), and :func:`changes` says, per
clause, in which release its outcome changed, a finding appearing or disappearing.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from xpspec.conformance.report import read_run
from xpspec.conformance.runs import CommittedRun, from_report, read_committed

__all__ = [
    "Change",
    "Sweep",
    "SweptRun",
    "changes",
    "load_sweep",
    "load_sweeps",
    "record_run",
    "record_unavailable",
    "scrub",
    "summaries",
    "sweep_compliance",
]

UNAVAILABLE = "adapter-unavailable"
NO_VERDICT = frozenset({"error", "crash", "timeout", "resource", "not-applicable"})
"""Outcome keys that say nothing of the clause: the adapter broke, or no check could run."""


@dataclass(frozen=True)
class SweptRun:
    """One release's run in a sweep."""

    version: str
    run: CommittedRun

    @property
    def status(self) -> str:
        """How the run ended (``complete``, ``adapter-unavailable``, …)."""
        return str(self.run.column["implementation"].get("run") or "complete")

    @property
    def reason(self) -> str:
        """Why a run that is not complete is not ("" for a complete one)."""
        return str(self.run.column["implementation"].get("run_message") or "")

    @property
    def complete(self) -> bool:
        return self.status == "complete"


@dataclass(frozen=True)
class Sweep:
    """An adapter's runs on releases of its framework, oldest release first."""

    adapter: str
    framework: str
    runs: tuple[SweptRun, ...]

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(r.version for r in self.runs)


Kind = Literal["appeared", "disappeared", "changed"]


@dataclass(frozen=True)
class Change:
    """A clause whose outcome differs from one complete run of the sweep to the next."""

    clause: str
    previous: str
    """The release before (the previous one that ran)."""
    version: str
    """The release where the outcome changed."""
    before: str
    after: str
    """Outcome keys (:func:`xpspec.conformance.compliance_site.classify`)."""

    @property
    def kind(self) -> Kind:
        """``appeared``: a finding from this release on, where the release before had a
        verdict without it; ``disappeared``: a finding up to the release before, and a verdict
        without it from this one; ``changed``: any other change of outcome (one side without a
        verdict — the adapter broke, or no check could run — says nothing of a finding)."""
        if self.before in NO_VERDICT or self.after in NO_VERDICT:
            return "changed"
        if self.after == "finding":
            return "appeared"
        if self.before == "finding":
            return "disappeared"
        return "changed"


def _release(version: str) -> tuple[int, Version | str]:
    """A sort key: PEP 440 order, any version PEP 440 cannot read after them by text."""
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def load_sweep(directory: Path) -> Sweep:
    """The sweep of ``directory`` (``VERSION.json`` each); errors name the file."""
    runs: list[SweptRun] = []
    for path in sorted(directory.glob("*.json")):
        run = read_committed(path)
        version = str(run.column["implementation"].get("framework_version") or "")
        if version != path.stem:
            raise ValueError(
                f"{path}: expected a run of {run.name} {path.stem} (the file's name), "
                f"got framework_version {version!r}"
            )
        runs.append(SweptRun(version, run))
    if not runs:
        raise ValueError(f"{directory}: expected committed runs (VERSION.json), got none")
    names = {r.run.name for r in runs}
    if len(names) != 1:
        raise ValueError(f"{directory}: expected the runs of one adapter, got {sorted(names)}")
    runs.sort(key=lambda r: _release(r.version))
    frameworks = [str(r.run.column["implementation"].get("framework") or "") for r in runs]
    return Sweep(names.pop(), next((f for f in frameworks if f), ""), tuple(runs))


def load_sweeps(root: Path) -> dict[str, Sweep]:
    """Every sweep under ``root`` (one folder per adapter), by adapter; none if it is absent."""
    if not root.is_dir():
        return {}
    sweeps = [load_sweep(d) for d in sorted(root.iterdir()) if d.is_dir()]
    return {s.adapter: s for s in sweeps}


def sweep_compliance(sweep: Sweep, clause_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The compliance document of the sweep's complete runs, one column per release (named
    ``ADAPTER VERSION``), oldest first, against the packaged clause registry."""
    from xpspec.conformance.clauses import ClauseRegistry
    from xpspec.conformance.report import compliance_from_columns

    registry = ClauseRegistry.load()
    columns = []
    for r in sweep.runs:
        if not r.complete:
            continue
        implementation = {**r.run.column["implementation"], "adapter": _label(sweep, r)}
        columns.append({"implementation": implementation, "cells": r.run.column["cells"]})
    pages = {c.id: c.page for c in registry.clauses}
    ids = list(clause_ids) if clause_ids is not None else registry.ids()
    return compliance_from_columns(columns, ids, pages, registry.aliases)


def _label(sweep: Sweep, run: SweptRun) -> str:
    return f"{sweep.adapter} {run.version}"


def changes(sweep: Sweep, clause_ids: Sequence[str] | None = None) -> list[Change]:
    """Per clause (in registry order), each change of outcome from one complete run of the
    sweep to the next (runs that are not complete are passed over: they have no outcome)."""
    from xpspec.conformance.compliance_site.outcomes import classify

    doc = sweep_compliance(sweep, clause_ids)
    ran = [r for r in sweep.runs if r.complete]
    out = []
    for clause, row in doc["clauses"].items():
        keys = [classify(row[_label(sweep, r)]) for r in ran]
        for i in range(1, len(ran)):
            if keys[i] != keys[i - 1]:
                out.append(Change(clause, ran[i - 1].version, ran[i].version, keys[i - 1], keys[i]))
    return out


# -- recording ------------------------------------------------------------------------------
def scrub(text: str) -> str:
    """``text`` without this machine's paths: a file under a ``site-packages`` folder is named
    from ``site-packages/``, and the working directory, the interpreter's prefix and the home
    directory are left out (``~`` for the home)."""
    text = re.sub(r"(?<![\w.])/[^\s'\"():,]*?/site-packages/", "site-packages/", text)
    for root, name in ((os.getcwd(), "."), (sys.prefix, "<venv>"), (str(Path.home()), "~")):
        if len(root) > 1:
            text = text.replace(root.rstrip("/") + "/", name + "/").replace(root, name)
    return text


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(v) for v in value]
    return value


def _write(run: CommittedRun, version: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{version}.json"
    path.write_text(run.to_json(), encoding="utf-8")
    return path


def record_run(report: Path, version: str, out: Path, framework: str = "") -> Path:
    """Write ``out/VERSION.json``, the committed form of the run report ``report`` of the
    release ``version`` (a run that did not complete included, with its reason). Raises
    ``ValueError`` when the report is of another release."""
    from xpspec.conformance.clauses import ClauseRegistry

    run = read_run(report, allow_incomplete=True)
    got = str(run.header.get("framework_version") or "")
    if got and got != version:
        raise ValueError(f"{report}: expected a run of release {version}, got one of {got}")
    committed = from_report(run, ClauseRegistry.load().aliases)
    implementation = dict(committed.column["implementation"])
    implementation["framework_version"] = version
    implementation["framework"] = implementation.get("framework") or framework
    if run.status != "complete":
        footer = run.footer or {}
        reason = str(footer.get("message") or run.header.get("adapter_error") or run.problem())
        implementation["run_message"] = " ".join(reason.split())
    column = _scrubbed({**committed.column, "implementation": implementation})
    return _write(
        CommittedRun(committed.name, committed.started, committed.ended, committed.counts, column),
        version,
        out,
    )


def record_unavailable(adapter: str, framework: str, version: str, reason: str, out: Path) -> Path:
    """Write ``out/VERSION.json`` for a release that never ran (e.g. it does not install
    beside the pinned torch): status ``adapter-unavailable`` with ``reason``."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    implementation = {
        "adapter": adapter,
        "framework": framework,
        "framework_version": version,
        "run": UNAVAILABLE,
        "run_message": " ".join(scrub(reason).split()),
        "started": now,
        "ended": now,
    }
    run = CommittedRun(adapter, now, now, {}, {"implementation": implementation, "cells": {}})
    return _write(run, version, out)


def summaries(sweeps: Iterable[Sweep]) -> list[dict[str, Any]]:
    """What the matrix page says of each sweep: adapter, framework, and per release how its
    run ended."""
    return [
        {
            "adapter": s.adapter,
            "framework": s.framework,
            "runs": [{"version": r.version, "run": r.status} for r in s.runs],
        }
        for s in sweeps
    ]
