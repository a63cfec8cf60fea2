"""The checks of checkpoint and resume (clauses ``resume.*``): a run saved after an iteration
and resumed in a fresh trainer goes on as the same implementation's uninterrupted run of the
same scenario does. The uninterrupted run is the adapter's own (not the reference trainer's),
so an implementation is judged against itself: a framework whose schedule or sampling differ
from the spec's still resumes correctly when it resumes into what it would have done."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import zip_longest

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import EnvStep, Event, Item, Resume, Trace, Update

__all__ = ["check_resume_buffer", "check_resume_same_trace", "resume_event"]

_ACCOUNTING = frozenset({"iteration", "train_call", "hook", "iteration_end", "run_end"})
"""Event kinds whose values are the trainer's counters and schedules."""


def _checkpointed(scenario: Scenario) -> TrainerScenario:
    if not isinstance(scenario, TrainerScenario) or scenario.checkpoint is None:
        raise TypeError(f"a trainer scenario with a checkpoint spec, got {scenario!r}")
    return scenario


def resume_event(scenario: Scenario, events: list[Event]) -> tuple[int, Resume]:
    """The one :class:`Resume` event of ``events`` and its index; it must follow the
    ``IterationEnd`` of ``checkpoint.after_iteration`` (clause ``resume.same-trace``)."""
    spec = _checkpointed(scenario).checkpoint
    assert spec is not None
    marks = [(i, e) for i, e in enumerate(events) if isinstance(e, Resume)]
    if len(marks) != 1:
        raise CheckFailure(
            "resume events in the trace of a checkpointed run",
            1,
            len(marks),
            clause="resume.same-trace",
        )
    index, event = marks[0]
    before = events[index - 1] if index > 0 else None
    placed = (
        event.iteration == spec.after_iteration
        and before is not None
        and before.kind == "iteration_end"
        and getattr(before, "iteration", None) == spec.after_iteration
    )
    if not placed:
        raise CheckFailure(
            "where the run resumed: right after the end of iteration checkpoint.after_iteration",
            f"resume {spec.after_iteration} after iteration_end {spec.after_iteration}",
            f"resume {event.iteration} after {before.kind if before else 'nothing'} "
            f"{getattr(before, 'iteration', '')}",
            clause="resume.same-trace",
            iteration=event.iteration,
        )
    return index, event


def _stored_before(events: list[Event], index: int) -> Counter[Item]:
    stored: Counter[Item] = Counter()
    for event in events[:index]:
        if event.kind == "store":
            stored.update(zip(event.env, event.episode, event.t))
    return stored


def check_resume_buffer(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.buffer-restored: the restored buffer holds what the saved one held, item for
    item in the same order (per env, oldest first: the same write heads evict the same items),
    and what the saved one held was stored before the checkpoint."""
    events = list(trace.events)
    index, event = resume_event(scenario, events)
    stored = _stored_before(events, index)
    never = [item for item in event.saved if item not in stored]
    if never:
        raise CheckFailure(
            "items the saved buffer held that the run never stored before the checkpoint",
            [],
            never[:10],
            clause="resume.buffer-restored",
            iteration=event.iteration,
        )
    if event.restored != event.saved:
        first = next(
            (i for i, (a, b) in enumerate(zip_longest(event.saved, event.restored)) if a != b), 0
        )
        raise CheckFailure(
            f"the restored buffer's items vs the saved buffer's ({len(event.saved)} saved, "
            f"{len(event.restored)} restored; first difference at position {first})",
            event.saved[first : first + 5],
            event.restored[first : first + 5],
            clause="resume.buffer-restored",
            iteration=event.iteration,
        )


def _clause(want: Event | None, got: Event | None, mark: Resume) -> str:
    """The clause the first difference of a resumed run belongs to: the part of the trainer
    whose loss shows there first."""
    kinds = {e.kind for e in (want, got) if e is not None}
    if isinstance(want, EnvStep) and isinstance(got, EnvStep):
        fields = ("env", "episode", "t", "step_type", "reward", "discount")
        if any(getattr(want, f) != getattr(got, f) for f in fields):
            return "resume.env-continues"
        if want.action != got.action:
            return "resume.rng-restored"
        return "resume.accounting-restored"  # the policy state
    if "env_step" in kinds:  # a vector step more or less
        return "resume.env-continues"
    if isinstance(want, Update) and isinstance(got, Update):
        if mark.restored != mark.saved:
            return "resume.buffer-restored"
        if want.windows != got.windows:
            return "resume.rng-restored"
        return "resume.accounting-restored"  # the counter or the loss mask
    if kinds & ({"store", "exclude", "hold", "update"} | _ACCOUNTING):
        return "resume.accounting-restored"
    return "resume.same-trace"


def check_resume_same_trace(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.same-trace: the trace of the checkpointed run, its Resume event left out,
    equals the same implementation's uninterrupted run of the scenario (a fresh run, so no
    cache or live object joins them). The first difference is charged to the part of the
    trainer that shows it: the env's time steps to ``resume.env-continues``, the sampled
    windows to ``resume.buffer-restored`` when the restored buffer differs from the saved one,
    else to ``resume.rng-restored`` (as are the actions), counters, schedules, stores and
    held rows to ``resume.accounting-restored``."""
    events = list(trace.events)
    index, mark = resume_event(scenario, events)
    uninterrupted = ctx.fresh(replace(_checkpointed(scenario), checkpoint=None))
    want = list(uninterrupted.events)
    got = [e for e in events if not isinstance(e, Resume)]
    if want == got:
        return
    first = next(i for i, (a, b) in enumerate(zip_longest(want, got)) if a != b)
    a = want[first] if first < len(want) else None
    b = got[first] if first < len(got) else None
    one = a if a is not None else b
    assert one is not None
    where = getattr(one, "iteration", None)
    if first < index:
        raise CheckFailure(
            f"the run before the checkpoint vs the uninterrupted run (event {first}): they "
            "differ before anything was saved",
            a,
            b,
            clause="resume.same-trace",
            iteration=where if isinstance(where, int) else None,
            diverged=one.kind,
        )
    clause = _clause(a, b, mark)
    raise CheckFailure(
        f"the resumed run vs the uninterrupted run (event {first}, after the checkpoint of "
        f"iteration {mark.iteration}; charged to {clause})",
        a,
        b,
        clause=clause,
        iteration=where if isinstance(where, int) else None,
        diverged=one.kind,
    )
