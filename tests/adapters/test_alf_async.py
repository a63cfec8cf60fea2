"""The ALF adapter's asynchronous row (:mod:`xpspec.adapters.alf_async`): ``RLTrainer`` with
``async_unroll`` (snapshot 23aca492, run from a checkout), its ``AsyncUnroller`` stepping the
toy env in a worker process spawned from a conf file. The suite's way (a worker forking a child
per operation) for the recorded trace, and in a new interpreter with ALF's weight sync or its
env-step counter perturbed, to show that the records follow what ALF did. Skipped when ALF is
not on the path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from tests.adapters.alf_runs import run_patched
from xpspec.conformance.checks.asynchronous import (
    check_behaviour_logits,
    check_env_steps_counted,
    check_version_recorded,
)
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.harness import connect
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Arrived, Trace

SCENARIO = AsyncScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    fragment_length=3,
    arrivals=(0, 1) * 5,
)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


@pytest.fixture(scope="module")
def trace(adapter: Any) -> Trace:
    return adapter.run_async(SCENARIO)


def _arrivals(trace: Trace) -> list[Arrived]:
    return list(trace.of_kind("arrived"))


def _context(trace: Trace) -> Context:
    return Context(lambda s: trace, lambda s: trace)


def test_each_gather_brings_one_fragment_per_env_counted_by_alf(trace: Trace) -> None:
    arrivals = _arrivals(trace)
    assert len(arrivals) == len(SCENARIO.arrivals)  # 5 iterations of 2 fragments
    assert [a.index for a in arrivals] == list(range(len(arrivals)))
    assert [a.actor for a in arrivals] == [0, 1] * 5
    assert all(set(a.env) == {a.actor} and len(a.env) == 3 for a in arrivals)
    pairs = list(zip(arrivals[::2], arrivals[1::2]))
    assert all(a.learner_version == b.learner_version for a, b in pairs)
    assert all(a.env_steps == b.env_steps for a, b in pairs)
    # ALF's EnvironmentSteps after each gather: the items delivered so far that are no FIRST
    # (t > 0 in the toy env's identity)
    counted = 0
    for a, b in pairs:
        counted += sum(t > 0 for t in a.t + b.t)
        assert a.env_steps == counted
    assert counted < 3 * len(arrivals)
    with pytest.raises(CheckFailure, match="env-step counter after arrival 0"):
        check_env_steps_counted(SCENARIO, trace, _context(trace))


def test_versions_name_the_weights_that_acted_within_one_gather(trace: Trace) -> None:
    arrivals = _arrivals(trace)
    previous = 0
    for a, b in zip(arrivals[::2], arrivals[1::2]):
        for arrival in (a, b):
            for v, logits in zip(arrival.version, arrival.logits):
                assert logits == pytest.approx(tuple(k * v * LOGIT_STEP for k in range(2)))
                assert previous <= v <= arrival.learner_version
            assert list(arrival.version) == sorted(arrival.version)
        previous = a.learner_version
    assert max(max(a.version) for a in arrivals) > 0
    check_version_recorded(SCENARIO, trace, _context(trace))
    check_behaviour_logits(SCENARIO, trace, _context(trace))


def test_the_learner_trains_once_per_iteration_on_items_that_arrived(trace: Trace) -> None:
    arrivals = _arrivals(trace)
    trained = list(trace.of_kind("trained"))
    # ALF's first iteration stores and waits (initial_collect_steps is the ring's size)
    assert [t.version for t in trained] == list(range(len(arrivals) // 2 - 1))
    assert [a.learner_version for a in arrivals[::2]] == [0, 0, 1, 2, 3]
    arrived = {i for a in arrivals for i in zip(a.env, a.episode, a.t)}
    assert all(set(zip(t.env, t.episode, t.t)) <= arrived for t in trained)


def test_a_lag_bound_is_unsupported(adapter: Any) -> None:
    with pytest.raises(Unsupported, match="no bound on the age of the weights"):
        adapter.run_async(replace(SCENARIO, max_lag=1))


def test_weights_sent_only_once_show_as_stale_versions(tmp_path: Path) -> None:
    """Perturbation: the trainer sends its weights to ALF's worker only when the unroller
    starts (AsyncUnroller.update_parameter a no-op after): every item is acted with version 0
    while the learner's version grows, which fails async.version-recorded."""
    trace = run_patched(
        tmp_path,
        """
        from alf.algorithms.async_unroller import AsyncUnroller
        original = AsyncUnroller.update_parameter
        def update_parameter(self, algorithm):
            if not getattr(self, "_sent", False):
                self._sent = True
                original(self, algorithm)
        AsyncUnroller.update_parameter = update_parameter
        """,
        "run_async",
        SCENARIO,
    )
    arrivals = _arrivals(trace)
    assert {v for a in arrivals for v in a.version} == {0}
    assert arrivals[-1].learner_version == 3
    with pytest.raises(CheckFailure, match="version of item"):
        check_version_recorded(SCENARIO, trace, _context(trace))


def test_a_counter_of_every_step_passes_env_steps_counted(tmp_path: Path) -> None:
    """Perturbation: ALF's EnvironmentSteps counts FIRST time steps too, and one env makes one
    fragment per gather: async.env-steps-counted then holds, so the finding it records is the
    counter's, read from ALF."""
    one = replace(
        SCENARIO, env=EnvSpec(num_envs=1, schedules=(FixedSchedule(3),)), arrivals=(0,) * 4
    )
    trace = run_patched(
        tmp_path,
        """
        from alf.metrics.metrics import EnvironmentSteps
        def call(self, time_step):
            self._environment_steps.add_(time_step.step_type.numel())
            return time_step
        EnvironmentSteps.call = call
        """,
        "run_async",
        one,
    )
    assert [a.env_steps for a in _arrivals(trace)] == [3, 6, 9, 12]
    check_env_steps_counted(one, trace, _context(trace))
