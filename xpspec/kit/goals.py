"""The toy env's sparse goal reward over a batch: :func:`xpspec.protocol.env_spec.goal_reward`
(0 where the achieved goal equals the desired goal, else -1) applied row by row, for the
reward functions that relabeling frameworks take from their user."""

from __future__ import annotations

from typing import Any

import numpy as np

from xpspec.kit.arrays import as_array
from xpspec.protocol.env_spec import goal_reward

__all__ = ["goal_rewards"]


def goal_rewards(achieved: Any, desired: Any) -> np.ndarray:
    """The goal reward of each pair of goals ``[..., G]`` (broadcast against each other), as
    float32 of the leading shape."""
    a, d = np.broadcast_arrays(
        as_array(achieved).astype(np.float64), as_array(desired).astype(np.float64)
    )
    if a.ndim == 0:
        raise ValueError(f"goals: expected arrays [..., G], got shape {a.shape}")
    rows = zip(a.reshape(-1, a.shape[-1]).tolist(), d.reshape(-1, d.shape[-1]).tolist())
    rewards = [goal_reward(tuple(x), tuple(y)) for x, y in rows]
    return np.asarray(rewards, dtype=np.float32).reshape(a.shape[:-1])
