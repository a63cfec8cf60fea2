"""A trace laid out as a timeline: one lane per env and one for the trainer, a column per
iteration (or draw), and one slot per event, in trace order.

Every event that shows as marks takes a slot of its own, shared by all lanes, so the marks
of one event line up across the envs and the order of events reads from left to right. An
event concerning items leaves one mark in the lane of each env it names (its positions of that
env as the mark's rows); a sampled or trained-on window leaves a ``window`` mark in the lane of
its env (the windows of one event and env together); train calls, updates, hooks and the run's
end mark the trainer lane. ``iteration`` and ``iteration_end`` events mark no lane: they open
and close a column and take no slot. Two traces that agree on their first ``n`` events have
the same slots for them, so their timelines can be read one above the other.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xpspec.protocol.trace import Event

__all__ = ["TRAINER", "Column", "Lane", "Mark", "Timeline", "build_timeline", "column_key"]

Lane = int | None
"""An env, or :data:`TRAINER`."""
TRAINER: Lane = None
"""The lane of the trainer (train calls, updates, hooks, the run's end)."""

_NO_SLOT = ("iteration", "iteration_end")
_TRAINER_KINDS = ("train_call", "update", "hook", "run_end", "update_plan")
_WINDOWS = ("update", "sampled")


@dataclass(frozen=True)
class Column:
    """A run of consecutive events of one iteration (or draw, or learner output)."""

    label: str
    """``iteration 3``, ``draw 1``, ``end``, or an event kind (learner outputs)."""
    first_event: int
    stop_event: int
    first_slot: int
    stop_slot: int

    @property
    def slots(self) -> int:
        return self.stop_slot - self.first_slot

    @property
    def short(self) -> str:
        """The label as a column header: ``3`` for iteration 3, ``d3`` for draw 3."""
        if self.label.startswith("iteration "):
            return self.label.removeprefix("iteration ")
        if self.label.startswith("draw "):
            return "d" + self.label.removeprefix("draw ")
        return self.label


@dataclass(frozen=True)
class Mark:
    """One event's mark in one lane."""

    kind: str
    """The event's kind, or ``window`` for the windows an update or a draw took from a lane."""
    event: int
    """Index of the event in the trace."""
    lane: Lane
    """The env, or :data:`TRAINER`."""
    slot: int
    column: int
    rows: tuple[int, ...] = ()
    """Positions of the event's columns in this lane, or the indices of its windows."""
    variant: str = ""
    """What sets marks of one kind apart: a train call's status, a hook's name."""


@dataclass(frozen=True)
class Timeline:
    """The marks of one trace, with where each event sits."""

    events: tuple[Event, ...]
    lanes: tuple[int, ...]
    """The env lanes, in order (the trainer lane, :data:`TRAINER`, comes after them)."""
    columns: tuple[Column, ...]
    marks: tuple[Mark, ...]
    slot_of: tuple[int, ...]
    """Per event, its slot (an event without marks: the slot of the next event that has)."""
    column_of: tuple[int, ...]
    """Per event, the index of its column."""

    @property
    def slots(self) -> int:
        return self.columns[-1].stop_slot if self.columns else 0

    def count(self, kind: str) -> int:
        """How many marks of ``kind``."""
        return sum(1 for m in self.marks if m.kind == kind)

    def lane_marks(self, lane: Lane, kind: str | None = None) -> tuple[Mark, ...]:
        """The marks in ``lane`` (of ``kind``, if given)."""
        return tuple(m for m in self.marks if m.lane == lane and kind in (None, m.kind))

    @functools.cached_property
    def _mark_events(self) -> list[int]:
        return [m.event for m in self.marks]  # ascending: marks are made in event order

    def marks_of(self, first: int, stop: int | None = None) -> tuple[Mark, ...]:
        """The marks of events ``first`` up to ``stop`` (just ``first`` without it)."""
        stop = first + 1 if stop is None else stop
        lo = bisect.bisect_left(self._mark_events, first)
        hi = bisect.bisect_left(self._mark_events, stop, lo)
        return self.marks[lo:hi]

    def column_label(self, event: int) -> str:
        """The label of the column of event ``event`` (``end`` past the last event)."""
        if 0 <= event < len(self.column_of):
            return self.columns[self.column_of[event]].label
        return "end"


def column_key(event: Event) -> str:
    """The label of the column ``event`` belongs to."""
    e: Any = event
    if hasattr(e, "iteration"):
        return f"iteration {e.iteration}"
    if hasattr(e, "draw"):
        return f"draw {e.draw}"
    if e.kind == "run_end":
        return "end"
    return str(e.kind)


def _window_lanes(event: Any) -> dict[Lane, list[int]]:
    """Env -> the indices of ``event``'s windows from that env (all padding: the trainer)."""
    lanes: dict[Lane, list[int]] = {}
    for w, window in enumerate(event.windows):
        env = next((item[0] for item in window if item is not None), TRAINER)
        lanes.setdefault(env, []).append(w)
    return lanes


def _item_lanes(event: Any) -> dict[int, list[int]]:
    """Env -> the positions of ``event``'s columns naming that env."""
    env = getattr(event, "env", None)
    if isinstance(env, int):
        return {env: []}
    lanes: dict[int, list[int]] = {}
    for i, e in enumerate(env or ()):
        lanes.setdefault(e, []).append(i)
    return lanes


def _event_marks(event: Any, index: int, slot: int, column: int) -> list[Mark]:
    kind = event.kind
    if kind in _NO_SLOT:
        return []
    marks: list[Mark] = []
    variant = str(getattr(event, "status", getattr(event, "name", "")))
    if kind in _TRAINER_KINDS:
        windows = tuple(range(len(event.windows))) if kind == "update" else ()
        marks.append(Mark(kind, index, TRAINER, slot, column, windows, variant))
    if kind in _WINDOWS:
        for lane, rows in _window_lanes(event).items():
            marks.append(Mark("window", index, lane, slot, column, tuple(rows)))
    elif kind != "run_end":
        for env, positions in sorted(_item_lanes(event).items()):
            marks.append(Mark(kind, index, env, slot, column, tuple(positions), variant))
    if not marks:  # an event of no lane still shows, on the trainer's
        marks.append(Mark(kind, index, TRAINER, slot, column, (), variant))
    return marks


def build_timeline(events: Sequence[Event]) -> Timeline:
    """The timeline of ``events`` (see the module docstring)."""
    marks: list[Mark] = []
    columns: list[Column] = []
    slot_of: list[int] = []
    column_of: list[int] = []
    label: str | None = None
    first_event = first_slot = slot = 0
    for index, event in enumerate(events):
        key = column_key(event)
        if key != label:
            if label is not None:
                columns.append(Column(label, first_event, index, first_slot, slot))
            label, first_event, first_slot = key, index, slot
        made = _event_marks(event, index, slot, len(columns))
        marks.extend(made)
        slot_of.append(slot)
        column_of.append(len(columns))
        slot += 1 if made else 0
    if label is not None:
        columns.append(Column(label, first_event, len(events), first_slot, slot))
    lanes = sorted({m.lane for m in marks if m.lane is not None})
    return Timeline(
        tuple(events), tuple(lanes), tuple(columns), tuple(marks), tuple(slot_of), tuple(column_of)
    )
