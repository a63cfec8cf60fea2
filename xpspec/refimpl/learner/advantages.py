"""The bootstrap timestep, GAE, value targets and advantage normalisation, on the episodes
path and on the batch path (clauses ``learner.bootstrap-timestep-masked``,
``learner.truncation-bootstraps``, ``learner.stats-exclude-bootstrap``, ``learner.gae``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from xpspec.protocol.errors import ConfigError
from xpspec.refimpl.learner._common import (
    AdvantageVariant,
    Layout,
    check_unit_interval,
    check_variant,
)
from xpspec.refimpl.learner.episodes import (
    Episode,
    TimeMajorBatch,
    batch_to_episodes,
    batch_values_and_lasts,
    episodes_to_batch,
)

__all__ = [
    "AdvantageRows",
    "BootstrapRows",
    "GaeResult",
    "add_bootstrap_timestep",
    "batch_gae",
    "batch_one_step_returns",
    "episode_advantages",
    "gae",
    "normalize_advantages",
    "rows_layout_advantages",
]


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
    check_variant("variant", variant, ("spec", "rllib-2.60"))
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
    check_unit_interval("gamma", gamma)
    check_unit_interval("lam", lam)
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
    layout: Layout = "episodes",
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

    ``layout`` says how ``"spec"`` computes GAE: per episode (``"episodes"``) or on the rows
    layout (``"rows"``, :func:`rows_layout_advantages`); clause ``learner.gae`` says both give
    the same numbers.
    """
    check_variant("variant", variant, ("spec", "rllib-2.60"))
    check_variant("layout", layout, ("episodes", "rows"))
    if layout == "rows" and variant != "spec":
        raise ConfigError("layout", layout, "'episodes' for the variant " + repr(variant))
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
    if variant == "spec" and layout == "rows":
        advantages = torch.cat(rows_layout_advantages(episodes, gamma, lam))
        normalized = normalize_advantages(advantages, loss_mask, eps, correction=correction)
    elif variant == "spec":
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


def rows_layout_advantages(
    episodes: Sequence[Episode], gamma: float, lam: float
) -> list[torch.Tensor]:
    """Each episode's advantages on rows ``0..L`` (0 on the bootstrap row ``L``), computed on
    the rows layout: the episodes are laid end to end in columns by :func:`episodes_to_batch`
    (a column ends after each in-progress episode), :func:`batch_gae` runs over each column,
    and :func:`batch_to_episodes` cuts the column's rows back into its episodes."""
    parts: list[torch.Tensor] = []
    column: list[Episode] = []
    for i, ep in enumerate(episodes):
        column.append(ep)
        if not ep.done or i == len(episodes) - 1:
            batch = episodes_to_batch([column])
            advantages = batch_gae(batch, gamma, lam).advantages[:, 0]
            # the column's final row gets 0; + 0.0 makes a LAST row's -0.0 the episodes
            # layout's 0.0, so both layouts write the same trace bytes
            rows = torch.cat([advantages, advantages.new_zeros(1)]) + 0.0
            lengths = [piece.length + 1 for piece in batch_to_episodes(batch)[0]]
            parts.extend(torch.split(rows, lengths))
            column = []
    return parts


def batch_gae(batch: TimeMajorBatch, gamma: float, lam: float) -> GaeResult:
    """GAE over ``[T, B]`` for rows ``0..T-2`` (ALF ``value_ops.generalized_advantage_estimation``
    with ``discounts = gamma * discount``): ``delta_t = r_{t+1} + d_{t+1} V_{t+1} - V_t``,
    ``A_t = (1 - last_t) (delta_t + d_{t+1} lam A_{t+1})``, ``A_{T-1} = 0``. A LAST row gets
    advantage 0, so nothing propagates across LAST -> FIRST; a LAST with discount 1 is
    bootstrapped from by the row before it. Targets are ``A + V``."""
    check_unit_interval("gamma", gamma)
    check_unit_interval("lam", lam)
    values, is_last = batch_values_and_lasts(batch)
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
    check_unit_interval("gamma", gamma)
    values, is_last = batch_values_and_lasts(batch)
    discounted = batch.discount.to(values.dtype) * gamma * values
    rewards = batch.reward.to(values.dtype)
    return (1 - is_last[:-1]) * (rewards[1:] + discounted[1:]) + is_last[:-1] * discounted[:-1]
