"""What AgileRL 2.58.0's ``ReplayBuffer`` holds of the rows just written
(``components/replay_buffer.py``): the time steps its storage alone names, for the replay and
trainer operations of :mod:`xpspec.adapters.agilerl`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from agilerl.components.replay_buffer import ReplayBuffer
from tensordict import TensorDict

from xpspec.kit.items import decode_items
from xpspec.kit.steps import NextStepRows, Step

__all__ = ["StoredRows", "as_numpy"]


def as_numpy(obs: Any) -> Any:
    """A tensor of observations as an array; a Dict observation's TensorDict as a dict of
    arrays (iterating a TensorDict runs over its batch, so its items are read)."""
    if isinstance(obs, TensorDict):
        return {key: value.numpy() for key, value in obs.items()}
    return obs.numpy()


class StoredRows:
    """The time steps of rows just written into a ``ReplayBuffer``, read from its storage
    alone (``obs``, ``reward``, ``done``; :class:`~xpspec.kit.steps.NextStepRows`), with the
    entry of the ``annotations`` array where a user's buffer keeps one per ring position
    (:class:`~xpspec.adapters.agilerl_preprocess.EpisodeDelayedBuffer`), else 0."""

    def __init__(self) -> None:
        self._rows = NextStepRows()

    def read(self, buffer: ReplayBuffer, written: np.ndarray) -> list[Step]:
        storage = buffer.storage
        assert storage is not None, "read back before any add"
        index = torch.as_tensor(written)
        items = decode_items(as_numpy(storage["obs"][index]))
        rewards = storage["reward"][index].reshape(-1).tolist()
        dones = storage["done"][index].reshape(-1).tolist()
        annotations = getattr(buffer, "annotations", None)
        notes = [0.0] * len(items) if annotations is None else annotations[index].tolist()
        out = []
        for item, reward, done, note in zip(items, rewards, dones, notes, strict=True):
            step = self._rows.row(item, annotation=note)
            self._rows.follow(step, reward, bool(done))
            out.append(step)
        return out
