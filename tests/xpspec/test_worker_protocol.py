"""The worker protocol's messages: what encodes, what decodes, and what is refused."""

from __future__ import annotations

import json

import pytest

from xpspec.protocol import (
    PROTOCOL,
    ProtocolError,
    Request,
    Response,
    decode_request,
    decode_response,
    encode,
    load_schema,
    schema_names,
)


@pytest.mark.parametrize(
    "message",
    [
        Request(0, "hello"),
        Request(1, "smoke"),
        Request(2, "run", {"kind": "env", "env": {}, "steps": 3}),
        Request(3, "stop"),
    ],
)
def test_requests_round_trip(message: Request) -> None:
    assert decode_request(encode(message)) == message


@pytest.mark.parametrize(
    "message",
    [
        Response(0, "ok", info={"name": "x"}, protocol=PROTOCOL),
        Response(1, "ok"),
        Response(2, "trace", trace='{"format":"xpspec-trace/3"}\n'),
        Response(3, "unsupported", reason="no such knob", link="https://example.org/x"),
        Response(4, "error", error_type="ValueError", message="bad"),
    ],
)
def test_responses_round_trip(message: Response) -> None:
    assert decode_response(encode(message)) == message


def test_one_line_each() -> None:
    line = encode(Response(0, "trace", trace="a\nb\n"))
    assert "\n" not in line


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "expected one JSON object per line"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"op": "hello"}', "request.id: expected a int, got nothing"),
        ('{"id": true, "op": "hello"}', "request.id: expected a int, got True"),
        ('{"id": 1, "op": "dance"}', "request.op: expected one of"),
        ('{"id": 1, "op": "run"}', "request.scenario: expected a scenario object"),
    ],
)
def test_bad_requests_are_named(line: str, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem.replace("[", r"\[")):
        decode_request(line)


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"id": 1}', "response.outcome: expected a str, got nothing"),
        ('{"id": 1, "outcome": "maybe"}', "response.outcome: expected one of"),
        ('{"id": 1, "outcome": "trace"}', "response.trace: expected a str, got nothing"),
        ('{"id": 1, "outcome": "trace", "trace": 5}', "response.trace: expected a str, got 5"),
        ('{"id": 1, "outcome": "unsupported"}', "response.reason: expected a str"),
        ('{"id": 1, "outcome": "error", "error": {}}', "response.error.message: expected a str"),
    ],
)
def test_bad_responses_are_named(line: str, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        decode_response(line)


def test_encoded_messages_follow_the_published_schemas() -> None:
    import jsonschema

    request, response = load_schema("request"), load_schema("response")
    for message in (Request(0, "hello"), Request(2, "run", {"kind": "env"}), Request(3, "stop")):
        jsonschema.validate(json.loads(encode(message)), request)
    for answer in (
        Response(
            0,
            "ok",
            info={"name": "x", "framework": "y", "framework_version": "1"},
            protocol=PROTOCOL,
        ),
        Response(2, "trace", trace=""),
        Response(3, "unsupported", reason="r"),
        Response(4, "error", error_type="E", message="m"),
    ):
        jsonschema.validate(json.loads(encode(answer)), response)


def test_schemas_are_shipped() -> None:
    assert set(schema_names()) == {
        "report-record",
        "request",
        "response",
        "scenario",
        "trace-event",
        "trace-header",
    }
    with pytest.raises(ValueError, match="schema: expected one of"):
        load_schema("nope")
