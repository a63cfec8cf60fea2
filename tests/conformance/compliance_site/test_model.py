"""The site's view of a compliance document: columns, rows with their clause statements,
each cell's outcome key, and the detail of every cell that is not a pass."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.conformance.compliance_site.fixture import (
    CLAUSES,
    MUSTS,
    OUTCOMES,
    REGISTRY,
    SCENARIO_JSON,
    SHOULD,
    every_outcome,
)
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.compliance_site import (
    LOOKS,
    build_matrix,
    cell_label,
    classify,
    look,
    slugs,
)
from xpspec.conformance.compliance_site.model import TITLE_LIMIT
from xpspec.protocol.scenario import scenario_from_json


def _cells(column: str = "all") -> dict[str, object]:
    m = build_matrix(every_outcome())
    return {r.clause: c for r in m.rows for c in r.cells if c.column.name == column}


def test_every_outcome_has_a_look_and_each_cell_its_key() -> None:
    assert len({lk.symbol for lk in LOOKS}) == len(LOOKS)  # a symbol tells each apart
    cells = _cells()
    for n, key in enumerate(OUTCOMES):
        assert cells[MUSTS[n]].key == key  # type: ignore[attr-defined]
    assert cells[SHOULD].key == "should-miss"  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match="expected an outcome key in"):
        look("broken")


def test_labels_are_the_markdown_matrix_words() -> None:
    assert cell_label(OUTCOMES["deviation"]) == "deviation (same-step)"
    assert cell_label(OUTCOMES["downstream"]) == f"FAIL ↓ {MUSTS[0]}"
    assert cell_label(OUTCOMES["finding"]) == "finding"
    assert classify({"status": "fail", "level": "SHOULD"}) == "should-miss"


def test_columns_carry_framework_versions_dates_and_run_status() -> None:
    m = build_matrix(every_outcome())
    first, late = m.columns
    assert (first.framework, first.version, first.date) == ("all-framework", "1.2.3", "2026-11-27")
    assert first.versions == (("python", "3.11.7"), ("torch", "2.13.0"))
    assert first.complete and not late.complete and late.date == ""
    assert dict(first.tally)["pass"] == len(CLAUSES) - len(OUTCOMES)
    assert sum(n for _, n in first.tally) == len(CLAUSES)


def test_rows_carry_the_clause_statement_level_page_and_area() -> None:
    m = build_matrix(every_outcome())
    assert [r.clause for r in m.rows] == CLAUSES
    row = m.rows[0]
    assert row.statement == REGISTRY[row.clause].statement and row.statement
    assert row.page == REGISTRY[row.clause].page and row.area == row.clause.split(".")[0]
    assert [a for a, _ in m.areas] == list(dict.fromkeys(c.split(".")[0] for c in CLAUSES))


def test_only_cells_that_are_not_a_pass_have_a_detail() -> None:
    m = build_matrix(every_outcome())
    for r in m.rows:
        for c in r.cells:
            assert (c.detail is None) == (c.key == "pass"), (r.clause, c.column.name)
    assert len(m.details()) == len(OUTCOMES) - 1 + 1  # every key but pass, and the miss


def test_a_failure_detail_has_its_text_values_scenario_and_commands() -> None:
    d = _cells()[MUSTS[list(OUTCOMES).index("fail")]].detail  # type: ignore[attr-defined]
    assert d.message == OUTCOMES["fail"]["text"]
    assert (d.expected, d.actual) == ("[(0, 0, 4)]", "[(0, 0, 5)]")
    assert d.scenario_source == "run" and json.loads(d.scenario_json) == json.loads(SCENARIO_JSON)
    assert d.repro == "xpspec trace s.json --adapter all"
    assert d.explain == "xpspec explain s.json --adapter all"


def test_a_catalogue_scenario_without_json_takes_the_catalogues() -> None:
    d = _cells()[MUSTS[list(OUTCOMES).index("finding")]].detail  # type: ignore[attr-defined]
    assert d.scenario_source == "catalogue"
    assert scenario_from_json(d.scenario_json) == CATALOG["plain-u1-b1"]
    assert d.repro == "xpspec trace plain-u1-b1 --adapter all"
    assert d.explain == "xpspec explain plain-u1-b1 --adapter all"


@pytest.mark.parametrize("key", ["error", "crash", "timeout", "resource", "not-applicable"])
def test_no_explain_command_where_there_is_no_trace_to_draw(key: str) -> None:
    d = _cells()[MUSTS[list(OUTCOMES).index(key)]].detail  # type: ignore[attr-defined]
    assert d.repro and not d.explain


def test_an_unknown_scenario_without_json_has_no_command() -> None:
    doc = every_outcome()
    doc["clauses"][MUSTS[1]]["all"] = OUTCOMES["deviation"] | {"scenario": "generated"}
    d = next(c.detail for r in build_matrix(doc).rows for c in r.cells if r.clause == MUSTS[1])
    assert d is not None and d.scenario_source == "" and d.repro == d.explain == ""


def test_commands_quote_what_the_shell_would_read() -> None:
    doc = every_outcome()
    name = "it's; rm -rf ~"
    doc["implementations"][0]["adapter"] = name
    for row in doc["clauses"].values():
        row[name] = row.pop("all")
    d = build_matrix(doc).details()[1]
    assert shlex.split(d.repro) == ["xpspec", "trace", "plain-u1-b1", "--adapter", name]


def test_slugs_are_safe_and_unique() -> None:
    assert slugs(["SB3", "sb3", "s/b 3", "<x>", ""]) == {
        "SB3": "sb3",
        "sb3": "sb3-2",
        "s/b 3": "s-b-3",
        "<x>": "x",
        "": "implementation",
    }


def test_a_long_hover_text_is_cut() -> None:
    doc = every_outcome()
    doc["clauses"][MUSTS[1]]["all"] = OUTCOMES["deviation"] | {"message": "y" * 1000}
    cell = next(c for r in build_matrix(doc).rows for c in r.cells if r.clause == MUSTS[1])
    assert len(cell.title) == TITLE_LIMIT and cell.title.endswith("…")
