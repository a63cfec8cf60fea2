"""Expectations files: the deviations an adapter declares up front.

An adapter ``NAME`` may ship ``adapters/NAME.expectations.toml`` (or pass any path)::

    [[deviation]]
    clause = "unroll.fractional-schedule"
    variant = "alf-float-carry"        # optional: the spec variant the framework follows
    reason = "ALF carries the fraction in an IEEE double"
    link = "https://..."
    scenarios = ["alf-float-u1/10"]    # optional: limit to these catalogue scenarios

A failing check whose clause is declared becomes a *known deviation*; a declared entry that
matches no failure is *stale* and reported as a warning. SHOULD-level clauses may also be
listed under ``[[silence]]`` to turn their warnings off.

A behaviour that no spec variant reproduces is a *finding*, declared apart so that nobody
mistakes it for a modelled deviation::

    [[finding]]
    clauses = ["train.insufficient-data", "train.updates-per-call"]
    reason = "SliceSampler raises when no trajectory is long enough, which ends the run"
    link = "https://..."
    scenarios = ["long-windows"]       # optional
    stopped = "Did not find a single trajectory"  # optional

A failing check of one of those clauses (in those scenarios) is reported as a deviation whose
variant is ``finding``; the matrix shows it as a finding. With ``stopped``, the finding covers
only runs the framework ended by raising: the trace header's ``stopped`` must contain that
text. A finding also explains a failure that the declared variants of the scenario leave
unexplained (e.g. a run that stopped early under a modelled deviation).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Deviation", "Expectations", "Finding", "Silence"]


@dataclass(frozen=True)
class Deviation:
    clause: str
    reason: str
    variant: str = ""
    link: str = ""
    scenarios: tuple[str, ...] = ()

    def matches(self, clause: str, scenario: str) -> bool:
        return self.clause == clause and (not self.scenarios or scenario in self.scenarios)


@dataclass(frozen=True)
class Finding:
    """A framework behaviour that violates clauses and that no spec variant reproduces."""

    clauses: tuple[str, ...]
    reason: str
    link: str = ""
    scenarios: tuple[str, ...] = ()
    stopped: str = ""
    """Text the trace header's ``stopped`` must contain ("" matches every run)."""

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
class Expectations:
    deviations: tuple[Deviation, ...] = ()
    source: str = ""
    silenced: tuple[Silence, ...] = ()
    findings: tuple[Finding, ...] = ()

    @classmethod
    def load(cls, path: Path | None) -> Expectations:
        """Read a TOML expectations file; a missing ``path`` means no expectations."""
        if path is None or not path.exists():
            return cls()
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        out = []
        for i, entry in enumerate(data.get("deviation", [])):
            for required in ("clause", "reason"):
                if not isinstance(entry.get(required), str) or not entry[required]:
                    raise ValueError(
                        f"{path}: deviation[{i}].{required}: expected a non-empty string, got {entry.get(required)!r}"
                    )
            unknown = set(entry) - {"clause", "reason", "variant", "link", "scenarios"}
            if unknown:
                raise ValueError(f"{path}: deviation[{i}]: unknown keys {sorted(unknown)}")
            out.append(
                Deviation(
                    entry["clause"],
                    entry["reason"],
                    entry.get("variant", ""),
                    entry.get("link", ""),
                    tuple(entry.get("scenarios", ())),
                )
            )
        silenced = []
        for i, entry in enumerate(data.get("silence", [])):
            for required in ("clause", "reason"):
                if not isinstance(entry.get(required), str) or not entry[required]:
                    raise ValueError(
                        f"{path}: silence[{i}].{required}: expected a non-empty string, got {entry.get(required)!r}"
                    )
            silenced.append(Silence(entry["clause"], entry["reason"]))
        findings = []
        for i, entry in enumerate(data.get("finding", [])):
            clauses = entry.get("clauses")
            if (
                not isinstance(clauses, list)
                or not clauses
                or not all(isinstance(c, str) for c in clauses)
            ):
                raise ValueError(
                    f"{path}: finding[{i}].clauses: expected a non-empty list of clause ids, got {clauses!r}"
                )
            if not isinstance(entry.get("reason"), str) or not entry["reason"]:
                raise ValueError(
                    f"{path}: finding[{i}].reason: expected a non-empty string, got {entry.get('reason')!r}"
                )
            unknown = set(entry) - {"clauses", "reason", "link", "scenarios", "stopped"}
            if unknown:
                raise ValueError(f"{path}: finding[{i}]: unknown keys {sorted(unknown)}")
            if not isinstance(entry.get("stopped", ""), str):
                raise ValueError(
                    f"{path}: finding[{i}].stopped: expected a string, got {entry['stopped']!r}"
                )
            findings.append(
                Finding(
                    tuple(clauses),
                    entry["reason"],
                    entry.get("link", ""),
                    tuple(entry.get("scenarios", ())),
                    entry.get("stopped", ""),
                )
            )
        return cls(tuple(out), str(path), tuple(silenced), tuple(findings))

    def finding(self, clauses: tuple[str, ...], scenario: str, stopped: str = "") -> Finding | None:
        """The finding that covers a failure of ``clauses`` in ``scenario`` (whose trace
        header's ``stopped`` is ``stopped``), if any."""
        return next((f for f in self.findings if f.covers(clauses, scenario, stopped)), None)

    def silence(self, clauses: tuple[str, ...]) -> Silence | None:
        """The silence entry covering all of ``clauses``, if any."""
        for entry in self.silenced:
            if all(c == entry.clause for c in clauses):
                return entry
        return None

    def find(self, clauses: tuple[str, ...], scenario: str) -> Deviation | None:
        for d in self.deviations:
            if any(d.matches(c, scenario) for c in clauses):
                return d
        return None
