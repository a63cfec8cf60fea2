"""Framework columns as numpy arrays and plain Python values, whatever the framework holds
them in (numpy arrays, torch tensors, JAX arrays, sequences)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_array", "bools", "floats", "ints"]


def as_array(values: Any) -> np.ndarray:
    """``values`` as a numpy array; a torch tensor is detached and moved to the CPU first."""
    detach = getattr(values, "detach", None)
    if callable(detach):
        values = detach().cpu().numpy()
    return np.asarray(values)


def ints(values: Any) -> tuple[int, ...]:
    """A column of ints, flattened (floats are truncated, as ``astype(int64)`` does)."""
    return tuple(int(v) for v in as_array(values).reshape(-1).astype(np.int64).tolist())


def bools(values: Any) -> tuple[bool, ...]:
    """A column of flags, flattened (any nonzero value is True)."""
    return tuple(bool(v) for v in as_array(values).reshape(-1).astype(bool).tolist())


def floats(values: Any) -> tuple[float, ...]:
    """A column of floats, flattened; each value exactly as the framework held it."""
    return tuple(float(v) for v in as_array(values).reshape(-1).astype(np.float64).tolist())
