"""Committed runs (docs/runs/): the matrix is rebuilt from every implementation's newest run,
and never loses a column because that implementation was not run again."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.cli import main
from xpspec.conformance.report import build_compliance, compliance_from_columns, render_markdown
from xpspec.conformance.runs import committed_compliance, load_runs, ordered, read_committed

ROOT = Path(__file__).resolve().parents[2]
CLAUSES = ClauseRegistry.load()
ONE, TWO = CLAUSES.ids()[:2]


def _report(path: Path, name: str, started: str, status: str) -> Path:
    """A complete run report of ``name`` started at ``started``: ``status`` for clause ONE,
    a pass for TWO."""
    header = {
        "type": "header",
        "adapter": f"pkg.{name}:Adapter",
        "name": name,
        "framework": name,
        "framework_version": "1",
        "suite": "s",
        "spec": "0.1",
        "profile": "ci",
        "started": started,
    }
    results = [
        {"type": "result", "check": "c", "clauses": [cid], "scenario": "x", "status": st}
        | {"message": "m", "variant": ""}
        for cid, st in ((ONE, status), (TWO, "pass"))
    ]
    footer = {"type": "footer", "status": "complete", "counts": {}, "ended": started}
    path.write_text("\n".join(json.dumps(r) for r in [header, *results, footer]) + "\n")
    return path


def _report_cmd(tmp_path: Path, *runs: Path) -> int:
    return main(
        [
            "report",
            *map(str, runs),
            "--runs",
            str(tmp_path / "runs"),
            "--order",
            "ref,a,b",
            "--out",
            str(tmp_path / "out"),
        ]
    )


def _cells(tmp_path: Path) -> dict[str, dict[str, str]]:
    doc = json.loads((tmp_path / "out" / "compliance.json").read_text())
    return {cid: {n: c["status"] for n, c in row.items()} for cid, row in doc["clauses"].items()}


def test_a_column_not_run_again_keeps_its_committed_run(tmp_path: Path) -> None:
    early = "2026-01-01T00:00:00+00:00"
    a = _report(tmp_path / "a.jsonl", "a", early, "fail")
    b = _report(tmp_path / "b.jsonl", "b", early, "pass")
    assert _report_cmd(tmp_path, a, b) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["a.json", "b.json"]
    # a later session with only a's new run present: b's column is kept from docs/runs
    a.unlink(), b.unlink()
    fixed = _report(tmp_path / "a2.jsonl", "a", "2026-02-01T00:00:00+00:00", "pass")
    assert _report_cmd(tmp_path, fixed) == 0
    assert _cells(tmp_path)[ONE] == {"a": "pass", "b": "pass"}
    assert read_committed(tmp_path / "runs" / "a.json").started.startswith("2026-02-01")
    # and with no fresh run at all, the matrix is the committed runs'
    assert _report_cmd(tmp_path) == 0
    assert _cells(tmp_path)[ONE] == {"a": "pass", "b": "pass"}


def test_an_older_report_does_not_replace_a_newer_committed_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    new = _report(tmp_path / "new.jsonl", "a", "2026-03-01T00:00:00+00:00", "pass")
    assert _report_cmd(tmp_path, new) == 0
    old = _report(tmp_path / "old.jsonl", "a", "2026-01-01T00:00:00+00:00", "fail")
    assert _report_cmd(tmp_path, old) == 0
    assert _cells(tmp_path)[ONE] == {"a": "pass"}
    assert "not used, the committed run of a is newer" in capsys.readouterr().err


def test_the_column_order_puts_the_named_first(tmp_path: Path) -> None:
    runs = [
        _report(tmp_path / f"{n}.jsonl", n, "2026-01-01T00:00:00+00:00", "pass")
        for n in ("z", "b", "ref")
    ]
    assert _report_cmd(tmp_path, *runs) == 0
    doc = json.loads((tmp_path / "out" / "compliance.json").read_text())
    assert [i["adapter"] for i in doc["implementations"]] == ["ref", "b", "z"]


def test_the_order_applies_to_reports_folded_without_committed_runs(tmp_path: Path) -> None:
    runs = [
        _report(tmp_path / f"{n}.jsonl", n, "2026-01-01T00:00:00+00:00", "pass")
        for n in ("z", "b", "ref")
    ]
    out = tmp_path / "out"
    assert main(["report", *map(str, runs), "--order", "ref", "--out", str(out)]) == 0
    doc = json.loads((out / "compliance.json").read_text())
    assert [i["adapter"] for i in doc["implementations"]] == ["ref", "b", "z"]
    assert not (tmp_path / "runs").exists()  # nothing is committed without --runs


def test_a_committed_run_rebuilds_the_column_of_its_report(tmp_path: Path) -> None:
    """The committed file holds everything the matrix takes from the report."""
    a = _report(tmp_path / "a.jsonl", "a", "2026-01-01T00:00:00+00:00", "not-applicable")
    assert _report_cmd(tmp_path, a) == 0
    committed = load_runs(tmp_path / "runs")
    rebuilt = compliance_from_columns(
        [dict(r.column) for r in ordered(committed)], CLAUSES.ids(), aliases=CLAUSES.aliases
    )
    assert rebuilt == build_compliance([a], CLAUSES.ids(), aliases=CLAUSES.aliases)


def test_a_file_that_is_no_committed_run_is_named(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match=r"x.json: expected a committed run of format"):
        load_runs(tmp_path / "runs")


def test_the_compliance_page_is_the_committed_runs_matrix() -> None:
    """docs/compliance.md is what `nox -s report` renders from docs/runs/ (with links to the
    version sweeps of docs/sweeps/): every committed run is a column, and no column comes from
    anywhere else."""
    page = (ROOT / "docs" / "compliance.md").read_text(encoding="utf-8")
    head = re.search(r'<table class="matrix">\s*<thead>(.*?)</thead>', page, re.DOTALL)
    assert head is not None, "no matrix table in docs/compliance.md"
    columns = [html.unescape(c) for c in re.findall(r'data-column="([^"]*)"', head.group(1))]
    committed = load_runs(ROOT / "docs" / "runs")
    assert sorted(columns) == sorted(committed), (columns, sorted(committed))
    doc = committed_compliance(ROOT / "docs" / "runs", columns, ROOT / "docs" / "sweeps")
    assert [i["adapter"] for i in doc["implementations"]] == columns
    assert render_markdown(doc, links=True) == page, (
        "docs/compliance.md is stale: regenerate it with `nox -s report`"
    )


def test_a_committed_run_keeps_its_dates_once_and_gives_them_to_its_column(tmp_path: Path) -> None:
    started = "2026-01-01T00:00:00+00:00"
    a = _report(tmp_path / "a.jsonl", "a", started, "pass")
    assert _report_cmd(tmp_path, a) == 0
    data = json.loads((tmp_path / "runs" / "a.json").read_text())
    assert data["started"] == data["ended"] == started
    assert "started" not in data["implementation"] and "ended" not in data["implementation"]
    run = read_committed(tmp_path / "runs" / "a.json")
    assert run.column["implementation"]["started"] == started
    assert run.to_json() == (tmp_path / "runs" / "a.json").read_text()
