"""The recurrent checks: refimpl passes every one on every recurrent scenario of the catalogue,
the catalogue exercises what each clause judges, and each check fails on a trace broken the
way its clause describes, naming the sequence, the position, the expected and the actual
value (and no check fails that the breakage does not drag along)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.conformance.helpers import blamed, failures
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.recurrent import (
    check_burn_in,
    check_carry,
    check_contiguous,
    check_initial_state,
    check_padding,
    check_reset_at_first,
    rollout_of,
)
from xpspec.protocol.adapter import AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Trace, TrainSequence
from xpspec.refimpl.adapter import RefimplAdapter

RECURRENT = {name: s for name, s in CATALOG.items() if s.kind == "recurrent"}
CHECKS = [c for c in ALL_CHECKS if c.capability == "recurrent"]
ENV = EnvSpec(num_envs=1, schedules=(FixedSchedule(3),))
CROSS = RecurrentScenario(ENV, steps=10, sequence_length=5, burn_in=2, batch_size=3, draws=1)
PAD = replace(CROSS, boundary="pad")
NO_CONTEXT = Context(lambda s: Trace(()), lambda s: Trace(()))


def test_reference_passes_every_recurrent_check() -> None:
    assert failures(RefimplAdapter(), "recurrent") == {}


def test_the_catalogue_exercises_every_clause() -> None:
    """Sequences that start mid-episode, cross a LAST into a FIRST, are padded, and have
    burn-in positions; a zero-start scenario whose stored states are not all 0."""
    seen = set()
    for scenario in RECURRENT.values():
        assert isinstance(scenario, RecurrentScenario)
        trace = RefimplAdapter().run_recurrent(scenario)
        rollout = rollout_of(trace)
        for seq in trace.of_kind("train_sequence"):
            first = seq.items[0]
            assert first is not None
            if rollout.state[first] > 0:
                seen.add(f"mid-episode start ({scenario.initial_state})")
            if any(
                i is not None and p and rollout.step_type[i] == int(StepType.FIRST)
                for p, i in enumerate(seq.items)
            ):
                seen.add("FIRST inside")
            if None in seq.items:
                seen.add("padding")
            if scenario.burn_in and seq.loss_mask[: scenario.burn_in] == (0,) * scenario.burn_in:
                seen.add("burn-in")
    assert seen == {
        "mid-episode start (stored)",
        "mid-episode start (zeros)",
        "FIRST inside",
        "padding",
        "burn-in",
    }


def _sequences(scenario: RecurrentScenario) -> tuple[Trace, list[TrainSequence]]:
    trace = RefimplAdapter().run_recurrent(scenario)
    return trace, list(trace.of_kind("train_sequence"))


def _with(trace: Trace, index: int, **fields: object) -> Trace:
    """``trace`` with the ``index``-th train sequence changed."""
    events, n = [], 0
    for e in trace.events:
        if isinstance(e, TrainSequence):
            e = replace(e, **fields) if n == index else e  # type: ignore[arg-type]
            n += 1
        events.append(e)
    return Trace(tuple(events), trace.header)


Check = Callable[[RecurrentScenario, Trace, Context], None]


def _fails(check: Check, scenario: RecurrentScenario, trace: Trace) -> CheckFailure:
    with pytest.raises(CheckFailure) as info:
        check(scenario, trace, NO_CONTEXT)
    return info.value


def _passes(checks: list[Check], scenario: RecurrentScenario, trace: Trace) -> None:
    for check in checks:
        check(scenario, trace, NO_CONTEXT)


def test_the_example_sequences_are_the_page_s() -> None:
    _, seqs = _sequences(CROSS)
    assert seqs[0].items == ((0, 0, 2), (0, 0, 3), (0, 1, 0), (0, 1, 1), (0, 1, 2))
    assert seqs[0].state_in == (2, 3, 0, 1, 2) and seqs[0].loss_mask == (0, 0, 1, 1, 1)


def test_initial_state_is_the_stored_one() -> None:
    trace, _ = _sequences(CROSS)
    broken = _with(trace, 0, state_in=(0, 1, 0, 1, 2))  # a zero start
    failure = _fails(check_initial_state, CROSS, broken)
    assert (failure.expected, failure.actual) == (2, 0)
    assert (
        failure.what
        == "draw 0 sequence 0 position 0: state received at (0, 0, 2), the stored state"
    )
    _passes([check_carry, check_reset_at_first, check_contiguous], CROSS, broken)
    # a zero-started run is what the variant zero-start asks for, and fails the clause
    zeros = replace(CROSS, initial_state="zeros")
    zero_run = RefimplAdapter().run_recurrent(zeros)
    check_initial_state(zeros, zero_run, NO_CONTEXT)
    assert _fails(check_initial_state, CROSS, zero_run).actual == 0
    with pytest.raises(CheckFailure, match="the initial state \\(variant zero-start\\)"):
        check_initial_state(zeros, trace, NO_CONTEXT)


def test_a_state_carried_into_a_first_is_a_missed_reset_only() -> None:
    trace, _ = _sequences(CROSS)
    broken = _with(trace, 0, state_in=(2, 3, 4, 5, 6))
    failure = _fails(check_reset_at_first, CROSS, broken)
    assert (failure.what, failure.expected, failure.actual) == (
        "draw 0 sequence 0 position 2: state received at the FIRST (0, 1, 0)",
        0,
        4,
    )
    _passes([check_carry, check_initial_state], CROSS, broken)


def test_a_state_not_carried_fails_carry() -> None:
    trace, _ = _sequences(CROSS)
    broken = _with(trace, 0, state_in=(2, 2, 0, 1, 2))  # the state frozen for one step
    failure = _fails(check_carry, CROSS, broken)
    assert (failure.expected, failure.actual) == (3, 2)
    assert "position 1" in failure.what and "carried from position 0" in failure.what


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        (((0, 0, 2), (0, 0, 3), (0, 1, 0), (0, 1, 1)), "positions"),
        (
            ((0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 1, 3)),
            "the stored step after (0, 0, 2)",
        ),
        (((0, 0, 2), None, (0, 1, 0), (0, 1, 1), (0, 1, 2)), "padding only after the real"),
        (((0, 0, 2), (0, 0, 3), (0, 1, 0), (0, 1, 1), (0, 3, 0)), "is one the rollout stepped"),
        ((None, None, None, None, None), "real positions"),
    ],
)
def test_a_sequence_that_is_no_stretch_of_stored_steps_fails_contiguous(
    items: tuple, problem: str
) -> None:
    trace, _ = _sequences(CROSS)
    broken = _with(trace, 0, items=items)
    assert problem in _fails(check_contiguous, CROSS, broken).what


def test_no_sequence_at_all_fails_contiguous() -> None:
    trace, _ = _sequences(CROSS)
    bare = Trace(tuple(e for e in trace.events if not isinstance(e, TrainSequence)))
    failure = _fails(check_contiguous, CROSS, bare)
    assert failure.actual == 0


def test_a_padded_sequence_must_stop_at_last() -> None:
    trace, _ = _sequences(PAD)
    across = ((0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 1, 3), (0, 2, 0))
    broken = _with(trace, 0, items=across, state_in=(0, 1, 2, 3, 0), loss_mask=(0, 0, 1, 0, 1))
    assert "stops at the LAST (0, 1, 3)" in _fails(check_contiguous, PAD, broken).what
    check_contiguous(CROSS, broken, NO_CONTEXT)  # the same sequence is fine across


def test_burn_in_and_trained_positions() -> None:
    trace, _ = _sequences(CROSS)
    trained = _with(trace, 0, loss_mask=(1, 0, 1, 1, 1))
    failure = _fails(check_burn_in, CROSS, trained)
    assert (failure.expected, failure.actual) == (
        0,
        1,
    ) and "burn-in position (0, 0, 2)" in failure.what
    untrained = _with(trace, 0, loss_mask=(0, 0, 0, 1, 1))
    failure = _fails(check_burn_in, CROSS, untrained)
    assert (failure.expected, failure.actual) == (1, 0) and "(0, 1, 0)" in failure.what
    # a LAST past the burn-in may be trained or not (timestep.loss-mask-last decides)
    check_burn_in(CROSS, _with(trace, 1, loss_mask=(0, 0, 1, 1, 1)), NO_CONTEXT)


def test_padding_is_masked() -> None:
    trace, seqs = _sequences(PAD)
    assert seqs[0].items[4] is None
    broken = _with(trace, 0, loss_mask=(0, 0, 1, 0, 1))
    failure = _fails(check_padding, PAD, broken)
    assert (failure.what, failure.expected, failure.actual) == (
        "draw 0 sequence 0 position 4: loss mask of a padding position",
        0,
        1,
    )
    check_burn_in(PAD, broken, NO_CONTEXT)  # padding is not the burn-in check's business


def test_a_run_with_nothing_to_judge_is_not_applicable_not_a_pass() -> None:
    # one-position sequences: no carry, no FIRST after the first position; no padding
    short = replace(CROSS, sequence_length=1, burn_in=0)
    trace = RefimplAdapter().run_recurrent(short)
    for check, what in (
        (check_carry, "a later position within an episode"),
        (check_reset_at_first, "a FIRST after its first position"),
        (check_padding, "a padding position"),
    ):
        with pytest.raises(Unsupported, match=what):
            check(short, trace, NO_CONTEXT)
    _passes([check_contiguous, check_initial_state, check_burn_in], short, trace)


def test_initial_state_is_not_applicable_when_no_sequence_starts_with_an_item() -> None:
    # every sequence padded at its front (as Tianshou 2.0.1's frame stacks are at an episode
    # start): no first position holds a stored item, so the clause has nothing to judge
    trace, seqs = _sequences(PAD)
    fronted = trace
    for index, seq in enumerate(seqs):
        fronted = _with(fronted, index, items=(None, *seq.items[1:]))
    with pytest.raises(Unsupported, match="first position holds a stored item"):
        check_initial_state(PAD, fronted, NO_CONTEXT)
    check_initial_state(PAD, trace, NO_CONTEXT)


class _RolloutWithoutReset(RefimplAdapter):
    """The rollout's state is never reset at FIRST; the learner trains from what was stored
    (and resets at FIRST itself)."""

    def info(self) -> AdapterInfo:
        return replace(super().info(), name="rollout-without-reset")

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        trace = super().run_recurrent(scenario)
        running: dict[int, int] = {}
        fixed: dict[tuple[int, int, int], int] = {}
        events = []
        for e in trace.events:
            if isinstance(e, EnvStep):
                states = []
                for env, k, t in zip(e.env, e.episode, e.t):
                    running[env] = running.get(env, -1) + 1
                    fixed[(env, k, t)] = running[env]
                    states.append(running[env])
                e = replace(e, policy_state=tuple(states))
            elif isinstance(e, TrainSequence) and e.items[0] is not None:
                shift = fixed[e.items[0]] - e.state_in[0]
                states, reset = [], False
                for item, s in zip(e.items, e.state_in):
                    reset = reset or (item is not None and s == 0 and item != e.items[0])
                    states.append(s if s == -1 or reset else s + shift)
                e = replace(e, state_in=tuple(states))
            events.append(e)
        return Trace(tuple(events), trace.header)


def test_a_rollout_that_never_resets_is_blamed_on_the_rollout_clause() -> None:
    causes, _ = blamed(_RolloutWithoutReset(), "recurrent")
    assert set(causes) == {"timestep.state-reset"}, causes


def test_every_recurrent_clause_has_a_check() -> None:
    clauses = {c for check in CHECKS for c in check.clauses}
    assert {
        "recurrent.contiguous",
        "recurrent.initial-state",
        "recurrent.reset-at-first",
        "recurrent.carry",
        "recurrent.burn-in",
        "recurrent.padding",
    } <= clauses
