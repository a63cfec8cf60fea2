"""Minimal reproductions, with Flashbax 0.1.3 alone, of the behaviours behind the prioritised
buffer's finding and deviation in ``xpspec/adapters/flashbax.expectations.toml``: one row of 8
slots, single-item windows, ``priority_exponent`` 0.6."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("flashbax")

import flashbax as fbx
import jax
import jax.numpy as jnp
from flashbax.buffers import sum_tree


def _buffer(batch: int = 2) -> Any:
    return fbx.make_prioritised_trajectory_buffer(
        add_batch_size=1,
        sample_batch_size=batch,
        sample_sequence_length=1,
        period=1,
        min_length_time_axis=1,
        max_length_time_axis=8,
        priority_exponent=0.6,
        device="cpu",
    )


def _leaves(state: Any) -> np.ndarray:
    return np.asarray(sum_tree.get_batch(state.sum_tree_state, jnp.arange(8)))


def _added(buffer: Any, state: Any, value: float) -> Any:
    return buffer.add(state, {"x": jnp.full((1, 1), value, jnp.float32)})


def test_a_new_item_gets_the_largest_mass_truncated_to_an_integer() -> None:
    # prioritised_trajectory_buffer.py, _calculate_new_item_priorities: jnp.full_like of the
    # integer item indices with fill_value=max_recorded_priority, so the fill value is cast to
    # the indices' integer dtype. After a priority of 2 (mass 2**0.6 = 1.516, which becomes
    # max_recorded_priority) the next item gets mass 1, not 1.516.
    buffer = _buffer()
    state = buffer.init({"x": jnp.float32(0)})
    for t in range(3):
        state = _added(buffer, state, t)
    state = buffer.set_priorities(state, jnp.array([0]), jnp.array([2.0]))
    assert float(state.sum_tree_state.max_recorded_priority) == pytest.approx(2**0.6)
    state = _added(buffer, state, 3)
    assert _leaves(state)[:4].tolist() == pytest.approx([2**0.6, 1.0, 1.0, 1.0])


def test_a_batch_is_drawn_one_per_stratum_of_the_total_mass() -> None:
    # sum_tree.stratified_sample: [0, total) cut into batch_size equal segments, one uniform
    # draw in each. With two items of equal mass and batches of 2, every batch holds both
    # (independent draws would repeat one item in half the batches).
    buffer = _buffer(batch=2)
    state = buffer.init({"x": jnp.float32(0)})
    for t in range(2):
        state = _added(buffer, state, t)
    sample = jax.jit(buffer.sample)
    key = jax.random.PRNGKey(0)
    batches = []
    for _ in range(50):
        key, sub = jax.random.split(key)
        batches.append(sorted(np.asarray(sample(state, sub).indices).tolist()))
    assert all(b == [0, 1] for b in batches)


def test_the_mixer_misses_a_whole_share_by_float_rounding() -> None:
    # mixer.py, make_mixer: prop_batch_sizes = [int(p * sample_batch_size) for p in the
    # normalised proportions], the remainder added to the first buffer. Proportions 5:6 of a
    # batch of 55 are exactly 25 and 30 items, but 6 / 11 * 55 is 29.999... in floating point:
    # the second buffer gets 29 and the first 26.
    def buffer() -> Any:
        return fbx.make_trajectory_buffer(
            add_batch_size=1,
            sample_batch_size=55,
            sample_sequence_length=1,
            period=1,
            min_length_time_axis=1,
            max_length_time_axis=4,
        )

    first, second = buffer(), buffer()
    states = []
    for source, b in enumerate((first, second)):
        state = b.init({"x": jnp.float32(0)})
        states.append(b.add(state, {"x": jnp.full((1, 4), source, jnp.float32)}))
    mixer = fbx.make_mixer([first, second], 55, [5, 6])
    sample = mixer.sample(states, jax.random.PRNGKey(0))
    sources = np.asarray(sample.experience["x"]).ravel().tolist()
    assert (sources.count(0), sources.count(1)) == (26, 29)
    assert (55 * 5 // 11, 55 * 6 // 11) == (25, 30)
