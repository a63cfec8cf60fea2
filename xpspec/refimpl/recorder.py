"""Records trainer events cheaply and turns them into a :class:`~xpspec.protocol.trace.Trace`.

Recording does no tensor work. A row event (``env_step``, ``store``) keeps its tensors as
they are (``copy=False``, for callers whose tensors are never written after they are
recorded, like the reference trainer's) or clones them (``copy=True``, the default), in one
list per kind of event; every event also appends a tuple of plain values, which the cyclic
garbage collector does not track. :meth:`Recorder.unroll` takes the rows of a whole unroll
at once, as ``[steps, B, ...]`` tensors, and keeps them as one entry: per step the events
are those of :meth:`Recorder.env_step` and :meth:`Recorder.store`, but a run keeps a few
tensors per unroll alive instead of a few per vector step, which the garbage collector's
passes would otherwise walk again and again. Event values are built once, in
:meth:`Recorder.trace`, with one concatenation and one ``tolist`` per field and kind. With
``enabled=False`` every method returns at once, so a run without tracing pays almost
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import torch

from xpspec.protocol.trace import (
    EnvStep,
    Event,
    Exclude,
    Hold,
    Hook,
    IterationEnd,
    IterationStart,
    RunEnd,
    Store,
    Trace,
    TrainCall,
    Update,
)

__all__ = ["Recorder", "windows_of"]

_INT, _FLOAT = torch.int64, torch.float64
_ENV_STEP = itemgetter("observation", "step_type", "reward", "discount", "policy_state", "action")
_STORE = itemgetter("observation", "step_type", "reward", "discount", "annotation")
# The dtype each field's values are read from (the observation: through float64 to int64).
_ENV_STEP_DTYPES = (_FLOAT, _INT, _FLOAT, _FLOAT, _INT, _INT)
_STORE_DTYPES = (_FLOAT, _INT, _FLOAT, _FLOAT, _FLOAT)
_dtype = attrgetter("dtype")
_numel = methodcaller("numel")
_SIMPLE = {
    "iteration": IterationStart,
    "train_call": TrainCall,
    "hook": Hook,
    "iteration_end": IterationEnd,
}


def _cat(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...], dim: int) -> torch.Tensor:
    """``tensors`` concatenated into rows of observations (``dim`` 2) or a vector (``dim``
    1). Mixed dtypes are converted to float64 first, one by one, as converting each tensor
    alone would; equal ones are kept."""
    if len(set(map(_dtype, tensors))) > 1:
        tensors = [t.to(torch.float64) for t in tensors]
    try:
        out = torch.cat(tensors)
    except RuntimeError:  # tensors of different ranks
        out = torch.cat([t.reshape(-1, 3) if dim == 2 else t.reshape(-1) for t in tensors])
    return out.reshape(-1, 3) if dim == 2 else out.reshape(-1)


def _rows(observation: torch.Tensor) -> int:
    """The number of rows of an event: its observations are ``[rows, 3]``."""
    return int(_numel(observation)) // 3


class _RowColumns:
    """The tensors of one kind of row event (observation first): one entry per event, or one
    per run of ``events`` events of equally many rows (rows event-major)."""

    def __init__(self, dtypes: tuple[torch.dtype, ...]) -> None:
        self.dtypes = dtypes  # the dtype each field's values are read from
        self.rows: list[Sequence[torch.Tensor]] = []
        self.events_of: list[int] = []  # events of each entry

    def add(self, tensors: Sequence[torch.Tensor], events: int = 1) -> None:
        self.rows.append(tensors)
        self.events_of.append(events)

    def clear(self) -> None:
        self.rows.clear()
        self.events_of.clear()

    def events(self) -> Iterator[tuple[Any, ...]]:
        """Per event: ``env``, ``episode``, ``t``, then each other field, as tuples of Python
        ints or floats (``int()`` / ``float()`` of each element converted to float64)."""
        if not self.rows:
            return iter(())
        fields = list(zip(*self.rows))
        bounds = [0]
        for size, events in zip(map(_rows, fields[0]), self.events_of):
            for _ in range(events):
                bounds.append(bounds[-1] + size // events)
        obs = _cat(fields[0], 2).to(_FLOAT).to(_INT)
        cols = obs.T.tolist() + [
            _cat(field, 1).to(dtype).tolist() for field, dtype in zip(fields[1:], self.dtypes[1:])
        ]
        return zip(*([tuple(c[a:b]) for a, b in pairwise(bounds)] for c in cols))


def _ints(col: torch.Tensor) -> tuple[int, ...]:
    return tuple(col.to(torch.float64).to(_INT).tolist())


def windows_of(obs: torch.Tensor, valid: torch.Tensor) -> tuple[Any, ...]:
    """Each window's items as ``(env, episode, t)``, ``None`` where ``valid`` is false."""
    if bool(valid.all()):
        items = map(tuple, obs.reshape(-1, 3).to(torch.float64).to(_INT).tolist())
        return tuple(zip(*[items] * obs.shape[1]))  # consecutive groups of T items
    ids = obs.to(torch.float64).to(_INT).tolist()
    return tuple(
        tuple(tuple(o) if m else None for o, m in zip(window, mask))
        for window, mask in zip(ids, valid.tolist())
    )


class Recorder:
    """Collects events during a run; :meth:`trace` materialises them in order."""

    def __init__(self, enabled: bool = True, copy: bool = True) -> None:
        self.enabled = enabled
        self.copy = copy
        self._raw: list[tuple[Any, ...]] = []
        self._env_steps = _RowColumns(_ENV_STEP_DTYPES)
        self._stores = _RowColumns(_STORE_DTYPES)

    def _kept(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone() if self.copy else tensor

    def iteration_start(self, iteration: int, counter: int, unroll_steps: int) -> None:
        if self.enabled:
            self._raw.append(("iteration", iteration, counter, unroll_steps))

    def env_step(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            tensors = _ENV_STEP(rows)
            self._env_steps.add([t.clone() for t in tensors] if self.copy else tensors)
            self._raw.append(("env_step", iteration))

    def store(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            tensors = _STORE(rows)
            self._stores.add([t.clone() for t in tensors] if self.copy else tensors)
            self._raw.append(("store", iteration))

    def unroll(self, iteration: int, rows: dict[str, torch.Tensor], steps: int) -> None:
        """``steps`` vector steps each of whose rows were all stored, ``rows[name]`` being
        ``[steps, B, ...]``: the events of :meth:`env_step` then :meth:`store` of each step's
        rows, in step order, with the tensors kept once for the whole unroll."""
        if self.enabled and steps:
            env_step, store = _ENV_STEP(rows), _STORE(rows)
            if self.copy:
                env_step = tuple(t.clone() for t in env_step)
                store = tuple(t.clone() for t in store)
            self._env_steps.add(env_step, steps)
            self._stores.add(store, steps)
            self._raw.extend((("env_step", iteration), ("store", iteration)) * steps)

    def exclude(self, iteration: int, rows: dict[str, torch.Tensor], reason: str) -> None:
        if self.enabled:
            self._raw.append(("exclude", iteration, self._kept(rows["observation"]), reason))

    def hold(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append(("hold", iteration, self._kept(rows["observation"])))

    def train_call(self, iteration: int, call: int, counter: int, status: str, stored: int) -> None:
        if self.enabled:
            self._raw.append(("train_call", iteration, call, counter, status, stored))

    def update(
        self,
        iteration: int,
        call: int,
        index: int,
        counter: int,
        observation: torch.Tensor,
        valid: torch.Tensor,
        loss_mask: torch.Tensor,
    ) -> None:
        if self.enabled:
            if self.copy:
                observation, valid, loss_mask = (t.clone() for t in (observation, valid, loss_mask))
            self._raw.append(
                ("update", iteration, call, index, counter, observation, valid, loss_mask)
            )

    def hook(self, iteration: int, name: str) -> None:
        if self.enabled:
            self._raw.append(("hook", iteration, name))

    def iteration_end(
        self, iteration: int, counter: int, env_steps: int, stored: int, pending: int
    ) -> None:
        if self.enabled:
            self._raw.append(("iteration_end", iteration, counter, env_steps, stored, pending))

    def run_end(
        self, iterations: int, env_steps: int, policy: str, pending: torch.Tensor | None
    ) -> None:
        if self.enabled:
            obs = torch.zeros(0, 3) if pending is None else self._kept(pending)
            self._raw.append(("run_end", iterations, env_steps, policy, obs))

    def trace(self, header: dict[str, Any] | None = None) -> Trace:
        """The recorded events as a :class:`Trace` (empty when recording was disabled; without
        the events :meth:`drain` handed over already)."""
        return Trace(tuple(self.drain()), dict(header or {}))

    def drain(self) -> list[Event]:
        """The events recorded since the last drain, materialised, and forgotten here: a run
        that hands them to a writer as it goes keeps only the events of its last iteration."""
        rows = {"env_step": self._env_steps.events(), "store": self._stores.events()}
        events = [self._materialise(r, rows) for r in self._raw]
        self._raw.clear()
        self._env_steps.clear()
        self._stores.clear()
        return events

    @staticmethod
    def _materialise(raw: tuple[Any, ...], rows: dict[str, Iterator[Any]]) -> Event:
        kind = raw[0]
        if kind == "env_step":
            return EnvStep(raw[1], *next(rows[kind]))
        if kind == "store":
            return Store(raw[1], *next(rows[kind]))
        if kind in _SIMPLE:
            return _SIMPLE[kind](*raw[1:])
        if kind == "update":
            _, iteration, call, index, counter, obs, valid, loss_mask = raw
            mask = tuple(map(tuple, loss_mask.to(_INT).tolist()))
            return Update(iteration, call, index, counter, windows_of(obs, valid), mask)
        obs = raw[-1] if kind == "run_end" else raw[2]
        env, episode, t = (_ints(c) for c in obs.reshape(-1, 3).T)
        if kind == "exclude":
            return Exclude(raw[1], env, episode, t, raw[3])
        if kind == "hold":
            return Hold(raw[1], env, episode, t)
        return RunEnd(raw[1], raw[2], raw[3], env, episode, t)
