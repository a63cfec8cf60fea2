"""Preprocessing as an AgileRL 2.58.0 user writes it: a ``ReplayBuffer`` subclass handed to
``train_off_policy`` as its ``memory`` that overrides ``add``. ``train_off_policy`` calls
``memory.add`` once per vector step with a TensorDict of the ``B`` rows
``Transition(obs, action, reward, next_obs, done)``, env ``i`` at position ``i``
(``training/train_off_policy.py:train_off_policy``), and ``ReplayBuffer.add`` writes the rows
of whatever TensorDict it is given, ``n`` of them at ``n`` consecutive positions of its one
ring (``components/replay_buffer.py:ReplayBuffer.add``): so a subclass can write some envs'
rows and leave out or hold back the others, with any number of envs. Clauses
``preprocess.transform``, ``preprocess.exclusion``, ``preprocess.delayed-per-env`` and
``preprocess.pending-at-end``.

- :class:`RewardScalingBuffer`: ``reward * scale + shift`` before ``ReplayBuffer.add``.
- :class:`ExcludingBuffer`: the rows the user's rule selects (by the row's observation
  ``[env, episode, t]``, :mod:`xpspec.kit.exclusion`) are never added; the others are.
- :class:`EpisodeDelayedBuffer`: each env's rows are held (:mod:`xpspec.kit.episode_hold`)
  until the row that follows a ``done`` row -- under Gymnasium's ``NEXT_STEP`` autoreset the
  row of the episode's final observation -- then added as one TensorDict, each row annotated
  in the subclass's own ``annotations`` array at the ring position it is written to (1.0:
  ``done`` is ``terminated``), or dropped when ``keep`` rejects the outcome;
  :meth:`~EpisodeDelayedBuffer.flush` adds what is still held, annotated 0.0. (The annotation
  is no column of the stored TensorDict: ``DQN.learn`` builds a ``ReplayBatch`` of the
  sampled TensorDict, ``algorithms/dqn.py:DQN.learn``, which refuses keys it does not know.)

Every row a subclass writes goes through :meth:`HookedBuffer.store_rows`
(``ReplayBuffer.add``), every row the user's rule drops through :meth:`HookedBuffer.drop`,
every row it holds through :meth:`HookedBuffer.hold`: the adapter wraps those three on the
instance to record what happened. Nothing else in ``train_off_policy`` reads what ``add`` was
handed: its learn gate reads ``len(memory)`` and ``memory.size``, both ``ReplayBuffer._size``,
so it counts the rows the subclass wrote, and its updates ``memory.sample`` them (through
``Sampler``); the ``n_step_memory`` that would add first and hand ``memory.add`` its one-step
transitions is not passed (a ``DQN`` takes none), ``memory`` is no ``PrioritizedReplayBuffer``
and no ``accelerator`` wraps it in a ``ReplayDataset``.
"""

from __future__ import annotations

import torch
from agilerl.components.replay_buffer import ReplayBuffer
from tensordict import TensorDict

from xpspec.adapters.agilerl_rows import as_numpy
from xpspec.kit.episode_hold import EpisodeHold
from xpspec.kit.exclusion import exclusion_reason, selected
from xpspec.kit.items import decode_items
from xpspec.protocol.preprocessors import ExcludeEpisodes, ExcludeSteps

__all__ = [
    "EpisodeDelayedBuffer",
    "ExcludingBuffer",
    "HookedBuffer",
    "RewardScalingBuffer",
]


class HookedBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` whose ``add`` goes through three seams: :meth:`store_rows`
    (AgileRL's own ``ReplayBuffer.add``), :meth:`drop` and :meth:`hold` (no-ops)."""

    def store_rows(self, data: TensorDict) -> None:
        """Write ``data``'s rows (at most ``max_size``) with ``ReplayBuffer.add``."""
        ReplayBuffer.add(self, data)

    def drop(self, data: TensorDict, reason: str) -> None:
        """The user's rule left ``data``'s rows out (nothing of them reaches the buffer)."""

    def hold(self, data: TensorDict) -> None:
        """The user's buffer keeps ``data``'s rows back for now."""

    def held(self) -> list[TensorDict]:
        """The rows kept back and not yet added, one TensorDict of one row each."""
        return []

    def flush(self) -> None:
        """Add what is still held (nothing here)."""


class RewardScalingBuffer(HookedBuffer):
    """Stores every row with its reward ``reward * scale + shift``."""

    def __init__(self, max_size: int, *, scale: float, shift: float) -> None:
        super().__init__(max_size=max_size)
        self.scale, self.shift = scale, shift

    def add(self, data: TensorDict) -> None:
        scaled = data.clone()
        scaled["reward"] = data["reward"] * self.scale + self.shift
        self.store_rows(scaled)


class ExcludingBuffer(HookedBuffer):
    """Adds the rows the user's rule does not select, leaves out the others (by each row's
    observation ``[env, episode, t]``)."""

    def __init__(self, max_size: int, *, rule: ExcludeSteps | ExcludeEpisodes) -> None:
        super().__init__(max_size=max_size)
        self.rule = rule

    def add(self, data: TensorDict) -> None:
        items = decode_items(as_numpy(data["obs"]))
        mask = torch.tensor(selected(self.rule, items), dtype=torch.bool)
        if bool(mask.any()):
            self.drop(data[mask], exclusion_reason(self.rule))
        if not bool(mask.all()):
            self.store_rows(data[~mask])


class EpisodeDelayedBuffer(HookedBuffer):
    """Holds each env's rows until the row after its ``done`` row (the row of the episode's
    final observation), then adds them, annotated with the outcome, if ``keep`` accepts it.
    The only episode end the rows show is ``done``, which ``train_off_policy`` sets to the
    env's ``terminated``: every released episode is a success."""

    def __init__(self, max_size: int, *, keep: str = "all") -> None:
        super().__init__(max_size=max_size)
        self._episodes: EpisodeHold[TensorDict] = EpisodeHold(keep)
        self._done: dict[int, bool] = {}
        self.annotations = torch.zeros(max_size, dtype=torch.float32)

    def add(self, data: TensorDict) -> None:
        rows = data.clone()
        self.hold(rows)
        ended = []
        for env in range(int(rows.shape[0])):
            row = rows[env : env + 1]
            self._episodes.hold(env, row)
            if self._done.get(env, False):
                ended.append(env)
            self._done[env] = bool(row["done"].reshape(-1)[0])
        for env in ended:
            release = self._episodes.close(env, success=True)
            episode = torch.cat(list(release.rows))
            if release.kept:
                self._store_annotated(episode, release.annotation)
            else:
                self.drop(episode, "outcome")

    def held(self) -> list[TensorDict]:
        return self._episodes.held()

    def flush(self) -> None:
        """Add the rows still held, annotated 0.0 (the outcome is unknown)."""
        rows = self._episodes.drain()
        if rows:
            self._store_annotated(torch.cat(rows), 0.0)

    def _store_annotated(self, rows: TensorDict, annotation: float) -> None:
        n = int(rows.shape[0])
        # ReplayBuffer.add writes at most max_size rows at once (it wraps its ring once),
        # from its cursor on
        for start in range(0, n, self.max_size):
            chunk = rows[start : start + self.max_size]
            k = int(chunk.shape[0])
            self.annotations[(self._cursor + torch.arange(k)) % self.max_size] = annotation
            self.store_rows(chunk)
