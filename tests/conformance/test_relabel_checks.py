"""The relabel checks: refimpl passes every one of them on every relabel scenario of the
catalogue, and each check fails on an adapter broken the way a real framework plausibly is
(and no check fails that the breakage does not drag along)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction

import pytest
import torch

from tests.conformance.helpers import assert_breaks, failures
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.relabel import StoredRange, stored_ranges
from xpspec.conformance.engine import Session
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import ItemId
from xpspec.protocol.scenario import RelabelScenario
from xpspec.protocol.trace import Relabel, Trace
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.relabel import (
    Relabeled,
    SampledTransitions,
    StoredEpisode,
    goal_rewards,
    relabel,
)

RELABEL = {name: s for name, s in CATALOG.items() if s.kind == "relabel"}
CHECKS = [c for c in ALL_CHECKS if c.capability == "relabel"]


def _failures(adapter: RefimplAdapter) -> dict[str, list[str]]:
    return failures(adapter, "relabel")


def test_reference_passes_every_relabel_check() -> None:
    assert _failures(RefimplAdapter()) == {}


def test_catalogue_buffers_hold_what_the_checks_need() -> None:
    # Evicted heads (t_start > 1), in-progress episodes, and complete wholly stored episodes.
    ranges: dict[str, dict[tuple[int, int], StoredRange]] = {
        name: stored_ranges(s, RefimplAdapter().run_relabel(s)) for name, s in RELABEL.items()
    }
    every = [r for rs in ranges.values() for r in rs.values()]
    assert any(r.t_start > 1 for r in every)
    assert any(not r.complete for r in every)
    assert any(r.complete and r.t_start == 0 for r in ranges["relabel-final"].values())


def test_stored_ranges_by_hand() -> None:
    # Two envs cycling 3 terminated, 5 truncated, 2 terminated (env 1 starts at the second);
    # 23 steps in rings of 12 keep steps 11..22 of each env. Env 0: episodes 0 (t 0..3),
    # 1 (4..9), 2 (10..12), 3 (13..16), 4 (17..22: t 0..5 of 5 truncated) -> the ring holds
    # t 1..2 of episode 2, episode 3 whole, episode 4 whole (t 0..5, LAST at 5).
    sc = RELABEL["relabel-future"]
    got = stored_ranges(sc, RefimplAdapter().run_relabel(sc))
    assert got[(0, 2)] == StoredRange(1, 2, True)
    assert got[(0, 3)] == StoredRange(0, 3, True)
    assert got[(0, 4)] == StoredRange(0, 5, True)
    # Env 1: episodes 0 (5 truncated, steps 0..5), 1 (2, 6..8), 2 (3, 9..12), 3 (5, 13..18),
    # 4 (2, 19..21), 5 (step 22: its FIRST) -> episode 5 is in progress with only t = 0.
    assert got[(1, 2)] == StoredRange(2, 3, True)
    assert got[(1, 5)] == StoredRange(0, 0, False)


# -- adapters broken the way frameworks plausibly are ---------------------------------------
def _spec(store, sample, scenario, generator, **kw):
    args = {"strategy": scenario.strategy, "ratio": scenario.ratio, "generator": generator, **kw}
    return relabel(store, sample, **args)


class RootGoal(RefimplAdapter):
    """Goal steps one back, t instead of t + 1 (TorchRL 0.14.1's default achieved-goal key)."""

    def _relabel_batch(self, store, sample, scenario, generator):
        return _spec(store, sample, scenario, generator, variant="torchrl-0.14.1")


class RatioRoundedUp(RefimplAdapter):
    """ceil(ratio * B) rows relabeled."""

    def _relabel_batch(self, store, sample, scenario, generator):
        b = int(sample.t.shape[0])
        ratio = Fraction(math.ceil(scenario.ratio * b), b)
        return _spec(store, sample, replace(scenario, ratio=ratio), generator)


class StaleReward(RefimplAdapter):
    """Relabeled rows keep the reward stored for the original goal."""

    def _relabel_batch(self, store, sample, scenario, generator):
        out = super()._relabel_batch(store, sample, scenario, generator)
        return replace(out, reward=sample.reward.clone())


def _recompute(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    rows: list[int],
    sources: list[ItemId],
) -> Relabeled:
    """A relabeled batch whose rows ``rows`` get the achieved goals of ``sources`` (rewards
    recomputed against the successor's achieved goal)."""
    desired, reward = sample.desired_goal.clone(), sample.reward.clone()
    chosen = torch.zeros_like(sample.t, dtype=torch.bool)
    source_t = torch.full_like(sample.t, -1)
    named: list[ItemId | None] = [None] * len(sample.t)
    if rows:
        goals = torch.tensor([list(source) for source in sources], dtype=desired.dtype)
        reached = torch.stack(
            [store[int(sample.episode_index[i])].goal_at(sample.t[i] + 1) for i in rows]
        )
        desired[rows] = goals
        reward[rows] = goal_rewards(reached, goals)
        chosen[rows] = True
        source_t[rows] = torch.tensor([source.t for source in sources])
        for i, source in zip(rows, sources):
            named[i] = source
    return Relabeled(desired, reward, chosen, source_t, tuple(named))


class GoalsPastEpisodeEnd(RefimplAdapter):
    """future goals drawn from the env's stored items up to its newest one, ignoring episode
    ends: some goals come from the env's next episodes."""

    def _relabel_batch(self, store, sample, scenario, generator):
        if scenario.strategy != "future":
            return super()._relabel_batch(store, sample, scenario, generator)
        streams: dict[int, list[tuple[int, int]]] = {}
        for i, ep in enumerate(store):
            streams.setdefault(ep.env, []).extend((i, t) for t in range(ep.t_start, ep.t_end + 1))
        b = int(sample.t.shape[0])
        rows = sorted(
            torch.randperm(b, generator=generator)[: math.floor(scenario.ratio * b)].tolist()
        )
        sources = []
        for i in rows:
            index, t = int(sample.episode_index[i]), int(sample.t[i])
            stream = streams[store[index].env]
            p = stream.index((index, t))
            q = int(torch.randint(p + 1, len(stream), (), generator=generator))
            goal_index, goal_t = stream[q]
            ep = store[goal_index]
            sources.append(ItemId(ep.env, ep.episode, goal_t))
        return _recompute(store, sample, rows, sources)


class RoundedGoalOffset(RefimplAdapter):
    """Goal step lo + round(U (hi - lo)) over the eligible range: its end points half as likely
    (Tianshou 2.0.1 rounds its future offset)."""

    def _relabel_batch(self, store, sample, scenario, generator):
        out = super()._relabel_batch(store, sample, scenario, generator)
        rows = torch.nonzero(out.relabeled).flatten().tolist()
        if scenario.strategy == "final" or not rows:
            return out
        sources = []
        for i in rows:
            ep, t = store[int(sample.episode_index[i])], int(sample.t[i])
            lo = t + 1 if scenario.strategy == "future" else max(1, ep.t_start)
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            sources.append(ItemId(ep.env, ep.episode, lo + round(u * (ep.t_end - lo))))
        return _recompute(store, sample, rows, sources)


class KeptRowsLoseTheirGoal(RefimplAdapter):
    """Rows not relabeled hold their episode's newest stored achieved goal (a relabeled goal
    left in place), reward recomputed, yet name no goal source."""

    def _relabel_batch(self, store, sample, scenario, generator):
        out = super()._relabel_batch(store, sample, scenario, generator)
        desired, reward = out.desired_goal.clone(), out.reward.clone()
        for i in torch.nonzero(~out.relabeled).flatten().tolist():
            ep = store[int(sample.episode_index[i])]
            desired[i] = ep.goal_at(torch.tensor(ep.t_end))
            reached = ep.goal_at(sample.t[i] + 1)
            reward[i] = goal_rewards(reached[None], desired[i][None])[0]
        return replace(out, desired_goal=desired, reward=reward)


class UnseededRelabel(RefimplAdapter):
    """Rows and goals drawn from the process-wide random state."""

    def _relabel_batch(self, store, sample, scenario, generator):
        fresh = torch.Generator().manual_seed(int(torch.randint(2**31, ())))
        return super()._relabel_batch(store, sample, scenario, fresh)


BROKEN = [
    pytest.param(
        GoalsPastEpisodeEnd,
        "relabel-same-episode",
        set(),
        marks=pytest.mark.clause("relabel.same-episode"),
        id="goals-past-episode-end",
    ),
    pytest.param(
        RootGoal,
        "relabel-eligible",
        {"relabel-uniform-goals", "relabel-placement"},
        marks=pytest.mark.clause("relabel.eligible-goals"),
        id="root-goal-off-by-one",
    ),
    pytest.param(
        RoundedGoalOffset,
        "relabel-uniform-goals",
        set(),
        marks=pytest.mark.clause("relabel.eligible-goals"),
        id="rounded-goal-offset",
    ),
    pytest.param(
        StaleReward,
        "relabel-reward",
        {"relabel-placement"},
        marks=pytest.mark.clause("relabel.reward-recomputed"),
        id="stale-reward",
    ),
    pytest.param(
        KeptRowsLoseTheirGoal,
        "relabel-reward",
        set(),
        marks=pytest.mark.clause("relabel.reward-recomputed"),
        id="kept-rows-lose-their-goal",
    ),
    pytest.param(
        RatioRoundedUp,
        "relabel-ratio",
        set(),
        marks=pytest.mark.clause("relabel.ratio"),
        id="ratio-rounded-up",
    ),
    pytest.param(
        RootGoal,
        "relabel-placement",
        {"relabel-eligible", "relabel-uniform-goals"},
        marks=pytest.mark.clause("relabel.placement"),
        id="root-goal-vs-store-time",
    ),
    pytest.param(
        UnseededRelabel,
        "deterministic-relabel",
        set(),
        marks=pytest.mark.clause("trace.deterministic"),
        id="unseeded-relabel",
    ),
]


@pytest.mark.parametrize(("adapter", "breaks", "also"), BROKEN)
def test_broken_adapter_fails_its_check(
    adapter: type[RefimplAdapter], breaks: str, also: set[str]
) -> None:
    assert_breaks(adapter(), "relabel", breaks, also)


# -- relabel.ratio under the variant alf-bernoulli -----------------------------------------
def _ratio_check():  # type: ignore[no-untyped-def]
    return next(c for c in CHECKS if c.name == "relabel-ratio")


def test_bernoulli_selection_passes_its_model_and_fails_the_exact_count() -> None:
    # Independent rows with p = 1/2 over 40 batches of 63: the counts per batch vary, so the
    # exact check (31 rows every batch) fails and the binomial check of the model passes.
    exact = replace(RELABEL["relabel-future"], draws=40, batch_size=63)
    model = replace(exact, selection="bernoulli")
    trace = RefimplAdapter().run_relabel(model)
    counts = {sum(g != -1 for g in e.goal_t) for e in trace.of_kind("relabel")}
    assert len(counts) > 1
    check, session = _ratio_check(), Session(RefimplAdapter(), "refimpl")
    assert session.evaluate(check, "model", model).status == "pass"
    with pytest.raises(CheckFailure, match="relabeled rows in draw"):
        check.verify(exact, trace, None)  # type: ignore[arg-type]


def test_bernoulli_check_fails_an_exact_count_far_from_its_probability() -> None:
    # floor(3/4 * 63) = 47 rows relabeled in each of 40 draws is 1880 of 2520 rows; with
    # p = 1/4 the binomial mean is 630 and its sd 21.7: a normal score of about 57.
    sc = replace(RELABEL["relabel-future"], draws=40, batch_size=63, selection="bernoulli")
    trace = RefimplAdapter().run_relabel(replace(sc, ratio=Fraction(3, 4), selection="exact"))
    with pytest.raises(CheckFailure, match="each with probability 1/4"):
        _ratio_check().verify(replace(sc, ratio=Fraction(1, 4)), trace, None)  # type: ignore[arg-type]


def test_bernoulli_selection_is_modelled_for_future_goals_only() -> None:
    with pytest.raises(ConfigError, match="selection 'bernoulli'"):
        replace(RELABEL["relabel-future"], strategy="final", selection="bernoulli")


# -- malformed traces are adapter errors, not failures --------------------------------------
Rewrite = Callable[[RelabelScenario, Relabel], Relabel]


class RewritesRelabelEvents(RefimplAdapter):
    """refimpl's relabel traces with every Relabel event passed through ``rewrite``."""

    def __init__(self, rewrite: Rewrite) -> None:
        self.rewrite = rewrite

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        trace = super().run_relabel(scenario)
        events = tuple(
            self.rewrite(scenario, e) if e.kind == "relabel" else e for e in trace.events
        )
        return Trace(events, trace.header)


def _from_last(sc: RelabelScenario, e: Relabel) -> Relabel:
    """The first row names a transition starting at its episode's LAST."""
    return replace(e, t=(sc.env.episode(sc.seed, e.env[0], e.episode[0]).length, *e.t[1:]))


def _half_named_goal(sc: RelabelScenario, e: Relabel) -> Relabel:
    """Relabeled rows name their goal step but not its episode."""
    return replace(e, goal_episode=(-1,) * len(e.goal_episode))


def _kept_goal_with_an_env(sc: RelabelScenario, e: Relabel) -> Relabel:
    """Rows that kept their goal name an env for it."""
    return replace(e, goal_env=tuple(0 if g == -1 else g for g in e.goal_env))


def _flat_goal(sc: RelabelScenario, e: Relabel) -> Relabel:
    """Goal values of two coordinates."""
    return replace(e, goal=tuple(g[:2] for g in e.goal))


@pytest.mark.parametrize(
    ("rewrite", "why"),
    [
        (_from_last, "decodes to no real step"),
        (_half_named_goal, "negative episode -1"),
        (_kept_goal_with_an_env, "expected (-1, -1, -1) for a kept goal"),
        (_flat_goal, "expected 3 finite numbers"),
    ],
    ids=["transition-from-last", "half-named-goal", "kept-goal-with-an-env", "flat-goal"],
)
def test_malformed_relabel_trace_is_an_error(rewrite: Rewrite, why: str) -> None:
    check = next(c for c in CHECKS if c.name == "relabel-same-episode")
    adapter = RewritesRelabelEvents(rewrite)
    outcome = Session(adapter, "broken").evaluate(
        check, "relabel-future", RELABEL["relabel-future"]
    )
    assert outcome.status == "error" and "malformed trace" in outcome.message
    assert why in outcome.message


# -- the goal a row holds is the achieved goal of the step it names --------------------------
def _first_goal_one_step_early(sc: RelabelScenario, e: Relabel) -> Relabel:
    """The first relabeled row holds the achieved goal of the step before the one it names."""
    i = next(i for i, g in enumerate(e.goal_t) if g != -1)
    goal = list(e.goal)
    goal[i] = (*goal[i][:2], goal[i][2] - 1)
    return replace(e, goal=tuple(goal))


def test_goal_value_must_be_the_named_steps_achieved_goal() -> None:
    # Named sources, steps and rewards unchanged: before goal values were recorded this trace
    # was byte-identical to the reference's.
    sc = RELABEL["relabel-future"]
    trace = RewritesRelabelEvents(_first_goal_one_step_early).run_relabel(sc)
    check = next(c for c in CHECKS if c.name == "relabel-same-episode")
    with pytest.raises(CheckFailure, match="named as the achieved goal of step"):
        check.verify(sc, trace, None)  # type: ignore[arg-type]
