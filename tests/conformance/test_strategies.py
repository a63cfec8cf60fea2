"""The generated trainer, relabel and recurrent scenarios: every check's strategy draws only scenarios
the check concerns, and they are scenarios the reference implementation runs and passes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from xpspec.conformance import strategies
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.checks.base import Context
from xpspec.conformance.checks.relabel import stored_ranges
from xpspec.conformance.strategies import relabel_scenarios, scenarios_for, trainer_configs
from xpspec.conformance.validate import validate_trace
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import RecurrentScenario, RelabelScenario, Scenario, TrainerScenario
from xpspec.protocol.trace import Trace
from xpspec.refimpl.adapter import RefimplAdapter

TRAINER = [c for c in ALL_CHECKS if c.capability == "trainer"]
INVARIANTS = [c for c in TRAINER if c.kind == "invariant"]
RELABEL = [c for c in ALL_CHECKS if c.capability == "relabel"]
RECURRENT = [c for c in ALL_CHECKS if c.capability == "recurrent" and c.kind == "invariant"]


_SCENARIO_TYPES: dict[str, Any] = {
    "trainer": TrainerScenario,
    "relabel": RelabelScenario,
    "recurrent": RecurrentScenario,
}


@pytest.mark.parametrize("check", TRAINER + RELABEL + RECURRENT, ids=lambda c: c.name)
def test_every_drawn_scenario_concerns_the_check(
    check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every scenario drawn is one the check concerns, and none was built only to be thrown
    away (a filter on the scenario would build more scenarios than the test sees)."""
    built = seen = 0
    kind = _SCENARIO_TYPES[check.capability]
    post_init = kind.__post_init__

    def counted(self: Scenario) -> None:
        nonlocal built
        built += 1
        post_init(self)

    monkeypatch.setattr(kind, "__post_init__", counted)

    @settings(
        max_examples=200,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=(),  # whatever the loaded profile says
    )
    @given(scenarios_for(check))
    def concerns(scenario: Scenario) -> None:
        nonlocal seen
        seen += 1
        assert check.applies(scenario), scenario

    concerns()
    assert built <= seen * 1.05, f"{built - seen} of {built} scenarios drawn were thrown away"


@pytest.mark.parametrize("check", INVARIANTS, ids=lambda c: c.name)
def test_drawn_scenarios_pass_on_the_reference_trainer(check: Check) -> None:
    adapter = RefimplAdapter()

    def run(scenario: Scenario) -> Trace:
        assert isinstance(scenario, TrainerScenario)
        return adapter.run_trainer(scenario)

    context = Context(run, run)

    @settings(max_examples=8, derandomize=True, database=None, deadline=None)
    @given(scenarios_for(check))
    def passes(scenario: TrainerScenario) -> None:
        trace = run(scenario)
        validate_trace(scenario, trace)
        check.verify(scenario, trace, context)

    passes()


@pytest.mark.parametrize("check", RELABEL, ids=lambda c: c.name)
def test_drawn_relabel_scenarios_pass_on_the_reference(check: Check) -> None:
    adapter = RefimplAdapter()

    def run(scenario: Scenario) -> Trace:
        assert isinstance(scenario, RelabelScenario)
        return adapter.run_relabel(scenario)

    context = Context(run, run)

    @settings(max_examples=8, derandomize=True, database=None, deadline=None)
    @given(scenarios_for(check))
    def passes(scenario: RelabelScenario) -> None:
        trace = run(scenario)
        validate_trace(scenario, trace)
        check.verify(scenario, trace, context)

    passes()


@pytest.mark.parametrize("check", RECURRENT, ids=lambda c: c.name)
def test_drawn_recurrent_scenarios_pass_on_the_reference(check: Check) -> None:
    """Each passes, or holds nothing the check judges (a sequence of one position has no
    carry); most are judged."""
    adapter = RefimplAdapter()
    judged = []

    def run(scenario: Scenario) -> Trace:
        assert isinstance(scenario, RecurrentScenario)
        return adapter.run_recurrent(scenario)

    context = Context(run, run)

    @settings(max_examples=20, derandomize=True, database=None, deadline=None)
    @given(scenarios_for(check))
    def passes(scenario: RecurrentScenario) -> None:
        trace = run(scenario)
        validate_trace(scenario, trace)
        try:
            check.verify(scenario, trace, context)
        except Unsupported:
            judged.append(False)
        else:
            judged.append(True)

    passes()
    assert sum(judged) > len(judged) / 2, f"{check.name}: judged {sum(judged)} of {len(judged)}"


def _sampled_in_progress(scenario: RelabelScenario) -> bool:
    """Whether a draw sampled a transition of an episode that had not ended."""
    trace = RefimplAdapter().run_relabel(scenario)
    ranges = stored_ranges(scenario, trace)
    return any(
        not ranges[(e, k)].complete
        for event in trace.of_kind("relabel")
        for e, k in zip(event.env, event.episode)
    )


def test_pinned_relabel_samples_are_drawn_during_an_episode() -> None:
    # Env 0's newest stored step is a MID when the draws begin, and the draws do sample
    # transitions of episodes that have not ended (refimpl samples every stored transition).
    in_progress = 0

    @settings(max_examples=30, derandomize=True, database=None, deadline=None)
    @given(relabel_scenarios(in_progress=True))
    def drawn(scenario: RelabelScenario) -> None:
        nonlocal in_progress
        trace = RefimplAdapter().run_relabel(scenario)
        ranges = stored_ranges(scenario, trace)
        newest = ranges[max(key for key in ranges if key[0] == 0)]
        assert not newest.complete and newest.t_end > newest.t_start
        in_progress += _sampled_in_progress(scenario)

    drawn()
    assert in_progress >= 15, f"{in_progress} of 30 pinned scenarios sampled an episode in progress"


def test_unpinned_relabel_space_holds_samples_during_episodes() -> None:
    seen: list[bool] = []

    @settings(max_examples=30, derandomize=True, database=None, deadline=None)
    @given(relabel_scenarios())
    def drawn(scenario: RelabelScenario) -> None:
        seen.append(_sampled_in_progress(scenario))

    drawn()
    assert 0 < sum(seen) < len(seen)


def test_every_trainer_check_has_a_strategy_and_no_other_name_does() -> None:
    names = {c.name for c in ALL_CHECKS if c.capability == "trainer"}
    assert set(strategies._CONCERNS) | strategies._EVERYWHERE == names
    assert not set(strategies._CONCERNS) & strategies._EVERYWHERE


def test_every_relabel_check_has_a_strategy_and_no_other_name_does() -> None:
    names = {c.name for c in RELABEL}
    assert set(strategies._RELABEL_CONCERNS) | strategies._RELABEL_EVERYWHERE == names
    assert not set(strategies._RELABEL_CONCERNS) & strategies._RELABEL_EVERYWHERE


def test_every_recurrent_check_with_a_pinned_boundary_exists() -> None:
    assert set(strategies._RECURRENT_CONCERNS) <= {c.name for c in RECURRENT}


def test_a_check_without_a_strategy_is_refused() -> None:
    new = Check("new-invariant", ("x.y",), "trainer", "invariant", lambda s, t, c: None)
    with pytest.raises(ValueError, match="new-invariant"):
        scenarios_for(new)
    replay = next(c for c in ALL_CHECKS if c.capability == "replay")
    with pytest.raises(ValueError, match="neither a trainer nor a relabel check"):
        scenarios_for(replay)


def test_clearing_needs_a_whole_buffer() -> None:
    with pytest.raises(ValueError, match="whole buffer"):
        trainer_configs(clear=True, whole_buffer=False)
