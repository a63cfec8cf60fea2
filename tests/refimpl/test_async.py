"""refimpl's model of asynchronous actors (xpspec/refimpl/asynchronous.py): release versions,
the toy versioned policy, the lag bound and the env-step counter."""

from __future__ import annotations

import math

from xpspec.protocol.asynchronous import AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import FixedSchedule
from xpspec.refimpl.asynchronous import run_async

ENV = EnvSpec(num_envs=2, schedules=(FixedSchedule(3),))


def test_an_actor_acts_with_the_version_of_its_release() -> None:
    sc = AsyncScenario(ENV, fragment_length=2, arrivals=(0, 1, 1, 0, 0))
    arrived = list(run_async(sc).of_kind("arrived"))
    assert [(a.actor, a.learner_version, a.version) for a in arrived] == [
        (0, 0, (0, 0)),
        (1, 1, (0, 0)),
        (1, 2, (1, 1)),
        (0, 3, (0, 0)),
        (0, 4, (3, 3)),
    ]


def test_the_logits_and_log_probs_are_the_acting_versions() -> None:
    sc = AsyncScenario(ENV, fragment_length=3, arrivals=(0, 0, 0))
    for a in run_async(sc).of_kind("arrived"):
        for v, logits, action, lp in zip(a.version, a.logits, a.action, a.log_prob):
            assert logits == (0.0, v * 0.25)
            assert math.isclose(lp, logits[action] - math.log(sum(map(math.exp, logits))))


def test_items_beyond_the_bound_are_dropped_and_still_counted() -> None:
    sc = AsyncScenario(ENV, fragment_length=2, arrivals=(0, 1, 1, 0, 0), max_lag=1)
    trace = run_async(sc)
    assert [a.env_steps for a in trace.of_kind("arrived")] == [2, 4, 6, 8, 10]
    assert [t.version for t in trace.of_kind("trained")] == [0, 1, 2, 3]


def test_each_actor_steps_its_own_env_through_episode_ends() -> None:
    sc = AsyncScenario(ENV, fragment_length=5, arrivals=(1,))
    (arrival,) = run_async(sc).of_kind("arrived")
    assert list(zip(arrival.env, arrival.episode, arrival.t)) == [
        (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 0, 3), (1, 1, 0),
    ]  # fmt: skip
