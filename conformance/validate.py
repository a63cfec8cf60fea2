"""Structural validation of traces from adapters.

A trace that names an item that is no real step of the scenario's env, or whose events are
out of order, is malformed: the adapter is reported as broken (an *error*, not a *fail*),
with the first bad event named. Unknown event kinds and missing fields are caught when the
trace is parsed (:meth:`refimpl.trace.Trace.from_jsonl`).
"""

from __future__ import annotations

from conformance.checks.views import items_of
from conformance.scenario import Scenario
from refimpl.toy_envs.spec import EnvSpec
from refimpl.trace import Item, Trace

__all__ = ["TraceError", "item_problem", "validate_trace"]

_COLUMNAR = ("env_step", "store", "exclude", "hold", "run_end")
_PER_ITERATION = (
    "env_step",
    "store",
    "exclude",
    "hold",
    "train_call",
    "update",
    "hook",
    "iteration_end",
)


class TraceError(ValueError):
    """A malformed trace; the message names the first bad event."""


def item_problem(env: EnvSpec, seed: int, item: Item) -> str | None:
    """Why ``item`` is not a time step of ``env``, or None if it is one."""
    e, k, t = item
    if not 0 <= e < env.num_envs:
        return f"env {e} outside [0, {env.num_envs})"
    if k < 0:
        return f"negative episode {k}"
    length = env.episode(seed, e, k).length
    if not 0 <= t <= length:
        return f"t {t} outside episode {k} of env {e} (t in [0, {length}])"
    return None


def validate_trace(scenario: Scenario, trace: Trace) -> None:
    """Raise :class:`TraceError` for the first malformed event of ``trace``."""
    iteration = 0
    ended = False
    for n, event in enumerate(trace.events):
        where = f"event #{n} ({event.kind})"
        if ended:
            raise TraceError(f"{where}: after run_end")
        if event.kind in _COLUMNAR:
            lengths = {len(event.env), len(event.episode), len(event.t)}
            if len(lengths) != 1:
                raise TraceError(f"{where}: columns of different lengths {sorted(lengths)}")
            for item in items_of(event):
                problem = item_problem(scenario.env, scenario.seed, item)
                if problem:
                    raise TraceError(f"{where}: item {item} decodes to no real step: {problem}")
        if scenario.kind != "trainer":
            continue
        if event.kind == "iteration":
            if event.iteration != iteration + 1:
                raise TraceError(f"{where}: iteration {event.iteration} follows {iteration}")
            iteration = event.iteration
        elif event.kind in _PER_ITERATION and event.iteration != iteration:
            raise TraceError(
                f"{where}: belongs to iteration {event.iteration} inside iteration {iteration}"
            )
        elif event.kind == "run_end":
            ended = True
    if scenario.kind == "trainer" and not ended:
        raise TraceError("the trace has no run_end event")
