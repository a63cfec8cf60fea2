"""Learner-side preprocessing: episodes vs batches, bootstrap rows, GAE, n-step returns,
gradient-update counts and sharding (clauses ``learner.*``).

Two views of the same experience:

- **episodes path** — an :class:`Episode` holds ``L`` transitions: observations
  ``[L + 1, ...]`` (the final observation included), actions ``[L]``, rewards ``[L]``
  (``rewards[t]`` follows ``actions[t]``), and how it ended: ``terminated``, ``truncated`` or
  neither (an in-progress chunk);
- **batch path** — a :class:`TimeMajorBatch` ``[T, B]`` in the ALF convention used by the
  spec: row ``t`` pairs ``(obs_t, action_t)`` with ``reward_t`` = reward of the transition
  *into* ``t``, ``step_type`` FIRST/MID/LAST and ``discount`` 0 at a terminated LAST.

:func:`episodes_to_batch` and :func:`batch_to_episodes` convert between them. An episode of
``L`` transitions is ``L + 1`` rows in both: the ``L`` training rows and one bootstrap row that
carries the final observation (:func:`add_bootstrap_timestep`), so advantages and targets
computed on either path line up row for row.

Clauses:

- ``learner.bootstrap-timestep-masked`` — the row appended for bootstrapping carries the final
  observation, is excluded from every loss by the returned mask, and the caller's episode is
  never mutated.
- ``learner.truncation-bootstraps`` — GAE and value targets bootstrap from ``V(final obs)``
  unless the episode terminated: truncation and in-progress chunks both bootstrap.
- ``learner.stats-exclude-bootstrap`` — advantage normalisation uses the valid rows only.
- ``learner.nstep-episode-end`` — an n-step return stops at the episode end and at the newest
  stored step, and drops its bootstrap iff the episode terminated inside the window.
- ``learner.update-count`` — ``num_epochs * ceil(num_items / minibatch_size)`` updates, the
  last short minibatch kept.
- ``learner.gae`` — the episodes path and the batch path give identical advantages
  and value targets for the same data.
- ``learner.shard-episodes`` — sharding across learners never splits an episode and balances
  timesteps to within one episode length.

Framework behaviours are available as named variants; each cites the fact it reproduces.
"""

from __future__ import annotations

from xpspec.refimpl.learner.advantages import (
    AdvantageRows,
    BootstrapRows,
    GaeResult,
    add_bootstrap_timestep,
    batch_gae,
    batch_one_step_returns,
    episode_advantages,
    gae,
    normalize_advantages,
)
from xpspec.refimpl.learner.episodes import (
    Episode,
    TimeMajorBatch,
    batch_to_episodes,
    episodes_to_batch,
)
from xpspec.refimpl.learner.nstep import NStepReturns, batch_nstep_returns, nstep_returns
from xpspec.refimpl.learner.sharding import EpisodeSlice, shard_episodes
from xpspec.refimpl.learner.updates import (
    Minibatch,
    alf_adjusted_mini_batch_size,
    minibatch_plan,
    num_gradient_updates,
    rllib_sharded_minibatches,
)

__all__ = [
    "AdvantageRows",
    "BootstrapRows",
    "Episode",
    "EpisodeSlice",
    "GaeResult",
    "Minibatch",
    "NStepReturns",
    "TimeMajorBatch",
    "add_bootstrap_timestep",
    "alf_adjusted_mini_batch_size",
    "batch_gae",
    "batch_nstep_returns",
    "batch_one_step_returns",
    "batch_to_episodes",
    "episode_advantages",
    "episodes_to_batch",
    "gae",
    "minibatch_plan",
    "normalize_advantages",
    "nstep_returns",
    "num_gradient_updates",
    "rllib_sharded_minibatches",
    "shard_episodes",
]
