"""The published JSON Schemas hold what the suite reads and writes: every catalogue
scenario, every reference trace line, every report record, and the derived files are
current."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.schemas import DERIVED, current_text
from xpspec.protocol import load_schema
from xpspec.protocol.scenario import scenario_to_json
from xpspec.refimpl.adapter import RefimplAdapter


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(name))


@pytest.mark.parametrize("name", DERIVED)
def test_derived_schemas_are_current(name: str) -> None:
    import xpspec.protocol.schemas as package

    shipped = (Path(package.__file__).parent / f"{name}.schema.json").read_text()
    assert shipped == current_text(name), "run `xpspec schemas --write`"


def test_every_catalogue_scenario_follows_the_scenario_schema() -> None:
    validator = _validator("scenario")
    for name, scenario in CATALOG.items():
        errors = list(validator.iter_errors(json.loads(scenario_to_json(scenario))))
        assert not errors, f"{name}: {errors[0].message}"


def test_a_scenario_with_an_unknown_field_is_outside_the_schema() -> None:
    data = json.loads(scenario_to_json(CATALOG["plain-u1-b1"]))
    data["trainer"]["unrol_length"] = 1
    assert not _validator("scenario").is_valid(data)


def test_every_reference_trace_line_follows_the_trace_schemas() -> None:
    header, event = _validator("trace-header"), _validator("trace-event")
    adapter = RefimplAdapter()
    for name, scenario in CATALOG.items():
        lines = getattr(adapter, f"run_{scenario.kind}")(scenario).to_jsonl().splitlines()
        header.validate(json.loads(lines[0]))
        for line in lines[1:]:
            errors = list(event.iter_errors(json.loads(line)))
            assert not errors, f"{name}: {line[:200]}: {errors[0].message}"


def test_a_run_report_follows_the_report_schema(tmp_path: Path) -> None:
    from xpspec.conformance.cli import main

    report = tmp_path / "r.jsonl"
    code = main(
        [
            "run",
            "--report",
            str(report),
            "--adapter",
            f"exec:python {Path(__file__).with_name('exec_worker.py')}",
        ]
    )
    assert code == 0
    validator = _validator("report-record")
    records = [json.loads(line) for line in report.read_text().splitlines()]
    for record in records:
        validator.validate(record)
    assert [r["type"] for r in (records[0], records[-1])] == ["header", "footer"]
