"""The Flashbax adapter: what it records of Flashbax 0.1.3's own trajectory buffer, on scenarios
small enough to derive every expected value by hand. Skipped when Flashbax is not installed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytest.importorskip("flashbax")

from hypothesis import given, settings
from hypothesis import strategies as st

from xpspec.adapters.flashbax import FlashbaxAdapter
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.checks.base import Context
from xpspec.conformance.engine import Session
from xpspec.conformance.expectations import Deviation, Expectations
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
ADAPTER = FlashbaxAdapter()
LONG = EnvSpec(1, (FixedSchedule(100),))
"""One env with one episode of 100 transitions: the item at position ``i`` is ``(0, 0, i)``."""


def _replay(env: EnvSpec, capacity: int, fill: int, **sampling: Any) -> Trace:
    draws = sampling.pop("draws", 4)
    batch = sampling.pop("batch_size", 64)
    scenario = ReplayScenario(
        env, capacity, fill, SamplingSpec(**sampling), batch_size=batch, draws=draws
    )
    return ADAPTER.run_replay(scenario)


def _windows(trace: Trace) -> list[tuple[Any, ...]]:
    return [w for d in trace.of_kind("sampled") for w in d.windows]


def _starts(trace: Trace) -> set[int]:
    return {w[0][2] for w in _windows(trace)}


def test_info_names_the_installed_versions() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("flashbax", "0.1.3")
    assert (info.extra_versions["jax"], info.extra_versions["jaxlib"]) == ("0.10.2", "0.10.2")
    assert info.capabilities == ("replay", "priorities", "offline")
    ADAPTER.smoke()


def test_every_vector_step_is_one_store_of_all_envs() -> None:
    # Two envs, terminated episodes of 2 transitions, 4 vector steps: t = 0, 1, 2 (LAST,
    # discount 0, reward t = 2), then the next episode's FIRST; rewards are t (0 at FIRST).
    trace = _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4)
    stores = list(trace.of_kind("store"))
    assert [list(zip(s.env, s.episode, s.t)) for s in stores] == [
        [(0, 0, 0), (1, 0, 0)],
        [(0, 0, 1), (1, 0, 1)],
        [(0, 0, 2), (1, 0, 2)],
        [(0, 1, 0), (1, 1, 0)],
    ]
    assert [s.step_type for s in stores] == [(F, F), (M, M), (L, L), (F, F)]
    assert [s.reward for s in stores] == [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (0.0, 0.0)]
    assert [s.discount for s in stores] == [(1.0, 1.0), (1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]
    assert trace.header["can_sample"] is True


def test_windows_cross_episode_ends_but_not_the_newest_write() -> None:
    # Episodes of 2 transitions (3 items each), 7 items stored in a ring of 8, windows of 3:
    # the valid starts are positions 0..4 (7 - 3), two of them holding a LAST then a FIRST
    # (the spec's "Boundary policies" example, column cross); position 5 would reach past
    # the newest write (position 6).
    trace = _replay(EnvSpec(1, (FixedSchedule(2),)), capacity=8, fill=7, window_length=3)
    assert set(_windows(trace)) == {
        ((0, 0, 0), (0, 0, 1), (0, 0, 2)),
        ((0, 0, 1), (0, 0, 2), (0, 1, 0)),
        ((0, 0, 2), (0, 1, 0), (0, 1, 1)),
        ((0, 1, 0), (0, 1, 1), (0, 1, 2)),
        ((0, 1, 1), (0, 1, 2), (0, 2, 0)),
    }


@pytest.mark.parametrize(("written", "starts"), [(11, {3, 5, 7}), (12, {4, 6, 8})])
def test_period_grid_starts_at_the_oldest_stored_step(written: int, starts: set[int]) -> None:
    # Ring of 8, windows of 3, period 2: after 11 writes positions 3..10 are stored and the
    # grid runs from the oldest (3) while a window fits (start <= 10 - 2); after 12 writes it
    # runs from 4. The spec's absolute grid would give 4, 6, 8 both times.
    trace = _replay(LONG, capacity=8, fill=written, window_length=3, period=2)
    assert _starts(trace) == starts


@settings(max_examples=8, deadline=None)
@given(
    capacity=st.integers(2, 7),
    window=st.integers(1, 3),
    period=st.integers(1, 3),
    extra=st.integers(0, 9),
)
def test_starts_are_the_oldest_anchored_grid(
    capacity: int, window: int, period: int, extra: int
) -> None:
    """Valid starts are h + k * period with h = max(R - capacity, 0) the oldest stored
    position and h + k * period + window <= R, R the items written."""
    window = min(window, capacity)
    written = window + extra
    h = max(written - capacity, 0)
    expected = set(range(h, written - window + 1, period))
    trace = _replay(LONG, capacity, written, window_length=window, period=period, batch_size=128)
    assert _starts(trace) == expected  # 128 draws over at most 7 starts: all of them appear
    for w in _windows(trace):
        assert [i[2] for i in w] == list(range(w[0][2], w[0][2] + window))


def test_rows_and_starts_are_drawn_uniformly() -> None:
    # Two envs, rings of 4, 6 writes, windows of 2: each env holds positions 2..5, so 3
    # starts per env and 6 windows; 6000 draws put 1000 on each (sd = sqrt(6000/6 * 5/6),
    # about 29), and 3000 on each env (sd about 39).
    trace = _replay(
        EnvSpec(2, (FixedSchedule(100),)),
        capacity=4,
        fill=6,
        window_length=2,
        batch_size=600,
        draws=10,
    )
    counts = Counter(w[0] for w in _windows(trace))
    assert set(counts) == {(e, 0, t) for e in (0, 1) for t in (2, 3, 4)}
    assert all(abs(n - 1000) < 5 * 29 for n in counts.values()), counts
    per_env = Counter(item[0] for item in counts.elements())
    assert abs(per_env[0] - 3000) < 5 * 39


def test_flashbax_alone_samples_unwritten_slots_before_can_sample() -> None:
    """Why the adapter checks can_sample: Flashbax's sample does not. Two envs, 2 writes,
    windows of 3 — no window exists and can_sample is false, yet sample draws grid index 0
    (randint(0, 0)) and reads slots 0, 1, 2 of a row, slot 2 never written (zeros)."""
    import flashbax as fbx
    import jax
    import jax.numpy as jnp

    buffer = fbx.make_trajectory_buffer(
        add_batch_size=2,
        max_length_time_axis=8,
        min_length_time_axis=3,
        sample_batch_size=8,
        sample_sequence_length=3,
        period=1,
    )
    state = buffer.init({"t": jnp.zeros((), jnp.float32)})
    for t in (1.0, 2.0):  # written values are non-zero, so a zero is an unwritten slot
        state = buffer.add(state, {"t": jnp.full((2, 1), t)})
    assert not bool(buffer.can_sample(state))
    windows = buffer.sample(state, jax.random.PRNGKey(0)).experience["t"].tolist()
    assert windows == [[1.0, 2.0, 0.0]] * 8


def test_a_draw_before_can_sample_is_a_refused_draw() -> None:
    # The same buffer through the adapter: the documented precondition decides, so every
    # draw is empty (replay.no-window) instead of made-up windows.
    scenario = ReplayScenario(
        EnvSpec(2, (FixedSchedule(4),)), 8, 2, SamplingSpec(window_length=3), batch_size=8
    )
    trace = ADAPTER.run_replay(scenario)
    assert trace.header["can_sample"] is False
    assert [s.windows for s in trace.of_kind("sampled")] == [()]
    no_window = next(c for c in ALL_CHECKS if c.name == "replay-no-window")
    assert no_window.applies(scenario)
    from xpspec.refimpl.adapter import RefimplAdapter

    reference = RefimplAdapter().run_replay
    no_window.verify(scenario, trace, Context(reference, lambda s: trace))


@pytest.mark.parametrize(
    "sampling",
    [
        {"boundary": "forbid"},
        {"boundary": "pad"},
        {"distribution": "env-balanced"},
        {"distribution": "uniform-episodes"},
    ],
)
def test_episode_aware_sampling_is_unsupported(sampling: dict[str, str]) -> None:
    with pytest.raises(Unsupported):
        _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4, window_length=2, **sampling)


def test_runs_repeat_byte_for_byte_and_follow_the_seed() -> None:
    def run(seed: int) -> str:
        scenario = ReplayScenario(
            EnvSpec(2, (FixedSchedule(3),)), 6, 9, SamplingSpec(window_length=2), seed=seed
        )
        return ADAPTER.run_replay(scenario).to_jsonl()

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_absolute_grid_is_reproduced_by_the_oldest_anchored_variant() -> None:
    # Off the catalogue: rings of 5, windows of 2, period 3, 9 writes. Stored positions
    # 4..8, starts up to 7: Flashbax's grid from the oldest gives 4 and 7, the spec's
    # absolute grid (multiples of 3) only 6.
    scenario = ReplayScenario(
        EnvSpec(2, (FixedSchedule(100),)),
        5,
        9,
        SamplingSpec(window_length=2, period=3),
        batch_size=32,
        draws=2,
    )
    assert _starts(ADAPTER.run_replay(scenario)) == {4, 7}
    (check,) = [c for c in ALL_CHECKS if c.name == "replay-windows"]
    plain = Session(ADAPTER, "flashbax").evaluate(check, "off-catalogue", scenario)
    assert plain.status == "fail"
    deviation = Deviation("replay.period-anchor", "grid at the oldest step", "oldest-anchored")
    declared = Session(ADAPTER, "flashbax", Expectations((deviation,)))
    assert declared.evaluate(check, "off-catalogue", scenario).status == "deviation"
