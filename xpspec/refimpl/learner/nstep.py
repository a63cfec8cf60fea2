"""n-step returns near episode ends and the newest stored step (clause
``learner.nstep-episode-end``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from xpspec.protocol.errors import ConfigError
from xpspec.refimpl.learner._common import (
    LAST,
    MID,
    NStepVariant,
    check_unit_interval,
    check_variant,
    is_int,
)
from xpspec.refimpl.learner.episodes import TimeMajorBatch, batch_values_and_lasts

__all__ = ["NStepReturns", "batch_nstep_returns", "nstep_returns"]


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
    check_variant("variant", variant, ("spec", "rllib-2.60"))
    check_unit_interval("gamma", gamma)
    if not is_int(n) or n < 1:
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
    is_last = (step_type == LAST) & mask
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
    the targets are ALF's discounted returns; with ``n = 1`` they equal
    :func:`batch_one_step_returns` on non-LAST rows (at a LAST row this gives ``V_t``, ALF's
    one-step gives ``gamma * discount_t * V_t``; such rows are masked either way)."""
    values, _ = batch_values_and_lasts(batch)
    if not is_int(n) or n < 1:
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
        windows(batch.step_type, MID),
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
