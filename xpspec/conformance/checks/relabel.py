"""Checks of hindsight relabeling at sample time (capability ``relabel``).

The buffer the draws sample from is the one the trace's Store events imply (per-env rings of
``capacity`` items; every draw happens after the fill). An episode ``(e, k)`` it holds is
stored from ``t_start`` to ``t_end``: ``t_end`` is its LAST if that is stored (a complete
episode), else its newest stored step (in progress). A row names its goal source
``(goal_env, goal_episode, goal_t)``, the step whose achieved goal became its goal (the spec
wants the row's own episode), and records the goal value its batch holds; the value must be
the achieved goal observed at the named step (the env's, :meth:`EnvSpec.achieved_goal`:
``[e, k, t]`` in the goal env), never a value the trace only asserts. The reward of the row is
the goal reward of its successor's achieved goal against that value (0 iff equal, else -1).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.views import BufferModel
from xpspec.protocol.env_spec import goal_reward
from xpspec.protocol.scenario import RelabelScenario, Scenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Relabel, Trace
from xpspec.refimpl.relabel import EpisodeGoals, annotate_episode

__all__ = [
    "SIGMAS",
    "StoredRange",
    "check_eligible",
    "check_placement",
    "check_ratio",
    "check_reward",
    "check_same_episode",
    "check_uniform_goals",
    "stored_ranges",
]

SIGMAS = 4.5
"""The statistical check fails when its statistic's normal score exceeds this (a false alarm
about once in 300 000 runs)."""


@dataclass(frozen=True)
class StoredRange:
    """Steps ``t_start..t_end`` of one episode held by the buffer; ``complete`` iff ``t_end``
    is the episode's LAST."""

    t_start: int
    t_end: int
    complete: bool


@dataclass(frozen=True)
class _Row:
    draw: int
    item: tuple[int, int, int]
    goal: tuple[int, int, int]
    """The item whose achieved goal became the row's goal, (-1, -1, -1) if kept."""
    value: tuple[float, ...]
    """The row's goal as the batch holds it."""
    reward: float

    @property
    def goal_t(self) -> int:
        return self.goal[2]


def _sc(scenario: Scenario) -> RelabelScenario:
    assert isinstance(scenario, RelabelScenario)
    return scenario


def stored_ranges(scenario: RelabelScenario, trace: Trace) -> dict[tuple[int, int], StoredRange]:
    """The stored range of every episode the buffer holds after the fill."""
    model = BufferModel(scenario.capacity)
    for e in trace.of_kind("store"):
        model.add(e)
    ranges: dict[tuple[int, int], StoredRange] = {}
    for env in list(model.stored):
        for item in model.live(env):
            key, t = (item[0], item[1]), item[2]
            old = ranges.get(key)
            start = t if old is None else min(old.t_start, t)
            end = t if old is None else max(old.t_end, t)
            last = model.step_type[(key[0], key[1], end)] == StepType.LAST
            ranges[key] = StoredRange(start, end, last)
    return ranges


def _rows(trace: Trace) -> Iterator[_Row]:
    for e in trace.of_kind("relabel"):
        columns = zip(e.env, e.episode, e.t, e.goal_env, e.goal_episode, e.goal_t, e.goal, e.reward)
        for env, episode, t, goal_env, goal_episode, goal_t, value, reward in columns:
            yield _Row(e.draw, (env, episode, t), (goal_env, goal_episode, goal_t), value, reward)


def _eligible(strategy: str, t: int, stored: StoredRange) -> range:
    """Goal steps the spec allows for the transition at ``t`` (xpspec.refimpl.relabel, variant
    spec)."""
    if strategy == "future":
        return range(t + 1, stored.t_end + 1)
    if strategy == "final":
        return range(stored.t_end, stored.t_end + 1)
    return range(max(1, stored.t_start), stored.t_end + 1)


def _goal_in_episode(row: _Row, ranges: dict[tuple[int, int], StoredRange]) -> bool:
    """Whether the row's goal is a stored step of the row's own episode."""
    stored = ranges.get(row.item[:2])
    return (
        row.goal[:2] == row.item[:2]
        and stored is not None
        and stored.t_start <= row.goal_t <= stored.t_end
    )


# -- relabel.same-episode -------------------------------------------------------------------
def check_same_episode(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.same-episode: every row is a stored transition of one episode (``t`` and
    ``t + 1`` of ``(e, k)`` both held), every relabeled row's goal step is a step of that
    same episode held by the buffer, and its goal is the achieved goal observed at that step
    (a goal taken from another step than the one named is no goal of the named step)."""
    sc = _sc(scenario)
    ranges = stored_ranges(sc, trace)
    for row in _rows(trace):
        env, episode, t = row.item
        stored = ranges.get((env, episode))
        if stored is None or not stored.t_start <= t < stored.t_end:
            held = None if stored is None else (stored.t_start, stored.t_end)
            raise CheckFailure(
                f"draw {row.draw}: transition at {row.item}",
                "t and t + 1 stored in the same episode",
                f"episode {(env, episode)} holds steps {held}",
            )
        if row.goal_t != -1 and not _goal_in_episode(row, ranges):
            raise CheckFailure(
                f"draw {row.draw}: goal source of the transition at {row.item}",
                f"a stored step of episode {(env, episode)}: t in [{stored.t_start}, {stored.t_end}]",
                row.goal,
            )
        if row.goal_t != -1:
            observed = sc.env.achieved_goal(*row.goal)
            if tuple(row.value) != observed:
                raise CheckFailure(
                    f"draw {row.draw}: goal of the transition at {row.item}, named as the "
                    f"achieved goal of step {row.goal}",
                    observed,
                    tuple(row.value),
                )


# -- relabel.eligible-goals -----------------------------------------------------------------
def check_eligible(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.eligible-goals: a relabeled row's goal step lies in its strategy's range:
    future ``t+1..t_end``, final ``t_end``, episode ``max(1, t_start)..t_end``. Rows whose goal
    is no stored step of their episode are left to ``relabel.same-episode``."""
    sc = _sc(scenario)
    ranges = stored_ranges(sc, trace)
    for row in _rows(trace):
        if row.goal_t == -1 or not _goal_in_episode(row, ranges):
            continue
        allowed = _eligible(sc.strategy, row.item[2], ranges[row.item[:2]])
        if row.goal_t not in allowed:
            raise CheckFailure(
                f"draw {row.draw}: {sc.strategy} goal step of the transition at {row.item}",
                f"in [{allowed.start}, {allowed.stop - 1}]",
                row.goal_t,
            )


def check_uniform_goals(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.eligible-goals (statistical): future and episode goals are uniform over the
    eligible range. Rows are grouped by range size ``W >= 2`` and counted by the goal's
    position in the range; Pearson's statistic summed over the groups is approximately
    chi-square with ``df = sum (W - 1)`` degrees of freedom under uniformity, and the check
    fails when its Wilson-Hilferty normal score exceeds ``SIGMAS``. Rows outside the range are
    left to the other checks."""
    sc = _sc(scenario)
    ranges = stored_ranges(sc, trace)
    cells: Counter[tuple[int, int]] = Counter()
    groups: Counter[int] = Counter()
    for row in _rows(trace):
        if row.goal_t == -1 or not _goal_in_episode(row, ranges):
            continue
        allowed = _eligible(sc.strategy, row.item[2], ranges[row.item[:2]])
        if row.goal_t in allowed and len(allowed) >= 2:
            cells[(len(allowed), row.goal_t - allowed.start)] += 1
            groups[len(allowed)] += 1
    df = sum(w - 1 for w in groups)
    if df == 0:
        return
    stat = 0.0
    for w, n in groups.items():
        expected = n / w
        stat += sum((cells[(w, i)] - expected) ** 2 / expected for i in range(w))
    spread = 2 / (9 * df)
    bound = df * (1 - spread + SIGMAS * math.sqrt(spread)) ** 3
    if stat > bound:
        worst = max(
            groups, key=lambda w: sum((cells[(w, i)] - groups[w] / w) ** 2 for i in range(w))
        )
        counts = [cells[(worst, i)] for i in range(worst)]
        raise CheckFailure(
            f"uniformity of {sc.strategy} goals over {sum(groups.values())} rows "
            f"(Pearson statistic, {df} degrees of freedom; counts by position for range size {worst}: {counts})",
            f"<= {bound:.1f}",
            round(stat, 1),
        )


# -- relabel.reward-recomputed --------------------------------------------------------------
def check_reward(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.reward-recomputed: a row that kept its goal holds the episode's desired goal,
    and every row's reward is the goal reward of the successor's achieved goal against the
    goal the row holds (whether that goal is the named step's is
    ``relabel.same-episode``'s)."""
    sc = _sc(scenario)
    for row in _rows(trace):
        env, episode, t = row.item
        goal = tuple(row.value)
        if row.goal_t == -1:
            stored = sc.env.desired_goal(sc.seed, env, episode)
            if goal != stored:
                raise CheckFailure(
                    f"draw {row.draw}: goal of the transition at {row.item}, not relabeled "
                    "(goal source (-1, -1, -1))",
                    stored,
                    goal,
                )
        want = goal_reward(sc.env.achieved_goal(env, episode, t + 1), goal)
        if row.reward != want:
            raise CheckFailure(
                f"draw {row.draw}: reward of the transition at {row.item} with goal {goal}",
                want,
                row.reward,
            )


# -- relabel.ratio --------------------------------------------------------------------------
def check_ratio(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.ratio: ``draws`` batches of ``batch_size`` rows, each with exactly
    ``floor(ratio * batch_size)`` relabeled rows. Under selection ``bernoulli`` (variant
    alf-bernoulli) a batch holds at most ``batch_size`` rows and the relabeled count over all
    draws is binomial: its normal score must not exceed ``SIGMAS``."""
    sc = _sc(scenario)
    events = list(trace.of_kind("relabel"))
    if len(events) != sc.draws:
        raise CheckFailure("relabeled batches", sc.draws, len(events))
    if sc.selection == "bernoulli":
        _check_bernoulli(sc, events)
        return
    want = math.floor(sc.ratio * sc.batch_size)
    for e in events:
        if len(e.t) != sc.batch_size:
            raise CheckFailure(f"rows in draw {e.draw}", sc.batch_size, len(e.t))
        got = sum(1 for g in e.goal_t if g != -1)
        if got != want:
            raise CheckFailure(
                f"relabeled rows in draw {e.draw} (ratio {sc.ratio} of {sc.batch_size})", want, got
            )


def _check_bernoulli(sc: RelabelScenario, events: list[Relabel]) -> None:
    for e in events:
        if len(e.t) > sc.batch_size:
            raise CheckFailure(f"rows in draw {e.draw}", f"<= {sc.batch_size}", len(e.t))
    rows = sum(len(e.t) for e in events)
    if rows == 0:
        raise CheckFailure(f"transitions in {len(events)} draws", ">= 1", 0)
    got = sum(1 for e in events for g in e.goal_t if g != -1)
    p = float(sc.ratio)
    if p in (0.0, 1.0):
        want = round(p * rows)
        if got != want:
            raise CheckFailure(f"relabeled rows of {rows} with ratio {sc.ratio}", want, got)
        return
    z = (got - p * rows) / math.sqrt(rows * p * (1 - p))
    if abs(z) > SIGMAS:
        raise CheckFailure(
            f"relabeled rows of {rows}, each with probability {sc.ratio} (normal score {z:.2f})",
            f"{p * rows:.1f} ± {SIGMAS * math.sqrt(rows * p * (1 - p)):.1f}",
            got,
        )


# -- relabel.placement ----------------------------------------------------------------------
def check_placement(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """relabel.placement: with strategy final and ratio 1, every row of an episode that is
    complete and wholly stored (``t_start = 0``, LAST stored) gets the goal and reward that
    store-time annotation (:func:`xpspec.refimpl.relabel.annotate_episode` with ``relabel_final``)
    gives its step ``t`` (goal) and ``t + 1`` (reward). Rows of other episodes are not
    compared: there the two placements differ by design."""
    sc = _sc(scenario)
    ranges = stored_ranges(sc, trace)
    annotated: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
    for row in _rows(trace):
        key = row.item[:2]
        stored = ranges.get(key)
        if stored is None or not stored.complete or stored.t_start != 0:
            continue
        if key not in annotated:
            annotated[key] = _annotation(sc, *key)
        goals, rewards = annotated[key]
        t = row.item[2]
        source = (*key, goals[t])
        want = (source, sc.env.achieved_goal(*source), rewards[t + 1])
        got = (row.goal, tuple(row.value), row.reward)
        if got != want:
            raise CheckFailure(
                f"draw {row.draw}: (goal source, goal, reward) of the transition at {row.item} "
                "vs store-time annotation with the final goal",
                want,
                got,
            )


def _annotation(sc: RelabelScenario, env: int, episode: int) -> tuple[list[int], list[float]]:
    """Goal step and reward of every step of a complete episode annotated at store time."""
    length = sc.env.episode(sc.seed, env, episode).length
    types = [int(StepType.FIRST)] + [int(StepType.MID)] * (length - 1) + [int(StepType.LAST)]
    achieved = torch.tensor([[env, episode, t] for t in range(length + 1)], dtype=torch.float32)
    desired = torch.tensor([sc.env.desired_goal(sc.seed, env, episode)] * (length + 1))
    rewards = torch.tensor([sc.env.reward(sc.seed, env, episode, t) for t in range(length + 1)])
    out = annotate_episode(
        EpisodeGoals(torch.tensor(types), achieved, desired, rewards), relabel_final=True
    )
    return [int(g[2]) for g in out.desired_goal.tolist()], [float(r) for r in out.reward.tolist()]
