"""Where an adapter's exception was raised, for the one-line messages of error records.

An error record that says only ``KeyError: 10`` leaves its reader to guess which lookup
failed. Every message the suite makes of an exception an adapter (or its framework) raised
ends with the innermost frames of its traceback — ``(at tiny.py:42 in _rows, called from
tiny.py:30 in run_learner)`` — whether the adapter ran in a worker or inline. Frames of the
suite's own harness and engine (this package) and of the import machinery say nothing about
the adapter and are left out. Standard library only: the worker imports it before the
adapter.
"""

from __future__ import annotations

import importlib
import os
import traceback
from pathlib import Path

__all__ = ["FRAMES", "where"]

FRAMES = 3
"""How many frames an error message keeps, innermost first."""

_OWN = tuple(
    str(Path(path).resolve().parent) + os.sep for path in (__file__, importlib.__file__) if path
)
"""The suite's package and the import machinery's: their frames are not the adapter's."""


def _own(filename: str) -> bool:
    """A frame of the suite itself, or of Python's import machinery."""
    if filename.startswith("<frozen "):
        return True
    try:
        return str(Path(filename).resolve()).startswith(_OWN)
    except (OSError, ValueError):
        return False


def where(exc: BaseException, limit: int = FRAMES) -> str:
    """``" (at FILE:LINE in FUNCTION, called from FILE:LINE in FUNCTION, …)"``: the innermost
    ``limit`` frames of ``exc``'s traceback that are not the suite's own, innermost first,
    each file by its base name; ``""`` when there is none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _own(f.filename)]
    if not frames or limit < 1:
        return ""
    named = [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames]
    inner = list(reversed(named[-limit:]))
    return " (at " + ", called from ".join(inner) + ")"
