"""Learner-side experience in two views, and the conversions between them: an
:class:`Episode` of ``L`` transitions (the episodes path) and a time-major
:class:`TimeMajorBatch` in the ALF row convention (the batch path); clause ``learner.gae``
relies on both giving the same rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from xpspec.protocol.errors import ConfigError
from xpspec.refimpl.learner._common import (
    FIRST,
    LAST,
    MID,
)

__all__ = ["Episode", "TimeMajorBatch", "batch_to_episodes", "episodes_to_batch"]


@dataclass(frozen=True, eq=False)
class Episode:
    """One episode or chunk of one: ``L`` transitions.

    ``observations [L + 1, ...]`` includes the final observation; ``actions [L, ...]``;
    ``rewards [L]`` with ``rewards[t]`` the reward that followed ``actions[t]``. At most one of
    ``terminated`` / ``truncated`` is true; neither means the chunk is still in progress.
    ``values [L + 1]`` (optional) are ``V(observations[t])``. ``is_continuation`` says that
    ``observations[0]`` is not the episode's first time step (a chunk cut from a longer
    episode); it only matters for the batch view (row 0 is then MID instead of FIRST).
    """

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: bool = False
    truncated: bool = False
    values: torch.Tensor | None = None
    is_continuation: bool = False

    def __post_init__(self) -> None:
        if self.observations.dim() < 1 or self.observations.shape[0] < 1:
            raise ConfigError(
                "episode.observations", tuple(self.observations.shape), "shape [L + 1, ...]"
            )
        length = self.observations.shape[0] - 1
        if self.actions.dim() < 1 or self.actions.shape[0] != length:
            raise ConfigError(
                "episode.actions", tuple(self.actions.shape), f"shape [{length}, ...]"
            )
        if tuple(self.rewards.shape) != (length,):
            raise ConfigError("episode.rewards", tuple(self.rewards.shape), f"shape [{length}]")
        if self.values is not None and tuple(self.values.shape) != (length + 1,):
            raise ConfigError("episode.values", tuple(self.values.shape), f"shape [{length + 1}]")
        if self.terminated and self.truncated:
            raise ConfigError(
                "episode.terminated/truncated", (True, True), "at most one of them true"
            )

    @property
    def length(self) -> int:
        """``L``, the number of transitions."""
        return int(self.rewards.shape[0])

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass(frozen=True, eq=False)
class TimeMajorBatch:
    """``[T, B]`` experience in the ALF convention (see the module docstring).

    ``step_type`` int64, ``reward`` and ``discount`` float, ``observation [T, B, ...]``,
    ``action [T, B, ...]`` and optionally ``value [T, B]`` = ``V(observation)``.
    """

    step_type: torch.Tensor
    reward: torch.Tensor
    discount: torch.Tensor
    observation: torch.Tensor
    action: torch.Tensor
    value: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.step_type.dim() != 2:
            raise ConfigError("batch.step_type", tuple(self.step_type.shape), "shape [T, B]")
        tb = tuple(self.step_type.shape)
        for name in ("reward", "discount", "value"):
            tensor = getattr(self, name)
            if tensor is not None and tuple(tensor.shape) != tb:
                raise ConfigError(f"batch.{name}", tuple(tensor.shape), f"shape {list(tb)}")
        for name in ("observation", "action"):
            tensor = getattr(self, name)
            if tuple(tensor.shape[:2]) != tb:
                raise ConfigError(f"batch.{name}", tuple(tensor.shape), f"shape {list(tb)} + ...")


# -- conversions ----------------------------------------------------------------------------


def episodes_to_batch(columns: Sequence[Sequence[Episode]]) -> TimeMajorBatch:
    """The ALF-style batch of ``columns``: column ``b`` is the episodes of ``columns[b]``
    laid end to end, each episode taking ``L + 1`` rows.

    Row ``t`` of an episode: observation ``observations[t]``, action ``actions[t]`` (zeros at
    the episode's final row, whose action is discarded), reward ``rewards[t - 1]`` (0 at row
    0), step type FIRST at row 0 (MID for a continuation), LAST at row ``L`` if the episode
    is done, MID otherwise, and discount 0 only at a terminated LAST. Every column must have
    the same number of rows; only a column's first episode may be a continuation and only its
    last may be in progress; values are carried if every episode has them.
    """
    if not columns or any(len(col) == 0 for col in columns):
        raise ConfigError("columns", [len(c) for c in columns], "at least one episode per column")
    all_eps = [ep for col in columns for ep in col]
    with_values = [ep.values is not None for ep in all_eps]
    if any(with_values) and not all(with_values):
        raise ConfigError("episode.values", with_values, "values on every episode or on none")
    rows_per_column = [sum(ep.length + 1 for ep in col) for col in columns]
    if len(set(rows_per_column)) != 1:
        raise ConfigError("columns", rows_per_column, "the same number of rows in every column")
    step_cols, rew_cols, disc_cols, obs_cols, act_cols, val_cols = [], [], [], [], [], []
    for b, col in enumerate(columns):
        st, rw, dc, ob, ac, vl = [], [], [], [], [], []
        for i, ep in enumerate(col):
            if ep.is_continuation and i > 0:
                raise ConfigError(f"columns[{b}][{i}].is_continuation", True, "only on row 0")
            if not ep.done and i < len(col) - 1:
                raise ConfigError(
                    f"columns[{b}][{i}]", "in progress", "a done episode before the column end"
                )
            if ep.done and ep.length == 0 and not ep.is_continuation:
                raise ConfigError(
                    f"columns[{b}][{i}].length", 0, ">= 1 for a done episode that starts at FIRST"
                )
            length = ep.length
            types = torch.full((length + 1,), MID, dtype=torch.int64)
            if not ep.is_continuation:
                types[0] = FIRST
            if ep.done:
                types[length] = LAST
            discount = torch.ones(length + 1, dtype=ep.rewards.dtype)
            if ep.terminated:
                discount[length] = 0.0
            filler = torch.zeros((1, *ep.actions.shape[1:]), dtype=ep.actions.dtype)
            st.append(types)
            rw.append(torch.cat([torch.zeros(1, dtype=ep.rewards.dtype), ep.rewards]))
            dc.append(discount)
            ob.append(ep.observations)
            ac.append(torch.cat([ep.actions, filler]))
            if ep.values is not None:
                vl.append(ep.values)
        step_cols.append(torch.cat(st))
        rew_cols.append(torch.cat(rw))
        disc_cols.append(torch.cat(dc))
        obs_cols.append(torch.cat(ob))
        act_cols.append(torch.cat(ac))
        if vl:
            val_cols.append(torch.cat(vl))
    return TimeMajorBatch(
        step_type=torch.stack(step_cols, 1),
        reward=torch.stack(rew_cols, 1),
        discount=torch.stack(disc_cols, 1),
        observation=torch.stack(obs_cols, 1),
        action=torch.stack(act_cols, 1),
        value=torch.stack(val_cols, 1) if val_cols else None,
    )


def _segments(step_type: torch.Tensor, column: int) -> list[tuple[int, int, bool]]:
    """``(first_row, final_row, ended)`` of each episode piece in one column."""
    types = step_type.tolist()
    segments: list[tuple[int, int, bool]] = []
    start = 0
    for t, kind in enumerate(types):
        if kind not in (FIRST, MID, LAST):
            raise ConfigError(f"batch.step_type[{t}, {column}]", kind, "FIRST, MID or LAST")
        if kind == FIRST and t != start:
            raise ConfigError(
                f"batch.step_type[{t}, {column}]", "FIRST", "FIRST only at row 0 or after LAST"
            )
        if kind == LAST:
            segments.append((start, t, True))
            start = t + 1
            if start < len(types) and types[start] != FIRST:
                raise ConfigError(
                    f"batch.step_type[{start}, {column}]", types[start], "FIRST after LAST"
                )
    if start < len(types):
        segments.append((start, len(types) - 1, False))
    return segments


def batch_to_episodes(batch: TimeMajorBatch) -> tuple[tuple[Episode, ...], ...]:
    """The episodes of each column of ``batch``; the inverse of :func:`episodes_to_batch`.

    A piece ends at LAST (terminated iff its discount is 0, truncated otherwise) or at the
    column end (in progress). Round trips are exact except that the discarded action of an
    episode's final row, and the reward of a continuation's row 0, come back as 0.
    """
    columns = []
    for b in range(batch.step_type.shape[1]):
        eps = []
        for s, e, ended in _segments(batch.step_type[:, b], b):
            terminated = ended and float(batch.discount[e, b]) == 0.0
            eps.append(
                Episode(
                    observations=batch.observation[s : e + 1, b].clone(),
                    actions=batch.action[s:e, b].clone(),
                    rewards=batch.reward[s + 1 : e + 1, b].clone(),
                    terminated=terminated,
                    truncated=ended and not terminated,
                    values=None if batch.value is None else batch.value[s : e + 1, b].clone(),
                    is_continuation=int(batch.step_type[s, b]) != FIRST,
                )
            )
        columns.append(tuple(eps))
    return tuple(columns)


def batch_values_and_lasts(batch: TimeMajorBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch path's values ``[T, B]`` and a float LAST indicator (T >= 2 rows needed)."""
    if batch.value is None:
        raise ConfigError("batch.value", None, "values [T, B]")
    if batch.step_type.shape[0] < 2:
        raise ConfigError("batch.T", batch.step_type.shape[0], "T >= 2")
    is_last = (batch.step_type == LAST).to(batch.value.dtype)
    return batch.value, is_last
