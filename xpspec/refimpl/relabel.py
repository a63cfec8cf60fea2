"""Hindsight relabeling at sample time and episode annotation at store time (clauses
``relabel.*``).

Time steps of an episode are ``t = 0..L`` (the ALF row convention): the transition "at
``t``" goes from ``s_t`` to ``s_{t+1}`` under the goal stored with ``s_t``, and its reward is
the goal reward of ``s_{t+1}``'s achieved goal. An episode held by a buffer is stored up to
``t_end`` (its LAST if complete, the newest stored step if in progress), from ``t_start``
(0 unless its head was evicted); a transition at ``t`` can be sampled iff
``t_start <= t < t_end``.

Sample time (:func:`relabel`), spec default (clauses ``relabel.eligible-goals``,
``relabel.eligible-goals``, ``relabel.ratio``, ``relabel.reward-recomputed``):

- goal sources are achieved goals of states reached by a transition: ``future`` draws
  uniformly from ``t+1..t_end`` (the successor states, own successor included), ``final``
  takes ``t_end``, ``episode`` draws uniformly from ``max(1, t_start)..t_end``;
- in-progress episodes take part, with ``t_end`` = the newest stored step;
- exactly ``floor(ratio * B)`` rows are relabeled (``ratio`` an exact rational), chosen
  uniformly without replacement with the generator: an exact count keeps the relabeled
  fraction reproducible, and a uniform choice keeps it independent of the sampler's row
  order (ALF orders rows env-major and recent-first, SB3 returns real rows then virtual
  ones, so "the first/last k rows" would tie relabeling to envs or recency);
- ``unit="episode"`` instead relabels every sampled row of ``floor(ratio * E)`` of the ``E``
  distinct episodes in the batch, each row with its own draw;
- rewards of relabeled rows are recomputed with the env's goal reward
  (:func:`goal_rewards`, the vectorised :func:`xpspec.protocol.env_spec.goal_reward`); other rows
  keep their goal and reward; the stored data is never modified.

Store time (:func:`annotate_episode`, clause ``relabel.placement``) runs once, when an
episode reaches its LAST (episode-delayed preprocessing): every step gets the hindsight
success flag (the episode reached its desired goal) and, optionally, the final achieved goal
as its desired goal with rewards recomputed.

When the two placements agree and when they do not (clause ``relabel.placement``):

- **equivalent**: strategy ``final`` with ratio 1 on complete episodes. Every sampled
  transition at ``t`` gets goal ``ag[L]`` and reward ``r(ag[t+1], ag[L])`` — exactly the
  stored annotation of step ``t`` (goal) and ``t + 1`` (reward), whatever the sampler does;
- **not equivalent**: ``future`` and ``episode`` redraw the goal every time a transition is
  sampled, store time fixes one goal per step once; in-progress episodes are relabeled at
  sample time against the newest stored step (which moves as the episode grows) but cannot
  be annotated before their LAST; with ratio < 1 sample time mixes relabeled and original
  rows in every batch, store time replaces a step's goal for good; the success flag needs
  the whole episode and exists only at store time.

Framework conventions are named variants of :func:`relabel` (facts in peers.md and alf.md):

- ``spec``: future ``t+1..t_end``, final ``t_end``, episode ``max(1, t_start)..t_end``;
  ``floor(ratio * B)`` rows chosen uniformly;
- ``sb3-2.9.2``: the spec's goal steps (``randint(t, ep_len)`` over next achieved goals);
  complete, wholly stored episodes only (in-progress ones are never sampled); the last
  ``int(ratio * B)`` rows of the returned batch (real rows first, then virtual ones);
- ``torchrl-0.14.1``: the root achieved goal of a transition row, i.e. future
  ``t..t_end-1``, final ``t_end-1``, episode ``t_start..t_end-1``; the first
  ``int(ratio * B)`` rows;
- ``alf``: future only, ``t+1..t_end`` (``[last, end]`` inclusive); each row independently
  with probability ``ratio`` (``rand(B) < her_proportion``);
- ``tianshou-2.0.1``: future only, per episode: ``int(ratio * E)`` of the ``E`` distinct
  episodes, every sampled row of a chosen episode gets one shared goal step
  ``t_max + 1 + round(U * (t_end - 1 - t_max))`` from its latest sampled ``t_max``.

Sources: SB3 2.9.2 ``her/her_replay_buffer.py`` (peers.md §4.4, ran); TorchRL 0.14.1
``data/replay_buffers/her.py`` with the default ``achieved_goal_key`` (peers.md §2.5; with
``("next", "achieved_goal")`` it equals the spec); ALF ``HindsightExperienceTransformer``
(alf.md §5; ``rand(B) < her_proportion``, future in ``[last, end]``); Tianshou 2.0.1
``data/buffer/her.py`` (peers.md §3.5, ran; ``ratio`` is ``future_p = 1 - 1/future_k``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import torch

from xpspec.protocol.codec import parse_fraction
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import ItemId
from xpspec.protocol.step_type import StepType

__all__ = [
    "Annotation",
    "EpisodeGoals",
    "Relabeled",
    "SampledTransitions",
    "StoredEpisode",
    "annotate_episode",
    "eligible_goal_steps",
    "goal_rewards",
    "relabel",
]

Strategy = Literal["future", "final", "episode"]
RatioUnit = Literal["transition", "episode"]
RelabelVariant = Literal["spec", "sb3-2.9.2", "torchrl-0.14.1", "alf", "tianshou-2.0.1"]
RewardFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_VARIANTS = ("spec", "sb3-2.9.2", "torchrl-0.14.1", "alf", "tianshou-2.0.1")
_STRATEGIES: dict[str, tuple[str, ...]] = {
    "spec": ("future", "final", "episode"),
    "sb3-2.9.2": ("future", "final", "episode"),
    "torchrl-0.14.1": ("future", "final", "episode"),
    "alf": ("future",),
    "tianshou-2.0.1": ("future",),
}
_UNITS: dict[str, tuple[str, ...]] = {
    "spec": ("transition", "episode"),
    "sb3-2.9.2": ("transition",),
    "torchrl-0.14.1": ("transition",),
    "alf": ("transition",),
    "tianshou-2.0.1": ("episode",),
}


def goal_rewards(achieved: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
    """Row-wise :func:`xpspec.protocol.env_spec.goal_reward`: 0.0 where the goals are equal in
    every coordinate, else -1.0; ``[B, G] x [B, G] -> [B]``."""
    equal = (achieved == desired).all(-1)
    return torch.where(equal, 0.0, -1.0).to(torch.float32)


# -- stored data and samples ----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StoredEpisode:
    """What a buffer holds of one episode for relabeling: the achieved goals ``[n, G]`` of
    time steps ``t_start..t_end`` (``t_end = t_start + n - 1``) and whether ``t_end`` is the
    episode's LAST."""

    env: int
    episode: int
    achieved_goal: torch.Tensor
    complete: bool
    t_start: int = 0

    def __post_init__(self) -> None:
        if self.achieved_goal.dim() != 2 or self.achieved_goal.shape[0] < 1:
            raise ConfigError(
                "stored.achieved_goal", tuple(self.achieved_goal.shape), "shape [n >= 1, G]"
            )
        if not isinstance(self.t_start, int) or self.t_start < 0:
            raise ConfigError("stored.t_start", self.t_start, "an integer >= 0")

    @property
    def t_end(self) -> int:
        return self.t_start + int(self.achieved_goal.shape[0]) - 1

    def goal_at(self, t: torch.Tensor) -> torch.Tensor:
        """Achieved goals of time steps ``t`` (absolute)."""
        return self.achieved_goal[t - self.t_start]


@dataclass(frozen=True, eq=False)
class SampledTransitions:
    """``B`` sampled transitions: row ``i`` is the transition at time step ``t[i]`` of
    ``store[episode_index[i]]``, with its stored desired goal ``[B, G]`` and reward ``[B]``."""

    episode_index: torch.Tensor
    t: torch.Tensor
    desired_goal: torch.Tensor
    reward: torch.Tensor

    def __post_init__(self) -> None:
        (b,) = self.episode_index.shape
        if tuple(self.t.shape) != (b,):
            raise ConfigError("sample.t", tuple(self.t.shape), f"shape [{b}]")
        if tuple(self.reward.shape) != (b,):
            raise ConfigError("sample.reward", tuple(self.reward.shape), f"shape [{b}]")
        if self.desired_goal.dim() != 2 or self.desired_goal.shape[0] != b:
            raise ConfigError(
                "sample.desired_goal", tuple(self.desired_goal.shape), f"shape [{b}, G]"
            )


@dataclass(frozen=True, eq=False)
class Relabeled:
    """The relabeled batch: goals ``[B, G]``, rewards ``[B]``, which rows changed, and the
    goal's source time step (``-1`` for unchanged rows) and identity ``(env, episode, t)``."""

    desired_goal: torch.Tensor
    reward: torch.Tensor
    relabeled: torch.Tensor
    source_t: torch.Tensor
    sources: tuple[ItemId | None, ...]


# -- eligibility ----------------------------------------------------------------------------


def eligible_goal_steps(
    episode: StoredEpisode, t: int, strategy: Strategy, variant: RelabelVariant = "spec"
) -> range:
    """Time steps whose achieved goal may become the goal of the transition at ``t``.

    For ``tianshou-2.0.1`` this is the support over all batches; within one batch the goal
    comes from the future of the episode's latest sampled transition (a subset).
    """
    _check_choice("variant", variant, _VARIANTS)
    _check_choice("strategy", strategy, _STRATEGIES[variant])
    if not episode.t_start <= t < episode.t_end:
        raise ConfigError("t", t, f"a stored transition in [{episode.t_start}, {episode.t_end})")
    t_end = episode.t_end
    if variant == "torchrl-0.14.1":
        # Rows are transitions; the root achieved goal of row r is that of s_r.
        return {
            "future": range(t, t_end),
            "final": range(t_end - 1, t_end),
            "episode": range(episode.t_start, t_end),
        }[strategy]
    return {
        "future": range(t + 1, t_end + 1),
        "final": range(t_end, t_end + 1),
        "episode": range(max(1, episode.t_start), t_end + 1),
    }[strategy]


def _check_choice(field: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ConfigError(field, value, " or ".join(repr(a) for a in allowed))


# -- sample time ----------------------------------------------------------------------------


def _ratio(ratio: Fraction | int | str) -> Fraction:
    value = parse_fraction("ratio", ratio)
    if not 0 <= value <= 1:
        raise ConfigError("ratio", ratio, "a rational in [0, 1]")
    return value


def _select_rows(
    variant: str,
    unit: str,
    ratio: Fraction,
    episode_index: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """Bool mask ``[B]`` of the rows to relabel."""
    b = int(episode_index.shape[0])
    chosen = torch.zeros(b, dtype=torch.bool)
    if unit == "episode":
        unique = torch.unique(episode_index)  # sorted store indices
        count = len(unique)
        picked = math.floor(ratio * count) if variant == "spec" else int(count * float(ratio))
        keep = unique[torch.randperm(count, generator=generator)[:picked]]
        return torch.isin(episode_index, keep)
    if variant == "spec":
        chosen[torch.randperm(b, generator=generator)[: math.floor(ratio * b)]] = True
    elif variant == "sb3-2.9.2":
        chosen[b - int(float(ratio) * b) :] = True
    elif variant == "torchrl-0.14.1":
        chosen[: int(b * float(ratio))] = True
    else:  # alf
        chosen = torch.rand(b, generator=generator, dtype=torch.float64) < float(ratio)
    return chosen


def _uniform_in(lo: torch.Tensor, hi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``lo + floor(u * (hi - lo + 1))`` clamped to ``hi``: uniform on ``lo..hi``."""
    span = (hi - lo + 1).to(torch.float64)
    return torch.minimum(lo + torch.floor(u * span).to(torch.int64), hi)


def relabel(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    *,
    strategy: Strategy = "future",
    ratio: Fraction | int | str = Fraction(4, 5),
    unit: RatioUnit = "transition",
    variant: RelabelVariant = "spec",
    generator: torch.Generator,
    horizon: int | None = None,
    reward_fn: RewardFn = goal_rewards,
) -> Relabeled:
    """Relabel a sampled batch of transitions (see the module docstring).

    Draws, in this order, from ``generator``: the row (or episode) selection, then one
    uniform ``float64`` per row (per distinct episode for ``tianshou-2.0.1``) for the goal
    step. ``horizon`` is Tianshou's and is required for that variant, at least the number of
    stored transitions from each episode's earliest sampled step to its end (shorter
    horizons split Tianshou's per-episode grouping, which is not modelled).
    """
    _check_choice("variant", variant, _VARIANTS)
    _check_choice("strategy", strategy, _STRATEGIES[variant])
    _check_choice("unit", unit, _UNITS[variant])
    value = _ratio(ratio)
    b = int(sample.episode_index.shape[0])
    ep_idx = sample.episode_index.to(torch.int64)
    t = sample.t.to(torch.int64)
    for i in range(b):
        e, ti = int(ep_idx[i]), int(t[i])
        if not 0 <= e < len(store):
            raise ConfigError(f"sample.episode_index[{i}]", e, f"an index in [0, {len(store)})")
        ep = store[e]
        if not ep.t_start <= ti < ep.t_end:
            raise ConfigError(
                f"sample.t[{i}]", ti, f"a stored transition in [{ep.t_start}, {ep.t_end})"
            )
        if variant == "sb3-2.9.2" and not (ep.complete and ep.t_start == 0):
            raise ConfigError(
                f"sample.episode_index[{i}]",
                e,
                "a complete, wholly stored episode (SB3 2.9.2 never samples others)",
            )
    t_start = torch.tensor([store[int(e)].t_start for e in ep_idx], dtype=torch.int64)
    t_end = torch.tensor([store[int(e)].t_end for e in ep_idx], dtype=torch.int64)
    chosen = _select_rows(variant, unit, value, ep_idx, generator)

    if variant == "tianshou-2.0.1":
        source = _tianshou_sources(store, ep_idx, t, t_end, horizon, generator)
    else:
        u = torch.rand(b, generator=generator, dtype=torch.float64)
        shift = 1 if variant == "torchrl-0.14.1" else 0
        if strategy == "future":
            lo, hi = t + 1 - shift, t_end - shift
        elif strategy == "final":
            lo = hi = t_end - shift
        else:
            lo = torch.clamp(t_start, min=1) if shift == 0 else t_start
            hi = t_end - shift
        source = _uniform_in(lo, hi, u)
    source = torch.where(chosen, source, torch.full_like(source, -1))

    desired = sample.desired_goal.clone()
    reward = sample.reward.clone()
    sources: list[ItemId | None] = [None] * b
    rows = torch.nonzero(chosen).flatten().tolist()
    if rows:
        goals = torch.stack([store[int(ep_idx[i])].goal_at(source[i]) for i in rows])
        reached = torch.stack([store[int(ep_idx[i])].goal_at(t[i] + 1) for i in rows])
        desired[rows] = goals.to(desired.dtype)
        reward[rows] = reward_fn(reached, goals).to(reward.dtype)
        for i in rows:
            ep = store[int(ep_idx[i])]
            sources[i] = ItemId(ep.env, ep.episode, int(source[i]))
    return Relabeled(
        desired_goal=desired,
        reward=reward,
        relabeled=chosen,
        source_t=source,
        sources=tuple(sources),
    )


def _tianshou_sources(
    store: Sequence[StoredEpisode],
    ep_idx: torch.Tensor,
    t: torch.Tensor,
    t_end: torch.Tensor,
    horizon: int | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """One goal step per distinct episode: ``t_max + 1 + round(U (t_end - 1 - t_max))``."""
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 1:
        raise ConfigError("horizon", horizon, "an integer >= 1 (tianshou-2.0.1)")
    unique = torch.unique(ep_idx)
    u = torch.rand(len(unique), generator=generator, dtype=torch.float64)
    source = torch.zeros_like(t)
    for j, e in enumerate(unique.tolist()):
        rows = ep_idx == e
        t_min, t_max = int(t[rows].min()), int(t[rows].max())
        end = store[e].t_end
        if horizon < end - t_min:
            raise ConfigError(
                "horizon", horizon, f">= {end - t_min} (stored steps of episode {e} from t={t_min})"
            )
        offset = int(torch.round(u[j] * (end - 1 - t_max)))
        source[rows] = t_max + 1 + offset
    return source


# -- store time -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EpisodeGoals:
    """One complete episode in the row layout ``t = 0..L``: step types ``[L + 1]`` (FIRST
    ... LAST), achieved and desired goals ``[L + 1, G]``, rewards ``[L + 1]`` (reward into
    ``t``; 0 at FIRST)."""

    step_type: torch.Tensor
    achieved_goal: torch.Tensor
    desired_goal: torch.Tensor
    reward: torch.Tensor


@dataclass(frozen=True, eq=False)
class Annotation:
    """Store-time annotation of every step: goals ``[L + 1, G]``, rewards ``[L + 1]``,
    ``success [L + 1]`` (the same flag on every step) and whether goals were replaced."""

    desired_goal: torch.Tensor
    reward: torch.Tensor
    success: torch.Tensor
    relabeled: bool


def annotate_episode(
    steps: EpisodeGoals, *, relabel_final: bool = False, reward_fn: RewardFn = goal_rewards
) -> Annotation:
    """Annotate a complete episode when it reaches LAST (clause ``relabel.placement``).

    ``success`` is true on every step iff some ``s_t``, ``t >= 1``, achieved the episode's
    own desired goal (the equality of :func:`goal_rewards`). With ``relabel_final`` every
    step's desired goal becomes ``ag[L]`` and rewards become ``reward_fn(ag[t], ag[L])`` for
    ``t >= 1`` (0 at FIRST); ``success`` still describes the original goal.
    """
    st = steps.step_type
    length = int(st.shape[0]) - 1
    if st.dim() != 1 or length < 1:
        raise ConfigError("steps.step_type", tuple(st.shape), "shape [L + 1] with L >= 1")
    for name in ("achieved_goal", "desired_goal"):
        tensor = getattr(steps, name)
        if tensor.dim() != 2 or tensor.shape[0] != length + 1:
            raise ConfigError(f"steps.{name}", tuple(tensor.shape), f"shape [{length + 1}, G]")
    if tuple(steps.reward.shape) != (length + 1,):
        raise ConfigError("steps.reward", tuple(steps.reward.shape), f"shape [{length + 1}]")
    expected = [int(StepType.FIRST)] + [int(StepType.MID)] * (length - 1) + [int(StepType.LAST)]
    if st.tolist() != expected:
        raise ConfigError(
            "steps.step_type", st.tolist(), "FIRST, MID..., LAST (a complete episode at its LAST)"
        )
    reached = (steps.achieved_goal[1:] == steps.desired_goal[1:]).all(-1).any()
    success = torch.full((length + 1,), bool(reached), dtype=torch.bool)
    if not relabel_final:
        return Annotation(steps.desired_goal.clone(), steps.reward.clone(), success, False)
    final = steps.achieved_goal[length].expand(length + 1, -1)
    reward = steps.reward.clone()
    reward[0] = 0.0
    reward[1:] = reward_fn(steps.achieved_goal[1:], final[1:]).to(reward.dtype)
    return Annotation(final.to(steps.desired_goal.dtype).clone(), reward, success, True)
