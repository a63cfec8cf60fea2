"""Reports are deterministic: the same suite run serially and on two xdist workers, each in a
process of its own, gives the same records (timings aside), and traces are byte-identical
across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.harness import load_adapter


def _run(tmp: Path, name: str, *extra: str) -> list[str]:
    report = tmp / f"{name}.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "xpspec.conformance.suite",
        "--adapter=refimpl",
        f"--xpspec-report={report}",
        *extra,
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    records = []
    for line in report.read_text().splitlines():
        r = json.loads(line)
        if r["type"] == "result":
            r.pop("seconds")
            records.append(json.dumps(r, sort_keys=True))
    return sorted(records)


def test_report_identical_serial_and_parallel(tmp_path: Path) -> None:
    """Two runs, two processes (each its own interpreter and string hash seed), one serial
    and one on two workers that split the tests between them: equal records show both that a
    run does not depend on its process and that it does not depend on how the tests are
    distributed. (A second serial run, as this test once made, adds nothing the parallel one
    does not: it is another process too.)"""
    serial = _run(tmp_path, "serial", "-p", "no:xdist")
    assert serial, "the suite produced no records"
    assert _run(tmp_path, "parallel", "-n", "2") == serial


def test_trace_bytes_identical_in_another_process() -> None:
    name = "delayed-fractional"
    here = load_adapter("refimpl").run_trainer(CATALOG[name]).to_jsonl()  # type: ignore[attr-defined]
    code = (
        "import sys; from xpspec.conformance.catalog import CATALOG; from xpspec.conformance.harness import load_adapter; "
        f"sys.stdout.write(load_adapter('refimpl').run_trainer(CATALOG[{name!r}]).to_jsonl())"
    )
    there = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert there == here
