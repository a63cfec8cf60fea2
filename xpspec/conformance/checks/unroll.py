"""Checks of unroll accounting (clauses ``unroll.*``)."""

from __future__ import annotations

import math

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.views import (
    iterations,
    steps_per_iteration,
    trainer_scenario,
    unrolled_per_iteration,
)
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import Trace

__all__ = [
    "check_all_envs_step",
    "check_budget_run_end",
    "check_budget_whole_unroll",
    "check_drain",
    "check_fractional_schedule",
    "check_global_counter",
    "check_num_env_steps",
    "crossing",
    "interacting",
]


def _expected_unroll(sc: TrainerScenario, count: int) -> list[int]:
    u = sc.trainer.unroll_length
    return [math.floor(k * u) - math.floor((k - 1) * u) for k in range(1, count + 1)]


def env_step_counts(sc: TrainerScenario, trace: Trace) -> list[int]:
    """Per iteration: the env-step count (items unrolled, counted as the scenario says) at its
    end."""
    by_iteration = unrolled_per_iteration(trace, sc.trainer.env_step_count)
    count, out = 0, []
    for it in iterations(trace):
        count += by_iteration.get(it, 0)
        out.append(count)
    return out


def interacting(sc: TrainerScenario, trace: Trace) -> list[bool]:
    """Per iteration: whether interaction was still allowed when it began, i.e. fewer than
    ``num_env_steps`` env steps (counted as the scenario says) had been taken
    (``unroll.num-env-steps``). Without a budget, always."""
    limit = sc.trainer.num_env_steps
    return [not limit or before < limit for before in [0, *env_step_counts(sc, trace)[:-1]]]


def crossing(sc: TrainerScenario, trace: Trace) -> list[bool]:
    """Per iteration: whether it is the one whose unroll reaches the env-step budget (it began
    below the budget and ended at or above it); how much it unrolls is
    ``unroll.budget-whole-unroll``'s to check. Without a budget, never."""
    limit = sc.trainer.num_env_steps
    return [
        bool(limit) and allowed and after >= limit
        for allowed, after in zip(interacting(sc, trace), env_step_counts(sc, trace))
    ]


def _gate(sc: TrainerScenario, trace: Trace, want: list[int]) -> list[int]:
    """``want`` with the iterations that may not interact set to 0."""
    return [n if allowed else 0 for n, allowed in zip(want, interacting(sc, trace))]


def check_fractional_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.fractional-schedule: iteration ``k`` unrolls ``floor(k·u) − floor((k−1)·u)``
    vector steps. Iterations an env-step budget closes are left to ``unroll.num-env-steps``
    (they unroll nothing, whatever ``u`` says), and the one that reaches the budget to
    ``unroll.budget-whole-unroll``."""
    sc = trainer_scenario(scenario)
    got = steps_per_iteration(trace)
    want = _expected_unroll(sc, len(got))
    last = crossing(sc, trace)
    for it, n, m, allowed, reaches in zip(
        iterations(trace), want, got, interacting(sc, trace), last
    ):
        if allowed and not reaches and n != m:
            raise CheckFailure(
                f"vector steps per iteration with unroll_length {sc.trainer.unroll_length} "
                f"(first difference in iteration {it})",
                _gate(sc, trace, want),
                got,
                iteration=it,
            )


def check_all_envs_step(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.all-envs-step: every vector step steps every env: each ``env_step`` event
    names each of the scenario's ``B`` envs exactly once."""
    sc = trainer_scenario(scenario)
    want = tuple(range(sc.env.num_envs))
    for e in trace.of_kind("env_step"):
        if tuple(sorted(e.env)) != want:
            raise CheckFailure(
                f"iteration {e.iteration}: envs stepped by one vector step", want, tuple(e.env)
            )


def _drained(sc: TrainerScenario, count: int) -> list[int]:
    """Vector steps drained by iterations ``1 … count`` under ``unroll.drain``, without a
    budget."""
    drain = sc.trainer.drain
    assert drain is not None
    want, queued = [], 0
    for k in range(1, count + 1):
        queued = min(queued + drain.arrivals[(k - 1) % len(drain.arrivals)], drain.queue_size)
        n = min(queued, drain.max_unroll_length)
        queued -= n
        want.append(n)
    return want


def check_drain(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.drain: the vector steps drained per iteration follow the stated arrivals,
    queue size and maximum drain. The iteration that reaches an env-step budget is left to
    ``unroll.budget-whole-unroll``."""
    sc = trainer_scenario(scenario)
    got = steps_per_iteration(trace)
    want = _gate(sc, trace, _drained(sc, len(got)))
    last = crossing(sc, trace)
    for it, n, m, reaches in zip(iterations(trace), want, got, last):
        if not reaches and n != m:
            raise CheckFailure(
                f"vector steps drained per iteration (first difference in iteration {it})",
                want,
                got,
                iteration=it,
            )


def check_num_env_steps(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.num-env-steps: no iteration unrolls once the env-step count has reached the
    budget."""
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


def check_budget_whole_unroll(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.budget-whole-unroll: the iteration that reaches the env-step budget unrolls all
    the vector steps its schedule (exact or drain) gives it."""
    sc = trainer_scenario(scenario)
    got = steps_per_iteration(trace)
    if sc.trainer.drain is not None:
        want = _drained(sc, len(got))
    else:
        want = _expected_unroll(sc, len(got))
    counts = env_step_counts(sc, trace)
    for it, n, m, after, reaches in zip(iterations(trace), want, got, counts, crossing(sc, trace)):
        if reaches and n != m:
            raise CheckFailure(
                f"iteration {it} reaches the budget of {sc.trainer.num_env_steps} env steps "
                f"(count {after} at its end): vector steps it unrolls",
                n,
                m,
                iteration=it,
            )


def check_budget_run_end(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.budget-run-end: with ``num_iterations`` the run lasts exactly that many
    iterations, also past the budget; without, it ends with the iteration at whose end the
    env-step count reaches the budget. A run the framework ended by raising (the trace
    header's ``stopped``) is not judged short here: its end is the exception's."""
    sc = trainer_scenario(scenario)
    its = iterations(trace)
    stopped = bool(trace.header.get("stopped"))
    limit, total = sc.trainer.num_env_steps, sc.trainer.num_iterations
    if total:
        if len(its) > total or (len(its) < total and not stopped):
            raise CheckFailure(
                f"iterations of a run with num_iterations {total} and a budget of {limit} "
                "env steps",
                total,
                len(its),
                iteration=min(len(its), total) + 1,
            )
        return
    counts = env_step_counts(sc, trace)
    ends = [it for it, after in zip(its, counts) if after >= limit]
    if ends and its[-1] != ends[0]:
        raise CheckFailure(
            f"last iteration of the run (the budget of {limit} env steps is reached in "
            f"iteration {ends[0]}, which ends the run)",
            ends[0],
            its[-1],
            iteration=ends[0] + 1,
        )
    if not ends and not stopped:
        raise CheckFailure(
            f"env-step count at the end of the run (the run ends once it reaches the budget "
            f"of {limit})",
            f">= {limit}",
            counts[-1] if counts else 0,
            iteration=len(its) + 1,
        )


def check_global_counter(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """unroll.global-counter: the counter starts at 0 and grows by one at the start of every
    iteration (``counter_mode="per-iteration"``) or before every update
    (``"per-mini-batch"``), never otherwise; each ``iteration`` and ``update`` event carries
    its value after that increment. Under ``"per-mini-batch-after"`` (variant count-before)
    it grows right after every update, whose event carries the value before; under
    ``"per-iteration-after"`` (variant iteration-count-before) it grows at the end of every
    iteration, so the ``iteration`` and ``update`` events of iteration ``k`` carry ``k - 1``;
    under ``"per-train-call-after"`` (variant call-count-before) it grows by a train call's
    updates once the call has made them, so they all carry the updates of earlier calls."""
    sc = trainer_scenario(scenario)
    counter = 0
    made = 0  # updates of the current train call (per-train-call-after)
    for e in trace.events:
        if made and e.kind in ("train_call", "iteration", "iteration_end"):
            counter, made = counter + made, 0
        if e.kind == "iteration_end" and sc.trainer.counter_mode == "per-iteration-after":
            counter += 1
        elif e.kind == "iteration":
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
            if sc.trainer.counter_mode == "per-mini-batch-after":
                counter += 1
            elif sc.trainer.counter_mode == "per-train-call-after":
                made += 1
