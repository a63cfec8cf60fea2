"""Preprocessing as an SB3 2.9.2 user writes it: a ``ReplayBuffer`` subclass handed to the
off-policy algorithm as ``replay_buffer_class`` that overrides ``add``
(``common/off_policy_algorithm.py:OffPolicyAlgorithm._setup_model`` builds it with
``replay_buffer_kwargs``; ``_store_transition`` calls its ``add`` once per vector step with the
rows of all envs). Clauses ``preprocess.transform``, ``preprocess.exclusion``,
``preprocess.delayed-per-env`` and ``preprocess.pending-at-end``.

- :class:`RewardScalingBuffer`: ``reward * scale + shift`` before ``ReplayBuffer.add``.
- :class:`ExcludingBuffer`: one env only; a row the user's rule (the scenario's exclusion,
  selected by :mod:`xpspec.kit.exclusion`) selects is never added.
- :class:`EpisodeDelayedBuffer`: one env only; rows are held in the subclass
  (:mod:`xpspec.kit.episode_hold`) until the row whose ``done`` is set arrives, then added
  one by one (or dropped when ``keep`` rejects the outcome), each with an annotation in the
  subclass's own ``annotations`` array (1.0 if the episode terminated, 0.0 if
  ``TimeLimit.truncated``); ``flush`` adds what is still held.

Every row SB3 stores goes through :meth:`store_row` (``ReplayBuffer.add``), every row the
user's rule drops through :meth:`drop`, every row held through :meth:`hold`: the adapter
wraps those three on the instance to record what happened. ``ReplayBuffer.add`` writes the
rows of all envs at one shared position ``pos`` (``common/buffers.py:ReplayBuffer.add``), so
leaving out or delaying the row of one env is only possible with one env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from stable_baselines3.common.buffers import ReplayBuffer

from xpspec.kit.episode_hold import EpisodeHold
from xpspec.kit.exclusion import Exclusion, exclusion_reason, selects
from xpspec.kit.items import decode_item

__all__ = [
    "EpisodeDelayedBuffer",
    "ExcludingBuffer",
    "HookedBuffer",
    "RewardScalingBuffer",
    "Row",
]


@dataclass(frozen=True)
class Row:
    """The arguments of one ``add`` call (copies: SB3 reuses its arrays)."""

    obs: np.ndarray
    next_obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    infos: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> Row:
        return cls(
            np.array(obs),
            np.array(next_obs),
            np.array(action),
            np.array(reward),
            np.array(done),
            tuple(dict(info) for info in infos),
        )


class HookedBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` whose ``add`` goes through three seams: :meth:`store_row` (SB3's
    own ``ReplayBuffer.add``), :meth:`drop` and :meth:`hold` (no-ops)."""

    def store_row(self, row: Row) -> None:
        ReplayBuffer.add(
            self, row.obs, row.next_obs, row.action, row.reward, row.done, [*row.infos]
        )

    def drop(self, rows: list[Row], reason: str) -> None:
        """The user's rule left ``rows`` out (nothing of them reaches the buffer)."""

    def hold(self, row: Row) -> None:
        """The user's buffer keeps ``row`` back for now."""

    def held(self) -> list[Row]:
        """The rows kept back and not yet added."""
        return []

    def _one_env(self) -> None:
        if self.n_envs != 1:
            raise ValueError(
                f"{type(self).__name__} needs n_envs == 1: ReplayBuffer.add writes every env's "
                f"row at one shared position, got n_envs={self.n_envs}"
            )


class RewardScalingBuffer(HookedBuffer):
    """Stores every row with its reward ``reward * scale + shift``."""

    def __init__(self, *args: Any, scale: float = 1.0, shift: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scale, self.shift = scale, shift

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        scaled = np.asarray(reward) * self.scale + self.shift
        self.store_row(Row.of(obs, next_obs, action, scaled, done, infos))


class ExcludingBuffer(HookedBuffer):
    """One env: adds a row unless the user's rule selects it (by the row's observation
    ``[env, episode, t]`` and its info's ``task_id``)."""

    def __init__(self, *args: Any, rule: Exclusion, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._one_env()
        self.rule = rule

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        row = Row.of(obs, next_obs, action, reward, done, infos)
        if selects(self.rule, decode_item(row.obs), row.infos[0].get("task_id")):
            self.drop([row], exclusion_reason(self.rule))
        else:
            self.store_row(row)


class EpisodeDelayedBuffer(HookedBuffer):
    """One env: holds each episode's rows until its ``done`` row, then adds them, annotated
    with the outcome, if ``keep`` (``all``, ``success`` or ``failure``) accepts it
    (:class:`xpspec.kit.episode_hold.EpisodeHold` keeps the rows)."""

    def __init__(self, *args: Any, keep: str = "all", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._one_env()
        self.keep = keep
        self.annotations = np.zeros((self.buffer_size, self.n_envs), dtype=np.float32)
        self._episodes: EpisodeHold[Row] = EpisodeHold(keep)

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        row = Row.of(obs, next_obs, action, reward, done, infos)
        self._episodes.hold(0, row)
        self.hold(row)
        if not bool(row.done[0]):
            return
        success = not bool(row.infos[0].get("TimeLimit.truncated", False))
        release = self._episodes.close(0, success)
        if not release.kept:
            self.drop(list(release.rows), "outcome")
            return
        for held in release.rows:
            self._add_annotated(held, release.annotation)

    def held(self) -> list[Row]:
        return self._episodes.held()

    def flush(self) -> None:
        """Add the rows still held, unannotated (the outcome is unknown)."""
        for held in self._episodes.drain():
            self._add_annotated(held, 0.0)

    def _add_annotated(self, row: Row, annotation: float) -> None:
        self.annotations[self.pos] = annotation
        self.store_row(row)
