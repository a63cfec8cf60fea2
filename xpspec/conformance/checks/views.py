"""Read-only views of a trace that several checks share (items, per-iteration counts, and
the per-env buffer contents implied by the stores)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from xpspec.conformance.checks.base import CheckFailure
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import EnvStep, Item, Store, Trace, TrainCall, Update, Window

__all__ = [
    "BufferModel",
    "Clearing",
    "Columnar",
    "InIteration",
    "buffer_shape",
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


def iterations(trace: Trace) -> list[int]:
    return [e.iteration for e in trace.of_kind("iteration")]


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


@dataclass
class BufferModel:
    """Per-env stored sequences implied by Store events, with per-env capacity.

    ``stored[env]`` lists every item ever stored for that env; ``start[env]`` is the index of
    the oldest item still in the buffer (eviction and clearing move it forward).
    """

    capacity: int
    stored: dict[int, list[Item]] = field(default_factory=lambda: defaultdict(list))
    start: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    step_type: dict[Item, int] = field(default_factory=dict)
    cleared: set[Item] = field(default_factory=set)
    """Items a clear removed (as opposed to evicted by a full ring)."""
    kept: dict[int, list[Item]] = field(default_factory=dict)
    """Per env, the items the last clear kept."""

    def add(self, event: Store) -> None:
        for item, st in zip(items_of(event), event.step_type):
            seq = self.stored[item[0]]
            seq.append(item)
            self.step_type[item] = st
            self.start[item[0]] = max(self.start[item[0]], len(seq) - self.capacity)

    def clear(self, clearing: Clearing) -> None:
        """The clear after a trained call (clause ``replay.clear``)."""
        sizes = [len(self.live(env)) for env in range(clearing.num_envs)]
        for env, kept in enumerate(clearing.kept(sizes)):
            seq = self.stored[env]
            start = max(self.start[env], len(seq) - kept)
            self.cleared.update(seq[self.start[env] : start])
            self.start[env] = start
            self.kept[env] = list(seq[start:])

    def absence(self, item: Item) -> str:
        """The clause that explains why ``item`` is not in the buffer: ``replay.clear`` if a
        clear removed it, ``replay.eviction`` if a full ring did, ``replay.window-validity``
        if it was never stored."""
        if item in self.cleared:
            return "replay.clear"
        return "replay.eviction" if item in self.step_type else "replay.window-validity"

    def live(self, env: int) -> list[Item]:
        """The items of ``env`` currently in the buffer, oldest first."""
        return self.stored[env][self.start[env] :]

    def position(self, env: int, index: int) -> int:
        """The absolute position of ``live(env)[index]``."""
        return self.start[env] + index

    def locate(self, window: Window) -> tuple[int, int] | None:
        """``(env, index into live(env))`` of the window's first item, or None (its absolute
        start is :meth:`position` of that)."""
        first = window[0]
        if first is None:
            return None
        live = self.live(first[0])
        try:
            return first[0], live.index((first[0], first[1], first[2]))
        except ValueError:
            return None


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
    trace: Trace, capacity: int, clear: Clearing
) -> Iterator[tuple[Update, BufferModel]]:
    """Each Update event with the buffer model as it was when the update sampled.

    Clearing (clause ``replay.clear``) takes effect when a call that trained is over, i.e. at
    the first event after it that is neither an update nor an ``after_update`` hook.
    """
    model = BufferModel(capacity)
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
    trace: Trace, capacity: int, clear: Clearing
) -> Iterator[tuple[TrainCall, BufferModel, int]]:
    """Each TrainCall event with the buffer model as it was when the call began, and the
    number of items stored since the last clear (since the start without clearing).

    Clearing takes effect as in :func:`windows_with_state`: once a call that trained is over.
    """
    model = BufferModel(capacity)
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


def trainer_scenario(scenario: Scenario) -> TrainerScenario:
    assert isinstance(scenario, TrainerScenario)
    return scenario


def env_items(trace: Trace) -> list[tuple[int, Item, EnvStep, int]]:
    """(iteration, item, event, column index) of every unrolled item, in order."""
    out = []
    for e in trace.of_kind("env_step"):
        for i, item in enumerate(items_of(e)):
            out.append((e.iteration, item, e, i))
    return out


def steps_per_iteration(trace: Trace) -> list[int]:
    counts = per_iteration(trace, trace.of_kind("env_step"))
    return [counts[i] for i in iterations(trace)]


def calls_per_iteration(trace: Trace) -> list[int]:
    counts = per_iteration(trace, trace.of_kind("train_call"))
    return [counts[i] for i in iterations(trace)]


def stored_per_iteration(trace: Trace) -> list[int]:
    """Items stored during each iteration; a flush after the last iteration is not counted."""
    counts = dict.fromkeys(iterations(trace), 0)
    closed: set[int] = set()
    for e in trace.events:
        if e.kind == "iteration_end":
            closed.add(e.iteration)
        elif e.kind == "store" and e.iteration not in closed:
            counts[e.iteration] += len(e.env)
    return [counts[i] for i in iterations(trace)]


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
