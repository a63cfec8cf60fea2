"""Reading a trace's JSON Lines, one event line at a time.

Every line has one reading rule: the compiled decoder of the ``Event`` union
(:func:`xpspec.protocol.codec.decoder`), which names the line and the field of whatever is
wrong. When msgspec is installed (xpspec's own install brings it) a line is first read by a
msgspec decoder of its event class, which parses and type-checks it in one pass, in C: a
mirror of the class with the same fields, types and defaults that refuses unknown fields. A
line it takes is the event the compiled decoder gives; a line it refuses goes to the compiled
decoder, which accepts it or says why not. So the events read, and every error, are the same
with or without msgspec; only the time differs (clause ``trace.deterministic`` concerns the
bytes written, which never pass through here).

Equal column tuples are shared: a trace repeats the same ``env``, ``discount`` or
``step_type`` column in event after event, and a store repeats the columns of the vector
step it stores. Integer and float columns are kept apart (``(1, 0) == (1.0, 0.0)``), and a
float column holding -0.0 is not shared (``-0.0 == 0.0``): each is written back as it was. Sharing them holds a decoded trace in about half the memory; the table of
shared tuples is bounded (:data:`SHARED_LIMIT`), so a reader that streams a long trace keeps
no more than that.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from math import copysign
from typing import Any, Final

from xpspec.protocol import trace as _trace
from xpspec.protocol.codec import decoder
from xpspec.protocol.trace import EVENT_KINDS, TRACE_FORMAT, Event

try:  # an accelerator, not a requirement: the protocol core runs on the standard library
    import msgspec

    _astuple = msgspec.structs.astuple
    _REFUSED: tuple[type[Exception], ...] = (msgspec.ValidationError, msgspec.DecodeError)
except ImportError:  # pragma: no cover - the tests force the fallback with fast=False
    msgspec = None  # type: ignore[assignment]
    _REFUSED = ()

__all__ = ["SHARED_LIMIT", "EventReader", "accelerated", "paused_gc", "read_jsonl"]

SHARED_LIMIT: Final = 1 << 16
"""Distinct column tuples the reader keeps to share; past it the table starts afresh."""
_KIND: Final = '"kind":"'


def accelerated() -> bool:
    """Whether msgspec reads the lines (else the compiled decoder alone)."""
    return msgspec is not None


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector paused for the block (restored as it was). Reading builds many
    objects and frees none, so the collector's passes over them find nothing to free; they
    cost a third of the reading time of a long trace."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_INT_COLUMNS: Final = (tuple[int, ...], tuple[tuple[int, ...], ...])
_FLOAT_COLUMN: Final = tuple[float, ...]

FastRule = tuple[Callable[[str], Any], Callable[..., Event], tuple[int, ...], tuple[int, ...]]
"""A msgspec decoder of an event class's mirror, the class, and the indices of its integer
and its float columns (the tuples shared between events)."""


def _negative_zero(column: tuple[float, ...]) -> bool:
    """Whether ``column`` holds -0.0."""
    return any(not x and copysign(1.0, x) < 0 for x in column)


@functools.cache
def _fast_rules() -> dict[str, FastRule]:
    """The msgspec rule of each event kind (made once: every pass over a trace file reads
    with a reader of its own)."""
    if msgspec is None:
        return {}
    namespace = vars(_trace)
    rules: dict[str, FastRule] = {}
    for cls in typing.get_args(Event):
        hints = typing.get_type_hints(cls, namespace)
        fields: list[Any] = []
        ints, floats = [], []
        for i, f in enumerate(dataclasses.fields(cls)):
            tp = hints[f.name]
            fields.append(
                (f.name, tp) if f.default is dataclasses.MISSING else (f.name, tp, f.default)
            )
            if tp in _INT_COLUMNS:
                ints.append(i)
            elif tp == _FLOAT_COLUMN:
                floats.append(i)
        mirror = msgspec.defstruct(
            f"{cls.__name__}Line", fields, forbid_unknown_fields=True, gc=False
        )
        rules[cls.kind] = (msgspec.json.Decoder(mirror).decode, cls, tuple(ints), tuple(floats))
    return rules


class EventReader:
    """Decodes event lines; ``fast=False`` uses the compiled decoder alone (msgspec or not)."""

    def __init__(self, fast: bool = True) -> None:
        self._rules = _fast_rules() if fast else {}
        self._slow = decoder(Event)  # dispatches on "kind"
        # Integer and float columns apart: (1, 0) == (1.0, 0.0), and each is written as it is.
        self._ints: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._floats: dict[tuple[float, ...], tuple[float, ...]] = {}

    def __call__(self, line: str, lineno: int) -> Event:
        """The event of ``line`` (line ``lineno`` of its file); ``ValueError`` naming the line
        and what is wrong with it otherwise."""
        start = line.find(_KIND)
        if start >= 0:
            start += len(_KIND)
            rule = self._rules.get(line[start : line.find('"', start)])
            if rule is not None:
                read, cls, ints, floats = rule
                try:
                    values = _astuple(read(line))
                except _REFUSED:
                    pass  # the compiled decoder accepts it or names what is wrong
                else:
                    if not (ints or floats):  # no columns (most lines): nothing to share
                        return cls(*values)
                    signed = bool(floats) and "-0" in line
                    return cls(*self._share(list(values), ints, floats, signed))
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {lineno}: not JSON ({exc.msg})") from exc
        return self.event(data, lineno)

    def _share(
        self, values: list[Any], ints: tuple[int, ...], floats: tuple[int, ...], signed: bool
    ) -> Any:
        """``values`` with each column replaced by an equal one read before, if any. A float
        column holding a negative zero is neither shared nor kept to share (-0.0 equals 0.0,
        and each is written as it is); ``signed`` is whether the line may hold one (its text
        holds ``-0``)."""
        if len(self._ints) > SHARED_LIMIT or len(self._floats) > SHARED_LIMIT:
            self._ints.clear()
            self._floats.clear()
        shared = self._ints.setdefault
        for i in ints:
            values[i] = shared(values[i], values[i])
        for i in floats:
            column = values[i]
            if signed and 0.0 in column and _negative_zero(column):
                continue
            values[i] = self._floats.setdefault(column, column)
        return values

    def event(self, data: Any, lineno: int) -> Event:
        """The event of the parsed line ``data``, by the compiled decoder."""
        if not isinstance(data, dict) or data.get("kind") not in EVENT_KINDS:
            kind = data.get("kind") if isinstance(data, dict) else data
            raise ValueError(
                f"line {lineno}: expected an event kind in {EVENT_KINDS}, got {kind!r}"
            )
        try:
            event: Event = self._slow(data, f"line {lineno}")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"line {lineno}: malformed {data['kind']} event: {exc}") from exc
        return event


def read_jsonl(lines: Iterable[str], fast: bool = True) -> tuple[dict[str, Any], Iterator[Event]]:
    """The header of a trace's JSON Lines and an iterator over its events, read as they are
    asked for (a trace of any length, in the memory of one event). Blank lines are skipped;
    errors name the line number."""
    numbered = ((n, line) for n, line in enumerate(lines, 1) if line and not line.isspace())
    first = next(numbered, None)
    if first is None:
        raise ValueError("empty trace: expected a header line")
    lineno, line = first
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {lineno}: not JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        raise ValueError(
            f"line {lineno}: expected a header with format {TRACE_FORMAT!r}, got {data!r}"
        )
    header = {k: v for k, v in data.items() if k != "format"}
    reader = EventReader(fast)
    return header, (reader(line, n) for n, line in numbered)
