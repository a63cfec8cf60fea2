"""Checks of unroll accounting (clauses ``unroll.*``)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from conformance.checks.base import CheckFailure, Context
from conformance.checks.views import (
    iterations,
    steps_per_iteration,
    trainer_scenario,
)
from conformance.scenario import Scenario, TrainerScenario
from refimpl.step_type import StepType
from refimpl.trace import Trace

__all__ = [
    "check_all_envs_step",
    "check_drain",
    "check_fractional_schedule",
    "check_global_counter",
    "check_num_env_steps",
]


def _expected_unroll(sc: TrainerScenario, count: int) -> list[int]:
    u = sc.trainer.unroll_length
    return [math.floor(k * u) - math.floor((k - 1) * u) for k in range(1, count + 1)]


def check_fractional_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    got = steps_per_iteration(trace)
    want = _expected_unroll(sc, len(got))
    if sc.trainer.num_env_steps:
        # Interaction may stop early (unroll.num-env-steps): compare the interacting prefix.
        n = next(
            (
                i
                for i, g in enumerate(got)
                if g == 0
                and want[i] > 0
                and sum(got[:i]) * sc.env.num_envs >= sc.trainer.num_env_steps
            ),
            len(got),
        )
        got, want = got[:n], want[:n]
    if got != want:
        raise CheckFailure(
            f"vector steps per iteration with unroll_length {sc.trainer.unroll_length}", want, got
        )


def check_all_envs_step(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    want = tuple(range(sc.env.num_envs))
    for e in trace.of_kind("env_step"):
        if tuple(sorted(e.env)) != want:
            raise CheckFailure(
                f"iteration {e.iteration}: envs stepped by one vector step", want, tuple(e.env)
            )


def check_drain(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    drain = sc.trainer.drain
    assert drain is not None
    got = steps_per_iteration(trace)
    want, queued = [], 0
    for k in range(1, len(got) + 1):
        queued = min(queued + drain.arrivals[(k - 1) % len(drain.arrivals)], drain.queue_size)
        n = min(queued, drain.max_unroll_length)
        queued -= n
        want.append(n)
    if got != want:
        raise CheckFailure("vector steps drained per iteration", want, got)


def check_num_env_steps(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    limit = sc.trainer.num_env_steps
    count, stopped_at = 0, None
    by_iteration: dict[int, list[Any]] = defaultdict(list)
    for e in trace.of_kind("env_step"):
        by_iteration[e.iteration].append(e)
    for it in iterations(trace):
        steps = by_iteration.get(it, [])
        if steps and count >= limit:
            raise CheckFailure(
                f"iteration {it} unrolled after {count} env steps",
                f"no unroll once {limit} are reached",
                len(steps),
            )
        for e in steps:
            count += sum(
                1 for t in e.step_type if sc.trainer.env_step_count == "all" or t != StepType.FIRST
            )
        if count >= limit and stopped_at is None:
            stopped_at = it
    if (
        not sc.trainer.num_iterations
        and stopped_at is not None
        and iterations(trace)[-1] != stopped_at
    ):
        raise CheckFailure(
            "the run goes on after num_env_steps is reached",
            f"last iteration {stopped_at}",
            iterations(trace)[-1],
        )


def check_global_counter(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    counter = 0
    for e in trace.events:
        if e.kind == "iteration":
            if sc.trainer.counter_mode == "per-iteration":
                counter += 1
            if e.counter != counter:
                raise CheckFailure(
                    f"counter at the start of iteration {e.iteration}", counter, e.counter
                )
        elif e.kind == "update":
            if sc.trainer.counter_mode == "per-mini-batch":
                counter += 1
            if e.counter != counter:
                raise CheckFailure(
                    f"counter at update {e.index} of call {e.call}", counter, e.counter
                )
