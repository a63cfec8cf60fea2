"""Prioritized replay in TorchRL 0.14.1 (capabilities ``priorities`` and ``importance-weights``,
clauses ``priority.*``): ``ReplayBuffer`` with ``PrioritizedSampler``, whose segment trees are
TorchRL's C++ extension ``torchrl._torchrl`` (built against the installed torch by
``tools/torchrl_extension.py``). Sources are cited as ``file:function`` under ``torchrl``.

**Driving it.** The storage is the replay row's ``LazyTensorStorage(capacity * B, ndim=2)``
(one ring of ``capacity`` frames per env), the sampler ``PrioritizedSampler(capacity * B,
alpha, beta, eps=0)``, filled one collector step of ``B`` frames at a time as the replay row
fills, and by ``priority.add_steps`` more vector steps after every draw but the last. The
writer marks every written slot (``RoundRobinWriter._mark_update_entities`` ->
``PrioritizedSampler.mark_update``), which stores ``default_priority`` (the largest raw
priority given since the sampler was built, 1.0 before any) as ``(p + eps) ** alpha``
(``data/replay_buffers/samplers/prioritized.py``, ``update_priority``). A draw is
``buffer.sample(batch_size, return_info=True)``; after it ``buffer.update_priority(info["index"],
p)`` with ``p = |td| + eps`` the spec's priority of each sampled window (TorchRL's own ``eps``
is 0: the spec's offset is in ``p``, as the docstring's ``p_i = |delta_i| + eps`` has it).

**What is recorded.** Before each draw (``Priorities``): every written leaf of TorchRL's sum
tree (``sampler._sum_tree[i]``, ``i`` below ``len(storage)``, the range ``sample`` queries),
named by the frame the storage holds at ``unravel(i)``. ``Sampled``: the frames ``sample``
returned (single-item windows). ``Prioritized``: each frame's probability, its leaf over
``_sum_tree.query(0, len(storage))`` (the mass ``sample`` scans, read back at the index it
returned, before the update), and the ``priority_weight`` TorchRL returned, ``(leaf / p_min)
** -beta`` with ``p_min`` from its min tree over the storage (``sample``). TorchRL has one
normalisation, by the buffer's smallest mass: a scenario asking for ``batch-max`` gets it (see
the expectations). A draw from an empty storage raises ``RuntimeError`` in TorchRL; it is
recorded as drawing nothing.

**Windows of several items** (boundary ``forbid``): ``PrioritizedSliceSampler(capacity * B,
alpha, beta, eps=0, slice_len=W, traj_key=("collector", "traj_ids"), strict_length=True)``
over the same storage; a draw is ``buffer.sample(batch_size * W, return_info=True)``, which
zeroes the sum-tree leaves of the steps too near their trajectory's end to start a slice, has
``PrioritizedSampler.sample`` draw the starts, and restores them
(``samplers/prioritized_slice.py``, ``sample``). ``Priorities`` are the positive leaves as
that inner call reads them (captured there), each named by the frame at its leaf, the
window's first item; a window's probability is its start's leaf over the total that call
scans; its weight the first of the weights TorchRL repeats over the slice's steps; the
update ``update_priority`` at the starts (TorchRL leaves aggregating a slice's priorities to
the user). A draw TorchRL refuses (no step can start a slice: ``RuntimeError('non-positive
p_sum')``; an empty storage) is recorded as drawing nothing.

**Not expressed** (:class:`~xpspec.protocol.adapter.Unsupported`): windows of several items
that may cross episode boundaries (``cross``): TorchRL's slices stay within a trajectory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xpspec.adapters.torchrl import (
    _EMPTY,
    _SOURCE,
    _UNINITIALIZED,
    _buffer,
    _collector,
    _FrameRows,
    _seeded,
    _vector_env,
)
from xpspec.kit.events import store
from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.trace import Event, Item, Priorities, Prioritized, Sampled, Trace

__all__ = ["held_masses", "priority_problem", "run_prioritized"]

_SAMPLER_PY = f"{_SOURCE}/data/replay_buffers/samplers/prioritized.py"
_SLICE_PY = f"{_SOURCE}/data/replay_buffers/samplers/prioritized_slice.py"
_NO_MASS = "non-positive p_sum"
"""The ``RuntimeError`` of TorchRL 0.14.1's ``PrioritizedSampler.sample`` when the tree it
scans holds no mass: ``PrioritizedSliceSampler`` zeroed every start (no trajectory holds a
slice)."""


def priority_problem(scenario: ReplayScenario) -> Unsupported | None:
    """Why this row cannot run ``scenario``'s prioritized draws (None if it can)."""
    sampling = scenario.sampling
    if sampling.window_length > 1 and sampling.boundary != "forbid":
        return Unsupported(
            f"windows of {sampling.window_length} items under the boundary policy "
            f"{sampling.boundary!r}: TorchRL 0.14.1's PrioritizedSliceSampler draws slices "
            "within one trajectory (the trajectory ids it reads) and has no option to cross "
            "episode boundaries (data/replay_buffers/samplers/prioritized_slice.py, sample)",
            _SLICE_PY,
        )
    return None


def _flat(index: Any, shape: torch.Size) -> np.ndarray:
    """TorchRL's sampled index (a tuple of per-dimension tensors for an ``ndim=2`` storage)
    as the sum tree's leaf numbers (``np.ravel_multi_index``, as ``update_priority`` does)."""
    if isinstance(index, tuple):
        return np.ravel_multi_index(tuple(np.asarray(i) for i in index), tuple(shape))
    return np.asarray(index).reshape(-1)


def _stored_items(buffer: Any) -> list[Item]:
    """The frame at every written leaf, in leaf order: the storage's rows (time slots) of
    ``B`` envs, row-major, as ``ravel_multi_index`` numbers them."""
    storage = buffer.storage
    written = len(storage)
    if written == 0:
        return []
    rows = written // storage.shape[1]
    return decode_items(storage.get(slice(0, rows)).get("observation"))


def held_masses(buffer: Any) -> list[tuple[Item, float]]:
    """Every written leaf of the sampler's sum tree: the frame it names and its mass."""
    sampler = buffer.sampler
    items = _stored_items(buffer)
    return [(item, float(sampler._sum_tree[i])) for i, item in enumerate(items)]


def _draw(
    buffer: Any, sc: ReplayScenario, draw: int
) -> tuple[Sampled, Prioritized, Any, list[Item]] | None:
    """One ``sample`` call and what TorchRL computed for it, before any update; None when
    TorchRL refuses to sample an empty storage."""
    try:
        sample, info = buffer.sample(sc.batch_size, return_info=True)
    except RuntimeError as exc:
        if _EMPTY not in str(exc):
            raise
        return None
    items = decode_items(sample.get("observation"))
    leaves = _flat(info["index"], buffer.storage.shape)
    tree = buffer.sampler._sum_tree
    total = float(tree.query(0, len(buffer.storage)))
    computed = Prioritized(
        draw,
        tuple(float(tree[int(leaf)]) / total for leaf in leaves),
        tuple(float(w) for w in info["priority_weight"].reshape(-1)),
    )
    return Sampled(draw, tuple((item,) for item in items)), computed, info["index"], items


@dataclass
class _Scan:
    """What ``PrioritizedSampler.sample`` read when ``PrioritizedSliceSampler.sample`` called
    it: every written leaf (the starts that cannot begin a slice zeroed by TorchRL) and the
    total it scanned."""

    leaves: list[float] | None = None
    total: float = 0.0


@contextmanager
def _scanning(sampler: Any) -> Iterator[_Scan]:
    """Reads ``sampler``'s sum tree where ``PrioritizedSliceSampler.sample`` hands it to
    ``PrioritizedSampler.sample`` (prioritized_slice.py: after zeroing the leaves of every
    start too close to its trajectory's end, before restoring them)."""
    from torchrl.data import PrioritizedSampler

    scan = _Scan()
    original = PrioritizedSampler.sample

    def reading(self: Any, storage: Any, batch_size: int) -> Any:
        if self is sampler:
            scan.leaves = [float(self._sum_tree[i]) for i in range(len(storage))]
            scan.total = float(self._sum_tree.query(0, len(storage)))
        return original(self, storage, batch_size)

    PrioritizedSampler.sample = reading
    try:
        yield scan
    finally:
        PrioritizedSampler.sample = original


def _slice_draw(
    buffer: Any, sc: ReplayScenario, draw: int
) -> tuple[list[tuple[Item, float]], Sampled, Prioritized, Any, list[Item]]:
    """One ``PrioritizedSliceSampler`` draw of ``batch_size`` slices of ``W`` frames: the masses
    its scan read (the positive leaves, each named by the frame at that leaf, the window's
    first item), the windows, each window's probability (its start's leaf over the scanned
    total) and weight (TorchRL repeats a slice's weight over its steps: the first), the start
    indices to update, the starts' items."""
    width = sc.sampling.window_length
    items_at = _stored_items(buffer)
    with _scanning(buffer.sampler) as scan:
        try:
            sample, info = buffer.sample(sc.batch_size * width, return_info=True)
        except RuntimeError as exc:
            if not any(stop in str(exc) for stop in (_NO_MASS, _EMPTY, _UNINITIALIZED)):
                raise
            sample = None
    leaves = scan.leaves if scan.leaves is not None else [0.0] * len(items_at)
    held = [(items_at[i], m) for i, m in enumerate(leaves) if m > 0]
    if sample is None:
        return held, Sampled(draw, ()), Prioritized(draw, (), ()), None, []
    items = decode_items(sample.get("observation"))
    windows = tuple(tuple(items[k : k + width]) for k in range(0, len(items), width))
    starts = _flat(info["index"], buffer.storage.shape)[::width]
    computed = Prioritized(
        draw,
        tuple(leaves[int(leaf)] / scan.total for leaf in starts),
        tuple(float(w) for w in info["priority_weight"].reshape(-1)[::width]),
    )
    index = tuple(i[::width] for i in info["index"])
    return held, Sampled(draw, windows), computed, index, [w[0] for w in windows]


def run_prioritized(sc: ReplayScenario) -> Trace:
    """The prioritized replay row (see the module docstring)."""
    priority: PrioritySpec | None = sc.priority
    assert priority is not None
    unsupported = priority_problem(sc)
    if unsupported is not None:
        raise unsupported
    from torchrl.data import PrioritizedSampler, PrioritizedSliceSampler

    spec = sc.env
    width = sc.sampling.window_length
    events: list[Event] = []
    view = _FrameRows()
    with _seeded(sc.seed):
        law = {"alpha": float(priority.alpha), "beta": float(priority.beta), "eps": 0.0}
        if width == 1:
            sampler: Any = PrioritizedSampler(sc.capacity * spec.num_envs, **law)
        else:
            sampler = PrioritizedSliceSampler(
                sc.capacity * spec.num_envs,
                slice_len=width,
                traj_key=("collector", "traj_ids"),
                strict_length=True,
                **law,
            )
        buffer = _buffer(sc.capacity, spec.num_envs, sampler, sc.seed, None)
        steps = sc.fill_steps + (sc.draws - 1) * priority.add_steps
        collector = None
        batches: Any = iter(())
        if steps:
            collector = _collector(
                _vector_env(spec, sc.seed), spec, spec.num_envs, spec.num_envs * steps
            )
            batches = iter(collector)

        def fill(vector_steps: int) -> None:
            for _ in range(vector_steps):
                batch = next(batches)
                events.append(store(0, view.rows(batch)))
                buffer.extend(batch)

        try:
            fill(sc.fill_steps)
            for draw in range(sc.draws):
                starts: list[Item]
                if width == 1:
                    held = held_masses(buffer)
                    drawn = _draw(buffer, sc, draw)
                    if drawn is None:
                        sampled, computed, index, starts = (
                            Sampled(draw, ()),
                            Prioritized(draw, (), ()),
                            None,
                            [],
                        )
                    else:
                        sampled, computed, index, starts = drawn
                else:
                    held, sampled, computed, index, starts = _slice_draw(buffer, sc, draw)
                masses = tuple(m for _, m in held)
                events.append(Priorities(draw, *item_columns([w for w, _ in held]), masses))
                events.extend((sampled, computed))
                if starts:
                    new = torch.tensor([float(priority.priority(s, draw)) for s in starts])
                    buffer.update_priority(index, new)
                if draw < sc.draws - 1:
                    fill(priority.add_steps)
        finally:
            if collector is not None:
                collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl", "seed": sc.seed})
