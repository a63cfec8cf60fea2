"""The toy env's episodes as learner operations see them (clauses ``learner.*``): how many
transitions the first time steps of an env hold, the rows of each episode in a batch, and the
events a learner that keeps no bootstrap row reports."""

from __future__ import annotations

from collections.abc import Sequence

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.trace import Advantages, Item

__all__ = ["episode_rows", "standin_bootstrap", "transitions_observed"]


def transitions_observed(spec: EnvSpec, seed: int, env: int, steps: int) -> int:
    """Transitions among env ``env``'s first ``steps`` time steps (a LAST and the FIRST after
    it are two time steps with no transition between them): what a framework that takes no
    step at a LAST collects for them, and what one that counts no reset as a step counts."""
    remaining, episode, count = steps, 0, 0
    while remaining > 0:
        length = spec.episode(seed, env, episode).length
        count += min(length, remaining - 1)
        remaining -= length + 1
        episode += 1
    return count


def episode_rows(items: Sequence[Item]) -> dict[tuple[int, int], list[int]]:
    """The rows of each ``(env, episode)`` among ``items``, episodes in order of first
    appearance, rows in batch order."""
    groups: dict[tuple[int, int], list[int]] = {}
    for row, item in enumerate(items):
        groups.setdefault((int(item[0]), int(item[1])), []).append(row)
    return groups


def standin_bootstrap(
    env: int,
    episode: int,
    rows: Sequence[tuple[int, float, float, float]],
    *,
    bootstrap_t: int | None = None,
    bootstrap_target: float = 0.0,
) -> Advantages:
    """An episode's ``(t, advantage, value target, normalised advantage)`` rows followed by
    a stand-in bootstrap row (``t`` one past the last, unless given; zeros, the value target
    ``bootstrap_target``; loss mask 0), for a framework that keeps no row for an episode's
    final observation. Its adapter must not declare the ``bootstrap`` observable: the
    stand-in would pass ``learner.bootstrap-timestep-masked`` by construction."""
    if not rows:
        raise ValueError(f"rows: expected at least one row of episode ({env}, {episode}), got 0")
    last = rows[-1][0] + 1 if bootstrap_t is None else bootstrap_t
    return Advantages(
        env,
        episode,
        (*(int(r[0]) for r in rows), int(last)),
        (*(float(r[1]) for r in rows), 0.0),
        (*(float(r[2]) for r in rows), float(bootstrap_target)),
        (*(float(r[3]) for r in rows), 0.0),
        (1,) * len(rows) + (0,),
    )
