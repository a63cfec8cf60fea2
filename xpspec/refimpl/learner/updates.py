"""Gradient-update counts and minibatch plans for one batch of training rows (clause
``learner.update-count``), with RLlib's and ALF's rules as variants."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from xpspec.protocol.errors import ConfigError
from xpspec.refimpl.learner._common import (
    UpdateVariant,
    check_variant,
    is_int,
)

__all__ = [
    "Minibatch",
    "alf_adjusted_mini_batch_size",
    "minibatch_plan",
    "num_gradient_updates",
    "rllib_sharded_minibatches",
]


def alf_adjusted_mini_batch_size(batch_size: int, mini_batch_size: int) -> int:
    """ALF's whole-buffer mini-batch size for ``batch_size`` sequences: ``ceil(B / (B // M))``
    when ``B mod M > 0`` and ``B >= M``, else ``M`` (ALF snapshot ``23aca492``,
    ``Algorithm._train_experience``; variant ``alf-resized-mini-batch``)."""
    if batch_size % mini_batch_size > 0 and batch_size // mini_batch_size > 0:
        return math.ceil(batch_size / (batch_size // mini_batch_size))
    return mini_batch_size


def _check_counts(num_items: int, num_epochs: int, minibatch_size: int | None) -> None:
    if not is_int(num_items) or num_items < 0:
        raise ConfigError("num_items", num_items, "an integer >= 0")
    if not is_int(num_epochs) or num_epochs < 1:
        raise ConfigError("num_epochs", num_epochs, "an integer >= 1")
    if minibatch_size is not None and (not is_int(minibatch_size) or minibatch_size < 1):
        raise ConfigError("minibatch_size", minibatch_size, "None or an integer >= 1")


def num_gradient_updates(
    num_items: int,
    num_epochs: int,
    minibatch_size: int | None,
    *,
    variant: UpdateVariant = "spec",
) -> int:
    """Gradient updates for one batch of ``num_items`` rows (clause ``learner.update-count``).

    - ``"spec"``: ``num_epochs * ceil(num_items / minibatch_size)``, the last short minibatch
      kept; ``minibatch_size=None`` is one full-batch update per epoch; no items, no updates.
    - ``"rllib-2.60"`` (local learner, rllib.md §3.5): ``ceil(num_epochs * N / M)`` with
      ``N = num_items`` the module-batch rows (for PPO ``sum(len) + #chunks``: bootstrap rows
      count); ``M=None`` gives ``num_epochs`` updates. An empty batch is an error in RLlib.
    - ``"alf"`` (alf.md §4.8): ``num_items`` = sequences ``B``, ``num_epochs`` =
      ``num_updates_per_train_iter``; ``num_epochs * ceil(B / adjusted_mbs)``.
    """
    check_variant("variant", variant, ("spec", "rllib-2.60", "alf"))
    _check_counts(num_items, num_epochs, minibatch_size)
    if variant == "spec":
        if num_items == 0:
            return 0
        if minibatch_size is None:
            return num_epochs
        return num_epochs * math.ceil(num_items / minibatch_size)
    if num_items == 0:
        raise ConfigError("num_items", 0, f"an integer >= 1 (variant {variant!r})")
    if variant == "rllib-2.60":
        if minibatch_size is None:
            return num_epochs
        return math.ceil(num_epochs * num_items / minibatch_size)
    if minibatch_size is None:
        raise ConfigError("minibatch_size", None, "an integer >= 1 (ALF: default num_envs)")
    return num_epochs * math.ceil(
        num_items / alf_adjusted_mini_batch_size(num_items, minibatch_size)
    )


def rllib_sharded_minibatches(
    total_timesteps: int, num_epochs: int, minibatch_size: int | None, num_shards: int
) -> int:
    """``num_total_minibatches`` RLlib 2.60 gives each learner when sharding (rllib.md §3.6):
    ``int(num_epochs * total_timesteps / (num_shards * minibatch_size))`` from the pre-bootstrap
    timesteps, or 0 (epoch-based loop) with one shard or no minibatch size."""
    _check_counts(total_timesteps, num_epochs, minibatch_size)
    if not is_int(num_shards) or num_shards < 1:
        raise ConfigError("num_shards", num_shards, "an integer >= 1")
    if num_shards == 1 or minibatch_size is None:
        return 0
    return num_epochs * total_timesteps // (num_shards * minibatch_size)


@dataclass(frozen=True)
class Minibatch:
    """One gradient update: the batch ``rows`` it sees, the epoch it starts in, and its loss
    weight relative to a full minibatch (ALF scales a short one down; the spec does not)."""

    epoch: int
    rows: tuple[int, ...]
    weight: Fraction = Fraction(1)


def _perm(n: int, generator: torch.Generator | None) -> torch.Tensor:
    if generator is None:
        raise ConfigError("generator", None, "a torch.Generator when shuffling")
    return torch.randperm(n, generator=generator)


def minibatch_plan(
    num_items: int,
    num_epochs: int,
    minibatch_size: int | None,
    *,
    generator: torch.Generator | None = None,
    shuffle: bool = True,
    variant: UpdateVariant = "spec",
) -> tuple[Minibatch, ...]:
    """The rows of every update, in order; ``len(plan) == num_gradient_updates(...)``.

    - ``"spec"``: every epoch draws ``torch.randperm(num_items, generator=generator)``
      (identity order if ``shuffle`` is false) and cuts it into consecutive minibatches.
    - ``"rllib-2.60"`` (``MiniBatchCyclicIterator``, rllib.md §3.5): a cursor walks the rows
      cyclically taking exactly ``M`` per update, so an update can straddle an epoch (and
      repeat a row); the row order is re-permuted each time the cursor wraps, only if
      ``shuffle`` and ``num_epochs > 1`` — the first epoch is never shuffled.
    - ``"alf"`` (alf.md §4.8): per update round a fresh permutation when the (adjusted)
      minibatch size is below ``B``, sequential otherwise (``shuffle`` ignored: ALF always
      shuffles); a short minibatch gets weight ``len / mbs``.
    """
    count = num_gradient_updates(num_items, num_epochs, minibatch_size, variant=variant)
    plan: list[Minibatch] = []
    if variant == "spec":
        size = num_items if minibatch_size is None else minibatch_size
        for epoch in range(num_epochs if num_items else 0):
            if shuffle and minibatch_size is not None:
                order = _perm(num_items, generator).tolist()
            else:
                order = list(range(num_items))
            for start in range(0, num_items, size):
                plan.append(Minibatch(epoch, tuple(order[start : start + size])))
    elif variant == "rllib-2.60":
        if minibatch_size is None:
            return tuple(Minibatch(e, tuple(range(num_items))) for e in range(count))
        reshuffle = shuffle and num_epochs > 1
        order = list(range(num_items))
        cursor, covered = 0, 0
        for _ in range(count):
            epoch, need = covered, minibatch_size
            rows: list[int] = []
            while need >= num_items - cursor:
                rows.extend(order[cursor:])
                need -= num_items - cursor
                cursor, covered = 0, covered + 1
                if reshuffle:
                    perm = _perm(num_items, generator).tolist()
                    order = [order[i] for i in perm]
            rows.extend(order[cursor : cursor + need])
            cursor += need
            plan.append(Minibatch(epoch, tuple(rows)))
    else:
        assert minibatch_size is not None
        size = alf_adjusted_mini_batch_size(num_items, minibatch_size)
        for epoch in range(num_epochs):
            order = (
                _perm(num_items, generator).tolist() if size < num_items else list(range(num_items))
            )
            for start in range(0, num_items, size):
                chunk = tuple(order[start : start + size])
                plan.append(Minibatch(epoch, chunk, Fraction(len(chunk), size)))
    assert len(plan) == count
    return tuple(plan)
