"""What a filled replay buffer offers the sampler: its stored items and every valid window
with its exact probability (clauses ``replay.eviction``, ``replay.window-validity``,
``replay.boundary-policy``, ``replay.period-anchor``, ``replay.uniform-windows``).

Nothing in the view depends on a random number generator; the spec's worked examples on
replay print it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import torch

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.replay import ReplayBuffer
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["replay_projection"]

Item = list[int]


def replay_projection(
    env: EnvSpec, capacity: int, fill_steps: int, sampling: SamplingSpec, seed: int
) -> dict[str, Any]:
    """Stored items and every valid window (with its probability) after storing every item
    of ``fill_steps`` vector steps of ``env`` into per-env rings of ``capacity``.

    Returns ``{"stored": [[env, episode, t], ...] per env (oldest first), "windows": [...]}``
    where each window is ``{"env", "start" (absolute position), "items" (None marks padding),
    "probability" ("p/q")}``."""
    toy = ToyBatchEnv(env, seed)
    fields = {"observation": ((3,), torch.float32), "step_type": ((), torch.int64)}
    buffer = ReplayBuffer(env.num_envs, capacity, fields)
    written: list[list[tuple[int, int, int, int]]] = [[] for _ in range(env.num_envs)]
    step = toy.reset()
    for _ in range(fill_steps):
        buffer.add_row({"observation": step.observation, "step_type": step.step_type})
        for e in range(env.num_envs):
            o = step.observation[e].tolist()
            written[e].append((int(o[0]), int(o[1]), int(o[2]), int(step.step_type[e])))
        step = toy.step(torch.zeros(env.num_envs, dtype=torch.int64))
    sizes = buffer.sizes.tolist()
    stored = [
        [list(item[:3]) for item in written[e][len(written[e]) - sizes[e] :]]
        for e in range(env.num_envs)
    ]
    probabilities = buffer.window_probabilities(sampling)
    windows = []
    for e in range(env.num_envs):
        for start in buffer.valid_starts(e, sampling):
            items = _window_items(written[e], start, sampling)
            windows.append(
                {
                    "env": e,
                    "start": start,
                    "items": items,
                    "probability": str(probabilities.get((e, start), Fraction(0))),
                }
            )
    return {"stored": stored, "windows": windows}


def _window_items(
    written: list[tuple[int, int, int, int]], start: int, sampling: SamplingSpec
) -> list[Item | None]:
    """The items of window ``start``; under ``pad`` the items past the start's episode
    segment or past the newest write are ``None`` (padding)."""
    out: list[Item | None] = []
    alive = True
    for i in range(sampling.window_length):
        p = start + i
        if p >= len(written):
            alive = False
        elif i > 0 and sampling.boundary == "pad":
            before, here = written[p - 1][3], written[p][3]
            if before == StepType.LAST or here == StepType.FIRST:
                alive = False
        out.append(list(written[p][:3]) if alive else None)
    return out
