"""One worker process speaking ``xpspec-worker/1``, under a time limit per request and a
memory limit, restarted after it fails.

The worker runs in a session of its own (so that it and whatever it forks can be signalled
together), with standard error going to a log file of which the last lines are quoted when
it fails. Waiting for an answer never blocks past the request's time limit: the parent
polls the worker's pipe, and, on Linux, the resident memory of the worker's process group.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

from xpspec.conformance.outcomes import AdapterFailure
from xpspec.protocol import ProtocolError, Request, Response, decode_response, encode

__all__ = ["DEFAULT_LIMITS", "Limits", "WorkerProcess", "describe_exit", "group_rss"]

_POLL: Final = 0.1
"""Seconds between two looks at the worker's memory while an answer is awaited."""
_CHUNK: Final = 1 << 20
_EXITING: Final = 10.0
"""Seconds a worker that closed its output has to finish exiting (so its status is known)."""


@dataclass(frozen=True)
class Limits:
    """``timeout``: seconds per request (the hello included); ``memory``: bytes of resident
    memory for the worker and its children (0: no limit); ``startup``: seconds the worker
    has to answer its first request (importing a framework can take a while); ``grace``:
    seconds a terminated worker has to exit before it is killed."""

    timeout: float = 120.0
    memory: int = 8 << 30
    startup: float = 120.0
    grace: float = 2.0

    def __post_init__(self) -> None:
        for name in ("timeout", "startup", "grace"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: expected a number of seconds > 0, got {value!r}")
        if not isinstance(self.memory, int) or isinstance(self.memory, bool) or self.memory < 0:
            raise ValueError(f"memory: expected a number of bytes >= 0, got {self.memory!r}")


DEFAULT_LIMITS: Final = Limits()
"""120 s per operation, 8 GiB of resident memory, 120 s to start, 2 s to exit."""


def describe_exit(code: int) -> str:
    """A Popen return code in words: ``exit status 1`` or ``killed by signal 6 (SIGABRT)``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def group_rss(pgid: int) -> int | None:
    """Resident bytes of every process in process group ``pgid`` (None where ``/proc`` is
    not available: then no memory limit is enforced)."""
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    total = 0
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            # Fields after the command name: state ppid pgrp ... rss is the 24th field.
            fields = stat.rsplit(b")", 1)[-1].split()
            if len(fields) > 21 and int(fields[2]) == pgid:
                total += int(fields[21]) * _PAGE
    return total


class WorkerProcess:
    """A worker started from ``command``; :meth:`request` sends one request and returns its
    response, or raises :class:`~xpspec.conformance.outcomes.AdapterFailure` (the worker is then
    stopped; the next request starts a fresh one)."""

    def __init__(
        self,
        command: Sequence[str],
        limits: Limits = DEFAULT_LIMITS,
        env: Mapping[str, str] | None = None,
        label: str = "worker",
    ) -> None:
        if not command:
            raise ValueError("command: expected a program and its arguments, got nothing")
        self.command = tuple(command)
        self.limits = limits
        self.label = label
        self._env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._buffer = bytearray()
        self._answered = 0
        self._next_id = 0
        self.starts = 0
        """How many times a worker process was started (restarts included)."""

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._log is None:
            self._log = tempfile.TemporaryFile(prefix="xpspec-worker-", suffix=".log")
        self._log.seek(0)
        self._log.truncate()
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=self._env,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:
            raise AdapterFailure(
                "crash", f"{self.label}: cannot start {self.command[0]!r}: {exc.strerror or exc}"
            ) from None
        self._buffer.clear()
        self._answered = 0
        self.starts += 1
        return self._proc

    def stop(self) -> None:
        """Ask the worker to exit, then terminate and kill it if it does not."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.write((encode(Request(self._new_id(), "stop")) + "\n").encode())
                proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(self.limits.grace)
        self._kill(proc)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """Terminate, then kill, the worker's whole process group."""
        for sig, wait in ((signal.SIGTERM, self.limits.grace), (signal.SIGKILL, None)):
            if proc.poll() is not None and not _group_alive(proc.pid):
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- requests -------------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(
        self, op: str, scenario: dict[str, Any] | None = None, timeout: float | None = None
    ) -> Response:
        """Send one request and return its response; ``timeout`` (seconds) overrides the
        limit for this request (a new worker's first answer may take ``limits.startup``)."""
        return self.receive(self.send(op, scenario), timeout)

    def send(self, op: str, scenario: dict[str, Any] | None = None) -> Request:
        """Write one request (starting a worker if none runs); :meth:`receive` its answer."""
        proc = self._proc if self.running else self._start()
        assert proc is not None and proc.stdin is not None
        request = Request(self._new_id(), op, scenario)  # type: ignore[arg-type]
        with contextlib.suppress(OSError):  # it died before reading: receive() says how
            proc.stdin.write((encode(request) + "\n").encode())
            proc.stdin.flush()
        return request

    def receive(self, request: Request, timeout: float | None = None) -> Response:
        """The response to ``request``, or :class:`~xpspec.conformance.outcomes.AdapterFailure`."""
        proc = self._proc
        if proc is None:
            raise AdapterFailure("crash", f"{self.label}: the worker is gone" + self._tail_text())
        limit = timeout if timeout is not None else self.limits.timeout
        if self._answered == 0 and timeout is None:
            limit = max(limit, self.limits.startup)
        what = f"run_{request.scenario.get('kind')}" if request.scenario else request.op
        line = self._read_line(proc, limit, what)
        try:
            response = decode_response(line)
        except ProtocolError as exc:
            self._fail()
            raise AdapterFailure("error", f"{self.label} broke the protocol: {exc}") from None
        if response.id != request.id:
            self._fail()
            raise AdapterFailure(
                "error",
                f"{self.label} broke the protocol: response.id: expected {request.id}, got {response.id}",
            )
        self._answered += 1
        return response

    def _read_line(self, proc: subprocess.Popen[bytes], limit: float, op: str) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        start = time.monotonic()
        deadline = start + limit
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return line
            now = time.monotonic()
            if now >= deadline:
                self._fail()
                raise AdapterFailure(
                    "timeout",
                    f"{self.label}: {op} did not answer within {limit:g} s; the worker was killed"
                    + self._tail_text(),
                )
            ready, _, _ = select.select([fd], [], [], min(_POLL, deadline - now))
            if ready:
                chunk = os.read(fd, _CHUNK)
                if not chunk:  # it is exiting: give it time to say how (finalisers run)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(max(self.limits.grace, _EXITING))
                    self._proc = None
                    self._kill(proc)
                    code = proc.wait()
                    raise AdapterFailure(
                        "crash",
                        f"{self.label}: the worker ended during {op} ({describe_exit(code)})"
                        + self._tail_text(),
                    )
                self._buffer += chunk
                continue
            if self.limits.memory and time.monotonic() - start >= _POLL:
                rss = group_rss(proc.pid)
                if rss is not None and rss > self.limits.memory:
                    self._fail()
                    raise AdapterFailure(
                        "resource",
                        f"{self.label}: {op} used {rss / 2**20:.0f} MiB, over the memory limit of "
                        f"{self.limits.memory / 2**20:.0f} MiB; the worker was killed"
                        + self._tail_text(),
                    )

    def _fail(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            self._kill(proc)

    def stderr_tail(self, lines: int = 24, width: int = 240) -> str:
        """The last ``lines`` lines the current (or last) worker wrote to standard error,
        each cut to ``width`` characters."""
        if self._log is None:
            return ""
        try:
            # pread leaves alone the file offset the worker shares with this handle.
            fd = self._log.fileno()
            size = os.fstat(fd).st_size
            text = os.pread(fd, 16384, max(0, size - 16384)).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        tail = text.rstrip("\n").splitlines()[-lines:]
        return "\n".join(line if len(line) <= width else line[:width] + " ..." for line in tail)

    def _tail_text(self) -> str:
        tail = self.stderr_tail()
        if not tail:
            return ""
        return "\n  its standard error ends:\n" + "\n".join(
            f"    {line}" for line in tail.splitlines()
        )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
