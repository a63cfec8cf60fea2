"""Hypothesis strategies for scenarios, exported for third parties, and the ``ci`` and
``thorough`` profiles."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from conformance.scenario import TrainerScenario
from refimpl.config import DrainSpec, TrainerConfig
from refimpl.preprocess import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    RewardTransform,
)
from refimpl.replay import SamplingSpec
from refimpl.toy_envs.schedule import CycleSchedule, EpisodePlan, FixedSchedule, RandomSchedule
from refimpl.toy_envs.spec import EnvSpec

__all__ = ["env_specs", "preprocessors", "trainer_configs", "trainer_scenarios", "unroll_lengths"]

settings.register_profile(
    "ci", max_examples=12, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

_plans = st.builds(EpisodePlan, st.integers(1, 6), st.sampled_from(["terminated", "truncated"]))
schedules = st.one_of(
    st.builds(FixedSchedule, st.integers(1, 6), st.sampled_from(["terminated", "truncated"])),
    st.builds(
        CycleSchedule, st.lists(_plans, min_size=1, max_size=4).map(tuple), st.integers(0, 3)
    ),
    st.builds(RandomSchedule, st.integers(1, 3), st.integers(3, 7), st.integers(0, 1000)),
)


@st.composite
def env_specs(draw: st.DrawFn, max_envs: int = 4) -> EnvSpec:
    b = draw(st.integers(1, max_envs))
    shared = draw(st.booleans())
    scheds = (draw(schedules),) if shared else tuple(draw(schedules) for _ in range(b))
    return EnvSpec(b, scheds, num_tasks=draw(st.integers(1, 3)))


unroll_lengths = st.builds(Fraction, st.integers(1, 8), st.integers(1, 5))

preprocessors = st.one_of(
    st.just(Identity()),
    st.builds(
        RewardTransform,
        st.sampled_from([Fraction(1), Fraction(1, 2), Fraction(-2)]),
        st.sampled_from([Fraction(0), Fraction(1)]),
    ),
    st.builds(
        OverwriteStepType,
        st.sampled_from(["MID", "LAST"]),
        st.sampled_from(["truncated-last", "t"]),
        st.integers(0, 3),
    ),
    st.integers(1, 4).flatmap(lambda m: st.builds(ExcludeSteps, st.just(m), st.integers(0, m - 1))),
    st.integers(1, 3).flatmap(
        lambda m: st.builds(ExcludeEpisodes, st.just(m), st.integers(0, m - 1))
    ),
    st.builds(ExcludeTasks, st.just((1,))),
    st.builds(EpisodeDelayed, st.sampled_from(["all", "success", "failure"])),
)


@st.composite
def trainer_configs(draw: st.DrawFn) -> TrainerConfig:
    drain = draw(st.booleans()) and draw(st.booleans())
    whole = draw(st.booleans()) and draw(st.booleans())
    mbl = draw(st.integers(1, 3))
    capacity = draw(st.integers(mbl, 12))
    knobs: dict[str, Any] = dict(
        num_iterations=draw(st.integers(1, 16)),
        num_updates_per_train_iter=draw(st.integers(1, 3)),
        mini_batch_size=draw(st.one_of(st.none(), st.integers(1, 5))),
        mini_batch_length=mbl,
        capacity=capacity,
        initial_collect_steps=draw(st.integers(0, 12)),
        counter_mode=draw(st.sampled_from(["per-iteration", "per-mini-batch"])),
        pending_at_end=draw(st.sampled_from(["report", "flush"])),
        train_accounting=draw(st.sampled_from(["synced", "synced", "plain", "alf-pr1768-floor"])),
    )
    if drain:
        arrivals = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=4)))
        knobs.update(
            unroll_length=0,
            drain=DrainSpec(arrivals, draw(st.integers(1, 4)), draw(st.integers(1, 8))),
        )
    else:
        knobs.update(unroll_length=draw(unroll_lengths))
    if whole:
        knobs.update(
            whole_buffer=True, clear=draw(st.sampled_from(["none", "all", "keep-one-step"]))
        )
    if draw(st.booleans()):
        # An env-step budget, alone or with an iteration count (interaction then stops early).
        stalls = drain and not any(knobs["drain"].arrivals)  # could never reach the budget
        knobs.update(
            num_env_steps=draw(st.integers(1, 40)),
            num_iterations=knobs["num_iterations"]
            if stalls
            else draw(st.sampled_from([0, knobs["num_iterations"]])),
            env_step_count=draw(st.sampled_from(["all", "non-first"])),
        )
    return TrainerConfig(**knobs)


@st.composite
def trainer_scenarios(draw: st.DrawFn) -> TrainerScenario:
    env = draw(env_specs())
    cfg = draw(trainer_configs())
    sampling = SamplingSpec(
        window_length=cfg.mini_batch_length,
        boundary=draw(st.sampled_from(["cross", "forbid", "pad"])),
        period=draw(st.integers(1, 3)),
        anchor=draw(st.sampled_from(["absolute", "oldest"])),
    )
    return TrainerScenario(env, cfg, draw(preprocessors), sampling, draw(st.integers(0, 3)))
