"""Frame stacking (clauses ``stack.*``): refimpl's model.

:func:`run_stack` unrolls the toy env ``steps`` vector steps; the policy of each env receives
the stack of that env's last ``num_frames`` frames, oldest first (``stack.frames``), restarted
at each FIRST (``stack.no-cross``) with the positions before the FIRST filled by the padding
rule (``stack.episode-start``: the first frame repeated, or the zero frame under variant
zero-fill). Every item is stored, alone, in a ring of ``capacity`` items per env; each sampled
item's stack is rebuilt from the ring by walking back to its episode's FIRST
(``stack.sample-equals-rollout``), and an item whose walk would leave the ring before it has
its frames is never sampled (``stack.earliest-ignored``).

:class:`Stacker` holds one rule per method, so a variant (or a broken stacker) replaces one.
"""

from __future__ import annotations

from collections import deque
from typing import Final, NamedTuple

import torch

from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Stacked, Trace
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["ZERO_FRAME", "Held", "Stacker", "run_stack"]

_FIRST: Final = int(StepType.FIRST)
ZERO_FRAME: Final[Item] = (0, 0, 0)
"""The item an all-zero frame decodes to (the toy env's observation ``[0, 0, 0]``)."""


class Held(NamedTuple):
    """One stored item and its step type."""

    item: Item
    step_type: int


class Stacker:
    """The frame stacker of a stack scenario, at rollout and at sample time."""

    def __init__(self, scenario: StackScenario) -> None:
        self.scenario = scenario
        self.k = scenario.num_frames

    def pad(self, first: Item) -> Item:
        """The frame of a position before the episode's FIRST ``first``
        (``stack.episode-start``): ``first`` itself, or the zero frame (variant zero-fill)."""
        return ZERO_FRAME if self.scenario.padding == "zeros" else first

    def restart(self, stack: tuple[Item, ...], first: Item) -> tuple[Item, ...]:
        """The stack at a FIRST, after ``stack`` (empty at the env's first step): ``k - 1``
        padding frames, then the FIRST (``stack.no-cross``: nothing of ``stack`` is kept)."""
        return (self.pad(first),) * (self.k - 1) + (first,)

    def push(self, stack: tuple[Item, ...], item: Item) -> tuple[Item, ...]:
        """The stack after a MID or LAST ``item``: the oldest frame out, ``item`` in
        (``stack.frames``)."""
        return (*stack[1:], item)

    def rebuild(self, ring: list[Held], position: int) -> tuple[Item, ...]:
        """The stack of ``ring[position]`` from the stored frames: back to the episode's FIRST
        or ``k`` frames, padded as at rollout (``stack.sample-equals-rollout``)."""
        frames = [ring[position].item]
        p = position
        while len(frames) < self.k and ring[p].step_type != _FIRST:
            p -= 1
            frames.append(ring[p].item)
        padding = [self.pad(frames[-1])] * (self.k - len(frames))
        return tuple(padding + frames[::-1])

    def samplable(self, ring: list[Held], position: int) -> bool:
        """Whether the ring still holds every frame of ``ring[position]``'s stack
        (``stack.earliest-ignored``): its ``k - 1`` predecessors, or those back to its FIRST."""
        p, n = position, 1
        while n < self.k and ring[p].step_type != _FIRST:
            if p == 0:
                return False
            p, n = p - 1, n + 1
        return True


def _columns(items: list[Item]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    return (
        tuple(i[0] for i in items),
        tuple(i[1] for i in items),
        tuple(i[2] for i in items),
    )


def _rollout(scenario: StackScenario, stacker: Stacker, events: list[Event]) -> list[deque[Held]]:
    """``steps`` vector steps: one ``Stacked`` rollout event per step, every item stored."""
    env = ToyBatchEnv(scenario.env, scenario.seed)
    rings: list[deque[Held]] = [deque(maxlen=scenario.capacity) for _ in range(env.num_envs)]
    stacks: list[tuple[Item, ...]] = [()] * env.num_envs
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    ts = env.reset()
    for n in range(scenario.steps):
        if n:
            ts = env.step(action)
        items: list[Item] = [
            (int(o[0]), int(o[1]), int(o[2])) for o in ts.observation.to(torch.int64).tolist()
        ]
        for e, (item, step_type) in enumerate(zip(items, ts.step_type.tolist())):
            first = step_type == _FIRST
            stacks[e] = stacker.restart(stacks[e], item) if first else stacker.push(stacks[e], item)
            rings[e].append(Held(item, int(step_type)))
        events.append(Stacked("rollout", n, *_columns(items), tuple(stacks)))
    return rings


def run_stack(scenario: StackScenario, stacker: type[Stacker] = Stacker) -> Trace:
    """refimpl's stack scenario: the rollout's ``Stacked`` events, then one per batch of
    ``batch_size`` items drawn uniformly among the samplable ones (one seeded generator)."""
    rule = stacker(scenario)
    events: list[Event] = []
    rings = [list(r) for r in _rollout(scenario, rule, events)]
    candidates = [
        (e, p) for e, ring in enumerate(rings) for p in range(len(ring)) if rule.samplable(ring, p)
    ]
    generator = torch.Generator().manual_seed(scenario.seed)
    for draw in range(scenario.draws):
        picks = torch.randint(len(candidates), (scenario.batch_size,), generator=generator)
        chosen = [candidates[i] for i in picks.tolist()]
        items = [rings[e][p].item for e, p in chosen]
        frames = tuple(rule.rebuild(rings[e], p) for e, p in chosen)
        events.append(Stacked("sample", draw, *_columns(items), frames))
    return Trace(tuple(events), {"producer": "refimpl"})
