"""Step types of a time step (clause ``timestep.step-types``).

An episode of length ``L`` (``L`` transitions) is ``L + 1`` time steps: ``FIRST`` at
``t = 0``, ``MID`` for ``0 < t < L`` and ``LAST`` at ``t = L``.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["StepType"]


class StepType(IntEnum):
    FIRST = 0
    MID = 1
    LAST = 2
