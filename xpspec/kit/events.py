"""Trace events from the time steps and items an adapter read from its framework: the
columnar ``EnvStep``, ``Store``, ``Exclude``, ``Hold`` and ``RunEnd`` of
:mod:`xpspec.protocol.trace`, with every value as the JSON form wants it (ints and floats)."""

from __future__ import annotations

from collections.abc import Sequence

from xpspec.kit.items import item_columns
from xpspec.kit.steps import Step
from xpspec.protocol.trace import EnvStep, Exclude, Hold, Item, RunEnd, Store

__all__ = ["env_step", "exclude", "hold", "run_end", "store"]


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
