"""The trainer checks on mangled traces: a trace that parses but is wrong is either refused by
:func:`xpspec.conformance.validate.validate_trace` (a :class:`TraceError` naming the event) or fails
checks with :class:`CheckFailure`; no check crashes on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS, CheckFailure, Context
from xpspec.conformance.validate import TraceError, validate_trace
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import Event, Trace
from xpspec.refimpl.adapter import RefimplAdapter

ADAPTER = RefimplAdapter()
TRAINER = [name for name, s in CATALOG.items() if isinstance(s, TrainerScenario)]


@cache
def _reference(scenario: Scenario) -> Trace:
    return ADAPTER.run_trainer(scenario)  # type: ignore[arg-type]


def _context() -> Context:
    return Context(_reference, _reference, _reference)


def _drop(*kinds: str) -> Callable[[Trace], list[Event]]:
    return lambda trace: [e for e in trace.events if e.kind not in kinds]


def _windows(change: Callable[[Any], Any]) -> Callable[[Trace], list[Event]]:
    """Every window item ``(env, episode, t)`` (or padding) replaced by ``change(item)``."""

    def apply(trace: Trace) -> list[Event]:
        out: list[Event] = []
        for e in trace.events:
            if e.kind == "update":
                windows = tuple(tuple(change(item) for item in w) for w in e.windows)
                e = replace(e, windows=windows)
            out.append(e)
        return out

    return apply


def _stores_first(trace: Trace) -> list[Event]:
    """Each iteration's stores moved before its env steps (stored before unrolled)."""
    out: list[Event] = []
    for e in trace.events:
        if e.kind == "store":
            at = next(
                (
                    i
                    for i, x in enumerate(out)
                    if x.kind == "env_step" and x.iteration == e.iteration
                ),
                len(out),
            )
            out.insert(at, e)
        else:
            out.append(e)
    return out


def _twice(kind: str) -> Callable[[Trace], list[Event]]:
    return lambda trace: [x for e in trace.events for x in ((e, e) if e.kind == kind else (e,))]


def _reversed_stores(trace: Trace) -> list[Event]:
    return [
        replace(e, **{c: getattr(e, c)[::-1] for c in ("env", "episode", "t")})
        if e.kind == "store"
        else e
        for e in trace.events
    ]


MANGLES: dict[str, Callable[[Trace], list[Event]]] = {
    "stores dropped": _drop("store"),
    "train calls dropped": _drop("train_call"),
    "updates dropped": _drop("update"),
    "hooks dropped": _drop("hook"),
    "env steps dropped": _drop("env_step"),
    "iteration ends dropped": _drop("iteration_end"),
    "stores and train calls dropped": _drop("store", "train_call"),
    # Real time steps of the env that were never stored (episode 50 is never reached).
    "windows name unstored items": _windows(lambda i: None if i is None else (i[0], 50, 0)),
    "windows of padding only": _windows(lambda i: None),
    "windows one step late": _windows(lambda i: None if i is None else (i[0], i[1], 0)),
    "windows from another env": _windows(lambda i: None if i is None else (0, i[1], i[2])),
    "stores before the unroll": _stores_first,
    "stores twice": _twice("store"),
    "train calls twice": _twice("train_call"),
    "stores reversed": _reversed_stores,
    "calls renumbered": lambda t: [
        replace(e, call=e.call + 100) if e.kind == "update" else e for e in t.events
    ],
}


@pytest.mark.parametrize("mangle", sorted(MANGLES))
def test_mangled_traces_fail_checks_or_validation_never_crash(mangle: str) -> None:
    crashes = []
    for name in TRAINER:
        scenario = CATALOG[name]
        trace = _reference(scenario)
        mangled = Trace(tuple(MANGLES[mangle](trace)), trace.header)
        mangled = Trace.from_jsonl(mangled.to_jsonl())  # it parses
        try:
            validate_trace(scenario, mangled)
        except TraceError:
            continue
        for check in ALL_CHECKS:
            if check.capability != "trainer" or not check.applies(scenario):
                continue
            try:
                check.verify(scenario, mangled, _context())
            except CheckFailure:
                pass
            except Unsupported as exc:  # only a check that cannot judge the trace may say so
                if "cannot be judged" not in str(exc):
                    crashes.append(f"{check.name} on {name}: Unsupported: {exc}")
            except Exception as exc:  # what this test is about
                crashes.append(f"{check.name} on {name}: {type(exc).__name__}: {exc}")
    assert not crashes, "\n".join(crashes[:10])


def test_a_trace_without_stores_fails_the_window_checks() -> None:
    scenario = CATALOG["forbid-boundaries"]
    trace = _reference(scenario)
    mangled = Trace(tuple(_drop("store")(trace)), trace.header)
    validate_trace(scenario, mangled)
    for name in ("windows-valid", "boundary-policy", "conservation"):
        check = next(c for c in ALL_CHECKS if c.name == name)
        with pytest.raises(CheckFailure, match=r"buffer|stored|fate"):
            check.verify(scenario, mangled, _context())


def _first(kind: str, change: Callable[[Any], Any]) -> Callable[[Trace], list[Event]]:
    """The first event of ``kind`` replaced by ``change(event)``."""

    def apply(trace: Trace) -> list[Event]:
        i = next(i for i, e in enumerate(trace.events) if e.kind == kind)
        return [*trace.events[:i], change(trace.events[i]), *trace.events[i + 1 :]]

    return apply


MALFORMED: dict[str, tuple[Callable[[Trace], list[Event]], str]] = {
    "a window of no items": (
        _first("update", lambda e: replace(e, windows=((), *e.windows[1:]))),
        "window 0 has no items",
    ),
    "a window item past its episode": (
        _windows(lambda i: None if i is None else (i[0], i[1], 99)),
        "decodes to no real step",
    ),
    "a loss mask shorter than the windows": (
        _first("update", lambda e: replace(e, loss_mask=e.loss_mask[1:])),
        "loss mask of shape",
    ),
    "a step type that is none": (
        _first("env_step", lambda e: replace(e, step_type=(7,) * len(e.env))),
        "step type 7",
    ),
    "a short reward column": (
        _first("store", lambda e: replace(e, reward=e.reward[1:])),
        "columns of different lengths",
    ),
}


@pytest.mark.parametrize("mangle", sorted(MALFORMED))
def test_malformed_traces_are_refused_naming_the_event(mangle: str) -> None:
    scenario = CATALOG["plain-u2-b3"]
    trace = _reference(scenario)
    change, message = MALFORMED[mangle]
    mangled = Trace.from_jsonl(Trace(tuple(change(trace)), trace.header).to_jsonl())
    with pytest.raises(TraceError, match=rf"event #\d+ \(\w+\): .*{message}"):
        validate_trace(scenario, mangled)


def _check(name: str) -> Any:
    return next(c for c in ALL_CHECKS if c.name == name)


def _with(trace: Trace, events: list[Event]) -> Trace:
    return Trace(tuple(events), trace.header)


def test_bounded_lag_fails_a_call_beyond_the_plain_schedule() -> None:
    """train.bounded-lag's lower bound, 0 <= k - C_k: one call more than the plain schedule."""
    scenario = CATALOG["plain-u1-b1"]
    trace = _reference(scenario)
    first_call = next(i for i, e in enumerate(trace.events) if e.kind == "train_call")
    extra = [
        *trace.events[: first_call + 1],
        trace.events[first_call],
        *trace.events[first_call + 1 :],
    ]
    with pytest.raises(CheckFailure, match=r"iteration 1: lag behind the plain schedule") as caught:
        _check("bounded-lag").verify(scenario, _with(trace, extra), _context())
    assert (caught.value.expected, caught.value.actual) == ("in [0, 0]", -1)


@pytest.mark.parametrize(
    "mangle, problem",
    [
        ("duplicate-store", "store events under identity"),
        ("annotate", "stored annotation under identity"),
        ("hold", "identity preprocessing holds"),
    ],
)
def test_identity_is_plain_sees_the_whole_store_sequence(mangle: str, problem: str) -> None:
    scenario = CATALOG["plain-u1-b1"]
    trace = _reference(scenario)
    events = list(trace.events)
    store = next(i for i, e in enumerate(events) if e.kind == "store")
    if mangle == "duplicate-store":
        events.insert(len(events) - 1, events[store])
    elif mangle == "annotate":
        events[store] = replace(events[store], annotation=(1.0,) * len(events[store].annotation))
    else:
        from xpspec.protocol.trace import Hold

        s = events[store]
        events.insert(store + 1, Hold(s.iteration, s.env, s.episode, s.t))
    with pytest.raises(CheckFailure, match=problem):
        _check("identity-is-plain").verify(scenario, _with(trace, events), _context())


def test_identity_is_plain_compares_with_the_plain_accounting_run() -> None:
    """The whole trace must equal the run with train accounting plain: a run that differs
    from it (here: the plain run has one hook fewer) fails, naming the first differing event."""
    scenario = CATALOG["plain-u1-b1"]
    trace = _reference(scenario)
    hook = next(i for i, e in enumerate(trace.events) if e.kind == "hook")
    plain = _with(trace, [e for i, e in enumerate(trace.events) if i != hook])
    context = Context(_reference, lambda s: plain, _reference)
    with pytest.raises(
        CheckFailure, match=f"event #{hook} vs the same run with train accounting plain"
    ):
        _check("identity-is-plain").verify(scenario, trace, context)


@pytest.mark.parametrize(
    ("ran", "judged", "where"),
    [
        ("per-mini-batch", "per-train-call-after", "counter at update 0 of call 0"),
        ("per-mini-batch-after", "per-train-call-after", "counter at update 1 of call 0"),
        ("per-train-call-after", "per-mini-batch-after", "counter at update 1 of call 0"),
        ("per-train-call-after", "per-mini-batch", "counter at update 0 of call 0"),
    ],
)
def test_global_counter_tells_counting_per_call_from_counting_per_update(
    ran: str, judged: str, where: str
) -> None:
    """unroll.global-counter, variant call-count-before: a trace whose counter grows once per
    call (by its updates) fails the per-update modes' checks, and the other way round."""
    plain = CATALOG["counter-per-mini-batch"]
    assert isinstance(plain, TrainerScenario)
    run = replace(plain, trainer=replace(plain.trainer, counter_mode=ran))
    model = replace(plain, trainer=replace(plain.trainer, counter_mode=judged))
    check = next(c for c in ALL_CHECKS if c.name == "update-counter")
    check.verify(run, _reference(run), _context())
    with pytest.raises(CheckFailure, match=where):
        check.verify(model, _reference(run), _context())


@pytest.mark.parametrize(
    ("ran", "judged"),
    [("per-iteration", "per-iteration-after"), ("per-iteration-after", "per-iteration")],
)
def test_global_counter_tells_counting_at_the_start_from_counting_after(
    ran: str, judged: str
) -> None:
    """unroll.global-counter, variant iteration-count-before: a trace counted at the start of
    each iteration fails the check of the count-after mode, and the other way round."""
    plain = CATALOG["plain-u1-b1"]
    assert isinstance(plain, TrainerScenario)
    run = replace(plain, trainer=replace(plain.trainer, counter_mode=ran))
    model = replace(plain, trainer=replace(plain.trainer, counter_mode=judged))
    check = next(c for c in ALL_CHECKS if c.name == "global-counter")
    check.verify(run, _reference(run), _context())
    with pytest.raises(CheckFailure, match="counter at the start of iteration 1"):
        check.verify(model, _reference(run), _context())
