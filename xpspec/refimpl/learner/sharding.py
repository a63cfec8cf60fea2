"""Sharding episodes across learners without splitting one (clause
``learner.shard-episodes``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xpspec.protocol.errors import ConfigError
from xpspec.refimpl.learner._common import (
    ShardVariant,
    check_variant,
    is_int,
)

__all__ = ["EpisodeSlice", "shard_episodes"]


@dataclass(frozen=True)
class EpisodeSlice:
    """Timesteps ``[start, stop)`` of input episode ``episode``."""

    episode: int
    start: int
    stop: int


def shard_episodes(
    lengths: Sequence[int], num_shards: int, *, variant: ShardVariant = "spec"
) -> tuple[tuple[EpisodeSlice, ...], ...]:
    """Assign episodes (given by their lengths) to ``num_shards`` learners (clause
    ``learner.shard-episodes``).

    ``"spec"`` (longest first, never split): order episodes by length descending, ties by
    input index; put each whole episode on the shard with the fewest timesteps so far
    (lowest shard index on ties). Each shard lists its episodes in input order. Invariant:
    ``max(load) - min(load) <= max(lengths)`` (when an episode lands on the least-loaded
    shard the new gap is at most its length; otherwise the gap does not grow).

    ``"rllib-2.60"`` (``ShardEpisodesIterator``, rllib.md §3.6): episodes sorted by length
    descending (stable); targets ``remaining // (num_shards - s)``; each episode goes to the
    least-filled shard (lowest index on ties) if it fits its target, else that shard is
    topped up with ``episode[:room]`` and the rest is placed again; a shard already at its
    target takes the whole episode anyway. Pieces are listed in placement order.
    """
    check_variant("variant", variant, ("spec", "rllib-2.60"))
    if not is_int(num_shards) or num_shards < 1:
        raise ConfigError("num_shards", num_shards, "an integer >= 1")
    for i, length in enumerate(lengths):
        if not is_int(length) or length < 0:
            raise ConfigError(f"lengths[{i}]", length, "an integer >= 0")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    loads = [0] * num_shards
    if variant == "spec":
        members: list[list[int]] = [[] for _ in range(num_shards)]
        for i in order:
            shard = loads.index(min(loads))
            members[shard].append(i)
            loads[shard] += lengths[i]
        return tuple(tuple(EpisodeSlice(i, 0, lengths[i]) for i in sorted(m)) for m in members)
    remaining = sum(lengths)
    targets = []
    for s in range(num_shards):
        targets.append(remaining // (num_shards - s))
        remaining -= targets[-1]
    pieces: list[list[EpisodeSlice]] = [[] for _ in range(num_shards)]
    queue = [(i, 0) for i in order]  # (episode, first timestep not yet placed)
    pos = 0
    while pos < len(queue):
        i, start = queue[pos]
        size = lengths[i] - start
        shard = loads.index(min(loads))
        room = targets[shard] - loads[shard]
        if size <= room or room <= 0:
            pieces[shard].append(EpisodeSlice(i, start, lengths[i]))
            loads[shard] += size
            pos += 1
        else:
            pieces[shard].append(EpisodeSlice(i, start, start + room))
            loads[shard] += room
            queue[pos] = (i, start + room)
    return tuple(tuple(p) for p in pieces)
