"""Items decoded from toy observations (xpspec.kit.items)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xpspec.kit.items import (
    decode_item,
    decode_items,
    decode_windows,
    item_columns,
    single_item_windows,
)
from xpspec.protocol.identity import ItemId


def test_decode_items_of_arrays_tensors_and_goal_dicts() -> None:
    rows = [[0.0, 1.0, 2.0], [1.0, 0.0, 5.0]]
    want = [ItemId(0, 1, 2), ItemId(1, 0, 5)]
    assert decode_items(np.asarray(rows, dtype=np.float32)) == want
    assert decode_items(torch.tensor(rows, requires_grad=True)) == want
    goals = {"observation": np.asarray(rows), "desired_goal": np.zeros((2, 3))}
    assert decode_items(goals) == want
    # a vector env's Dict observations, as an object array of dicts
    objects = np.empty(2, dtype=object)
    objects[:] = [{"observation": np.asarray(r)} for r in rows]
    assert decode_items(objects) == want


def test_decode_items_flattens_leading_axes_in_row_major_order() -> None:
    obs = np.arange(2 * 3 * 3, dtype=np.float64).reshape(2, 3, 3)
    assert decode_items(obs) == [tuple(int(v) for v in row) for row in obs.reshape(-1, 3)]
    assert decode_items(np.zeros((0, 3))) == []


def test_decode_refuses_what_is_no_identity() -> None:
    with pytest.raises(ValueError, match="integral"):
        decode_items(np.asarray([[0.0, 0.0, 1.5]]))
    with pytest.raises(ValueError, match="non-negative"):
        decode_items(np.asarray([[0.0, -1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"expected an array \[\.\.\., 3\]"):
        decode_items(np.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="expected one observation, got 2"):
        decode_item(np.zeros((2, 3)))


def test_decode_item_of_one_observation() -> None:
    assert decode_item([3.0, 4.0, 5.0]) == (3, 4, 5)


def test_windows_of_sequences_and_of_single_rows() -> None:
    seq = np.asarray([[[0, 0, 1], [0, 0, 2]], [[1, 3, 0], [1, 3, 0]]], dtype=np.float32)
    assert decode_windows(seq) == (((0, 0, 1), (0, 0, 2)), ((1, 3, 0), (1, 3, 0)))
    assert decode_windows(np.asarray([[0, 0, 1], [1, 0, 0]])) == (((0, 0, 1),), ((1, 0, 0),))
    assert single_item_windows([(0, 0, 1), (1, 0, 0)]) == (((0, 0, 1),), ((1, 0, 0),))
    with pytest.raises(ValueError, match=r"expected \[N, 3\] or \[N, T, 3\]"):
        decode_windows(np.zeros((1, 1, 1, 3)))


def test_item_columns() -> None:
    assert item_columns([(0, 1, 2), (3, 4, 5)]) == ((0, 3), (1, 4), (2, 5))
    assert item_columns([]) == ((), (), ())
