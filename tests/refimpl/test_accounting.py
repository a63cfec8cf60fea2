"""Unroll and train accounting (xpspec/refimpl/accounting.py)."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from xpspec.refimpl.accounting import (
    AlfFloorTrainSchedule,
    ExactSchedule,
    FloatCarrySchedule,
    SyncedTrainSchedule,
    exact_unroll_steps,
)

rationals = st.builds(Fraction, st.integers(1, 12), st.integers(1, 7))


@given(rationals, st.integers(1, 200))
def test_exact_schedule_never_drifts(u: Fraction, k: int) -> None:
    # After k iterations exactly floor(k*u) steps per env have been unrolled.
    assert sum(exact_unroll_steps(i, u) for i in range(1, k + 1)) == math.floor(k * u)


def test_quarter_unrolls_every_fourth_iteration() -> None:
    s = ExactSchedule(Fraction(1, 4))
    assert [s.next_length() for _ in range(8)] == [0, 0, 0, 1, 0, 0, 0, 1]


def test_alf_float_carry_drifts_at_one_tenth() -> None:
    # 0.1 added ten times in doubles is 0.9999999999999999: the first unroll is on iteration 11.
    s = FloatCarrySchedule(0.1)
    lengths = [s.next_length() for _ in range(21)]
    assert [i + 1 for i, n in enumerate(lengths) if n] == [11, 21]
    exact = ExactSchedule(Fraction(1, 10))
    assert [i + 1 for i in range(21) if exact.next_length()] == [10, 20]


@given(rationals, st.integers(1, 5), st.integers(1, 60))
def test_synced_identity_is_one_call_per_iteration(u: Fraction, b: int, k: int) -> None:
    s = SyncedTrainSchedule(u, b)
    for i in range(1, k + 1):
        n = exact_unroll_steps(i, u) * b
        assert s.calls_for_iteration(n, n) == 1


@given(rationals, st.integers(1, 4), st.lists(st.floats(0, 1), min_size=1, max_size=60))
def test_synced_calls_track_stored_items(u: Fraction, b: int, keep: list[float]) -> None:
    # Store a fraction of each iteration's items; calls stay within (-1, 1/u) of S/(uB).
    s = SyncedTrainSchedule(u, b)
    calls = stored = 0
    for i, frac in enumerate(keep, 1):
        n = exact_unroll_steps(i, u) * b
        kept = math.floor(n * frac)
        calls += s.calls_for_iteration(n, kept)
        stored += kept
        gap = calls - Fraction(stored) / (u * b)
        assert -1 < gap < max(1, 1 / u)


def test_excluding_one_iteration_of_data_removes_one_call() -> None:
    # u = 1, B = 2: iteration 2 stores nothing, so after 4 iterations E = 4 - 2/2 = 3.
    s = SyncedTrainSchedule(Fraction(1), 2)
    calls = [s.calls_for_iteration(2, stored) for stored in (2, 0, 2, 2)]
    assert calls == [1, 0, 1, 1]


def test_release_pays_back_held_calls() -> None:
    # u = 1, B = 1: three items held, then released together with the fourth.
    s = SyncedTrainSchedule(Fraction(1), 1)
    assert [s.calls_for_iteration(1, st) for st in (0, 0, 0, 4)] == [0, 0, 0, 4]


def test_alf_floor_loses_partial_releases_with_several_envs() -> None:
    # B = 4, n = 1: one env releases 6 items -> floor(6/4) = 1 call, half an iteration lost.
    alf = AlfFloorTrainSchedule()
    assert alf.calls_for_iteration(4, 6) == 1
    assert alf.calls_for_iteration(0, 0) == 1


@given(
    st.one_of(st.just(Fraction(0)), rationals),
    st.integers(1, 6),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 60)), min_size=1, max_size=40),
)
def test_synced_integer_floor_is_the_rational_rule(
    u: Fraction, b: int, iterations: list[tuple[int, int]]
) -> None:
    # The schedule's integer arithmetic against the module docstring's rule in fractions:
    # C_k = max(C_{k-1}, floor(k - (U_k - S_k) / unit)), unit = u*B (B when u = 0); stored
    # counts may exceed unrolled ones (held items released), so E_k may exceed k.
    s = SyncedTrainSchedule(u, b)
    unit = u * b if u else Fraction(b)
    calls = unrolled = stored = 0
    for k, (n, kept) in enumerate(iterations, 1):
        unrolled, stored = unrolled + n, stored + kept
        owed = max(calls, math.floor(k - Fraction(unrolled - stored) / unit))
        assert s.calls_for_iteration(n, kept) == owed - calls
        calls = owed


@given(st.one_of(st.just(Fraction(0)), rationals), st.integers(1, 500))
def test_exact_unroll_steps_is_the_rational_rule(u: Fraction, k: int) -> None:
    assert exact_unroll_steps(k, u) == math.floor(k * u) - math.floor((k - 1) * u)
