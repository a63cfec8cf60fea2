"""RLlib 2.60.0's ``PrioritizedEpisodeReplayBuffer`` (DQN's default buffer) on a replay scenario
with a priority spec (clauses ``priority.*``). Sources are cited as ``file:function`` under
``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

**Driving it.** The buffer is ``PrioritizedEpisodeReplayBuffer(capacity=capacity * B,
alpha=alpha)``, filled as the plain replay row fills its ``EpisodeReplayBuffer``:
``SingleAgentEnvRunner.sample(num_timesteps=1)`` then ``buffer.add(chunks)`` until the fill's
non-reset steps are stored, and after every draw but the last until ``add_steps`` more vector
steps are (RLlib counts capacity in timesteps over all episodes and evicts whole episodes,
oldest first; ``utils/replay_buffers/prioritized_episode_buffer.py:add``). A draw is
``buffer.sample(batch_size_B=batch_size, n_step=max(1, W - 1), beta=beta)``, then
``buffer.update_priorities(|td| + eps)`` with the scenario's TD error of each sampled window,
in the order of the batch (RLlib applies them to ``_last_sampled_indices``, stores
``max(p, 1e-12) ** alpha`` in both segment trees and raises ``_max_priority``;
``update_priorities``).

**What RLlib holds.** One segment-tree node per stored transition: ``add`` appends
``(episode index, ts, tree index)`` to ``_indices`` for ``ts in range(len(episode))``, with the
mass ``_max_priority ** alpha`` (``_get_free_node_and_assign``). An episode's final observation
and the newest observation of a chunk start no transition and hold no node; the newest gets
one when the continuation chunk is added. The priorities event before a draw lists every node
of ``_indices``: the window named by the observation at ``ts`` of its stored episode, its mass
read from ``_sum_segment``. A sample draws ``idx = _sum_segment.find_prefixsum_idx(u * sum)``
and redraws while ``ts + n_step > len(episode)``; its probability is RLlib's ``p_sample =
_sum_segment[idx] / _sum_segment.sum()`` at the sampled node (read back from
``_last_sampled_indices`` before the update), its weight the ``extra_model_outputs["weights"]``
RLlib returned, ``(p_sample·N)^(-beta) / (p_min·N)^(-beta)`` with ``p_min`` from
``_min_segment`` (``sample``). A window of ``W`` items is the ``W`` observations of the stored
episode from the sampled ``ts`` (RLlib's item holds the first and the ``n_step``-th).

A ``sample`` call on a buffer holding no transition raises ``ZeroDivisionError`` (its
``p_min`` divides by the zero sum): that draw is recorded as drawing nothing.

**Not expressed** (:class:`~xpspec.protocol.adapter.Unsupported`): a draw from a buffer whose
episodes hold no window of ``W - 1`` transitions (RLlib redraws for ever; bounded as in the
replay row), same-step env specs (the replay row's reason).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

from xpspec.adapters.rllib import _DRAW_LIMIT, _SOURCE, _config, _env_steps, _fill, _seeded
from xpspec.kit.items import decode_item, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.trace import Event, Item, Priorities, Prioritized, Sampled, Trace

__all__ = ["held_masses", "run_prioritized"]

_BUFFER_PY = f"{_SOURCE}/utils/replay_buffers/prioritized_episode_buffer.py"


class _Stuck(Exception):
    """RLlib's prioritized sampler exceeded its bound of random draws."""


class _BoundedRandom:
    """The buffer's ``numpy`` generator, stopping its sampler (by raising :class:`_Stuck`
    out of it) after ``limit`` calls of ``random`` since the last reset: ``sample`` redraws
    while a drawn start is too close to its episode's end, for ever if every start is."""

    def __init__(self, rng: np.random.Generator, limit: int) -> None:
        self.rng, self.limit, self.draws = rng, limit, 0

    def random(self, *args: Any, **kwargs: Any) -> Any:
        self.draws += 1
        if self.draws > self.limit:
            raise _Stuck(self.draws)
        return self.rng.random(*args, **kwargs)

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        return self.rng.integers(*args, **kwargs)


def _node_window(buffer: Any, node: int, length: int) -> tuple[Item, ...]:
    """The ``length`` observations of the stored episode from the transition whose tree index
    is ``node`` (``_tree_idx_to_sample_idx`` -> ``_indices`` -> ``episodes``)."""
    episode_index, ts, _ = buffer._indices[buffer._tree_idx_to_sample_idx[node]]
    episode = buffer.episodes[episode_index - buffer._num_episodes_evicted]
    return tuple(decode_item(episode.get_observations(ts + i)) for i in range(length))


def held_masses(buffer: Any) -> list[tuple[Item, float]]:
    """Every node of the buffer's segment trees in ``_indices`` order: the window it names
    (the observation at ``ts`` of its stored episode) and its mass in ``_sum_segment``."""
    out = []
    for _, _, node in buffer._indices:
        out.append((_node_window(buffer, node, 1)[0], float(buffer._sum_segment[node])))
    return out


def _draw(
    buffer: Any, sc: ReplayScenario, priority: PrioritySpec, draw: int
) -> tuple[Sampled, Prioritized, list[Item]]:
    """One ``sample`` call and what RLlib computed for it, before any update."""
    width = sc.sampling.window_length
    buffer.rng.draws = 0
    try:
        batch = buffer.sample(
            batch_size_B=sc.batch_size, n_step=max(1, width - 1), beta=float(priority.beta)
        )
    except _Stuck:
        raise Unsupported(
            f"windows of {width} items: RLlib 2.60.0's PrioritizedEpisodeReplayBuffer.sample "
            f"redraws while ts + n_step > len(episode) (n_step {max(1, width - 1)}), and no "
            f"start was accepted within {buffer.rng.limit} draws (no stored episode holds "
            "one, so the loop would not end)",
            _BUFFER_PY,
        ) from None
    nodes = [int(n) for n in buffer._last_sampled_indices]
    total = float(buffer._sum_segment.sum())
    windows = tuple(_node_window(buffer, node, width) for node in nodes)
    for window, item in zip(windows, batch):
        if window[0] != decode_item(item.get_observations(0)):
            raise RuntimeError(
                f"sampled node: expected the item's first observation {window[0]}, got "
                f"{decode_item(item.get_observations(0))}"
            )
    computed = Prioritized(
        draw,
        tuple(float(buffer._sum_segment[node]) / total for node in nodes),
        tuple(float(item.get_extra_model_outputs("weights")[0]) for item in batch),
    )
    return Sampled(draw, windows), computed, [w[0] for w in windows]


def run_prioritized(sc: ReplayScenario) -> Trace:
    """The prioritized replay row (see the module docstring)."""
    priority = sc.priority
    assert priority is not None
    if sc.sampling.period != 1:
        raise Unsupported(
            f"period {sc.sampling.period}: RLlib 2.60.0's PrioritizedEpisodeReplayBuffer keeps "
            "a node for every stored transition; it has no grid of window starts",
            _BUFFER_PY,
        )
    events: list[Event] = []
    with _seeded(sc.seed):
        runner = SingleAgentEnvRunner(config=_config(sc.env, sc.seed))
        buffer: Any = PrioritizedEpisodeReplayBuffer(
            capacity=sc.capacity * sc.env.num_envs, alpha=float(priority.alpha)
        )
        limit = max(_DRAW_LIMIT, 50 * sc.batch_size)
        buffer.rng = _BoundedRandom(np.random.default_rng(sc.seed), limit)
        sampled = 0

        def fill(vector_steps: int) -> None:
            nonlocal sampled
            sampled = _fill(
                runner, buffer, _env_steps(sc.env, sc.seed, vector_steps), sampled, events
            )

        try:
            fill(sc.fill_steps)
            for draw in range(sc.draws):
                held = held_masses(buffer)
                events.append(
                    Priorities(draw, *item_columns([w for w, _ in held]), tuple(m for _, m in held))
                )
                try:
                    sampled_event, computed, starts = _draw(buffer, sc, priority, draw)
                except ZeroDivisionError:
                    if held:
                        raise
                    # sample() on a tree without a node divides by its zero sum
                    # (p_min = _min_segment.min() / total_segment_sum): nothing is drawn.
                    events.extend((Sampled(draw, ()), Prioritized(draw, (), ())))
                else:
                    events.extend((sampled_event, computed))
                    buffer.update_priorities(
                        np.array([float(priority.priority(s, draw)) for s in starts])
                    )
                if draw < sc.draws - 1 and priority.add_steps:
                    fill(sc.fill_steps + (draw + 1) * priority.add_steps)
        finally:
            runner.stop()
    return Trace(tuple(events), {"producer": "rllib", "seed": sc.seed})
