"""Blame: a scenario's failures are charged to the earliest one in pipeline order, the others
are downstream of it, and the matrix shows which is which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.zoo import MUTANTS, MutantAdapter
from xpspec.conformance.blame import Failure, cause_of, follows, stage
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Session
from xpspec.conformance.report import build_compliance, render_markdown

CHECKS = {c.name: c for c in ALL_CHECKS}


def _failure(clause: str, *, exact: bool = False, iteration: int | None = None) -> Failure:
    return Failure("c", (clause,), exact, iteration, 0)


def test_the_earliest_stage_is_the_cause_whatever_the_iteration() -> None:
    late_unroll = _failure("unroll.num-env-steps", iteration=9)
    early_train = _failure("train.synced-schedule", iteration=1)
    assert cause_of([early_train, late_unroll]) is late_unroll


def test_a_stated_violation_comes_before_a_comparison_in_the_same_stage() -> None:
    exact = _failure("preprocess.conservation", exact=True, iteration=1)
    invariant = _failure("preprocess.delayed-per-env", iteration=3)
    assert cause_of([exact, invariant]) is invariant


def test_within_a_stage_the_earliest_iteration_wins_and_unknown_is_last() -> None:
    known = _failure("preprocess.pending-at-end", iteration=12)
    unknown = _failure("preprocess.conservation")
    assert cause_of([unknown, known]) is known


def test_a_comparison_of_event_sequences_is_placed_by_the_first_event_that_differs() -> None:
    compared = Failure("c", ("preprocess.identity-is-plain",), False, 2, 0, diverged="train_call")
    warmup = _failure("train.warmup-gate", iteration=2)
    assert cause_of([compared, warmup]) is warmup
    assert stage("timestep.loss-mask-last") == stage("train.hooks")


def test_no_failure_has_no_cause() -> None:
    with pytest.raises(ValueError, match="at least one failure"):
        cause_of([])


def _outcome(mutant: str, check: str, scenario: str) -> object:
    session = Session(MutantAdapter(next(m for m in MUTANTS if m.name == mutant)), mutant)
    return session.evaluate(CHECKS[check], scenario, CATALOG[scenario])


def test_an_exact_schedule_difference_is_charged_to_its_own_clause() -> None:
    gate = _outcome("warmup-ignores-first", "warmup-gate", "warmup-b3")
    assert (gate.status, gate.charged, gate.downstream_of) == (  # type: ignore[attr-defined]
        "fail",
        ("train.warmup-gate",),
        "",
    )
    exact = _outcome("warmup-ignores-first", "exact-schedule", "warmup-b3")
    assert exact.charged == ("train.warmup-gate",)  # type: ignore[attr-defined]
    assert exact.downstream_of == "train.warmup-gate"  # type: ignore[attr-defined]


def test_a_declared_finding_is_charged_to_the_clause_of_its_first_violation(
    tmp_path: Path,
) -> None:
    """A deviation carries its charge as a failure does, so the matrix can tell the clause the
    check stopped at from the check's other clauses, which it never judged."""
    from xpspec.conformance.expectations import Expectations

    toml = tmp_path / "e.toml"
    toml.write_text('[[finding]]\nclauses = ["train.warmup-gate"]\nreason = "gate off by one"\n')
    mutant = next(m for m in MUTANTS if m.name == "warmup-ignores-first")
    session = Session(MutantAdapter(mutant), mutant.name, Expectations.load(toml))
    check = CHECKS["exact-schedule"]
    exact = session.evaluate(check, "warmup-b3", CATALOG["warmup-b3"])
    assert (exact.status, exact.variant) == ("deviation", "finding")  # type: ignore[attr-defined]
    assert len(check.clauses) > 1 and exact.charged == ("train.warmup-gate",)  # type: ignore[attr-defined]


def test_a_comparison_with_a_broken_rerun_is_downstream_of_the_rerun_cause() -> None:
    name = next(
        n
        for n, s in CATALOG.items()
        if s.kind == "trainer" and CHECKS["excluded-earn-nothing"].applies(s)
    )
    outcome = _outcome("identity-one-step-late", "excluded-earn-nothing", name)
    assert outcome.status == "fail"  # type: ignore[attr-defined]
    assert outcome.downstream_of == "preprocess.identity-is-plain"  # type: ignore[attr-defined]
    assert "in the run it was compared with" in outcome.message  # type: ignore[attr-defined]


def test_the_matrix_names_the_clause_a_downstream_failure_follows_from(tmp_path: Path) -> None:
    records = [
        {"type": "header", "adapter": "a", "framework": "a", "framework_version": "1"}
        | {"suite": "s", "spec": "0.1", "profile": "ci"},
        {
            "type": "result",
            "check": "exact",
            "clauses": ["x.one", "x.two"],
            "charged": ["x.two"],
            "scenario": "s",
            "status": "fail",
            "message": "m",
        },
        {
            "type": "result",
            "check": "other",
            "clauses": ["x.three"],
            "charged": ["x.three"],
            "downstream_of": "x.two",
            "scenario": "s",
            "status": "fail",
            "message": "m",
        },
        {"type": "footer", "status": "complete", "counts": {}},
    ]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    doc = build_compliance([path], ["x.one", "x.two", "x.three"])
    md = render_markdown(doc)
    assert "| `x.two` | FAIL |" in md
    assert "| `x.one` | FAIL ↓ x.two |" in md and "| `x.three` | FAIL ↓ x.two |" in md


def test_learner_failures_do_not_follow_from_one_another() -> None:
    # The learner's outputs are computed side by side: the normalisation check standardises
    # the trace's own advantages, so wrong advantages do not make it fail, nor the reverse.
    # skrl 2.0.0 under time_limit_bootstrap fails both, each for a reason of its own.
    stats = _failure("learner.stats-exclude-bootstrap")
    gae = _failure("learner.gae", exact=True)
    assert cause_of([gae, stats]) is stats
    assert not follows(gae, stats) and not follows(stats, gae)
    assert follows(gae, _failure("preprocess.conservation", iteration=1))
    # two checks of the same output (GAE's advantages) do follow from one another
    assert follows(_failure("learner.truncation-bootstraps", exact=True), gae)
    assert follows(_failure("train.warmup-gate"), _failure("unroll.num-env-steps"))


def test_two_learner_failures_of_one_run_are_each_a_failure_of_its_own() -> None:
    from tests.conformance.helpers import skew_advantages
    from xpspec.protocol.scenario import LearnerScenario
    from xpspec.protocol.trace import Trace
    from xpspec.refimpl.adapter import RefimplAdapter

    class ShiftsAndSkewsAdvantages(RefimplAdapter):
        """Every advantage 1 too high, and normalised values that are not standardised."""

        def run_learner(self, scenario: LearnerScenario) -> Trace:
            return skew_advantages(super().run_learner(scenario))

    session = Session(ShiftsAndSkewsAdvantages(), "x")
    scenario = CATALOG["learner-single"]
    for name in ("learner-gae", "learner-stats"):
        outcome = session.evaluate(CHECKS[name], "learner-single", scenario)
        assert (outcome.status, outcome.downstream_of) == ("fail", ""), outcome.message
