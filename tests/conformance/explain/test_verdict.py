"""The verdict: the suite's checks on the trace, the cause first, as a run ranks them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conformance.explain.perturb import (
    extra_update,
    reference,
    store_one_iteration_later,
    with_events,
)
from xpspec.conformance.cli import main
from xpspec.conformance.explain.verdict import judge


def test_the_reference_itself_fails_no_check() -> None:
    scenario, trace = reference("delayed-mixed-b3")
    verdict = judge(scenario, trace, lambda s: trace)
    assert verdict.failures == () and verdict.cause is None and not verdict.malformed
    assert "delayed-per-env" in verdict.checked and "exact-stores" in verdict.checked


def test_a_late_store_is_charged_where_xpspec_check_charges_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    store_one_iteration_later(events, iteration=4, env=0)
    late = with_events(trace, events)
    verdict = judge(scenario, late, lambda s: trace)
    cause = verdict.cause
    assert cause is not None
    # env 0's episode ends in iteration 4: its release in iteration 5 breaks the delayed mode
    assert (cause.check, cause.clauses) == ("delayed-per-env", ("preprocess.delayed-per-env",))
    assert all(f.downstream for f in verdict.failures if f is not cause)
    assert len(verdict.failures) > 1  # the stores, the schedule, the windows follow from it
    path = tmp_path / "late.jsonl"
    path.write_text(late.to_jsonl())
    assert main(["check", "delayed-mixed-b3", str(path)]) == 1
    firsts = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("FAIL") and "downstream of" not in line
    ]
    assert len(firsts) == 1 and firsts[0].startswith(
        "FAIL  delayed-per-env [preprocess.delayed-per-env]"
    )


def test_an_extra_update_breaks_updates_per_call() -> None:
    scenario, trace = reference("plain-u2-b3")
    events = list(trace.events)
    extra_update(events, call=3)
    verdict = judge(scenario, with_events(trace, events), lambda s: trace)
    assert verdict.cause is not None
    assert verdict.cause.clauses == ("train.updates-per-call",)
    assert "updates of call 3" in verdict.cause.message


def test_a_malformed_trace_is_not_checked() -> None:
    scenario, trace = reference("plain-u2-b3")
    events = list(trace.events)
    step = next(n for n, e in enumerate(events) if e.kind == "env_step")
    events[step] = replace(events[step], env=(7, *events[step].env[1:]))  # no such env
    verdict = judge(scenario, with_events(trace, events), lambda s: trace)
    assert "env 7 outside" in verdict.malformed
    assert verdict.checked == () and verdict.cause is None


def test_checks_of_undeclared_observables_do_not_run() -> None:
    scenario, trace = reference("plain-u2-b3")
    everything = judge(scenario, trace, lambda s: trace).checked
    plain = judge(scenario, trace, lambda s: trace, capabilities=("trainer",)).checked
    assert "after-update" in everything and "after-update" not in plain
    assert "global-counter" in everything and "global-counter" not in plain


def test_independent_learner_failures_are_each_their_own_as_in_a_run() -> None:
    # The learner's outputs are computed side by side: wrong advantages and a wrong
    # normalisation are two failures, neither downstream of the other (as the engine says).
    from tests.conformance.helpers import skew_advantages
    from xpspec.conformance.catalog import CATALOG
    from xpspec.refimpl.adapter import RefimplAdapter

    scenario = CATALOG["learner-single"]
    good = RefimplAdapter().run_learner(scenario)
    bad = skew_advantages(good)
    verdict = judge(scenario, bad, lambda s: good)
    failed = {f.check: f.downstream for f in verdict.failures}
    assert failed.get("learner-gae") is False and failed.get("learner-stats") is False
    assert verdict.cause is not None
    (other,) = [f.check for f in verdict.independent]
    assert {verdict.cause.check, other} == {"learner-gae", "learner-stats"}
    # every view names both: the cause, and the failure of its own beside it
    from xpspec.conformance.explain import explain, render_html, render_text

    x = explain(scenario, bad, good, name="s", subject="t", against="r")
    text, page = render_text(x), render_html(x)
    assert "also failing on its own: " in text and f"(check {other})" in text
    assert "also, on their own: " in text.splitlines()[-1]
    assert 'id="independent"' in page and other in page.split('id="independent"')[1]


def test_a_check_that_breaks_is_listed_as_broken_never_as_passing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check raising something other than a failure judged nothing: explain names it, with
    its error, and does not count it among the checks that ran."""
    from xpspec.conformance import failing
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.explain.text_view import _verdict_lines

    def breaks(*_: object) -> None:
        raise ZeroDivisionError("no items")

    counter = next(c for c in ALL_CHECKS if c.name == "global-counter")
    monkeypatch.setattr(
        failing,
        "ALL_CHECKS",
        tuple(replace(c, verify=breaks) if c is counter else c for c in ALL_CHECKS),
    )
    scenario, trace = reference("plain-u2-b3")
    verdict = judge(scenario, trace, lambda s: trace)
    assert verdict.broken == (("global-counter", "ZeroDivisionError: no items"),)
    assert "global-counter" not in verdict.checked and verdict.cause is None
    lines = _verdict_lines(SimpleNamespace(verdict=verdict, clauses=()))  # type: ignore[arg-type]
    assert "check global-counter broke and judged nothing:" in lines
    assert "    ZeroDivisionError: no items" in lines
