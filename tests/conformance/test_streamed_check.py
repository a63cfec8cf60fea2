"""A trace checked from its file, pass by pass, gets the verdicts it gets in memory; a run
written as it goes writes the bytes of the whole trace, and the reference run kept pickled
holds the very events those bytes decode to; the compact per-item state answers as a
dictionary would."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.checks.base import Check, CheckFailure, Context
from xpspec.conformance.checks.item_index import ItemBytes, ItemIndex, Plans
from xpspec.conformance.engine import Session
from xpspec.conformance.fused import run_together
from xpspec.conformance.given_trace import FileReference, GivenTrace, RunTrace
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import EVENT_KINDS, Trace
from xpspec.protocol.trace_file import TraceFile, TraceWriter
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.trainer import trace_header, train

TRAINER = sorted(n for n, s in CATALOG.items() if isinstance(s, TrainerScenario))
SOME = TRAINER[::7]


def _verdicts(scenario: TrainerScenario, trace: Trace, reference: Trace) -> dict[str, str]:
    context = Context(lambda s: reference, lambda s: RefimplAdapter().run_trainer(s))
    out = {}
    for check in ALL_CHECKS:
        if check.capability != "trainer" or not check.applies(scenario):
            continue
        if check.name.startswith("deterministic"):
            continue
        try:
            check.verify(scenario, trace, context)
            out[check.name] = "pass"
        except CheckFailure as exc:
            out[check.name] = str(exc)
    return out


@pytest.mark.parametrize("name", SOME)
def test_a_run_written_as_it_goes_is_the_whole_trace_byte_for_byte(
    name: str, tmp_path: Path
) -> None:
    sc = CATALOG[name]
    assert isinstance(sc, TrainerScenario)
    whole = train(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed)
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, trace_header(sc.seed)) as writer:
        streamed = train(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, sink=writer)
    assert streamed.trace.events == ()
    assert path.read_text(encoding="utf-8") == whole.trace.to_jsonl()
    assert FileReference().run_trainer(sc).to_jsonl() == whole.trace.to_jsonl()


def _typed(value: Any) -> Any:
    """``value`` with the type of every part of it spelled out: two values are equal under
    it when they are equal and of the same types throughout (``1`` and ``1.0``, or a tuple
    and a list, are not), so that what a check prints of them is the same too."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return type(value), tuple((f.name, _typed(getattr(value, f.name))) for f in fields)
    if isinstance(value, (list, tuple)):
        return type(value), tuple(_typed(v) for v in value)
    if isinstance(value, dict):
        return type(value), tuple((_typed(k), _typed(v)) for k, v in value.items())
    if isinstance(value, float) and math.isnan(value):
        return float, "nan"
    return type(value), value


@pytest.mark.parametrize("name", TRAINER)
def test_the_reference_run_handed_over_holds_the_events_its_json_lines_decode_to(
    name: str, tmp_path: Path
) -> None:
    """The reference of ``xpspec check`` is a run of the trainer handing its events over as it
    goes (``RunTrace``): on every pass, the events its JSON Lines decode to, types included,
    and its header."""
    sc = CATALOG[name]
    assert isinstance(sc, TrainerScenario)
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, trace_header(sc.seed)) as writer:
        train(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, sink=writer)
    decoded = TraceFile(path)
    want = [_typed(e) for e in decoded.events]
    handed = FileReference().run_trainer(sc)
    assert isinstance(handed, RunTrace)
    assert handed.header == decoded.header
    assert [_typed(e) for e in handed.events] == want
    assert [_typed(e) for e in handed.events] == want  # a second pass: a second run
    for kind in ("store", "train_call"):
        got = [_typed(e) for e in handed.of_kind(kind)]
        assert got == [_typed(e) for e in decoded.of_kind(kind)]


@pytest.mark.parametrize("name", SOME)
def test_checks_give_the_same_verdicts_on_a_trace_file(name: str, tmp_path: Path) -> None:
    sc = CATALOG[name]
    assert isinstance(sc, TrainerScenario)
    trace = RefimplAdapter().run_trainer(sc)
    # A trace that fails some checks: every other store dropped.
    stores = [e for e in trace.events if e.kind == "store"][::2]
    broken = Trace(tuple(e for e in trace.events if e.kind != "store" or e in stores), {})
    for n, t in enumerate((trace, broken)):
        path = tmp_path / f"{n}.jsonl"
        path.write_text(t.to_jsonl(), encoding="utf-8")
        streamed = TraceFile(path)
        assert list(streamed.events) == list(t.events) == list(streamed.events)
        for kind in EVENT_KINDS:  # only the lines of one kind are decoded
            assert list(streamed.of_kind(kind)) == list(t.of_kind(kind))
        assert _verdicts(sc, streamed, trace) == _verdicts(sc, t, trace)


def test_a_malformed_line_is_named_when_a_pass_reaches_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"format":"xpspec-trace/3"}\n{"kind":"teleport"}\n', encoding="utf-8")
    trace = TraceFile(path)
    with pytest.raises(ValueError, match="line 2"):
        list(trace.events)


def test_item_slots_are_dense_and_distinct_per_env() -> None:
    sc = CATALOG[TRAINER[0]]
    index = ItemIndex(sc.env, sc.seed)
    for env in range(sc.env.num_envs):
        slots = []
        for k in range(6):
            length = sc.env.episode(sc.seed, env, k).length
            slots += [index.slot((env, k, t)) for t in range(length + 1)]
            assert index.slot((env, k, length + 1)) is None
        assert slots == list(range(len(slots)))
    assert index.slot((sc.env.num_envs, 0, 0)) is None
    assert index.slot((0, 10**9, 0)) is None


def test_item_bytes_answer_as_a_dictionary_does() -> None:
    sc = CATALOG[TRAINER[0]]
    for index in (ItemIndex(sc.env, sc.seed), None):
        table, plain = ItemBytes(index), {}
        length = sc.env.episode(sc.seed, 0, 0).length
        items = [(0, 0, 0), (0, 2, 1), (0, 10**9, 3), (0, 0, 0), (5, 1, 1)]
        items += [(0, 0, length), (0, 0, length + 1), (0, 1, -1), (0, -1, 0)]  # numbered now
        for value, item in enumerate(items):
            table[item] = value * 100  # 400 does not fit a byte: kept aside
            plain[item] = value * 100
        for item in [*items, (0, 1, 0)]:
            assert (item in table) == (item in plain)
            assert table.get(item) == plain.get(item)
        with pytest.raises(KeyError):
            table[(0, 1, 0)]
        for item in [(0, 1, 0), (0, 1, 0), (0, 0, length + 1), (0, 2, 1)]:
            plain[item] = plain.get(item, 0) + 1
            assert table.bump(item) == plain[item]
        assert all(table.get(item) == plain[item] for item in plain)


def test_item_bytes_in_bulk_answer_as_item_by_item() -> None:
    """set_all and bump_all (a store's columns at once) leave the table that ``m[item] =
    value`` and ``bump`` item by item leave: values in and out of a byte, items numbered and
    not, items kept aside and brought back, counts crossing 254, rows that must grow."""
    sc = CATALOG[TRAINER[0]]
    length = sc.env.episode(sc.seed, 0, 0).length
    numbered = [(env, k, t) for env in range(2) for k in range(3) for t in range(3)]
    odd = [(0, 10**9, 3), (5, 1, 1), (0, 0, length + 1), (0, 1, -1), (0, -1, 0), (0, 40, 0)]
    items = numbered + odd + numbered[:5]
    values = [(n * 37) % 300 for n in range(len(items))]  # some past a byte: kept aside
    for index in (ItemIndex(sc.env, sc.seed), None):
        bulk, one = ItemBytes(index), ItemBytes(index)
        bulk.set_all(items[:4], values[:4])  # rows not there yet, then grown
        for item, value in zip(items[:4], values[:4], strict=True):
            one[item] = value
        bulk.set_all(items, values)
        for item, value in zip(items, values, strict=True):
            one[item] = value
        for _ in range(3):
            bulk.bump_all([*items, (1, 5, 0)])
            for item in [*items, (1, 5, 0)]:
                one.bump(item)
        for item in [*items, (1, 5, 0), (1, 6, 0)]:
            assert bulk.get(item) == one.get(item), item
        plain = ItemBytes(index)
        for _ in range(256):  # a count crossing the largest in a byte
            plain.bump_all([(0, 0, 0), (0, 0, 0)])
        assert plain.get((0, 0, 0)) == 512
        plain.set_all([(0, 0, 0)], [7])  # brought back from aside
        assert plain.get((0, 0, 0)) == 7


def test_plans_answer_as_the_env_does_in_any_order() -> None:
    sc = CATALOG[TRAINER[0]]
    plans = Plans(sc.env, sc.seed)
    asked = [(e, k) for k in (0, 3, 1, 90, 2, 0, 70, 3) for e in (0, 1)] * 2
    asked += [(0, k) for k in range(200)] + [(0, 5), (0, 150)]  # past the plans remembered
    assert all(plans(e, k) == sc.env.episode(sc.seed, e, k) for e, k in asked)


def _outcomes(session: Session, scenario: TrainerScenario, checks: list[Check]) -> list[Any]:
    return [
        dataclasses.replace(session.evaluate(c, "given", scenario), seconds=0.0) for c in checks
    ]


@pytest.mark.parametrize("broken", [False, True])
def test_checks_run_together_give_the_outcomes_of_checks_run_alone(
    broken: bool, tmp_path: Path
) -> None:
    """``xpspec check``'s group: a check asking for a rerun (identity-is-plain, of the same
    run with train accounting ``plain``) runs in it, and its verdict, replayed through the
    engine, is the one the check gives alone; so are the others'."""
    sc = next(
        s
        for s in (CATALOG[n] for n in TRAINER)
        if isinstance(s, TrainerScenario)
        and s.trainer.train_accounting != "plain"
        and any(c.name == "identity-is-plain" and c.applies(s) for c in ALL_CHECKS)
    )
    trace = RefimplAdapter().run_trainer(sc)
    if broken:  # every other store dropped
        stores = [e for e in trace.events if e.kind == "store"][::2]
        trace = Trace(tuple(e for e in trace.events if e.kind != "store" or e in stores), {})
    path = tmp_path / "t.jsonl"
    path.write_text(trace.to_jsonl(), encoding="utf-8")
    checks = [c for c in ALL_CHECKS if c.capability == "trainer" and c.applies(sc)]

    def session() -> Session:
        given = GivenTrace(sc, TraceFile(path), str(path), validated=True)
        return Session(given, str(path), reproduce="", reference=FileReference())

    alone = _outcomes(session(), sc, checks)
    together = session()
    replaying = run_together(together, sc, checks, reruns_answered=True)
    assert _outcomes(together, sc, replaying) == alone
    ran_together = {c.name for c, r in zip(checks, replaying, strict=True) if r is not c}
    assert "identity-is-plain" in ran_together
    assert ran_together == {c.name for c in checks} - {"deterministic-trainer"}
    if broken:
        assert any(o.status == "fail" for o in alone)
