"""``[[absent]]`` entries (xpspec/conformance/expectations.py): every capability an adapter does
not declare says why, the loader refuses an entry it could not use, and the reason reaches the
n/a cell and the matrix.

The capabilities of the shipped adapters are read from their source (the ``capabilities=``
argument of the ``AdapterInfo`` their ``info()`` builds), not by importing them: these tests
run without any framework installed."""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.compliance_site import classify
from xpspec.conformance.engine import Session
from xpspec.conformance.expectations import ABSENT_KINDS, Expectations, ExpectationsError
from xpspec.conformance.harness.loading import adapter_target, expectations_path, registrations
from xpspec.conformance.report import RunReport, column
from xpspec.protocol.adapter import CAPABILITIES, AdapterInfo
from xpspec.protocol.scenario import Scenario
from xpspec.refimpl.adapter import RefimplAdapter

SHIPPED = sorted(
    name for name, regs in registrations().items() if regs[0].target.startswith("xpspec.adapters.")
)


@dataclass(frozen=True)
class Declared:
    """The capabilities an adapter's source declares: always, or under a condition (a
    conditional expression in the ``capabilities=`` argument, e.g. a framework version)."""

    always: frozenset[str]
    conditional: frozenset[str]


def _source(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"expected a source file of {module}, got none"
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _declared(module: str, cls: str) -> Declared:
    """The capabilities class ``cls`` of ``module`` declares, following a base class imported
    from another module when ``cls`` has no ``info`` of its own."""
    tree = _source(module)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            for kw in call.keywords:
                if kw.arg == "capabilities":
                    return _strings(kw.value)
    for base in node.bases:
        assert isinstance(base, ast.Name), f"expected a named base class of {cls}, got {base}"
        origin = next(
            n.module
            for n in tree.body
            if isinstance(n, ast.ImportFrom) and any(a.name == base.id for a in n.names)
        )
        assert origin is not None
        return _declared(origin, base.id)
    raise AssertionError(f"expected {module}.{cls} to pass capabilities= to AdapterInfo")


def _strings(expr: ast.expr) -> Declared:
    always: set[str] = set()
    conditional: set[str] = set()

    def walk(node: ast.AST, under_condition: bool) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            (conditional if under_condition else always).add(node.value)
        for child in ast.iter_child_nodes(node):
            walk(child, under_condition or isinstance(node, ast.IfExp))

    walk(expr, False)
    return Declared(frozenset(always), frozenset(conditional - always))


def _declaration(name: str) -> Declared:
    module, _, cls = adapter_target(name).partition(":")
    return _declared(module, cls)


def test_every_shipped_adapter_is_read() -> None:
    assert len(SHIPPED) == 10, SHIPPED
    for name in SHIPPED:
        declared = _declaration(name)
        assert declared.always, f"{name}: expected declared capabilities, got none"
        assert declared.always | declared.conditional <= set(CAPABILITIES), name


@pytest.mark.parametrize("name", SHIPPED)
def test_one_absent_entry_per_undeclared_capability(name: str) -> None:
    """Each capability the adapter never declares has exactly one entry, for every version;
    one it always declares has none; one it declares under a condition (a framework version)
    may have entries limited by ``versions``."""
    declared = _declaration(name)
    path = expectations_path(name)
    assert path is not None, f"{name}: expected an expectations file, got none"
    entries = Expectations.load(path).absent
    problems = []
    for capability in CAPABILITIES:
        mine = [a for a in entries if a.capability == capability]
        if capability in declared.always and mine:
            problems.append(f"{capability}: declared, expected no [[absent]] entry, got {mine}")
        elif capability in declared.conditional and any(not a.versions for a in mine):
            problems.append(f"{capability}: declared for some versions, expected `versions`")
        elif capability not in declared.always | declared.conditional and (
            len(mine) != 1 or mine[0].versions
        ):
            problems.append(
                f"{capability}: not declared, expected one [[absent]] entry without "
                f"`versions`, got {len(mine)}"
            )
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def _load(tmp_path: Path, text: str) -> Expectations:
    path = tmp_path / "x.expectations.toml"
    path.write_text(text, encoding="utf-8")
    return Expectations.load(path)


@pytest.mark.parametrize(
    ("entry", "where", "expected", "got"),
    [
        (
            'capability = "checkpoints"\nkind = "not-yet"',
            "absent[0].capability",
            "a capability of the protocol; close matches: checkpoint",
            "'checkpoints'",
        ),
        (
            'capability = "checkpoint"\nkind = "later"',
            "absent[0].kind",
            f"one of {', '.join(ABSENT_KINDS)}",
            "'later'",
        ),
        ('kind = "not-yet"', "absent[0].capability", "a non-empty string (required)", "nothing"),
        (
            'capability = "stack"\nkind = "no-feature"\nclause = "stack.x"',
            "absent[0].clause",
            "a key of [[absent]] (capability, kind, reason, link, versions)",
            "'clause'",
        ),
    ],
)
def test_an_unusable_entry_says_expected_and_got(
    tmp_path: Path, entry: str, where: str, expected: str, got: str
) -> None:
    reason = "" if "clause" in entry else '\nreason = "r"'
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, f"[[absent]]\n{entry}{reason}\n")
    assert str(info.value).endswith(f"{where}: expected {expected}, got {got}")


def test_a_capability_named_twice_is_refused(tmp_path: Path) -> None:
    entry = '[[absent]]\ncapability = "stack"\nkind = "no-feature"\nreason = "r"\n'
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, entry * 2)
    assert str(info.value).endswith(
        "absent[1].capability: expected a capability no earlier entry names "
        "(absent[0] names it), got 'stack'"
    )


def test_versions_select_the_entry_of_the_run(tmp_path: Path) -> None:
    text = (
        '[[absent]]\ncapability = "nstep"\nkind = "no-feature"\nreason = "old"\nversions = "<2.7"\n'
    )
    loaded = _load(tmp_path, text)
    assert loaded.for_version("2.6.0").why_absent("nstep") is not None
    assert loaded.for_version("2.7.0").why_absent("nstep") is None


class _NoState(RefimplAdapter):
    """The reference adapter without its ``state`` capability."""

    def info(self) -> AdapterInfo:
        full = super().info()
        kept = tuple(c for c in full.capabilities if c != "state")
        return AdapterInfo(full.name, full.framework, full.framework_version, capabilities=kept)


def _needing_state() -> tuple[Check, str, Scenario]:
    """A check that needs ``state`` and a catalogue scenario it judges."""
    return next(
        (c, n, s)
        for c in ALL_CHECKS
        if "state" in c.requires
        for n, s in CATALOG.items()
        if c.capability == s.kind and c.applies(s)
    )


@pytest.mark.parametrize("kind", list(ABSENT_KINDS))
def test_the_reason_reaches_the_cell(tmp_path: Path, kind: str) -> None:
    """A check needing ``state`` is n/a quoting the entry; the matrix cell marks a row owed
    for ``not-yet`` alone."""
    expectations = _load(
        tmp_path,
        f'[[absent]]\ncapability = "state"\nkind = "{kind}"\nreason = "fw 1.0 has X"\n'
        'link = "https://example.invalid/x"\n',
    )
    engine = Session(_NoState(), "nostate", expectations)
    check, name, scenario = _needing_state()
    outcome = engine.evaluate(check, name, scenario)
    assert outcome.status == "not-applicable"
    assert outcome.message == (
        f"adapter declares no capability 'state': {ABSENT_KINDS[kind]}: fw 1.0 has X "
        "(https://example.invalid/x)"
    )
    assert outcome.absent == kind
    record = {"type": "result", "test": "t", **outcome.__dict__}
    header = {"type": "header", "adapter": "x", "framework": "x", "framework_version": "1"}
    cell = column(RunReport(tmp_path / "x.jsonl", header, [record], {"status": "complete"}))[
        "cells"
    ][check.clauses[0]]
    assert cell["reasons"] == [outcome.message]
    assert classify(cell) == ("owed" if kind == "not-yet" else "not-applicable")


def test_without_an_entry_the_reason_is_unchanged() -> None:
    engine = Session(_NoState(), "nostate")
    check, name, scenario = _needing_state()
    outcome = engine.evaluate(check, name, scenario)
    assert (outcome.message, outcome.absent) == ("adapter declares no capability 'state'", "")
