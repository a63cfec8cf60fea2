"""AgileRL 2.58.0 alone: the behaviours ``xpspec/adapters/agilerl.expectations.toml`` declares
as findings, reproduced with AgileRL's own ``ReplayBuffer`` and no xpspec code. Skipped when
AgileRL is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("agilerl")

import torch
from agilerl.components.replay_buffer import ReplayBuffer
from tensordict import TensorDict


def _buffer(rows: int, max_size: int = 64) -> ReplayBuffer:
    """A ``ReplayBuffer`` holding ``rows`` rows whose ``obs`` is the row's write index."""
    buffer = ReplayBuffer(max_size=max_size)
    for i in range(rows):
        buffer.add(TensorDict({"obs": torch.tensor([[float(i)]])}, batch_size=[1]))
    return buffer


def _drawn(buffer: ReplayBuffer, batch_size: int) -> list[int]:
    return [int(v) for v in buffer.sample(batch_size)["obs"].reshape(-1).tolist()]


def test_a_batch_never_repeats_a_row() -> None:
    """replay.uniform-windows: below 16384 stored rows, ReplayBuffer._sample_indices draws
    torch.randperm(size)[:k], so a batch holds k distinct rows. With 8 rows and batches of 8,
    200 batches are each a permutation of the 8 rows; independent draws with replacement
    would give a permutation with probability 8!/8**8 (about 0.0024) per batch."""
    torch.manual_seed(0)
    buffer = _buffer(8)
    for _ in range(200):
        assert sorted(_drawn(buffer, 8)) == list(range(8))


def test_a_batch_is_cut_to_the_rows_stored() -> None:
    """replay.window-validity: ReplayBuffer.sample draws min(batch_size, size) rows, so a
    batch of 16 asked of a buffer holding 5 rows has 5 rows, not 16 (nor none)."""
    torch.manual_seed(0)
    buffer = _buffer(5)
    drawn = _drawn(buffer, 16)
    assert len(drawn) == 5
    assert sorted(drawn) == [0, 1, 2, 3, 4]
