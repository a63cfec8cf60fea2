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

**Not expressed** (:class:`~xpspec.protocol.adapter.Unsupported`): windows of more than one
item. TorchRL's ``PrioritizedSliceSampler`` draws slice starts from the same trees; a row
driving it is owed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xpspec.adapters.torchrl import (
    _EMPTY,
    _SOURCE,
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


def priority_problem(scenario: ReplayScenario) -> Unsupported | None:
    """Why this row cannot run ``scenario``'s prioritized draws (None if it can)."""
    sampling = scenario.sampling
    if sampling.window_length != 1:
        return Unsupported(
            f"windows of {sampling.window_length} items under priorities: TorchRL 0.14.1's "
            "PrioritizedSliceSampler (data/replay_buffers/samplers/prioritized_slice.py) draws "
            "slice starts from PrioritizedSampler's trees; the row driving it is not written "
            "yet (this row drives PrioritizedSampler, single items)",
            f"{_SOURCE}/data/replay_buffers/samplers/prioritized_slice.py",
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


def run_prioritized(sc: ReplayScenario) -> Trace:
    """The prioritized replay row (see the module docstring)."""
    priority: PrioritySpec | None = sc.priority
    assert priority is not None
    unsupported = priority_problem(sc)
    if unsupported is not None:
        raise unsupported
    from torchrl.data import PrioritizedSampler

    spec = sc.env
    events: list[Event] = []
    view = _FrameRows()
    with _seeded(sc.seed):
        sampler = PrioritizedSampler(
            sc.capacity * spec.num_envs,
            alpha=float(priority.alpha),
            beta=float(priority.beta),
            eps=0.0,
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
                held = held_masses(buffer)
                events.append(
                    Priorities(draw, *item_columns([w for w, _ in held]), tuple(m for _, m in held))
                )
                drawn = _draw(buffer, sc, draw)
                if drawn is None:
                    events.extend((Sampled(draw, ()), Prioritized(draw, (), ())))
                else:
                    sampled, computed, index, items = drawn
                    events.extend((sampled, computed))
                    new = torch.tensor([float(priority.priority(s, draw)) for s in items])
                    buffer.update_priority(index, new)
                if draw < sc.draws - 1:
                    fill(priority.add_steps)
        finally:
            if collector is not None:
                collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl", "seed": sc.seed})
