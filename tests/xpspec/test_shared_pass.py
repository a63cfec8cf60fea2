"""Passes shared by the jobs of a LockStep: each job sees exactly the events (and the errors) a
pass of its own gives, whatever passes it makes and however it leaves them; the jobs that
start together share one reading of the file; and a group never waits on itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from xpspec.protocol import shared_pass
from xpspec.protocol.shared_pass import LockStep
from xpspec.protocol.trace import Event
from xpspec.protocol.trace_file import TraceFile

VECTORS = Path(__file__).parents[2] / "xpspec/conformance/vectors"
LONG = max(
    (p for p in VECTORS.glob("*.trace.jsonl") if '"kind":"env_step"' in p.read_text("utf-8")),
    key=lambda p: p.stat().st_size,
)
"""The longest trainer vector (env steps, stores, updates)."""


def _readings(trace: TraceFile) -> dict[str, Callable[[], object]]:
    """Ways of passing over a trace, each returning what it saw."""

    def whole() -> object:
        return list(trace.events)

    def stores() -> object:
        return list(trace.of_kind("store"))

    def twice() -> object:
        return [list(trace.of_kind("env_step")), list(trace.events)]

    def zipped() -> object:  # two passes over the same file at once (a look-ahead)
        return list(zip(trace.events, trace.of_kind("store"), strict=False))

    def nested() -> object:
        seen: list[object] = []
        for n, e in enumerate(trace.events):
            if n == 3:
                seen.append(sum(1 for _ in trace.events))  # a whole pass inside another
            seen.append(e.kind)
        return seen

    def abandoned() -> object:
        first = []
        for n, e in enumerate(trace.events):
            first.append(e)
            if n == 5:
                break
        left_open = iter(trace.of_kind("env_step"))
        head = [next(left_open), next(left_open)]  # never finished, never closed
        return [first, head, list(trace.of_kind("update"))]

    return {f.__name__: f for f in (whole, stores, twice, zipped, nested, abandoned)}


def test_the_trace_is_long_enough_for_several_chunks() -> None:
    assert sum(1 for _ in TraceFile(LONG).events) > 3 * 7


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_each_job_sees_what_a_pass_of_its_own_gives(chunk: int) -> None:
    trace = TraceFile(LONG)
    readings = _readings(trace)
    alone = {name: read() for name, read in readings.items()}
    together: dict[str, object] = {}

    def job(name: str, read: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            together[name] = read()

        return run

    raised = LockStep(chunk).run([job(n, r) for n, r in readings.items()])
    assert raised == [None] * len(readings)
    assert together == alone


def test_jobs_that_start_together_share_one_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Path] = []
    real = shared_pass._Pass.__init__

    def counting(self: shared_pass._Pass, source: shared_pass.Source) -> None:
        opened.append(source.path)
        real(self, source)

    monkeypatch.setattr(shared_pass._Pass, "__init__", counting)
    trace = TraceFile(LONG)
    seen: list[list[Event]] = [[] for _ in range(5)]
    jobs = [lambda n=n: seen[n].extend(trace.events) for n in range(5)]
    assert LockStep(7).run(jobs) == [None] * 5
    assert opened == [LONG]
    assert all(s == list(trace.events) for s in seen)


def test_a_malformed_line_is_met_by_each_job_where_it_is(tmp_path: Path) -> None:
    lines = LONG.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[10] = "{not json\n"
    path = tmp_path / "t.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    trace = TraceFile(path)
    with pytest.raises(ValueError) as alone:
        list(trace.events)
    seen: list[list[Event]] = [[], []]

    def job(n: int) -> Callable[[], None]:
        return lambda: seen[n].extend(trace.events)

    raised = LockStep(4).run([job(0), job(1)])
    assert [str(r) for r in raised] == [str(alone.value)] * 2
    assert all(isinstance(r, ValueError) for r in raised)
    assert [len(s) for s in seen] == [9, 9]  # the events before line 11 (the header is line 1)


def test_a_job_that_raises_is_reported_and_the_others_finish() -> None:
    trace = TraceFile(LONG)

    def fails() -> None:
        for n, _ in enumerate(trace.events):
            if n == 2:
                raise RuntimeError("a check's own error")

    counted: list[int] = []
    raised = LockStep(3).run([fails, lambda: counted.append(sum(1 for _ in trace.events))])
    assert isinstance(raised[0], RuntimeError) and raised[1] is None
    assert counted == [sum(1 for _ in trace.events)]


def test_outside_a_group_a_trace_file_reads_as_before() -> None:
    assert shared_pass.current() is None
    trace = TraceFile(LONG)
    assert list(trace.of_kind("store")) == [e for e in trace.events if e.kind == "store"]


def test_a_value_asked_for_by_several_jobs_is_computed_once() -> None:
    trace = TraceFile(LONG)
    made: list[int] = []
    got: dict[int, object] = {}

    def make() -> object:
        made.append(1)
        return sum(1 for _ in trace.events)  # a pass, while the other jobs wait for it

    def job(n: int) -> Callable[[], None]:
        def run() -> None:
            before = list(trace.of_kind("store"))
            got[n] = (shared_pass.once(("count", shared_pass.Same(trace)), make), before)

        return run

    assert LockStep(5).run([job(n) for n in range(4)]) == [None] * 4
    assert made == [1]
    stores = [e for e in trace.events if e.kind == "store"]
    assert got == {n: (sum(1 for _ in trace.events), stores) for n in range(4)}
    assert shared_pass.once("count", make) == got[0][0] and made == [1, 1]  # outside: its own


def test_a_value_that_raised_is_computed_by_each_job_again() -> None:
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the first computation fails")
        return len(calls)

    raised = LockStep(3).run([lambda: shared_pass.once("k", make) for _ in range(3)])
    assert [type(r) for r in raised].count(RuntimeError) == 1
    assert len(calls) == 3


def test_parts_handed_in_together_are_computed_in_one_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[Path] = []
    real = shared_pass._Pass.__init__

    def counting(self: shared_pass._Pass, source: shared_pass.Source) -> None:
        opened.append(source.path)
        real(self, source)

    monkeypatch.setattr(shared_pass._Pass, "__init__", counting)
    trace = TraceFile(LONG)
    made: list[list[str]] = []
    got: dict[int, object] = {}

    def make(parts: object) -> list[tuple[str, int]]:
        assert isinstance(parts, list)
        made.append(list(parts))
        n = sum(1 for _ in trace.events)  # a pass, joined by the jobs that read meanwhile
        return [(kind, n) for kind in parts]

    def job(n: int) -> Callable[[], None]:
        def run() -> None:
            if n == 3:  # a job that reads on its own while the others hand in their parts
                got[n] = len(list(trace.of_kind("store")))
                return
            got[n] = shared_pass.together(("count", shared_pass.Same(trace)), f"part {n}", make)

        return run

    assert LockStep(5).run([job(n) for n in range(4)]) == [None] * 4
    assert len(made) == 1 and sorted(made[0]) == ["part 0", "part 1", "part 2"]
    total = sum(1 for _ in trace.events)
    assert got == {
        0: ("part 0", total),
        1: ("part 1", total),
        2: ("part 2", total),
        3: sum(1 for e in trace.events if e.kind == "store"),
    }
    assert opened == [LONG]  # the pass of make and the fourth job's, one reading
    alone = shared_pass.together("count", "mine", make)  # outside a group: its own part
    assert alone == ("mine", total) and made[-1] == ["mine"]


def test_parts_whose_computation_raised_are_each_computed_again() -> None:
    calls: list[list[int]] = []

    def make(parts: object) -> list[int]:
        assert isinstance(parts, list)
        calls.append(list(parts))
        if len(calls) == 1:
            raise RuntimeError("the first computation fails")
        return [p * 10 for p in parts]

    got: dict[int, int] = {}

    def job(n: int) -> Callable[[], None]:
        def run() -> None:
            got[n] = shared_pass.together("k", n, make)

        return run

    raised = LockStep(3).run([job(n) for n in range(3)])
    assert [type(r) for r in raised].count(RuntimeError) == 1
    assert len(calls) == 3 and sorted(map(len, calls)) == [1, 1, 3]
    assert len(got) == 2 and all(v == n * 10 for n, v in got.items())
