"""refimpl's recurrent model (xpspec/refimpl/recurrent.py): the rollout stores the state the
counting policy received, the sequences are the replay sampler's windows, and the counting
network follows each rule of spec/recurrent.md."""

from __future__ import annotations

from dataclasses import replace

import torch

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.recurrent import PADDING_STATE, CountingLearner, run_recurrent

FIRST, MID, LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
SCENARIO = RecurrentScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(2), FixedSchedule(4, "truncated"))),
    steps=12,
    sequence_length=4,
    burn_in=1,
    batch_size=5,
    draws=3,
    seed=3,
)


def test_the_trace_is_the_rollout_then_the_sequences() -> None:
    trace = run_recurrent(SCENARIO)
    kinds = [e.kind for e in trace.events]
    assert kinds == ["env_step"] * 12 + ["train_sequence"] * 15
    assert [(e.draw, e.index) for e in trace.of_kind("train_sequence")] == [
        (d, i) for d in range(3) for i in range(5)
    ]
    for step in trace.of_kind("env_step"):
        assert step.policy_state == step.t  # timestep.state-reset under the counting policy


def test_runs_are_deterministic_and_the_seed_chooses_the_sequences() -> None:
    assert run_recurrent(SCENARIO).to_jsonl() == run_recurrent(SCENARIO).to_jsonl()
    other = run_recurrent(replace(SCENARIO, seed=4))
    assert list(other.of_kind("train_sequence")) != list(
        run_recurrent(SCENARIO).of_kind("train_sequence")
    )


def test_the_adapter_declares_and_runs_it() -> None:
    adapter = RefimplAdapter()
    assert "recurrent" in adapter.info().capabilities
    assert adapter.run_recurrent(SCENARIO) == run_recurrent(SCENARIO)


def _run(scenario: RecurrentScenario, stored: list[int], types: list[int], real: list[bool]):
    return CountingLearner(scenario).run(
        torch.tensor([stored]), torch.tensor([types]), torch.tensor([real])
    )


def test_the_counting_network_rule_by_rule() -> None:
    sc = replace(SCENARIO, sequence_length=5, burn_in=2)
    # stored start 3, LAST at position 1, FIRST at 2 (reset), carry after it
    states, mask = _run(sc, [3, 4, 0, 1, 2], [MID, LAST, FIRST, MID, MID], [True] * 5)
    assert states.tolist() == [[3, 4, 0, 1, 2]] and mask.tolist() == [[0, 0, 1, 1, 1]]
    # the network carries its own state, not the stored one
    states, _ = _run(sc, [3, 9, 9, 9, 9], [MID] * 5, [True] * 5)
    assert states.tolist() == [[3, 4, 5, 6, 7]]
    # padding: not run, masked
    states, mask = _run(sc, [1, 2, 0, 0, 0], [MID, LAST, 0, 0, 0], [True, True] + [False] * 3)
    assert states.tolist() == [[1, 2] + [PADDING_STATE] * 3] and mask.tolist() == [[0] * 5]
    # variant zero-start
    states, _ = _run(replace(sc, initial_state="zeros"), [3, 4, 5, 6, 7], [MID] * 5, [True] * 5)
    assert states.tolist() == [[0, 1, 2, 3, 4]]


def test_pad_sequences_stop_at_last_and_cross_sequences_run_on() -> None:
    for boundary in ("cross", "pad"):
        trace = run_recurrent(replace(SCENARIO, boundary=boundary))
        last = {
            (env, k, t): st == LAST
            for e in trace.of_kind("env_step")
            for env, k, t, st in zip(e.env, e.episode, e.t, e.step_type)
        }
        crossed = any(
            last[a] and b is not None
            for seq in trace.of_kind("train_sequence")
            for a, b in zip(seq.items, seq.items[1:])
            if a is not None
        )
        assert crossed == (boundary == "cross")
