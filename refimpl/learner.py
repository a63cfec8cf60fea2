"""Learner-side preprocessing: episodes vs batches, bootstrap rows, GAE, n-step returns,
gradient-update counts and sharding (clauses ``learner.*``).

Two views of the same experience:

- **episodes path** — an :class:`Episode` holds ``L`` transitions: observations
  ``[L + 1, ...]`` (the final observation included), actions ``[L]``, rewards ``[L]``
  (``rewards[t]`` follows ``actions[t]``), and how it ended: ``terminated``, ``truncated`` or
  neither (an in-progress chunk);
- **batch path** — a :class:`TimeMajorBatch` ``[T, B]`` in the ALF convention used by the
  spec: row ``t`` pairs ``(obs_t, action_t)`` with ``reward_t`` = reward of the transition
  *into* ``t``, ``step_type`` FIRST/MID/LAST and ``discount`` 0 at a terminated LAST.

:func:`episodes_to_batch` and :func:`batch_to_episodes` convert between them. An episode of
``L`` transitions is ``L + 1`` rows in both: the ``L`` training rows and one bootstrap row that
carries the final observation (:func:`add_bootstrap_timestep`), so advantages and targets
computed on either path line up row for row.

Clauses:

- ``learner.bootstrap-timestep-masked`` — the row appended for bootstrapping carries the final
  observation, is excluded from every loss by the returned mask, and the caller's episode is
  never mutated.
- ``learner.truncation-bootstraps`` — GAE and value targets bootstrap from ``V(final obs)``
  unless the episode terminated: truncation and in-progress chunks both bootstrap.
- ``learner.stats-exclude-bootstrap`` — advantage normalisation uses the valid rows only.
- ``learner.nstep-episode-end`` — an n-step return stops at the episode end and at the newest
  stored step, and drops its bootstrap iff the episode terminated inside the window.
- ``learner.update-count`` — ``num_epochs * ceil(num_items / minibatch_size)`` updates, the
  last short minibatch kept.
- ``learner.gae`` — the episodes path and the batch path give identical advantages
  and value targets for the same data.
- ``learner.shard-episodes`` — sharding across learners never splits an episode and balances
  timesteps to within one episode length.

Framework behaviours are available as named variants; each cites the fact it reproduces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import torch

from refimpl.errors import ConfigError
from refimpl.step_type import StepType

__all__ = [
    "AdvantageRows",
    "AlfLayout",
    "BootstrapRows",
    "Episode",
    "EpisodeSlice",
    "GaeResult",
    "Minibatch",
    "NStepReturns",
    "TimeMajorBatch",
    "add_bootstrap_timestep",
    "alf_adjusted_mini_batch_size",
    "alf_whole_buffer_layout",
    "batch_discounted_returns",
    "batch_gae",
    "batch_nstep_returns",
    "batch_one_step_returns",
    "batch_to_episodes",
    "episode_advantages",
    "episodes_to_batch",
    "gae",
    "minibatch_plan",
    "normalize_advantages",
    "nstep_returns",
    "num_gradient_updates",
    "rllib_sharded_minibatches",
    "shard_episodes",
]

AdvantageVariant = Literal["spec", "rllib-2.60"]
NStepVariant = Literal["spec", "rllib-2.60"]
UpdateVariant = Literal["spec", "rllib-2.60", "alf"]
ShardVariant = Literal["spec", "rllib-2.60"]

_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_variant(field: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(field, value, " or ".join(repr(a) for a in allowed))


def _check_unit_interval(field: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(field, value, "a number in [0, 1]")


# -- values ---------------------------------------------------------------------------------


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
            types = torch.full((length + 1,), _MID, dtype=torch.int64)
            if not ep.is_continuation:
                types[0] = _FIRST
            if ep.done:
                types[length] = _LAST
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
        if kind not in (_FIRST, _MID, _LAST):
            raise ConfigError(f"batch.step_type[{t}, {column}]", kind, "FIRST, MID or LAST")
        if kind == _FIRST and t != start:
            raise ConfigError(
                f"batch.step_type[{t}, {column}]", "FIRST", "FIRST only at row 0 or after LAST"
            )
        if kind == _LAST:
            segments.append((start, t, True))
            start = t + 1
            if start < len(types) and types[start] != _FIRST:
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
                    is_continuation=int(batch.step_type[s, b]) != _FIRST,
                )
            )
        columns.append(tuple(eps))
    return tuple(columns)


# -- bootstrap timestep and GAE (episodes path) ---------------------------------------------


@dataclass(frozen=True, eq=False)
class BootstrapRows:
    """An episode as ``L + 1`` training rows: the ``L`` transitions and one bootstrap row.

    The bootstrap row carries the final observation (so ``V(final obs)`` is computed with
    the rest), the last action repeated (a placeholder of the right shape), reward 0 and
    ``loss_mask`` False. ``terminateds``/``truncateds`` flag row ``L - 1`` as the episode ends.
    """

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminateds: torch.Tensor
    truncateds: torch.Tensor
    loss_mask: torch.Tensor
    values: torch.Tensor | None


def add_bootstrap_timestep(
    episode: Episode, *, variant: AdvantageVariant = "spec"
) -> BootstrapRows:
    """Append the bootstrap row to ``episode`` (clause ``learner.bootstrap-timestep-masked``).

    Returns new tensors; ``episode`` is left untouched (RLlib 2.60's
    ``AddOneTsToEpisodesAndTruncate`` mutates the episode in place: rllib.md §3.2). With
    ``variant="rllib-2.60"`` an in-progress chunk is flagged truncated at row ``L - 1``, as
    that connector does; the spec leaves it unflagged (it bootstraps either way).
    """
    _check_variant("variant", variant, ("spec", "rllib-2.60"))
    length = episode.length
    if length > 0:
        filler = episode.actions[-1:].clone()
    else:
        filler = torch.zeros((1, *episode.actions.shape[1:]), dtype=episode.actions.dtype)
    terminateds = torch.zeros(length + 1, dtype=torch.bool)
    truncateds = torch.zeros(length + 1, dtype=torch.bool)
    if length > 0:
        terminateds[length - 1] = episode.terminated
        truncated = episode.truncated or (variant == "rllib-2.60" and not episode.done)
        truncateds[length - 1] = truncated
    loss_mask = torch.ones(length + 1, dtype=torch.bool)
    loss_mask[length] = False
    return BootstrapRows(
        observations=episode.observations.clone(),
        actions=torch.cat([episode.actions, filler]),
        rewards=torch.cat([episode.rewards, torch.zeros(1, dtype=episode.rewards.dtype)]),
        terminateds=terminateds,
        truncateds=truncateds,
        loss_mask=loss_mask,
        values=None if episode.values is None else episode.values.clone(),
    )


@dataclass(frozen=True, eq=False)
class GaeResult:
    """Per-transition advantages ``[L]`` and value targets ``[L]`` (= advantages + values)."""

    advantages: torch.Tensor
    value_targets: torch.Tensor


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: bool,
    truncated: bool,
    gamma: float,
    lam: float,
) -> GaeResult:
    """GAE of one episode (clause ``learner.truncation-bootstraps``).

    ``rewards [L]``, ``values [L + 1]`` with ``values[L] = V(final obs)``. With
    ``d_{t+1} = gamma`` except ``d_L = 0`` when ``terminated``:
    ``delta_t = r_t + d_{t+1} V_{t+1} - V_t``, ``A_t = delta_t + d_{t+1} lam A_{t+1}``,
    ``A_L = 0``, target ``A_t + V_t``. Truncated and in-progress episodes bootstrap from
    ``V(final obs)``; ``truncated`` only has to be consistent (at most one flag).
    """
    if terminated and truncated:
        raise ConfigError("terminated/truncated", (True, True), "at most one of them true")
    _check_unit_interval("gamma", gamma)
    _check_unit_interval("lam", lam)
    length = rewards.shape[0]
    if rewards.dim() != 1 or tuple(values.shape) != (length + 1,):
        raise ConfigError(
            "values", tuple(values.shape), f"shape [L + 1] = [{length + 1}] for rewards [L]"
        )
    discounts = torch.full((length,), gamma, dtype=values.dtype)
    if terminated and length > 0:
        discounts[length - 1] = 0.0 * gamma
    advantages = torch.zeros(length + 1, dtype=values.dtype)
    delta = rewards.to(values.dtype) + discounts * values[1:] - values[:-1]
    weighted = discounts * lam
    for t in reversed(range(length)):
        advantages[t] = delta[t] + weighted[t] * advantages[t + 1]
    adv = advantages[:length]
    return GaeResult(advantages=adv, value_targets=adv + values[:length])


def normalize_advantages(
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    eps: float = 1e-4,
    *,
    correction: int = 0,
) -> torch.Tensor:
    """``(A - mean) / max(eps, std)`` with mean and std over the rows where ``mask`` is true
    (all rows if ``mask`` is None); rows outside ``mask`` become 0 (clause
    ``learner.stats-exclude-bootstrap``).

    ``correction=0`` is the spec's population std (divide by ``n``); ``correction=1`` the
    Bessel-corrected sample std (divide by ``n - 1``), as TorchRL 0.14.1's
    ``GAE(average_gae=True)`` uses (``adv.std()``, variant ``sample-std``). With ``n <=
    correction`` rows the std is taken as 0."""
    if correction not in (0, 1) or isinstance(correction, bool):
        raise ConfigError("correction", correction, "0 (population std) or 1 (sample std)")
    if mask is None:
        mask = torch.ones_like(advantages, dtype=torch.bool)
    if mask.shape != advantages.shape or mask.dtype != torch.bool:
        raise ConfigError(
            "mask", tuple(mask.shape), f"a bool tensor of shape {list(advantages.shape)}"
        )
    valid = advantages[mask]
    if valid.numel() == 0:
        return torch.zeros_like(advantages)
    mean = valid.mean()
    if valid.numel() > correction:
        std = valid.std(correction=correction)
    else:
        std = torch.zeros((), dtype=valid.dtype)
    scale = torch.clamp(std, min=eps)
    return torch.where(mask, (advantages - mean) / scale, torch.zeros_like(advantages))


@dataclass(frozen=True, eq=False)
class AdvantageRows:
    """Flat rows of several episodes, ``L + 1`` per episode (the last is the bootstrap row).

    ``episode [R]`` and ``row [R]`` name each row's episode and position in it.
    """

    advantages: torch.Tensor
    value_targets: torch.Tensor
    normalized_advantages: torch.Tensor
    loss_mask: torch.Tensor
    episode: torch.Tensor
    row: torch.Tensor


def episode_advantages(
    episodes: Sequence[Episode],
    gamma: float,
    lam: float,
    *,
    variant: AdvantageVariant = "spec",
    eps: float = 1e-4,
    correction: int = 0,
) -> AdvantageRows:
    """Advantages, targets and normalised advantages of ``episodes`` on bootstrap rows.

    ``"spec"``: :func:`gae` per episode; the bootstrap row gets advantage 0 and target
    ``V(final obs)``; normalisation uses loss-masked rows only
    (``learner.stats-exclude-bootstrap``).

    ``"rllib-2.60"``: RLlib 2.60's ``compute_value_targets`` over the concatenated rows
    (rllib.md §3.3): ``next_v[t] = values[t + 1]`` (0 after the very last row),
    ``delta = r + gamma (1 - term) next_v - v``, ``A = delta + gamma lam (1 - term)
    (1 - trunc) A_next``, with the flags of :func:`add_bootstrap_timestep` (variant
    ``rllib-2.60``). Real rows equal the spec's; a bootstrap row's advantage leaks from the
    next episode's first row, and normalisation (numpy population std) includes the bootstrap
    rows (rllib.md §7 items 2-3).

    ``correction`` is passed to :func:`normalize_advantages` (1: the sample std).
    """
    _check_variant("variant", variant, ("spec", "rllib-2.60"))
    if not episodes:
        raise ConfigError("episodes", [], "at least one episode")
    for i, ep in enumerate(episodes):
        if ep.values is None:
            raise ConfigError(f"episodes[{i}].values", None, "values [L + 1] (final obs included)")
    rows = [add_bootstrap_timestep(ep, variant=variant) for ep in episodes]
    values = torch.cat([r.values for r in rows if r.values is not None])
    loss_mask = torch.cat([r.loss_mask for r in rows])
    episode_ids = torch.cat(
        [torch.full((ep.length + 1,), i, dtype=torch.int64) for i, ep in enumerate(episodes)]
    )
    row_ids = torch.cat([torch.arange(ep.length + 1) for ep in episodes])
    if variant == "spec":
        adv_parts = []
        for ep in episodes:
            assert ep.values is not None
            res = gae(ep.rewards, ep.values, ep.terminated, ep.truncated, gamma, lam)
            adv_parts.append(
                torch.cat([res.advantages, torch.zeros(1, dtype=res.advantages.dtype)])
            )
        advantages = torch.cat(adv_parts)
        normalized = normalize_advantages(advantages, loss_mask, eps, correction=correction)
    else:
        rewards = torch.cat([r.rewards for r in rows]).to(values.dtype)
        term = torch.cat([r.terminateds for r in rows]).to(values.dtype)
        trunc = torch.cat([r.truncateds for r in rows]).to(values.dtype)
        next_v = torch.cat([values[1:], torch.zeros(1, dtype=values.dtype)])
        non_terminal = 1.0 - term
        propagate = non_terminal * (1.0 - trunc)
        delta = rewards + gamma * non_terminal * next_v - values
        advantages = torch.zeros_like(values)
        carry = torch.zeros((), dtype=values.dtype)
        for t in reversed(range(values.shape[0])):
            carry = delta[t] + gamma * lam * propagate[t] * carry
            advantages[t] = carry
        normalized = normalize_advantages(advantages, None, eps, correction=correction)
    return AdvantageRows(
        advantages=advantages,
        value_targets=advantages + values,
        normalized_advantages=normalized,
        loss_mask=loss_mask,
        episode=episode_ids,
        row=row_ids,
    )


# -- batch path (ALF value_ops semantics) ---------------------------------------------------


def _batch_inputs(batch: TimeMajorBatch) -> tuple[torch.Tensor, torch.Tensor]:
    if batch.value is None:
        raise ConfigError("batch.value", None, "values [T, B]")
    if batch.step_type.shape[0] < 2:
        raise ConfigError("batch.T", batch.step_type.shape[0], "T >= 2")
    is_last = (batch.step_type == _LAST).to(batch.value.dtype)
    return batch.value, is_last


def batch_gae(batch: TimeMajorBatch, gamma: float, lam: float) -> GaeResult:
    """GAE over ``[T, B]`` for rows ``0..T-2`` (ALF ``value_ops.generalized_advantage_estimation``
    with ``discounts = gamma * discount``): ``delta_t = r_{t+1} + d_{t+1} V_{t+1} - V_t``,
    ``A_t = (1 - last_t) (delta_t + d_{t+1} lam A_{t+1})``, ``A_{T-1} = 0``. A LAST row gets
    advantage 0, so nothing propagates across LAST -> FIRST; a LAST with discount 1 is
    bootstrapped from by the row before it. Targets are ``A + V``."""
    _check_unit_interval("gamma", gamma)
    _check_unit_interval("lam", lam)
    values, is_last = _batch_inputs(batch)
    discounts = batch.discount.to(values.dtype) * gamma
    delta = batch.reward[1:].to(values.dtype) + discounts[1:] * values[1:] - values[:-1]
    weighted = discounts[1:] * lam
    advantages = torch.zeros_like(values)
    for t in reversed(range(values.shape[0] - 1)):
        advantages[t] = (1 - is_last[t]) * (delta[t] + weighted[t] * advantages[t + 1])
    adv = advantages[:-1]
    return GaeResult(advantages=adv, value_targets=adv + values[:-1])


def batch_one_step_returns(batch: TimeMajorBatch, gamma: float) -> torch.Tensor:
    """One-step returns ``[T-1, B]`` (ALF ``one_step_discounted_return``):
    ``r_{t+1} + d_{t+1} V_{t+1}`` for a non-LAST row, ``d_t V_t`` for a LAST row, with
    ``d = gamma * discount``."""
    _check_unit_interval("gamma", gamma)
    values, is_last = _batch_inputs(batch)
    discounted = batch.discount.to(values.dtype) * gamma * values
    rewards = batch.reward.to(values.dtype)
    return (1 - is_last[:-1]) * (rewards[1:] + discounted[1:]) + is_last[:-1] * discounted[:-1]


def batch_discounted_returns(batch: TimeMajorBatch, gamma: float) -> torch.Tensor:
    """Discounted returns ``[T-1, B]`` (ALF ``discounted_return``): ``G_{T-1} = V_{T-1}``,
    ``G_t = V_t`` at a LAST row (its own value), else ``r_{t+1} + d_{t+1} G_{t+1}``."""
    _check_unit_interval("gamma", gamma)
    values, is_last = _batch_inputs(batch)
    discounts = batch.discount.to(values.dtype) * gamma
    rewards = batch.reward.to(values.dtype)
    returns = torch.zeros_like(values)
    returns[-1] = values[-1]
    for t in reversed(range(values.shape[0] - 1)):
        acc = rewards[t + 1] + discounts[t + 1] * returns[t + 1]
        returns[t] = is_last[t] * values[t] + (1 - is_last[t]) * acc
    return returns[:-1]


# -- n-step returns -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NStepReturns:
    """n-step returns of transitions starting at window row 0.

    ``target = reward_sum + discount * bootstrap_value``; ``steps`` is ``k``; ``discount`` is
    ``gamma^k`` times the product of step discounts (0 iff the episode terminated within the
    window); ``bootstrap_value`` is the value at row ``k``. ``steps == 0`` means row 0 is a
    LAST: no transition starts there, the target is its own value and the row must be masked.
    """

    target: torch.Tensor
    reward_sum: torch.Tensor
    steps: torch.Tensor
    discount: torch.Tensor
    bootstrap_value: torch.Tensor


def nstep_returns(
    reward: torch.Tensor,
    value: torch.Tensor,
    step_type: torch.Tensor,
    discount: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    n: int,
    variant: NStepVariant = "spec",
) -> NStepReturns:
    """n-step returns on a sampled padded window ``[N, n + 1]`` (clause
    ``learner.nstep-episode-end``).

    Row 0 holds ``s_t``; ``reward[:, i]`` is the reward into row ``i``; ``mask`` marks stored
    rows and must be a prefix (row 0 valid). ``k = min(n, first LAST row, last valid row)``
    and ``G = sum_{i<k} gamma^i r_{t+i+1} + gamma^k V(s_{t+k})``, the bootstrap dropped iff
    row ``k`` is a terminated LAST (discount 0). SB3 2.9.2 ``NStepReplayBuffer`` (stops at
    done/timeout and at ``pos - 1``, returns ``discounts = gamma^k``) and Tianshou 2.0.1
    ``compute_nstep_return`` (stops at done and the last write, bootstraps
    ``gamma^k Q (~terminated)``) agree with this (peers.md §3.4, §4.3).

    ``variant="rllib-2.60"``: ``EpisodeReplayBuffer`` n-step items as used by DQN's target
    (rllib.md §4.1): rewards summed over the clipped window, but the bootstrap factor is
    ``gamma^n`` for the *requested* n, and ``terminated`` survives only when the window ends
    exactly at the episode end (``k == n``); a window clipped at a terminal step bootstraps
    from the terminal observation.
    """
    _check_variant("variant", variant, ("spec", "rllib-2.60"))
    _check_unit_interval("gamma", gamma)
    if not _is_int(n) or n < 1:
        raise ConfigError("n", n, "an integer >= 1")
    shape = tuple(step_type.shape)
    if len(shape) != 2 or shape[1] != n + 1:
        raise ConfigError("step_type", shape, f"shape [N, n + 1] = [N, {n + 1}]")
    for name, tensor in (
        ("reward", reward),
        ("value", value),
        ("discount", discount),
        ("mask", mask),
    ):
        if tuple(tensor.shape) != shape:
            raise ConfigError(name, tuple(tensor.shape), f"shape {list(shape)}")
    if mask.dtype != torch.bool:
        raise ConfigError("mask", mask.dtype, "a bool tensor")
    if shape[0] > 0 and not bool(mask[:, 0].all()):
        raise ConfigError("mask[:, 0]", mask[:, 0].tolist(), "every window's row 0 stored")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ConfigError("mask", "gap", "a prefix of stored rows in every window")
    dtype = value.dtype
    rows = torch.arange(n + 1)
    is_last = (step_type == _LAST) & mask
    first_last = torch.where(is_last.any(1), is_last.to(torch.int64).argmax(1), n)
    newest = mask.sum(1) - 1
    k = torch.minimum(torch.minimum(first_last, newest), torch.tensor(n))
    used = (rows[None, :] >= 1) & (rows[None, :] <= k[:, None])
    # step_discount[:, i] = gamma * discount_i for the rows a transition passes through.
    step_discount = torch.where(used, gamma * discount.to(dtype), torch.ones((), dtype=dtype))
    step_discount[:, 0] = 1.0
    cumulative = torch.cumprod(step_discount, 1)  # cumulative[:, i] = prod_{j<=i}
    before = torch.cat([torch.ones(shape[0], 1, dtype=dtype), cumulative[:, :-1]], 1)
    safe_reward = torch.where(used, reward.to(dtype), torch.zeros((), dtype=dtype))
    reward_sum = (before * safe_reward).sum(1)
    bootstrap_value = value.gather(1, k[:, None]).squeeze(1)
    if variant == "spec":
        factor = cumulative.gather(1, k[:, None]).squeeze(1)
    else:
        ends_terminated = (k == n) & is_last[:, n] & (discount[:, n] == 0)
        factor = torch.where(
            ends_terminated, torch.zeros((), dtype=dtype), torch.full((), gamma**n, dtype=dtype)
        )
    target = reward_sum + factor * bootstrap_value
    return NStepReturns(
        target=target,
        reward_sum=reward_sum,
        steps=k,
        discount=factor,
        bootstrap_value=bootstrap_value,
    )


def batch_nstep_returns(batch: TimeMajorBatch, gamma: float, n: int) -> NStepReturns:
    """:func:`nstep_returns` for every row ``0..T-2`` of ``batch`` (fields ``[T-1, B]``): the
    window of row ``t`` is rows ``t..t+n``, rows past ``T-1`` unstored. With ``n >= T - 1``
    the targets equal :func:`batch_discounted_returns`; with ``n = 1`` they equal
    :func:`batch_one_step_returns` on non-LAST rows (at a LAST row this gives ``V_t``, ALF's
    one-step gives ``gamma * discount_t * V_t``; such rows are masked either way)."""
    values, _ = _batch_inputs(batch)
    if not _is_int(n) or n < 1:
        raise ConfigError("n", n, "an integer >= 1")
    steps, columns = batch.step_type.shape

    def windows(x: torch.Tensor, fill: float | int | bool) -> torch.Tensor:
        pad = torch.full((n, columns), fill, dtype=x.dtype)
        padded = torch.cat([x, pad])  # [T + n, B]
        return padded.unfold(0, n + 1, 1)[: steps - 1]  # [T-1, B, n + 1]

    stored = torch.ones(steps, columns, dtype=torch.bool)
    parts = [
        windows(batch.reward.to(values.dtype), 0.0),
        windows(values, 0.0),
        windows(batch.step_type, _MID),
        windows(batch.discount.to(values.dtype), 1.0),
        windows(stored, False),
    ]
    flat = [p.reshape((steps - 1) * columns, n + 1) for p in parts]
    res = nstep_returns(*flat, gamma=gamma, n=n)
    shape = (steps - 1, columns)
    return NStepReturns(
        target=res.target.reshape(shape),
        reward_sum=res.reward_sum.reshape(shape),
        steps=res.steps.reshape(shape),
        discount=res.discount.reshape(shape),
        bootstrap_value=res.bootstrap_value.reshape(shape),
    )


# -- gradient-update counts and minibatches -------------------------------------------------


@dataclass(frozen=True)
class AlfLayout:
    """ALF whole-buffer training layout (alf.md §4.8): sequences of ``mini_batch_length``
    from the oldest ``kept_length`` steps (the newest ``length - kept_length`` are dropped),
    ``num_sequences`` of them, mini-batches of the adjusted ``mini_batch_size``."""

    mini_batch_length: int
    kept_length: int
    num_sequences: int
    mini_batch_size: int


def alf_adjusted_mini_batch_size(batch_size: int, mini_batch_size: int) -> int:
    """ALF's whole-buffer mini-batch size for ``batch_size`` sequences: ``ceil(B / (B // M))``
    when ``B mod M > 0`` and ``B >= M``, else ``M`` (ALF snapshot ``23aca492``,
    ``Algorithm._train_experience``; variant ``alf-resized-mini-batch``)."""
    if batch_size % mini_batch_size > 0 and batch_size // mini_batch_size > 0:
        return math.ceil(batch_size / (batch_size // mini_batch_size))
    return mini_batch_size


def alf_whole_buffer_layout(
    num_envs: int, length: int, mini_batch_size: int | None, mini_batch_length: int | None
) -> AlfLayout:
    """ALF's whole-buffer reshape: ``mbl = mini_batch_length or length`` capped at
    ``length``; ``length`` truncated to a multiple of ``mbl`` (newest steps dropped);
    ``B = num_envs * kept / mbl``; ``mini_batch_size`` (default ``num_envs``) becomes
    ``ceil(B / (B // mbs))`` when ``B % mbs > 0`` and ``B // mbs > 0`` (264 / 32 -> 33)."""
    for field, value in (("num_envs", num_envs), ("length", length)):
        if not _is_int(value) or value < 1:
            raise ConfigError(field, value, "an integer >= 1")
    mbl = length if mini_batch_length is None else mini_batch_length
    if not _is_int(mbl) or mbl < 1:
        raise ConfigError("mini_batch_length", mini_batch_length, "None or an integer >= 1")
    mbl = min(mbl, length)
    kept = length // mbl * mbl
    batch_size = num_envs * (kept // mbl)
    mbs = num_envs if mini_batch_size is None else mini_batch_size
    if not _is_int(mbs) or mbs < 1:
        raise ConfigError("mini_batch_size", mini_batch_size, "None or an integer >= 1")
    return AlfLayout(mbl, kept, batch_size, alf_adjusted_mini_batch_size(batch_size, mbs))


def _check_counts(num_items: int, num_epochs: int, minibatch_size: int | None) -> None:
    if not _is_int(num_items) or num_items < 0:
        raise ConfigError("num_items", num_items, "an integer >= 0")
    if not _is_int(num_epochs) or num_epochs < 1:
        raise ConfigError("num_epochs", num_epochs, "an integer >= 1")
    if minibatch_size is not None and (not _is_int(minibatch_size) or minibatch_size < 1):
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
    _check_variant("variant", variant, ("spec", "rllib-2.60", "alf"))
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
    if not _is_int(num_shards) or num_shards < 1:
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


# -- sharding across learners ---------------------------------------------------------------


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
    _check_variant("variant", variant, ("spec", "rllib-2.60"))
    if not _is_int(num_shards) or num_shards < 1:
        raise ConfigError("num_shards", num_shards, "an integer >= 1")
    for i, length in enumerate(lengths):
        if not _is_int(length) or length < 0:
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
