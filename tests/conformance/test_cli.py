"""The xpspec command line: trace, check, report, diff, clauses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.cli import main
from xpspec.protocol.scenario import scenario_to_json
from xpspec.protocol.trace import Trace


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


def test_an_unknown_scenario_name_says_what_was_expected(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    assert main(["check", "no-such-scenario", str(trace)]) != 0
    err = capsys.readouterr().err
    assert "no-such-scenario" in err and "catalogue scenario name" in err


def test_check_reports_a_broken_trace(scenario_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    main(["trace", str(scenario_file)])
    lines = capsys.readouterr().out.splitlines()
    # Drop the first store event: its items are lost, which breaks conservation.
    first_store = next(i for i, line in enumerate(lines) if '"kind":"store"' in line)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:first_store] + lines[first_store + 1 :]) + "\n")
    assert main(["check", str(scenario_file), str(broken)]) == 1
    lines = capsys.readouterr().out.splitlines()
    # Ranked as in a run: the lost items' clause is the cause, the failures it leads to are
    # downstream of it.
    assert "FAIL  conservation [preprocess.conservation]" in lines
    downstream = [
        line for line in lines if line.endswith("(downstream of preprocess.conservation)")
    ]
    assert any(line.startswith("FAIL  ") for line in downstream)


@pytest.mark.parametrize(
    ("name", "check", "why"),
    [
        ("plain-u2-b3", "deterministic-trainer", "a check that runs the scenario again"),
        ("exclude-steps", "excluded-earn-nothing", "a run of another scenario"),
    ],
)
def test_check_makes_a_check_that_needs_another_run_not_applicable(
    name: str, check: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``xpspec check`` holds one trace: a check that needs another run of the implementation
    is not applicable (never passed on the same bytes), and the others run."""
    assert main(["trace", name]) == 0
    trace = tmp_path / "t.jsonl"
    trace.write_text(capsys.readouterr().out)
    assert main(["check", name, str(trace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (line,) = [line for line in lines if f" {check} [" in line]
    assert line.startswith(f"n/a   {check} [") and why in line
    assert sum(line.startswith("pass  ") for line in lines) > 10


def test_check_lines_say_should_misses_apart() -> None:
    from xpspec.conformance.cli import _check_line
    from xpspec.conformance.engine import Outcome

    miss = Outcome("utd-bound", ("train.utd-converges",), "s", "fail", "why", level="SHOULD")
    assert _check_line(miss, strict=False).startswith("WARN  utd-bound [train.utd-converges]")
    assert _check_line(miss, strict=True).startswith("FAIL  utd-bound [train.utd-converges]\n")


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
    from xpspec.conformance.cli import _close_report
    from xpspec.conformance.report import read_run

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


# -- scenarios ---------------------------------------------------------------------------------
def test_scenarios_lists_every_catalogue_scenario_with_its_checked_clauses(capsys) -> None:  # type: ignore[no-untyped-def]
    from xpspec.conformance.vectors import clauses_of

    assert main(["scenarios", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in listed] == list(CATALOG)
    for entry in listed:
        scenario = CATALOG[entry["name"]]
        assert entry["kind"] == scenario.kind
        assert entry["clauses"] == list(clauses_of(scenario)) and entry["clauses"]
    assert main(["scenarios"]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[0].split()
    assert first[:3] == [listed[0]["name"], listed[0]["kind"], listed[0]["clauses"][0]]


def test_the_list_agrees_with_the_committed_vector_index(capsys) -> None:  # type: ignore[no-untyped-def]
    from xpspec.conformance.vectors import vectors

    assert main(["scenarios", "--format", "json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    for vector in vectors():
        assert listed[vector.name]["clauses"] == list(vector.clauses), vector.name
        assert listed[vector.name]["file"] == vector.scenario_file


def test_exported_scenarios_are_the_vectors_files_and_trace_like_them(
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """One format everywhere: an exported file is byte for byte the committed vector's
    scenario file, and ``xpspec trace`` on it prints the committed reference trace."""
    from xpspec.conformance.vectors import default_directory, vectors

    assert main(["scenarios", "--export", str(tmp_path)]) == 0
    capsys.readouterr()
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(v.scenario_file for v in vectors())
    assert any("/" in v.name and "_" in v.scenario_file for v in vectors())
    for name in written:
        committed = (default_directory() / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, name
    vector = next(v for v in vectors() if v.kind == "replay")
    assert main(["trace", str(tmp_path / vector.scenario_file)]) == 0
    assert capsys.readouterr().out == vector.trace_text()


# -- polish --------------------------------------------------------------------------------------
def test_version_is_the_package_version(capsys) -> None:  # type: ignore[no-untyped-def]
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"xpspec {project['project']['version']}\n"


def test_every_subcommand_and_option_has_a_help_text() -> None:
    import argparse

    from xpspec.conformance.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(f"{where} {name}")
                    walk(sub, f"{where} {name}")
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "xpspec")
    assert not missing, f"expected a help text for each, got none for: {missing}"


def test_clauses_wrap_statements_on_word_boundaries(capsys) -> None:  # type: ignore[no-untyped-def]
    from xpspec.conformance.clauses import ClauseRegistry

    assert main(["clauses"]) == 0
    out = capsys.readouterr().out
    registry = ClauseRegistry.load()
    lines = out.split("\nalias", 1)[0].splitlines()
    # a line is longer only when it holds one word that is (a link, say), never cut
    too_long = [line for line in lines if len(line) > 100 and len(line.split()) > 1]
    assert not too_long, too_long
    # each statement comes back whole, word for word, from its wrapped lines
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in lines:
        if line.startswith("alias"):
            break
        if not line.startswith(" "):
            current = line.split()[1]
            blocks[current] = line.split()[2:]
        else:
            blocks[current] += line.split()
    for clause in registry.clauses:
        assert blocks[clause.id] == clause.statement.split(), clause.id


def test_clauses_format_json_is_the_registry(capsys) -> None:  # type: ignore[no-untyped-def]
    from xpspec.conformance.clauses import ClauseRegistry

    assert main(["clauses", "--format", "json"]) == 0
    assert capsys.readouterr().out == ClauseRegistry.load().to_json()


@pytest.mark.parametrize(
    ("command", "code"),
    [(["clauses"], 0), (["scenarios"], 0), (["schemas"], 0), (["trace", "plain-u1-b1"], 4)],
)
def test_a_reader_that_stops_early_ends_a_listing_quietly(command: list[str], code: int) -> None:
    # `xpspec clauses | head`: the pipe closes under the listing, which ends quietly with 0;
    # a command whose output is its verdict (a trace) did not complete (4). The reading end
    # is closed before the command starts, and stdout is buffered (no PYTHONUNBUFFERED), so
    # a short output meets the closed pipe only when it is flushed.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "xpspec.conformance", *command],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
            env=env,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr.decode()) == (code, "")
