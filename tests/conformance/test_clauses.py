"""Meta-tests: the spec's clauses and the tests agree (every clause is tested, every tested
id exists, ids are unique), and the packaged registry is up to date with spec/."""

from __future__ import annotations

import re
from pathlib import Path

from conformance.checks import ALL_CHECKS
from conformance.clauses import ClauseRegistry, parse_spec_pages

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"
MARKER = re.compile(r"""mark\.clause\(([^)]*)\)""")
ID = re.compile(r"""["']([a-z0-9]+(?:\.[a-z0-9-]+)+)["']""")


def _marked_in_tests() -> dict[str, set[str]]:
    """Clause ids named by ``pytest.mark.clause(...)`` in the project's test modules."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for args in MARKER.findall(path.read_text(encoding="utf-8")):
            for cid in ID.findall(args):
                found.setdefault(cid, set()).add(path.name)
    return found


def _referenced() -> dict[str, set[str]]:
    refs = _marked_in_tests()
    for check in ALL_CHECKS:
        for cid in check.clauses:
            refs.setdefault(cid, set()).add(f"check {check.name}")
    return refs


def test_ids_are_unique_and_well_formed() -> None:
    clauses = parse_spec_pages(SPEC)  # raises on duplicates and malformed clause headings
    assert clauses, "the spec defines no clause"
    assert len({c.id for c in clauses}) == len(clauses)


def test_every_clause_is_tested() -> None:
    refs = _referenced()
    untested = [c.id for c in parse_spec_pages(SPEC) if c.id not in refs]
    assert not untested, f"clauses no test or check names: {untested}"


def test_every_named_clause_exists() -> None:
    known = {c.id for c in parse_spec_pages(SPEC)}
    unknown = {cid: sorted(where) for cid, where in _referenced().items() if cid not in known}
    assert not unknown, f"tests or checks name clauses the spec does not define: {unknown}"


def test_packaged_registry_is_current() -> None:
    fresh = ClauseRegistry(parse_spec_pages(SPEC)).to_json()
    packaged = (ROOT / "conformance" / "clauses.json").read_text(encoding="utf-8")
    assert packaged == fresh, "conformance/clauses.json is stale: run `xpspec clauses --write`"


def test_every_variant_model_names_a_spec_variant() -> None:
    from conformance.variants import VARIANTS

    variants = {c.id: set(c.variants) for c in parse_spec_pages(SPEC)}
    unknown = [f"{c}/{v}" for c, v in VARIANTS if v not in variants.get(c, set())]
    assert not unknown, f"variant models the spec does not name: {unknown}"


def test_expectations_files_name_spec_clauses_and_variants() -> None:
    from conformance.expectations import Expectations

    variants = {c.id: set(c.variants) for c in parse_spec_pages(SPEC)}
    problems = []
    for path in sorted((ROOT / "adapters").glob("*.expectations.toml")):
        expectations = Expectations.load(path)
        for d in expectations.deviations:
            if d.clause not in variants or (d.variant and d.variant not in variants[d.clause]):
                problems.append(f"{path.name}: {d.clause}/{d.variant}")
        for f in expectations.findings:
            problems += [f"{path.name}: finding {c}" for c in f.clauses if c not in variants]
    assert not problems, problems
