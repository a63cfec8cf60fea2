"""Meta-tests: the spec's clauses and the tests agree (every clause is tested, every tested
id exists, ids are unique), and the packaged registry is up to date with spec/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.clauses import ClauseRegistry, parse_spec_pages

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
    packaged = (ROOT / "xpspec" / "conformance" / "clauses.json").read_text(encoding="utf-8")
    assert packaged == fresh, (
        "xpspec/conformance/clauses.json is stale: run `xpspec clauses --write`"
    )


def test_every_variant_model_names_a_spec_variant() -> None:
    from xpspec.conformance.variants import VARIANTS

    variants = {c.id: set(c.variants) for c in parse_spec_pages(SPEC)}
    unknown = [f"{c}/{v}" for c, v in VARIANTS if v not in variants.get(c, set())]
    assert not unknown, f"variant models the spec does not name: {unknown}"


def test_expectations_files_name_spec_clauses_and_variants() -> None:
    from xpspec.conformance.expectations import Expectations

    variants = {c.id: set(c.variants) for c in parse_spec_pages(SPEC)}
    problems = []
    for path in sorted((ROOT / "xpspec" / "adapters").glob("*.expectations.toml")):
        expectations = Expectations.load(path)
        for d in expectations.deviations:
            if d.clause not in variants or (d.variant and d.variant not in variants[d.clause]):
                problems.append(f"{path.name}: {d.clause}/{d.variant}")
        for f in expectations.findings:
            problems += [f"{path.name}: finding {c}" for c in f.clauses if c not in variants]
    assert not problems, problems


def _page(tmp_path: Path, text: str) -> Path:
    (tmp_path / "p.md").write_text(text, encoding="utf-8")
    return tmp_path


_SPLIT_PAGE = """
### `a.kept` {#a.kept}

**MUST** — one thing.

### `a.part` {#a.part}

**MUST** — another thing.

**Split from** `a.kept`.

### `a.one` {#a.one}

**SHOULD** — a third thing.

**Split from** `a.gone`.

### `a.two` {#a.two}

**MUST** — a fourth thing.

**Split from** `a.gone`.

**Variants.**
- `v` — a variant.
"""


def test_a_split_clause_leaves_its_old_id_as_an_alias(tmp_path: Path) -> None:
    clauses = parse_spec_pages(_page(tmp_path, _SPLIT_PAGE))
    assert [c.split_from for c in clauses] == ["", "a.kept", "a.gone", "a.gone"]
    registry = ClauseRegistry(clauses)
    # A kept old id is one of its parts; a removed one is a pure alias.
    assert registry.aliases == {"a.kept": ("a.kept", "a.part"), "a.gone": ("a.one", "a.two")}
    assert registry.resolve("a.gone") == ("a.one", "a.two")
    assert registry.resolve("a.kept") == ("a.kept", "a.part")
    assert registry.resolve("a.part") == ("a.part",)
    assert "a.gone" in registry.aliases and "a.gone" not in registry
    with pytest.raises(KeyError, match=r"a\.nothing"):
        registry.resolve("a.nothing")
    # The aliases survive the packaged JSON form.
    data = json.loads(registry.to_json())
    assert data["aliases"] == {"a.kept": ["a.kept", "a.part"], "a.gone": ["a.one", "a.two"]}
    assert ClauseRegistry.from_json(registry.to_json()).aliases == registry.aliases


def test_a_malformed_or_chained_split_is_refused(tmp_path: Path) -> None:
    bad = _SPLIT_PAGE.replace("**Split from** `a.kept`.", "**Split from** a.kept")
    with pytest.raises(ValueError, match=r"p.md:\d+: expected \*\*Split from\*\*"):
        parse_spec_pages(_page(tmp_path, bad))
    chained = _SPLIT_PAGE.replace(
        "**MUST** — one thing.", "**MUST** — one thing.\n\n**Split from** `a.older`."
    )
    with pytest.raises(ValueError, match=r"'a\.kept' is split from 'a\.older'"):
        parse_spec_pages(_page(tmp_path, chained))


def test_the_spec_keeps_the_ids_it_split() -> None:
    registry = ClauseRegistry.load()
    assert registry.resolve("train.hooks") == ("train.after-update", "train.after-train-iter")
    assert registry.resolve("train.insufficient-data") == (
        "train.insufficient-data",
        "train.idle-calls",
    )
    assert registry.resolve("unroll.num-env-steps") == (
        "unroll.num-env-steps",
        "unroll.budget-whole-unroll",
        "unroll.budget-run-end",
    )
