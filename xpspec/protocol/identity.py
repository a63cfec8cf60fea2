"""Item identity: every time step of a toy env is named by ``(env, episode, t)``.

Toy-env observations carry their own identity (clause ``timestep.identity``), so a stored,
excluded or sampled item in any framework can be traced back to the step that produced it.
The observation vector is float32 ``[env, episode, t]``: exact for every value below 2**24.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MAX_COORDINATE", "ItemId", "decode_observation", "encode_observation"]

MAX_COORDINATE = 2**24
"""Coordinates must stay below this bound so float32 represents them exactly."""


class ItemId(NamedTuple):
    """The identity of one time step: env index, episode index within that env, and t."""

    env: int
    episode: int
    t: int


def encode_observation(item: ItemId) -> tuple[float, float, float]:
    """The observation vector of ``item``; inverse of :func:`decode_observation`."""
    for name, value in zip(ItemId._fields, item):
        if not 0 <= value < MAX_COORDINATE:
            raise ValueError(f"{name}: expected 0 <= {name} < 2**24, got {value!r}")
    return (float(item.env), float(item.episode), float(item.t))


def decode_observation(observation: object) -> ItemId:
    """The identity encoded in ``observation`` (any sequence whose first three entries are
    integral ``env, episode, t``). Raises ``ValueError`` for anything else."""
    try:
        values = [float(observation[i]) for i in range(3)]  # type: ignore[index]
    except (TypeError, IndexError, KeyError) as exc:
        raise ValueError(
            f"observation: expected a sequence [env, episode, t, ...], got {observation!r}"
        ) from exc
    if any(v != int(v) or v < 0 or v >= MAX_COORDINATE for v in values):
        raise ValueError(
            f"observation: expected non-negative integral [env, episode, t], got {values!r}"
        )
    return ItemId(int(values[0]), int(values[1]), int(values[2]))
