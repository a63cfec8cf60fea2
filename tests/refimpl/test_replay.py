"""Tests of xpspec.refimpl.replay: storage, window validity, boundary policies, period grids,
sampling distributions, whole-buffer chunks and clearing.

Expected values come from an independent model in this file (a list of step types per env plus
the earliest stored position), from the definitions in the clauses, or by hand in comments.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpspec.protocol.codec import canonical_json, from_jsonable, to_jsonable
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.sampling import SamplingSpec, per_env_capacity
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.replay import NoValidWindow, ReplayBuffer

F, M, L = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)

FIELDS = {
    "step_type": ((), torch.int64),
    "observation": ((3,), torch.float32),
    "reward": ((), torch.float32),
}


# -- an independent model -------------------------------------------------------------------
class Model:
    """Every item ever written, as step types per env, and the earliest stored position."""

    def __init__(self, num_envs: int, capacity: int) -> None:
        self.capacity = capacity
        self.items: list[list[int]] = [[] for _ in range(num_envs)]
        self.earliest = [0] * num_envs

    def add(self, env: int, step: int) -> None:
        self.items[env].append(step)
        self.earliest[env] = max(self.earliest[env], len(self.items[env]) - self.capacity)

    def clear(self, keep_last: int) -> None:
        for e, items in enumerate(self.items):
            self.earliest[e] = max(self.earliest[e], len(items) - keep_last)

    def newest(self, env: int) -> int:
        return len(self.items[env]) - 1

    def cut(self, env: int, q: int) -> bool:
        """Boundary between stored items q and q+1 (clause replay.episode-segments)."""
        steps = self.items[env]
        return steps[q] == L or steps[q + 1] == F

    def starts(self, env: int, spec: SamplingSpec) -> list[int]:
        """Valid starts straight from the definitions."""
        lo, hi = self.earliest[env], self.newest(env)
        t, p = spec.window_length, spec.period
        out = []
        for s in range(lo, hi + 1):
            on_grid = (s % p == 0) if spec.anchor == "absolute" else ((s - lo) % p == 0)
            inside = s + t - 1 <= hi
            one_segment = inside and not any(self.cut(env, q) for q in range(s, s + t - 1))
            ok = {"cross": inside, "forbid": one_segment, "pad": True}[spec.boundary]
            if on_grid and ok:
                out.append(s)
        return out

    def pad_mask(self, env: int, s: int, t: int) -> list[bool]:
        """Item s+j is real iff it is stored and no boundary lies between s and s+j."""
        hi = self.newest(env)
        return [
            s + j <= hi and not any(self.cut(env, q) for q in range(s, s + j)) for j in range(t)
        ]

    def segment_first(self, env: int, s: int) -> int:
        q = s
        while q > self.earliest[env] and not self.cut(env, q - 1):
            q -= 1
        return q

    def probabilities(self, spec: SamplingSpec) -> dict[tuple[int, int], Fraction]:
        """Per-row probability of each window, by counting valid windows."""
        starts = {e: self.starts(e, spec) for e in range(len(self.items))}
        windows = [(e, s) for e, v in starts.items() for s in v]
        if spec.distribution == "uniform-windows":
            return {w: Fraction(1, len(windows)) for w in windows}
        if spec.distribution == "env-balanced":
            n = len(self.items)
            return {(e, s): Fraction(1, n * len(starts[e])) for e, s in windows}
        segments: dict[tuple[int, int], int] = {}
        for e, s in windows:
            key = (e, self.segment_first(e, s))
            segments[key] = segments.get(key, 0) + 1
        return {
            (e, s): Fraction(1, len(segments) * segments[(e, self.segment_first(e, s))])
            for e, s in windows
        }


def item(env: int, position: int, step: int) -> tuple[list[float], float]:
    """Observation and reward written for (env, position): they name the item."""
    return [float(env), float(position), float(step)], float(1000 * env + position)


def write_row(buf: ReplayBuffer, model: Model, steps: list[int]) -> None:
    obs, rew = zip(*(item(e, len(model.items[e]), s) for e, s in enumerate(steps)), strict=True)
    buf.add_row(
        {
            "step_type": torch.tensor(steps, dtype=torch.int64),
            "observation": torch.tensor(obs, dtype=torch.float32),
            "reward": torch.tensor(rew, dtype=torch.float32),
        }
    )
    for e, s in enumerate(steps):
        model.add(e, s)


def write_items(buf: ReplayBuffer, model: Model, pairs: list[tuple[int, int]]) -> None:
    obs, rew = [], []
    for e, s in pairs:
        o, r = item(e, len(model.items[e]), s)
        model.add(e, s)
        obs.append(o)
        rew.append(r)
    buf.add_items(
        torch.tensor([e for e, _ in pairs], dtype=torch.int64),
        {
            "step_type": torch.tensor([s for _, s in pairs], dtype=torch.int64),
            "observation": torch.tensor(obs, dtype=torch.float32).reshape(len(pairs), 3),
            "reward": torch.tensor(rew, dtype=torch.float32),
        },
    )


def one_env(steps: list[int], capacity: int = 64) -> tuple[ReplayBuffer, Model]:
    buf, model = ReplayBuffer(1, capacity, FIELDS), Model(1, capacity)
    for s in steps:
        write_row(buf, model, [s])
    return buf, model


def check_sample(model: Model, spec: SamplingSpec, sample) -> None:
    """Every row is a valid window holding exactly the items at its positions."""
    n, t = sample.mask.shape
    assert t == spec.window_length
    for i in range(n):
        e, s = int(sample.env_ids[i]), int(sample.positions[i])
        assert s in model.starts(e, spec), (e, s)
        mask = model.pad_mask(e, s, t) if spec.boundary == "pad" else [True] * t
        assert sample.mask[i].tolist() == mask
        for j in range(t):
            if mask[j]:
                assert s + j >= model.earliest[e] and s + j <= model.newest(e)
                obs, rew = item(e, s + j, model.items[e][s + j])
                assert sample.data["observation"][i, j].tolist() == obs
                assert float(sample.data["reward"][i, j]) == rew
                assert int(sample.data["step_type"][i, j]) == model.items[e][s + j]
            else:
                assert sample.data["observation"][i, j].tolist() == [0.0, 0.0, 0.0]
                assert float(sample.data["reward"][i, j]) == 0.0
                assert int(sample.data["step_type"][i, j]) == 0


# -- Hypothesis: window validity over random write sequences ---------------------------------
specs = st.builds(
    SamplingSpec,
    window_length=st.integers(1, 4),
    boundary=st.sampled_from(["cross", "forbid", "pad"]),
    period=st.integers(1, 3),
    anchor=st.sampled_from(["absolute", "oldest"]),
    distribution=st.sampled_from(["uniform-windows", "env-balanced", "uniform-episodes"]),
)
step_types = st.sampled_from([F, M, M, L])


@st.composite
def histories(draw):
    num_envs = draw(st.integers(1, 3))
    capacity = draw(st.integers(1, 6))
    ops = draw(
        st.lists(
            st.one_of(
                st.tuples(
                    st.just("row"), st.lists(step_types, min_size=num_envs, max_size=num_envs)
                ),
                st.tuples(
                    st.just("items"),
                    st.lists(st.tuples(st.integers(0, num_envs - 1), step_types), max_size=9),
                ),
                st.tuples(st.just("clear"), st.integers(0, 4)),
            ),
            max_size=12,
        )
    )
    return num_envs, capacity, ops


def replay(num_envs: int, capacity: int, ops) -> tuple[ReplayBuffer, Model]:
    buf, model = ReplayBuffer(num_envs, capacity, FIELDS), Model(num_envs, capacity)
    for kind, arg in ops:
        if kind == "row":
            write_row(buf, model, arg)
        elif kind == "items":
            write_items(buf, model, arg)
        else:
            buf.clear(keep_last=arg)
            model.clear(arg)
    return buf, model


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), specs, st.integers(0, 2**31))
def test_windows_are_valid_and_hold_the_written_items(history, spec, seed):
    """Clauses replay.storage, replay.eviction, replay.window-validity: sampled windows never
    hold an item past the newest write or an evicted item, and hold what was written there."""
    num_envs, capacity, ops = history
    buf, model = replay(num_envs, capacity, ops)
    assert buf.sizes.tolist() == [len(v) - model.earliest[e] for e, v in enumerate(model.items)]
    assert buf.end_positions.tolist() == [len(v) for v in model.items]
    assert buf.total_stored == sum(len(v) for v in model.items)
    assert buf.total_size == sum(buf.sizes.tolist())
    expected = {e: model.starts(e, spec) for e in range(num_envs)}
    for e in range(num_envs):
        assert buf.valid_starts(e, spec) == expected[e]
    total = sum(len(v) for v in expected.values())
    assert buf.num_valid_windows(spec) == total
    empty_env = any(not v for v in expected.values())
    generator = torch.Generator().manual_seed(seed)
    if total == 0 or (spec.distribution == "env-balanced" and empty_env):
        with pytest.raises(NoValidWindow):
            buf.sample(5, spec, generator)
        return
    assert buf.window_probabilities(spec) == model.probabilities(spec)
    check_sample(model, spec, buf.sample(7, spec, generator))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), specs, st.integers(0, 2**31))
def test_lockstep_sampling_draws_what_the_grid_draws(history, spec, seed):
    """While all envs hold the same positions the sampler reads the valid starts off the
    common end and size; it draws the very windows the per-env grid draws from the same
    generator state (the bytes of every trace depend on it)."""
    num_envs, capacity, ops = history
    fast, _ = replay(num_envs, capacity, ops)
    slow, _ = replay(num_envs, capacity, ops)
    slow._common_starts = lambda sampling: None  # the per-env grid always
    draws = []
    for buf in (fast, slow):
        generator = torch.Generator().manual_seed(seed)
        try:
            s = buf.sample(9, spec, generator)
        except NoValidWindow as exc:
            draws.append(str(exc))
        else:
            draws.append((s.env_ids.tolist(), s.positions.tolist(), s.mask.tolist()))
        draws.append(generator.get_state())
    assert draws[0] == draws[2] and torch.equal(draws[1], draws[3])


# -- storage ---------------------------------------------------------------------------------
def test_add_items_appends_each_envs_items_in_order():
    """Clause replay.storage: several items of one env in one call keep their order."""
    buf, model = ReplayBuffer(3, 8, FIELDS), Model(3, 8)
    write_items(buf, model, [(2, F), (0, F), (2, M), (2, L), (0, M)])
    # env 0 gets positions 0,1; env 1 nothing; env 2 positions 0,1,2.
    assert buf.end_positions.tolist() == [2, 0, 3]
    sample = buf.chunks(1)
    got = [
        (int(e), int(p), sample.data["observation"][i, 0, 1].item())
        for i, (e, p) in enumerate(zip(sample.env_ids, sample.positions, strict=True))
    ]
    assert got == [(0, 0, 0.0), (0, 1, 1.0), (2, 0, 0.0), (2, 1, 1.0), (2, 2, 2.0)]
    assert sample.data["step_type"][:, 0].tolist() == [F, M, F, M, L]


def test_add_items_beyond_capacity_keeps_the_newest():
    """Clause replay.eviction within one call: 7 items into a ring of 3 leave positions 4..6."""
    buf, model = ReplayBuffer(2, 3, FIELDS), Model(2, 3)
    write_items(buf, model, [(1, M)] * 7 + [(0, F)])
    sample = buf.chunks(1)
    assert sample.env_ids.tolist() == [0, 1, 1, 1]
    assert sample.positions.tolist() == [0, 4, 5, 6]
    assert sample.data["reward"][:, 0].tolist() == [0.0, 1004.0, 1005.0, 1006.0]


def test_eviction_drops_the_oldest_item_and_positions_keep_counting():
    """Clause replay.eviction: capacity 4, six writes -> stored positions 2..5."""
    buf, _ = one_env([F, M, M, M, M, M], capacity=4)
    assert buf.sizes.tolist() == [4]
    assert buf.total_stored == 6 and buf.total_size == 4
    assert buf.valid_starts(0, SamplingSpec(window_length=4)) == [2]
    with pytest.raises(NoValidWindow, match=r"window_length=5.*sizes=\[4\].*capacity=4"):
        buf.sample(3, SamplingSpec(window_length=5), torch.Generator().manual_seed(0))


def test_per_env_capacity_rounding():
    """Clause replay.capacity-rounding: floor (SB3, Flashbax) and ceil (Tianshou)."""
    assert per_env_capacity(7, 2, "floor") == 3  # SB3 ReplayBuffer(7, n_envs=2) -> 3 rows
    assert per_env_capacity(10, 3, "floor") == 3  # Flashbax max_size 10, add_batch_size 3
    assert per_env_capacity(41, 2, "ceil") == 21  # Tianshou VectorReplayBuffer(41, 2): 42 slots
    assert per_env_capacity(40, 2, "ceil") == 20
    with pytest.raises(ConfigError, match="rounding"):
        per_env_capacity(10, 2, "round")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="total"):
        per_env_capacity(1, 2, "floor")


# -- boundary policies -----------------------------------------------------------------------
EPISODES = [F, M, L, F, M, M, L]  # segments [0, 2] and [3, 6]


def test_cross_allows_windows_over_a_boundary():
    buf, _ = one_env(EPISODES)
    # every start whose window of 3 ends at or before the newest item 6
    assert buf.valid_starts(0, SamplingSpec(window_length=3)) == [0, 1, 2, 3, 4]


def test_forbid_keeps_windows_inside_one_segment():
    buf, _ = one_env(EPISODES)
    spec = SamplingSpec(window_length=3, boundary="forbid")
    assert buf.valid_starts(0, spec) == [0, 3, 4]  # (0,1,2), (3,4,5), (4,5,6)
    sample = buf.sample(64, spec, torch.Generator().manual_seed(3))
    assert set(sample.positions.tolist()) <= {0, 3, 4}
    steps = sample.data["step_type"]
    # no LAST before the final item and no FIRST after the first one
    assert not (steps[:, :-1] == L).any() and not (steps[:, 1:] == F).any()


def test_pad_masks_items_past_the_segment_or_the_newest_write():
    buf, model = one_env(EPISODES)
    spec = SamplingSpec(window_length=3, boundary="pad")
    assert buf.valid_starts(0, spec) == list(range(7))
    sample = buf.sample(200, spec, torch.Generator().manual_seed(4))
    by_start = {int(s): sample.mask[i].tolist() for i, s in enumerate(sample.positions)}
    assert set(by_start) == set(range(7))
    assert by_start[0] == [True, True, True]
    assert by_start[1] == [True, True, False]  # item 3 starts the next episode
    assert by_start[2] == [True, False, False]
    assert by_start[4] == [True, True, True]
    assert by_start[5] == [True, True, False]  # item 7 is not written yet
    assert by_start[6] == [True, False, False]
    check_sample(model, spec, sample)


@pytest.mark.parametrize(
    ("steps", "masks"),
    [
        ([M, L, M, M], {0: [True, True, False], 1: [True, False, False], 2: [True, True, False]}),
        ([M, M, F, M], {0: [True, True, False], 1: [True, False, False], 2: [True, True, False]}),
    ],
    ids=["last-alone", "first-alone"],
)
def test_pad_cuts_at_a_lone_last_or_a_lone_first(steps, masks):
    """A LAST followed by MID, or a FIRST after MID, each end the start's segment."""
    buf, model = one_env(steps)
    spec = SamplingSpec(window_length=3, boundary="pad")
    sample = buf.sample(100, spec, torch.Generator().manual_seed(8))
    by_start = {int(s): sample.mask[i].tolist() for i, s in enumerate(sample.positions)}
    assert set(by_start) == {0, 1, 2, 3}
    assert {k: by_start[k] for k in masks} == masks
    check_sample(model, spec, sample)


def test_boundaries_come_from_step_types_only():
    """Clause replay.episode-segments: FIRST alone or LAST alone marks a boundary; the
    observation plays no part."""
    # FIRST at 2 without a LAST before it; LAST at 3 followed by MID.
    buf, _ = one_env([M, M, F, L, M, M])
    spec = SamplingSpec(window_length=2, boundary="forbid")
    assert buf.valid_starts(0, spec) == [0, 2, 4]  # segments [0,1], [2,3], [4,5]
    # Observations that change every item (as if each were its own episode) with MID step
    # types give one segment.
    buf2 = ReplayBuffer(1, 8, FIELDS)
    for t in range(4):
        buf2.add_row(
            {
                "step_type": torch.tensor([M]),
                "observation": torch.tensor([[0.0, float(t), 0.0]]),
                "reward": torch.zeros(1),
            }
        )
    assert buf2.valid_starts(0, SamplingSpec(window_length=4, boundary="forbid")) == [0]


# -- period grids ----------------------------------------------------------------------------
def test_period_grid_oldest_anchor_moves_with_eviction():
    """Flashbax 0.1.3 uniform trajectory buffer: L=8, S=3, p=2; after 11 adds the windows are
    (3,4,5),(5,6,7),(7,8,9); after a 12th, (4,5,6),(6,7,8),(8,9,10)."""
    buf, _ = one_env([M] * 11, capacity=8)
    spec = SamplingSpec(window_length=3, period=2, anchor="oldest")
    generator = torch.Generator().manual_seed(9)
    assert buf.valid_starts(0, spec) == [3, 5, 7]
    assert set(buf.sample(100, spec, generator).positions.tolist()) == {3, 5, 7}
    write_row(buf, Model(1, 8), [M])
    assert buf.valid_starts(0, spec) == [4, 6, 8]
    assert set(buf.sample(100, spec, generator).positions.tolist()) == {4, 6, 8}


def test_period_grid_absolute_anchor_stays_put():
    """Absolute grid (Flashbax 0.1.3 prioritised buffer): stored [3, 10] -> even starts s with
    s + 2 <= 10 -> 4, 6, 8; stored [4, 11] -> s <= 9 -> 4, 6, 8 again."""
    buf, _ = one_env([M] * 11, capacity=8)
    spec = SamplingSpec(window_length=3, period=2)
    generator = torch.Generator().manual_seed(10)
    assert buf.valid_starts(0, spec) == [4, 6, 8]
    assert set(buf.sample(100, spec, generator).positions.tolist()) == {4, 6, 8}
    write_row(buf, Model(1, 8), [M])
    assert buf.valid_starts(0, spec) == [4, 6, 8]
    assert set(buf.sample(100, spec, generator).positions.tolist()) == {4, 6, 8}


def test_period_grid_leaves_the_tail_unsampled():
    """Flashbax 0.1.3: 2 envs x 10 steps, S=3, p=2, L=16 -> starts 0, 2, 4, 6 in each row."""
    buf, model = ReplayBuffer(2, 16, FIELDS), Model(2, 16)
    for _ in range(10):
        write_row(buf, model, [M, M])
    for anchor in ("absolute", "oldest"):
        spec = SamplingSpec(window_length=3, period=2, anchor=anchor)
        assert buf.valid_starts(0, spec) == buf.valid_starts(1, spec) == [0, 2, 4, 6]
        sample = buf.sample(300, spec, torch.Generator().manual_seed(5))
        assert set(sample.positions.tolist()) == {0, 2, 4, 6}


@pytest.mark.parametrize("boundary", ["cross", "forbid", "pad"])
@pytest.mark.parametrize("anchor", ["absolute", "oldest"])
@pytest.mark.parametrize("period", [1, 2, 3])
def test_period_grid_matches_brute_force(boundary, anchor, period):
    buf, model = ReplayBuffer(2, 7, FIELDS), Model(2, 7)
    pattern = [F, M, M, L, F, L, M, F, M, M, M, L, F]
    for t in range(12):  # stored positions 5..11: 5 is on neither absolute grid
        write_row(buf, model, [pattern[t], pattern[(t + 5) % len(pattern)]])
    spec = SamplingSpec(window_length=2, boundary=boundary, period=period, anchor=anchor)
    for e in range(2):
        assert buf.valid_starts(e, spec) == model.starts(e, spec)
    expected = {(e, s) for e in range(2) for s in model.starts(e, spec)}
    sample = buf.sample(400, spec, torch.Generator().manual_seed(6))
    got = set(zip(sample.env_ids.tolist(), sample.positions.tolist(), strict=True))
    assert got == expected  # 400 draws cover every one of at most 12 windows (p >= 1/12 each)


# -- distributions ---------------------------------------------------------------------------
def uneven_buffer() -> tuple[ReplayBuffer, Model]:
    """env 0: episodes of 2 and 5 items, env 1: one in-progress episode of 3 items."""
    buf, model = ReplayBuffer(2, 16, FIELDS), Model(2, 16)
    write_items(buf, model, [(0, F), (0, L), (0, F), (0, M), (0, M), (0, M), (0, L)])
    write_items(buf, model, [(1, F), (1, M), (1, M)])
    return buf, model


def test_exact_probabilities_by_hand():
    """T=2, forbid. Valid windows: env 0 segment [0,1]: start 0; segment [2,6]: starts 2..5;
    env 1 segment [0,2]: starts 0, 1. Seven windows in all."""
    buf, _ = uneven_buffer()
    base = SamplingSpec(window_length=2, boundary="forbid")
    uw = buf.window_probabilities(base)
    assert uw == {
        w: Fraction(1, 7) for w in [(0, 0), (0, 2), (0, 3), (0, 4), (0, 5), (1, 0), (1, 1)]
    }
    eb = buf.window_probabilities(SamplingSpec(2, "forbid", distribution="env-balanced"))
    # env 0 has 5 windows, env 1 has 2: each env gets 1/2
    assert eb[(0, 0)] == Fraction(1, 10) and eb[(0, 4)] == Fraction(1, 10)
    assert eb[(1, 0)] == eb[(1, 1)] == Fraction(1, 4)
    ue = buf.window_probabilities(SamplingSpec(2, "forbid", distribution="uniform-episodes"))
    # three segments, each 1/3, split among 1, 4 and 2 starts
    assert ue[(0, 0)] == Fraction(1, 3)
    assert ue[(0, 2)] == ue[(0, 5)] == Fraction(1, 12)
    assert ue[(1, 1)] == Fraction(1, 6)


@pytest.mark.parametrize(
    "spec",
    [
        SamplingSpec(window_length=2),
        SamplingSpec(window_length=2, boundary="forbid"),
        SamplingSpec(window_length=2, boundary="pad", period=2),
        SamplingSpec(window_length=2, distribution="env-balanced"),
        SamplingSpec(window_length=2, boundary="forbid", distribution="env-balanced"),
        SamplingSpec(window_length=2, distribution="uniform-episodes"),
        SamplingSpec(window_length=3, boundary="forbid", distribution="uniform-episodes"),
    ],
    ids=lambda s: f"{s.boundary}-{s.distribution}-T{s.window_length}-p{s.period}",
)
def test_sampling_frequencies_match_counted_probabilities(spec):
    """Clause replay.distribution, statistically: 30000 draws with a fixed seed; every window's
    frequency lies within 5 standard errors sqrt(p(1-p)/n) of its counted probability."""
    buf, model = uneven_buffer()
    expected = model.probabilities(spec)
    n = 30_000
    sample = buf.sample(n, spec, torch.Generator().manual_seed(2024))
    counts: dict[tuple[int, int], int] = {}
    for e, s in zip(sample.env_ids.tolist(), sample.positions.tolist(), strict=True):
        counts[(e, s)] = counts.get((e, s), 0) + 1
    assert set(counts) <= set(expected)
    for w, p in expected.items():
        se = math.sqrt(float(p) * (1 - float(p)) / n)
        assert abs(counts.get(w, 0) / n - float(p)) <= 5 * se, (w, counts.get(w, 0), p)


def test_env_balanced_assigns_envs_round_robin():
    """ALF ReplayBuffer._uniform_sample: arange(N) tiled batch // N times, then batch % N
    distinct random envs."""
    buf, model = ReplayBuffer(3, 8, FIELDS), Model(3, 8)
    for _ in range(4):
        write_row(buf, model, [M, M, M])
    spec = SamplingSpec(distribution="env-balanced")
    generator = torch.Generator().manual_seed(7)
    for batch in (3, 5, 7, 8):
        envs = buf.sample(batch, spec, generator).env_ids.tolist()
        assert envs[: batch // 3 * 3] == [0, 1, 2] * (batch // 3)
        extra = envs[batch // 3 * 3 :]
        assert len(extra) == batch % 3 and len(set(extra)) == len(extra)


def test_env_balanced_needs_every_env():
    buf, model = ReplayBuffer(2, 8, FIELDS), Model(2, 8)
    write_items(buf, model, [(0, F), (0, M)])
    spec = SamplingSpec(distribution="env-balanced")
    with pytest.raises(NoValidWindow, match="every env"):
        buf.sample(4, spec, torch.Generator())


def test_sampling_is_deterministic_given_the_generator():
    buf, _ = uneven_buffer()
    for spec in (SamplingSpec(2), SamplingSpec(2, "forbid", distribution="uniform-episodes")):
        a = buf.sample(50, spec, torch.Generator().manual_seed(11))
        b = buf.sample(50, spec, torch.Generator().manual_seed(11))
        assert torch.equal(a.env_ids, b.env_ids) and torch.equal(a.positions, b.positions)
        assert all(torch.equal(a.data[k], b.data[k]) for k in a.data)
        c = buf.sample(50, spec, torch.Generator().manual_seed(12))
        assert not torch.equal(a.positions * 2 + a.env_ids, c.positions * 2 + c.env_ids)


def test_cached_validity_follows_writes():
    """Forbid's cached table must be rebuilt after a write and after clear."""
    buf, model = one_env([F, M, M])
    spec = SamplingSpec(window_length=2, boundary="forbid")
    assert buf.num_valid_windows(spec) == 2
    write_row(buf, model, [F])  # new segment: no new window
    assert buf.num_valid_windows(spec) == 2
    write_row(buf, model, [M])  # (3, 4)
    assert buf.num_valid_windows(spec) == 3
    buf.clear(keep_last=2)
    assert buf.num_valid_windows(spec) == 1
    assert buf.num_valid_windows(SamplingSpec(window_length=2)) == 1


# -- whole buffer: chunks and clear ----------------------------------------------------------
def test_chunks_cut_oldest_first_and_drop_the_newest_remainder():
    """Clause replay.whole-buffer: env 0 holds positions 2..9 (capacity 8, 10 writes), env 1
    holds 0..4. Chunks of 3: env 0 -> starts 2, 5 (8, 9 dropped); env 1 -> start 0 (3, 4
    dropped)."""
    buf, model = ReplayBuffer(2, 8, FIELDS), Model(2, 8)
    write_items(buf, model, [(0, M)] * 10 + [(1, M)] * 5)
    sample = buf.chunks(3)
    assert sample.env_ids.tolist() == [0, 0, 1]
    assert sample.positions.tolist() == [2, 5, 0]
    assert sample.mask.all()
    assert sample.data["observation"][:, :, 1].tolist() == [[2, 3, 4], [5, 6, 7], [0, 1, 2]]
    assert sample.data["reward"][:, 0].tolist() == [2.0, 5.0, 1000.0]
    with pytest.raises(NoValidWindow):
        buf.chunks(9)


def test_clear_keeps_the_newest_items_and_positions_keep_counting():
    buf, model = ReplayBuffer(2, 8, FIELDS), Model(2, 8)
    for _ in range(5):
        write_row(buf, model, [M, M])
    buf.clear(keep_last=2)
    model.clear(2)
    assert buf.sizes.tolist() == [2, 2] and buf.total_size == 4 and buf.total_stored == 10
    assert buf.chunks(1).positions.tolist() == [3, 4, 3, 4]
    buf.clear()
    assert buf.total_size == 0
    with pytest.raises(NoValidWindow):
        buf.sample(1, SamplingSpec(), torch.Generator())
    write_row(buf, model, [F, F])  # the next item of each env is position 5
    assert buf.chunks(1).positions.tolist() == [5, 5]
    assert buf.chunks(1).data["reward"][:, 0].tolist() == [5.0, 1005.0]


# -- errors ----------------------------------------------------------------------------------
def good_row(n: int = 2) -> dict[str, torch.Tensor]:
    return {
        "step_type": torch.zeros(n, dtype=torch.int64),
        "observation": torch.zeros(n, 3),
        "reward": torch.zeros(n),
    }


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("reward"),
        lambda d: d.update(extra=torch.zeros(2)),
        lambda d: d.update(observation=torch.zeros(2, 4)),
        lambda d: d.update(reward=torch.zeros(3)),
        lambda d: d.update(reward=torch.zeros(2, dtype=torch.float64)),
    ],
    ids=["missing", "extra", "item-shape", "rows", "dtype"],
)
def test_bad_rows_raise_config_error(change):
    buf = ReplayBuffer(2, 4, FIELDS)
    row = good_row()
    change(row)
    with pytest.raises(ConfigError, match="data"):
        buf.add_row(row)
    with pytest.raises(ConfigError, match="data"):
        buf.add_items(torch.tensor([0, 1]), row)
    assert buf.total_stored == 0


def test_bad_construction_and_arguments_raise_config_error():
    with pytest.raises(ConfigError, match="step_type"):
        ReplayBuffer(2, 4, {"observation": ((3,), torch.float32)})
    with pytest.raises(ConfigError, match="step_type"):
        ReplayBuffer(2, 4, {"step_type": ((), torch.int32)})
    with pytest.raises(ConfigError, match="capacity"):
        ReplayBuffer(2, 0, FIELDS)
    with pytest.raises(ConfigError, match="num_envs"):
        ReplayBuffer(0, 4, FIELDS)
    with pytest.raises(ConfigError, match="fields"):
        ReplayBuffer(2, 4, {**FIELDS, "x": ((-1,), torch.float32)})
    buf = ReplayBuffer(2, 4, FIELDS)
    with pytest.raises(ConfigError, match="env_ids"):
        buf.add_items(torch.tensor([0, 2]), good_row())
    with pytest.raises(ConfigError, match="env_ids"):
        buf.add_items(torch.tensor([0.0, 1.0]), good_row())
    with pytest.raises(ConfigError, match="keep_last"):
        buf.clear(-1)
    with pytest.raises(ConfigError, match="length"):
        buf.chunks(0)
    buf.add_row(good_row())
    with pytest.raises(ConfigError, match="batch_size"):
        buf.sample(0, SamplingSpec(), torch.Generator())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"window_length": 0}, "window_length"),
        ({"period": 0}, "period"),
        ({"period": True}, "period"),
        ({"boundary": "skip"}, "boundary"),
        ({"anchor": "newest"}, "anchor"),
        ({"distribution": "priority"}, "distribution"),
    ],
)
def test_sampling_spec_validation(kwargs, field):
    with pytest.raises(ConfigError, match=f"^{field}: expected"):
        SamplingSpec(**kwargs)


def test_sampling_spec_round_trips_through_json():
    spec = SamplingSpec(3, "pad", 2, "oldest", "uniform-episodes")
    assert from_jsonable(SamplingSpec, json.loads(canonical_json(spec))) == spec
    assert to_jsonable(SamplingSpec())["boundary"] == "cross"


def test_no_valid_window_is_a_value_error_naming_the_sizes():
    buf, _ = one_env([F, M])
    with pytest.raises(ValueError, match=r"window_length=3.*sizes=\[2\]"):
        buf.sample(1, SamplingSpec(window_length=3), torch.Generator())
    assert issubclass(NoValidWindow, ValueError)


# -- bench smoke ----------------------------------------------------------------------------
def test_sampling_benchmark_runs(capsys):
    from benchmarks.bench_sampling import run

    rows = run(repeats=1, seconds=0.01)
    assert {(r["impl"], r["window_length"]) for r in rows} == set(
        itertools.product(["baseline", "refimpl", "refimpl after add_row"], [1, 8])
    )
    assert all(r["transitions_per_s"] > 0 for r in rows)  # type: ignore[operator]
    assert "x baseline" in capsys.readouterr().out


# -- add_rows: n vector steps at once ------------------------------------------------------------
@given(
    capacity=st.integers(1, 6),
    before=st.integers(0, 9),
    n=st.integers(1, 14),
    items_first=st.booleans(),
)
def test_add_rows_equals_repeated_add_row(
    capacity: int, before: int, n: int, items_first: bool
) -> None:
    """add_rows(data) stores exactly what n add_row calls store, also past the capacity and
    after add_items left the envs at different end positions."""
    fields = {"step_type": ((), torch.int64), "observation": ((3,), torch.float32)}
    a, b = ReplayBuffer(2, capacity, fields), ReplayBuffer(2, capacity, fields)
    counter = iter(range(10_000))

    def row() -> dict[str, torch.Tensor]:
        k = next(counter)
        return {
            "step_type": torch.tensor([k % 3, (k + 1) % 3]),
            "observation": torch.full((2, 3), float(k)),
        }

    for buf in (a, b):
        if items_first:
            buf.add_items(
                torch.tensor([1]),
                {"step_type": torch.tensor([1]), "observation": torch.zeros(1, 3)},
            )
    counter = iter(range(10_000))
    rows = [row() for _ in range(before + n)]
    for r in rows[:before]:
        a.add_row(r)
        b.add_row(r)
    for r in rows[before:]:
        a.add_row(r)
    b.add_rows({k: torch.stack([r[k] for r in rows[before:]]) for k in fields})
    assert torch.equal(a.sizes, b.sizes) and torch.equal(a.end_positions, b.end_positions)
    for env in range(2):
        assert a.valid_starts(env, SamplingSpec()) == b.valid_starts(env, SamplingSpec())
    chunks_a, chunks_b = a.chunks(1), b.chunks(1)
    assert torch.equal(chunks_a.data["observation"], chunks_b.data["observation"])


def test_clear_keeps_a_count_per_env():
    # replay.clear: what a call left untrained differs per env (its size mod T).
    buf, model = ReplayBuffer(2, 8, FIELDS), Model(2, 8)
    write_items(buf, model, [(0, M)] * 5 + [(1, M)] * 3)
    buf.clear(keep_last=[2, 0])
    assert buf.sizes.tolist() == [2, 0] and buf.total_stored == 8
    assert buf.chunks(1).positions.tolist() == [3, 4]
    for bad in ([1], [1, -1], [1, 0.5]):
        with pytest.raises(ConfigError, match="keep_last"):
            buf.clear(keep_last=bad)
