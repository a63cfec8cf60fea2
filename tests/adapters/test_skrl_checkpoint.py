"""Checkpoint and resume through skrl 2.1.1's own save and load API
(xpspec.adapters.skrl_checkpoint): what crosses the checkpoint is what Agent.save and
Memory.save wrote, and what the trace records after it is read from the loaded objects.
Skipped when skrl is not installed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("skrl")

import torch

from xpspec.adapters import skrl_checkpoint
from xpspec.adapters.skrl import SkrlAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.protocol.identity import ItemId
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import EnvStep, IterationStart, Resume, Store, Trace

SCENARIO = CATALOG["resume-plain"]


def _resume(trace: Trace) -> Resume:
    (mark,) = [e for e in trace.events if isinstance(e, Resume)]
    return mark


def _actions_after_resume(trace: Trace) -> list[tuple[int, ...]]:
    at = list(trace.events).index(_resume(trace))
    return [tuple(e.action) for e in trace.events[at:] if isinstance(e, EnvStep)]


def test_the_run_is_saved_after_its_iteration_and_goes_on_in_new_objects() -> None:
    assert isinstance(SCENARIO, TrainerScenario) and SCENARIO.checkpoint is not None
    k = SCENARIO.checkpoint.after_iteration
    trace = SkrlAdapter().run_trainer(SCENARIO)
    uninterrupted = SkrlAdapter().run_trainer(replace(SCENARIO, checkpoint=None))
    events = list(trace.events)
    at = events.index(_resume(trace))
    # Up to the checkpoint, the run is the uninterrupted one.
    assert events[:at] == list(uninterrupted.events)[:at]
    # What the saved memory held: the newest `capacity` rows each env stored before it.
    capacity = SCENARIO.trainer.capacity
    per_env: dict[int, list[ItemId]] = {}
    for e in events[:at]:
        if isinstance(e, Store):
            for env, episode, t in zip(e.env, e.episode, e.t):
                per_env.setdefault(env, []).append(ItemId(env, episode, t))
    expected = tuple(i for env in sorted(per_env) for i in per_env[env][-capacity:])
    assert _resume(trace).saved == expected
    # skrl's Memory.load leaves the tensors the memory reads as DQN.init created them.
    assert _resume(trace).restored == ()
    # The new trainer counts its timesteps from 0: its first iteration ends after one step.
    (start,) = [e for e in events[at:] if isinstance(e, IterationStart)][:1]
    assert (start.iteration, start.unroll_steps) == (k + 1, 1)


def test_corrupted_agent_weights_change_the_actions_after_the_resume(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negate the saved Q-network's weights: DQN acts greedily (no exploration_scheduler),
    so the actions after the resume come from what Agent.load read, not from a live agent."""
    load = skrl_checkpoint.CheckpointedRun._load

    def corrupted(self: Any, agent_path: str, memory_path: str, timesteps: int) -> Any:
        modules = torch.load(agent_path, weights_only=False)
        modules["q_network"] = {k: -v for k, v in modules["q_network"].items()}
        torch.save(modules, agent_path)
        return load(self, agent_path, memory_path, timesteps)

    plain = SkrlAdapter().run_trainer(SCENARIO)
    monkeypatch.setattr(skrl_checkpoint.CheckpointedRun, "_load", corrupted)
    perturbed = SkrlAdapter().run_trainer(SCENARIO)
    at = list(plain.events).index(_resume(plain))
    assert list(perturbed.events)[:at] == list(plain.events)[:at]
    assert _actions_after_resume(perturbed) != _actions_after_resume(plain)
