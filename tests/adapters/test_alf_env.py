"""The ALF adapter's env row (:mod:`xpspec.adapters.alf_env`): the toy gym envs through ALF's
``suite_gym.wrap_env`` (snapshot 23aca492, run from a checkout) and its in-process batching.
The suite's way (a worker forking a child per operation) for the recorded traces, and in a new
interpreter with ALF's ``termination`` perturbed, to show that the records follow what ALF
computed. Skipped when ALF is not on the path."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from tests.adapters.alf_runs import run_patched
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.timesteps import check_auto_reset, check_discount, check_step_types
from xpspec.conformance.harness import connect
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import EnvScenario
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Trace

# env 0: episodes of 2 (terminated) and 1 (truncated) transitions, alternating
SCENARIO = EnvScenario(
    EnvSpec(2, (CycleSchedule((EpisodePlan(2, "terminated"), EpisodePlan(1, "truncated"))),)),
    steps=8,
)
_F, _M, _L = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _steps(trace: Trace, env: int) -> list[tuple[tuple[int, int, int], int, float, float]]:
    out = []
    for e in trace.of_kind("env_step"):
        assert isinstance(e, EnvStep)
        item = (e.env[env], e.episode[env], e.t[env])
        out.append((item, e.step_type[env], e.reward[env], e.discount[env]))
    return out


def _context(trace: Trace) -> Context:
    return Context(lambda s: trace, lambda s: trace)


def test_the_time_steps_are_alfs(adapter: Any) -> None:
    trace = adapter.run_env(SCENARIO)
    # AlfGymWrapper.__init__ resets, steps and resets the gym env (_obtain_zero_info): the
    # unroll's first time step is the toy env's third episode, episode 2 (a finding)
    assert _steps(trace, 0) == [
        ((0, 2, 0), _F, 0.0, 1.0),
        ((0, 2, 1), _M, 1.0, 1.0),
        ((0, 2, 2), _L, 2.0, 0.0),  # terminated
        ((0, 3, 0), _F, 0.0, 1.0),  # ALF's auto-reset on the step after LAST
        ((0, 3, 1), _L, 1.0, 0.0),  # truncated, yet discount 0 (a finding)
        ((0, 4, 0), _F, 0.0, 1.0),
        ((0, 4, 1), _M, 1.0, 1.0),
        ((0, 4, 2), _L, 2.0, 0.0),
    ]
    events = list(trace.of_kind("env_step"))
    assert [e.policy_state for e in events] == [(t, t) for t in (0, 1, 2, 0, 1, 0, 1, 2)]
    ctx = _context(trace)
    with pytest.raises(CheckFailure, match="first step of env 0"):
        check_auto_reset(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match=r"discount of \(0, 3, 1\) \(LAST, truncated\)"):
        check_discount(SCENARIO, trace, ctx)
    check_step_types(SCENARIO, trace, ctx)  # ALF's step types are the spec's


def test_same_step_auto_reset_is_unsupported(adapter: Any) -> None:
    sc = replace(SCENARIO, env=replace(SCENARIO.env, autoreset="same-step"))
    with pytest.raises(Unsupported, match="no mode that returns the next episode's FIRST"):
        adapter.run_env(sc)


def test_goal_observations_go_through_alfs_dict_specs(adapter: Any) -> None:
    sc = replace(SCENARIO, env=replace(SCENARIO.env, goals=True))
    assert _steps(adapter.run_env(sc), 1)[:3] == [
        ((1, 2, 0), _F, 0.0, 1.0),
        ((1, 2, 1), _M, -1.0, 1.0),
        ((1, 2, 2), _L, 0.0, 0.0),
    ]


def test_a_perturbed_termination_shows_in_the_discounts(tmp_path: Path) -> None:
    """Perturbation: ALF's ``termination`` (as AlfGymWrapper calls it) gives discount 1: the
    terminated LASTs are recorded with discount 1 and timestep.discount fails on the first of
    them, where the unperturbed run fails only on the truncated one."""
    patch = """
        import alf.environments.alf_gym_wrapper as w
        original = w.ds.termination
        def termination(*args, **kwargs):
            ts = original(*args, **kwargs)
            return ts._replace(discount=ts.discount * 0 + 1)
        w.ds.termination = termination
        """
    trace = run_patched(tmp_path, patch, "run_env", SCENARIO)
    assert [s[3] for s in _steps(trace, 0)] == [1.0] * 8
    with pytest.raises(CheckFailure, match=r"discount of \(0, 2, 2\) \(LAST, terminated\)"):
        check_discount(SCENARIO, trace, _context(trace))


def test_runs_are_deterministic(adapter: Any) -> None:
    assert pickle.dumps(adapter.run_env(SCENARIO)) == pickle.dumps(adapter.run_env(SCENARIO))
