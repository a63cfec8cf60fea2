"""Items decoded from toy observations through the identity encoding (clause
``timestep.identity``): every observation is ``[env, episode, t]``, so an adapter names what a
framework stepped, stored or sampled by decoding what the framework holds, never by its own
indices. Decoding goes through :func:`xpspec.protocol.identity.decode_observation`, which
refuses anything that is not an integral, in-range identity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xpspec.kit.arrays import as_array
from xpspec.protocol.identity import decode_observation
from xpspec.protocol.trace import Item

__all__ = [
    "decode_item",
    "decode_items",
    "decode_windows",
    "item_columns",
    "observation_array",
    "single_item_windows",
]


def observation_array(observation: Any) -> np.ndarray:
    """Toy observations as a float64 array ``[..., 3]``: a goal env's dict observation gives
    its ``"observation"`` entry, and an object array of such dicts (a vector env's Dict
    observations) is stacked."""
    if isinstance(observation, Mapping):
        observation = observation["observation"]
    array = as_array(observation)
    if array.dtype == object:
        array = np.stack([as_array(o["observation"]) for o in array.reshape(-1)])
    return array.astype(np.float64)


def decode_items(observation: Any) -> list[Item]:
    """The item (an :class:`~xpspec.protocol.identity.ItemId`) of every observation in
    ``observation`` (any leading shape), flattened in row-major order."""
    array = observation_array(observation)
    if array.ndim == 0 or array.shape[-1] < 3:
        raise ValueError(f"observation: expected an array [..., 3], got shape {array.shape}")
    return [decode_observation(row) for row in array.reshape(-1, array.shape[-1]).tolist()]


def decode_item(observation: Any) -> Item:
    """The item of one observation."""
    items = decode_items(observation)
    if len(items) != 1:
        raise ValueError(f"observation: expected one observation, got {len(items)}")
    return items[0]


def decode_windows(observation: Any) -> tuple[tuple[Item, ...], ...]:
    """Sampled observations as windows: ``[N, T, 3]`` is ``N`` windows of ``T`` items,
    ``[N, 3]`` is ``N`` windows of one item. An item a framework repeats stays repeated."""
    array = observation_array(observation)
    if array.ndim == 2:
        array = array[:, None, :]
    if array.ndim != 3:
        raise ValueError(f"observation: expected [N, 3] or [N, T, 3], got shape {array.shape}")
    return tuple(tuple(decode_observation(o) for o in window) for window in array.tolist())


def single_item_windows(items: Sequence[Item]) -> tuple[tuple[Item], ...]:
    """One window of one item per sampled row (a sampler of single transitions)."""
    return tuple((item,) for item in items)


def item_columns(
    items: Sequence[Item],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The ``env``, ``episode`` and ``t`` columns of ``items`` (the columnar form of trace
    events)."""
    return (
        tuple(int(i[0]) for i in items),
        tuple(int(i[1]) for i in items),
        tuple(int(i[2]) for i in items),
    )
