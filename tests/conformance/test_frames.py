"""Error records say where the adapter raised: the innermost frames of its traceback, not the
suite's own, in a worker and inline alike."""

from __future__ import annotations

import pytest

from tests.conformance.broken_adapters import TARGET
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Session
from xpspec.conformance.frames import where
from xpspec.conformance.harness import Limits, connect


def _lookup(table: dict[int, int]) -> int:
    return table[10]


def _rows() -> int:
    return _lookup({})


def _run() -> int:
    return _rows()


def _raised(call: object) -> BaseException:
    try:
        call()  # type: ignore[operator]
    except Exception as exc:
        return exc
    raise AssertionError("expected an exception")


def test_the_innermost_frames_come_first_with_their_callers() -> None:
    text = where(_raised(_run))
    assert text.startswith(" (at test_frames.py:")
    assert "in _lookup, called from test_frames.py:" in text
    assert text.index("_lookup") < text.index("_rows") < text.index("_run")


def test_the_limit_keeps_the_innermost() -> None:
    exc = _raised(_run)
    assert where(exc, limit=1) == where(exc, limit=1).split(", called from")[0]
    assert "_lookup" in where(exc, limit=1) and "_rows" not in where(exc, limit=1)
    assert where(exc, limit=0) == ""


def test_an_exception_never_raised_has_no_frames() -> None:
    assert where(KeyError(10)) == ""


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_an_error_record_names_the_adapter_frames_and_not_the_suites(isolation: str) -> None:
    adapter = connect(
        "tests.conformance.broken_adapters:Raises", isolation, Limits(timeout=60.0, memory=0)
    )
    session = Session(adapter, "Raises")
    try:
        check = next(c for c in ALL_CHECKS if c.name == "conservation")
        outcome = session.evaluate(check, TARGET, CATALOG[TARGET])
    finally:
        session.close()
    assert outcome.status == "error"
    last = outcome.message.splitlines()[-1]
    assert last.startswith("KeyError: 'a bug in the adapter' (at broken_adapters.py:")
    assert "in misbehave, called from broken_adapters.py:" in last and "in run_trainer" in last
    assert "engine.py" not in last and "host.py" not in last
