"""The committed test vectors (``xpspec/conformance/vectors``): generated from the suite's catalogue,
up to date, in the formats ``xpspec trace`` prints and ``xpspec check`` reads, and covering
every clause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xpspec.conformance import vectors
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.cli import main as xpspec
from xpspec.conformance.vectors import digests
from xpspec.protocol.scenario import scenario_to_json

ROOT = Path(__file__).resolve().parents[2]
DIRECTORY = vectors.default_directory()
SIZE_LIMIT = 3 * 2**20
"""Bytes the vector files may take on disk together."""


def test_committed_vectors_are_not_stale() -> None:
    """The vectors and their index; the variant models' digests are two other tests' (each
    would otherwise run refimpl on every model case again): the file's form, labels and
    scenario digests tests/conformance/test_variant_digests.py's, the trace digests
    tests/conformance/test_variants.py's, which runs refimpl on every model case anyway."""
    stale = vectors.stale_files(models=False)
    assert not stale, (
        f"stale vector files {stale}: regenerate with `python -m xpspec.conformance.vectors --write`"
    )


def test_there_is_one_vector_per_catalogue_scenario() -> None:
    """The vectors come from the suite's one catalogue, each scenario unchanged."""
    committed = {v.name: v for v in vectors.vectors()}
    assert list(committed) == list(CATALOG)
    for name, scenario in CATALOG.items():
        vector = committed[name]
        assert vector.kind == scenario.kind
        assert scenario_to_json(vector.scenario()) == scenario_to_json(scenario), name
        assert vectors.committed(scenario) == vector


def test_every_clause_has_a_vector() -> None:
    """Each clause id of the registry is checked on at least one vector's scenario (the index
    says which; it is recomputed here from the checks)."""
    covered: dict[str, list[str]] = {}
    for vector in vectors.vectors():
        assert vector.clauses == vectors.clauses_of(vector.scenario()), vector.name
        for clause in vector.clauses:
            covered.setdefault(clause, []).append(vector.name)
    ids = ClauseRegistry.load().ids()
    missing = [c for c in ids if c not in covered]
    assert not missing, f"clauses without a vector: {missing}"
    unknown = sorted(set(covered) - set(ids))
    assert not unknown, f"vectors name clauses the registry does not know: {unknown}"


def test_vectors_stay_small() -> None:
    size = sum(p.stat().st_size for p in DIRECTORY.iterdir() if p.suffix in (".json", ".jsonl"))
    assert size < SIZE_LIMIT, f"vectors take {size} bytes, expected < {SIZE_LIMIT}"


def test_generation_is_deterministic() -> None:
    subset = {name: CATALOG[name] for name in ("plain-u1-b1", "replay-forbid", "relabel-final")}
    assert vectors.generate(subset) == vectors.generate(subset)


def test_check_reports_a_modified_and_an_orphan_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in DIRECTORY.iterdir():
        if path.suffix in (".json", ".jsonl"):
            (tmp_path / path.name).write_bytes(path.read_bytes())
    # models=False, and the committed digests standing for freshly computed ones under
    # --check: the variant models' digests are the subject of test_variant_digests.py and
    # test_variants.py (computing them runs refimpl on every model case, a third of a minute)
    assert vectors.stale_files(tmp_path, models=False) == []
    victim = tmp_path / "plain-u1-b1.trace.jsonl"
    victim.write_text(victim.read_text(encoding="utf-8").replace("1", "2", 1), encoding="utf-8")
    (tmp_path / "orphan.trace.jsonl").write_text("{}\n", encoding="utf-8")
    assert vectors.stale_files(tmp_path, models=False) == [
        "orphan.trace.jsonl",
        "plain-u1-b1.trace.jsonl",
    ]
    committed = (DIRECTORY / digests.DIGESTS).read_text(encoding="utf-8")
    monkeypatch.setattr(digests, "digests_text", lambda catalog=None: committed)
    assert vectors.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "stale vector files" in err and "orphan.trace.jsonl, plain-u1-b1.trace.jsonl" in err


def test_first_difference() -> None:
    assert vectors.first_difference("a\nb\n", "a\nb\n") is None
    assert vectors.first_difference("a\nb\n", "a\nc\n") == (2, "b", "c")
    assert vectors.first_difference("a\n", "a\nb\n") == (2, "(end of trace)", "b")
    assert vectors.first_difference("a\nb\n", "a\n") == (2, "b", "(end of trace)")


@pytest.mark.parametrize(
    "name", ["plain-u1-b1", "replay-too-short", "env-mixed", "learner-single", "relabel-final"]
)
def test_xpspec_trace_reproduces_the_vector(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    """``xpspec trace`` on a vector's scenario file prints its trace file byte for byte."""
    stem = vectors.stem(name)
    scenario = DIRECTORY / f"{stem}.scenario.json"
    assert xpspec(["trace", str(scenario), "--adapter", "refimpl", "--isolation", "inline"]) == 0
    out = capfd.readouterr().out
    assert out == (DIRECTORY / f"{stem}.trace.jsonl").read_text(encoding="utf-8")


def test_xpspec_trace_reproduces_a_vector_from_a_worker_process() -> None:
    """The same through the command line and a worker process, as a user runs it."""
    stem = vectors.stem("fractional-u1/4-b1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xpspec.conformance",
            "trace",
            str(DIRECTORY / f"{stem}.scenario.json"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DIRECTORY / f"{stem}.trace.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(CATALOG))
def test_xpspec_check_passes_every_vector(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    stem = vectors.stem(name)
    files = [str(DIRECTORY / f"{stem}.scenario.json"), str(DIRECTORY / f"{stem}.trace.jsonl")]
    code = xpspec(["check", *files])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pass" in out and "FAIL" not in out


def test_xpspec_check_names_the_vector_a_trace_departs_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace of a vector scenario that differs where an exact check looks: the failure says
    which committed vector it departs from, and where."""
    stem = vectors.stem("warmup-boundary")
    lines = (DIRECTORY / f"{stem}.trace.jsonl").read_text(encoding="utf-8").splitlines()
    changed = next(i for i, line in enumerate(lines) if '"status":"trained"' in line)
    lines[changed] = lines[changed].replace('"status":"trained"', '"status":"warmup"')
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = xpspec(["check", str(DIRECTORY / f"{stem}.scenario.json"), str(trace)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  exact-schedule" in out
    assert (
        f"differs from the committed vector warmup-boundary ({'xpspec/conformance/vectors/'}" in out
    )
    assert f"first at line {changed + 1}" in out


def test_index_is_json_naming_existing_files() -> None:
    index = json.loads((DIRECTORY / vectors.INDEX).read_text(encoding="utf-8"))
    assert index["format"] == vectors.INDEX_FORMAT
    for entry in index["vectors"]:
        assert (DIRECTORY / entry["scenario"]).is_file()
        assert (DIRECTORY / entry["trace"]).is_file()
