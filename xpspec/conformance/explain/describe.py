"""Words for trace events: one-line summaries, tooltips, and the fields two events differ in.

Everything a trace carries is untrusted (an adapter wrote it): :func:`clean` turns every
control character of such a string into a visible escape, so that no newline, carriage return
or terminal escape sequence from a trace can forge a line of the explanation or drive the
terminal. The HTML page escapes markup on top of this (:mod:`.html_page`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event

__all__ = ["TOOLTIP_ROWS", "clean", "describe", "differing_fields", "item_text", "tooltip"]

TOOLTIP_ROWS = 12
"""At most this many item or window rows in one tooltip (the rest are counted)."""

_ITEM_COLUMNS = ("env", "episode", "t")


def clean(text: object) -> str:
    """``text`` as a string with every control character (newlines included) escaped:
    ``\\n``, ``\\x1b``, ``\\u2028`` … stay visible and inert."""
    value = str(text)
    if value.isprintable():
        return value
    out = []
    for char in value:
        if char.isprintable() and unicodedata.category(char)[0] != "C":
            out.append(char)
        else:
            out.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def item_text(item: Sequence[int] | None) -> str:
    """``(env, episode, t)``, or ``pad`` for a window's padding."""
    return "pad" if item is None else "(" + ", ".join(str(v) for v in item) + ")"


def _step(value: int) -> str:
    try:
        return StepType(value).name
    except ValueError:
        return str(value)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else clean(value)


def _is_columnar(event: Event) -> bool:
    return all(isinstance(getattr(event, c, None), tuple) for c in _ITEM_COLUMNS)


def _row(event: Event, i: int) -> str:
    """Position ``i`` of a columnar event: its item and the other columns' values."""
    item = tuple(getattr(event, c)[i] for c in _ITEM_COLUMNS)
    parts = [item_text(item)]
    for f in fields(event):
        if f.name in (*_ITEM_COLUMNS, "kind", "iteration") or not isinstance(
            getattr(event, f.name), tuple
        ):
            continue
        column = getattr(event, f.name)
        if i >= len(column):
            parts.append(f"{f.name} ?")
            continue
        text = _step(column[i]) if f.name == "step_type" else _number(column[i])
        parts.append(f"{f.name} {text}")
    return " ".join(parts)


def _window(event: Any, w: int) -> str:
    window = event.windows[w]
    text = " ".join(item_text(item) for item in window)
    mask = getattr(event, "loss_mask", None)
    if mask is not None and w < len(mask):
        text += " mask " + "".join(str(m) for m in mask[w])
    return f"window {w}: {text}"


def _scalars(event: Event) -> str:
    """The event's non-column fields, ``name value`` each."""
    parts = []
    for f in fields(event):
        value = getattr(event, f.name)
        if f.name == "kind" or isinstance(value, tuple):
            continue
        parts.append(f"{f.name} {_number(value)}")
    return ", ".join(parts)


def describe(event: Event | None, rows: Sequence[int] | None = None) -> str:
    """One line for ``event`` (``rows``: only these positions of a columnar event)."""
    if event is None:
        return "(end of trace)"
    kind = event.kind
    e: Any = event
    if kind == "iteration":
        return (
            f"iteration {e.iteration} starts (counter {e.counter}, {e.unroll_steps} vector steps)"
        )
    if kind == "iteration_end":
        return (
            f"iteration {e.iteration} ends (counter {e.counter}, {e.env_steps} env steps, "
            f"{e.stored_total} stored, {e.pending} pending)"
        )
    if kind == "train_call":
        return (
            f"train_call {e.call}: {clean(e.status)} (counter {e.counter}, {e.stored_total} stored)"
        )
    if kind == "update":
        return f"update {e.index} of call {e.call} (counter {e.counter}, {len(e.windows)} windows)"
    if kind == "hook":
        return f"hook {clean(e.name)}"
    if kind == "sampled":
        return f"sampled draw {e.draw} ({len(e.windows)} windows)"
    if kind == "run_end":
        return (
            f"run_end after {e.iterations} iterations, {e.env_steps} env steps, "
            f"{len(e.env)} pending ({clean(e.pending_policy)})"
        )
    if _is_columnar(event):
        positions = range(len(e.env)) if rows is None else rows
        items = ", ".join(
            item_text((e.env[i], e.episode[i], e.t[i]))
            + (f" {_step(e.step_type[i])}" if hasattr(e, "step_type") else "")
            for i in positions
        )
        reason = f" ({clean(e.reason)})" if kind == "exclude" else ""
        return f"{kind} of {items}{reason}" if items else f"{kind} of no items{reason}"
    return f"{clean(kind)} ({_scalars(event)})"


def tooltip(event: Event, index: int, rows: Sequence[int] = (), windows: bool = False) -> str:
    """The lines of a mark's tooltip: the event's kind, number and scalar fields, then the
    rows of this mark (positions of a columnar event, or window indices)."""
    lines = [f"{clean(event.kind)} #{index}"]
    scalars = _scalars(event)
    if scalars:
        lines.append(scalars)
    e: Any = event
    if windows:
        shown = [_window(e, w) for w in rows[:TOOLTIP_ROWS]]
    elif _is_columnar(event):
        shown = [_row(event, i) for i in rows[:TOOLTIP_ROWS]]
    else:
        tuples = [f.name for f in fields(event) if isinstance(getattr(event, f.name), tuple)]
        shown = [f"{name}: {clean(getattr(event, name))}" for name in tuples]
    lines.extend(shown)
    if len(rows) > TOOLTIP_ROWS:
        lines.append(f"… {len(rows) - TOOLTIP_ROWS} more")
    return "\n".join(lines)


def differing_fields(expected: Event | None, actual: Event | None) -> tuple[str, ...]:
    """The fields in which two events of one kind differ (``("kind",)`` for different kinds,
    ``()`` when one side is missing or they are equal)."""
    if expected is None or actual is None or expected == actual:
        return ()
    if expected.kind != actual.kind:
        return ("kind",)
    return tuple(
        f.name for f in fields(expected) if getattr(expected, f.name) != getattr(actual, f.name)
    )
