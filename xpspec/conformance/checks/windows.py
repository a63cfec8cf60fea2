"""Checks of the windows a trainer samples for its updates (clauses ``replay.*``), against the
buffer contents the trace's stores imply."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.item_index import shared_index
from xpspec.conformance.checks.views import (
    BufferModel,
    BufferVisitor,
    buffer_shape,
    buffer_walk,
    stored_items,
    trainer_scenario,
    window_name,
    windows_with_state,
)
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Item, Trace, Update, Window

__all__ = [
    "check_boundary_policy",
    "check_clear",
    "check_period_anchor",
    "check_whole_buffer",
    "check_windows_valid",
]


def check_windows_valid(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.window-validity, replay.eviction: every window an update trains on starts at
    an item the buffer holds when the update samples (per-env rings of ``capacity`` filled by
    the trace's stores, cleared as ``replay.clear`` says) and holds the items stored at its
    consecutive positions, padding only at its end. A window whose first item was evicted is
    charged to ``replay.eviction``; one of cleared items is ``replay.clear``'s concern."""
    sc = trainer_scenario(scenario)
    _, capacity, clear = buffer_shape(sc)

    def visit(update: Update, model: BufferModel) -> None:
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                first = window[0]
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
            real = [w for w in window if w is not None]
            if [tuple(w) for w in real] != model.items(env, start, start + len(real)):
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: items of window "
                    f"{window_name(env, model.position(env, start))} vs those stored at its "
                    "positions",
                    model.items(env, start, start + len(window)),
                    window,
                    clause="replay.window-validity",
                    iteration=update.iteration,
                )
            if any(w is not None for w in window[len(real) :]):
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: padding inside window "
                    f"{window_name(env, model.position(env, start))}",
                    "padding only at the end",
                    window,
                    clause="replay.window-validity",
                    iteration=update.iteration,
                )

    buffer_walk(trace, capacity, clear, shared_index(sc.env, sc.seed), BufferVisitor(visit))


def check_boundary_policy(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.boundary-policy: under ``forbid`` and ``pad`` no window holds an episode
    boundary (a stored LAST followed by an item, or an item followed by a stored FIRST);
    only under ``pad`` does a window hold padding, and then only after an episode boundary or
    the env's newest item."""
    sc = trainer_scenario(scenario)
    policy = sc.sampling.boundary
    _, capacity, clear = buffer_shape(sc)

    def visit(update: Update, model: BufferModel) -> None:
        step_type = model.step_type.get
        for window in update.windows:
            real = [(w[0], w[1], w[2]) for w in window if w is not None]
            types = [step_type(item) for item in real]  # None: never stored
            if not real or None in types:  # stored_items raises, naming the window
                stored_items(model, window, _where(update, window, model))
            if policy != "cross" and any(
                a == StepType.LAST or b == StepType.FIRST for a, b in itertools.pairwise(types)
            ):
                where = _where(update, window, model)
                raise CheckFailure(
                    f"{where} under boundary policy {policy!r}",
                    "no episode boundary inside",
                    window,
                )
            if policy == "pad" and len(real) < len(window):
                where = _where(update, window, model)
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
                        f"{where}: padding before the episode end",
                        "padding only after a boundary or the newest item",
                        window,
                    )
            if policy != "pad" and len(real) < len(window):
                raise CheckFailure(
                    f"{_where(update, window, model)}: padding under boundary policy {policy!r}",
                    "no padding",
                    window,
                )

    buffer_walk(trace, capacity, clear, shared_index(sc.env, sc.seed), BufferVisitor(visit))


def _where(update: Update, window: Window, model: BufferModel) -> str:
    """A window of ``update`` as boundary-policy's failures name it: by its env and absolute
    start when the buffer holds its first item, else by its items."""
    located = model.locate(window)
    name = window if located is None else window_name(located[0], model.position(*located))
    return f"update {update.index} of call {update.call}: window {name}"


def check_period_anchor(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.period-anchor: every window starts on the scenario's grid, ``s mod period ==
    0`` (anchor ``absolute``) or ``(s - earliest) mod period == 0`` (anchor ``oldest``), with
    ``s`` and ``earliest`` absolute positions when the update samples."""
    sc = trainer_scenario(scenario)
    p = sc.sampling.period
    _, capacity, clear = buffer_shape(sc)

    def visit(update: Update, model: BufferModel) -> None:
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                continue
            env, index = located
            position = model.position(env, index)
            oldest = model.start[env]
            anchor = 0 if sc.sampling.anchor == "absolute" else oldest
            if (position - anchor) % p:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: start of window "
                    f"{window_name(env, position)} (period {p}, anchor {sc.sampling.anchor})",
                    f"≡ {anchor % p} mod {p}",
                    position,
                )

    buffer_walk(trace, capacity, clear, shared_index(sc.env, sc.seed), BufferVisitor(visit))


@dataclass(frozen=True)
class _CallChunks:
    """One whole-buffer call: the chunks it trained, the chunks the spec cuts from the buffer
    as the spec's clear left it, and from that buffer without what the last clear kept."""

    call: int
    iteration: int
    got: Counter[tuple[Any, ...]]
    want: Counter[tuple[Item, ...]]
    without_kept: Counter[tuple[Item, ...]]
    uses_cleared: bool
    """Some window holds an item a clear removed (``replay.clear``'s concern)."""
    position: dict[Item, int]
    """The absolute position of every item in the buffer when the call sampled."""

    def named(self, chunks: Counter[tuple[Any, ...]], limit: int = 8) -> list[str]:
        """The first ``limit`` of ``chunks`` as failure messages name windows, oldest first:
        ``(env e, start s) x n`` for a run of consecutive stored positions of one env
        trained ``n`` times, its items otherwise."""
        keyed: list[tuple[tuple[int, int, int], str]] = []
        for chunk, count in chunks.items():
            start = self._start(chunk)
            if start is None:
                keyed.append(((1, 0, 0), f"{chunk} x{count}"))
            else:
                keyed.append(((0, *start), f"{window_name(*start)} x{count}"))
        return [name for _, name in sorted(keyed)[:limit]]

    def _start(self, chunk: tuple[Any, ...]) -> tuple[int, int] | None:
        """``(env, start)`` of a chunk of consecutive stored positions of one env, else None."""
        if not chunk or any(i is None or tuple(i) not in self.position for i in chunk):
            return None
        env, first = chunk[0][0], self.position[tuple(chunk[0])]
        for offset, item in enumerate(chunk):
            if item[0] != env or self.position[tuple(item)] != first + offset:
                return None
        return env, first

    @property
    def clear_dropped_kept(self) -> bool:
        """The call trained exactly what the spec's chunking gives when the last clear had
        dropped the items it should have kept: the clear's fault, not the chunking's."""
        return self.got != self.want and self.got == self.without_kept


def _call_chunks(sc: TrainerScenario, trace: Trace) -> list[_CallChunks]:
    cfg = sc.trainer
    _, capacity, clear = buffer_shape(sc)
    by_call: dict[int, list[Any]] = defaultdict(list)
    models: dict[int, tuple[dict[int, list[Item]], dict[int, list[Item]]]] = {}
    positions: dict[int, dict[Item, int]] = {}
    stale: set[int] = set()
    for update, model in windows_with_state(trace, capacity, clear, shared_index(sc.env, sc.seed)):
        by_call[update.call].append(update)
        if any(w is not None and tuple(w) in model.cleared for u in update.windows for w in u):
            stale.add(update.call)
        if update.call not in models:
            models[update.call] = (
                {env: list(model.live(env)) for env in model.stored},
                {env: list(items) for env, items in model.kept.items()},
            )
            # absolute positions of the items live when the call samples: they name its chunks
            positions[update.call] = {
                item: model.position(env, i)
                for env in model.stored
                for i, item in enumerate(model.live(env))
            }

    def chunks(live: dict[int, list[Item]]) -> Counter[tuple[Item, ...]]:
        length = cfg.mini_batch_length
        # Variant alf-shortened-chunks: windows as long as the envs' shortest content (an env
        # that holds nothing counts, and then nothing is shortened), as refimpl's trainer does.
        shortest = min(len(live.get(env, [])) for env in range(sc.env.num_envs))
        if cfg.short_chunks == "shorten" and 0 < shortest < length:
            length = shortest
        out: Counter[tuple[Item, ...]] = Counter()
        for items in live.values():
            for c in range(len(items) // length):
                out[tuple(items[c * length : (c + 1) * length])] += cfg.num_updates_per_train_iter
        return out

    calls = []
    for call, updates in by_call.items():
        live, kept = models[call]
        without = {
            env: [i for i in items if i not in kept.get(env, ())] for env, items in live.items()
        }
        got = Counter(
            tuple(None if i is None else tuple(i) for i in w) for u in updates for w in u.windows
        )
        calls.append(
            _CallChunks(
                call,
                updates[0].iteration,
                got,
                chunks(live),
                chunks(without),
                call in stale,
                positions[call],
            )
        )
    return calls


def check_whole_buffer(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.whole-buffer: each call trains every whole chunk of the buffer, oldest first,
    ``num_updates_per_train_iter`` times. A call that trained exactly the chunks of the buffer
    without what the last clear should have kept, or items a clear removed, is
    ``replay.clear``'s concern."""
    sc = trainer_scenario(scenario)
    for c in _call_chunks(sc, trace):
        if c.got != c.want and not c.clear_dropped_kept and not c.uses_cleared:
            raise CheckFailure(
                f"chunks trained by whole-buffer call {c.call}",
                c.named(c.want),
                c.named(c.got),
                iteration=c.iteration,
            )


def check_clear(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """replay.clear: a call trains only on items stored since the last clear, no window holds
    an item a clear removed, and what a clear kept (each env's items the previous call did not
    train on, under ``keep-one-step`` at least its newest) is still there for the next call: a
    call that trains exactly the chunks of the buffer without them shows a clear that dropped
    them. (Chunks wrong in any other way are ``replay.whole-buffer``'s; the windows themselves
    are checked against the same buffer model by ``windows-valid``.)"""
    sc = trainer_scenario(scenario)
    _, capacity, clear = buffer_shape(sc)

    def visit(update: Update, model: BufferModel) -> None:
        for window in update.windows:
            removed = [tuple(w) for w in window if w is not None and tuple(w) in model.cleared]
            if removed:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window {window}",
                    "items stored since the last clear",
                    f"items a clear removed: {removed[:4]}",
                    iteration=update.iteration,
                )

    buffer_walk(trace, capacity, clear, shared_index(sc.env, sc.seed), BufferVisitor(visit))
    # The clear that kept an item happened at the end of the previous trained call.
    cleared_at: dict[int, int] = {}
    last_trained: int | None = None
    for e in trace.of_kind("train_call"):
        if last_trained is not None:
            cleared_at[e.call] = last_trained
        if e.status == "trained":
            last_trained = e.iteration
    for c in _call_chunks(sc, trace):
        if c.clear_dropped_kept:
            raise CheckFailure(
                f"chunks trained by call {c.call}: those of a buffer from which the last clear "
                "dropped what it should have kept (the items the previous call did not train, "
                "under keep-one-step at least the newest)",
                c.named(c.want),
                c.named(c.got),
                iteration=cleared_at.get(c.call),
            )
    stored_since_clear = 0
    for event in trace.events:
        if event.kind == "store":
            stored_since_clear += len(event.env)
        elif event.kind == "train_call" and event.status == "trained":
            if stored_since_clear == 0:
                raise CheckFailure(
                    f"call {event.call} trained with nothing stored since the last clear",
                    "no-data",
                    event.status,
                )
            stored_since_clear = 0
