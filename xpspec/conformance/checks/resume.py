"""The checks of checkpoint and resume (clauses ``resume.*``): a run saved after an iteration
and resumed in a fresh trainer goes on as the same implementation's uninterrupted run of the
same scenario does. The uninterrupted run is the adapter's own (not the reference trainer's),
so an implementation is judged against itself: a framework whose schedule or sampling differ
from the spec's still resumes correctly when it resumes into what it would have done."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace
from itertools import zip_longest

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import EnvStep, Event, Item, Resume, Trace, Update

__all__ = [
    "check_resume_accounting",
    "check_resume_buffer",
    "check_resume_env",
    "check_resume_rng",
    "check_resume_same_trace",
    "resume_event",
]


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
            diverged="resume",
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
            diverged="resume",
        )


def _runs(
    scenario: Scenario, trace: Trace, ctx: Context
) -> tuple[list[Event], list[Event], Resume]:
    """The events of the uninterrupted run (a fresh run of the same implementation, so no cache
    or live object joins the two), those of the checkpointed run without its resume event,
    and that event."""
    events = list(trace.events)
    _, mark = resume_event(scenario, events)
    uninterrupted = ctx.fresh(replace(_checkpointed(scenario), checkpoint=None))
    return list(uninterrupted.events), [e for e in events if not isinstance(e, Resume)], mark


def _first(want: list[object], got: list[object]) -> int | None:
    """The first index at which two lists differ (a missing element counts), or None."""
    return next((i for i, (a, b) in enumerate(zip_longest(want, got)) if a != b), None)


def _time_steps(events: list[Event]) -> dict[int, list[tuple[object, ...]]]:
    """Each env's time steps in the order the trainer acted on them, each with the iteration
    it was taken in (last, not compared)."""
    out: dict[int, list[tuple[object, ...]]] = {}
    for e in events:
        if isinstance(e, EnvStep):
            for row in zip(e.env, e.episode, e.t, e.step_type, e.reward, e.discount):
                out.setdefault(row[0], []).append((*row[1:], e.iteration))
    return out


def _same_steps(want: list[Event], got: list[Event]) -> bool:
    """Whether every env's time steps agree, one sequence a prefix of the other."""
    ours, theirs = _time_steps(got), _time_steps(want)
    for env in set(ours) | set(theirs):
        a, b = _steps(theirs.get(env, [])), _steps(ours.get(env, []))
        n = min(len(a), len(b))
        if a[:n] != b[:n]:
            return False
    return True


def _steps(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [row[:-1] for row in rows]


def _accounting(events: list[Event]) -> list[tuple[object, ...]]:
    """What the trainer's counters, schedules and preprocessing decided, event by event: every
    event but the time steps' actions and the sampled windows (their items and loss masks)."""
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, EnvStep):
            out.append(("env_step", e.iteration, len(e.env), e.policy_state))
        elif isinstance(e, Update):
            out.append(("update", e.iteration, e.call, e.index, e.counter))
        else:
            out.append(tuple(getattr(e, f.name) for f in fields(e)))
    return out


def _draws(events: list[Event]) -> list[tuple[object, ...]]:
    """The random draws a trace shows: the actions taken and the windows sampled (with the
    loss masks of their items)."""
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, EnvStep):
            out.append(("actions", e.iteration, e.action))
        elif isinstance(e, Update):
            out.append(("windows", e.iteration, e.windows, e.loss_mask))
    return out


def _iteration(event: object) -> int | None:
    value = getattr(event, "iteration", None)
    return value if isinstance(value, int) else None


def check_resume_same_trace(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.same-trace: the trace of the checkpointed run, its Resume event left out,
    equals the same implementation's uninterrupted run of the scenario, event for event."""
    want, got, mark = _runs(scenario, trace, ctx)
    first = _first(list(want), list(got))
    if first is None:
        return
    a = want[first] if first < len(want) else None
    b = got[first] if first < len(got) else None
    one = a if a is not None else b
    raise CheckFailure(
        f"the checkpointed run vs the uninterrupted run (event {first}; saved after "
        f"iteration {mark.iteration})",
        a,
        b,
        clause="resume.same-trace",
        iteration=_iteration(one),
        diverged=one.kind if one is not None else None,
    )


def check_resume_env(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.env-continues: every env's time steps (items, step types, rewards, discounts)
    in the checkpointed run are the uninterrupted run's, one sequence a prefix of the other
    (how many steps a run takes is the accounting's)."""
    want, got, mark = _runs(scenario, trace, ctx)
    ours, theirs = _time_steps(got), _time_steps(want)
    for env in sorted(set(ours) | set(theirs)):
        a, b = _steps(theirs.get(env, [])), _steps(ours.get(env, []))
        n = min(len(a), len(b))
        first = _first(list(a[:n]), list(b[:n]))
        if first is not None:
            at = ours[env][first][-1]
            raise CheckFailure(
                f"env {env}'s time step {first} (episode, t, step type, reward, discount) vs the "
                f"uninterrupted run's (saved after iteration {mark.iteration})",
                a[first : first + 3],
                b[first : first + 3],
                clause="resume.env-continues",
                iteration=at if isinstance(at, int) else None,
                diverged="env_step",
            )


def check_resume_accounting(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.accounting-restored: the checkpointed run's counters, unroll lengths, train
    calls and their statuses, updates per call, stores, holds, exclusions, hooks and iteration
    ends are the uninterrupted run's (every event with the actions and the sampled windows'
    items left out: those are the random streams')."""
    want, got, mark = _runs(scenario, trace, ctx)
    a, b = _accounting(want), _accounting(got)
    first = _first(list(a), list(b))
    if first is not None:
        one = want[first] if first < len(want) else got[first]
        raise CheckFailure(
            f"the checkpointed run's event {first} without its random draws vs the "
            f"uninterrupted run's (saved after iteration {mark.iteration})",
            a[first] if first < len(a) else None,
            b[first] if first < len(b) else None,
            clause="resume.accounting-restored",
            iteration=_iteration(one),
            diverged=one.kind,
        )


def check_resume_rng(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """resume.rng-restored: the actions taken and the windows sampled in the checkpointed run
    are the uninterrupted run's. Judged where everything else was restored (the buffer, the
    env's time steps, the accounting); otherwise other draws follow from what was lost, and
    the check is not applicable."""
    want, got, mark = _runs(scenario, trace, ctx)
    a, b = _draws(want), _draws(got)
    first = _first(list(a), list(b))
    if first is None:
        return
    lost = [
        name
        for name, same in (
            ("the buffer", mark.saved == mark.restored),
            ("the env's time steps", _same_steps(want, got)),
            ("the accounting", _accounting(want) == _accounting(got)),
        )
        if not same
    ]
    draw = a[first] if first < len(a) else b[first]
    if lost:
        raise Unsupported(
            f"resume.rng-restored cannot be judged: {', '.join(lost)} differ after the resume, "
            "so the draws differ for that reason"
        )
    raise CheckFailure(
        f"random draw {first} (actions of a vector step, or the windows of an update) vs the "
        f"uninterrupted run's (saved after iteration {mark.iteration})",
        a[first] if first < len(a) else None,
        b[first] if first < len(b) else None,
        clause="resume.rng-restored",
        iteration=int(str(draw[1])),
        diverged="update" if draw[0] == "windows" else "env_step",
    )
