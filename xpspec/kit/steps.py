"""Time steps as an adapter reads them from a framework: an item and the fields a trace
records of it (clauses ``timestep.step-types`` and ``timestep.identity``).

Frameworks whose rows are transitions and whose envs reset in the step that ends an episode
(same-step auto-reset, clause ``timestep.auto-reset``) store a row per time step ``o_t`` but
neither the reward into ``t`` nor whether ``t`` follows a reset: both come from the env's
previous row. :func:`transition_step` and :class:`TransitionRows` name such rows; the LAST
time step exists there only as the next observation of a done row (:func:`last_step`).
Frameworks whose rows are transitions under next-step auto-reset (the policy also acts on
LAST, whose row is the reset's) store a row for every time step: :class:`NextStepRows` names
those from the flags of the env's previous row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Item

__all__ = [
    "NextStepRows",
    "Step",
    "TransitionRows",
    "last_step",
    "steps_from_columns",
    "transition_step",
]

_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


@dataclass(frozen=True)
class Step:
    """One time step: its item, step type, the reward into it and its discount, the policy
    state and action at it (``None``: a stateless policy, recorded as ``t``; ``-1``: no
    action was taken there) and its stored annotation."""

    item: Item
    step_type: int
    reward: float
    discount: float = 1.0
    policy_state: int | None = None
    action: int = -1
    annotation: float = 0.0

    @property
    def state(self) -> int:
        """The policy state recorded for this step (``t`` for a stateless policy)."""
        return int(self.item[2]) if self.policy_state is None else int(self.policy_state)


def _column(name: str, values: Sequence[object] | None, n: int) -> Sequence[object] | None:
    if values is not None and len(values) != n:
        raise ValueError(f"{name}: expected {n} values (one per item), got {len(values)}")
    return values


def steps_from_columns(
    items: Sequence[Item],
    step_types: Sequence[int],
    rewards: Sequence[float],
    discounts: Sequence[float] | None = None,
    *,
    policy_states: Sequence[int] | None = None,
    actions: Sequence[int] | None = None,
    annotations: Sequence[float] | None = None,
) -> list[Step]:
    """Columns of a framework batch, one entry per item, as steps; an absent column takes
    :class:`Step`'s default."""
    n = len(items)
    _column("step_types", step_types, n)
    _column("rewards", rewards, n)
    _column("discounts", discounts, n)
    _column("policy_states", policy_states, n)
    _column("actions", actions, n)
    _column("annotations", annotations, n)
    return [
        Step(
            item,
            int(step_types[i]),
            float(rewards[i]),
            1.0 if discounts is None else float(discounts[i]),
            None if policy_states is None else int(policy_states[i]),
            -1 if actions is None else int(actions[i]),
            0.0 if annotations is None else float(annotations[i]),
        )
        for i, item in enumerate(items)
    ]


def transition_step(
    item: Item,
    previous: tuple[float, bool] | None,
    *,
    first: bool | None = None,
    discount: float = 1.0,
    policy_state: int | None = None,
    action: int = -1,
    annotation: float = 0.0,
) -> Step:
    """The row starting at ``item`` under same-step resets, given the ``(reward, done)`` of
    its env's previous row (``None``: none). It is FIRST with reward 0 when there is no
    previous row or that one was done, else MID with the previous row's reward; a framework
    that marks reset rows itself passes ``first`` (the reward into a FIRST is still 0, into
    any other row the previous row's, 0 if there is none)."""
    if first is None:
        first = previous is None or previous[1]
    reward = 0.0 if first or previous is None else float(previous[0])
    step_type = _FIRST if first else _MID
    return Step(item, step_type, reward, discount, policy_state, action, annotation)


class TransitionRows:
    """The previous row of every env, to name each env's next row (:func:`transition_step`);
    envs are keyed by the item's ``env``."""

    def __init__(self) -> None:
        self._previous: dict[int, tuple[float, bool]] = {}

    def row(
        self,
        item: Item,
        *,
        first: bool | None = None,
        discount: float = 1.0,
        policy_state: int | None = None,
        action: int = -1,
        annotation: float = 0.0,
    ) -> Step:
        """The row starting at ``item`` (see :func:`transition_step`)."""
        previous = self._previous.get(int(item[0]))
        return transition_step(
            item,
            previous,
            first=first,
            discount=discount,
            policy_state=policy_state,
            action=action,
            annotation=annotation,
        )

    def follow(self, env: int, reward: float, done: bool) -> None:
        """Env ``env``'s newest row carries ``reward`` and ended its episode iff ``done``."""
        self._previous[int(env)] = (float(reward), bool(done))

    def restart(self, env: int) -> None:
        """Env ``env`` was reset: its next row is FIRST."""
        self._previous.pop(int(env), None)


def last_step(
    item: Item,
    reward: float,
    terminated: bool,
    *,
    policy_state: int | None = None,
    action: int = -1,
) -> Step:
    """The LAST time step ``item`` a done row holds as its next observation, with that
    row's reward; discount 0 iff the episode terminated (1 if it was truncated)."""
    return Step(item, _LAST, float(reward), 0.0 if terminated else 1.0, policy_state, action)


class NextStepRows:
    """The time steps that a framework's transition rows ``(o_t, a_t, r_t+1, o_t+1, flags)``
    start at under next-step auto-reset, named from what each env's previous row stored.

    Under next-step auto-reset the policy acts on every time step, LAST included, so every
    time step starts a row; the row of a LAST is the reset step's (the next episode's FIRST as
    its next observation, with the reward and flags the reset returned). A row is FIRST with
    reward 0 when it is its env's first; LAST when the previous row's ``terminated`` or
    ``truncated`` is set (discount 0 iff terminated); FIRST when the previous row started at
    a LAST; else MID. Every row but an env's first carries the previous row's reward (the
    reward into its time step). A framework that stores no ``truncated`` flag passes
    ``False``: its rows then say nothing of a truncation, and the LAST and the FIRST after it
    are named MID, as stored."""

    def __init__(self) -> None:
        self._previous: dict[int, tuple[int, float, bool, bool]] = {}

    def row(
        self,
        item: Item,
        *,
        policy_state: int | None = None,
        action: int = -1,
        annotation: float = 0.0,
    ) -> Step:
        """The row starting at ``item``, given its env's previous row (:meth:`follow`)."""
        previous = self._previous.get(int(item[0]))
        if previous is None:
            return Step(item, _FIRST, 0.0, 1.0, policy_state, action, annotation)
        step_type, reward, terminated, truncated = previous
        if terminated or truncated:
            discount = 0.0 if terminated else 1.0
            return Step(item, _LAST, reward, discount, policy_state, action, annotation)
        named = _FIRST if step_type == _LAST else _MID
        return Step(item, named, reward, 1.0, policy_state, action, annotation)

    def follow(self, step: Step, reward: float, terminated: bool, truncated: bool = False) -> None:
        """Env ``step.item[0]``'s newest row started at ``step`` and stored ``reward`` and
        the flags ``terminated`` and ``truncated`` of its transition."""
        env = int(step.item[0])
        self._previous[env] = (
            int(step.step_type),
            float(reward),
            bool(terminated),
            bool(truncated),
        )
