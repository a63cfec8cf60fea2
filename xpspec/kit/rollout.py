"""A per-env rollout memory as a learner adapter reads it after one on-policy update
(clauses ``learner.gae``, ``learner.truncation-bootstraps``, ``learner.update-count``).

Frameworks that keep a ``[time, env]`` rollout memory under Gymnasium's ``NEXT_STEP``
autoreset (skrl's ``RandomMemory`` for PPO, AgileRL's ``RolloutBuffer``) also store a row for
an episode's final observation: the policy acts on it, the vector env ignores the action and
returns the next episode's first observation. Such a row is the episode's row ``L`` in the
spec's terms. These helpers turn the memory's arrays into the learner events: the values in
them are the framework's, read from its memory, never computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xpspec.kit.episodes import episode_rows
from xpspec.kit.items import decode_item
from xpspec.protocol.trace import Advantages, Item, UpdatePlan

__all__ = ["RolloutRow", "rollout_advantages", "rollout_plan", "rollout_rows"]


@dataclass(frozen=True)
class RolloutRow:
    """One memory row after the update: its item, whether it holds an episode's final
    observation (the row after one that ended), its advantage, its return (the value
    target) and the normalised advantage the loss trained on."""

    item: Item
    final: bool
    advantage: float
    target: float
    normalized: float


def rollout_rows(
    observations: np.ndarray,
    ended: np.ndarray,
    advantages: np.ndarray,
    targets: np.ndarray,
    normalized: np.ndarray,
) -> list[list[RolloutRow]]:
    """Every env's rows in time order from ``[time, env]`` arrays (``observations`` with a
    trailing identity-encoding axis); ``ended[m, e]`` says row ``m`` of env ``e`` ended an
    episode (terminated or truncated), so row ``m + 1`` is that episode's final observation."""
    steps, envs = ended.shape[:2]
    arrays = (observations, advantages, targets, normalized)
    if any(a.shape[:2] != (steps, envs) for a in arrays):
        raise ValueError(
            f"rollout arrays: expected [time, env] = {[steps, envs]} for every array, got "
            f"{[list(a.shape[:2]) for a in arrays]} (observations, advantages, targets, "
            "normalised)"
        )
    return [
        [
            RolloutRow(
                decode_item(observations[m, e]),
                bool(m > 0 and ended[m - 1, e]),
                float(advantages[m, e]),
                float(targets[m, e]),
                float(normalized[m, e]),
            )
            for m in range(steps)
        ]
        for e in range(envs)
    ]


def rollout_advantages(rows: Sequence[Sequence[RolloutRow]]) -> list[Advantages]:
    """One event per episode, env-major, oldest first: its training rows, then its row ``L``
    (the final observation's row the framework stored, with loss mask 1 as it trained on it;
    for an episode still in progress a stand-in of zeros with loss mask 0)."""
    out = []
    for e, column in enumerate(rows):
        for (_, k), members in episode_rows([r.item for r in column]).items():
            trained = [column[i] for i in members if not column[i].final]
            final = [column[i] for i in members if column[i].final]
            if not trained:
                continue
            ts = [int(r.item[2]) for r in trained]
            adv = [r.advantage for r in trained]
            tgt = [r.target for r in trained]
            nrm = [r.normalized for r in trained]
            if final:
                last = final[0]
                ts.append(int(last.item[2]))
                adv.append(last.advantage)
                tgt.append(last.target)
                nrm.append(last.normalized)
                mask = (1,) * len(ts)
            else:
                ts.append(ts[-1] + 1)
                adv.append(0.0)
                tgt.append(0.0)
                nrm.append(0.0)
                mask = (1,) * (len(ts) - 1) + (0,)
            out.append(Advantages(e, k, tuple(ts), tuple(adv), tuple(tgt), tuple(nrm), mask))
    return out


def rollout_plan(
    rows: Sequence[Sequence[RolloutRow]], batches: Sequence[Sequence[Item]]
) -> UpdatePlan:
    """The mini-batches the update trained on, named by the items of their observations
    (every memory row holds a distinct item) as training rows: ``0 .. N - 1`` for the
    transitions env-major in time order, ``N ..`` for the rows of final observations."""
    trained = [r for column in rows for r in column if not r.final]
    finals = [r for column in rows for r in column if r.final]
    number = {r.item: i for i, r in enumerate([*trained, *finals])}
    plan = tuple(tuple(number[item] for item in batch) for batch in batches)
    return UpdatePlan(len(plan), plan)
