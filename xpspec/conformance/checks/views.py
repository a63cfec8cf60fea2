"""Read-only views of a trace that several checks share (items, per-iteration counts, and
the per-env buffer contents implied by the stores)."""

from __future__ import annotations

import itertools
import weakref
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.item_index import ItemBytes, ItemIndex
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.shared_pass import Same, once, together
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Item, Store, Trace, TrainCall, Update, Window

__all__ = [
    "BufferModel",
    "BufferVisitor",
    "Clearing",
    "Columnar",
    "InIteration",
    "buffer_shape",
    "buffer_walk",
    "call_statuses",
    "calls_per_iteration",
    "calls_with_state",
    "env_items",
    "items_of",
    "iterations",
    "per_iteration",
    "steps_per_iteration",
    "stored_items",
    "stored_per_iteration",
    "trainer_scenario",
    "unrolled_per_iteration",
    "window_name",
    "windows_with_state",
]


class Columnar(Protocol):
    """An event that lists its items column-wise (``env``, ``episode``, ``t``)."""

    @property
    def env(self) -> tuple[int, ...]: ...
    @property
    def episode(self) -> tuple[int, ...]: ...
    @property
    def t(self) -> tuple[int, ...]: ...


class InIteration(Protocol):
    """An event that names the iteration it happened in."""

    @property
    def iteration(self) -> int: ...


E = TypeVar("E", bound=InIteration)


def window_name(env: int, start: int) -> str:
    """A window as every failure message names it: the spec's ``(env, start)``, ``start``
    the absolute position of its first item (``spec/replay.md``, storage model), which never
    changes as the ring evicts or clears."""
    return f"(env {env}, start {start})"


def items_of(event: Columnar) -> list[Item]:
    """The ``(env, episode, t)`` items of a columnar event."""
    return list(zip(event.env, event.episode, event.t))


@dataclass(frozen=True)
class _Counts:
    """What the per-iteration views count, from one pass over a trace."""

    iterations: tuple[int, ...]
    steps: dict[int, int]  # env_step events per iteration
    items: dict[int, int]  # items unrolled per iteration
    non_first: dict[int, int]  # of them, those not FIRST
    calls: dict[int, int]  # train_call events per iteration
    stored: dict[int, int]  # items stored per iteration before its end
    statuses: tuple[str, ...]  # every train_call's status, in trace order


_COUNTS: dict[int, tuple[weakref.ref[Trace], _Counts]] = {}


def _counts(trace: Trace) -> _Counts:
    """The per-iteration counts of ``trace``, counted once per trace (a trace does not change)
    and kept while it lives: the views below are asked for by many checks, and each pass over
    a long trace kept in its file reads the file. The checks run together that ask for them
    at once share one count (:func:`~xpspec.protocol.shared_pass.once`)."""
    key = id(trace)
    hit = _COUNTS.get(key)
    if hit is not None and hit[0]() is trace:
        return hit[1]
    counts = once(("views._counts", Same(trace)), lambda: _count(trace))
    _COUNTS[key] = (weakref.ref(trace, _forget(key)), counts)
    return counts


def _count(trace: Trace) -> _Counts:
    """The per-iteration counts of ``trace``, from one pass over it."""
    its: list[int] = []
    steps: dict[int, int] = defaultdict(int)
    items: dict[int, int] = defaultdict(int)
    non_first: dict[int, int] = defaultdict(int)
    calls: dict[int, int] = defaultdict(int)
    stored: dict[int, int] = defaultdict(int)
    closed: set[int] = set()
    statuses: list[str] = []
    names: dict[str, str] = {}  # one string object per distinct status, however many calls
    events: Iterable[Any] = trace.events
    for e in events:
        kind = e.kind
        if kind == "iteration":
            its.append(e.iteration)
        elif kind == "env_step":
            steps[e.iteration] += 1
            items[e.iteration] += len(e.step_type)
            non_first[e.iteration] += sum(1 for t in e.step_type if t != StepType.FIRST)
        elif kind == "train_call":
            calls[e.iteration] += 1
            statuses.append(names.setdefault(e.status, e.status))
        elif kind == "iteration_end":
            closed.add(e.iteration)
        elif kind == "store" and e.iteration not in closed:
            stored[e.iteration] += len(e.env)
    return _Counts(
        tuple(its),
        dict(steps),
        dict(items),
        dict(non_first),
        dict(calls),
        dict(stored),
        tuple(statuses),
    )


def _forget(key: int) -> Callable[[object], None]:
    """The callback that drops a trace's counts when the trace is gone."""

    def forget(_: object) -> None:
        _COUNTS.pop(key, None)

    return forget


def iterations(trace: Trace) -> list[int]:
    return list(_counts(trace).iterations)


def unrolled_per_iteration(trace: Trace, count: str = "all") -> dict[int, int]:
    """Items unrolled per iteration (``count="non-first"``: those that are not FIRST), for the
    iterations that unrolled any."""
    counts = _counts(trace)
    return dict(counts.items if count == "all" else counts.non_first)


def per_iteration(
    trace: Trace, events: Iterable[E], weight: Callable[[E], int] | None = None
) -> dict[int, int]:
    """Count ``events`` (of ``trace``) per iteration, or sum ``weight(event)``; every
    iteration of ``trace`` is a key, with 0 where it has none."""
    counts: dict[int, int] = defaultdict(int)
    for it in iterations(trace):
        counts[it] += 0
    for e in events:
        counts[e.iteration] += 1 if weight is None else weight(e)
    return dict(counts)


@dataclass(frozen=True)
class Clearing:
    """What a trained whole-buffer call leaves in each env's ring (clause ``replay.clear``):
    under ``all`` the items its chunks did not cover, the newest ``size mod T``; under
    ``keep-one-step`` at least the newest item; under ``none`` everything."""

    mode: str
    chunk_length: int = 1
    shorten: bool = False
    """Variant alf-shortened-chunks of ``replay.whole-buffer``."""
    num_envs: int = 1

    def call_chunk_length(self, sizes: Sequence[int]) -> int:
        """The chunk length of a call on rings of ``sizes`` items (one per env)."""
        shortest = min(sizes, default=0)
        if self.shorten and 0 < shortest < self.chunk_length:
            return shortest
        return self.chunk_length

    def kept(self, sizes: Sequence[int]) -> list[int]:
        """Items each env keeps after a trained call on rings of ``sizes`` items."""
        if self.mode == "none":
            return list(sizes)
        length = self.call_chunk_length(sizes)
        kept = [n % length for n in sizes]
        if self.mode == "keep-one-step":
            kept = [min(n, max(k, 1)) for n, k in zip(sizes, kept)]
        return kept


class BufferModel:
    """Per-env buffer contents implied by Store events, with per-env capacity.

    ``stored[env]`` holds the items of ``env`` still in the buffer, oldest first; ``start[env]``
    is the position of the oldest of them among all the items ever stored for ``env``
    (eviction and clearing move it forward). ``step_type`` and ``cleared`` remember every item
    ever stored and every item a clear removed; with an :class:`ItemIndex` of the scenario's
    env they take a byte per item (:class:`ItemBytes`), so a model of a long trace holds its
    live items and little else.
    """

    def __init__(self, capacity: int, index: ItemIndex | None = None) -> None:
        self.capacity = capacity
        self.stored: dict[int, deque[Item]] = defaultdict(deque)
        self.start: dict[int, int] = defaultdict(int)
        self.step_type = ItemBytes(index)
        self.cleared = ItemBytes(index)
        """Items a clear removed (as opposed to evicted by a full ring)."""
        self.kept: dict[int, list[Item]] = {}
        """Per env, the items the last clear kept."""
        self._oldest: dict[Item, int] = {}  # live item -> position of its oldest live copy
        self._copies: dict[Item, int] = defaultdict(int)

    def add(self, event: Store) -> None:
        stored, start, capacity = self.stored, self.start, self.capacity
        oldest, copies = self._oldest, self._copies
        items = list(zip(event.env, event.episode, event.t))
        del items[len(event.step_type) :]  # the items with a step type, as a zip of all four
        for item in items:
            env = item[0]
            live = stored[env]
            n = len(live)
            if item not in oldest:
                oldest[item] = start[env] + n
            copies[item] += 1
            live.append(item)
            if n >= capacity:  # one more than it holds
                self._drop(env)
        self.step_type.set_all(items, event.step_type)  # read by none of the above

    def _drop(self, env: int) -> Item:
        """Remove the oldest live item of ``env`` (evicted or cleared)."""
        live = self.stored[env]
        item = live.popleft()
        self.start[env] += 1
        copies = self._copies[item] - 1
        if copies:
            self._copies[item] = copies
            at = next(i for i, x in enumerate(live) if x == item)
            self._oldest[item] = self.start[env] + at
        else:
            del self._copies[item], self._oldest[item]
        return item

    def clear(self, clearing: Clearing) -> None:
        """The clear after a trained call (clause ``replay.clear``)."""
        sizes = [len(self.stored[env]) for env in range(clearing.num_envs)]
        for env, kept in enumerate(clearing.kept(sizes)):
            for _ in range(len(self.stored[env]) - kept):
                self.cleared.add(self._drop(env))
            self.kept[env] = list(self.stored[env])

    def absence(self, item: Item) -> str:
        """The clause that explains why ``item`` is not in the buffer: ``replay.clear`` if a
        clear removed it, ``replay.eviction`` if a full ring did, ``replay.window-validity``
        if it was never stored."""
        if item in self.cleared:
            return "replay.clear"
        return "replay.eviction" if item in self.step_type else "replay.window-validity"

    def live(self, env: int) -> list[Item]:
        """The items of ``env`` currently in the buffer, oldest first."""
        return list(self.stored[env])

    def items(self, env: int, start: int, stop: int) -> list[Item]:
        """``live(env)[start:stop]``, without copying the rest."""
        return list(itertools.islice(self.stored[env], start, max(start, stop)))

    def size(self, env: int) -> int:
        """How many items of ``env`` are in the buffer."""
        return len(self.stored[env])

    def position(self, env: int, index: int) -> int:
        """The absolute position of ``live(env)[index]``."""
        return self.start[env] + index

    def locate(self, window: Window) -> tuple[int, int] | None:
        """``(env, index into live(env))`` of the window's first item, or None (its absolute
        start is :meth:`position` of that)."""
        first = window[0]
        if first is None:
            return None
        item = (first[0], first[1], first[2])
        at = self._oldest.get(item)
        if at is None:
            return None
        return first[0], at - self.start[first[0]]


def stored_items(model: BufferModel, window: Window, what: str) -> list[Item]:
    """The real items of ``window`` (padding left out). A check of what the buffer held can
    judge only windows of items the trace's stores put there: raise :class:`CheckFailure`
    for a window of padding only or holding an item never stored."""
    real = [(w[0], w[1], w[2]) for w in window if w is not None]
    unstored = [item for item in real if item not in model.step_type]
    if not real or unstored:
        raise CheckFailure(
            what,
            "a window of items the trace's stores put in the buffer",
            f"items never stored: {unstored[:4]}" if unstored else "padding only",
        )
    return real


def windows_with_state(
    trace: Trace, capacity: int, clear: Clearing, index: ItemIndex | None = None
) -> Iterator[tuple[Update, BufferModel]]:
    """Each Update event with the buffer model as it was when the update sampled.

    Clearing (clause ``replay.clear``) takes effect when a call that trained is over, i.e. at
    the first event after it that is neither an update nor an ``after_update`` hook.
    """
    model = BufferModel(capacity, index)
    clear_pending = False
    for e in trace.events:
        in_call = e.kind == "update" or (e.kind == "hook" and e.name == "after_update")
        if clear_pending and not in_call:
            model.clear(clear)
            clear_pending = False
        if e.kind == "store":
            model.add(e)
        elif e.kind == "update":
            yield e, model
        elif e.kind == "train_call":
            clear_pending = clear.mode != "none" and e.status == "trained"


def calls_with_state(
    trace: Trace, capacity: int, clear: Clearing, index: ItemIndex | None = None
) -> Iterator[tuple[TrainCall, BufferModel, int]]:
    """Each TrainCall event with the buffer model as it was when the call began, and the
    number of items stored since the last clear (since the start without clearing).

    Clearing takes effect as in :func:`windows_with_state`: once a call that trained is over.
    """
    model = BufferModel(capacity, index)
    clear_pending, fresh = False, 0
    for e in trace.events:
        in_call = e.kind == "update" or (e.kind == "hook" and e.name == "after_update")
        if clear_pending and not in_call:
            model.clear(clear)
            clear_pending, fresh = False, 0
        if e.kind == "store":
            model.add(e)
            fresh += len(e.env)
        elif e.kind == "train_call":
            yield e, model, fresh
            clear_pending = clear.mode != "none" and e.status == "trained"


@dataclass(frozen=True)
class BufferVisitor:
    """What a check does with the buffer model of :func:`buffer_walk`: ``update`` at each
    Update event with the model as it was when the update sampled (as
    :func:`windows_with_state` yields them), ``call`` at each TrainCall event with the model
    as it was when the call began and the items stored since the last clear (as
    :func:`calls_with_state` yields them). Raising ends the visitor's walk, as leaving those
    loops would."""

    update: Callable[[Update, BufferModel], None] | None = None
    call: Callable[[TrainCall, BufferModel, int], None] | None = None


def buffer_walk(
    trace: Trace, capacity: int, clear: Clearing, index: ItemIndex | None, visitor: BufferVisitor
) -> None:
    """Walk ``trace`` with its buffer model, handing the model to ``visitor``; raise what the
    visitor raised. The checks run together that walk the same trace with the same buffer
    share one model and one walk, each visitor fed in turn
    (:func:`~xpspec.protocol.shared_pass.together`): the model is built once rather than once
    per check. A visitor that raised is left out of the rest of the walk."""
    key = ("views.buffer_walk", Same(trace), capacity, clear, Same(index))
    raised = together(key, visitor, lambda vs: _walk(trace, capacity, clear, index, vs))
    if raised is not None:
        raise raised


def _walk(
    trace: Trace,
    capacity: int,
    clear: Clearing,
    index: ItemIndex | None,
    visitors: Sequence[BufferVisitor],
) -> list[Exception | None]:
    """What each of ``visitors`` raised (None: nothing) on one walk of ``trace`` with its
    buffer model; the model changes as in :func:`windows_with_state` and
    :func:`calls_with_state` (the same model: stores added, a trained call's clear at the
    first event after it that is neither an update nor an ``after_update`` hook)."""
    raised: list[Exception | None] = [None] * len(visitors)
    on_update = [(n, v.update) for n, v in enumerate(visitors) if v.update is not None]
    on_call = [(n, v.call) for n, v in enumerate(visitors) if v.call is not None]
    model = BufferModel(capacity, index)
    clear_pending, fresh = False, 0
    events: Iterable[Any] = trace.events
    for e in events:
        kind = e.kind
        if clear_pending and kind != "update" and not (kind == "hook" and e.name == "after_update"):
            model.clear(clear)
            clear_pending, fresh = False, 0
        if kind == "store":
            model.add(e)
            fresh += len(e.env)
        elif kind == "update" and on_update:
            for n, visit in on_update:
                try:
                    visit(e, model)
                except Exception as exc:
                    raised[n] = exc
            if any(raised[n] is not None for n, _ in on_update):
                on_update = [(n, v) for n, v in on_update if raised[n] is None]
                if not on_update and not on_call:
                    break
        elif kind == "train_call":
            for n, call in on_call:
                try:
                    call(e, model, fresh)
                except Exception as exc:
                    raised[n] = exc
            if any(raised[n] is not None for n, _ in on_call):
                on_call = [(n, c) for n, c in on_call if raised[n] is None]
                if not on_update and not on_call:
                    break
            clear_pending = clear.mode != "none" and e.status == "trained"
    return raised


def trainer_scenario(scenario: Scenario) -> TrainerScenario:
    assert isinstance(scenario, TrainerScenario)
    return scenario


def env_items(trace: Trace) -> Iterator[tuple[int, Item, EnvStep, int]]:
    """(iteration, item, event, column index) of every unrolled item, in order, as a pass over
    the trace reaches it."""
    for e in trace.of_kind("env_step"):
        for i, item in enumerate(items_of(e)):
            yield e.iteration, item, e, i


def steps_per_iteration(trace: Trace) -> list[int]:
    counts = _counts(trace)
    return [counts.steps.get(i, 0) for i in counts.iterations]


def calls_per_iteration(trace: Trace) -> list[int]:
    counts = _counts(trace)
    return [counts.calls.get(i, 0) for i in counts.iterations]


def call_statuses(trace: Trace) -> list[str]:
    """The status of every ``train_call`` of ``trace``, in trace order (counted in the pass
    that counts the per-iteration views)."""
    return list(_counts(trace).statuses)


def stored_per_iteration(trace: Trace) -> list[int]:
    """Items stored during each iteration; a flush after the last iteration is not counted."""
    counts = _counts(trace)
    strays = set(counts.stored) - set(counts.iterations)
    if strays:  # a store in no iteration of the trace (validate_trace refuses such traces)
        raise KeyError(min(strays))
    return [counts.stored.get(i, 0) for i in counts.iterations]


def buffer_shape(sc: TrainerScenario) -> tuple[bool, int, Clearing]:
    """(whole_buffer, capacity, clearing) as the spec defines them: on-policy training is
    whole-buffer training cleared with ``keep-one-step`` after every call, in a ring of
    ``u + max(T - 1, 1)`` items per env (what a clear keeps plus one unroll)."""
    cfg = sc.trainer
    shorten = cfg.short_chunks == "shorten"
    length, envs = cfg.mini_batch_length, sc.env.num_envs
    if cfg.mode == "on-policy":
        ring = int(cfg.unroll_length) + max(length - 1, 1)
        return True, ring, Clearing("keep-one-step", length, shorten, envs)
    return cfg.whole_buffer, cfg.capacity, Clearing(cfg.clear, length, shorten, envs)
