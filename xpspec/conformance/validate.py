"""Structural validation of traces from adapters.

A trace that names an item that is no real step of the scenario's env, whose events are out
of order, or whose columns, step types, windows or loss masks no implementation can produce,
is malformed: the adapter is reported as broken (an *error*, not a *fail*), with the first
bad event named. Unknown event kinds and missing fields are caught when the trace is parsed
(:meth:`xpspec.protocol.trace.Trace.from_jsonl`). A well-formed trace may still be wrong (say, windows
of items it never stored): the checks fail it with :class:`CheckFailure`, never crash on it.
"""

from __future__ import annotations

import math
from typing import Any, Final

from xpspec.conformance.checks.item_index import Plans
from xpspec.conformance.checks.views import items_of
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Item, Trace

__all__ = ["TraceError", "item_problem", "validate_trace"]

_COLUMNAR = (
    "env_step",
    "store",
    "exclude",
    "hold",
    "run_end",
    "relabel",
    "nstep",
    "advantages",
    "shard",
)
_COLUMNS = {
    "env_step": ("step_type", "reward", "discount", "policy_state", "action"),
    "store": ("step_type", "reward", "discount", "annotation"),
    "relabel": ("goal_env", "goal_episode", "goal_t", "goal", "reward"),
    "nstep": ("target", "steps"),
    "advantages": ("advantage", "value_target", "normalized", "loss_mask"),
    "shard": ("stop",),
}
"""Further columns that must be as long as the item columns."""
_GOAL_SIZE: Final = 3
"""Coordinates of a goal of the toy goal env (``[e, k, t]``)."""
_STEP_TYPES: Final = frozenset(int(s) for s in StepType)
"""The step types' values, built once (not at every event)."""
_PER_ITERATION: Final = (
    "env_step",
    "store",
    "exclude",
    "hold",
    "train_call",
    "update",
    "hook",
    "iteration_end",
    "resume",
)


class TraceError(ValueError):
    """A malformed trace; the message names the first bad event."""


def item_problem(env: EnvSpec, seed: int, item: Item, plans: Plans | None = None) -> str | None:
    """Why ``item`` is not a time step of ``env``, or None if it is one (``plans``: the
    plans of ``env`` under ``seed``, remembered)."""
    e, k, t = item
    if not 0 <= e < env.num_envs:
        return f"env {e} outside [0, {env.num_envs})"
    if k < 0:
        return f"negative episode {k}"
    length = (plans(e, k) if plans is not None else env.episode(seed, e, k)).length
    if not 0 <= t <= length:
        return f"t {t} outside episode {k} of env {e} (t in [0, {length}])"
    return None


class _KnownItems:
    """:func:`item_problem` on one env and seed, each item decoded once: a trace names the
    same time steps again and again (stored, sampled, in windows), and a time step of the env
    stays one."""

    def __init__(self, env: EnvSpec, seed: int) -> None:
        self.env, self.seed = env, seed
        self.plans = Plans(env, seed)
        self.real: set[Item] = set()

    def problem(self, item: Item) -> str | None:
        try:
            if item in self.real:
                return None
        except TypeError:  # not hashable (a malformed item): decoded as it is
            return item_problem(self.env, self.seed, item, self.plans)
        problem = item_problem(self.env, self.seed, item, self.plans)
        if problem is None:
            self.real.add(item)
        return problem


def validate_trace(scenario: Scenario, trace: Trace) -> None:
    """Raise :class:`TraceError` for the first malformed event of ``trace``."""
    iteration = 0
    ended = False
    plans = _KnownItems(scenario.env, scenario.seed)
    for n, event in enumerate(trace.events):
        where = f"event #{n} ({event.kind})"
        if ended:
            raise TraceError(f"{where}: after run_end")
        if event.kind in _COLUMNAR:
            columns = _item_columns(event) + tuple(
                getattr(event, c) for c in _COLUMNS.get(event.kind, ())
            )
            lengths = {len(c) for c in columns}
            if len(lengths) != 1:
                raise TraceError(f"{where}: columns of different lengths {sorted(lengths)}")
            for item in _named_items(event):
                problem = plans.problem(item)
                if problem:
                    raise TraceError(f"{where}: item {item} decodes to no real step: {problem}")
            problem = _value_problem(event)
            if problem:
                raise TraceError(f"{where}: {problem}")
        if event.kind == "caller_episode":
            for name in ("before", "after"):
                held = getattr(event, name)
                if len(held) != 3 or held[0] < 0 or not {held[1], held[2]} <= {0, 1}:
                    raise TraceError(
                        f"{where}: {name} must be (transitions >= 0, terminated 0/1, "
                        f"truncated 0/1), got {held}"
                    )
        if event.kind == "resume":
            for item in (*event.saved, *event.restored):
                problem = plans.problem(item)
                if problem:
                    raise TraceError(f"{where}: item {item} decodes to no real step: {problem}")
        if event.kind in ("update", "sampled"):
            problem = _window_problem(scenario, event, plans)
            if problem:
                raise TraceError(f"{where}: {problem}")
        if event.kind == "train_sequence":
            problem = _sequence_problem(scenario, event, plans)
            if problem:
                raise TraceError(f"{where}: {problem}")
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


def _item_columns(event: Any) -> tuple[tuple[Any, ...], ...]:
    if event.kind == "advantages":
        return (event.t,)
    if event.kind == "shard":
        return (event.env, event.episode, event.start)
    return (event.env, event.episode, event.t)


def _named_items(event: Any) -> list[Item]:
    """The time steps an event names: its items, plus each relabeled transition's successor
    and goal source, and each shard piece's first and last row."""
    if event.kind == "advantages":
        return [(event.env, event.episode, t) for t in event.t]
    if event.kind == "shard":
        pieces = zip(event.env, event.episode, event.start, event.stop)
        return [(e, k, t) for e, k, a, b in pieces if b > a for t in (a, b - 1)]
    items = items_of(event)
    if event.kind == "relabel":
        items += [(e, k, t + 1) for e, k, t in items_of(event)]
        goals = zip(event.goal_env, event.goal_episode, event.goal_t)
        items += [(e, k, t) for e, k, t in goals if t != -1]
    return items


def _window_problem(scenario: Scenario, event: Any, plans: _KnownItems) -> str | None:
    """Windows no sampler can draw: a window of no items, an item that is no time step of
    the env, and (for an update) a loss mask not shaped like the windows."""
    for w, window in enumerate(event.windows):
        if not window:
            return f"window {w} has no items (expected window_length items, padding included)"
        for item in window:
            problem = None if item is None else plans.problem(item)
            if problem:
                return f"window {w}: item {item} decodes to no real step: {problem}"
    if event.kind == "update":
        shape = [len(w) for w in event.windows]
        if [len(m) for m in event.loss_mask] != shape:
            got = [len(m) for m in event.loss_mask]
            return f"loss mask of shape {got} (expected one row per window, as long as it: {shape})"
    return None


def _sequence_problem(scenario: Scenario, event: Any, plans: _KnownItems) -> str | None:
    """A trained sequence no learner can produce: no positions, an item that is no time step
    of the env, a state or loss-mask column not as long as the items, a loss mask that is
    not 0/1, a state below -1 (-1 marks a padding position the network was not run on)."""
    if not event.items:
        return "a sequence of no positions (expected sequence_length positions, padding included)"
    for item in event.items:
        problem = None if item is None else plans.problem(item)
        if problem:
            return f"item {item} decodes to no real step: {problem}"
    n = len(event.items)
    for name in ("state_in", "loss_mask"):
        if len(getattr(event, name)) != n:
            return f"{name} of length {len(getattr(event, name))} (expected one per position: {n})"
    if not set(event.loss_mask) <= {0, 1}:
        return f"loss mask values {sorted(set(event.loss_mask) - {0, 1})} (expected 0 or 1)"
    if min(event.state_in) < -1:
        return f"state {min(event.state_in)} (expected a count >= 0, or -1 at padding)"
    return None


def _value_problem(event: Any) -> str | None:
    """Values no implementation can mean: a step type that is none of FIRST, MID and LAST, a
    goal that is neither kept (-1, -1, -1) nor a time step, a goal value that is not a goal of
    the toy env (three finite numbers), a piece ending before it starts, a negative learner id."""
    if event.kind in ("env_step", "store"):
        bad = sorted(set(event.step_type) - _STEP_TYPES)
        if bad:
            return f"step type {bad[0]} (expected 0 FIRST, 1 MID or 2 LAST)"
    if event.kind == "relabel":
        for goal in zip(event.goal_env, event.goal_episode, event.goal_t):
            kept = goal == (-1, -1, -1)
            if not kept and min(goal) < 0:
                return f"goal {goal} (expected (-1, -1, -1) for a kept goal, or a time step)"
        for i, value in enumerate(event.goal):
            if len(value) != _GOAL_SIZE or not all(math.isfinite(v) for v in value):
                return f"goal value {value} of row {i} (expected {_GOAL_SIZE} finite numbers)"
    if event.kind == "shard":
        if event.learner < 0:
            return f"learner {event.learner} (expected >= 0)"
        if any(b < a for a, b in zip(event.start, event.stop)):
            return "a piece with stop < start"
    return None
