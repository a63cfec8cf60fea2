"""The xpspec command line: trace, check, report, diff, clauses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.catalog import CATALOG
from conformance.cli import main
from conformance.scenario import scenario_to_json
from refimpl.trace import Trace


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.json"
    path.write_text(scenario_to_json(CATALOG["delayed-mixed-b3"]))
    return path


def test_trace_then_check_round_trip(scenario_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["trace", str(scenario_file)]) == 0
    text = capsys.readouterr().out
    assert Trace.from_jsonl(text).events, "empty trace"
    trace = tmp_path / "t.jsonl"
    trace.write_text(text)
    assert main(["check", str(scenario_file), str(trace)]) == 0
    out = capsys.readouterr().out
    assert "pass  conservation" in out and "FAIL" not in out


def test_a_catalogue_name_stands_for_its_scenario(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["trace", "delayed-b1"]) == 0
    text = capsys.readouterr().out
    assert Trace.from_jsonl(text).events, "empty trace"
    trace = tmp_path / "t.jsonl"
    trace.write_text(text)
    assert main(["check", "delayed-b1", str(trace)]) == 0
    assert "pass  delayed-per-env" in capsys.readouterr().out


def test_check_reports_a_broken_trace(scenario_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    main(["trace", str(scenario_file)])
    lines = capsys.readouterr().out.splitlines()
    # Drop the first store event: its items are lost, which breaks conservation.
    first_store = next(i for i, line in enumerate(lines) if '"kind":"store"' in line)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:first_store] + lines[first_store + 1 :]) + "\n")
    assert main(["check", str(scenario_file), str(broken)]) == 1
    assert "FAIL  conservation" in capsys.readouterr().out


def test_invalid_scenario_names_the_field(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(scenario_to_json(CATALOG["plain-u1-b1"]))
    data["trainer"]["unroll_length"] = 0.25
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unroll_length" in err and "not a float" in err


def test_malformed_trace_line_is_named(scenario_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format":"xpspec-trace/3"}\n{"kind":"teleport"}\n')
    assert main(["check", str(scenario_file), str(bad)]) == 2
    assert "line 2" in capsys.readouterr().err


def test_diff_exit_code_on_regression(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    def doc(status: str) -> dict:
        return {
            "format": "xpspec-compliance/1",
            "implementations": [],
            "clauses": {"a.b": {"x": {"status": status}}},
        }

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc("pass")))
    b.write_text(json.dumps(doc("fail")))
    assert main(["diff", str(a), str(b)]) == 1
    assert "a.b [x]: pass -> fail" in capsys.readouterr().out
    assert main(["diff", str(b), str(a)]) == 0


@pytest.mark.parametrize(
    "args, text",
    [
        (["trace", "DIR"], "Is a directory"),
        (["trace", "EMPTY"], "scenario.kind"),
        (["diff", "EMPTY", "EMPTY"], "not an xpspec compliance document"),
        (["report", "EMPTY"], "expected a header"),
        (["run", "--expectations", "no-such-file.toml"], "no-such-file.toml"),
        (["run", "--expectations", "BAD_TOML"], "bad.toml"),
        (["run", "--memory-limit", "lots"], "--memory-limit: expected a size"),
        (["run", "--op-timeout", "0"], "--op-timeout: expected seconds > 0"),
        (["run", "--timeout", "-1"], "--timeout: expected seconds >= 0"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, capsys, args: list[str], text: str) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    toml = tmp_path / "bad.toml"
    toml.write_text("[[deviation]\nclause = 'x'\n")
    names = {"EMPTY": str(empty), "BAD_TOML": str(toml), "DIR": str(tmp_path)}
    assert main([names.get(a, a) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("xpspec: ") and text in err, err


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Is a directory"):
        main(["--debug", "trace", str(tmp_path)])


def test_clauses_lists_the_aliases_of_split_clauses(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["clauses"]) == 0
    out = capsys.readouterr().out
    assert "alias  train.hooks" in out
    assert "-> train.after-update, train.after-train-iter" in out


def test_diff_follows_a_split_clause(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An old compliance.json with a cell under ``train.hooks`` compared with a new one that
    has its parts: each part is compared with the old cell, and a part that got worse is a
    regression."""

    def doc(cells: dict[str, str]) -> dict:
        return {
            "format": "xpspec-compliance/1",
            "implementations": [],
            "clauses": {cid: {"x": {"status": st}} for cid, st in cells.items()},
        }

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc({"train.hooks": "pass"})))
    b.write_text(json.dumps(doc({"train.after-update": "pass", "train.after-train-iter": "fail"})))
    assert main(["diff", str(a), str(b)]) == 1
    assert capsys.readouterr().out == (
        "train.after-train-iter (was train.hooks) [x]: pass -> fail\n"
    )
    b.write_text(json.dumps(doc({"train.after-update": "pass", "train.after-train-iter": "pass"})))
    assert main(["diff", str(a), str(b)]) == 0
    assert capsys.readouterr().out == "no changes\n"


def test_a_report_the_runner_left_without_footer_is_closed_as_interrupted(tmp_path: Path) -> None:
    # pytest itself can fail while it reports a KeyboardInterrupt (a traceback entry without
    # a line number); the run must still end 'interrupted', never look complete.
    from conformance.cli import _close_report
    from conformance.report import read_run

    report = tmp_path / "r.jsonl"
    header = {"type": "header", "adapter": "a", "framework": "a", "framework_version": "1"}
    result = {"type": "result", "check": "c", "clauses": ["x.y"], "scenario": "s"}
    report.write_text(
        json.dumps(header) + "\n" + json.dumps({**result, "status": "pass", "message": ""}) + "\n"
    )
    try:
        raise TypeError("unsupported operand") from None
    except TypeError as exc:
        exc.__context__ = KeyboardInterrupt()
        _close_report(report, "interrupted", exc)
    run = read_run(report, allow_incomplete=True)
    assert run.status == "interrupted" and not run.complete
    assert run.footer is not None and run.footer["counts"] == {"pass": 1}
    _close_report(report, "crashed", TypeError("again"))  # a footer is never written twice
    assert report.read_text().count('"footer"') == 1
