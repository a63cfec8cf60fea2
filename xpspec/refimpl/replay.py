"""Replay storage and sampling: per-env rings, window validity, sampling distributions.

Storage (clause ``replay.eviction``): ``num_envs`` rings of ``capacity`` items each. Every env
keeps an absolute position counter: the ``i``-th item ever written to env ``e`` has position
``i``; positions are never reset, not even by :meth:`ReplayBuffer.clear`. A full ring evicts
its env's oldest item (clause ``replay.eviction``). The stored range of env ``e`` is
``[earliest_e, newest_e]``. Each field is one flat tensor ``[num_envs * capacity, ...]``; the
item at position ``p`` of env ``e`` lives in row ``e * capacity + p % capacity``.

Windows (clause ``replay.window-validity``): a window ``(e, s, T)`` is the items ``s .. s+T-1``
of env ``e``. A sampled window never holds an item past the newest write nor an evicted item.
Episode segments are read from stored ``step_type`` only: stored items ``p, p+1`` of one env
are separated by a boundary iff ``step_type[p] == LAST`` or ``step_type[p+1] == FIRST``
(clause ``replay.episode-segments``). See :class:`SamplingSpec` for the boundary policy,
period grid and sampling distribution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import torch
from torch import Tensor

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.sampling import (
    Anchor,
    Boundary,
    Distribution,
    Rounding,
    SamplingSpec,
    per_env_capacity,
)
from xpspec.protocol.step_type import StepType

__all__ = [
    "Anchor",
    "Boundary",
    "Distribution",
    "NoValidWindow",
    "ReplayBuffer",
    "Rounding",
    "Sample",
    "SamplingSpec",
    "per_env_capacity",
]

_FIRST = int(StepType.FIRST)
_LAST = int(StepType.LAST)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Sample:
    """Sampled windows: ``data[name]`` is ``[N, T, ...]``; ``env_ids`` and ``positions``
    (absolute start position) are ``[N]`` int64; ``mask`` is ``[N, T]`` bool, ``False``
    exactly on padding items."""

    data: dict[str, Tensor]
    env_ids: Tensor
    positions: Tensor
    mask: Tensor


class NoValidWindow(ValueError):
    """No window satisfies the sampling spec in the current buffer contents."""


class _Grid(NamedTuple):
    """Valid starts of env ``e``: ``first[e] + j * period`` for ``0 <= j < counts[e]``."""

    first: Tensor  # int64 [num_envs]
    counts: Tensor  # int64 [num_envs]
    cum: Tensor  # int64 [num_envs], inclusive cumulative sum of counts
    total: int
    shift: Tensor  # int64 [num_envs]: pooled index k of env e starts at shift[e] + k * period


class _Table(NamedTuple):
    """All valid starts, ordered by env then position (built for forbid / uniform-episodes)."""

    env: Tensor  # int64 [W]
    start: Tensor  # int64 [W]
    env_counts: Tensor  # int64 [num_envs]
    seg_offsets: Tensor  # int64 [S], index into the table of each segment's first start
    seg_counts: Tensor  # int64 [S], number of valid starts of each segment


class ReplayBuffer:
    """Per-env ring storage with window sampling (see the module docstring).

    ``fields`` maps each field name to ``(item shape, dtype)``; ``step_type`` with shape ``()``
    and dtype int64 is mandatory. Writes must hold exactly these fields with these shapes and
    dtypes, else :class:`ConfigError`.
    """

    def __init__(
        self,
        num_envs: int,
        capacity: int,
        fields: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
    ) -> None:
        if not _is_int(num_envs) or num_envs < 1:
            raise ConfigError("num_envs", num_envs, "an integer >= 1")
        if not _is_int(capacity) or capacity < 1:
            raise ConfigError("capacity", capacity, "an integer >= 1")
        if fields.get("step_type") != ((), torch.int64):
            raise ConfigError(
                "fields['step_type']", fields.get("step_type"), "((), torch.int64) (mandatory)"
            )
        self.num_envs = num_envs
        self.capacity = capacity
        self.fields: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        self._flat: dict[str, Tensor] = {}
        self._rings: dict[str, Tensor] = {}
        for name, spec in fields.items():
            shape, dtype = self._check_field_spec(name, spec)
            self.fields[name] = (shape, dtype)
            flat = torch.zeros((num_envs * capacity, *shape), dtype=dtype)
            self._flat[name] = flat
            self._rings[name] = flat.view(num_envs, capacity, *shape)
        self._names = frozenset(self.fields)
        self._row_shapes = {n: torch.Size((num_envs, *s)) for n, (s, _) in self.fields.items()}
        self._env_base = torch.arange(num_envs, dtype=torch.int64) * capacity
        self._end = torch.zeros(num_envs, dtype=torch.int64)  # newest position + 1
        self._size = torch.zeros(num_envs, dtype=torch.int64)
        self._cursor: int | None = 0  # the common end position while all envs share it
        self._common_size: int | None = 0  # the common size while all envs share it
        self._version = 0
        self._table_key: tuple[int, int, str, int, str] | None = None
        self._table: _Table | None = None
        self._grid_key: tuple[int, int, str, int, str] | None = None
        self._grid_plan: _Grid | None = None
        self._offsets: dict[int, Tensor] = {}

    @staticmethod
    def _check_field_spec(name: object, spec: object) -> tuple[tuple[int, ...], torch.dtype]:
        if not isinstance(name, str):
            raise ConfigError("fields", name, "str field names")
        ok = (
            isinstance(spec, tuple)
            and len(spec) == 2
            and isinstance(spec[0], tuple)
            and all(_is_int(d) and d >= 0 for d in spec[0])
            and isinstance(spec[1], torch.dtype)
        )
        if not ok:
            raise ConfigError(f"fields[{name!r}]", spec, "(shape tuple of ints >= 0, torch.dtype)")
        return spec[0], spec[1]  # type: ignore[index]

    # -- counters ---------------------------------------------------------------------------
    @property
    def sizes(self) -> Tensor:
        """Items currently stored per env, int64 ``[num_envs]``."""
        return self._size.clone()

    @property
    def end_positions(self) -> Tensor:
        """Items ever written per env (= newest position + 1), int64 ``[num_envs]``."""
        return self._end.clone()

    @property
    def total_stored(self) -> int:
        """Items ever written to the buffer (not capped by capacity, not reset by clear)."""
        return int(self._end.sum())

    @property
    def total_size(self) -> int:
        """Items currently stored, over all envs."""
        if self._common_size is not None:
            return self._common_size * self.num_envs
        return int(self._size.sum())

    # -- checkpoint (clause resume.buffer-restored) ------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The stored items and the write heads, as tensors (copies) and ints."""
        return {
            "flat": {name: value.clone() for name, value in self._flat.items()},
            "end": self._end.clone(),
            "size": self._size.clone(),
            "cursor": self._cursor,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Hold what ``state`` (from :meth:`state_dict` of a buffer of the same shape) holds."""
        flat = state["flat"]
        if flat.keys() != self._names:
            raise ConfigError("state['flat']", sorted(flat), f"the fields {sorted(self._names)}")
        with torch.no_grad():
            for name, value in flat.items():
                self._flat[name].copy_(value)
            self._end.copy_(state["end"])
            self._size.copy_(state["size"])
        self._cursor = state["cursor"]
        self._sync_common_size()
        self._version += 1

    def held_positions(self) -> list[tuple[int, int]]:
        """``(env, slot)`` of every stored item, per env in env order, oldest first."""
        c = self.capacity
        out: list[tuple[int, int]] = []
        for env, (end, size) in enumerate(zip(self._end.tolist(), self._size.tolist())):
            out.extend((env, p % c) for p in range(end - size, end))
        return out

    def field(self, name: str) -> Tensor:
        """Field ``name`` of the ring, ``[num_envs, capacity, ...]`` (a view: read only)."""
        return self._rings[name]

    # -- writes -----------------------------------------------------------------------------
    def _check_data(self, data: Mapping[str, Tensor], lead: int | None) -> None:
        if data.keys() != self._names:
            raise ConfigError("data", sorted(data), f"exactly the fields {sorted(self._names)}")
        for name, value in data.items():
            shape, dtype = self.fields[name]
            want = self._row_shapes[name] if lead is None else torch.Size((lead, *shape))
            if not isinstance(value, Tensor) or value.shape != want or value.dtype != dtype:
                got = (tuple(value.shape), value.dtype) if isinstance(value, Tensor) else value
                raise ConfigError(f"data[{name!r}]", got, f"a tensor {tuple(want)} of {dtype}")

    def add_row(self, data: Mapping[str, Tensor]) -> None:
        """Append one item to every env: ``data[name]`` is ``[num_envs, ...]``, row ``e`` to
        env ``e`` (clause ``replay.eviction``)."""
        self._check_data(data, None)
        if self._cursor is None:  # envs out of lockstep: one item per env, in env order
            self.add_items(torch.arange(self.num_envs), data)
            return
        with torch.no_grad():
            slot = self._cursor % self.capacity
            for name, value in data.items():
                self._rings[name][:, slot] = value
            self._cursor += 1
            self._end.add_(1)
            self._size.add_(1).clamp_(max=self.capacity)
        if self._common_size is not None:
            self._common_size = min(self._common_size + 1, self.capacity)
        self._version += 1

    def add_rows(self, data: Mapping[str, Tensor]) -> None:
        """Append ``n`` items to every env: ``data[name]`` is ``[n, num_envs, ...]``; the
        result is that of ``add_row`` called with ``data[name][0]``, ..., ``data[name][n-1]``
        in order (clause ``replay.eviction``), in at most two slice copies per field."""
        if data.keys() != self._names:
            raise ConfigError("data", sorted(data), f"exactly the fields {sorted(self._names)}")
        step = data["step_type"]
        if not isinstance(step, Tensor) or step.dim() == 0:
            raise ConfigError("data['step_type']", step, "a tensor [n, num_envs] of torch.int64")
        n = int(step.shape[0])
        for name, value in data.items():
            dtype = self.fields[name][1]
            want = torch.Size((n, *self._row_shapes[name]))
            if not isinstance(value, Tensor) or value.shape != want or value.dtype != dtype:
                got = (tuple(value.shape), value.dtype) if isinstance(value, Tensor) else value
                raise ConfigError(f"data[{name!r}]", got, f"a tensor {tuple(want)} of {dtype}")
        if n == 0:
            return
        if self._cursor is None:  # envs out of lockstep: step by step, each in env order
            env_ids = torch.arange(self.num_envs).repeat(n)
            self.add_items(env_ids, {k: v.flatten(0, 1) for k, v in data.items()})
            return
        c = self.capacity
        keep = min(n, c)  # an env's items older than its newest capacity are overwritten
        with torch.no_grad():
            slot = (self._cursor + n - keep) % c
            head = min(keep, c - slot)
            for name, value in data.items():
                ring = self._rings[name]
                src = (value if keep == n else value[n - keep :]).transpose(0, 1)
                if head == keep:
                    ring.narrow(1, slot, keep).copy_(src)
                else:
                    ring.narrow(1, slot, head).copy_(src[:, :head])
                    ring.narrow(1, 0, keep - head).copy_(src[:, head:])
            self._cursor += n
            self._end.add_(n)
            self._size.add_(n).clamp_(max=c)
        if self._common_size is not None:
            self._common_size = min(self._common_size + n, c)
        self._version += 1

    def add_items(self, env_ids: Tensor, data: Mapping[str, Tensor]) -> None:
        """Append ``n`` items to the given envs: item ``i`` (``data[name][i]``) goes to env
        ``env_ids[i]``; items of one env are appended in the given order (clause
        ``replay.storage``). If one call brings an env more than ``capacity`` items, only its
        newest ``capacity`` survive, as if they had been written one by one."""
        env_ids = torch.as_tensor(env_ids)
        if env_ids.dim() != 1 or env_ids.dtype != torch.int64:
            raise ConfigError(
                "env_ids", (tuple(env_ids.shape), env_ids.dtype), "a 1-D int64 tensor"
            )
        n = int(env_ids.shape[0])
        self._check_data(data, n)
        if n == 0:
            return
        low, high = int(env_ids.min()), int(env_ids.max())
        if low < 0 or high >= self.num_envs:
            raise ConfigError("env_ids", (low, high), f"ids in [0, {self.num_envs})")
        with torch.no_grad():
            counts = torch.bincount(env_ids, minlength=self.num_envs)
            order = torch.argsort(env_ids, stable=True)
            group_start = torch.cumsum(counts, 0) - counts
            rank = torch.empty_like(env_ids)
            rank[order] = torch.arange(n) - group_start[env_ids[order]]
            rows = self._env_base[env_ids] + (self._end[env_ids] + rank) % self.capacity
            if n > self.capacity:  # drop items overwritten within this very call
                keep = rank >= counts[env_ids] - self.capacity
                rows = rows[keep]
                for name, value in data.items():
                    self._flat[name].index_copy_(0, rows, value[keep])
            else:
                for name, value in data.items():
                    self._flat[name].index_copy_(0, rows, value)
            self._end.add_(counts)
            self._size.add_(counts).clamp_(max=self.capacity)
        first = int(self._end[0])
        self._cursor = first if bool((self._end == first).all()) else None
        self._sync_common_size()
        self._version += 1

    def clear(self, keep_last: int | Sequence[int] = 0) -> None:
        """Drop all but the newest ``keep_last`` items of every env, or of env ``e`` all but
        its newest ``keep_last[e]`` (clause ``replay.clear``); position counters keep
        counting."""
        keep = [keep_last] * self.num_envs if isinstance(keep_last, int) else list(keep_last)
        if len(keep) != self.num_envs or not all(_is_int(k) and k >= 0 for k in keep):
            raise ConfigError(
                "keep_last", keep_last, f"an integer >= 0, or {self.num_envs} of them"
            )
        self._size.copy_(torch.minimum(self._size, torch.tensor(keep, dtype=self._size.dtype)))
        self._sync_common_size()
        self._version += 1

    def _sync_common_size(self) -> None:
        """Read the common size off the per-env sizes (after a write that may change them
        unequally)."""
        first = int(self._size[0])
        self._common_size = first if bool((self._size == first).all()) else None

    # -- validity ---------------------------------------------------------------------------
    def _common_starts(self, sampling: SamplingSpec) -> tuple[int, int] | None:
        """``(first, count)``: every env's valid starts are ``first + j * period`` for
        ``0 <= j < count``, for cross and pad, while all envs hold the same positions (written
        in lockstep: the trainer's buffer without preprocessing); ``None`` otherwise. The
        progression of :meth:`_grid`, worked out from the common end and size, which every
        write keeps up to date: nothing to rebuild after a write."""
        if self._cursor is None or self._common_size is None:
            return None
        end, size = self._cursor, self._common_size
        earliest = end - size
        reach = sampling.window_length - 1 if sampling.boundary == "cross" else 0
        p = sampling.period
        if p == 1:
            return earliest, max(size - reach, 0)
        last = end - 1 - reach
        first = earliest if sampling.anchor == "oldest" else (earliest + (p - 1)) // p * p
        return first, (last - first) // p + 1 if last >= first else 0

    def _grid(self, sampling: SamplingSpec) -> _Grid:
        """Valid starts per env as arithmetic progressions, for cross and pad (cached until
        the next write)."""
        key = (
            self._version,
            sampling.window_length,
            sampling.boundary,
            sampling.period,
            sampling.anchor,
        )
        if self._grid_key == key and self._grid_plan is not None:
            return self._grid_plan
        earliest = self._end - self._size
        reach = sampling.window_length - 1 if sampling.boundary == "cross" else 0
        p = sampling.period
        if p == 1:
            first, count = earliest, (self._size - reach).clamp_(min=0)
        else:
            last = self._end - 1 - reach
            first = earliest if sampling.anchor == "oldest" else (earliest + (p - 1)) // p * p
            count = torch.where(last >= first, (last - first) // p + 1, 0)
        cum = torch.cumsum(count, 0)
        shift = first - (cum - count) * p
        self._grid_plan = _Grid(first, count, cum, int(cum[-1]), shift)
        self._grid_key = key
        return self._grid_plan

    def _valid_table(self, sampling: SamplingSpec) -> _Table:
        """Every valid start, tabulated and cached until the next write."""
        key = (
            self._version,
            sampling.window_length,
            sampling.boundary,
            sampling.period,
            sampling.anchor,
        )
        if self._table_key == key and self._table is not None:
            return self._table
        t = sampling.window_length
        width = max(int(self._size.max()), 1)
        earliest = self._end - self._size
        i = torch.arange(width)
        stored = i < self._size[:, None]  # [E, W] logical index i holds an item
        pos = earliest[:, None] + i
        step = self._flat["step_type"][(self._env_base[:, None] + pos % self.capacity).reshape(-1)]
        step = step.view(self.num_envs, width)
        boundary = torch.zeros_like(stored)  # boundary between logical items i-1 and i
        boundary[:, 1:] = ((step[:, :-1] == _LAST) | (step[:, 1:] == _FIRST)) & stored[:, 1:]
        segment = torch.cumsum(boundary, 1)  # segment index within the env
        if sampling.boundary == "pad":
            valid = stored.clone()
        else:
            valid = torch.zeros_like(stored)
            if t <= width:
                valid[:, : width - t + 1] = stored[:, t - 1 :]
                if sampling.boundary == "forbid":
                    valid[:, : width - t + 1] &= segment[:, t - 1 :] == segment[:, : width - t + 1]
        p = sampling.period
        if p > 1:
            valid &= (pos if sampling.anchor == "absolute" else i) % p == 0
        env, index = valid.nonzero(as_tuple=True)
        start = earliest[env] + index
        seg_key = env * (width + 1) + segment[env, index]
        _, seg_counts = torch.unique_consecutive(seg_key, return_counts=True)
        seg_offsets = torch.cumsum(seg_counts, 0) - seg_counts
        env_counts = torch.bincount(env, minlength=self.num_envs)
        self._table = _Table(env, start, env_counts, seg_offsets, seg_counts)
        self._table_key = key
        return self._table

    def _uses_grid(self, sampling: SamplingSpec) -> bool:
        return sampling.boundary != "forbid" and sampling.distribution != "uniform-episodes"

    def num_valid_windows(self, sampling: SamplingSpec) -> int:
        """Number of valid ``(env, start)`` pairs under ``sampling``."""
        if self._uses_grid(sampling):
            return self._grid(sampling).total
        return int(self._valid_table(sampling).env.shape[0])

    def valid_starts(self, env: int, sampling: SamplingSpec) -> list[int]:
        """The valid starts of ``env``, ascending, computed item by item from the definitions
        (slow; for checks and tests)."""
        if not _is_int(env) or not 0 <= env < self.num_envs:
            raise ConfigError("env", env, f"an integer in [0, {self.num_envs})")
        end, size = int(self._end[env]), int(self._size[env])
        earliest, t, p = end - size, sampling.window_length, sampling.period
        steps = {
            q: int(self._flat["step_type"][env * self.capacity + q % self.capacity])
            for q in range(earliest, end)
        }

        def cut(q: int) -> bool:  # boundary between stored items q and q + 1
            return steps[q] == _LAST or steps[q + 1] == _FIRST

        starts = []
        for s in range(earliest, end):
            if (s if sampling.anchor == "absolute" else s - earliest) % p:
                continue
            if sampling.boundary != "pad" and s + t - 1 > end - 1:
                continue
            if sampling.boundary == "forbid" and any(cut(q) for q in range(s, s + t - 1)):
                continue
            starts.append(s)
        return starts

    def window_probabilities(self, sampling: SamplingSpec) -> dict[tuple[int, int], Fraction]:
        """Exact probability that one batch row is window ``(env, start)``, averaged over the
        rows of a batch (for ``"env-balanced"`` each env gets a ``1/num_envs`` share whatever
        the batch size). Slow; built on :meth:`valid_starts`."""
        starts = {e: self.valid_starts(e, sampling) for e in range(self.num_envs)}
        total = sum(len(v) for v in starts.values())
        if total == 0:
            return {}
        if sampling.distribution == "uniform-windows":
            return {(e, s): Fraction(1, total) for e, v in starts.items() for s in v}
        if sampling.distribution == "env-balanced":
            if any(not v for v in starts.values()):
                return {}
            return {
                (e, s): Fraction(1, self.num_envs * len(v)) for e, v in starts.items() for s in v
            }
        groups: dict[tuple[int, int], list[int]] = {}
        for e, v in starts.items():
            for s in v:
                groups.setdefault((e, self._segment_first(e, s)), []).append(s)
        return {
            (e, s): Fraction(1, len(groups) * len(v)) for (e, _), v in groups.items() for s in v
        }

    def _segment_first(self, env: int, position: int) -> int:
        """First stored position of the episode segment holding ``position`` (slow)."""
        earliest = int(self._end[env] - self._size[env])
        base = env * self.capacity
        q = position
        while q > earliest:
            before = int(self._flat["step_type"][base + (q - 1) % self.capacity])
            here = int(self._flat["step_type"][base + q % self.capacity])
            if before == _LAST or here == _FIRST:
                break
            q -= 1
        return q

    # -- sampling ---------------------------------------------------------------------------
    def _no_window(self, sampling: SamplingSpec, why: str) -> NoValidWindow:
        return NoValidWindow(
            f"{why}: window_length={sampling.window_length}, boundary={sampling.boundary!r}, "
            f"period={sampling.period}, anchor={sampling.anchor!r}, "
            f"sizes={self._size.tolist()}, capacity={self.capacity}"
        )

    def _balanced_envs(self, batch_size: int, generator: torch.Generator) -> Tensor:
        n = self.num_envs
        envs = torch.arange(n).repeat(batch_size // n)
        rem = batch_size % n
        if rem:
            extra = torch.randperm(n, generator=generator)[:rem]
            envs = torch.cat([envs, extra])
        return envs

    @staticmethod
    def _below(high: Tensor, generator: torch.Generator) -> Tensor:
        """One uniform integer in ``[0, high[i])`` per entry (every ``high[i] >= 1``)."""
        u = torch.rand(high.shape, generator=generator, dtype=torch.float64)
        return torch.minimum((u * high).long(), high - 1)

    def sample(self, batch_size: int, sampling: SamplingSpec, generator: torch.Generator) -> Sample:
        """Draw ``batch_size`` windows independently (clauses ``replay.window-validity``,
        ``replay.distribution``); deterministic given ``generator``'s state. Raises
        :class:`NoValidWindow` when the distribution has nothing to draw from (for
        ``"env-balanced"``: when some env has no valid window, as ALF asserts)."""
        if not _is_int(batch_size) or batch_size < 1:
            raise ConfigError("batch_size", batch_size, "an integer >= 1")
        dist = sampling.distribution
        common = self._common_starts(sampling) if self._uses_grid(sampling) else None
        if common is not None:  # every env's valid starts are first + j * p, j < count
            first, count = common
            p = sampling.period
            if dist == "uniform-windows":
                if count == 0:
                    raise self._no_window(sampling, "no valid window")
                # Pooled index k (env-major, as in the grid) is start k % count of env k // count.
                k = torch.randint(0, count * self.num_envs, (batch_size,), generator=generator)
                env, j = k // count, k % count
            else:  # env-balanced
                if count == 0:
                    raise self._no_window(
                        sampling, "env-balanced needs a valid window in every env"
                    )
                env = self._balanced_envs(batch_size, generator)
                j = self._below(torch.full((batch_size,), count), generator)
            start = first + (j if p == 1 else j * p)
        elif self._uses_grid(sampling):
            grid = self._grid(sampling)
            p = sampling.period
            if dist == "uniform-windows":
                if grid.total == 0:
                    raise self._no_window(sampling, "no valid window")
                k = torch.randint(0, grid.total, (batch_size,), generator=generator)
                env = torch.searchsorted(grid.cum, k, right=True)
                start = grid.shift.index_select(0, env) + (k if p == 1 else k * p)
            else:  # env-balanced
                if int(grid.counts.min()) == 0:
                    raise self._no_window(
                        sampling, "env-balanced needs a valid window in every env"
                    )
                env = self._balanced_envs(batch_size, generator)
                j = self._below(grid.counts.index_select(0, env), generator)
                start = grid.first.index_select(0, env) + (j if p == 1 else j * p)
        else:
            table = self._valid_table(sampling)
            width = int(table.env.shape[0])
            if width == 0:
                raise self._no_window(sampling, "no valid window")
            if dist == "uniform-windows":
                k = torch.randint(0, width, (batch_size,), generator=generator)
            elif dist == "env-balanced":
                if int(table.env_counts.min()) == 0:
                    raise self._no_window(
                        sampling, "env-balanced needs a valid window in every env"
                    )
                env = self._balanced_envs(batch_size, generator)
                offsets = torch.cumsum(table.env_counts, 0) - table.env_counts
                k = offsets[env] + self._below(table.env_counts[env], generator)
            else:  # uniform-episodes
                n_seg = int(table.seg_counts.shape[0])
                seg = torch.randint(0, n_seg, (batch_size,), generator=generator)
                k = table.seg_offsets[seg] + self._below(table.seg_counts[seg], generator)
            env, start = table.env[k], table.start[k]
        return self._gather(env, start, sampling.window_length, sampling.boundary == "pad")

    def _gather(self, env: Tensor, start: Tensor, length: int, pad: bool) -> Sample:
        """The windows ``(env[i], start[i], length)``, one ``index_select`` per field."""
        n = int(env.shape[0])
        base = self._env_base.index_select(0, env)
        if length == 1 and not pad:
            rows = base + start % self.capacity
        else:
            offsets = self._offsets.get(length)
            if offsets is None:
                offsets = self._offsets[length] = torch.arange(length)
            positions = start[:, None] + offsets
            rows = (base[:, None] + positions % self.capacity).view(-1)
        data = {
            name: self._flat[name].index_select(0, rows).view(n, length, *shape)
            for name, (shape, _) in self.fields.items()
        }
        if not pad:
            mask = torch.ones((n, length), dtype=torch.bool)
            return Sample(data, env, start, mask)
        step = data["step_type"]
        ok = positions < self._end[env][:, None]
        ok[:, 1:] &= (step[:, :-1] != _LAST) & (step[:, 1:] != _FIRST)
        mask = torch.cummin(ok.to(torch.uint8), 1).values.bool()
        for value in data.values():
            zero = ~mask.view(n, length, *([1] * (value.dim() - 2)))
            value.masked_fill_(zero, 0)
        return Sample(data, env, start, mask)

    # -- whole-buffer training --------------------------------------------------------------
    def chunks(self, length: int) -> Sample:
        """Each env's stored items, oldest first, cut into consecutive windows of ``length``;
        the newest ``size % length`` items of each env are dropped (clause
        ``replay.whole-buffer``; ALF 4.x ``Algorithm._train_experience`` truncates to
        ``length // mini_batch_length * mini_batch_length`` steps). Rows are env-major, oldest
        chunk first. Raises :class:`NoValidWindow` when no env holds ``length`` items."""
        if not _is_int(length) or length < 1:
            raise ConfigError("length", length, "an integer >= 1")
        per_env = self._size // length
        total = int(per_env.sum())
        if total == 0:
            raise self._no_window(SamplingSpec(window_length=length), "no whole chunk stored")
        env = torch.repeat_interleave(torch.arange(self.num_envs), per_env)
        rank = torch.arange(total) - (torch.cumsum(per_env, 0) - per_env)[env]
        start = (self._end - self._size)[env] + rank * length
        return self._gather(env, start, length, pad=False)
