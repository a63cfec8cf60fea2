"""Shared by the conformance tests: run every check of one capability on the catalogue."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.engine import Outcome, Session
from xpspec.protocol.adapter import Adapter
from xpspec.protocol.trace import Advantages, Trace


def _failing(adapter: Adapter, kind: str) -> Iterator[tuple[str, Check, Outcome]]:
    """Every failing outcome of every check of capability ``kind`` on the catalogue scenarios
    of that kind. Every outcome must be pass or fail: an error or a not-applicable result
    fails the calling test."""
    session = Session(adapter, type(adapter).__name__, timeout=60)
    for name, scenario in CATALOG.items():
        if scenario.kind != kind:
            continue
        for check in ALL_CHECKS:
            if check.capability != kind or not check.applies(scenario):
                continue
            outcome = session.evaluate(check, name, scenario)
            # A check may find the trace cannot be judged for its clause (resume-rng, where
            # another part of a resumed trainer was lost already): never an error.
            unjudged = outcome.status == "not-applicable" and "cannot be judged" in outcome.message
            assert outcome.status in ("pass", "fail") or unjudged, outcome.message
            if outcome.status == "fail":
                yield name, check, outcome


def failures(adapter: Adapter, kind: str) -> dict[str, list[str]]:
    """Failing check name -> the catalogue scenarios of ``kind`` it fails on."""
    failed: dict[str, list[str]] = {}
    for name, check, _ in _failing(adapter, kind):
        failed.setdefault(check.name, []).append(name)
    return failed


def blamed(adapter: Adapter, kind: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Over the catalogue scenarios of ``kind``: clause -> scenarios where a failure is
    charged to it as the cause, and clause -> scenarios where it fails downstream of another
    failure (see :mod:`xpspec.conformance.blame`)."""
    causes: dict[str, list[str]] = {}
    downstream: dict[str, list[str]] = {}
    for name, check, outcome in _failing(adapter, kind):
        into = downstream if outcome.downstream_of else causes
        for clause in outcome.charged:
            into.setdefault(clause, []).append(f"{name} ({check.name})")
    return causes, downstream


def assert_breaks(adapter: Adapter, kind: str, breaks: str, also: set[str]) -> None:
    """``adapter`` fails check ``breaks`` on some catalogue scenario of ``kind``, and fails no
    check beyond ``breaks`` and the ones its breakage drags ``also``."""
    failed = failures(adapter, kind)
    name = type(adapter).__name__
    assert breaks in failed, f"{name} passed {breaks}"
    assert set(failed) <= {breaks, *also}, (
        f"{name} also failed {sorted(set(failed) - {breaks, *also})}"
    )


def skew_advantages(trace: Trace) -> Trace:
    """``trace`` with every advantage 1 too high and normalised values that are not
    standardised: two learner failures of different outputs (learner.gae and
    learner.stats-exclude-bootstrap), neither a consequence of the other."""
    events = tuple(
        replace(
            e,
            advantage=tuple(a + 1.0 for a in e.advantage),
            normalized=tuple(2.0 * n + 0.5 for n in e.normalized),
        )
        if isinstance(e, Advantages)
        else e
        for e in trace.events
    )
    return Trace(events, trace.header)
