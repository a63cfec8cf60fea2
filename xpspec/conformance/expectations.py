"""Expectations files: the deviations an adapter declares up front.

An adapter module ``x.py`` may keep ``x.expectations.toml`` beside it, found by
:func:`xpspec.conformance.harness.loading.expectations_path` (or any path may be passed)::

    [[deviation]]
    clause = "unroll.fractional-schedule"
    variant = "alf-float-carry"        # optional: the spec variant the framework follows
    reason = "ALF carries the fraction in an IEEE double"
    link = "https://..."
    scenarios = ["alf-float-u1/10"]    # optional: limit to these catalogue scenarios
    kinds = ["trainer"]                # optional: limit to these kinds of scenario
    except_kinds = ["env"]             # optional, instead of kinds: every kind but these
    versions = ">=0.1,<0.2"            # optional: limit to these framework versions

A ``variant`` must be one the clause names on its spec page, and one the reference
implementation can be run as (:data:`xpspec.conformance.variants.VARIANTS`): the loader rejects a
variant with no executable model, with the reason
(:data:`xpspec.conformance.variants.UNDECLARABLE`).

A failing check whose clause is declared becomes a *known deviation*; a declared entry that
matches no failure on a scenario that can show it is *stale* and reported as a warning. SHOULD-level clauses may also be
listed under ``[[silence]]`` to turn their warnings off.

A behaviour that no spec variant reproduces is a *finding*, declared apart so that nobody
mistakes it for a modelled deviation::

    [[finding]]
    clauses = ["train.insufficient-data", "train.updates-per-call"]
    reason = "SliceSampler raises when no trajectory is long enough, which ends the run"
    link = "https://..."
    scenarios = ["long-windows"]       # optional
    stopped = "Did not find a single trajectory"  # optional
    versions = ">=0.12"                # optional

A failing check of one of those clauses (in those scenarios) is reported as a deviation whose
variant is ``finding``; the matrix shows it as a finding. With ``stopped``, the finding covers
only runs the framework ended by raising: the trace header's ``stopped`` must contain that
text. A finding also explains a failure that the declared variants of the scenario leave
unexplained (e.g. a run that stopped early under a modelled deviation).

With ``versions`` (a PEP 440 specifier, as pip reads one), a deviation or finding applies
only to a run of a framework version the specifier contains (pre-releases included): the
version the adapter's ``info()`` reports, which :meth:`Expectations.for_version` filters by
when the engine opens a session. An expectations file can so describe several releases of its
framework, as a version sweep (``nox -s sweep``) runs them; an entry without ``versions``
applies to every release.

Every capability of the protocol (:data:`xpspec.protocol.adapter.CAPABILITIES`) that the
adapter does not declare has one ``[[absent]]`` entry saying why, so that the checks it leaves
not applicable do not hide a capability the framework has::

    [[absent]]
    capability = "checkpoint"
    kind = "not-yet"                   # "no-feature" | "cannot-drive" | "not-yet"
    reason = "skrl 2.1.1 has Memory.save / Memory.load (skrl/memories/torch/base.py)"
    link = "https://..."               # optional
    versions = "<2.7"                  # optional: a capability declared from some version on

``no-feature``: the framework has no such feature (the reason cites the version and what it
has instead); ``cannot-drive``: it has one that the adapter cannot drive honestly (the reason
says why: a documented precondition, a broken build); ``not-yet``: it has one, and the row
that drives it is owed (the reason names the API). The n/a reason of every check left not
applicable for that capability quotes the entry, and the compliance matrix shows the cells
left n/a by a ``not-yet`` entry apart (rows owed).

A clause id that the spec has split into several clauses (an *alias*,
:meth:`xpspec.conformance.clauses.ClauseRegistry.resolve`) is accepted wherever a clause id is: the
entry applies to every part, and a deviation with a ``variant`` to the parts that name it.
"""

from __future__ import annotations

import difflib
import functools
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ABSENT_KINDS",
    "Absent",
    "Deviation",
    "Expectations",
    "ExpectationsError",
    "Finding",
    "Silence",
]

ABSENT_KINDS: Final = {
    "no-feature": "the framework has no such feature",
    "cannot-drive": "the framework has it but the adapter cannot drive it honestly",
    "not-yet": "the framework has it and the row that drives it is owed",
}
"""The kinds of an ``[[absent]]`` entry, with the words an n/a reason says for each."""


class ExpectationsError(ValueError):
    """An expectations file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Deviation:
    clause: str
    reason: str
    variant: str = ""
    link: str = ""
    scenarios: tuple[str, ...] = ()
    versions: str = ""
    """The framework versions the entry applies to (a PEP 440 specifier; "" for all)."""
    entry: str = field(default="", compare=False)
    """Where the entry is in its file (``deviation[3]``), for messages."""
    kinds: tuple[str, ...] = ()
    """The kinds of scenario the entry applies to (``trainer``, ``env``, ...; empty for all):
    a framework whose env operation returns every time step may reset in the same step only
    inside its trainer."""
    except_kinds: tuple[str, ...] = ()
    """The kinds of scenario the entry does not apply to (instead of ``kinds``, so that an
    entry meant for every kind but one keeps covering the kinds added after it)."""

    def matches(self, clause: str, scenario: str, kind: str = "") -> bool:
        return self.applies_to(scenario, kind) and self.clause == clause

    def applies_to(self, scenario: str, kind: str = "") -> bool:
        """Whether the entry covers catalogue scenario ``scenario`` of kind ``kind`` (""
        when the kind is unknown: only the name is matched)."""
        return (
            (not self.scenarios or scenario in self.scenarios)
            and (not self.kinds or not kind or kind in self.kinds)
            and kind not in self.except_kinds
        )


@dataclass(frozen=True)
class Finding:
    """A framework behaviour that violates clauses and that no spec variant reproduces."""

    clauses: tuple[str, ...]
    reason: str
    link: str = ""
    scenarios: tuple[str, ...] = ()
    stopped: str = ""
    """Text the trace header's ``stopped`` must contain ("" matches every run)."""
    versions: str = ""
    """The framework versions the entry applies to (a PEP 440 specifier; "" for all)."""
    entry: str = field(default="", compare=False)
    """Where the entry is in its file (``finding[3]``), for messages."""

    def covers(self, clauses: tuple[str, ...], scenario: str, stopped: str = "") -> bool:
        return (
            bool(set(clauses) & set(self.clauses))
            and (not self.scenarios or scenario in self.scenarios)
            and (not self.stopped or self.stopped in stopped)
        )


@dataclass(frozen=True)
class Silence:
    """A SHOULD-level clause whose failures the adapter accepts, with the reason."""

    clause: str
    reason: str


@dataclass(frozen=True)
class Absent:
    """Why the adapter does not declare a capability (one ``[[absent]]`` entry)."""

    capability: str
    kind: str
    """A key of :data:`ABSENT_KINDS`."""
    reason: str
    link: str = ""
    versions: str = ""
    """The framework versions the entry applies to (a PEP 440 specifier; "" for all)."""
    entry: str = field(default="", compare=False)
    """Where the entry is in its file (``absent[3]``), for messages."""

    def describe(self) -> str:
        """What an n/a reason adds after "adapter declares no capability 'x'": the kind in
        words, the reason and the link."""
        text = f"{ABSENT_KINDS[self.kind]}: {self.reason}"
        return f"{text} ({self.link})" if self.link else text


@dataclass(frozen=True)
class Expectations:
    deviations: tuple[Deviation, ...] = ()
    source: str = ""
    silenced: tuple[Silence, ...] = ()
    findings: tuple[Finding, ...] = ()
    absent: tuple[Absent, ...] = ()
    """Why each capability the adapter does not declare is absent."""

    @classmethod
    def load(cls, path: Path | None) -> Expectations:
        """Read a TOML expectations file; ``None`` means no expectations.

        Raises :class:`ExpectationsError` naming the file and the entry for a file that does
        not exist or is not TOML, an entry with a missing, mistyped or unknown key, and a
        clause id the spec does not define.
        """
        if path is None:
            return cls()
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ExpectationsError(
                f"{path}: expected an expectations file, got no such file"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ExpectationsError(f"{path}: expected a UTF-8 text file, got {exc}") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ExpectationsError(f"{path}: expected TOML, got a syntax error: {exc}") from None
        return _parse(data, path)

    def for_version(self, version: str) -> Expectations:
        """The expectations of a run of framework version ``version``: every entry without
        ``versions``, and those whose specifier contains ``version`` (pre-releases
        included). Raises :class:`ExpectationsError` naming the file and the first entry
        with ``versions`` when ``version`` is not a PEP 440 version (an entry keyed by
        version cannot be decided for it)."""
        entries: list[Deviation | Finding | Absent] = [
            *self.deviations,
            *self.findings,
            *self.absent,
        ]
        keyed = [e for e in entries if e.versions]
        if not keyed:
            return self
        try:
            parsed = Version(version)
        except InvalidVersion:
            first = keyed[0]
            raise ExpectationsError(
                f"{self.source or 'expectations'}: {first.entry or 'an entry'}.versions "
                f"({first.versions!r}): expected the framework's version to be a PEP 440 "
                f"version, got {version!r}"
            ) from None

        def applies(spec: str) -> bool:
            return not spec or SpecifierSet(spec).contains(parsed, prereleases=True)

        return replace(
            self,
            deviations=tuple(d for d in self.deviations if applies(d.versions)),
            findings=tuple(f for f in self.findings if applies(f.versions)),
            absent=tuple(a for a in self.absent if applies(a.versions)),
        )

    def why_absent(self, capability: str) -> Absent | None:
        """The ``[[absent]]`` entry of ``capability``, if any (the first, after
        :meth:`for_version` the one of the run's version)."""
        return next((a for a in self.absent if a.capability == capability), None)

    def finding(self, clauses: tuple[str, ...], scenario: str, stopped: str = "") -> Finding | None:
        """The finding that covers a failure of ``clauses`` in ``scenario`` (whose trace
        header's ``stopped`` is ``stopped``), if any."""
        return next((f for f in self.findings if f.covers(clauses, scenario, stopped)), None)

    def stop(self, scenario: str, stopped: str) -> Finding | None:
        """The finding that declares the stop of ``scenario``'s run (a finding with a
        ``stopped`` text that the trace header's ``stopped`` contains), whatever its clauses:
        a check that passes on what came before the stop is not shown to hold, and the stop is
        what the finding explains."""
        return next(
            (
                f
                for f in self.findings
                if f.stopped
                and f.stopped in stopped
                and (not f.scenarios or scenario in f.scenarios)
            ),
            None,
        )

    def silence(self, clauses: tuple[str, ...]) -> Silence | None:
        """The silence entry covering all of ``clauses``, if any."""
        for entry in self.silenced:
            if all(c == entry.clause for c in clauses):
                return entry
        return None

    def find(self, clauses: tuple[str, ...], scenario: str, kind: str = "") -> Deviation | None:
        """The deviation declared for one of ``clauses`` in catalogue scenario ``scenario``
        (of kind ``kind``), if any."""
        for d in self.deviations:
            if any(d.matches(c, scenario, kind) for c in clauses):
                return d
        return None


_Entry = dict[str, Any]
_TABLES: Final = ("deviation", "silence", "finding", "absent")
_KEYS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    # table: (required keys, optional keys)
    "deviation": (
        ("clause", "reason"),
        ("variant", "link", "scenarios", "kinds", "except_kinds", "versions"),
    ),
    "silence": (("clause", "reason"), ()),
    "finding": (("clauses", "reason"), ("link", "scenarios", "stopped", "versions")),
    "absent": (("capability", "kind", "reason"), ("link", "versions")),
}
_LISTS: Final = ("clauses", "scenarios", "kinds", "except_kinds")
"""Keys whose value is a list of strings; every other key is a string."""


def _parse(data: dict[str, Any], path: Path) -> Expectations:
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise _error(
            path,
            unknown[0],
            "only [[deviation]], [[silence]], [[finding]] and [[absent]] tables",
            unknown[0],
        )
    tables: dict[str, list[_Entry]] = {}
    for table in _TABLES:
        entries = data.get(table, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise _error(path, table, f"an array of tables ([[{table}]] entries)", entries)
        for i, entry in enumerate(entries):
            _check_entry(path, f"{table}[{i}]", entry, *_KEYS[table])
        tables[table] = entries
    _check_absent_unique(path, tables["absent"])
    return Expectations(
        tuple(
            Deviation(
                part,
                e["reason"],
                e.get("variant", ""),
                e.get("link", ""),
                tuple(e.get("scenarios", ())),
                e.get("versions", ""),
                f"deviation[{i}]",
                tuple(e.get("kinds", ())),
                tuple(e.get("except_kinds", ())),
            )
            for i, e in enumerate(tables["deviation"])
            for part in _parts(e["clause"], e.get("variant", ""))
        ),
        str(path),
        tuple(
            Silence(part, e["reason"]) for e in tables["silence"] for part in _parts(e["clause"])
        ),
        tuple(
            Finding(
                tuple(dict.fromkeys(part for c in e["clauses"] for part in _parts(c))),
                e["reason"],
                e.get("link", ""),
                tuple(e.get("scenarios", ())),
                e.get("stopped", ""),
                e.get("versions", ""),
                f"finding[{i}]",
            )
            for i, e in enumerate(tables["finding"])
        ),
        tuple(
            Absent(
                e["capability"],
                e["kind"],
                e["reason"],
                e.get("link", ""),
                e.get("versions", ""),
                f"absent[{i}]",
            )
            for i, e in enumerate(tables["absent"])
        ),
    )


def _check_entry(
    path: Path, where: str, entry: _Entry, required: tuple[str, ...], optional: tuple[str, ...]
) -> None:
    table = where.split("[", 1)[0]
    for key in sorted(entry):
        if key not in required + optional:
            keys = ", ".join(required + optional)
            raise _error(path, f"{where}.{key}", f"a key of [[{table}]] ({keys})", key)
    for key in required:
        if key not in entry:
            kind = "a non-empty list of clause ids" if key in _LISTS else "a non-empty string"
            raise ExpectationsError(
                f"{path}: {where}.{key}: expected {kind} (required), got nothing"
            )
    for key, value in entry.items():
        if key in _LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise _error(path, f"{where}.{key}", "a list of non-empty strings", value)
            if key in required and not value:
                raise _error(path, f"{where}.{key}", "a non-empty list of clause ids", value)
        elif not isinstance(value, str) or (key in required and not value):
            kind = "a non-empty string" if key in required else "a string"
            raise _error(path, f"{where}.{key}", kind, value)
    if "versions" in entry:
        _check_versions(path, f"{where}.versions", entry["versions"])
    if "kinds" in entry and "except_kinds" in entry:
        raise _error(
            path,
            f"{where}.except_kinds",
            "either kinds or except_kinds, not both",
            entry["except_kinds"],
        )
    for key in ("kinds", "except_kinds"):
        for i, kind in enumerate(entry.get(key, ())):
            if kind not in _scenario_kinds():
                raise _error(
                    path,
                    f"{where}.{key}[{i}]",
                    f"a kind of scenario ({', '.join(_scenario_kinds())})",
                    kind,
                )
    if "clause" in entry:
        _check_clause(path, f"{where}.clause", entry["clause"])
        if entry.get("variant"):
            _check_variant(path, f"{where}.variant", entry["clause"], entry["variant"])
    for i, clause in enumerate(entry.get("clauses", ())):
        _check_clause(path, f"{where}.clauses[{i}]", clause)
    if "capability" in entry:
        from xpspec.protocol.adapter import CAPABILITIES

        if entry["capability"] not in CAPABILITIES:
            close = difflib.get_close_matches(entry["capability"], CAPABILITIES, n=3, cutoff=0.6)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise _error(
                path,
                f"{where}.capability",
                f"a capability of the protocol{hint}",
                entry["capability"],
            )
    if "kind" in entry and entry["kind"] not in ABSENT_KINDS:
        raise _error(path, f"{where}.kind", f"one of {', '.join(ABSENT_KINDS)}", entry["kind"])


def _check_absent_unique(path: Path, entries: list[_Entry]) -> None:
    """One ``[[absent]]`` entry per capability and ``versions``: a second could never be read."""
    seen: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(entries):
        key = (entry["capability"], entry.get("versions", ""))
        if key in seen:
            raise _error(
                path,
                f"absent[{i}].capability",
                f"a capability no earlier entry names (absent[{seen[key]}] names it)",
                entry["capability"],
            )
        seen[key] = i


def _parts(clause: str, variant: str = "") -> tuple[str, ...]:
    """The clauses an entry naming ``clause`` applies to: the parts of an alias (those that
    name ``variant``, when given), else ``clause`` itself."""
    from xpspec.conformance.clauses import ClauseRegistry

    registry = ClauseRegistry.load()
    parts = registry.resolve(clause)
    if variant and len(parts) > 1:
        parts = tuple(p for p in parts if variant in registry[p].variants)
    return parts


def _check_clause(path: Path, where: str, clause: str) -> None:
    ids = _clause_ids()
    if clause not in ids:
        close = difflib.get_close_matches(clause, ids, n=3, cutoff=0.6)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise _error(path, where, f"a clause id of the spec{hint}", clause)


def _check_versions(path: Path, where: str, versions: str) -> None:
    """``versions`` must be a PEP 440 specifier that names at least one bound."""
    expected = "a PEP 440 version specifier such as '>=2.0,<2.1'"
    try:
        spec = SpecifierSet(versions)
    except InvalidSpecifier:
        raise _error(path, where, expected, versions) from None
    if not len(spec):
        raise _error(path, where, expected, versions)


def _check_variant(path: Path, where: str, clause: str, variant: str) -> None:
    """A declared variant must be one the clause names and one refimpl can be run as: a
    declaration that no model reproduces could never explain a failure."""
    from xpspec.conformance.clauses import ClauseRegistry
    from xpspec.conformance.variants import undeclarable

    registry = ClauseRegistry.load()
    parts = registry.resolve(clause)
    named = [v for p in parts for v in registry[p].variants]
    if variant not in named:
        listed = ", ".join(named) if named else "none"
        of = clause if len(parts) == 1 else f"{clause} (an alias of {', '.join(parts)})"
        raise _error(path, where, f"a variant {of} names (variants: {listed})", variant)
    for part in _parts(clause, variant):
        reason = undeclarable(part, variant)
        if reason:
            raise ExpectationsError(
                f"{path}: {where}: {part}/{variant} cannot be declared: {reason}"
            )


@functools.lru_cache(maxsize=1)
def _clause_ids() -> tuple[str, ...]:
    from xpspec.conformance.clauses import ClauseRegistry

    registry = ClauseRegistry.load()
    return (*registry.ids(), *registry.aliases)


def _error(path: Path, where: str, expected: str, got: object) -> ExpectationsError:
    return ExpectationsError(f"{path}: {where}: expected {expected}, got {got!r}")


@functools.cache
def _scenario_kinds() -> tuple[str, ...]:
    """The ``kind`` of every scenario type of the protocol, in declaration order."""
    from typing import get_args

    from xpspec.protocol.scenario import Scenario

    return tuple(t.__dataclass_fields__["kind"].default for t in get_args(Scenario))
