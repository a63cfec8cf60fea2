"""What the checkpoint rows' tests share (TorchRL, Tianshou): reading a checkpointed run's
trace, and the outcome of a resume that restores the buffer and counters but starts every env
from a reset."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.resume import (
    check_resume_accounting,
    check_resume_buffer,
    check_resume_env,
    check_resume_rng,
    check_resume_same_trace,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, IterationStart, Resume, Trace

__all__ = ["assert_restored_but_reset", "context_of", "iteration_starts", "resume_of"]


def context_of(adapter: Any) -> Context:
    """A check context whose reference and re-runs are ``adapter``'s own trainer runs (the
    resume checks compare an adapter with itself)."""
    return Context(adapter.run_trainer, adapter.run_trainer, adapter.run_trainer)


def resume_of(trace: Trace) -> Resume:
    """The one ``resume`` event of a checkpointed run."""
    (resume,) = [e for e in trace.events if isinstance(e, Resume)]
    return resume


def iteration_starts(trace: Trace) -> list[tuple[int, int]]:
    """Each iteration and the counter it started with."""
    return [(e.iteration, e.counter) for e in trace.events if isinstance(e, IterationStart)]


def assert_restored_but_reset(adapter: Any, scenario: TrainerScenario, saved: int) -> None:
    """``scenario`` run checkpointed and uninterrupted by ``adapter``: up to the save the runs
    are one; the restored buffer is the saved one (``saved`` items, resume-buffer passes) and
    the counters go on; every env starts from a reset at the resume, so resume-env,
    resume-accounting and resume-same-trace fail on their own clauses and resume-rng cannot be
    judged."""
    assert scenario.checkpoint is not None
    k = scenario.checkpoint.after_iteration
    trace = adapter.run_trainer(scenario)
    uninterrupted = adapter.run_trainer(replace(scenario, checkpoint=None))
    index = list(trace.events).index(resume_of(trace))
    assert list(trace.events[:index]) == list(uninterrupted.events[:index])
    assert len(resume_of(trace).saved) == saved
    context = context_of(adapter)
    check_resume_buffer(scenario, trace, context)
    assert iteration_starts(trace) == iteration_starts(uninterrupted)
    first = next(e for e in trace.events[index + 1 :] if isinstance(e, EnvStep))
    assert first.iteration == k + 1
    assert set(first.t) == {0} and set(first.step_type) == {int(StepType.FIRST)}
    for check, clause in (
        (check_resume_env, "resume.env-continues"),
        (check_resume_accounting, "resume.accounting-restored"),
        (check_resume_same_trace, "resume.same-trace"),
    ):
        with pytest.raises(CheckFailure) as failure:
            check(scenario, trace, context)
        assert failure.value.clause == clause
    with pytest.raises(Unsupported, match="cannot be judged"):
        check_resume_rng(scenario, trace, context)
