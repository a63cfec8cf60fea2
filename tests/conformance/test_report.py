"""Reports: folding runs into the compliance document, rendering, and diffs."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from xpspec.conformance.report import (
    IncompleteRun,
    build_compliance,
    diff_reports,
    read_run,
    render_html,
    render_markdown,
)

SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[2] / "xpspec" / "conformance" / "compliance.schema.json"
    ).read_text()
)


def _run(path: Path, adapter: str, results: list[tuple[str, str]]) -> Path:
    lines = [
        {
            "type": "header",
            "adapter": adapter,
            "framework": adapter,
            "framework_version": "1",
            "suite": "s",
            "spec": "0.1",
            "profile": "ci",
        }
    ]
    lines += [
        {
            "type": "result",
            "check": "c",
            "clauses": [cid],
            "scenario": "x",
            "status": st,
            "message": "m",
            "variant": "",
        }
        for cid, st in results
    ]
    lines.append({"type": "footer", "status": "complete", "counts": {}})
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return path


def test_worst_outcome_per_clause_and_schema(tmp_path: Path) -> None:
    a = _run(
        tmp_path / "a.jsonl", "a", [("x.one", "pass"), ("x.one", "fail"), ("x.two", "deviation")]
    )
    b = _run(tmp_path / "b.jsonl", "b", [("x.one", "not-applicable"), ("x.two", "pass")])
    doc = build_compliance([a, b], ["x.one", "x.two", "x.three"], {"x.one": "area"})
    jsonschema.validate(doc, SCHEMA)
    assert doc["clauses"]["x.one"]["a"]["status"] == "fail"
    assert doc["clauses"]["x.two"]["a"]["status"] == "deviation"
    assert doc["clauses"]["x.three"]["b"]["status"] == "not-applicable"
    md = render_markdown(doc)
    assert "| `x.one` | FAIL | n/a [1] |" in md  # a report elsewhere does not link the spec
    # the docs page and the standalone page link the clause and show the cell's outcome
    assert '<a href="spec/area.md#x.one">x.one</a>' in render_markdown(doc, links=True)
    assert 'class="o-fail" data-o="fail"' in render_html(doc)


def test_a_not_applicable_cell_states_its_reasons(tmp_path: Path) -> None:
    path = _run(tmp_path / "a.jsonl", "a", [])
    lines = path.read_text().splitlines()
    why = ["unsupported: no hook (fw 1)", "unsupported: no hook (fw 1)", "declares no 'state'"]
    results = [
        {
            "type": "result",
            "check": "c",
            "clauses": ["x.one"],
            "scenario": f"s{i}",
            "status": "not-applicable",
            "message": m + "\nmore",
            "variant": "",
        }
        for i, m in enumerate(why)
    ] + [
        {
            "type": "result",
            "check": "c",
            "clauses": ["x.two"],
            "scenario": "s",
            "status": "pass",
            "message": "",
            "variant": "",
        }
    ]
    path.write_text("\n".join([lines[0], *map(json.dumps, results), lines[-1]]) + "\n")
    doc = build_compliance([path], ["x.one", "x.two", "x.three"])
    jsonschema.validate(doc, SCHEMA)
    # the most frequent reason first, first lines only; a clause no check ran on says so
    assert doc["clauses"]["x.one"]["a"]["reasons"] == why[1:]
    assert doc["clauses"]["x.three"]["a"]["reasons"] == [
        "no check of this clause ran on this implementation"
    ]
    assert "reasons" not in doc["clauses"]["x.two"]["a"]
    md = render_markdown(doc)
    assert "| `x.one` | n/a [1] |" in md and "| `x.three` | n/a [2] |" in md
    assert "1. **a**: unsupported: no hook (fw 1); declares no 'state'" in md
    assert 'title="unsupported: no hook (fw 1)\ndeclares no &#39;state&#39;"' in render_html(doc)


def test_findings_are_named_in_the_matrix(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    lines = [
        {
            "type": "header",
            "adapter": "a",
            "framework": "a",
            "framework_version": "1",
            "suite": "s",
            "spec": "0.1",
            "profile": "ci",
        },
        {
            "type": "result",
            "check": "c",
            "clauses": ["x.one"],
            "scenario": "x",
            "status": "deviation",
            "message": "m",
            "variant": "finding",
        },
        {
            "type": "result",
            "check": "c",
            "clauses": ["x.two"],
            "scenario": "x",
            "status": "deviation",
            "message": "m",
            "variant": "same-step",
        },
    ]
    lines.append({"type": "footer", "status": "complete", "counts": {}})
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    md = render_markdown(build_compliance([path], ["x.one", "x.two"]))
    assert "| `x.one` | finding |" in md and "| `x.two` | deviation (same-step) |" in md
    # A clause with a reproduced deviation and a finding shows the finding, in either order.
    both = {**lines[2], "clauses": ["x.one"]}
    for order in ([lines[0], lines[1], both, lines[-1]], [lines[0], both, lines[1], lines[-1]]):
        path.write_text("\n".join(json.dumps(r) for r in order) + "\n")
        assert "| `x.one` | finding |" in render_markdown(build_compliance([path], ["x.one"]))


def test_diff_lists_changed_cells(tmp_path: Path) -> None:
    a = build_compliance([_run(tmp_path / "a.jsonl", "a", [("x.one", "pass")])], ["x.one"])
    b = build_compliance([_run(tmp_path / "b.jsonl", "a", [("x.one", "error")])], ["x.one"])
    assert diff_reports(a, b) == ["x.one [a]: pass -> error"]


def test_a_file_without_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "footer", "status": "complete"}\n')
    with pytest.raises(ValueError, match="no header"):
        read_run(path)


def test_adapter_notes_are_in_the_legend(tmp_path: Path) -> None:
    path = _run(tmp_path / "a.jsonl", "a", [("x.one", "pass")])
    text = path.read_text().splitlines()
    header = {**json.loads(text[0]), "notes": "PR 1768 is not merged in this snapshot"}
    path.write_text("\n".join([json.dumps(header), *text[1:]]) + "\n")
    md = render_markdown(build_compliance([path], ["x.one"]))
    assert "- **a**: a 1 (suite s, spec 0.1, profile ci) — PR 1768 is not merged" in md
    plain = render_markdown(build_compliance([_run(tmp_path / "b.jsonl", "b", [])], ["x.one"]))
    assert "- **b**: b 1 (suite s, spec 0.1, profile ci)\n" in plain


@pytest.mark.parametrize(
    "footer, problem",
    [
        (None, "the run did not finish (no footer record"),
        ({"type": "footer", "status": "interrupted"}, "the run ended interrupted"),
        ({"type": "footer", "status": "timeout", "message": "budget"}, "ended timeout: budget"),
        ({"type": "footer", "status": "stopped"}, "the run ended stopped"),
    ],
)
def test_an_incomplete_run_is_refused_unless_allowed(
    tmp_path: Path, footer: dict | None, problem: str
) -> None:
    path = _run(tmp_path / "a.jsonl", "a", [("x.one", "pass")])
    lines = path.read_text().splitlines()[:-1] + ([json.dumps(footer)] if footer else [])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(IncompleteRun, match="--allow-incomplete") as caught:
        build_compliance([path], ["x.one"])
    assert problem in str(caught.value)
    doc = build_compliance([path], ["x.one"], allow_incomplete=True)
    jsonschema.validate(doc, SCHEMA)
    assert doc["implementations"][0]["run"] == (footer or {"status": "died"})["status"]
    assert "INCOMPLETE RUN" in render_markdown(doc)


def test_adapter_failures_are_their_own_cells(tmp_path: Path) -> None:
    path = _run(
        tmp_path / "a.jsonl", "a", [("x.one", "pass"), ("x.one", "crash"), ("x.two", "timeout")]
    )
    doc = build_compliance([path], ["x.one", "x.two"])
    jsonschema.validate(doc, SCHEMA)
    assert "| `x.one` | CRASH |" in render_markdown(doc)
    assert "| `x.two` | TIMEOUT |" in render_markdown(doc)


def test_a_result_without_its_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "result"}\n')
    with pytest.raises(ValueError, match=r"x.jsonl:1: expected a result with check, clauses"):
        read_run(path)


def _should_run(path: Path) -> Path:
    """A run with one SHOULD miss on x.one and a pass on x.two."""
    lines = _run(path, "a", [("x.two", "pass")]).read_text().splitlines()
    miss = {
        "type": "result",
        "check": "c",
        "clauses": ["x.one"],
        "scenario": "x",
        "status": "fail",
        "message": "m",
        "variant": "",
        "level": "SHOULD",
    }
    path.write_text("\n".join([lines[0], json.dumps(miss), *lines[1:]]) + "\n")
    return path


def test_a_should_miss_is_shown_as_such_not_as_a_failure(tmp_path: Path) -> None:
    from xpspec.conformance.report import regressions, summarise

    run = _should_run(tmp_path / "a.jsonl")
    doc = build_compliance([run], ["x.one", "x.two"])
    jsonschema.validate(doc, SCHEMA)
    assert "| `x.one` | miss (SHOULD) |" in render_markdown(doc)
    assert summarise(read_run(run).results) == {"x": {"should-miss": 1, "pass": 1}}
    earlier = _run(tmp_path / "b.jsonl", "a", [("x.one", "pass"), ("x.two", "pass")])
    before = build_compliance([earlier], ["x.one", "x.two"])
    assert diff_reports(before, doc) == ["x.one [a]: pass -> should-miss"]
    assert regressions(before, doc) == []
    assert regressions(before, doc, strict=True) == ["x.one [a]: pass -> should-miss"]


def test_a_must_failure_outranks_a_should_miss(tmp_path: Path) -> None:
    run = _should_run(tmp_path / "a.jsonl")
    lines = run.read_text().splitlines()
    must = {**json.loads(lines[1]), "level": "MUST"}
    run.write_text("\n".join([lines[0], lines[1], json.dumps(must), *lines[2:]]) + "\n")
    assert "| `x.one` | FAIL |" in render_markdown(build_compliance([run], ["x.one"]))


ALIASES = {"x.gone": ("x.one", "x.two"), "x.kept": ("x.kept", "x.part")}


def test_results_under_an_old_clause_id_fold_into_its_parts(tmp_path: Path) -> None:
    """A run made before a clause was split names the old id: its results stand for every
    part the run has no result of (a kept old id also for itself)."""
    old = _run(tmp_path / "old.jsonl", "a", [("x.gone", "fail"), ("x.kept", "pass")])
    ids = ["x.one", "x.two", "x.kept", "x.part"]
    doc = build_compliance([old], ids, aliases=ALIASES)
    jsonschema.validate(doc, SCHEMA)
    assert {cid: doc["clauses"][cid]["a"]["status"] for cid in ids} == {
        "x.one": "fail",
        "x.two": "fail",
        "x.kept": "pass",
        "x.part": "pass",
    }
    # A run that has results of the parts keeps them apart.
    new = _run(
        tmp_path / "new.jsonl", "a", [("x.kept", "pass"), ("x.part", "fail"), ("x.one", "pass")]
    )
    doc = build_compliance([new], ids, aliases=ALIASES)
    assert doc["clauses"]["x.kept"]["a"]["status"] == "pass"
    assert doc["clauses"]["x.part"]["a"]["status"] == "fail"
    assert doc["clauses"]["x.two"]["a"]["status"] == "not-applicable"


def test_diff_compares_an_old_cell_with_each_of_its_parts(tmp_path: Path) -> None:
    old = build_compliance(
        [_run(tmp_path / "a.jsonl", "a", [("x.gone", "pass"), ("x.kept", "pass")])],
        ["x.gone", "x.kept"],
    )
    new = build_compliance(
        [
            _run(
                tmp_path / "b.jsonl",
                "a",
                [("x.one", "pass"), ("x.two", "fail"), ("x.kept", "pass"), ("x.part", "fail")],
            )
        ],
        ["x.one", "x.two", "x.kept", "x.part"],
    )
    assert diff_reports(old, new, ALIASES) == [
        "x.part (was x.kept) [a]: pass -> fail",
        "x.two (was x.gone) [a]: pass -> fail",
    ]
    assert diff_reports(new, old, ALIASES) == [
        "x.part (was x.kept) [a]: fail -> pass",
        "x.two (was x.gone) [a]: fail -> pass",
    ]
    # Without the aliases the old rows are simply absent from the new document.
    assert "x.gone [a]: pass -> absent" in diff_reports(old, new)


def test_the_column_is_named_as_the_adapter_names_itself(tmp_path: Path) -> None:
    """A run reached through ``package.module:Class`` or ``exec:COMMAND`` is shown under the
    name of the adapter's ``info()``; a header without one (an older run, an adapter that
    never answered) keeps the command line's name."""
    path = _run(tmp_path / "a.jsonl", "pkg.mod:TinyAdapter", [("x.one", "pass")])
    text = path.read_text().splitlines()
    header = {**json.loads(text[0]), "name": "tiny"}
    path.write_text("\n".join([json.dumps(header), *text[1:]]) + "\n")
    doc = build_compliance([path], ["x.one"])
    assert [i["adapter"] for i in doc["implementations"]] == ["tiny"]
    assert list(doc["clauses"]["x.one"]) == ["tiny"]
    assert "| clause | tiny |" in render_markdown(doc)
    old = build_compliance([_run(tmp_path / "b.jsonl", "b", [("x.one", "pass")])], ["x.one"])
    assert list(old["clauses"]["x.one"]) == ["b"]


def test_the_matrix_schema_knows_every_way_a_run_ends() -> None:
    """A run's footer status (:data:`RUN_STATUSES`), or ``died`` for a report without a footer,
    is what the compliance document's schema allows as an implementation's run."""
    from importlib import resources

    from xpspec.conformance.outcomes import RUN_STATUSES

    schema = json.loads(
        resources.files("xpspec.conformance").joinpath("compliance.schema.json").read_text()
    )
    run = schema["properties"]["implementations"]["items"]["properties"]["run"]
    assert run["enum"] == [*RUN_STATUSES, "died"]


def test_a_column_keeps_the_run_dates_and_the_parts_of_a_failure_message(tmp_path: Path) -> None:
    path = _run(tmp_path / "a.jsonl", "a", [("x.two", "pass")])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["started"], lines[-1]["ended"] = (
        "2026-01-02T03:04:05+00:00",
        "2026-01-02T03:05:00+00:00",
    )
    message = (
        "[x.one] c: a window crosses an evicted item\n  expected: [4]\n  actual:   [5]\n"
        'scenario \'x\':\n  {"kind":"replay"}\n  reproduce: save the JSON above as s.json, then …'
    )
    fail = lines[1] | {"clauses": ["x.one"], "status": "fail", "message": message}
    lines.insert(1, fail)
    path.write_text("\n".join(map(json.dumps, lines)) + "\n")
    doc = build_compliance([path], ["x.one", "x.two"])
    jsonschema.validate(doc, SCHEMA)
    (implementation,) = doc["implementations"]
    assert implementation["started"] == "2026-01-02T03:04:05+00:00"
    assert implementation["ended"] == "2026-01-02T03:05:00+00:00"
    cell = doc["clauses"]["x.one"]["a"]
    assert cell["message"] == "[x.one] c: a window crosses an evicted item"
    assert (cell["expected"], cell["actual"]) == ("[4]", "[5]")
    assert cell["scenario_json"] == '{"kind":"replay"}'
    assert cell["text"] == "\n".join(message.splitlines()[:3])
    assert set(doc["clauses"]["x.two"]["a"]) == {
        "status",
        "check",
        "scenario",
        "message",
        "variant",
        "level",
    }


def test_a_run_cut_short_is_no_pass_and_no_verdict(tmp_path: Path) -> None:
    from xpspec.conformance.report import regressions

    run = _run(
        tmp_path / "a.jsonl",
        "a",
        [
            ("x.one", "cut-short"),
            ("x.one", "not-applicable"),
            ("x.two", "cut-short"),
            ("x.two", "pass"),
            ("x.three", "cut-short"),
            ("x.three", "deviation"),
        ],
    )
    doc = build_compliance([run], ["x.one", "x.two", "x.three"])
    jsonschema.validate(doc, SCHEMA)
    # No run of x.one went to its end: no verdict, no pass.
    assert doc["clauses"]["x.one"]["a"]["status"] == "cut-short"
    # A run that went to its end and passed earns the pass; a verdict outranks no verdict.
    assert doc["clauses"]["x.two"]["a"]["status"] == "pass"
    assert doc["clauses"]["x.three"]["a"]["status"] == "deviation"
    assert "| `x.one` | cut short |" in render_markdown(doc)
    assert 'class="o-cut-short" data-o="cut-short"' in render_html(doc)
    # Not a regression: the framework's stop is declared.
    before = build_compliance([_run(tmp_path / "b.jsonl", "a", [("x.one", "pass")])], ["x.one"])
    assert regressions(before, doc) == []


def test_the_summary_counts_findings_apart_from_reproduced_deviations(tmp_path: Path) -> None:
    from xpspec.conformance.report import summarise

    path = _run(tmp_path / "a.jsonl", "a", [("x.one", "deviation"), ("x.two", "deviation")])
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[1]["variant"] = "finding"
    records[2]["variant"] = "plain"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert summarise(read_run(path).results) == {"x": {"finding": 1, "deviation": 1}}


def _two_clause_run(path: Path, charged: list[str], variant: str, other: str) -> Path:
    """One check of clauses x.a and x.b: a deviation on scenario s1 charged to ``charged``,
    and ``other`` on scenario s2."""
    head = {"type": "header", "adapter": "a", "framework": "a", "framework_version": "1"}
    result = {"type": "result", "check": "c", "clauses": ["x.a", "x.b"], "message": "m"}
    lines = [
        {**head, "suite": "s", "spec": "0.1", "profile": "ci"},
        {**result, "scenario": "s1", "status": "deviation", "variant": variant, "charged": charged},
        {**result, "scenario": "s2", "status": other, "variant": ""},
        {"type": "footer", "status": "complete", "counts": {}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return path


def test_a_finding_of_one_clause_is_no_verdict_on_its_checks_other_clause(tmp_path: Path) -> None:
    # The check stopped at x.a's declared finding: it never judged x.b there.
    doc = build_compliance(
        [_two_clause_run(tmp_path / "r.jsonl", ["x.a"], "finding", "cut-short")], ["x.a", "x.b"]
    )
    jsonschema.validate(doc, SCHEMA)
    assert doc["clauses"]["x.a"]["a"]["status"] == "deviation"
    b = doc["clauses"]["x.b"]["a"]
    assert (b["status"], b["stopped_at"]) == ("cut-short", "x.a")
    assert "| `x.b` | cut short (x.a) |" in render_markdown(doc)
    # A run of the check that went to its end earns x.b its pass.
    doc = build_compliance(
        [_two_clause_run(tmp_path / "p.jsonl", ["x.a"], "finding", "pass")], ["x.a", "x.b"]
    )
    assert doc["clauses"]["x.b"]["a"]["status"] == "pass"


def test_a_deviation_charged_to_every_clause_or_reproduced_stays_on_each(tmp_path: Path) -> None:
    for charged, variant in ((["x.a", "x.b"], "finding"), (["x.a"], "some-variant"), ([], "")):
        doc = build_compliance(
            [_two_clause_run(tmp_path / "r.jsonl", charged, variant, "pass")], ["x.a", "x.b"]
        )
        assert doc["clauses"]["x.b"]["a"]["status"] == "deviation", (charged, variant)
