"""Reading trace lines: msgspec's fast path and the compiled decoder give the same events and
the same errors, shared columns never change what is written, and events are read lazily."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpspec.protocol.event_reader import EventReader, accelerated, read_jsonl
from xpspec.protocol.trace import EnvStep, Store, Trace

VECTORS = sorted((Path(__file__).parents[2] / "xpspec/conformance/vectors").glob("*.trace.jsonl"))


def _read(text: str, fast: bool) -> Trace:
    header, events = read_jsonl(text.splitlines(), fast)
    return Trace(tuple(events), header)


def test_there_are_vectors_to_read() -> None:
    assert len(VECTORS) > 50


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.name.removesuffix(".trace.jsonl"))
def test_every_vector_reads_the_same_both_ways_and_writes_back_byte_for_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast, slow = _read(text, True), _read(text, False)
    assert fast == slow
    assert fast.to_jsonl() == text
    assert Trace.from_jsonl(text).to_jsonl() == text


def _line(**fields: object) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


STEP = {
    "iteration": 1,
    "env": [0, 1],
    "episode": [0, 0],
    "t": [1, 0],
    "step_type": [1, 0],
    "reward": [1.0, 0.0],
    "discount": [1.0, 1.0],
    "policy_state": [1, 0],
    "action": [1, 0],
    "kind": "env_step",
}


def test_shared_columns_keep_their_type_and_the_sign_of_zero() -> None:
    """(1, 0) equals (1.0, 0.0) and (0.0,) equals (-0.0,): a column is shared only with one
    written the same way."""
    header = _line(format="xpspec-trace/3")
    same_values = {**STEP, "step_type": [1, 0], "reward": [1.0, 0.0], "discount": [1.0, 0.0]}
    signed = {**STEP, "reward": [-0.0, 0.0], "discount": [0.0, -0.0]}
    text = "\n".join([header, _line(**STEP), _line(**same_values), _line(**signed)]) + "\n"
    trace = _read(text, True)
    first, second, third = trace.events
    assert isinstance(first, EnvStep) and isinstance(second, EnvStep)
    assert isinstance(third, EnvStep)
    assert [type(v) for v in second.step_type] == [int, int]
    assert [type(v) for v in second.reward] == [float, float]
    assert third.reward == (-0.0, 0.0) and str(third.reward) == "(-0.0, 0.0)"
    assert str(third.discount) == "(0.0, -0.0)"
    assert first.discount is not second.discount  # (1.0, 1.0) vs (1.0, 0.0)
    assert trace == _read(text, False)
    assert trace.to_jsonl() == text


def test_a_store_shares_the_columns_of_the_step_it_stores() -> None:
    store = {k: v for k, v in STEP.items() if k not in ("policy_state", "action", "kind")} | {
        "annotation": [0.0, 0.0],
        "kind": "store",
    }
    text = "\n".join([_line(format="xpspec-trace/3"), _line(**STEP), _line(**store)]) + "\n"
    step, stored = _read(text, True).events
    assert isinstance(step, EnvStep) and isinstance(stored, Store)
    if accelerated():
        assert stored.env is step.env and stored.reward is step.reward


def test_columns_written_differently_read_as_the_compiled_decoder_reads_them() -> None:
    """Columns are shared by their text: the same values written with spaces or exponents
    are other texts, read to equal tuples of the right type."""
    header = _line(format="xpspec-trace/3")
    spaced = _line(**STEP).replace('"env":[0,1]', '"env": [ 0 , 1 ]')
    spaced = spaced.replace('"reward":[1.0,0.0]', '"reward":[1e0,0]')
    text = "\n".join([header, _line(**STEP), spaced]) + "\n"
    first, second = _read(text, True).events
    assert first == second == _read(text, False).events[1]
    assert isinstance(second, EnvStep) and [type(v) for v in second.reward] == [float, float]


MALFORMED = {
    "unknown field": {**STEP, "extra": 1},
    "missing field": {k: v for k, v in STEP.items() if k != "reward"},
    "float for an int": {**STEP, "iteration": 1.0},
    "bool for an int": {**STEP, "env": [True, 1]},
    "string in a column": {**STEP, "reward": ["1", 0.0]},
    "unknown kind": {**STEP, "kind": "env-step"},
    "bad literal": {
        "iteration": 1,
        "call": 0,
        "counter": 1,
        "status": "done",
        "stored_total": 0,
        "kind": "train_call",
    },
    "window item of two": {
        "draw": 0,
        "windows": [[[0, 0, 0], [0, 0]]],
        "kind": "sampled",
    },
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_line_gets_the_same_error_both_ways(case: str) -> None:
    line = _line(**MALFORMED[case])
    errors = []
    for fast in (True, False):
        with pytest.raises(ValueError, match=r"^line 7: ") as caught:
            EventReader(fast)(line, 7)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]


def test_ints_are_read_as_floats_where_floats_are_expected() -> None:
    line = _line(**{**STEP, "reward": [1, 0]})
    fast, slow = EventReader(True)(line, 2), EventReader(False)(line, 2)
    assert isinstance(fast, EnvStep) and fast == slow
    assert [type(v) for v in fast.reward] == [float, float]


def test_lines_that_are_not_json_are_named() -> None:
    with pytest.raises(ValueError, match=r"^line 3: not JSON"):
        EventReader()('{"kind":"env_step",', 3)


def test_events_are_read_as_they_are_asked_for() -> None:
    """A line past the events asked for is not read: a stream of any length is read in the
    memory of one event."""

    def lines():  # type: ignore[no-untyped-def]
        yield _line(format="xpspec-trace/3", producer="x")
        yield _line(**STEP)
        raise AssertionError("read past the first event")

    header, events = read_jsonl(lines())
    assert header == {"producer": "x"}
    assert isinstance(next(events), EnvStep)


def test_an_empty_trace_or_a_missing_header_is_refused() -> None:
    with pytest.raises(ValueError, match="empty trace"):
        read_jsonl(["", "  "])
    with pytest.raises(ValueError, match="line 1: expected a header"):
        read_jsonl([_line(**STEP)])
