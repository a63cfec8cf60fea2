"""Deliberately perturbed copies of committed reference traces, for the explain tests: each
returns the perturbed events and the index at which they first part from the reference."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.vectors import committed
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Event, Trace

__all__ = ["extra_update", "reference", "store_one_iteration_later", "with_events"]


def reference(name: str) -> tuple[Scenario, Trace]:
    """A catalogue scenario and its committed reference trace."""
    scenario = CATALOG[name]
    vector = committed(scenario)
    assert vector is not None, f"{name} has no committed vector"
    return scenario, vector.trace()


def with_events(trace: Trace, events: list[Event], **header: Any) -> Trace:
    return Trace(tuple(events), {**trace.header, **header})


def store_one_iteration_later(events: list[Any], iteration: int, env: int) -> int:
    """Move the first store of ``iteration`` naming ``env`` into the next iteration (after
    that iteration's own unroll); returns where it was."""
    where = next(
        n
        for n, e in enumerate(events)
        if e.kind == "store" and e.iteration == iteration and env in e.env
    )
    store = events.pop(where)
    unroll = max(
        n
        for n, e in enumerate(events)
        if e.kind in ("env_step", "store", "hold", "exclude") and e.iteration == iteration + 1
    )
    events.insert(unroll + 1, replace(store, iteration=iteration + 1))
    return where


def extra_update(events: list[Any], call: int) -> int:
    """Give train call ``call`` a second update (with its ``after_update`` hook) after its
    first one; returns where the extra update is."""
    first = next(n for n, e in enumerate(events) if e.kind == "update" and e.call == call)
    update, hook = events[first], events[first + 1]
    assert hook.kind == "hook" and hook.name == "after_update", hook
    events[first + 2 : first + 2] = [replace(update, index=update.index + 1), hook]
    return first + 2
