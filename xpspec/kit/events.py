"""Trace events from the time steps and items an adapter read from its framework: the
columnar ``EnvStep``, ``Store``, ``Exclude``, ``Hold`` and ``RunEnd`` of
:mod:`xpspec.protocol.trace`, with every value as the JSON form wants it (ints and floats)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xpspec.kit.items import item_columns
from xpspec.kit.steps import Step
from xpspec.protocol.trace import EnvStep, Exclude, Hold, Item, RunEnd, Store

__all__ = ["LoggedRows", "env_step", "exclude", "hold", "logged_rows", "run_end", "store"]


_Ints = tuple[int, ...]
_Floats = tuple[float, ...]


def _time_step_columns(
    steps: Sequence[Step],
) -> tuple[_Ints, _Ints, _Ints, _Ints, _Floats, _Floats]:
    """The ``env``, ``episode``, ``t``, ``step_type``, ``reward`` and ``discount`` columns."""
    env, episode, t = item_columns([s.item for s in steps])
    return (
        env,
        episode,
        t,
        tuple(int(s.step_type) for s in steps),
        tuple(float(s.reward) for s in steps),
        tuple(float(s.discount) for s in steps),
    )


def env_step(iteration: int, steps: Sequence[Step]) -> EnvStep:
    """One vector step: the time step each env was in, the policy state it received and the
    action taken there."""
    state = tuple(s.state for s in steps)
    return EnvStep(
        iteration, *_time_step_columns(steps), state, tuple(int(s.action) for s in steps)
    )


def store(iteration: int, steps: Sequence[Step]) -> Store:
    """Items written to the buffer, in write order, with the fields stored for them."""
    return Store(iteration, *_time_step_columns(steps), tuple(float(s.annotation) for s in steps))


def exclude(iteration: int, items: Sequence[Item], reason: str) -> Exclude:
    """Items the preprocessing left out of storage, with its reason."""
    return Exclude(iteration, *item_columns(items), reason)


def hold(iteration: int, items: Sequence[Item]) -> Hold:
    """Items the preprocessing holds back."""
    return Hold(iteration, *item_columns(items))


def run_end(iterations: int, env_steps: int, policy: str, held: Sequence[Item] = ()) -> RunEnd:
    """The end of a run: the items still held meet the pending policy ``policy``."""
    return RunEnd(iterations, env_steps, policy, *item_columns(held))


class LoggedRows(Protocol):
    """One entry of a training loop's log, as an adapter recorded it at its seams: a vector
    step (``env``) or a write to the buffer (``store``), with its time steps."""

    @property
    def kind(self) -> str: ...

    @property
    def steps(self) -> Sequence[Step]: ...


def logged_rows(
    iteration: int, rows: Sequence[LoggedRows]
) -> tuple[list[EnvStep | Store], int, int]:
    """The ``env_step`` and ``store`` events of one iteration's logged rows, in log order,
    with how many time steps they unrolled and stored."""
    events: list[EnvStep | Store] = []
    unrolled = stored = 0
    for entry in rows:
        if entry.kind == "env":
            events.append(env_step(iteration, entry.steps))
            unrolled += len(entry.steps)
        else:
            events.append(store(iteration, entry.steps))
            stored += len(entry.steps)
    return events, unrolled, stored
