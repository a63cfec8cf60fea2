"""What one run of the suite says about one mutant: the verdict of the test command.

A mutant is *killed by a check* when some check reported ``fail``; a run that went red only
through adapter failures (``error``, ``crash``, ``timeout``, ``resource``), an incomplete
run, a runner that could not start the adapter, or a report that is missing is *red for
another reason*; a complete run with every check passing is a *survivor*. A mutant the type
checker rejects never reaches the suite: it is *stillborn* (:mod:`mutation.typecheck`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["MARKER", "RunClass", "Verdict", "classify_run", "parse_verdict"]

RunClass = Literal["check-fail", "other-red", "survived", "stillborn"]

MARKER: Final = "xpspec-mutation-verdict: "
"""The prefix of the one line the probe prints with its verdict as JSON."""

_ADAPTER_FAILURES: Final = frozenset({"error", "crash", "timeout", "resource"})


@dataclass(frozen=True)
class Verdict:
    """The class of one suite run, with the failing checks (``check[scenario]``) that
    support it, and for ``other-red`` the reason in one line."""

    run_class: RunClass
    exit_code: int
    failed: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    reason: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)

    def to_line(self) -> str:
        body = {
            "class": self.run_class,
            "exit": self.exit_code,
            "failed": list(self.failed),
            "broken": list(self.broken),
            "reason": self.reason,
            "counts": dict(self.counts),
        }
        return MARKER + json.dumps(body, sort_keys=True)


def classify_run(exit_code: int, report: Iterable[Mapping[str, Any]] | None) -> Verdict:
    """The verdict of one run of ``xpspec run`` from its exit code and the records of its
    ``--report`` file (``None`` when the run wrote none)."""
    if report is None:
        return Verdict("other-red", exit_code, reason=f"no report (exit {exit_code})")
    records = list(report)
    results = [r for r in records if r.get("type") == "result"]
    footer = next((r for r in records if r.get("type") == "footer"), None)
    failed = tuple(_name(r) for r in results if r.get("status") == "fail")
    broken = tuple(_name(r) for r in results if r.get("status") in _ADAPTER_FAILURES)
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.get("status"))] = counts.get(str(r.get("status")), 0) + 1
    if failed:
        return Verdict("check-fail", exit_code, failed, broken, counts=counts)
    if footer is None:
        return Verdict("other-red", exit_code, (), broken, "report has no footer", counts)
    if broken:
        return Verdict(
            "other-red", exit_code, (), broken, f"{len(broken)} adapter failures", counts
        )
    if footer.get("status") != "complete":
        reason = f"run {footer.get('status')}: {footer.get('message', '')}".strip()
        return Verdict("other-red", exit_code, (), (), reason, counts)
    if exit_code != 0:
        return Verdict("other-red", exit_code, reason=f"exit {exit_code}", counts=counts)
    return Verdict("survived", exit_code, counts=counts)


def parse_verdict(output: str) -> Verdict | None:
    """The verdict the probe printed in ``output``, or ``None`` if it printed none."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            body = json.loads(line[len(MARKER) :])
            return Verdict(
                body["class"],
                int(body["exit"]),
                tuple(body["failed"]),
                tuple(body["broken"]),
                body["reason"],
                body["counts"],
            )
    return None


def _name(record: Mapping[str, Any]) -> str:
    return f"{record.get('check')}[{record.get('scenario')}]"
