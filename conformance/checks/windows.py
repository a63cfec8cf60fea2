"""Checks of the windows a trainer samples for its updates (clauses ``replay.*``), against the
buffer contents the trace's stores imply."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

from conformance.checks.base import CheckFailure, Context
from conformance.checks.views import (
    buffer_shape,
    stored_items,
    trainer_scenario,
    windows_with_state,
)
from conformance.scenario import Scenario
from refimpl.step_type import StepType
from refimpl.trace import Item, Trace

__all__ = [
    "check_boundary_policy",
    "check_clear",
    "check_period_anchor",
    "check_whole_buffer",
    "check_windows_valid",
]


def check_windows_valid(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    _, capacity, clear = buffer_shape(sc)
    for update, model in windows_with_state(trace, capacity, clear):
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                first = None if window[0] is None else tuple(window[0])
                why = "replay.window-validity" if first is None else model.absence(first)
                if why == "replay.clear":
                    continue  # a window of cleared items is replay.clear's (check_clear)
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window {window}",
                    "starts at an item in the buffer",
                    "not in the buffer" + (" (evicted)" if why == "replay.eviction" else ""),
                    clause=why,
                    iteration=update.iteration,
                )
            env, start = located
            live = model.live(env)
            real = [w for w in window if w is not None]
            if [tuple(w) for w in real] != live[start : start + len(real)]:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window",
                    live[start : start + len(window)],
                    window,
                    clause="replay.window-validity",
                    iteration=update.iteration,
                )
            if any(w is not None for w in window[len(real) :]):
                raise CheckFailure(
                    "padding inside a window",
                    "padding only at the end",
                    window,
                    clause="replay.window-validity",
                    iteration=update.iteration,
                )


def check_boundary_policy(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    policy = sc.sampling.boundary
    _, capacity, clear = buffer_shape(sc)
    for update, model in windows_with_state(trace, capacity, clear):
        for window in update.windows:
            where = f"update {update.index} of call {update.call}: window {window}"
            real = stored_items(model, window, where)
            crosses = any(
                model.step_type[a] == StepType.LAST or model.step_type[b] == StepType.FIRST
                for a, b in itertools.pairwise(real)
            )
            if policy != "cross" and crosses:
                raise CheckFailure(
                    f"window under boundary policy {policy!r}", "no episode boundary inside", window
                )
            if policy == "pad" and len(real) < len(window):
                live = model.live(real[-1][0])
                if real[-1] not in live:
                    raise CheckFailure(where, "its last item still in the buffer", "evicted")
                nxt = live.index(real[-1]) + 1
                ends = (
                    model.step_type[real[-1]] == StepType.LAST
                    or nxt >= len(live)
                    or model.step_type[live[nxt]] == StepType.FIRST
                )
                if not ends:
                    raise CheckFailure(
                        "padding before the episode end",
                        "padding only after a boundary or the newest item",
                        window,
                    )
            if policy != "pad" and len(real) < len(window):
                raise CheckFailure(
                    f"padding under boundary policy {policy!r}", "no padding", window
                )


def check_period_anchor(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    p = sc.sampling.period
    _, capacity, clear = buffer_shape(sc)
    for update, model in windows_with_state(trace, capacity, clear):
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                continue
            env, index = located
            position = model.start[env] + index
            oldest = model.start[env]
            anchor = 0 if sc.sampling.anchor == "absolute" else oldest
            if (position - anchor) % p:
                raise CheckFailure(
                    f"start position of window {window[:2]}... (period {p}, anchor {sc.sampling.anchor})",
                    f"≡ {anchor % p} mod {p}",
                    position,
                )


def check_whole_buffer(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = trainer_scenario(scenario)
    cfg = sc.trainer
    _, capacity, clear = buffer_shape(sc)
    by_call: dict[int, list[Any]] = defaultdict(list)
    models: dict[int, dict[int, list[Item]]] = {}
    for update, model in windows_with_state(trace, capacity, clear):
        by_call[update.call].append(update)
        models.setdefault(update.call, {env: list(model.live(env)) for env in model.stored})
    for call, updates in by_call.items():
        live = models[call]
        length = cfg.mini_batch_length
        # Variant alf-shortened-chunks: windows as long as the envs' shortest content (an env
        # that holds nothing counts, and then nothing is shortened), as refimpl's trainer does.
        shortest = min(len(live.get(env, [])) for env in range(sc.env.num_envs))
        if cfg.short_chunks == "shorten" and 0 < shortest < length:
            length = shortest
        want: Counter[tuple[Item, ...]] = Counter()
        for items in live.values():
            for c in range(len(items) // length):
                want[tuple(items[c * length : (c + 1) * length])] += cfg.num_updates_per_train_iter
        got = Counter(
            tuple(None if i is None else tuple(i) for i in w) for u in updates for w in u.windows
        )
        if got != want:
            raise CheckFailure(
                f"chunks trained by whole-buffer call {call}",
                sorted(want.items())[:4],
                sorted(got.items())[:4],
            )


def check_clear(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.clear: a call trains only on items stored since the last clear, no window holds
    an item a clear removed, and what a clear kept (each env's items the previous call did not
    train on, under ``keep-one-step`` at least its newest) is trained by the next call: the
    oldest item of each env's ring, as the spec's clear leaves it, is in that call's first
    chunk whenever the env holds a whole chunk. (The other windows are checked against the
    same buffer model by ``windows-valid`` and ``whole-buffer``.)"""
    sc = trainer_scenario(scenario)
    _, capacity, clear = buffer_shape(sc)
    oldest: dict[int, dict[int, Item]] = {}
    trained: dict[int, set[Item]] = defaultdict(set)
    for update, model in windows_with_state(trace, capacity, clear):
        for window in update.windows:
            removed = [tuple(w) for w in window if w is not None and tuple(w) in model.cleared]
            if removed:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window {window}",
                    "items stored since the last clear",
                    f"items a clear removed: {removed[:4]}",
                    iteration=update.iteration,
                )
        if update.call not in oldest:
            sizes = [len(model.live(env)) for env in range(sc.env.num_envs)]
            length = clear.call_chunk_length(sizes)
            oldest[update.call] = {
                env: model.live(env)[0] for env, n in enumerate(sizes) if n >= length
            }
        trained[update.call].update(tuple(i) for w in update.windows for i in w if i is not None)
    for call, firsts in oldest.items():
        for env, item in firsts.items():
            if item not in trained[call]:
                raise CheckFailure(
                    f"oldest item of env {env}'s ring in call {call} (kept by the clear: "
                    f"untrained by the previous call, or under keep-one-step its newest item)",
                    f"{item} trained in call {call}",
                    "not trained",
                )
    stored_since_clear = 0
    for e in trace.events:
        if e.kind == "store":
            stored_since_clear += len(e.env)
        elif e.kind == "train_call" and e.status == "trained":
            if stored_since_clear == 0:
                raise CheckFailure(
                    f"call {e.call} trained with nothing stored since the last clear",
                    "no-data",
                    e.status,
                )
            stored_since_clear = 0
