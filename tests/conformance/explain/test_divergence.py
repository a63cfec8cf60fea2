"""The first divergence: where, what happened (missing, extra, differs), which envs."""

from __future__ import annotations

from dataclasses import replace

from tests.conformance.explain.perturb import extra_update, reference, store_one_iteration_later
from xpspec.conformance.explain.divergence import first_divergence


def test_equal_traces_do_not_diverge() -> None:
    _, trace = reference("plain-u2-b3")
    assert first_divergence(trace.events, trace.events) is None


def test_a_store_moved_one_iteration_later_is_missing_where_it_was() -> None:
    _, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    where = store_one_iteration_later(events, iteration=4, env=0)
    d = first_divergence(events, trace.events)
    assert d is not None
    assert (d.index, d.shape, d.span, d.envs) == (where, "missing", 1, (0,))
    assert d.expected == trace.events[where] and d.expected.kind == "store"
    assert d.actual is not None and d.actual.kind == "train_call"
    assert d.fields == ("kind",)


def test_an_extra_update_is_extra_with_its_hook() -> None:
    _, trace = reference("plain-u2-b3")
    events = list(trace.events)
    where = extra_update(events, call=3)
    d = first_divergence(events, trace.events)
    assert d is not None
    assert (d.index, d.shape, d.span) == (where, "extra", 2)
    assert d.actual is not None and d.actual.kind == "update"
    windows = {item[0] for w in d.actual.windows for item in w if item is not None}
    assert d.envs == tuple(sorted(windows))


def test_a_changed_reward_differs_in_its_env_only() -> None:
    _, trace = reference("plain-u2-b3")
    events = list(trace.events)
    where = next(n for n, e in enumerate(events) if e.kind == "store" and e.iteration == 2)
    store = events[where]
    events[where] = replace(
        store, reward=(store.reward[0], store.reward[1] + 0.5, *store.reward[2:])
    )
    d = first_divergence(events, trace.events)
    assert d is not None
    assert (d.index, d.shape, d.envs, d.fields) == (where, "differs", (store.env[1],), ("reward",))


def test_a_trace_that_stops_early_lacks_the_rest() -> None:
    _, trace = reference("plain-u2-b3")
    cut = len(trace.events) - 4
    d = first_divergence(trace.events[:cut], trace.events)
    assert d is not None
    assert (d.index, d.shape, d.span, d.actual) == (cut, "missing", 4, None)
    longer = first_divergence(trace.events, trace.events[:cut])
    assert longer is not None and (longer.shape, longer.span, longer.expected) == ("extra", 4, None)
