"""The exact comparisons of a trainer trace with the reference trace (the committed vector of a
catalogue scenario, else a run of the reference trainer): checks ``exact-schedule`` and
``exact-stores``. Each charges its first difference to the clause of what differs."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice, zip_longest
from typing import Any

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.views import (
    call_statuses,
    calls_per_iteration,
    items_of,
    iterations,
    steps_per_iteration,
)
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Item, Trace

__all__ = ["check_exact_schedule", "check_exact_stores"]


def _schedule(trace: Trace) -> dict[str, list[Any]]:
    """What exact-schedule compares: vector steps and train calls per iteration, and the status
    of every call (all three counted in one pass over the trace, shared with the other
    per-iteration views)."""
    return {
        "unroll": steps_per_iteration(trace),
        "calls": calls_per_iteration(trace),
        "status": call_statuses(trace),
    }


def check_exact_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """The schedule equals the reference trainer's. The first difference is charged to its
    own clause: unrolled vector steps to ``unroll.fractional-schedule``, calls per iteration
    to ``train.synced-schedule``, a call's status to ``train.warmup-gate`` (when either side
    says ``warmup``) or ``train.insufficient-data``; the earliest iteration wins, and within
    one iteration the unroll comes before the calls and the calls before their statuses."""
    reference = ctx.reference(scenario)
    want, got = _schedule(reference), _schedule(trace)
    if got == want:
        return
    differences: list[tuple[int, int, str, str]] = []  # (iteration, stage, clause, key)
    numbers = (
        iterations(reference)
        if len(iterations(reference)) >= len(iterations(trace))
        else iterations(trace)
    )
    for stage, (key, clause) in enumerate(
        (("unroll", "unroll.fractional-schedule"), ("calls", "train.synced-schedule"))
    ):
        first = _first_difference(want[key], got[key])
        if first is not None:
            differences.append((numbers[first], stage, clause, key))
    first = _first_difference(want["status"], got["status"])
    if first is not None:
        calls = [*reference.of_kind("train_call"), None]
        ours = [*trace.of_kind("train_call"), None]
        at = [c.iteration for c in (calls[first], ours[first]) if c is not None]
        pair = want["status"][first : first + 1] + got["status"][first : first + 1]
        clause = "train.warmup-gate" if "warmup" in pair else "train.insufficient-data"
        differences.append((min(at), 2, clause, "status"))
    iteration, _, clause, key = min(differences)
    raise CheckFailure(
        f"{key} per iteration vs the reference trainer (first difference in iteration "
        f"{iteration}, charged to {clause})",
        want[key],
        got[key],
        clause=clause,
        iteration=iteration,
    )


def _first_difference(want: list[Any], got: list[Any]) -> int | None:
    """The first index at which two lists differ (a missing element counts), or None."""
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return i
    return None if len(want) == len(got) else min(len(want), len(got))


def _stores(trace: Trace) -> Iterator[tuple[int, tuple[Item, ...]]]:
    """What exact-stores compares: each store's iteration and items, in write order."""
    return ((e.iteration, tuple(items_of(e))) for e in trace.of_kind("store"))


def check_exact_stores(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """The stores equal the reference trainer's. The first difference is charged to
    ``preprocess.store-order`` when both sides stored the same items up to that store's
    iteration, and to ``preprocess.conservation`` when they did not. (The two sequences are
    compared as they are read, one store of each at a time.)"""
    reference = ctx.reference(scenario)
    pairs = enumerate(zip_longest(_stores(reference), _stores(trace)))
    first, (a, b) = next(((n, pair) for n, pair in pairs if pair[0] != pair[1]), (-1, (None, None)))
    if first < 0:
        return
    iteration = min(side[0] for side in (a, b) if side is not None)

    def upto(stores: Iterator[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        return sorted(item for k, items in stores if k <= iteration for item in items)

    clause = (
        "preprocess.store-order"
        if upto(_stores(reference)) == upto(_stores(trace))
        else "preprocess.conservation"
    )
    raise CheckFailure(
        f"stores vs the reference trainer (first difference at store #{first}, iteration "
        f"{iteration}, charged to {clause})",
        list(islice(_stores(reference), first, first + 2)),
        list(islice(_stores(trace), first, first + 2)),
        clause=clause,
        iteration=iteration,
    )
