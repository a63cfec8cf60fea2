"""Exclusion as a Tianshou 2.0.1 user writes it: a ``VectorReplayBuffer`` subclass handed to
the ``Collector`` whose ``add`` leaves out the rows the user's rule selects (clauses
``preprocess.exclusion`` and ``train.excluded-earn-nothing``). Sources are cited as
``file:line`` under the installed ``tianshou`` package.

The collector hands its buffer every stepped env's transition in one call,
``buffer.add(batch, buffer_ids=ready_env_ids_R)`` (``data/collector.py:929``), and uses the
four arrays ``add`` returns only at the envs whose transition is done: episode lengths,
returns and start indices for its statistics (``data/collector.py:951-957``), and the span
``get_buffer_indices(ep_start_idx, insertion_idx + 1)`` to read the ended episode back from
the buffer for the ``on_episode_done_hook`` and ``CollectStats.update_at_episode_done``
(``data/collector.py:985-1027``; ``len(episode_batch)`` is the recorded length,
``data/collector.py:203``). The trainer's gradient steps come from the collected step count
(``trainer.py:1062-1064``), not from the buffer.

``add`` documents ``(current_index, episode_reward, episode_length, episode_start_index)``
per added row, 0 length and reward while the episode is not finished
(``data/buffer/manager.py:136-142``); nothing documents an ``add`` that stores fewer rows than
it is given. :class:`ExcludingVectorBuffer` therefore answers for a row it leaves out with the
env's newest stored index as both insertion and start index and length and return 0 (an
episode with no stored end): the collector's read-back then spans one stored row, which only
its statistics see. When the whole buffer is still empty there is no row to read back, and
the collector's read of an ended episode raises (``data/buffer/buffer_base.py:581``,
``KeyError: 'obs'``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tianshou.data import Batch, VectorReplayBuffer

from xpspec.kit.exclusion import Exclusion, exclusion_reason, selected
from xpspec.kit.items import decode_items

__all__ = ["ExcludingVectorBuffer"]


def _observations(obs: Any) -> Any:
    return obs["observation"] if isinstance(obs, Batch) else obs


class ExcludingVectorBuffer(VectorReplayBuffer):
    """A ``VectorReplayBuffer`` whose ``add`` stores the rows the user's rule does not select
    (by the row's observation ``[env, episode, t]`` and its info's ``task_id``) through
    :meth:`store_rows` (``VectorReplayBuffer.add``) and hands the others to :meth:`drop`."""

    def __init__(self, total_size: int, buffer_num: int, *, rule: Exclusion, **kwargs: Any):
        super().__init__(total_size, buffer_num, **kwargs)
        self.rule = rule

    def add(
        self, batch: Any, buffer_ids: np.ndarray | list[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ids = np.arange(self.buffer_num) if buffer_ids is None else np.asarray(buffer_ids)
        if len(ids) != len(batch):
            raise ValueError(f"buffer_ids: expected {len(batch)} (one per row), got {len(ids)}")
        items = decode_items(_observations(batch.obs))
        tasks = [int(t) for t in np.asarray(batch.info.task_id).reshape(-1)]
        drop = np.array(selected(self.rule, items, tasks), dtype=bool)
        # A left-out row: the env's newest stored index, an episode with no stored end.
        ptr = np.asarray(self.last_index)[ids].copy()
        ep_rew = np.zeros(len(ids), dtype=np.float64)
        ep_len = np.zeros(len(ids), dtype=np.int64)
        ep_idx = ptr.copy()
        keep = ~drop
        if keep.any():
            out = self.store_rows(batch[keep], ids[keep])
            ptr[keep], ep_rew[keep], ep_len[keep], ep_idx[keep] = out
        if drop.any():
            self.drop(batch[drop], ids[drop], exclusion_reason(self.rule))
        return ptr, ep_rew, ep_len, ep_idx

    def store_rows(
        self, batch: Any, buffer_ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Tianshou's own ``VectorReplayBuffer.add`` of the kept rows."""
        return VectorReplayBuffer.add(self, batch, buffer_ids=buffer_ids)

    def drop(self, batch: Any, buffer_ids: np.ndarray, reason: str) -> None:
        """The user's rule left the rows of ``batch`` out (nothing of them is stored)."""
