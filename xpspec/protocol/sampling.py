"""How a scenario asks for windows from a replay buffer: the sampling spec and the per-env
capacity a framework's total capacity gives (clauses ``replay.*``). Standard library only;
the reference sampler is ``xpspec.refimpl.replay``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xpspec.protocol.errors import ConfigError

__all__ = [
    "Anchor",
    "Boundary",
    "Distribution",
    "Rounding",
    "SamplingSpec",
    "per_env_capacity",
]

Boundary = Literal["cross", "forbid", "pad"]
Anchor = Literal["absolute", "oldest"]
Distribution = Literal["uniform-windows", "env-balanced", "uniform-episodes"]
Rounding = Literal["floor", "ceil"]

_BOUNDARIES = ("cross", "forbid", "pad")
_ANCHORS = ("absolute", "oldest")
_DISTRIBUTIONS = ("uniform-windows", "env-balanced", "uniform-episodes")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def per_env_capacity(total: int, num_envs: int, rounding: Rounding) -> int:
    """Per-env ring capacity for a framework that configures a total (clause
    ``replay.capacity-rounding``).

    ``"floor"``: ``total // num_envs`` (Stable-Baselines3 2.9.2 ``ReplayBuffer``,
    ``common/buffers.py``; Flashbax 0.1.3 ``max_size // add_batch_size``). ``"ceil"``:
    ``ceil(total / num_envs)`` (Tianshou 2.0.1 ``VectorReplayBuffer``). A result below 1 is
    refused (SB3 would raise it to 1).
    """
    if not _is_int(num_envs) or num_envs < 1:
        raise ConfigError("num_envs", num_envs, "an integer >= 1")
    if not _is_int(total) or total < 1:
        raise ConfigError("total", total, "an integer >= 1")
    if rounding == "floor":
        capacity = total // num_envs
    elif rounding == "ceil":
        capacity = -(-total // num_envs)
    else:
        raise ConfigError("rounding", rounding, "'floor' or 'ceil'")
    if capacity < 1:
        raise ConfigError("total", total, f"at least num_envs={num_envs} with floor rounding")
    return capacity


@dataclass(frozen=True)
class SamplingSpec:
    """Which windows are valid and how they are drawn (clauses ``replay.window-validity``,
    ``replay.boundary-policy``, ``replay.period``, ``replay.distribution``).

    ``boundary``: ``"cross"`` (default) admits every window inside the stored range, even one
    holding ``LAST`` then ``FIRST`` (ALF 4.x ``ReplayBuffer.get_batch``, Flashbax 0.1.3);
    ``"forbid"`` admits only windows inside one episode segment (TorchRL 0.14.1 ``SliceSampler``
    with ``strict_length=True``); ``"pad"`` admits every stored start, and the items past the
    start's episode segment or past the newest write are padding (mask ``False``, data zero).

    ``period``/``anchor``: starts lie on a grid of step ``period``, anchored at absolute
    positions (``"absolute"``, default: ``s % period == 0``, so the grid does not move as data
    is evicted; Flashbax 0.1.3 prioritised trajectory buffer) or at the env's oldest stored
    item (``"oldest"``: ``(s - earliest) % period == 0``; Flashbax 0.1.3 uniform trajectory
    buffer, ``trajectory_buffer.py`` ``sample``).

    ``distribution``: ``"uniform-windows"`` (default) draws every valid ``(env, start)`` with
    equal probability, pooled over envs; ``"env-balanced"`` assigns envs round-robin
    (``arange(N)`` tiled ``batch // N`` times, then ``batch % N`` distinct random envs), then a
    start uniformly among that env's valid starts (ALF ``ReplayBuffer._uniform_sample``, drawn
    with replacement); ``"uniform-episodes"`` draws an episode segment uniformly among those
    holding a valid start, then a start uniformly among its valid starts (TorchRL 0.14.1
    ``SliceSampler``). A start belongs to the segment of its first item. Draws are independent
    (with replacement).
    """

    window_length: int = 1
    boundary: Boundary = "cross"
    period: int = 1
    anchor: Anchor = "absolute"
    distribution: Distribution = "uniform-windows"

    def __post_init__(self) -> None:
        if not _is_int(self.window_length) or self.window_length < 1:
            raise ConfigError("window_length", self.window_length, "an integer >= 1")
        if self.boundary not in _BOUNDARIES:
            raise ConfigError("boundary", self.boundary, "'cross', 'forbid' or 'pad'")
        if not _is_int(self.period) or self.period < 1:
            raise ConfigError("period", self.period, "an integer >= 1")
        if self.anchor not in _ANCHORS:
            raise ConfigError("anchor", self.anchor, "'absolute' or 'oldest'")
        if self.distribution not in _DISTRIBUTIONS:
            raise ConfigError(
                "distribution",
                self.distribution,
                "'uniform-windows', 'env-balanced' or 'uniform-episodes'",
            )
