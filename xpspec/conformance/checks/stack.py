"""Checks of frame stacking (``spec/stack.md``, clauses ``stack.*``).

A stack is judged position by position against the item it belongs to: position ``i`` of the
stack of item ``(e, j, t)`` (``k`` frames, oldest first) is *real* when ``t - k + 1 + i >= 0``
(it must hold frame ``(e, j, t - k + 1 + i)``, ``stack.frames``) and *padding* otherwise (it
must hold the padding rule's frame, ``stack.episode-start``, and never a frame of the env's
earlier episodes, ``stack.no-cross``). Each padding position is charged to one of those two
clauses: a frame of an earlier episode of the same env to ``stack.no-cross``, any other wrong
frame to ``stack.episode-start``. The zero frame decodes to item ``(0, 0, 0)``: it is never
counted as a frame of env 0's first episode, and at a padding position of env 0's later
episodes (where it may be either) neither clause is charged with it.

The rollout's stacks are judged against the spec; a sampled item's stack against the stack the
rollout gave that item, so one wrong rollout stack is charged once. Every rollout item is
stored in a ring of ``capacity`` items per env and the draws follow the rollout, so the items
the ring held at the draws are each env's last ``capacity`` rollout items.
"""

from __future__ import annotations

from collections.abc import Iterator

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario, StackScenario
from xpspec.protocol.trace import Item, Stacked, Trace

__all__ = [
    "MISS_BOUND",
    "ZERO_FRAME",
    "check_earliest_ignored",
    "check_episode_start",
    "check_frames",
    "check_no_cross",
    "check_sample_equals_rollout",
]

ZERO_FRAME: Item = (0, 0, 0)

Row = tuple[Stacked, int, Item, tuple[Item, ...]]
"""An event, a row index in it, the row's item and its stack."""


def _sc(scenario: Scenario) -> StackScenario:
    assert isinstance(scenario, StackScenario)
    return scenario


def _rows(trace: Trace, source: str) -> Iterator[Row]:
    for e in trace.of_kind("stacked"):
        if e.source == source:
            for i, item in enumerate(zip(e.env, e.episode, e.t)):
                yield e, i, item, tuple(tuple(f) for f in e.frames[i])  # type: ignore[misc]


def _where(event: Stacked, row: int, position: int | None = None) -> str:
    unit = "vector step" if event.source == "rollout" else "sampled batch"
    at = "" if position is None else f" position {position}"
    return f"{event.source} {unit} {event.index} row {row}{at}"


def _width(sc: StackScenario, event: Stacked, row: int, stack: tuple[Item, ...]) -> None:
    if len(stack) != sc.num_frames:
        raise CheckFailure(f"{_where(event, row)}: frames in the stack", sc.num_frames, len(stack))


def _nothing_to_judge(what: str) -> Unsupported:
    """A run none of whose stacks holds what a clause judges: not applicable, never a pass."""
    return Unsupported(f"no stack of this run has {what}, so the clause cannot be judged on it")


def _expected_real(item: Item, k: int, position: int) -> Item | None:
    """The frame at ``position`` of ``item``'s stack, None for a padding position."""
    e, j, t = item
    tp = t - k + 1 + position
    return (e, j, tp) if tp >= 0 else None


def _rollout(trace: Trace) -> list[Row]:
    rows = list(_rows(trace, "rollout"))
    if not rows:
        raise CheckFailure("rollout stacks", "at least one stacked rollout event", 0)
    return rows


def check_frames(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """stack.frames: each real position of a rollout stack holds its frame of the item's own
    episode, oldest first, the item itself last."""
    sc = _sc(scenario)
    for event, row, item, stack in _rollout(trace):
        _width(sc, event, row, stack)
        for p, frame in enumerate(stack):
            want = _expected_real(item, sc.num_frames, p)
            if want is not None and frame != want:
                raise CheckFailure(f"{_where(event, row, p)}: frame of item {item}", want, frame)


def _crosses(item: Item, frame: Item) -> bool:
    """Whether ``frame`` is a frame of an earlier episode of ``item``'s env (the zero frame is
    the zero-fill, not env 0's first step)."""
    return frame != ZERO_FRAME and frame[0] == item[0] and frame[1] < item[1]


def _ambiguous(item: Item, frame: Item) -> bool:
    """The zero frame at a padding position of a later episode of env 0: the zero-fill, or
    env 0's first frame carried across episodes. Neither clause is charged with it; the other
    envs' padding tells the two apart."""
    return frame == ZERO_FRAME and item[0] == 0 and item[1] > 0


def _padding(sc: StackScenario, trace: Trace) -> Iterator[tuple[Stacked, int, int, Item, Item]]:
    """The padding positions of the rollout's stacks: event, row, position, item, frame."""
    for event, row, item, stack in _rollout(trace):
        _width(sc, event, row, stack)
        for p, frame in enumerate(stack):
            if _expected_real(item, sc.num_frames, p) is None:
                yield event, row, p, item, frame


def check_episode_start(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """stack.episode-start: each padding position holds the padding rule's frame (the
    episode's FIRST; the zero frame under variant zero-fill). A frame of an earlier episode is
    ``stack.no-cross``'s. Only positions where the two rules give different frames judge the
    clause: env 0's first episode starts with the zero frame, so a run whose other padding is
    all ambiguous (one env, zero-filled) cannot tell the rules apart and is not applicable."""
    sc = _sc(scenario)
    judged = False
    for event, row, p, item, frame in _padding(sc, trace):
        if _crosses(item, frame) or _ambiguous(item, frame):
            continue
        first = (item[0], item[1], 0)
        judged = judged or first != ZERO_FRAME
        want = ZERO_FRAME if sc.padding == "zeros" else first
        if frame != want:
            raise CheckFailure(
                f"{_where(event, row, p)}: padding of item {item} (padding {sc.padding!r})",
                want,
                frame,
            )
    if not judged:
        raise _nothing_to_judge(
            "a position before its episode's FIRST where repeating the FIRST and zero fill differ"
        )


def check_no_cross(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """stack.no-cross: no padding position holds a frame of an earlier episode of its env."""
    sc = _sc(scenario)
    judged = False
    for event, row, p, item, frame in _padding(sc, trace):
        judged = judged or item[1] > 0
        if _crosses(item, frame):
            raise CheckFailure(
                f"{_where(event, row, p)}: frame before the FIRST of item {item}'s episode",
                "a frame of its own episode or the padding",
                frame,
            )
    if not judged:
        raise _nothing_to_judge("a position before the FIRST of an episode that follows another")


def _held_and_seen(trace: Trace, capacity: int) -> tuple[set[Item], dict[Item, tuple[Item, ...]]]:
    """The items each env's ring held at the draws (its last ``capacity`` rollout items), and
    the stack the rollout gave each item."""
    per_env: dict[int, list[Item]] = {}
    seen: dict[Item, tuple[Item, ...]] = {}
    for _, _, item, stack in _rollout(trace):
        per_env.setdefault(item[0], []).append(item)
        seen[item] = stack
    held = {i for items in per_env.values() for i in items[-capacity:]}
    return held, seen


def _whole(item: Item, k: int, held: set[Item]) -> bool:
    """Whether the ring still holds every frame of ``item``'s stack of ``k``."""
    return all(f is None or f in held for f in (_expected_real(item, k, p) for p in range(k)))


def _sampled(
    sc: StackScenario, trace: Trace, whole: bool
) -> Iterator[tuple[Row, tuple[Item, ...]]]:
    """Sampled rows whose stack's frames the ring all held (``whole``) or not, each with the
    stack the rollout gave its item."""
    held, seen = _held_and_seen(trace, sc.capacity)
    rows = list(_rows(trace, "sample"))
    if not rows:
        raise CheckFailure("sampled stacks", "at least one stacked sample event", 0)
    for event, row, item, stack in rows:
        _width(sc, event, row, stack)
        if item not in held or item not in seen:
            if not whole:  # stack.sample-equals-rollout's
                continue
            raise CheckFailure(
                f"{_where(event, row)}: sampled item {item}",
                f"one of the last {sc.capacity} rollout items of env {item[0]} (the ring)",
                item,
            )
        if _whole(item, sc.num_frames, held) == whole:
            yield (event, row, item, stack), seen[item]


def check_sample_equals_rollout(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """stack.sample-equals-rollout: a sampled item whose frames the ring all holds carries the
    stack the policy received for it."""
    sc = _sc(scenario)
    judged = False
    for (event, row, item, stack), rollout in _sampled(sc, trace, whole=True):
        judged = True
        if stack != rollout:
            raise CheckFailure(
                f"{_where(event, row)}: stack of sampled item {item}", rollout, stack
            )
    if not judged:
        raise _nothing_to_judge("a sampled item whose frames the ring all held")


MISS_BOUND = 0.05
"""The largest probability with which a sampler that ignored ``stack.earliest-ignored``
(uniform over the ring) may have drawn none of the items the clause forbids, for their absence
from a run's samples to count as a pass."""


def check_earliest_ignored(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """stack.earliest-ignored: an item some frame of whose stack the ring has evicted is
    sampled only with its whole stack (stored whole); one rebuilt from the ring is not
    sampled. A run that sampled none of them passes only when the ring held such items and
    a sampler ignoring the clause would have drawn one with probability at least
    ``1 - MISS_BOUND``; otherwise their absence judges nothing and the clause is not
    applicable."""
    sc = _sc(scenario)
    judged = False
    for (event, row, item, stack), rollout in _sampled(sc, trace, whole=False):
        judged = True
        if stack != rollout:
            raise CheckFailure(
                f"{_where(event, row)}: item {item} sampled though the ring evicted frames of "
                "its stack",
                f"not sampled, or with its rollout stack {rollout}",
                stack,
            )
    if judged:
        return
    held, _ = _held_and_seen(trace, sc.capacity)
    exposed = [item for item in held if not _whole(item, sc.num_frames, held)]
    if not exposed:
        raise _nothing_to_judge("a held item some frame of whose stack the ring evicted")
    drawn = sum(1 for _ in _rows(trace, "sample"))
    miss = (1 - len(exposed) / len(held)) ** drawn
    if miss > MISS_BOUND:
        raise Unsupported(
            f"none of the {len(exposed)} of {len(held)} held items whose stacks lost a frame "
            f"was sampled, but a sampler ignoring the clause (uniform over the ring) would have "
            f"drawn none of them in {drawn} samples with probability {miss:.2f} "
            f"(> {MISS_BOUND}), so their absence cannot be judged"
        )
