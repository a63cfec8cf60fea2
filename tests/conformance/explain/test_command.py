"""``xpspec explain`` on the command line, through an engine session, and in the failure
messages of a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.explain.perturb import reference, store_one_iteration_later, with_events
from tests.conformance.zoo import MUTANTS, MutantAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.cli import main
from xpspec.conformance.engine import Session
from xpspec.conformance.explain.command import DEFAULT_PAGE, Request, explain_run


@pytest.fixture
def late(tmp_path: Path) -> Path:
    """delayed-mixed-b3's reference trace with env 0's first release one iteration late."""
    _, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    store_one_iteration_later(events, iteration=4, env=0)
    path = tmp_path / "late.jsonl"
    path.write_text(with_events(trace, events).to_jsonl())
    return path


def test_text_of_a_trace_file(late: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "delayed-mixed-b3", "--trace", str(late), "--format", "text"]) == 1
    out = capsys.readouterr().out
    assert f"  trace:     trace {late}" in out
    assert "  reference: committed vector delayed-mixed-b3" in out
    assert "first divergence: iteration 4, env 0, event #" in out
    assert "clause: preprocess.delayed-per-env" in out


def test_a_page_is_written_where_asked_or_to_the_default(
    late: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "late.html"
    assert main(["explain", "delayed-mixed-b3", "--trace", str(late), "--out", str(page)]) == 1
    assert page.read_text().startswith("<!doctype html>")
    assert f"wrote {page}: first divergence at iteration 4, env 0" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "delayed-mixed-b3", "--trace", str(late)]) == 1
    assert (tmp_path / DEFAULT_PAGE).read_text().startswith("<!doctype html>")
    assert f"wrote {DEFAULT_PAGE}: " in capsys.readouterr().err


def test_two_trace_files_either_way_round(
    late: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, trace = reference("delayed-mixed-b3")
    good = tmp_path / "good.jsonl"
    good.write_text(trace.to_jsonl())
    args = ["explain", "delayed-mixed-b3", "--format", "text"]
    # the reference file is what the exact comparisons compare with: now the good trace fails
    assert main([*args, "--trace", str(good), "--reference", str(late)]) == 1
    out = capsys.readouterr().out
    assert f"  reference: trace {late}" in out
    assert "the trace has 1 event the reference has not (store)" in out
    assert "clause: preprocess.conservation (charged by check exact-stores, iteration 4)" in out
    assert main([*args, "--trace", str(good), "--reference", str(good)]) == 0
    assert "no divergence; no check fails" in capsys.readouterr().out


def test_an_adapter_run_through_the_worker(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "delayed-b1", "--adapter", "refimpl", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "  trace:     adapter 'refimpl'" in out and "no divergence; no check fails" in out


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["explain", "delayed-b1", "--trace", "missing.jsonl"], "missing.jsonl: cannot read it"),
        (["explain", "no-such-scenario", "--trace", "x"], "catalogue scenario name"),
        (["explain", "delayed-b1", "--format", "pdf"], "invalid choice"),
    ],
)
def test_bad_input_is_named(
    args: list[str], text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse refuses a bad choice itself
        code = int(exc.code or 0)
    assert code == 2
    assert text in capsys.readouterr().err


def test_a_malformed_trace_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "xpspec-trace/3"}\n{"kind": "nonsense"}\n')
    assert main(["explain", "delayed-b1", "--trace", str(bad)]) == 2
    assert f"{bad}: malformed trace: line 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutant", "scenario"),
    [("never-release", "delayed-mixed-b3"), ("identity-one-step-late", "plain-u2-b3")],
)
def test_a_mutant_is_charged_with_the_clause_it_breaks_as_a_run_charges_it(
    mutant: str, scenario: str
) -> None:
    found = next(m for m in MUTANTS if m.name == mutant)
    session = Session(MutantAdapter(found), mutant)
    request = Request(CATALOG[scenario], scenario, mutant, None, None, "text", None)
    explanation = explain_run(request, session)
    assert not isinstance(explanation, str)
    cause = explanation.verdict.cause
    assert cause is not None and cause.clauses == (found.breaks,)
    assert explanation.divergence is not None
    # the engine's outcome of the same check is the cause of its run, not downstream
    check = next(c for c in ALL_CHECKS if c.name == cause.check)
    outcome = session.evaluate(check, scenario, CATALOG[scenario])
    assert (outcome.status, outcome.downstream_of) == ("fail", "")


def test_an_adapter_that_cannot_run_the_scenario_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["explain", "plain-u2-b3", "--adapter", "tests.conformance.third_party:Declines"]
    assert main([*args, "--isolation", "inline", "--format", "text"]) == 1
    assert "not applicable" in capsys.readouterr().err
