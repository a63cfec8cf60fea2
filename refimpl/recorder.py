"""Records trainer events cheaply and turns them into a :class:`~refimpl.trace.Trace`.

Recording appends one small tuple per event and does no tensor work: the row tensors of an
event are kept as they are (``copy=False``, for callers whose tensors are never written
after they are recorded, like the reference trainer's) or cloned (``copy=True``, the
default). Converting them into event values happens once, in :meth:`Recorder.trace`, one
concatenation per field over all events of a kind. With ``enabled=False`` every method
returns at once, so a run without tracing pays almost nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from operator import itemgetter
from typing import Any

import torch

from refimpl.trace import (
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

__all__ = ["Recorder"]

_ENV_STEP_FIELDS = itemgetter(
    "observation", "step_type", "reward", "discount", "policy_state", "action"
)
_STORE_FIELDS = itemgetter("observation", "step_type", "reward", "discount", "annotation")

_INT, _FLOAT = torch.int64, torch.float64
_ENV_STEP_KINDS = (_INT, _FLOAT, _FLOAT, _INT, _INT)  # the fields after the observation
_STORE_KINDS = (_INT, _FLOAT, _FLOAT, _FLOAT)


def _cat(tensors: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """``tensors`` concatenated along dim 0 and converted to ``dtype``; mixed dtypes go
    through float64 one by one, as a single conversion of each tensor would."""
    first = tensors[0].dtype
    if any(t.dtype != first for t in tensors):
        tensors = [t.to(torch.float64) for t in tensors]
    return torch.cat(tensors).to(dtype)


def _shaped(t: torch.Tensor, dim: int) -> torch.Tensor:
    """``t`` as rows of observations (``dim`` 2) or as a vector (``dim`` 1)."""
    if t.dim() == dim:
        return t
    return t.reshape(-1, 3) if dim == 2 else t.reshape(-1)


def _row_columns(
    raws: Sequence[tuple[Any, ...]], kinds: Sequence[torch.dtype]
) -> Iterator[list[tuple[Any, ...]]]:
    """Per event of ``raws`` (``(tag, iteration, (observation, *fields))``): ``env``,
    ``episode``, ``t`` and then each field as tuples of Python ints or floats. Values are
    those of ``int()`` / ``float()`` applied to each element converted to float64."""
    sizes = [int(r[2][0].shape[0]) for r in raws]
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    obs = _cat([_shaped(r[2][0], 2) for r in raws], torch.float64).to(_INT).T.tolist()
    cols = obs + [
        _cat([_shaped(r[2][i], 1) for r in raws], kind).tolist() for i, kind in enumerate(kinds, 1)
    ]
    for column in cols:
        yield [tuple(column[a:b]) for a, b in pairwise(bounds)]


def _ints(col: torch.Tensor) -> tuple[int, ...]:
    return tuple(col.to(torch.float64).to(_INT).tolist())


def _windows(obs: torch.Tensor, valid: torch.Tensor) -> tuple[Any, ...]:
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

    def _rows(self, rows: dict[str, torch.Tensor], fields: itemgetter[Any]) -> Any:
        tensors = fields(rows)
        return tuple(t.clone() for t in tensors) if self.copy else tensors

    def _observation(self, rows: dict[str, torch.Tensor]) -> torch.Tensor:
        return rows["observation"].clone() if self.copy else rows["observation"]

    def iteration_start(self, iteration: int, counter: int, unroll_steps: int) -> None:
        if self.enabled:
            self._raw.append((IterationStart, iteration, counter, unroll_steps))

    def env_step(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append((EnvStep, iteration, self._rows(rows, _ENV_STEP_FIELDS)))

    def store(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append((Store, iteration, self._rows(rows, _STORE_FIELDS)))

    def exclude(self, iteration: int, rows: dict[str, torch.Tensor], reason: str) -> None:
        if self.enabled:
            self._raw.append((Exclude, iteration, self._observation(rows), reason))

    def hold(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append((Hold, iteration, self._observation(rows)))

    def train_call(self, iteration: int, call: int, counter: int, status: str, stored: int) -> None:
        if self.enabled:
            self._raw.append((TrainCall, iteration, call, counter, status, stored))

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
            tensors = [observation, valid, loss_mask]
            if self.copy:
                tensors = [t.clone() for t in tensors]
            self._raw.append((Update, iteration, call, index, counter, *tensors))

    def hook(self, iteration: int, name: str) -> None:
        if self.enabled:
            self._raw.append((Hook, iteration, name))

    def iteration_end(
        self, iteration: int, counter: int, env_steps: int, stored: int, pending: int
    ) -> None:
        if self.enabled:
            self._raw.append((IterationEnd, iteration, counter, env_steps, stored, pending))

    def run_end(
        self, iterations: int, env_steps: int, policy: str, pending: torch.Tensor | None
    ) -> None:
        if self.enabled:
            if pending is None:
                obs = torch.zeros(0, 3)
            else:
                obs = pending.clone() if self.copy else pending
            self._raw.append((RunEnd, iterations, env_steps, policy, obs))

    def trace(self, header: dict[str, Any] | None = None) -> Trace:
        """The recorded events as a :class:`Trace` (empty when recording was disabled)."""
        columns: dict[type, Iterator[tuple[Any, ...]]] = {}
        for cls, kinds in ((EnvStep, _ENV_STEP_KINDS), (Store, _STORE_KINDS)):
            raws = [r for r in self._raw if r[0] is cls]
            if raws:
                columns[cls] = zip(*_row_columns(raws, kinds))
        return Trace(tuple(self._materialise(r, columns) for r in self._raw), dict(header or {}))

    @staticmethod
    def _materialise(raw: tuple[Any, ...], columns: dict[type, Iterator[Any]]) -> Event:
        cls = raw[0]
        if cls is EnvStep or cls is Store:
            return cls(raw[1], *next(columns[cls]))
        if cls is Exclude or cls is Hold or cls is RunEnd:
            obs = raw[-1] if cls is RunEnd else raw[2]
            env, episode, t = (_ints(c) for c in obs.reshape(-1, 3).T)
            if cls is Exclude:
                return Exclude(raw[1], env, episode, t, raw[3])
            if cls is Hold:
                return Hold(raw[1], env, episode, t)
            return RunEnd(raw[1], raw[2], raw[3], env, episode, t)
        if cls is Update:
            _, iteration, call, index, counter, obs, valid, loss_mask = raw
            mask = tuple(map(tuple, loss_mask.to(_INT).tolist()))
            return Update(iteration, call, index, counter, _windows(obs, valid), mask)
        return cls(*raw[1:])
