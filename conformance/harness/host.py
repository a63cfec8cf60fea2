"""The worker that serves a Python adapter: ``python -m conformance.harness.host ADAPTER``.

It answers ``xpspec-worker/1`` requests (:mod:`xpspec.protocol.worker`) by calling the
adapter loaded from ``ADAPTER`` (a registered name or ``package.module:object``). The
protocol keeps the process's original standard output to itself: file descriptor 1 is
pointed at standard error before the adapter is imported, so whatever the adapter or its
framework prints (from Python or from native code) ends up in the worker's log.

Only ``Exception`` is answered as an ``error``: ``SystemExit``, ``KeyboardInterrupt``, a
signal or ``os._exit`` end the process, and the suite reports a *crash*.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import sys
import traceback
from typing import IO, Any

from xpspec.protocol import PROTOCOL, ProtocolError, Request, Response, decode_request, encode

__all__ = ["serve"]


def _protocol_channel() -> IO[str]:
    """The original standard output, for protocol lines only; fd 1 becomes standard error."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    return channel


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"


def _error(rid: int, exc: BaseException, context: str = "") -> Response:
    text = str(exc).strip() or repr(exc)
    return Response(rid, "error", error_type=type(exc).__name__, message=f"{context}{text}{_where(exc)}")


class _Host:
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.adapter: Any = None
        self.load_error: BaseException | None = None
        try:
            from conformance.engine import load_adapter

            self.adapter = load_adapter(spec)
        except Exception as exc:  # reported in answer to hello
            self.load_error = exc

    def answer(self, request: Request) -> Response:
        if self.load_error is not None:
            return _error(request.id, self.load_error, f"cannot load adapter {self.spec!r}: ")
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
        if request.op == "smoke":
            try:
                self.adapter.smoke()
            except Exception as exc:
                return _error(request.id, exc, "smoke() raised: ")
            return Response(request.id, "ok")
        return self._run(request)

    def _run(self, request: Request) -> Response:
        from conformance.protocol import Unsupported
        from conformance.scenario import scenario_from_json
        from refimpl.trace import Trace

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
            channel.write(encode(Response(-1, "error", error_type="ProtocolError", message=str(exc))) + "\n")
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
        print("usage: python -m conformance.harness.host ADAPTER", file=sys.stderr)
        return 2
    return serve(args[0])


if __name__ == "__main__":
    sys.exit(main())
