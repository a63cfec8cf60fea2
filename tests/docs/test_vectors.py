"""The checked-in test vectors (``spec/vectors``) are exactly what the generator produces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.clauses import parse_spec_pages
from conformance.scenario import scenario_from_json, scenario_to_json
from refimpl import vectors

SPEC = Path(__file__).resolve().parents[2] / "spec"
DIRECTORY = SPEC / "vectors"


def test_checked_in_vectors_are_not_stale() -> None:
    stale = vectors.stale_files(DIRECTORY)
    assert not stale, f"stale vectors {stale}: regenerate with `python -m refimpl.vectors --write`"


def test_every_vector_names_existing_clauses() -> None:
    known = {c.id for c in parse_spec_pages(SPEC)}
    for path in sorted(DIRECTORY.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["format"] == vectors.FORMAT
        unknown = [c for c in data["clauses"] if c not in known]
        assert not unknown, f"{path.name} names unknown clauses {unknown}"


def test_generation_is_deterministic() -> None:
    assert vectors.generate() == vectors.generate()


def test_check_reports_a_modified_file(tmp_path: Path) -> None:
    vectors.write(tmp_path)
    assert vectors.stale_files(tmp_path) == []
    victim = sorted(tmp_path.glob("*.json"))[0]
    victim.write_text(victim.read_text(encoding="utf-8").replace("1", "2", 1), encoding="utf-8")
    (tmp_path / "orphan.json").write_text("{}\n", encoding="utf-8")
    assert vectors.stale_files(tmp_path) == sorted([victim.name, "orphan.json"])
    assert vectors.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("name", [p.name for p in sorted(DIRECTORY.glob("*.json"))])
def test_vector_scenarios_are_suite_scenarios(name: str) -> None:
    """Each vector's scenario is a scenario of the conformance suite, unchanged by a round trip."""
    data = json.loads((DIRECTORY / name).read_text(encoding="utf-8"))
    scenario = scenario_from_json(data["scenario"])
    assert json.loads(scenario_to_json(scenario)) == data["scenario"]
