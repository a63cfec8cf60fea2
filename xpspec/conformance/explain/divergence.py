"""Where a trace first parts from its reference, event by event.

The first event at which the two sequences differ is the divergence. What happened there is
read from how the sequences line up again after it: the trace *lacks* ``n`` events of the
reference when skipping ``n`` reference events makes them agree again, it has ``n`` *extra*
events when skipping ``n`` of its own does, and otherwise one event *differs* (fields, or
kind). The envs of the divergence are those whose items or windows differ; a trainer event
(a train call, say) concerns no env.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from xpspec.conformance.explain.describe import differing_fields
from xpspec.protocol.trace import Event

__all__ = ["LOOKAHEAD", "Divergence", "first_divergence"]

LOOKAHEAD = 64
"""How many events on either side are tried when lining the sequences up again."""
_CONFIRM = 3
"""Events that must agree after a skip for the sequences to count as lined up again."""

Shape = Literal["differs", "missing", "extra"]


@dataclass(frozen=True)
class Divergence:
    """The first place where the trace under test departs from the reference."""

    index: int
    """Index of the first differing event, in both sequences (they agree before it)."""
    shape: Shape
    """``differs``: one event is not the reference's; ``missing``: the trace lacks ``span``
    events of the reference here; ``extra``: it has ``span`` events the reference has not."""
    span: int
    expected: Event | None
    """The reference's event at ``index`` (``None`` past its end)."""
    actual: Event | None
    """The trace's event at ``index`` (``None`` past its end)."""
    envs: tuple[int, ...]
    """The envs whose items or windows differ (empty for a trainer event)."""
    fields: tuple[str, ...]
    """The fields in which ``expected`` and ``actual`` differ (``kind`` if their kinds do)."""


def _agree(a: Sequence[Event], i: int, b: Sequence[Event], j: int) -> bool:
    """Whether ``a`` from ``i`` and ``b`` from ``j`` agree for a few events (or to their
    common end, which both must reach together)."""
    n = min(_CONFIRM, len(a) - i, len(b) - j)
    if n < _CONFIRM and len(a) - i != len(b) - j:
        return False
    return all(a[i + k] == b[j + k] for k in range(n))


def _shape(actual: Sequence[Event], expected: Sequence[Event], i: int) -> tuple[Shape, int]:
    if i >= len(actual):
        return "missing", len(expected) - i
    if i >= len(expected):
        return "extra", len(actual) - i
    if actual[i].kind == expected[i].kind and _agree(actual, i + 1, expected, i + 1):
        return "differs", 1
    for n in range(1, LOOKAHEAD + 1):
        if i + n <= len(expected) and _agree(actual, i, expected, i + n):
            return "missing", n
        if i + n <= len(actual) and _agree(actual, i + n, expected, i):
            return "extra", n
    return "differs", 1


def _rows(event: Any) -> list[tuple[int | None, Any]]:
    """The event's per-env rows: (env, values) per position of a columnar event, per window
    of an update or a draw, or the whole event of one env."""
    if event is None:
        return []
    if hasattr(event, "windows"):
        masks = getattr(event, "loss_mask", ())
        return [
            (
                next((item[0] for item in window if item is not None), None),
                (window, masks[w] if w < len(masks) else None),
            )
            for w, window in enumerate(event.windows)
        ]
    env = getattr(event, "env", None)
    if isinstance(env, int):
        return [(env, event)]
    if not isinstance(env, tuple):
        return []
    columns = [
        getattr(event, f.name)
        for f in fields(event)
        if isinstance(getattr(event, f.name), tuple) and len(getattr(event, f.name)) == len(env)
    ]
    return [(e, tuple(c[i] for c in columns)) for i, e in enumerate(env)]


def _envs(events: Sequence[Any]) -> tuple[int, ...]:
    return tuple(sorted({e for event in events for e, _ in _rows(event) if e is not None}))


def _differing_envs(expected: Any, actual: Any) -> tuple[int, ...]:
    """The envs of the rows in which two events differ (all of their envs when only a
    scalar field does)."""
    mine, theirs = _rows(actual), _rows(expected)
    envs: set[int] = set()
    for k in range(max(len(mine), len(theirs))):
        pair = [side[k] if k < len(side) else None for side in (mine, theirs)]
        if pair[0] != pair[1]:
            envs.update(row[0] for row in pair if row is not None and row[0] is not None)
    return tuple(sorted(envs)) if envs else _envs([expected, actual])


def first_divergence(actual: Sequence[Event], expected: Sequence[Event]) -> Divergence | None:
    """The first place where ``actual`` departs from ``expected``; ``None`` if they are equal."""
    i = next(
        (k for k, (a, b) in enumerate(zip(actual, expected)) if a != b),
        min(len(actual), len(expected)),
    )
    if i == len(actual) == len(expected):
        return None
    shape, span = _shape(actual, expected, i)
    mine = actual[i] if i < len(actual) else None
    theirs = expected[i] if i < len(expected) else None
    if shape == "missing":
        envs = _envs(expected[i : i + span])
    elif shape == "extra":
        envs = _envs(actual[i : i + span])
    else:
        envs = _differing_envs(theirs, mine)
    return Divergence(i, shape, span, theirs, mine, envs, differing_fields(theirs, mine))
