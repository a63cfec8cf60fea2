"""The outcomes a cell of the compliance site shows: a key (its colour and filter), a symbol
(readable without colour) and a label, with the legend's sentence.

The statuses of :data:`xpspec.conformance.outcomes.STATUSES` are split as the matrix splits
them (:func:`xpspec.conformance.report.render_markdown`): a deviation is a *finding* when no
spec variant reproduces it, a failure of a SHOULD-level clause is a *miss*, and a failure
that only follows from another clause's (blame: the earliest in pipeline order is the cause)
is *downstream* of it; a cell not applicable because the adapter does not yet drive a
capability the framework has (an ``[[absent]]`` entry of kind ``not-yet``) is *owed* a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xpspec.conformance.outcomes import STATUSES

__all__ = ["LOOKS", "Look", "cell_label", "cell_note", "classify", "look"]


@dataclass(frozen=True)
class Look:
    """How one outcome is shown."""

    key: str
    """The CSS class suffix and filter value (``o-<key>``)."""
    symbol: str
    label: str
    meaning: str


LOOKS: tuple[Look, ...] = (
    Look("pass", "✓", "pass", "every check of the clause passed"),
    Look(
        "deviation",
        "≈",
        "deviation",
        "differs from the spec's default as a declared spec variant does, which the reference "
        "trainer run as that variant reproduces (the cell names the variant)",
    ),
    Look(
        "finding",
        "◆",
        "finding",
        "differs from the spec in a way no spec variant reproduces; the adapter's "
        "expectations file declares it as a finding, with its source",
    ),
    Look(
        "should-miss",
        "△",
        "miss (SHOULD)",
        "a SHOULD-level clause is not met: a warning (a failure only under --strict)",
    ),
    Look(
        "downstream",
        "↓",
        "FAIL ↓",
        "fails only as a consequence of another clause's failure on the same run (the cell "
        "names that clause, which is the one to fix)",
    ),
    Look("fail", "✗", "FAIL", "a MUST-level clause fails on its own"),
    Look(
        "cut-short",
        "✂",
        "cut short",
        "every run that could judge the clause stopped before it was judged on all of it: the "
        "framework ended the run by raising (a finding the expectations file declares), or the "
        "check stopped at a declared finding of another of its clauses (the cell names that "
        "clause): no verdict, and no pass",
    ),
    Look("error", "⚠", "ERROR", "the adapter raised, or returned something malformed: no verdict"),
    Look("crash", "☠", "CRASH", "the adapter's worker process died: no verdict"),
    Look("timeout", "◷", "TIMEOUT", "an operation overran its time limit: no verdict"),
    Look("resource", "▣", "RESOURCE", "the worker went over its memory limit: no verdict"),
    Look(
        "not-applicable",
        "–",
        "n/a",
        "no check of the clause could run on this implementation (the detail says why)",
    ),
    Look(
        "owed",
        "○",
        "n/a (row owed)",
        "not applicable because the adapter does not yet drive a capability the framework has "
        "(its expectations file says with which API): a row is owed",
    ),
)
_BY_KEY = {lk.key: lk for lk in LOOKS}
assert set(STATUSES) <= set(_BY_KEY)


def look(key: str) -> Look:
    """The look of an outcome key; raises ``KeyError`` naming the keys for another."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"expected an outcome key in {sorted(_BY_KEY)}, got {key!r}") from None


def classify(cell: Mapping[str, Any]) -> str:
    """The outcome key of a matrix cell (a cell of a compliance document)."""
    status = str(cell["status"])
    if status == "deviation" and cell.get("variant") == "finding":
        return "finding"
    if status == "fail" and cell.get("level", "MUST") == "SHOULD":
        return "should-miss"
    if status == "fail" and cell.get("downstream_of"):
        return "downstream"
    if status == "not-applicable" and cell.get("owed"):
        return "owed"
    return look(status).key


def cell_note(cell: Mapping[str, Any]) -> str:
    """What a cell says beyond its outcome: the spec variant a deviation follows, the clause
    a downstream failure follows from, the clause a check stopped at before judging a cut-short
    cell's ("" for none)."""
    key = classify(cell)
    if key == "downstream":
        return str(cell["downstream_of"])
    if key == "cut-short":
        return str(cell.get("stopped_at", ""))
    return "" if key in ("finding", "should-miss") else str(cell.get("variant") or "")


def cell_label(cell: Mapping[str, Any]) -> str:
    """The words in a cell, as the Markdown matrix has them: the outcome, with the variant
    a deviation follows or the clause a downstream failure follows from."""
    key, note = classify(cell), cell_note(cell)
    if key == "downstream":
        return f"FAIL ↓ {note}"
    return f"{look(key).label} ({note})" if note else look(key).label
