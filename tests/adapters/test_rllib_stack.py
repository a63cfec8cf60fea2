"""Frame stacking in the RLlib adapter (xpspec/adapters/rllib_stack.py): RLlib's
``FrameStackingEnvToModule`` in the env runner and ``FrameStackingLearner`` on the transitions an
``EpisodeReplayBuffer`` samples. Skipped when RLlib is not installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.stack import check_episode_start, check_frames, check_no_cross
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Item, Trace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADAPTER = RLlibAdapter()
CROSS = CATALOG["stack-cross"]
ZEROS = CATALOG["stack-zeros"]
CONTEXT = Context(ADAPTER.run_stack, ADAPTER.run_stack)


def _stacks(trace: Trace, source: str) -> list[tuple[Item, tuple[Item, ...]]]:
    return [
        (item, frames)
        for e in trace.of_kind("stacked")
        if e.source == source
        for item, frames in zip(zip(e.env, e.episode, e.t), e.frames)
    ]


def _mismatched(trace: Trace) -> list[Item]:
    """Sampled items whose stack is not the one the rollout gave them (or that it never gave)."""
    seen = dict(_stacks(trace, "rollout"))
    return [item for item, frames in _stacks(trace, "sample") if seen.get(item) != frames]


def test_the_module_receives_its_episodes_frames_zero_filled_before_the_first() -> None:
    assert isinstance(ZEROS, StackScenario)
    trace = ADAPTER.run_stack(ZEROS)
    for check in (check_frames, check_episode_start, check_no_cross):
        check(ZEROS, trace, CONTEXT)
    rollout = _stacks(trace, "rollout")
    steps = [e for e in trace.of_kind("stacked") if e.source == "rollout"]
    assert len(steps) >= ZEROS.steps and all(len(e.env) == ZEROS.env.num_envs for e in steps)
    first = next(frames for item, frames in rollout if item == (1, 0, 0))
    assert first == ((0, 0, 0),) * (ZEROS.num_frames - 1) + ((1, 0, 0),)


def test_every_sampled_stack_is_the_one_the_module_received() -> None:
    assert isinstance(CROSS, StackScenario)
    trace = ADAPTER.run_stack(CROSS)
    sampled = _stacks(trace, "sample")
    assert len(sampled) == CROSS.draws * CROSS.batch_size
    assert _mismatched(trace) == []
    # stacks of k real frames of one episode were sampled, not only zero-filled ones
    assert any((0, 0, 0) not in frames for _, frames in sampled)


def test_repeat_first_scenarios_see_rllibs_zero_fill() -> None:
    assert isinstance(CROSS, StackScenario)
    with pytest.raises(CheckFailure, match="padding"):
        check_episode_start(CROSS, ADAPTER.run_stack(CROSS), CONTEXT)


def test_a_continuation_chunk_cut_without_lookback_changes_the_rollout_stacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbation: RLlib cutting an ongoing episode with one step of lookback whatever
    # episode_lookback_horizon says; the next chunk's stacks then lose real frames.
    cut = SingleAgentEpisode.cut

    def short(self: Any, len_lookback_buffer: int = 0) -> Any:
        return cut(self, len_lookback_buffer=1)

    monkeypatch.setattr(SingleAgentEpisode, "cut", short)
    with pytest.raises(CheckFailure):
        check_frames(CROSS, ADAPTER.run_stack(CROSS), CONTEXT)


def test_a_sample_without_lookback_changes_the_sampled_stacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Perturbation: the buffer slicing sampled transitions without the lookback it is asked
    # for; FrameStackingLearner then zero-fills every earlier frame.
    sample = EpisodeReplayBuffer.sample

    def no_lookback(self: Any, *args: Any, **kwargs: Any) -> Any:
        return sample(self, *args, **{**kwargs, "lookback": 0})

    monkeypatch.setattr(EpisodeReplayBuffer, "sample", no_lookback)
    assert _mismatched(ADAPTER.run_stack(CROSS))
