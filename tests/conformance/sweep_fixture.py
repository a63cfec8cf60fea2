"""A version sweep of a made-up adapter ``fw``, written as the sweep session writes one
(``xpspec record`` of run reports): release 1.0.0 could not be driven, 2.0.0 and 2.1.0 ran, and
between them one finding disappeared, one appeared and one outcome changed otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.sweeps import record_run

CLAUSES = ClauseRegistry.load().ids()
GONE, NEW, FIXED, SAME = CLAUSES[:4]
"""A finding in 2.0.0 only; a finding in 2.1.0 only; a failure in 2.0.0 that passes in 2.1.0;
a finding in both."""
REASON = (
    "adapter 'fw' cannot run: ImportError: cannot import name 'Algorithm' from 'fw' "
    "(/home/someone/venv/lib/python3.11/site-packages/fw/__init__.py)"
)


def _result(clause: str, status: str, variant: str = "", message: str = "m") -> dict[str, Any]:
    return {
        "type": "result",
        "check": "c",
        "clauses": [clause],
        "scenario": "plain-u1-b1",
        "status": status,
        "message": message,
        "variant": variant,
    }


def _finding(clause: str) -> dict[str, Any]:
    return _result(clause, "deviation", "finding", "finding (no spec variant reproduces it): x")


def write_report(
    path: Path, version: str, results: list[dict[str, Any]], status: str = "complete"
) -> Path:
    """A run report of adapter ``fw`` on release ``version`` (a run that could not start
    has no framework version, as ``xpspec run`` writes it)."""
    header = {
        "type": "header",
        "adapter": "fw",
        "name": "fw",
        "framework": "" if status != "complete" else "Fw",
        "framework_version": "" if status != "complete" else version,
        "suite": "xpspec 0.1.0",
        "spec": "0.1",
        "profile": "ci",
        "started": f"2026-11-27T0{len(version)}:00:00+00:00",
        "versions": {"python": "3.11.7"},
    }
    footer = {
        "type": "footer",
        "status": status,
        "message": REASON if status != "complete" else "",
        "counts": {},
        "ended": "2026-11-27T09:00:00+00:00",
    }
    path.write_text("\n".join(json.dumps(r) for r in [header, *results, footer]) + "\n")
    return path


def write_sweep(root: Path) -> Path:
    """The sweep's committed runs in ``root/fw/``; returns that folder."""
    out = root / "fw"
    reports = root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    runs = {
        "1.0.0": ([], "adapter-unavailable"),
        "2.0.0": (
            [
                _finding(GONE),
                _result(NEW, "pass"),
                _result(FIXED, "fail", message="[x] c: wrong\n  expected: 1\n  actual:   2"),
                _finding(SAME),
            ],
            "complete",
        ),
        "2.1.0": (
            [_result(GONE, "pass"), _finding(NEW), _result(FIXED, "pass"), _finding(SAME)],
            "complete",
        ),
    }
    for version, (results, status) in runs.items():
        report = write_report(reports / f"{version}.jsonl", version, results, status)
        record_run(report, version, out, framework="Fw")
    return out
