"""Checks of unroll accounting (clauses ``unroll.*``)."""

from __future__ import annotations

import math
from collections import defaultdict

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
    "interacting",
]


def _expected_unroll(sc: TrainerScenario, count: int) -> list[int]:
    u = sc.trainer.unroll_length
    return [math.floor(k * u) - math.floor((k - 1) * u) for k in range(1, count + 1)]


def interacting(sc: TrainerScenario, trace: Trace) -> list[bool]:
    """Per iteration: whether interaction was still allowed when it began, i.e. fewer than
    ``num_env_steps`` env steps (counted as the scenario says) had been taken
    (``unroll.num-env-steps``). Without a budget, always."""
    limit, count, out = sc.trainer.num_env_steps, 0, []
    by_iteration: dict[int, int] = defaultdict(int)
    for e in trace.of_kind("env_step"):
        by_iteration[e.iteration] += sum(
            1 for t in e.step_type if sc.trainer.env_step_count == "all" or t != StepType.FIRST
        )
    for it in iterations(trace):
        out.append(not limit or count < limit)
        count += by_iteration.get(it, 0)
    return out


def _gate(sc: TrainerScenario, trace: Trace, want: list[int]) -> list[int]:
    """``want`` with the iterations that may not interact set to 0."""
    return [n if allowed else 0 for n, allowed in zip(want, interacting(sc, trace))]


def check_fractional_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.fractional-schedule: iteration ``k`` unrolls ``floor(k·u) − floor((k−1)·u)``
    vector steps. Iterations an env-step budget closes are left to ``unroll.num-env-steps``
    (they unroll nothing, whatever ``u`` says)."""
    sc = trainer_scenario(scenario)
    got = steps_per_iteration(trace)
    want = _expected_unroll(sc, len(got))
    for it, n, m, allowed in zip(iterations(trace), want, got, interacting(sc, trace)):
        if allowed and n != m:
            raise CheckFailure(
                f"vector steps per iteration with unroll_length {sc.trainer.unroll_length} "
                f"(first difference in iteration {it})",
                _gate(sc, trace, want),
                got,
                iteration=it,
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
    want = _gate(sc, trace, want)
    if got != want:
        raise CheckFailure("vector steps drained per iteration", want, got)


def check_num_env_steps(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """No unroll once the budget is reached; without ``num_iterations`` the run ends with the
    iteration that reached it."""
    sc = trainer_scenario(scenario)
    steps = dict(zip(iterations(trace), steps_per_iteration(trace)))
    allowed = dict(zip(iterations(trace), interacting(sc, trace)))
    for it, ok in allowed.items():
        if not ok and steps[it]:
            raise CheckFailure(
                f"iteration {it} unrolled after the budget of {sc.trainer.num_env_steps} env steps",
                0,
                steps[it],
                iteration=it,
            )
    closed = [it for it, ok in allowed.items() if not ok]
    if not sc.trainer.num_iterations and closed:
        raise CheckFailure(
            "the run goes on after num_env_steps is reached",
            f"last iteration {closed[0] - 1}",
            closed[-1],
            iteration=closed[0],
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
