"""The engine classifies outcomes and never lets a broken adapter take the suite down."""

from __future__ import annotations

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import GENERATED, Session
from xpspec.conformance.expectations import Deviation, Expectations
from xpspec.conformance.harness import load_adapter
from xpspec.protocol.trace import Trace

SCENARIO = CATALOG["plain-u2-b3"]
CHECK = next(c for c in ALL_CHECKS if c.name == "conservation")


def _evaluate(path: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    return Session(load_adapter(path), path, timeout=timeout).evaluate(
        CHECK, "plain-u2-b3", SCENARIO
    )


def test_third_party_adapter_by_module_path() -> None:
    assert _evaluate("tests.conformance.third_party:External").status == "pass"
    assert _evaluate("tests.conformance.third_party:INSTANCE").status == "pass"


def test_registered_name() -> None:
    assert _evaluate("refimpl").status == "pass"


@pytest.mark.parametrize(
    ("path", "bad"),
    [("nonsense", "registered name"), ("tests.conformance.third_party:Missing", "no attribute")],
)
def test_unknown_adapter_is_a_clear_error(path: str, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        load_adapter(path)


def test_raising_adapter_is_an_error_with_repro() -> None:
    outcome = _evaluate("tests.conformance.third_party:Raises")
    assert outcome.status == "error"
    assert "framework exploded" in outcome.message and "xpspec trace" in outcome.message


def test_hanging_inline_adapter_times_out() -> None:
    outcome = _evaluate("tests.conformance.third_party:Hangs", timeout=0.5)
    assert outcome.status == "timeout" and "did not end within 0.5 s" in outcome.message


def test_unsupported_is_not_applicable() -> None:
    outcome = _evaluate("tests.conformance.third_party:Declines")
    assert outcome.status == "not-applicable" and "fractional" in outcome.message


def test_malformed_trace_names_the_first_bad_event() -> None:
    outcome = _evaluate("tests.conformance.third_party:Malformed")
    assert outcome.status == "error"
    assert "event #2 (env_step)" in outcome.message and "decodes to no real step" in outcome.message


def test_declared_deviation_and_stale_entry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    mutant = next(m for m in MUTANTS if m.name == "float-carry")
    toml = tmp_path / "x.toml"
    toml.write_text(
        '[[deviation]]\nclause = "unroll.fractional-schedule"\nvariant = "alf-float-carry"\nreason = "float carry"\n'
    )
    session = Session(MutantAdapter(mutant), "m", Expectations.load(toml))
    check = next(c for c in ALL_CHECKS if c.name == "fractional-schedule")
    assert (
        session.evaluate(check, "fractional-u1/10-b2", CATALOG["fractional-u1/10-b2"]).status
        == "deviation"
    )
    stale = Session(load_adapter("refimpl"), "refimpl", Expectations.load(toml))
    outcome = stale.evaluate(check, "fractional-u1/10-b2", CATALOG["fractional-u1/10-b2"])
    assert outcome.status == "pass" and outcome.stale
    # A generated scenario that does not provoke the deviation does not make it stale.
    outcome = stale.evaluate(check, GENERATED, CATALOG["fractional-u1/10-b2"])
    assert outcome.status == "pass" and not outcome.stale


def test_failure_message_names_clause_scenario_expected_actual() -> None:
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    mutant = next(m for m in MUTANTS if m.name == "no-state-reset")
    session = Session(MutantAdapter(mutant), "m")
    check = next(c for c in ALL_CHECKS if c.name == "state-reset")
    outcome = session.evaluate(check, "plain-u2-b3", SCENARIO)
    assert outcome.status == "fail"
    for part in ("timestep.state-reset", "plain-u2-b3", "expected:", "actual:", '"kind":"trainer"'):
        assert part in outcome.message


def test_declared_variant_must_reproduce(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    float_carry = next(m for m in MUTANTS if m.name == "float-carry")
    check = next(c for c in ALL_CHECKS if c.name == "fractional-schedule")
    name = "fractional-u1/10-b2"
    right = tmp_path / "right.toml"
    right.write_text(
        '[[deviation]]\nclause = "unroll.fractional-schedule"\nvariant = "alf-float-carry"\nreason = "r"\n'
    )
    outcome = Session(MutantAdapter(float_carry), "m", Expectations.load(right)).evaluate(
        check, name, CATALOG[name]
    )
    assert outcome.status == "deviation" and "reproduced by refimpl" in outcome.message
    # The same trace declared as a variant with no model is not explained by it: a failure.
    # (The loader refuses such a declaration; the engine is safe without the loader too.)
    wrong = Expectations(
        (Deviation("unroll.fractional-schedule", "r", "no-such-model"),), str(tmp_path)
    )
    outcome = Session(MutantAdapter(float_carry), "m", wrong).evaluate(check, name, CATALOG[name])
    assert outcome.status == "fail" and "do not reproduce" in outcome.message
    assert "no executable model of unroll.fractional-schedule/no-such-model" in outcome.message


def test_should_failure_is_a_warning_that_can_be_silenced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    mask_nothing = next(m for m in MUTANTS if m.name == "mask-nothing")
    check = next(
        c for c in ALL_CHECKS if c.name == "loss-mask"
    )  # timestep.loss-mask-last is SHOULD
    outcome = Session(MutantAdapter(mask_nothing), "m").evaluate(check, "plain-u2-b3", SCENARIO)
    assert (outcome.status, outcome.level) == ("fail", "SHOULD")
    toml = tmp_path / "s.toml"
    toml.write_text(
        '[[silence]]\nclause = "timestep.loss-mask-last"\nreason = "masks in the loss"\n'
    )
    silenced = Session(MutantAdapter(mask_nothing), "m", Expectations.load(toml)).evaluate(
        check, "plain-u2-b3", SCENARIO
    )
    assert silenced.status == "deviation" and "masks in the loss" in silenced.message
    must = next(c for c in ALL_CHECKS if c.name == "conservation")
    assert (
        Session(load_adapter("refimpl"), "r").evaluate(must, "plain-u2-b3", SCENARIO).level
        == "MUST"
    )


def test_a_crashing_check_is_an_error_not_a_crash() -> None:
    from xpspec.conformance.checks.base import Check

    def broken(scenario, trace, ctx):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("division by zero")

    check = Check("broken", ("trace.deterministic",), "trainer", "invariant", broken)
    outcome = Session(load_adapter("refimpl"), "refimpl").evaluate(check, "plain-u2-b3", SCENARIO)
    assert outcome.status == "error" and "check broken crashed" in outcome.message


def test_declared_variants_together_model_the_framework(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Failures that follow from declared variants are deviations, whichever clause they
    are about; with one variant missing from the declaration, they stay failures."""
    both = tmp_path / "both.toml"
    both.write_text(
        '[[deviation]]\nclause = "timestep.auto-reset"\nvariant = "same-step"\nreason = "transitions"\n'
        '[[deviation]]\nclause = "train.warmup-gate"\nvariant = "strict"\nreason = "strict gate"\n'
    )
    adapter = load_adapter("tests.conformance.third_party:SameStepStrict")
    session = Session(adapter, "s", Expectations.load(both))
    statuses = {}
    for name in ("warmup-strict", "warmup-boundary", "plain-u2-b3", "fractional-u3/10-b3"):
        for check in ALL_CHECKS:
            if check.capability == "trainer" and check.applies(CATALOG[name]):
                outcome = session.evaluate(check, name, CATALOG[name])
                statuses[(name, check.name)] = outcome.status
    assert set(statuses.values()) <= {"pass", "deviation", "not-applicable"}, {
        k: v for k, v in statuses.items() if v == "fail"
    }
    assert statuses[("plain-u2-b3", "auto-reset")] == "deviation"
    assert statuses[("plain-u2-b3", "exact-stores")] == "deviation"  # follows from same-step
    only_one = tmp_path / "one.toml"
    only_one.write_text(
        '[[deviation]]\nclause = "timestep.auto-reset"\nvariant = "same-step"\nreason = "r"\n'
    )
    partial = Session(adapter, "s", Expectations.load(only_one))
    check = next(c for c in ALL_CHECKS if c.name == "warmup-gate")
    assert statuses[("warmup-boundary", "warmup-gate")] == "deviation"
    assert partial.evaluate(check, "warmup-boundary", CATALOG["warmup-boundary"]).status == "fail"


def test_a_variant_model_is_not_judged_by_checks_of_undeclared_observables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The plain model explains an exclusion run of a framework without a global counter:
    global-counter (n/a for that adapter) does not reject the model on the stand-in counters,
    while a check the adapter can run still does."""
    toml = tmp_path / "plain.toml"
    toml.write_text(
        '[[deviation]]\nclause = "train.synced-schedule"\nvariant = "plain"\nreason = "r"\n'
    )
    session = Session(
        load_adapter("tests.conformance.third_party:PlainWithoutCounter"),
        "p",
        Expectations.load(toml),
    )
    name = "exclude-episodes"
    check = next(c for c in ALL_CHECKS if c.name == "synced-schedule")
    outcome = session.evaluate(check, name, CATALOG[name])
    assert outcome.status == "deviation", outcome.message
    counter = next(c for c in ALL_CHECKS if c.name == "global-counter")
    assert session.evaluate(counter, name, CATALOG[name]).status == "not-applicable"


def test_undeclared_observable_makes_its_checks_not_applicable() -> None:
    """An adapter without ``hooks`` (the framework has none) gets no verdict on
    train.after-train-iter."""
    check = next(c for c in ALL_CHECKS if c.name == "after-train-iter")
    outcome = _evaluate_check("tests.conformance.third_party:External", check)
    assert outcome.status == "not-applicable" and "'hooks'" in outcome.message
    assert _evaluate_check("refimpl", check).status == "pass"


def test_a_trace_whose_policy_holds_no_state_is_not_judged_on_state_reset() -> None:
    """An adapter that declares ``state`` for some rows and runs others with a stateless
    policy says so in the trace header's ``stateless``: state-reset is not applicable there,
    where the stand-in states would otherwise fail (or pass by construction)."""
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    mutant = next(m for m in MUTANTS if m.name == "no-state-reset")

    class Stateless(MutantAdapter):
        def run_trainer(self, scenario):  # type: ignore[no-untyped-def]
            trace = super().run_trainer(scenario)
            return Trace(trace.events, {**trace.header, "stateless": "a Q-network, no state"})

    check = next(c for c in ALL_CHECKS if c.name == "state-reset")
    outcome = Session(Stateless(mutant), "m").evaluate(check, "plain-u2-b3", SCENARIO)
    assert outcome.status == "not-applicable"
    assert "holds no state: a Q-network, no state" in outcome.message


def _evaluate_check(path: str, check):  # type: ignore[no-untyped-def]
    return Session(load_adapter(path), path).evaluate(check, "plain-u2-b3", SCENARIO)


def test_a_finding_is_reported_as_such(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conformance.zoo import MUTANTS, MutantAdapter

    no_reset = next(m for m in MUTANTS if m.name == "no-state-reset")
    toml = tmp_path / "f.toml"
    toml.write_text(
        '[[finding]]\nclauses = ["timestep.state-reset"]\nreason = "state kept across episodes"\n'
    )
    check = next(c for c in ALL_CHECKS if c.name == "state-reset")
    outcome = Session(MutantAdapter(no_reset), "m", Expectations.load(toml)).evaluate(
        check, "plain-u2-b3", SCENARIO
    )
    assert (outcome.status, outcome.variant) == ("deviation", "finding")
    assert "no spec variant reproduces it" in outcome.message
    other = next(c for c in ALL_CHECKS if c.name == "conservation")  # not covered: still judged
    assert (
        Session(MutantAdapter(no_reset), "m", Expectations.load(toml))
        .evaluate(other, "plain-u2-b3", SCENARIO)
        .status
        == "pass"
    )


class _StopsAfterTwoIterations:
    """refimpl's trainer, ended by "raising" after iteration 2 the way a framework's run
    ends: the trace keeps iterations 1-2 and names the exception in its header."""

    def __init__(self) -> None:
        from xpspec.refimpl.adapter import RefimplAdapter

        self._inner = RefimplAdapter()

    def info(self):  # type: ignore[no-untyped-def]
        return self._inner.info()

    def smoke(self) -> None:
        pass

    def run_trainer(self, scenario):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        from xpspec.protocol.trace import Trace

        sc = replace(scenario, trainer=replace(scenario.trainer, num_iterations=2))
        trace = self._inner.run_trainer(sc)
        return Trace(trace.events, {**trace.header, "stopped": "RuntimeError: no slice"})


def test_a_finding_with_stopped_covers_only_runs_that_stopped_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    check = next(c for c in ALL_CHECKS if c.name == "exact-schedule")
    name = "plain-u2-b3"  # 4 iterations: the stopped run misses two

    def evaluate(toml: str):  # type: ignore[no-untyped-def]
        path = tmp_path / "e.toml"
        path.write_text(toml)
        return Session(_StopsAfterTwoIterations(), "s", Expectations.load(path)).evaluate(
            check, name, CATALOG[name]
        )

    finding = '[[finding]]\nclauses = ["train.insufficient-data"]\nreason = "raises"\n'
    assert evaluate(finding + 'stopped = "no slice"\n').variant == "finding"
    assert evaluate(finding + 'stopped = "another error"\n').status == "fail"
    # A declared variant that does not explain the stop leaves it to the finding, whose
    # message says what the model left unexplained.
    variant = '[[deviation]]\nclause = "train.insufficient-data"\nvariant = "alf-lazy-buffer"\nreason = "r"\n'
    assert evaluate(variant).status == "fail"
    outcome = evaluate(variant + finding + 'stopped = "no slice"\n')
    assert outcome.variant == "finding" and "do not reproduce" in outcome.message


def test_a_check_that_passes_on_a_stopped_run_is_no_pass(tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = "plain-u2-b3"  # the stopped run holds two whole iterations, which conserve items
    conservation = next(c for c in ALL_CHECKS if c.name == "conservation")
    deterministic = next(c for c in ALL_CHECKS if c.name == "deterministic-trainer")

    def evaluate(check, toml: str = ""):  # type: ignore[no-untyped-def]
        path = tmp_path / "e.toml"
        path.write_text(toml)
        return Session(_StopsAfterTwoIterations(), "s", Expectations.load(path)).evaluate(
            check, name, CATALOG[name]
        )

    # The control: on the whole run of the same adapter the check passes.
    assert (
        Session(load_adapter("refimpl"), "r").evaluate(conservation, name, CATALOG[name]).status
        == "pass"
    )
    outcome = evaluate(conservation)
    assert outcome.status == "fail", outcome
    assert "ended the run early (RuntimeError: no slice)" in outcome.message
    assert "preprocess.conservation" in outcome.message and "reproduce:" in outcome.message
    # A finding that declares the stop covers it, whichever clauses it lists...
    stop = '[[finding]]\nclauses = ["train.insufficient-data"]\nreason = "it raises"\n'
    outcome = evaluate(conservation, stop + 'stopped = "no slice"\n')
    assert outcome.status == "cut-short", outcome
    assert "it raises" in outcome.message and "ended the run early" in outcome.message
    # ...but not another exception, nor a finding without a `stopped` text.
    assert evaluate(conservation, stop + 'stopped = "another error"\n').status == "fail"
    assert evaluate(conservation, stop).status == "fail"
    # A check of the trace as a whole judges the stopped run as it is.
    assert evaluate(deterministic).status == "pass"
