"""``xpspec run`` end to end, in a process of its own: exit codes, reports that survive
whatever the adapter does, runs that stop, and the report and diff commands refusing runs
that did not complete."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conformance.broken_adapters import TARGET
from xpspec.conformance.outcomes import ExitCode
from xpspec.conformance.report import read_run

XPSPEC = [sys.executable, "-m", "xpspec.conformance"]
ROOT = Path(__file__).resolve().parents[2]


def _xpspec(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*XPSPEC, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own, quiet and without its cache."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=240,
    )


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_crashing_adapter_leaves_a_complete_report(tmp_path: Path) -> None:
    report = tmp_path / "abort.jsonl"
    done = _xpspec(
        "run", "--adapter", "tests.conformance.broken_adapters:Abort", "--report", str(report)
    )
    assert done.returncode == ExitCode.FINDINGS, done.stderr[-2000:]
    run = read_run(report)  # complete, else this raises
    records = _records(report)
    assert records[0]["type"] == "header" and records[-1]["type"] == "footer"
    assert run.footer is not None and run.footer["recorded"] == run.footer["collected"] == len(
        run.results
    )
    by_scenario: dict[str, set[str]] = {}
    for r in run.results:
        by_scenario.setdefault(r["scenario"], set()).add(r["status"])
    assert by_scenario[TARGET] <= {"crash", "not-applicable"} and "crash" in by_scenario[TARGET]
    assert by_scenario["replay-uniform"] == {"pass"}  # the other checks are unaffected
    assert "crash" in done.stdout  # the summary has a column for it
    # progress: lines with the count and the time left, not pytest's letters
    total = run.footer["collected"]
    assert f"xpspec: {total}/{total} checks (100%)" in done.stdout, done.stdout[:2000]
    assert " left" in done.stdout
    letter_lines = r"[.sxXFE]+ *(\[ *\d+%\])?"
    letters = [ln for ln in done.stdout.splitlines() if re.fullmatch(letter_lines, ln)]
    assert not letters, letters
    # the matrix names the column as the adapter's info() does, not the command line
    assert run.header["name"] == "Abort" and run.header["adapter"].endswith(":Abort")


def test_an_adapter_that_cannot_be_imported_stops_the_run_at_once(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    done = _xpspec(
        "run", "--adapter", "tests.conformance.broken_import:Adapter", "--report", str(report)
    )
    assert done.returncode == ExitCode.ADAPTER_UNAVAILABLE
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "a_framework_that_is_not_installed" in lines[0] and "fix:" in lines[0]
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert _records(report)[-1]["status"] == "adapter-unavailable"
    refused = _xpspec("report", str(report), "--out", str(tmp_path / "out"))
    assert refused.returncode == ExitCode.BAD_INPUT
    assert refused.stderr.count("\n") == 1 and "adapter-unavailable" in refused.stderr


def test_a_misspelt_adapter_is_one_line_and_leaves_no_report(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text("an earlier run's report\n")  # not to be summarised
    done = _xpspec("run", "--adapter", "tainshou", "--report", str(tmp_path / "r.jsonl"))
    assert done.returncode == ExitCode.ADAPTER_UNAVAILABLE
    assert done.stderr.strip().count("\n") == 0 and "did you mean 'tianshou'?" in done.stderr
    assert not (tmp_path / "r.jsonl").exists()  # it named no adapter: nothing ran


def test_the_run_budget_stops_the_run_and_marks_it(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    done = _xpspec("run", "--report", str(report), "--timeout", "2")
    assert done.returncode == ExitCode.INCOMPLETE, done.stdout[-2000:]
    footer = _records(report)[-1]
    assert footer["status"] == "timeout" and footer["recorded"] < footer["collected"]
    assert "time budget" in done.stderr
    refused = _xpspec("report", str(report), "--out", str(tmp_path / "out"))
    assert refused.returncode == ExitCode.BAD_INPUT and "--allow-incomplete" in refused.stderr
    allowed = _xpspec("report", str(report), "--out", str(tmp_path / "out"), "--allow-incomplete")
    assert allowed.returncode == 0
    assert "INCOMPLETE RUN (timeout)" in (tmp_path / "out" / "compliance.md").read_text()
    diff = _xpspec("diff", *(str(tmp_path / "out" / "compliance.json"),) * 2)
    assert diff.returncode == ExitCode.BAD_INPUT and "incomplete runs" in diff.stderr


def _interruptible() -> None:
    """Give the child SIGINT's default disposition: a job started in the background of a
    non-interactive shell (``cmd &``) inherits SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler, so Ctrl-C, which this test stands for, would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_run_is_marked_interrupted(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    proc = subprocess.Popen(
        [*XPSPEC, "run", "--report", str(report)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if report.exists() and report.read_text().count('"type": "result"') >= 20:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INCOMPLETE, err[-2000:]
    assert _records(report)[-1]["status"] == "interrupted"
    assert "interrupted" in err


def test_an_interrupt_pytest_fails_to_report_still_marks_the_run_interrupted(
    tmp_path: Path,
) -> None:
    # pytest reports an interrupt before the session finishes; when that report raises (as
    # pytest's own does for a traceback entry without a line number, which a signal arriving
    # at a function's first instruction leaves on Python 3.11), the session finishes with the
    # exit status it had before the interrupt, and the run must still not read as complete.
    (tmp_path / "test_stops.py").write_text("def test_stops():\n    raise KeyboardInterrupt\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(trylast=True)\n"
        "def pytest_keyboard_interrupt(excinfo):\n"
        "    raise TypeError('a report of the interrupt that fails')\n"
    )
    report = tmp_path / "r.jsonl"
    _pytest("--adapter=refimpl", f"--xpspec-report={report}", str(tmp_path), cwd=tmp_path)
    footer = _records(report)[-1]
    assert footer["type"] == "footer" and footer["status"] == "interrupted", footer


def test_a_falsified_generated_invariant_is_recorded_as_failing(tmp_path: Path) -> None:
    """The recorded outcome is the test's, not the last example's: a shrunk counterexample."""
    report = tmp_path / "r.jsonl"
    done = _pytest(
        "--pyargs",
        "xpspec.conformance.suite",
        "--adapter=tests.conformance.broken_adapters:LosesStores",
        f"--xpspec-report={report}",
        "-k",
        "test_invariant and conservation",
    )
    assert done.returncode == 1, done.stdout[-2000:]
    (result,) = [r for r in _records(report) if r["type"] == "result"]
    assert result["status"] == "fail" and result["scenario"] == "generated"
    assert (
        "preprocess.conservation" in result["message"] and '"kind":"trainer"' in result["message"]
    )


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_adapter_output_never_reaches_the_trace(tmp_path: Path, isolation: str) -> None:
    from xpspec.conformance.catalog import CATALOG
    from xpspec.protocol.scenario import scenario_to_json

    scenario = tmp_path / "s.json"
    scenario.write_text(scenario_to_json(CATALOG[TARGET]))
    noisy = _xpspec(
        "trace",
        str(scenario),
        "--adapter",
        "tests.conformance.broken_adapters:StdoutNoise",
        "--isolation",
        isolation,
    )
    clean = _xpspec("trace", str(scenario), "--isolation", isolation)
    assert noisy.returncode == clean.returncode == 0, noisy.stderr[-2000:]
    assert noisy.stdout == clean.stdout and "noise" not in noisy.stdout
    if isolation == "inline":
        assert "noise written to fd 1" in noisy.stderr


def test_an_exec_adapter_runs_the_suite(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    command = f"exec:{sys.executable} {ROOT / 'tests' / 'conformance' / 'exec_worker.py'}"
    done = _xpspec("run", "--adapter", command, "--report", str(report))
    assert done.returncode == ExitCode.OK, done.stdout[-3000:]
    run = read_run(report)
    assert {r["status"] for r in run.results} == {"pass", "not-applicable"}
    assert run.header["framework"].startswith("a toy env")


def test_the_plugin_stays_out_of_other_pytest_runs(tmp_path: Path) -> None:
    """Installed, the plugin loads in every pytest run: one that does not run the suite
    connects no adapter, so a broken XPSPEC_ADAPTER cannot fail it."""
    (tmp_path / "test_other.py").write_text("def test_plain():\n    assert True\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "XPSPEC_ADAPTER": "nonsense"},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
