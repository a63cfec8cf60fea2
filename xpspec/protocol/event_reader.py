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

Columns written alike are read once and shared: a trace repeats the same ``env``,
``discount`` or ``step_type`` column in event after event, and a store repeats the columns
of the vector step it stores. msgspec leaves each column of a line undecoded (its JSON
text); a text read before under the same column type gives the tuple read then, a new one
is decoded by that type's decoder. Sharing by text keeps integer and float columns apart
(``(1, 0) == (1.0, 0.0)``) and -0.0 apart from 0.0, so each is written back as it was; it
holds a decoded trace in about half the memory and spares decoding the columns seen before.
The table of shared columns is bounded (:data:`SHARED_LIMIT`), so a reader that streams a
long trace keeps no more than that.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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
"""Distinct column texts the reader keeps per column type; past it the table starts afresh."""
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


_COLUMN_TYPES: Final = (tuple[int, ...], tuple[tuple[int, ...], ...], tuple[float, ...])
"""The types of the columns shared between events."""

FastRule = tuple[Callable[[str], Any], Callable[..., Event], tuple[tuple[int, int], ...]]
"""A msgspec decoder of an event class's mirror (its columns left as their JSON text), the
class, and per column its index and the index of its type in :data:`_COLUMN_TYPES`."""


@functools.cache
def _column_decoders() -> tuple[Callable[[bytes], Any], ...]:
    """A msgspec decoder of each type of :data:`_COLUMN_TYPES`."""
    return tuple(msgspec.json.Decoder(tp).decode for tp in _COLUMN_TYPES)


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
        columns = []
        for i, f in enumerate(dataclasses.fields(cls)):
            tp = hints[f.name]
            if tp in _COLUMN_TYPES:
                if f.default is not dataclasses.MISSING:  # would not be a msgspec.Raw
                    raise TypeError(f"{cls.__name__}.{f.name}: expected no default on a column")
                columns.append((i, _COLUMN_TYPES.index(tp)))
                tp = msgspec.Raw
            fields.append(
                (f.name, tp) if f.default is dataclasses.MISSING else (f.name, tp, f.default)
            )
        mirror = msgspec.defstruct(
            f"{cls.__name__}Line", fields, forbid_unknown_fields=True, gc=False
        )
        rules[cls.kind] = (msgspec.json.Decoder(mirror).decode, cls, tuple(columns))
    return rules


class EventReader:
    """Decodes event lines; ``fast=False`` uses the compiled decoder alone (msgspec or not)."""

    def __init__(self, fast: bool = True) -> None:
        self._rules = _fast_rules() if fast else {}
        self._slow = decoder(Event)  # dispatches on "kind"
        self._decode_column = _column_decoders() if self._rules else ()
        # Per column type, each column text read so far and its tuple.
        self._columns: tuple[dict[bytes, Any], ...] = tuple({} for _ in _COLUMN_TYPES)

    def __call__(self, line: str, lineno: int) -> Event:
        """The event of ``line`` (line ``lineno`` of its file); ``ValueError`` naming the line
        and what is wrong with it otherwise."""
        start = line.find(_KIND)
        if start >= 0:
            start += len(_KIND)
            rule = self._rules.get(line[start : line.find('"', start)])
            if rule is not None:
                read, cls, columns = rule
                try:
                    values = _astuple(read(line))
                    if columns:
                        values = self._read_columns(list(values), columns)
                except _REFUSED:
                    pass  # the compiled decoder accepts it or names what is wrong
                else:
                    return cls(*values)
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {lineno}: not JSON ({exc.msg})") from exc
        return self.event(data, lineno)

    def _read_columns(self, values: list[Any], columns: tuple[tuple[int, int], ...]) -> Any:
        """``values`` with each column's JSON text (a ``msgspec.Raw``) replaced by its tuple:
        the one read before from the same text under the same type, else a new one decoded
        by that type's decoder (which raises what msgspec raises on a malformed column)."""
        for i, kind in columns:
            text = bytes(values[i])
            table = self._columns[kind]
            column = table.get(text)
            if column is None:
                if len(table) > SHARED_LIMIT:
                    table.clear()
                column = table[text] = self._decode_column[kind](text)
            values[i] = column
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
