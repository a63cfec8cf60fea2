"""The worker that serves a Python adapter: ``python -m xpspec.conformance.harness.host ADAPTER``.

It answers ``xpspec-worker/1`` requests (:mod:`xpspec.protocol.worker`) by calling the
adapter loaded from ``ADAPTER``, a registered name or ``package.module:object``
(:func:`xpspec.conformance.harness.loading.load_adapter`). The protocol keeps the process's
original standard output to itself: file descriptor 1 is pointed at standard error before the
adapter is imported, so whatever the adapter or its framework prints (from Python or from
native code) ends up in the worker's log.

Only ``Exception`` is answered as an ``error``: ``SystemExit``, ``KeyboardInterrupt``, a
signal or ``os._exit`` end the process, and the suite reports a *crash*.

The adapter's ``prepare()``, if it has one, is called once after loading. An adapter that
declares ``fresh_process_per_operation`` (:func:`xpspec.protocol.adapter.needs_fresh_process`)
has each ``smoke`` and ``run`` answered by a child forked for it alone, which writes the
response to a temporary file and exits; the host relays it (processes the child leaves
behind cannot hold the answer back). A child that ends without an
answer (a signal, an exit) ends the host the same way, after a line on standard error naming
its status, so that the suite sees that crash. The children stay in the worker's process
group: the suite's time limit kills them with it and its memory limit counts them (pages
shared with the host count in both).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import faulthandler
import os
import pickle
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import IO, Any, NoReturn

from xpspec.conformance.frames import where
from xpspec.protocol import PROTOCOL, ProtocolError, Request, Response, decode_request, encode

__all__ = ["serve"]


def _protocol_channel() -> IO[str]:
    """The original standard output, for protocol lines only; fd 1 becomes standard error."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    return channel


def _error(rid: int, exc: BaseException, context: str = "") -> Response:
    """An ``error`` answer: the exception's text and where it was raised
    (:func:`xpspec.conformance.frames.where`: the adapter's last frames)."""
    text = str(exc).strip() or repr(exc)
    return Response(
        rid, "error", error_type=type(exc).__name__, message=f"{context}{text}{where(exc)}"
    )


class _Host:
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.adapter: Any = None
        self.fresh = False
        self.load_error: BaseException | None = None
        self.load_context = f"cannot load adapter {spec!r}: "
        try:
            from xpspec.conformance.harness.loading import load_adapter
            from xpspec.protocol.adapter import needs_fresh_process

            self.adapter = load_adapter(spec)
            self.fresh = needs_fresh_process(self.adapter)
        except Exception as exc:  # reported in answer to hello
            self.load_error = exc
            return
        prepare = getattr(self.adapter, "prepare", None)
        if callable(prepare):
            try:
                prepare()
            except Exception as exc:
                self.load_error = exc
                self.load_context = "prepare() raised: "

    def answer(self, request: Request) -> Response:
        if self.load_error is not None:
            return _error(request.id, self.load_error, self.load_context)
        if request.op == "hello":
            if request.protocol != PROTOCOL:
                return Response(
                    request.id,
                    "error",
                    error_type="ProtocolError",
                    message=f"request.protocol: expected {PROTOCOL!r}, got {request.protocol!r}",
                )
            try:
                info = dataclasses.asdict(self.adapter.info())
            except Exception as exc:
                return _error(request.id, exc, "info() raised: ")
            return Response(request.id, "ok", info=info, protocol=PROTOCOL)
        call = self._smoke if request.op == "smoke" else self._run
        return _forked(call, request) if self.fresh else call(request)

    def _smoke(self, request: Request) -> Response:
        try:
            self.adapter.smoke()
        except Exception as exc:
            return _error(request.id, exc, "smoke() raised: ")
        return Response(request.id, "ok")

    def _run(self, request: Request) -> Response:
        from xpspec.protocol.adapter import Unsupported
        from xpspec.protocol.scenario import scenario_from_json
        from xpspec.protocol.trace import Trace

        try:
            scenario = scenario_from_json(request.scenario or {})
        except ValueError as exc:
            return _error(request.id, exc, "invalid scenario: ")
        operation = getattr(self.adapter, f"run_{scenario.kind}", None)
        if operation is None:
            return Response(
                request.id,
                "unsupported",
                reason=f"the adapter has no run_{scenario.kind} operation",
            )
        try:
            trace = operation(scenario)
        except Unsupported as exc:
            return Response(request.id, "unsupported", reason=exc.reason, link=exc.link)
        except Exception as exc:
            return _error(request.id, exc)
        if not isinstance(trace, Trace):
            return Response(
                request.id,
                "error",
                error_type="TypeError",
                message=f"run_{scenario.kind} returned {type(trace).__name__}, expected a Trace",
            )
        try:
            text = trace.to_jsonl()
        except Exception as exc:
            return _error(request.id, exc, "the trace cannot be serialised: ")
        return Response(request.id, "trace", trace=text)


def _forked(call: Callable[[Request], Response], request: Request) -> Response:
    """``call(request)`` answered in a child process forked for it; a child that ends
    without an answer ends this process the same way (:func:`_end_as`)."""
    with tempfile.TemporaryFile(prefix="xpspec-answer-") as answer:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(call, request, answer.fileno())
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        answer.seek(0)
        data = answer.read()
    if code == 0 and data:
        response: Response = pickle.loads(data)
        return response
    op = f"run_{request.scenario.get('kind')}" if request.scenario else request.op
    _end_as(code, f"the child forked for {op} (pid {pid})")


def _child(call: Callable[[Request], Response], request: Request, answer: int) -> NoReturn:
    """Run ``call(request)``, write its response to ``answer`` and exit 0; end otherwise as a
    process would (``SystemExit``'s status, 1 after any other exception), writing nothing."""
    code = 1
    try:
        response = call(request)
        with open(answer, "wb", closefd=False) as out:
            out.write(pickle.dumps(response))
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _end_as(code: int, what: str) -> NoReturn:
    """End this process as a child ended: killed by signal ``-code``, or with exit status
    ``code``, after a line on standard error (which the suite quotes)."""
    from xpspec.conformance.harness.process import describe_exit

    print(f"xpspec host: {what} ended without an answer ({describe_exit(code)})", file=sys.stderr)
    sys.stderr.flush()
    if code < 0:
        faulthandler.disable()  # the child's stack is in the log already; not the host's
        with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its default
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def serve(spec: str, requests: IO[str] | None = None) -> int:
    """Answer requests from ``requests`` (standard input) until ``stop`` or end of input."""
    channel = _protocol_channel()
    faulthandler.enable()  # a fatal signal leaves its Python stack in the worker's log
    host = _Host(spec)
    for line in requests if requests is not None else sys.stdin:
        if not line.strip():
            continue
        try:
            request = decode_request(line)
        except ProtocolError as exc:
            channel.write(
                encode(Response(-1, "error", error_type="ProtocolError", message=str(exc))) + "\n"
            )
            channel.flush()
            continue
        if request.op == "stop":
            break
        channel.write(encode(host.answer(request)) + "\n")
        channel.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m xpspec.conformance.harness.host ADAPTER", file=sys.stderr)
        return 2
    return serve(args[0])


def _exit(code: int) -> NoReturn:
    """End the worker once it is done: the exit handlers run (a framework's own shutdown
    registered with :mod:`atexit` included) and the standard streams are flushed, then the
    process ends without the interpreter's teardown of every module (torch's among them),
    which took about a second, past the suite's grace period for a stopped worker under
    load, after the last answer was given."""
    atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
