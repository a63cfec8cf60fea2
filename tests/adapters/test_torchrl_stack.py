"""Frame stacking in the TorchRL adapter (xpspec/adapters/torchrl_stack.py): ``CatFrames`` in
the rollout with either padding, and stacks rebuilt at sample time by the replay-buffer
transform and ``SliceSampler`` of ``CatFrames.make_rb_transform_and_sampler``. Skipped when
TorchRL is not installed."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("torchrl")

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import CatFrames

from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.schedule import FixedSchedule

ADAPTER = TorchRLAdapter()
SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(4),)),
    steps=10,
    num_frames=3,
    capacity=6,
    batch_size=8,
    draws=2,
)
ZERO = (0, 0, 0)


def _rollout(scenario: StackScenario) -> list:
    trace = ADAPTER.run_stack(scenario)
    return [e for e in trace.of_kind("stacked") if e.source == "rollout"]


def test_cat_frames_repeats_the_first_frame_and_restarts_at_each_reset() -> None:
    rollout = _rollout(SCENARIO)
    # same-step auto-reset: an episode of 4 transitions is the rows t = 0 .. 3
    assert [(e.episode[1], e.t[1]) for e in rollout[:6]] == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1),
    ]  # fmt: skip
    assert [e.frames[1] for e in rollout[3:6]] == [
        ((1, 0, 1), (1, 0, 2), (1, 0, 3)),
        ((1, 1, 0), (1, 1, 0), (1, 1, 0)),
        ((1, 1, 0), (1, 1, 0), (1, 1, 1)),
    ]


def test_constant_padding_fills_with_the_zero_frame() -> None:
    rollout = _rollout(replace(SCENARIO, padding="zeros"))
    assert [e.frames[1] for e in rollout[4:6]] == [
        (ZERO, ZERO, (1, 1, 0)),
        (ZERO, (1, 1, 0), (1, 1, 1)),
    ]


def test_sampled_stacks_are_rebuilt_from_slices_of_whole_stacks() -> None:
    trace = ADAPTER.run_stack(SCENARIO)
    rollout: dict = {}
    sampled = 0
    for e in trace.of_kind("stacked"):
        rows = list(zip(zip(e.env, e.episode, e.t), e.frames))
        if e.source == "rollout":
            rollout.update(rows)
            continue
        for item, stack in rows:
            assert stack == rollout[item]
            assert item[2] >= SCENARIO.num_frames - 1  # strict slices: no padded item
            sampled += 1
    assert sampled == SCENARIO.batch_size * SCENARIO.draws


def test_a_stack_longer_than_every_stored_trajectory_cannot_be_sampled() -> None:
    with pytest.raises(Unsupported, match="strict_length=True"):
        ADAPTER.run_stack(replace(SCENARIO, num_frames=6))


@pytest.mark.parametrize("n", [1, 2])
def test_cat_frames_of_one_frame_cannot_be_sampled(n: int) -> None:
    """TorchRL 0.14.1 alone: the replay-buffer transform and sampler of
    ``CatFrames(N=1).make_rb_transform_and_sampler`` raise ``IndexError`` on a sample, where
    ``N=2`` samples (eight stored frames of one trajectory)."""
    cat = CatFrames(
        N=n,
        dim=-1,
        in_keys=["observation"],
        out_keys=["stack"],
        reset_key="_reset",
        done_key="done",
    )
    transform, sampler = cat.make_rb_transform_and_sampler(batch_size=2)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(8), sampler=sampler, transform=transform, batch_size=2
    )
    frames = torch.arange(9.0).unsqueeze(-1)
    done = torch.zeros(8, 1, dtype=torch.bool)
    rb.extend(
        TensorDict(
            {
                "observation": frames[:8],
                ("next", "observation"): frames[1:],
                ("next", "done"): done,
            },
            [8],
        )
    )
    if n == 1:
        with pytest.raises(IndexError):
            rb.sample()
    else:
        assert rb.sample()["stack"].shape == (2, 2)


def test_a_stack_of_one_frame_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="IndexError"):
        ADAPTER.run_stack(replace(SCENARIO, num_frames=1))
