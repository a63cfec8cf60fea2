"""Tests of xpspec.refimpl.relabel (clauses relabel.*)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.identity import ItemId
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.relabel import (
    EpisodeGoals,
    SampledTransitions,
    StoredEpisode,
    annotate_episode,
    eligible_goal_steps,
    goal_rewards,
    relabel,
)
from xpspec.refimpl.toy_envs import EnvSpec, FixedSchedule, ToyBatchEnv, goal_reward

F, M, L = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


def toy_goals(length: int, terminated: bool, env: int = 0, k: int = 0) -> EpisodeGoals:
    """Episode ``(env, k)`` of the goal toy env (xpspec.protocol.env_spec): achieved goal of
    step t is [env, k, t]; the desired goal is [env, k, L] if terminated, else [env, k, L+1]."""
    g = length if terminated else length + 1
    ag = torch.tensor([[env, k, t] for t in range(length + 1)], dtype=torch.float32)
    dg = torch.tensor([[env, k, g]] * (length + 1), dtype=torch.float32)
    reward = torch.tensor([0.0] + [0.0 if t == g else -1.0 for t in range(1, length + 1)])
    types = torch.tensor([F] + [M] * (length - 1) + [L])
    return EpisodeGoals(types, ag, dg, reward)


def stored(goals: EpisodeGoals, env: int = 0, k: int = 0, upto: int | None = None) -> StoredEpisode:
    """The buffer's view: complete, or (``upto``) in progress up to step ``upto``."""
    end = goals.achieved_goal.shape[0] - 1 if upto is None else upto
    return StoredEpisode(env, k, goals.achieved_goal[: end + 1].clone(), complete=upto is None)


def sample_of(store: list[StoredEpisode], rows: list[tuple[int, int]]) -> SampledTransitions:
    """Sampled transitions ``(episode index, t)`` with an unreached stored goal and its reward."""
    goals, rewards = [], []
    for e, t in rows:
        ep = store[e]
        g = ep.t_end + 1  # a goal no stored step reaches (a truncated toy episode's goal)
        goal = torch.tensor([ep.env, ep.episode, g], dtype=torch.float32)
        goals.append(goal)
        rewards.append(goal_reward(tuple(ep.goal_at(torch.tensor(t + 1)).tolist()), tuple(goal)))
    return SampledTransitions(
        episode_index=torch.tensor([e for e, _ in rows], dtype=torch.int64),
        t=torch.tensor([t for _, t in rows], dtype=torch.int64),
        desired_goal=torch.stack(goals) if goals else torch.zeros(0, 3),
        reward=torch.tensor(rewards, dtype=torch.float32),
    )


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- toy data and reward ---------------------------------------------------------------------


def test_toy_goals_helper_matches_the_env() -> None:
    env = ToyBatchEnv(EnvSpec(goals=True, schedules=(FixedSchedule(3, "terminated"),)))
    steps = [env.reset()] + [env.step(torch.zeros(1, dtype=torch.int64)) for _ in range(3)]
    expected = toy_goals(3, terminated=True)
    assert torch.equal(torch.stack([s.achieved_goal[0] for s in steps]), expected.achieved_goal)
    assert torch.equal(torch.stack([s.desired_goal[0] for s in steps]), expected.desired_goal)
    assert torch.equal(torch.stack([s.reward[0] for s in steps]), expected.reward)
    assert [int(s.step_type[0]) for s in steps] == expected.step_type.tolist()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.lists(st.integers(0, 2), min_size=3, max_size=3), st.integers(0, 2)),
        min_size=1,
        max_size=6,
    )
)
def test_goal_rewards_is_rowwise_goal_reward(rows) -> None:
    achieved = torch.tensor([a for a, _ in rows], dtype=torch.float32)
    desired = achieved.clone()
    desired[:, 2] += torch.tensor([d for _, d in rows], dtype=torch.float32) % 2
    got = goal_rewards(achieved, desired).tolist()
    expected = [
        goal_reward(tuple(a.tolist()), tuple(d.tolist()))
        for a, d in zip(achieved, desired, strict=True)
    ]
    assert got == expected


# -- eligibility -----------------------------------------------------------------------------


def test_eligible_steps_by_hand() -> None:
    ep = stored(toy_goals(4, True))  # steps 0..4, complete
    assert eligible_goal_steps(ep, 1, "future") == range(2, 5)  # successors s_2..s_4
    assert eligible_goal_steps(ep, 1, "final") == range(4, 5)
    assert eligible_goal_steps(ep, 1, "episode") == range(1, 5)  # states reached by a step
    # TorchRL's root achieved goal of transition rows: s_t..s_{t_end - 1}.
    assert eligible_goal_steps(ep, 1, "future", "torchrl-0.14.1") == range(1, 4)
    assert eligible_goal_steps(ep, 1, "final", "torchrl-0.14.1") == range(3, 4)
    assert eligible_goal_steps(ep, 1, "episode", "torchrl-0.14.1") == range(0, 4)
    running = stored(toy_goals(4, True), upto=2)  # in progress: t_end = newest = 2
    assert eligible_goal_steps(running, 0, "future") == range(1, 3)
    with pytest.raises(ConfigError, match="t: expected a stored transition"):
        eligible_goal_steps(running, 2, "future")  # s_2 has no stored successor yet
    with pytest.raises(ConfigError, match="strategy"):
        eligible_goal_steps(ep, 0, "final", "alf")


# -- sample time: hand cases -----------------------------------------------------------------


def test_final_strategy_by_hand() -> None:
    store = [stored(toy_goals(3, True))]
    out = relabel(
        store, sample_of(store, [(0, 0), (0, 2)]), strategy="final", ratio=1, generator=gen()
    )
    # Goal = ag[3] = [0, 0, 3] for both; reward of t=0 compares ag[1] = [0,0,1] -> -1;
    # reward of t=2 compares ag[3] -> 0.
    assert out.desired_goal.tolist() == [[0, 0, 3], [0, 0, 3]]
    assert out.reward.tolist() == [-1.0, 0.0]
    assert out.relabeled.tolist() == [True, True]
    assert out.source_t.tolist() == [3, 3]
    assert out.sources == (ItemId(0, 0, 3), ItemId(0, 0, 3))


def _support(store, t: int, variant: str, strategy: str = "future", draws: int = 300) -> set[int]:
    out = relabel(
        store,
        sample_of(store, [(0, t)] * draws),
        strategy=strategy,  # type: ignore[arg-type]
        ratio=1,
        variant=variant,  # type: ignore[arg-type]
        generator=gen(1),
    )
    return set(out.source_t.tolist())


def test_future_support_per_convention() -> None:
    complete = [stored(toy_goals(3, True))]
    assert _support(complete, 0, "spec") == {1, 2, 3}  # own successor included
    assert _support(complete, 0, "sb3-2.9.2") == {1, 2, 3}  # randint(t, ep_len) of next ag
    assert _support(complete, 0, "alf") == {1, 2, 3}  # [last, end] inclusive, last = t + 1
    assert _support(complete, 0, "torchrl-0.14.1") == {0, 1, 2}  # root ag of rows t..end
    assert _support(complete, 0, "spec", "episode") == {1, 2, 3}
    assert _support(complete, 2, "torchrl-0.14.1", "final") == {2}
    running = [stored(toy_goals(5, True), upto=2)]
    assert _support(running, 0, "spec") == {1, 2}  # up to the newest stored step
    assert _support(running, 0, "spec", "final") == {2}


def test_sb3_refuses_in_progress_episodes() -> None:
    running = [stored(toy_goals(5, True), upto=2)]
    with pytest.raises(ConfigError, match=r"SB3 2\.9\.2 never samples"):
        relabel(running, sample_of(running, [(0, 0)]), variant="sb3-2.9.2", generator=gen())


def test_row_selection_per_convention() -> None:
    store = [stored(toy_goals(4, True))]
    sample = sample_of(store, [(0, t % 4) for t in range(10)])

    def chosen(variant: str, ratio: object) -> list[bool]:
        out = relabel(store, sample, ratio=ratio, variant=variant, generator=gen(5))  # type: ignore[arg-type]
        return out.relabeled.tolist()

    # ratio 4/5 of 10 rows -> 8 rows relabeled.
    assert chosen("sb3-2.9.2", "0.8") == [False] * 2 + [True] * 8  # virtual rows come last
    assert chosen("torchrl-0.14.1", "0.8") == [True] * 8 + [False] * 2  # first n_her rows
    assert sum(chosen("spec", "0.8")) == 8
    assert sum(chosen("spec", Fraction(29, 100))) == 2  # floor(2.9): exact, no float error
    assert chosen("alf", 0) == [False] * 10 and chosen("alf", 1) == [True] * 10
    with pytest.raises(ConfigError, match="ratio"):
        relabel(store, sample, ratio=0.8, generator=gen())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unit"):
        relabel(store, sample, unit="episode", variant="alf", generator=gen())


def test_per_episode_ratio_relabels_whole_episodes() -> None:
    store = [stored(toy_goals(3, True), env=e, k=e) for e in range(4)]
    rows = [(e, t) for e in range(4) for t in range(3)]
    out = relabel(store, sample_of(store, rows), unit="episode", ratio="1/2", generator=gen(2))
    per_episode = [out.relabeled[3 * e : 3 * e + 3].tolist() for e in range(4)]
    # floor(1/2 * 4) = 2 episodes, every sampled row of each.
    assert sorted(per_episode) == [[False] * 3] * 2 + [[True] * 3] * 2


def test_tianshou_one_goal_per_episode() -> None:
    store = [stored(toy_goals(6, True), env=0, k=0), stored(toy_goals(6, True), env=1, k=0)]
    sample = sample_of(store, [(0, 1), (0, 3), (1, 0), (1, 2)])
    # One distinct episode with future_p = 3/4: int(0.75) = 0 episodes (peers.md §3.5).
    one = relabel(
        store,
        sample_of(store, [(0, 1), (0, 3)]),
        ratio="3/4",
        unit="episode",
        variant="tianshou-2.0.1",
        horizon=6,
        generator=gen(),
    )
    assert not bool(one.relabeled.any())
    out = relabel(
        store,
        sample,
        ratio=1,
        unit="episode",
        variant="tianshou-2.0.1",
        horizon=6,
        generator=gen(3),
    )
    assert out.relabeled.tolist() == [True] * 4
    # Shared goal per episode, drawn from the future of its latest sampled step (t_max = 3, 2).
    assert out.source_t[0] == out.source_t[1] and int(out.source_t[0]) >= 4
    assert out.source_t[2] == out.source_t[3] and int(out.source_t[2]) >= 3
    with pytest.raises(ConfigError, match="horizon"):
        relabel(
            store,
            sample,
            ratio=1,
            unit="episode",
            variant="tianshou-2.0.1",
            horizon=2,
            generator=gen(),
        )


def test_tianshou_rounding_halves_the_end_points() -> None:
    # t_max = 0, t_end = 3: offset = round(U * 2) is 0, 1, 2 w.p. 1/4, 1/2, 1/4, so the goal
    # steps 1, 2, 3 are not uniform (the spec's are). 2000 draws, fixed seed, tolerance 0.04
    # (> 3 standard deviations of 0.011).
    store = [stored(toy_goals(3, True))]
    g = gen(11)
    counts = {1: 0, 2: 0, 3: 0}
    for _ in range(2000):
        out = relabel(
            store,
            sample_of(store, [(0, 0)]),
            ratio=1,
            unit="episode",
            variant="tianshou-2.0.1",
            horizon=3,
            generator=g,
        )
        counts[int(out.source_t[0])] += 1
    assert abs(counts[2] / 2000 - 0.5) < 0.04
    assert abs(counts[1] / 2000 - 0.25) < 0.04 and abs(counts[3] / 2000 - 0.25) < 0.04


# -- sample time: properties -----------------------------------------------------------------


@st.composite
def stores_and_samples(draw: st.DrawFn):
    store = []
    for e in range(draw(st.integers(1, 4))):
        length = draw(st.integers(1, 6))
        goals = toy_goals(length, draw(st.booleans()), env=e % 2, k=e)
        upto = draw(st.one_of(st.none(), st.integers(1, length)))
        store.append(stored(goals, env=e % 2, k=e, upto=upto))
    rows = draw(
        st.lists(
            st.integers(0, len(store) - 1).flatmap(
                lambda e: st.tuples(st.just(e), st.integers(0, store[e].t_end - 1))
            ),
            max_size=12,
        )
    )
    return store, rows


@settings(max_examples=120, deadline=None)
@given(
    case=stores_and_samples(),
    variant=st.sampled_from(["spec", "sb3-2.9.2", "torchrl-0.14.1", "alf", "tianshou-2.0.1"]),
    strategy=st.sampled_from(["future", "final", "episode"]),
    unit=st.sampled_from(["transition", "episode"]),
    ratio=st.fractions(0, 1, max_denominator=8),
    seed=st.integers(0, 2**16),
)
def test_relabeled_goals_come_from_eligible_steps(
    case, variant, strategy, unit, ratio, seed
) -> None:
    store, rows = case
    if variant in ("alf", "tianshou-2.0.1"):
        strategy = "future"
    unit = {"spec": unit, "tianshou-2.0.1": "episode"}.get(variant, "transition")
    if variant == "sb3-2.9.2":
        rows = [(e, t) for e, t in rows if store[e].complete]
    sample = sample_of(store, rows)
    before = [ep.achieved_goal.clone() for ep in store]
    kwargs = dict(strategy=strategy, ratio=ratio, unit=unit, variant=variant, horizon=8)
    out = relabel(store, sample, generator=gen(seed), **kwargs)
    again = relabel(store, sample, generator=gen(seed), **kwargs)
    assert torch.equal(out.desired_goal, again.desired_goal) and out.sources == again.sources
    b = len(rows)
    if variant == "spec" and unit == "transition":
        assert int(out.relabeled.sum()) == math.floor(ratio * b)
    for i, (e, t) in enumerate(rows):
        ep = store[e]
        if not out.relabeled[i]:
            assert out.sources[i] is None and int(out.source_t[i]) == -1
            assert torch.equal(out.desired_goal[i], sample.desired_goal[i])
            assert out.reward[i] == sample.reward[i]
            continue
        source = out.sources[i]
        assert source is not None
        assert (source.env, source.episode) == (ep.env, ep.episode)  # same episode
        assert source.t in eligible_goal_steps(ep, t, strategy, variant)
        goal = tuple(ep.goal_at(torch.tensor(source.t)).tolist())
        assert tuple(out.desired_goal[i].tolist()) == goal
        reached = tuple(ep.goal_at(torch.tensor(t + 1)).tolist())
        assert float(out.reward[i]) == goal_reward(reached, goal)
    for old, ep in zip(before, store, strict=True):
        assert torch.equal(old, ep.achieved_goal)  # the store is never modified


# -- store time ------------------------------------------------------------------------------


def test_annotation_success_flag() -> None:
    # Terminated toy episodes reach their goal [0, 0, L] at t = L; truncated ones never do.
    assert annotate_episode(toy_goals(3, True)).success.tolist() == [True] * 4
    plain = annotate_episode(toy_goals(3, False))
    assert plain.success.tolist() == [False] * 4
    assert not plain.relabeled
    assert torch.equal(plain.desired_goal, toy_goals(3, False).desired_goal)


def test_annotation_relabel_final_by_hand() -> None:
    out = annotate_episode(toy_goals(3, False), relabel_final=True)
    # Truncated: original goal [0,0,4] unreached. Relabeled goal ag[3] = [0,0,3] everywhere;
    # rewards: 0 at FIRST, -1 at t=1,2 (ag [0,0,1], [0,0,2]), 0 at t=3.
    assert out.desired_goal.tolist() == [[0, 0, 3]] * 4
    assert out.reward.tolist() == [0.0, -1.0, -1.0, 0.0]
    assert out.success.tolist() == [False] * 4  # describes the original goal
    assert out.relabeled


def test_annotation_needs_a_complete_episode() -> None:
    g = toy_goals(3, True)
    running = EpisodeGoals(g.step_type[:3], g.achieved_goal[:3], g.desired_goal[:3], g.reward[:3])
    with pytest.raises(ConfigError, match="complete episode at its LAST"):
        annotate_episode(running)
    with pytest.raises(ConfigError, match=r"steps\.reward"):
        annotate_episode(EpisodeGoals(g.step_type, g.achieved_goal, g.desired_goal, g.reward[:2]))


# -- placement: when store time and sample time agree ----------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_final_ratio_one_on_complete_episodes_equals_store_time(lengths, seed) -> None:
    episodes = [toy_goals(n, term, env=0, k=k) for k, (n, term) in enumerate(lengths)]
    store = [stored(g, env=0, k=k) for k, g in enumerate(episodes)]
    rows = [(k, t) for k, (n, _) in enumerate(lengths) for t in range(n)]
    out = relabel(store, sample_of(store, rows), strategy="final", ratio=1, generator=gen(seed))
    annotated = [annotate_episode(g, relabel_final=True) for g in episodes]
    for i, (k, t) in enumerate(rows):
        # The goal stored with s_t, and the reward stored with s_{t+1}.
        assert torch.equal(out.desired_goal[i], annotated[k].desired_goal[t])
        assert float(out.reward[i]) == float(annotated[k].reward[t + 1])


def test_future_is_redrawn_at_sample_time_but_fixed_at_store_time() -> None:
    store = [stored(toy_goals(4, True))]
    sample = sample_of(store, [(0, 0)])
    draws = {int(relabel(store, sample, ratio=1, generator=gen(s)).source_t[0]) for s in range(20)}
    # Sample time: the goal of (0, 0, t=0) changes between samples...
    assert len(draws) > 1
    # ...while a store-time annotation gives the step one goal for good.
    once = annotate_episode(toy_goals(4, True), relabel_final=True).desired_goal[0]
    assert all(
        torch.equal(once, annotate_episode(toy_goals(4, True), relabel_final=True).desired_goal[0])
        for _ in range(3)
    )


def test_in_progress_episodes_differ_between_placements() -> None:
    goals = toy_goals(4, True)
    running = [stored(goals, upto=2)]  # steps 0..2 stored, the episode continues to t = 4
    out = relabel(running, sample_of(running, [(0, 0)]), strategy="final", ratio=1, generator=gen())
    # Sample time: "final" is the newest stored step s_2, not the eventual last step s_4.
    assert out.desired_goal[0].tolist() == [0, 0, 2]
    assert annotate_episode(goals, relabel_final=True).desired_goal[0].tolist() == [0, 0, 4]
    # Store time cannot annotate before the LAST arrives.
    prefix = EpisodeGoals(
        goals.step_type[:3], goals.achieved_goal[:3], goals.desired_goal[:3], goals.reward[:3]
    )
    with pytest.raises(ConfigError):
        annotate_episode(prefix, relabel_final=True)


def test_ratio_below_one_keeps_original_rows() -> None:
    store = [stored(toy_goals(3, False))]
    rows = [(0, t) for t in range(3)] * 2
    out = relabel(store, sample_of(store, rows), strategy="final", ratio="1/2", generator=gen(4))
    annotated = annotate_episode(toy_goals(3, False), relabel_final=True)
    kept = ~out.relabeled
    assert int(kept.sum()) == 3  # 6 - floor(6/2)
    # Kept rows carry the unreached original goal [0,0,4], unlike the store-time annotation.
    assert all(out.desired_goal[i].tolist() == [0, 0, 4] for i in range(6) if kept[i])
    assert annotated.desired_goal[0].tolist() == [0, 0, 3]
