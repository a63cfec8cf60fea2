"""Unroll and train-call accounting, in exact rational arithmetic (done in integers).

Clauses: ``unroll.fractional-schedule``, variant ``alf-float-carry`` of ``unroll.fractional-schedule``,
``train.synced-schedule``, ``train.identity-reduces-to-plain``, ``train.excluded-earn-nothing``,
``train.utd-converges``, ``train.bounded-lag``, variant ``alf-pr1768-floor`` of ``train.synced-schedule``.

Unroll schedule. With ``u = unroll_length`` (an exact rational), iteration ``k`` (1-based)
unrolls ``n_k = floor(k*u) - floor((k-1)*u)`` steps per env, so after ``k`` iterations exactly
``floor(k*u)`` steps per env have been unrolled: no drift, ever. ALF accumulates ``u`` in an
IEEE double instead; :class:`FloatCarrySchedule` reproduces that (``0.1`` first unrolls on
iteration 11, not 10).

Synced train schedule. The plain trainer makes one train call per iteration and unrolls
``u*B`` steps per iteration on average. Under preprocessing, training should follow the data
actually stored, not the data unrolled. With ``U_k = B*floor(k*u)`` unrolled and ``S_k``
stored items after iteration ``k``, the effective iteration count is

    E_k = k - (U_k - S_k) / (u*B)          (drain mode, u = 0:  E_k = k - (U_k - S_k) / B)

and the cumulative number of train calls is ``C_k = max(C_{k-1}, floor(E_k))``. Identity
preprocessing (``S_k = U_k``) gives ``E_k = k``: the plain schedule exactly. Excluded items
never raise ``E``; held items raise it when they are released; calls per stored item tend to
``1/(u*B)``; and the lag behind the plain schedule is the pending count over ``u*B``.

Both rules are floors of rationals whose denominator is known, so they are computed in
integers: with ``u = p/q`` in lowest terms, ``floor(k*u) = (k*p) // q`` and, with the unit
``u*B = p*B/q``, ``floor(E_k) = (k*p*B - (U_k - S_k)*q) // (p*B)`` (Python's ``//`` is the
floor, negative numerators included). The same values as :class:`~fractions.Fraction`
arithmetic, without building a fraction per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "AlfFloorTrainSchedule",
    "ExactSchedule",
    "FloatCarrySchedule",
    "PlainTrainSchedule",
    "SyncedTrainSchedule",
    "exact_unroll_steps",
]


def exact_unroll_steps(k: int, unroll_length: Fraction) -> int:
    """Steps per env unrolled on iteration ``k`` (1-based) under the exact schedule:
    ``floor(k*u) - floor((k-1)*u)``, in integers."""
    p, q = unroll_length.numerator, unroll_length.denominator
    return (k * p) // q - ((k - 1) * p) // q


@dataclass
class ExactSchedule:
    """The spec's schedule: ``n_k = floor(k*u) - floor((k-1)*u)`` (``unroll.fractional-schedule``)."""

    unroll_length: Fraction
    iteration: int = 0

    def next_length(self) -> int:
        self.iteration += 1
        return exact_unroll_steps(self.iteration, self.unroll_length)


@dataclass
class FloatCarrySchedule:
    """ALF's carry: ``x = r + u; n = int(x); r = x - n`` in IEEE doubles (variant ``alf-float-carry`` of ``unroll.fractional-schedule``)."""

    unroll_length: float
    remainder: float = 0.0

    def next_length(self) -> int:
        total = self.remainder + self.unroll_length
        n = int(total)
        self.remainder = total - n
        return n


@dataclass
class SyncedTrainSchedule:
    """Train calls owed after each iteration under the synced rule (module docstring)."""

    unroll_length: Fraction
    num_envs: int
    calls: int = 0
    iteration: int = 0
    unrolled: int = 0
    stored: int = 0

    def calls_for_iteration(self, unrolled: int, stored: int) -> int:
        """Record one iteration that unrolled and stored the given item counts; return the
        number of train calls it makes."""
        self.iteration += 1
        self.unrolled += unrolled
        self.stored += stored
        # E_k = k - (U_k - S_k) / unit with unit = u*B = p*B/q (B when u = 0), so
        # floor(E_k) = floor((k*p*B - (U_k - S_k)*q) / (p*B)): an integer floor division.
        u = self.unroll_length
        p, q = (u.numerator, u.denominator) if u else (1, 1)
        unit = p * self.num_envs
        floor_effective = (self.iteration * unit - (self.unrolled - self.stored) * q) // unit
        owed = max(self.calls, floor_effective)
        new_calls, self.calls = owed - self.calls, owed
        return new_calls


@dataclass
class PlainTrainSchedule:
    """One train call per iteration whatever was stored (ALF without PR 1768)."""

    def calls_for_iteration(self, unrolled: int, stored: int) -> int:
        return 1


@dataclass
class AlfFloorTrainSchedule:
    """ALF PR 1768's proposal (variant ``alf-pr1768-floor`` of ``train.synced-schedule``): on an iteration that unrolled
    ``n`` steps per env, ``floor(stored / (B*n))`` calls with no carry; an iteration that
    unrolled nothing makes one call. Fractions of an iteration stored by one env are lost."""

    def calls_for_iteration(self, unrolled: int, stored: int) -> int:
        if unrolled == 0:
            return 1
        return stored // unrolled
