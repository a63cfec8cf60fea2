"""Checkpoint and resume through Stable-Baselines3 2.9.2's own save and load API
(xpspec.adapters.sb3_checkpoint): what crosses the checkpoint is what SB3 saved, and what the
trace records after it is read from the loaded objects. Skipped when SB3 is not installed."""

from __future__ import annotations

import pickle
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import DQN

from xpspec.adapters import sb3_checkpoint
from xpspec.adapters.sb3 import SB3Adapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.resume import (
    check_resume_accounting,
    check_resume_buffer,
    check_resume_env,
    check_resume_rng,
    check_resume_same_trace,
)
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Resume, Trace


def _context(adapter: SB3Adapter) -> Context:
    return Context(adapter.run_trainer, adapter.run_trainer, adapter.run_trainer)


def _resume(trace: Trace) -> Resume:
    return next(e for e in trace.events if isinstance(e, Resume))


def test_the_resumed_run_goes_on_where_it_stopped() -> None:
    scenario = CATALOG["resume-plain"]
    trace = SB3Adapter().run_trainer(scenario)
    resumed = [e for e in trace.events if not isinstance(e, Resume)]
    uninterrupted = list(SB3Adapter().run_trainer(replace(scenario, checkpoint=None)).events)
    first = next(i for i, (a, b) in enumerate(zip(resumed, uninterrupted)) if a != b)
    index = list(trace.events).index(_resume(trace))
    # Everything up to the first update after the resume is the uninterrupted run's: the env
    # goes on, the buffer, counters and warm-up are SB3's saved ones.
    assert first > index
    assert resumed[first].kind == "update"
    for check in (check_resume_env, check_resume_buffer, check_resume_accounting):
        check(scenario, trace, _context(SB3Adapter()))


def test_a_resume_without_a_buffer_load_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturb the saved buffer's bytes (its write head moved back to 0, as if empty): the
    restored items are read from what load_replay_buffer returned, so the check sees it."""
    load = sb3_checkpoint.CheckpointedRun._load

    def emptied(self: Any, model_bytes: bytes, buffer_bytes: bytes) -> None:
        buffer = pickle.loads(buffer_bytes)
        buffer.pos, buffer.full = 0, False
        load(self, model_bytes, pickle.dumps(buffer))

    monkeypatch.setattr(sb3_checkpoint.CheckpointedRun, "_load", emptied)
    scenario = CATALOG["resume-plain"]
    trace = SB3Adapter().run_trainer(scenario)
    assert _resume(trace).restored == ()
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, _context(SB3Adapter()))
    assert failure.value.clause == "resume.buffer-restored"


def test_the_first_step_after_the_resume_is_read_from_the_loaded_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturb the model's saved ``_last_obs`` (through ``DQN.load``'s custom_objects): the
    first vector step after the resume names what the loaded model holds."""
    load = DQN.load
    seen: list[Any] = []

    def shifted(path: Any, **kwargs: Any) -> Any:
        model = load(path, **kwargs)
        seen.append(model._last_obs.copy())
        model._last_obs[:, 2] += 1  # the next time step of each env's episode
        return model

    monkeypatch.setattr(sb3_checkpoint.DQN, "load", staticmethod(shifted))
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(10),)),
        TrainerConfig(num_iterations=3, capacity=8),
        checkpoint=CheckpointSpec(1),
    )
    trace = SB3Adapter().run_trainer(scenario)
    steps = [e for e in trace.events if e.kind == "env_step"]
    assert seen, "DQN.load was not called"
    assert (steps[0].t, steps[1].t) == ((0,), (2,))  # t = 1 skipped: the perturbed _last_obs


def test_a_fractional_unroll_is_unsupported() -> None:
    from xpspec.protocol.adapter import Unsupported

    scenario = CATALOG["resume-fractional"]
    assert isinstance(scenario, TrainerScenario)
    assert scenario.trainer.unroll_length == Fraction(3, 2)
    with pytest.raises(Unsupported, match="integer number of vector"):
        SB3Adapter().run_trainer(scenario)


@pytest.mark.parametrize("name", ["resume-plain", "resume-delayed"])
def test_the_reseeded_sampling_fails_rng_restored_and_same_trace_only(name: str) -> None:
    scenario = CATALOG[name]
    trace = SB3Adapter().run_trainer(scenario)
    for check in (check_resume_env, check_resume_buffer, check_resume_accounting):
        check(scenario, trace, _context(SB3Adapter()))
    for check, clause in (
        (check_resume_rng, "resume.rng-restored"),
        (check_resume_same_trace, "resume.same-trace"),
    ):
        with pytest.raises(CheckFailure) as failure:
            check(scenario, trace, _context(SB3Adapter()))
        assert failure.value.clause == clause
