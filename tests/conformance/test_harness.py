"""The out-of-process harness: every broken adapter gets its named outcome within a bounded
time, the other checks' verdicts are unaffected, and the worker is restarted after it fails."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.broken_adapters import TARGET
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Outcome, Session
from xpspec.conformance.harness import Limits, RemoteAdapter, WorkerProcess, connect
from xpspec.conformance.harness.process import describe_exit
from xpspec.conformance.outcomes import AdapterFailure, AdapterUnavailable

EXEC_WORKER = [sys.executable, str(Path(__file__).with_name("exec_worker.py"))]
LIMITS = Limits(timeout=30.0, memory=1200 << 20, grace=0.5)
HANGS = Limits(timeout=2.0, memory=1200 << 20, grace=0.5)
"""Short operations for the adapters that never answer; long enough for the others."""
BOUND = 40.0
"""Seconds within which every broken adapter's outcomes must be in (startup included)."""

# adapter -> (status of its trainer operation, text its message must contain)
BROKEN = {
    "Abort": ("crash", "killed by signal 6 (SIGABRT)"),
    "SysExit": ("crash", "exit status 0"),
    "OsExit": ("crash", "exit status 3"),
    "NativeHang": ("timeout", "did not answer within 2 s"),
    "BusyLoop": ("timeout", "did not answer within 2 s"),
    "MemoryBomb": ("resource", "over the memory limit of 1200 MiB"),
    "MalformedTrace": ("error", "decodes to no real step"),
    "WrongType": ("error", "expected a Trace"),
    "Raises": ("error", "KeyError: 'a bug in the adapter'"),
    "StdoutNoise": ("pass", ""),
    "SlowButCorrect": ("pass", ""),
}


def _trainer_checks() -> list:
    scenario = CATALOG[TARGET]
    return [
        c
        for c in ALL_CHECKS
        if c.capability == "trainer" and not c.requires and c.applies(scenario)
    ]


def _run_broken(spec: str, status: str) -> tuple[Any, list[Outcome], Outcome]:
    """The adapter, its outcomes on the target's trainer checks, and then the outcome of a
    replay check (another capability, answered by a fresh worker if the old one died)."""
    adapter = connect(spec, limits=HANGS if status == "timeout" else LIMITS)
    session = Session(adapter, spec)
    try:
        outcomes = [session.evaluate(c, TARGET, CATALOG[TARGET]) for c in _trainer_checks()]
        replay = next(c for c in ALL_CHECKS if c.name == "replay-windows")
        other = session.evaluate(replay, "replay-uniform", CATALOG["replay-uniform"])
    finally:
        session.close()
    return adapter, outcomes, other


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_adapter_gets_its_named_outcome(name: str) -> None:
    status, text = BROKEN[name]
    start = time.monotonic()
    adapter, outcomes, other = _run_broken(f"tests.conformance.broken_adapters:{name}", status)
    elapsed = time.monotonic() - start
    assert elapsed < BOUND, f"{name}: {elapsed:.1f} s"
    assert {o.status for o in outcomes} == {status}, [(o.check, o.status) for o in outcomes]
    assert text in outcomes[0].message
    if status != "pass":
        assert "xpspec trace s.json --adapter" in outcomes[0].message  # the repro
    assert other.status == "pass", other.message
    if status in ("crash", "timeout", "resource"):
        assert adapter.worker.starts == 2, "the worker is restarted after it failed"


def test_a_crash_message_quotes_the_worker_stderr() -> None:
    adapter = connect("tests.conformance.broken_adapters:Abort", limits=LIMITS)
    try:
        with pytest.raises(AdapterFailure) as caught:
            adapter.run_trainer(CATALOG[TARGET])
    finally:
        adapter.close()
    assert caught.value.status == "crash"
    assert "during run_trainer" in str(caught.value)
    assert "Fatal Python error: Aborted" in str(caught.value)  # from the worker's stderr


@pytest.mark.parametrize(
    "spec, cause",
    [
        (
            "tests.conformance.broken_import:Adapter",
            "No module named 'a_framework_that_is_not_installed'",
        ),
        ("tests.conformance.broken_adapters:SmokeRaises", "license server is unreachable"),
        ("tests.conformance.broken_adapters:NoSuchThing", "has no attribute 'NoSuchThing'"),
        ("refimp", "did you mean 'refimpl'?"),
        ("exec:a-program-that-does-not-exist", "cannot start"),
    ],
)
def test_an_adapter_that_cannot_run_is_one_line(spec: str, cause: str) -> None:
    with pytest.raises(AdapterUnavailable) as caught:
        connect(spec, limits=LIMITS)
    message = str(caught.value)
    assert "\n" not in message
    assert spec in message and cause in message and "fix:" in message


def test_an_exec_worker_that_imports_nothing_of_xpspec_passes_the_env_checks() -> None:
    adapter = connect("exec:" + " ".join(EXEC_WORKER), limits=LIMITS)
    session = Session(adapter, "exec-toy")
    try:
        assert adapter.info().name == "exec-toy"
        env_checks = [c for c in ALL_CHECKS if c.capability == "env"]
        for name in ("env-mixed", "env-random"):
            outcomes = [session.evaluate(c, name, CATALOG[name]) for c in env_checks]
            expected = "pass" if name == "env-mixed" else "not-applicable"  # random plans
            assert {o.status for o in outcomes} == {expected}, [
                (o.check, o.message) for o in outcomes
            ]
    finally:
        session.close()
    imports = [
        line.split()[1]
        for line in Path(EXEC_WORKER[1]).read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert imports == ["json", "sys", "time"]


@pytest.mark.parametrize(
    "mode, status, text",
    [("noise", "error", "broke the protocol"), ("late", "timeout", "did not answer within 2 s")],
)
def test_an_exec_worker_that_breaks_the_protocol(mode: str, status: str, text: str) -> None:
    limits = Limits(timeout=2.0, grace=0.5)
    adapter = RemoteAdapter([*EXEC_WORKER, "--misbehave", mode], limits, label=mode)
    try:
        with pytest.raises(AdapterFailure) as caught:
            adapter.run_env(CATALOG["env-mixed"])
    finally:
        adapter.close()
    assert caught.value.status == status and text in str(caught.value)


def test_a_worker_answers_requests_in_order_and_stops() -> None:
    worker = WorkerProcess(EXEC_WORKER, Limits(timeout=10.0))
    try:
        hello = worker.request("hello")
        assert hello.outcome == "ok" and hello.protocol == "xpspec-worker/1"
        scenario = json.loads(json.dumps({"kind": "replay"}))
        assert worker.request("run", scenario).outcome == "unsupported"
        worker.stop()
        assert not worker.running
    finally:
        worker.close()


@pytest.mark.parametrize(
    "code, text",
    [(0, "exit status 0"), (3, "exit status 3"), (-9, "killed by signal 9 (SIGKILL)")],
)
def test_exit_statuses_in_words(code: int, text: str) -> None:
    assert describe_exit(code) == text


@pytest.mark.parametrize("bad", [0, -1.0, True])
def test_limits_refuse_nonsense(bad: object) -> None:
    with pytest.raises(ValueError, match="timeout: expected a number of seconds > 0"):
        Limits(timeout=bad)  # type: ignore[arg-type]


# -- adapters that need a fresh process per operation ---------------------------------------
FRESH = "tests.conformance.fresh_adapters"


def test_a_fresh_process_per_operation_leaks_no_state() -> None:
    headers = {}
    for name in ("Counting", "CountingInOneProcess"):
        adapter = connect(f"{FRESH}:{name}", limits=LIMITS)  # its smoke check counts too
        try:
            headers[name] = [adapter.run_env(CATALOG["env-mixed"]).header for _ in range(3)]
        finally:
            adapter.close()
    assert [h["operations"] for h in headers["CountingInOneProcess"]] == [2, 3, 4]
    fresh = headers["Counting"]
    assert [h["operations"] for h in fresh] == [1, 1, 1]
    assert [h["prepared"] for h in fresh] == [1, 1, 1]  # once, in the host, before the forks
    (host,) = {h["parent"] for h in fresh}
    assert len({h["pid"] for h in fresh} | {host}) == 4


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_forked_operation_that_misbehaves_gets_its_named_outcome(name: str) -> None:
    # The broken adapters again, each operation in a child of the host: the child's end is
    # the host's, and the suite's time and memory limits reach the child.
    status, text = BROKEN[name]
    adapter, outcomes, other = _run_broken(f"{FRESH}:{name}", status)
    assert {o.status for o in outcomes} == {status}, [(o.check, o.message) for o in outcomes]
    assert text in outcomes[0].message
    assert other.status == "pass", other.message
    failed = status in ("crash", "timeout", "resource")
    assert adapter.worker.starts == (2 if failed else 1), "a child's answer leaves the host up"


def test_a_forked_child_that_aborts_is_a_crash_and_the_next_operation_works() -> None:
    adapter = connect(f"{FRESH}:Abort", limits=LIMITS)
    try:
        with pytest.raises(AdapterFailure) as caught:
            adapter.run_trainer(CATALOG[TARGET])
        trace = adapter.run_replay(CATALOG["replay-uniform"])
    finally:
        adapter.close()
    message = str(caught.value)
    assert caught.value.status == "crash"
    assert "the worker ended during run_trainer (killed by signal 6 (SIGABRT))" in message
    ended = r"the child forked for run_trainer \(pid \d+\) ended without an answer"
    assert re.search(ended, message)
    assert message.count("Fatal Python error: Aborted") == 1  # the child's stack, not the host's
    assert list(trace.of_kind("sampled"))
    assert adapter.worker.starts == 2


def test_a_process_the_child_leaves_behind_does_not_hold_the_answer_back() -> None:
    adapter = connect(f"{FRESH}:LeavesAProcessBehind", limits=HANGS)  # 2 s per operation
    try:
        headers = [adapter.run_env(CATALOG["env-mixed"]).header for _ in range(2)]
    finally:
        adapter.close()
    assert [h["operations"] for h in headers] == [1, 1]
    assert adapter.worker.starts == 1


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_the_time_limit_kills_a_forked_child_with_its_worker() -> None:
    adapter = connect(f"{FRESH}:HangsNamingItsPid", limits=HANGS)
    try:
        with pytest.raises(AdapterFailure) as caught:
            adapter.run_trainer(CATALOG[TARGET])
    finally:
        adapter.close()
    assert caught.value.status == "timeout"
    found = re.search(r"hanging in pid (\d+)", str(caught.value))
    assert found, str(caught.value)
    pid = int(found.group(1))
    deadline = time.monotonic() + 5.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"the forked child {pid} outlived its worker"


def test_inline_isolation_refuses_an_adapter_that_needs_a_fresh_process() -> None:
    with pytest.raises(AdapterUnavailable) as caught:
        connect(f"{FRESH}:Counting", isolation="inline")
    message = str(caught.value)
    assert "needs a fresh process per operation" in message
    assert "fix: run it with --isolation process" in message


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_an_adapter_whose_prepare_raises_cannot_run(isolation: str) -> None:
    with pytest.raises(AdapterUnavailable) as caught:
        connect(f"{FRESH}:PrepareRaises", isolation=isolation, limits=LIMITS)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "prepare() raised" in message and "the warm-up cache is unreadable" in message
