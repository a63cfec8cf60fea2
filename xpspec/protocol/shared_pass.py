"""Passes over a trace file shared by several readers, each reader in a thread of its own.

:class:`LockStep` runs a group of jobs (functions that read trace files, such as checks), each
in its own thread. While a job runs, a pass it makes over the events of a
:class:`~xpspec.protocol.trace_file.TraceFile` joins the passes the other jobs make over the
same file: the file is read and each line decoded once per shared pass, in chunks of
``chunk`` events, and every reader of the pass is handed the same chunk. A chunk is dropped
and the next decoded only when every reader of the pass has gone through it, so the memory of
a pass is one chunk whatever the length of the trace; readers move in lock-step.

A new pass starts when no job can move on without it (every job is waiting for a pass to
start or for its next chunk, or has ended): the jobs that start their passes together share
one. A job that starts a second pass over a file while still in a first (a look-ahead) holds
the first pass back until the second starts, with whichever jobs wait then: never itself. Each job sees exactly
the events, and the errors, a pass of its own would give it; only the work of reading is
shared. Outside a group (any other thread) a trace file is read as before, pass by pass.

:func:`once` shares a value several jobs compute alike from the same trace (a table every
item of it fills): the first job to ask computes it, the others wait for it (the passes it
makes go on without them) and are handed the same value, which they must only read. Outside a
group, or when computing it raised, each caller computes its own.

:func:`together` is :func:`once` for work that serves each job its own part (visitors of one
model several checks would otherwise each build while reading the same trace): the jobs that
ask for the same key before the group next stands still (every job waiting) hand their parts
to the first of them, which computes the value of every part in one go; each is handed its
own. A job that asks once that value is under way, outside a group, or when computing it
raised, computes its own part alone.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar

from xpspec.protocol.trace import Event

__all__ = ["CHUNK", "Closeable", "LockStep", "Same", "Source", "current", "once", "together"]

T = TypeVar("T")
P = TypeVar("P")

CHUNK = 4096
"""Events decoded at a time in a shared pass (the memory of a pass)."""

_local = threading.local()


def current() -> LockStep | None:
    """The group the calling thread runs a job of, if any."""
    group: LockStep | None = getattr(_local, "group", None)
    return group


def once(key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, computed once for the jobs of the calling thread's group that ask for the
    same ``key`` (module docstring); outside a group, ``make()``."""
    group = current()
    return make() if group is None else group.once(key, make)


def together(key: Hashable, part: P, make: Callable[[Sequence[P]], Sequence[T]]) -> T:
    """``make(parts)[i]``, computed once for the jobs of the calling thread's group that ask
    for ``key`` together (module docstring), ``i`` the place of ``part`` among ``parts``;
    outside a group, ``make([part])[0]``."""
    group = current()
    return make([part])[0] if group is None else group.together(key, part, make)


class Same:
    """A part of a :func:`once` key standing for the object ``of`` itself (compared by
    identity, whatever its own equality), kept alive as long as the key is."""

    __slots__ = ("of",)

    def __init__(self, of: object) -> None:
        self.of = of

    def __hash__(self) -> int:
        return id(self.of)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.of is self.of


class _Once:
    """A value computed once for a group: whether it is done, and the value or the error."""

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.failed = False
        self.waiters: list[int] = []


class _Together:
    """Parts handed in for one value of :func:`together`: the jobs that handed them, in order,
    whether the parts are closed (being computed), and the values or the error."""

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.jobs: list[int] = []
        self.closed = False
        self.done = False
        self.values: Sequence[Any] = ()
        self.failed = False


_COMPUTING = object()
"""In ``LockStep._waiting``: a job waiting for a value another job computes (:func:`once`)."""


class Source(Protocol):
    """Events kept in a file and read anew on each pass: ``open`` opens the file (the
    ``close``-able handle) and the events read from it, lazily."""

    path: Path

    def open(self) -> tuple[Closeable, Iterator[Event]]: ...


class Closeable(Protocol):
    def close(self) -> None: ...


class _Pass:
    """One reading of ``path``: the chunk every reader is at, and the readers."""

    def __init__(self, source: Source) -> None:
        self.source, self.path = source, source.path
        self._file, self._events = source.open()
        self.index = -1
        """The number of the chunk held (-1: none yet)."""
        self.chunk: list[Event] = []
        self.error: BaseException | None = None
        """What reading raised after the events of ``chunk``, if anything."""
        self.ended = False
        self.readers: list[_Reader] = []

    def advance(self, size: int) -> None:
        """Drop the chunk held and read the next (empty at the end of the file)."""
        chunk: list[Event] = []
        if not self.ended:
            try:
                chunk.extend(islice(self._events, size))
            except Exception as exc:  # a malformed line: each reader meets it where it is
                self.error = exc
            self.ended = self.error is not None or len(chunk) < size
        self.chunk, self.index = chunk, self.index + 1
        if self.ended:
            self.close()

    def branch(self, size: int) -> _Pass:
        """A pass of its own at the place of this one: the chunk held shared, the file read
        anew past it (for a reader the others cannot wait for)."""
        other = _Pass(self.source)
        if self.ended:
            other.close()
        else:
            deque(islice(other._events, (self.index + 1) * size), maxlen=0)
        other.index, other.chunk, other.error = self.index, self.chunk, self.error
        other.ended = self.ended
        return other

    def close(self) -> None:
        self._file.close()


class _Reader:
    """One job's place in a pass: the number of the chunk it needs next."""

    def __init__(self, job: int, shared: _Pass) -> None:
        self.job, self.shared, self.next = job, shared, 0


class LockStep:
    """Runs jobs in threads of their own whose passes over trace files are shared (module
    docstring). ``run`` returns what each job raised (``None`` if it returned)."""

    def __init__(self, chunk: int = CHUNK) -> None:
        self.chunk = chunk
        self._lock = threading.Lock()
        self._wake: dict[int, threading.Condition] = {}
        """Each job's own condition (on ``_lock``): only the jobs that can move on are woken."""
        self._live: set[int] = set()
        """Jobs not ended."""
        self._waiting: dict[int, _Reader | object | None] = {}
        """Jobs blocked: in a pass for the next chunk of their reader, or its start (None), or
        for a value another job computes (``_COMPUTING``)."""
        self._values: dict[Hashable, _Once] = {}
        self._together: dict[Hashable, _Together] = {}
        self._open: list[_Together] = []
        """Parts still taken in: closed when no job can move on."""
        self._starting: dict[Path, tuple[Source, list[int]]] = {}
        self._started: dict[int, _Reader] = {}
        self._passes: list[_Pass] = []

    def run(self, jobs: Sequence[Callable[[], None]]) -> list[BaseException | None]:
        """Run ``jobs`` together, each in its own thread; wait for all of them."""
        results: list[BaseException | None] = [None] * len(jobs)

        def work(number: int, job: Callable[[], None]) -> None:
            _local.group, _local.job = self, number
            try:
                job()
            except BaseException as exc:
                results[number] = exc
            finally:
                with self._lock:
                    self._live.discard(number)
                    for shared in self._passes:
                        shared.readers = [r for r in shared.readers if r.job != number]
                    self._dispatch()

        self._live = set(range(len(jobs)))
        self._wake = {n: threading.Condition(self._lock) for n in self._live}
        threads = [
            threading.Thread(target=work, args=(n, job), name=f"xpspec-lockstep-{n}")
            for n, job in enumerate(jobs)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for shared in self._passes:
            shared.close()
        self._passes, self._values, self._together = [], {}, {}
        return results

    def once(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` computed by the first job of the group asking for ``key``, the value
        handed to the others asking for it (:func:`once`)."""
        job: int = _local.job
        with self._lock:
            entry = self._values.get(key)
            mine = entry is None
            if entry is None:
                entry = self._values[key] = _Once()
            elif not entry.done:
                entry.waiters.append(job)
                self._waiting[job] = _COMPUTING
                self._dispatch()  # the passes go on without this job
                while not entry.done:
                    self._wake[job].wait()
        if not mine:
            if not entry.failed:
                value: T = entry.value
                return value
            return make()  # it raised for the job computing it: each meets its own error
        try:
            entry.value = make()
        except BaseException:
            entry.failed = True
            raise
        finally:
            with self._lock:
                entry.done = True
                for waiter in entry.waiters:
                    del self._waiting[waiter]
                    self._wake[waiter].notify()
                entry.waiters = []
        return entry.value

    def together(self, key: Hashable, part: P, make: Callable[[Sequence[P]], Sequence[T]]) -> T:
        """``make(parts)[i]`` for the parts handed in for ``key`` until no job could move on,
        computed by the first job that handed one (:func:`together`)."""
        job: int = _local.job
        with self._lock:
            entry = self._together.get(key)
            if entry is None:
                entry = self._together[key] = _Together()
                self._open.append(entry)
            if entry.closed:
                late = True
            else:
                late, place = False, len(entry.parts)
                entry.parts.append(part)
                entry.jobs.append(job)
                self._waiting[job] = _COMPUTING
                self._dispatch()
                first = entry.jobs[0] == job
                while not (entry.closed if first else entry.done):
                    self._wake[job].wait()
        if late:
            return make([part])[0]
        if not first:
            if entry.failed:
                return make([part])[0]  # each meets its own error
            value: T = entry.values[place]
            return value
        try:
            entry.values = make(entry.parts)
            if len(entry.values) != len(entry.parts):
                raise ValueError(
                    f"together: expected a value per part ({len(entry.parts)}), "
                    f"got {len(entry.values)}"
                )
        except BaseException:
            entry.failed = True
            raise
        finally:
            with self._lock:
                entry.done = True
                for waiter in entry.jobs[1:]:
                    del self._waiting[waiter]
                    self._wake[waiter].notify()
        return entry.values[0]

    def events(self, source: Source, kind: str | None = None) -> Iterator[Event]:
        """The events of ``source`` (those of ``kind``, if given), from a pass shared with the
        other jobs of the group that read the same file."""
        job: int = _local.job
        with self._lock:
            self._starting.setdefault(source.path, (source, []))[1].append(job)
            self._waiting[job] = None
            self._dispatch()
            while job not in self._started:
                self._wake[job].wait()
            reader = self._started.pop(job)
        try:
            while True:
                with self._lock:
                    if reader.shared.index < reader.next:
                        self._waiting[job] = reader
                        self._dispatch()
                        while reader.shared.index < reader.next:
                            self._wake[job].wait()
                    chunk, error = reader.shared.chunk, reader.shared.error
                    reader.next += 1
                if kind is None:
                    yield from chunk
                else:
                    yield from (e for e in chunk if e.kind == kind)
                if error is not None:
                    raise error
                if len(chunk) < self.chunk:
                    return
                del chunk
        finally:
            with self._lock:
                if reader in reader.shared.readers:
                    reader.shared.readers.remove(reader)
                self._dispatch()

    def _dispatch(self) -> None:
        """Move every pass whose readers all went through its chunk to its next chunk; when no
        job can move on, start the passes jobs wait for. Called with the lock held."""
        while True:
            for shared in self._passes:
                if shared.readers and all(r.next > shared.index for r in shared.readers):
                    shared.advance(self.chunk)
                    for r in shared.readers:
                        if self._waiting.get(r.job) is r:
                            del self._waiting[r.job]
                            self._wake[r.job].notify()
            for shared in [s for s in self._passes if not s.readers]:
                shared.close()
                self._passes.remove(shared)
            if self._live - self._waiting.keys():
                break
            if self._open:
                # No job can move on: the parts handed in so far are all there will be. The
                # first job of each computes (the others wait on, as for ``once``); the passes
                # it starts join those the waiting jobs start.
                for entry in self._open:
                    entry.closed = True
                    del self._waiting[entry.jobs[0]]
                    self._wake[entry.jobs[0]].notify()
                self._open = []
                continue
            if not self._starting:
                # Every job waits and no pass can move: a job waits for one pass while
                # another job's reader of it is behind, itself waiting for a pass the first
                # job is behind in (two passes over one file read at different paces). The
                # readers behind in one such pass go on in passes of their own.
                stuck = next(
                    (
                        shared
                        for shared in self._passes
                        if any(self._waiting.get(r.job) is r for r in shared.readers)
                    ),
                    None,
                )
                if stuck is None:
                    break
                for r in [r for r in stuck.readers if r.next <= stuck.index]:
                    stuck.readers.remove(r)
                    r.shared = stuck.branch(self.chunk)
                    r.shared.readers.append(r)
                    self._passes.append(r.shared)
                continue
            # No job can move on (the passes above moved whatever could): start the passes
            # jobs wait for, the jobs waiting for the same file sharing one.
            for source, jobs in self._starting.values():
                shared = _Pass(source)
                self._passes.append(shared)
                for job in jobs:
                    reader = _Reader(job, shared)
                    shared.readers.append(reader)
                    self._started[job] = reader
                    del self._waiting[job]
                    self._wake[job].notify()
            self._starting = {}
