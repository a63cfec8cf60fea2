"""The ALF adapter's frame-stacking row (:mod:`xpspec.adapters.alf_stack`): ALF's
``FrameStacker`` (snapshot 23aca492, run from a checkout) on the rollout and on experience
sampled from its ``ReplayBuffer``. The suite's way (a worker forking a child per operation) for
the recorded trace, and in this process with ALF's episode-begin lookup changed, to show that
the recorded sampled stacks are ALF's. Skipped when ALF is not on the path.

The env: the spec page's worked example, two envs whose episodes are t = 0 .. 2, seven vector
steps, stacks of 3 frames, a ring of 5 items per env."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

alf_adapter = pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from xpspec.adapters import alf_stack  # noqa: E402
from xpspec.conformance.harness import connect  # noqa: E402
from xpspec.protocol.adapter import Unsupported  # noqa: E402
from xpspec.protocol.env_spec import EnvSpec  # noqa: E402
from xpspec.protocol.scenario import StackScenario  # noqa: E402
from xpspec.protocol.schedule import FixedSchedule  # noqa: E402
from xpspec.protocol.trace import Trace  # noqa: E402

SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(2),)),
    steps=7,
    num_frames=3,
    capacity=5,
    batch_size=6,
    draws=2,
)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _rows(trace: Trace, source: str) -> list[tuple[tuple[int, int, int], tuple[Any, ...]]]:
    return [
        (item, tuple(tuple(f) for f in stack))
        for e in trace.of_kind("stacked")
        if e.source == source
        for item, stack in zip(zip(e.env, e.episode, e.t), e.frames)
    ]


def test_frame_stacker_repeats_the_first_frame_as_the_worked_example(adapter: Any) -> None:
    trace = adapter.run_stack(SCENARIO)
    rollout = dict(_rows(trace, "rollout"))
    assert [rollout[(1, j, t)] for j in (0, 1) for t in (0, 1, 2)] == [
        ((1, 0, 0), (1, 0, 0), (1, 0, 0)),
        ((1, 0, 0), (1, 0, 0), (1, 0, 1)),
        ((1, 0, 0), (1, 0, 1), (1, 0, 2)),
        ((1, 1, 0), (1, 1, 0), (1, 1, 0)),
        ((1, 1, 0), (1, 1, 0), (1, 1, 1)),
        ((1, 1, 0), (1, 1, 1), (1, 1, 2)),
    ]


def test_sampled_stacks_are_the_rollouts_and_skip_the_earliest_frames(adapter: Any) -> None:
    trace = adapter.run_stack(SCENARIO)
    rollout = dict(_rows(trace, "rollout"))
    sampled = _rows(trace, "sample")
    assert len(sampled) == SCENARIO.batch_size * SCENARIO.draws
    # the ring holds t-steps 2 .. 6 of each env; the earliest 2 (num_frames - 1) are ignored
    assert {item for item, _ in sampled} <= {
        (e, j, t) for e in (0, 1) for j, t in ((1, 1), (1, 2), (2, 0))
    }
    for item, stack in sampled:
        assert stack == rollout[item]


def test_sampled_stacks_follow_alfs_episode_begin_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbation: with ALF's ``ReplayBuffer.get_episode_begin_position`` made to report the
    ring's earliest position, ``transform_experience`` rebuilds stacks across the episode
    start, and the recorded sampled stacks change with it."""
    from alf.experience_replayers.replay_buffer import ReplayBuffer

    def run() -> list[tuple[tuple[int, int, int], tuple[Any, ...]]]:
        with tempfile.TemporaryDirectory(prefix="xpspec-alf-test-") as root:
            trace = alf_stack.run_stack(SCENARIO, alf_adapter._learner_env, root)
        return _rows(trace, "sample")

    honest = run()
    monkeypatch.setattr(
        ReplayBuffer,
        "get_episode_begin_position",
        lambda self, positions, env_ids: self.get_earliest_position(env_ids),
    )
    perturbed = run()
    assert [item for item, _ in perturbed] == [item for item, _ in honest]
    crossed = [stack for (item, stack) in perturbed if item[2] < 2]
    assert crossed and all(stack[0][1] == item[1] - 1 for item, stack in perturbed if item[2] < 2)
    assert perturbed != honest


def test_zero_padding_is_unsupported(adapter: Any) -> None:
    with pytest.raises(Unsupported, match="no padding option"):
        adapter.run_stack(replace(SCENARIO, padding="zeros"))


def test_a_run_that_stores_only_ignored_positions_samples_nothing(adapter: Any) -> None:
    # two vector steps: each env holds two positions, both within its earliest num_frames - 1
    with pytest.raises(Unsupported, match="num_earliest_frames_ignored=2"):
        adapter.run_stack(replace(SCENARIO, steps=2))


def test_a_stack_of_one_frame_is_the_frame_itself(adapter: Any) -> None:
    trace = adapter.run_stack(replace(SCENARIO, num_frames=1))
    rows = _rows(trace, "rollout") + _rows(trace, "sample")
    assert len(rows) == 14 + SCENARIO.batch_size * SCENARIO.draws
    assert all(stack == (item,) for item, stack in rows)
