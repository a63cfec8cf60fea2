"""A trace that stays in its file: its events are read anew, line by line, each time they are
iterated, so that a trace of any length is checked in the memory of the checks' own state.

:class:`TraceFile` is a :class:`~xpspec.protocol.trace.Trace` whose ``events`` is an
:class:`EventFile`, an iterable that is not a tuple: it may be iterated any number of times
(each pass reads the file), but not indexed or measured with ``len``. Everything that passes
over a trace's events (``for e in trace.events``, :meth:`~xpspec.protocol.trace.Trace.of_kind`,
:meth:`~xpspec.protocol.trace.Trace.to_jsonl`) works on it unchanged. The file must not change
while the trace is in use. Passes made by the jobs of a
:class:`~xpspec.protocol.shared_pass.LockStep` are shared between them.

(``xpspec check`` keeps no reference run in a file: a pass over the reference runs the
reference trainer again, handing its events over as it goes:
:class:`xpspec.conformance.given_trace.RunTrace`.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from xpspec.protocol.codec import canonical_json
from xpspec.protocol.event_reader import read_jsonl
from xpspec.protocol.shared_pass import current
from xpspec.protocol.trace import TRACE_FORMAT, Event, Trace

__all__ = ["EventFile", "TraceFile", "TraceWriter"]


class EventFile:
    """The events of the trace file ``path``, read from it on each iteration."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Event]:
        group = current()
        return self._read() if group is None else group.events(self)

    def open(self) -> tuple[IO[str], Iterator[Event]]:
        """The file opened, and its events as they are read (a pass of a
        :class:`~xpspec.protocol.shared_pass.LockStep`)."""
        lines = self.path.open(encoding="utf-8")
        _, events = read_jsonl(lines)
        return lines, events

    def _read(self) -> Iterator[Event]:
        lines, events = self.open()
        with lines:
            yield from events

    def of_kind(self, kind: str) -> Iterator[Event]:
        """The events of one kind, in order; the lines of other kinds are not decoded (a
        line's ``"kind":"..."`` member cannot appear inside a string, where quotes are
        escaped, and events hold no nested objects). In a job of a
        :class:`~xpspec.protocol.shared_pass.LockStep`, the pass is the group's shared one."""
        group = current()
        return self._of_kind(kind) if group is None else group.events(self, kind)

    def _of_kind(self, kind: str) -> Iterator[Event]:
        member = f'"kind":{json.dumps(kind)}'
        with self.path.open(encoding="utf-8") as lines:
            _, events = read_jsonl(_only(lines, member))
            yield from (e for e in events if e.kind == kind)

    def __repr__(self) -> str:
        return f"EventFile({str(self.path)!r})"


def _only(lines: Iterable[str], member: str) -> Iterator[str]:
    """``lines`` with every event line not holding ``member`` blanked (the header and the line
    numbers kept)."""
    lines = iter(lines)
    for line in lines:
        yield line
        if line and not line.isspace():  # the header
            break
    for line in lines:
        yield line if member in line else ""


class TraceFile(Trace):
    """The trace in the file ``path`` (JSON Lines, as :meth:`Trace.to_jsonl` writes it); the
    header is read at once, each event when a pass over the events reaches it. A malformed line
    raises ``ValueError`` naming it during the pass that reaches it."""

    def __init__(self, path: Path | str) -> None:
        path = Path(path)
        with path.open(encoding="utf-8") as lines:
            header, _ = read_jsonl(lines)
        object.__setattr__(self, "events", EventFile(path))
        object.__setattr__(self, "header", header)

    def of_kind(self, kind: str) -> Iterator[Event]:  # type: ignore[override]
        events: Any = self.events
        return events.of_kind(kind)

    @property
    def path(self) -> Path:
        events: Any = self.events
        return Path(events.path)


class TraceWriter:
    """Writes a trace to ``path`` as :meth:`Trace.to_jsonl` does, the header at once and the
    events as they are handed over (``writer(events)``), so that a run of any length is written
    in the memory of the events not written yet. Use it as a context manager."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self._out = path.open("w", encoding="utf-8")
        self._out.write(canonical_json({"format": TRACE_FORMAT, **header}) + "\n")

    def __call__(self, events: Iterable[Event]) -> None:
        self._out.writelines(canonical_json(e) + "\n" for e in events)

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
