"""The worker protocol, ``xpspec-worker/1``: one request line in, one response line out.

The suite starts the worker, then sends requests on its standard input, one JSON object per
line, and reads exactly one response line per request on its standard output. The worker
writes nothing else to standard output (logs go to standard error, which the suite keeps
apart from every verdict).

Requests (``id`` is chosen by the suite and echoed in the response):

- ``{"id": 0, "op": "hello", "protocol": "xpspec-worker/1"}`` — answered
  ``{"id": 0, "outcome": "ok", "protocol": "xpspec-worker/1", "info": {...}}`` where ``info``
  describes the implementation (``name``, ``framework``, ``framework_version``,
  ``capabilities``, optional ``notes``, ``issue_tracker``, ``extra_versions``);
- ``{"id": 1, "op": "smoke"}`` — answered ``{"id": 1, "outcome": "ok"}`` when the
  implementation can run at all;
- ``{"id": 2, "op": "run", "scenario": {...}}`` — the scenario in its JSON form (its
  ``kind`` names the operation: env, trainer, replay, learner, relabel, recurrent, stack or
  offline),
  async),
  answered with
  ``{"id": 2, "outcome": "trace", "trace": "<JSON Lines>"}`` (the trace text exactly as
  ``xpspec trace`` prints it), ``{"id": 2, "outcome": "unsupported", "reason": "...",
  "link": "..."}`` (the scenario cannot be expressed: not applicable), or
  ``{"id": 2, "outcome": "error", "error": {"type": "...", "message": "..."}}``;
- ``{"id": 3, "op": "stop"}`` — the worker exits with status 0 without answering.

Any request may be answered ``error``. A worker that exits, is killed, answers late or
writes anything that is not a response line is judged by the suite (crash, timeout,
resource, error), never taken as a verdict about the implementation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "OPERATIONS",
    "OUTCOMES",
    "PROTOCOL",
    "ProtocolError",
    "Request",
    "Response",
    "decode_request",
    "decode_response",
    "encode",
]

PROTOCOL: Final = "xpspec-worker/1"
OPERATIONS: Final = ("hello", "smoke", "run", "stop")
OUTCOMES: Final = ("ok", "trace", "unsupported", "error")

Operation = Literal["hello", "smoke", "run", "stop"]
ResponseOutcome = Literal["ok", "trace", "unsupported", "error"]


class ProtocolError(ValueError):
    """A line that is not a valid message; the text names the field, what was expected and
    what was got."""


@dataclass(frozen=True)
class Request:
    """One request; ``scenario`` is the scenario's JSON object (``op == "run"`` only)."""

    id: int
    op: Operation
    scenario: dict[str, Any] | None = None
    protocol: str = PROTOCOL

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "op": self.op}
        if self.op == "hello":
            data["protocol"] = self.protocol
        if self.scenario is not None:
            data["scenario"] = self.scenario
        return data


@dataclass(frozen=True)
class Response:
    """One response. ``trace`` is JSON Lines text (``outcome == "trace"``); ``reason`` and
    ``link`` explain ``unsupported``; ``error_type`` and ``message`` describe ``error``;
    ``info`` answers ``hello``."""

    id: int
    outcome: ResponseOutcome
    trace: str = ""
    reason: str = ""
    link: str = ""
    error_type: str = ""
    message: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    protocol: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "outcome": self.outcome}
        if self.outcome == "trace":
            data["trace"] = self.trace
        elif self.outcome == "unsupported":
            data["reason"] = self.reason
            if self.link:
                data["link"] = self.link
        elif self.outcome == "error":
            data["error"] = {"type": self.error_type, "message": self.message}
        if self.info:
            data["info"] = self.info
        if self.protocol:
            data["protocol"] = self.protocol
        return data


def encode(message: Request | Response) -> str:
    """One protocol line (no trailing newline): compact JSON, keys sorted."""
    return json.dumps(message.to_json(), sort_keys=True, separators=(",", ":"))


def _object(line: str | bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ProtocolError(
            f"{what}: expected one JSON object per line, got {shown!r} ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(data).__name__}")
    return data


def _field(data: dict[str, Any], name: str, kind: type, what: str, default: Any = ...) -> Any:
    if name not in data:
        if default is ...:
            raise ProtocolError(f"{what}.{name}: expected a {kind.__name__}, got nothing")
        return default
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{what}.{name}: expected a {kind.__name__}, got {value!r:.200}")
    return value


def decode_request(line: str | bytes) -> Request:
    """The request on ``line``; :class:`ProtocolError` names what is wrong."""
    data = _object(line, "request")
    rid = _field(data, "id", int, "request")
    op = _field(data, "op", str, "request")
    if op not in OPERATIONS:
        raise ProtocolError(f"request.op: expected one of {OPERATIONS}, got {op!r}")
    scenario = _field(data, "scenario", dict, "request", None)
    if op == "run" and scenario is None:
        raise ProtocolError(
            "request.scenario: expected a scenario object for op 'run', got nothing"
        )
    protocol = _field(data, "protocol", str, "request", PROTOCOL)
    return Request(rid, op, scenario, protocol)


def decode_response(line: str | bytes) -> Response:
    """The response on ``line``; :class:`ProtocolError` names what is wrong."""
    data = _object(line, "response")
    rid = _field(data, "id", int, "response")
    outcome = _field(data, "outcome", str, "response")
    if outcome not in OUTCOMES:
        raise ProtocolError(f"response.outcome: expected one of {OUTCOMES}, got {outcome!r}")
    info = _field(data, "info", dict, "response", {})
    protocol = _field(data, "protocol", str, "response", "")
    if outcome == "trace":
        return Response(rid, "trace", trace=_field(data, "trace", str, "response"), info=info)
    if outcome == "unsupported":
        reason = _field(data, "reason", str, "response")
        return Response(
            rid, "unsupported", reason=reason, link=_field(data, "link", str, "response", "")
        )
    if outcome == "error":
        error = _field(data, "error", dict, "response")
        return Response(
            rid,
            "error",
            error_type=_field(error, "type", str, "response.error", "Error"),
            message=_field(error, "message", str, "response.error"),
        )
    return Response(rid, "ok", info=info, protocol=protocol)
