"""Checks of recurrent state in training (``spec/recurrent.md``, clauses ``recurrent.*``).

Which sequences a learner trains on is its own choice; each check judges every sequence the
trace names on its own terms. The stored state a sequence starts from is the one the rollout
recorded for its first item (the ``EnvStep`` events' ``policy_state``), so a rollout that
fails to reset its state is charged to ``timestep.state-reset``, not here; a carried state is
judged against the framework's own previous position, so one wrong state is charged once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import RecurrentScenario, Scenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Item, Trace, TrainSequence

__all__ = [
    "Rollout",
    "check_burn_in",
    "check_carry",
    "check_contiguous",
    "check_initial_state",
    "check_padding",
    "check_reset_at_first",
    "crosses",
    "pads",
    "rollout_of",
]

_FIRST, _LAST = int(StepType.FIRST), int(StepType.LAST)


@dataclass(frozen=True)
class Rollout:
    """What the rollout recorded: each item's state and step type, and the item each env
    stepped to after it."""

    state: dict[Item, int]
    step_type: dict[Item, int]
    successor: dict[Item, Item]


def rollout_of(trace: Trace) -> Rollout:
    """The rollout of a recurrent run, from its ``EnvStep`` events."""
    state: dict[Item, int] = {}
    step_type: dict[Item, int] = {}
    successor: dict[Item, Item] = {}
    previous: dict[int, Item] = {}
    for e in trace.of_kind("env_step"):
        for i, item in enumerate(zip(e.env, e.episode, e.t)):
            state[item] = e.policy_state[i]
            step_type[item] = e.step_type[i]
            if item[0] in previous:
                successor[previous[item[0]]] = item
            previous[item[0]] = item
    return Rollout(state, step_type, successor)


def crosses(scenario: Scenario) -> bool:
    """Recurrent scenarios whose sequences may run into a FIRST (boundary ``cross``)."""
    return isinstance(scenario, RecurrentScenario) and scenario.boundary == "cross"


def pads(scenario: Scenario) -> bool:
    """Recurrent scenarios whose sequences stop at LAST and are padded (boundary ``pad``)."""
    return isinstance(scenario, RecurrentScenario) and scenario.boundary == "pad"


def _nothing_to_judge(what: str) -> Unsupported:
    """A run none of whose sequences holds what a clause judges: its check cannot fail on
    it, so it is not applicable (never a pass)."""
    return Unsupported(f"no sequence of this run has {what}, so the clause cannot be judged on it")


def _sc(scenario: Scenario) -> RecurrentScenario:
    assert isinstance(scenario, RecurrentScenario)
    return scenario


def _where(seq: TrainSequence, p: int | None = None) -> str:
    at = "" if p is None else f" position {p}"
    return f"draw {seq.draw} sequence {seq.index}{at}"


def _real(seq: TrainSequence) -> Iterator[tuple[int, Item]]:
    """The real positions of a sequence and their items."""
    for p, item in enumerate(seq.items):
        if item is not None:
            yield p, item


def _stored_type(rollout: Rollout, seq: TrainSequence, p: int, item: Item) -> int:
    if item not in rollout.step_type:
        raise CheckFailure(
            f"{_where(seq, p)}: item {item} is one the rollout stepped",
            "an item of the env_step events",
            item,
            clause="recurrent.contiguous",
        )
    return rollout.step_type[item]


def check_contiguous(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.contiguous: ``sequence_length`` positions, the real ones first and each the
    stored step after the previous one in its env (past a LAST only with boundary cross)."""
    sc = _sc(scenario)
    rollout = rollout_of(trace)
    sequences = list(trace.of_kind("train_sequence"))
    if not sequences:
        raise CheckFailure("sequences trained on", "at least one train_sequence event", 0)
    for seq in sequences:
        if len(seq.items) != sc.sequence_length:
            raise CheckFailure(f"{_where(seq)}: positions", sc.sequence_length, len(seq.items))
        real = [item is not None for item in seq.items]
        if False in real and True in real[real.index(False) :]:
            n = sum(real)
            raise CheckFailure(
                f"{_where(seq)}: padding only after the real positions",
                ["real"] * n + ["pad"] * (len(real) - n),
                ["real" if r else "pad" for r in real],
            )
        if not real[0]:
            raise CheckFailure(f"{_where(seq)}: real positions", ">= 1", 0)
        before: Item | None = None
        for p, item in _real(seq):
            _stored_type(rollout, seq, p, item)
            if before is not None:
                want = rollout.successor.get(before)
                if item != want:
                    raise CheckFailure(
                        f"{_where(seq, p)}: the stored step after {before}", want, item
                    )
                if sc.boundary == "pad" and rollout.step_type[before] == _LAST:
                    raise CheckFailure(
                        f"{_where(seq, p)}: with boundary 'pad' the sequence stops at the "
                        f"LAST {before}",
                        None,
                        item,
                    )
            before = item


def check_initial_state(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.initial-state: a sequence's first position receives the state the policy
    received at that item in the rollout (variant zero-start: 0; not applicable to a run none
    of whose sequences starts with a stored item)."""
    zeros = _sc(scenario).initial_state == "zeros"
    rollout = rollout_of(trace)
    judged = False
    for seq in trace.of_kind("train_sequence"):
        if not seq.items or seq.items[0] is None:
            continue  # recurrent.contiguous
        item = seq.items[0]
        if item not in rollout.state:
            continue  # recurrent.contiguous
        judged = True
        want = 0 if zeros else rollout.state[item]
        source = "the initial state (variant zero-start)" if zeros else "the stored state"
        if seq.state_in[0] != want:
            raise CheckFailure(
                f"{_where(seq, 0)}: state received at {item}, {source}", want, seq.state_in[0]
            )
    if not judged:
        raise _nothing_to_judge("a sequence whose first position holds a stored item")


def check_reset_at_first(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.reset-at-first: a later position whose item is FIRST receives the initial
    state (not applicable to a run whose sequences hold no FIRST after their first
    position)."""
    rollout = rollout_of(trace)
    judged = False
    for seq in trace.of_kind("train_sequence"):
        for p, item in _real(seq):
            if not p or rollout.step_type.get(item) != _FIRST:
                continue
            judged = True
            if seq.state_in[p] != 0:
                raise CheckFailure(
                    f"{_where(seq, p)}: state received at the FIRST {item}", 0, seq.state_in[p]
                )
    if not judged:
        raise _nothing_to_judge("a FIRST after its first position")


def check_carry(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.carry: every other later real position receives the state the network
    returned at the previous position (the counting network: the previous state plus one);
    not applicable to a run with no such position (sequences of one position)."""
    rollout = rollout_of(trace)
    judged = False
    for seq in trace.of_kind("train_sequence"):
        for p, item in _real(seq):
            if not p or seq.items[p - 1] is None or item not in rollout.step_type:
                continue  # the first position, or recurrent.contiguous
            if rollout.step_type[item] == _FIRST:
                continue  # recurrent.reset-at-first
            judged = True
            want = seq.state_in[p - 1] + 1
            if seq.state_in[p] != want:
                raise CheckFailure(
                    f"{_where(seq, p)}: state received at {item}, carried from position {p - 1}",
                    want,
                    seq.state_in[p],
                )
    if not judged:
        raise _nothing_to_judge("a later position within an episode")


def check_burn_in(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.burn-in: real positions before ``burn_in`` have loss mask 0; real positions
    from ``burn_in`` on have loss mask 1, except a LAST (``timestep.loss-mask-last``'s
    business). A padding position's mask is ``recurrent.padding``'s."""
    burn_in = _sc(scenario).burn_in
    rollout = rollout_of(trace)
    for seq in trace.of_kind("train_sequence"):
        for p, item in _real(seq):
            mask = seq.loss_mask[p]
            if p < burn_in:
                if mask != 0:
                    raise CheckFailure(
                        f"{_where(seq, p)}: loss mask of the burn-in position {item} "
                        f"({burn_in} burn-in positions)",
                        0,
                        mask,
                    )
            elif rollout.step_type.get(item) != _LAST and mask != 1:
                raise CheckFailure(
                    f"{_where(seq, p)}: loss mask of the trained position {item}", 1, mask
                )


def check_padding(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """recurrent.padding: every padding position has loss mask 0 (not applicable to a run
    whose sequences hold no padding)."""
    judged = False
    for seq in trace.of_kind("train_sequence"):
        for p, item in enumerate(seq.items):
            if item is not None:
                continue
            judged = True
            if seq.loss_mask[p] != 0:
                raise CheckFailure(
                    f"{_where(seq, p)}: loss mask of a padding position", 0, seq.loss_mask[p]
                )
    if not judged:
        raise _nothing_to_judge("a padding position")
