"""Minimal reproductions, with Tianshou 2.0.1 alone, of the behaviours behind the preprocessing,
recurrent and resume findings in ``xpspec/adapters/tianshou.expectations.toml``: a one-env gymnasium
env whose observation is the step count ``t`` and whose step out of ``t`` earns reward
``t + 1``."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tianshou")

import gymnasium
import torch
from tianshou.algorithm import DQN
from tianshou.algorithm.algorithm_base import OffPolicyAlgorithm, Policy, TrainingStats
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import (
    Batch,
    CachedReplayBuffer,
    Collector,
    PrioritizedVectorReplayBuffer,
    ReplayBuffer,
    VectorReplayBuffer,
)
from tianshou.env import DummyVectorEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Recurrent
from tianshou.utils.torch_utils import policy_within_training_step


class _Counter(gymnasium.Env[np.ndarray, np.int64]):
    """Episodes of ``length`` steps, ending terminated or truncated."""

    observation_space = gymnasium.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, length: int, truncate: bool) -> None:
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        end = self.t == self.length
        obs = np.array([float(self.t)], np.float32)
        return obs, float(self.t), end and not self.truncate, end and self.truncate, {}


class _Zero(Policy):
    def __init__(self) -> None:
        super().__init__(_Counter.action_space, _Counter.observation_space)

    def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
        return Batch(act=np.zeros(len(batch.obs), np.int64))


def _collector(buffer: Any, truncate: bool = False, length: int = 3, **hooks: Any) -> Collector:
    envs = DummyVectorEnv([lambda: _Counter(length, truncate)])
    collector = Collector(_Zero(), envs, buffer, **hooks)
    collector.reset()
    return collector


def test_a_first_observation_has_no_reward_to_transform() -> None:
    # on_step_hook scales the reward of each transition before its add; an episode of 3
    # transitions stores 3 rewards, each the one *out of* its row's obs: none is the reward
    # into the first observation t = 0, so no shift ever reaches it.
    def scale(action_batch: Any, rollout: Any) -> None:
        rollout.rew = rollout.rew * 0.5 - 1.0

    buffer = VectorReplayBuffer(3, 1)
    _collector(buffer, on_step_hook=scale).collect(n_step=3)
    assert buffer.obs[:3, 0].tolist() == [0.0, 1.0, 2.0]
    assert buffer.rew[:3].tolist() == [-0.5, 0.0, 0.5]  # env rewards 1, 2, 3


def test_clearing_truncated_joins_the_next_episode_in_the_buffer() -> None:
    # The hook assigns a new truncated array (in-place writes would not reach done_R, which
    # decides the reset): the env is still reset after 3 steps, but no stored row is done, so
    # the buffer's walk goes from the next episode's first row back into the truncated one.
    def clear(action_batch: Any, rollout: Any) -> None:
        rollout.truncated = np.zeros_like(rollout.truncated)

    buffer = VectorReplayBuffer(6, 1)
    _collector(buffer, truncate=True, on_step_hook=clear).collect(n_step=6)
    assert buffer.obs[:6, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert not buffer.done[:6].any()
    assert int(buffer.prev(3)) == 2  # the reset observation continues the truncated episode


def test_cached_replay_buffer_samples_its_caches() -> None:
    # One step of an episode in progress: the main buffer is empty, the env's cache holds the
    # row, and sample() draws it (sub-buffers are drawn in proportion to their lengths).
    buffer = CachedReplayBuffer(ReplayBuffer(10), 1, 10)
    _collector(buffer).collect(n_step=1)
    assert len(buffer.main_buffer) == 0
    batch, _ = buffer.sample(4)
    assert batch.obs[:, 0].tolist() == [0.0] * 4


def test_an_episode_annotation_stops_step_collection() -> None:
    # on_episode_done_hook returning a field (the documented way to annotate an ended
    # episode) raises under collect(n_step=...), which every trainer's collection step uses.
    def annotate(episode: Any) -> dict[str, np.ndarray]:
        return {"annotation": np.full(len(episode), float(episode.terminated[-1]))}

    buffer = CachedReplayBuffer(ReplayBuffer(10), 1, 10)
    collector = _collector(buffer, on_episode_done_hook=annotate)
    with pytest.raises(ValueError, match="not supported for n_step collection"):
        collector.collect(n_step=3)
    assert len(buffer.main_buffer) == 3  # the ended episode was moved before the hook ran


class _Without(VectorReplayBuffer):
    """A user's buffer whose ``add`` leaves out the rows whose observation ``t`` is in
    ``left_out`` and answers for them as for an unfinished episode: the env's newest stored
    index, length and return 0 (``add`` documents these four values per added row only)."""

    def __init__(self, size: int, left_out: tuple[int, ...]) -> None:
        super().__init__(size, 1)
        self.left_out = left_out

    def add(self, batch: Any, buffer_ids: Any = None) -> tuple[np.ndarray, ...]:
        keep = ~np.isin(np.asarray(batch.obs)[:, 0], self.left_out)
        ids = np.arange(len(batch)) if buffer_ids is None else np.asarray(buffer_ids)
        ptr = np.asarray(self.last_index)[ids].copy()
        out = [ptr, np.zeros(len(ids)), np.zeros(len(ids), np.int64), ptr.copy()]
        if keep.any():
            for column, value in zip(out, super().add(batch[keep], buffer_ids=ids[keep])):
                column[keep] = value
        return tuple(out)


class _Noop(OffPolicyAlgorithm):
    """No gradient step; counts the updates the trainer makes."""

    def __init__(self) -> None:
        super().__init__(policy=_Zero())
        self.updates = 0

    def _update_with_batch(self, batch: Any) -> TrainingStats:
        self.updates += 1
        return TrainingStats()


def test_leaving_out_a_row_drops_the_next_steps_reward_and_boundary() -> None:
    # preprocess.exclusion: a row is a transition (obs, rew, done, obs_next); leaving out the
    # episode's last one (t = 2) also leaves out its reward 3 and its done flag, so the next
    # episode's first row continues the episode in the buffer's walk.
    buffer = _Without(6, left_out=(2,))
    _collector(buffer).collect(n_step=4)
    assert buffer.obs[:3, 0].tolist() == [0.0, 1.0, 0.0]
    assert buffer.rew[:3].tolist() == [1.0, 2.0, 1.0]
    assert not buffer.done[:3].any()
    assert int(buffer.prev(2)) == 1


def test_rows_left_out_earn_the_same_gradient_steps() -> None:
    # train.synced-schedule, train.excluded-earn-nothing: OffPolicyTrainer makes
    # round(ratio * n_collected_steps) gradient steps per training step (trainer.py,
    # OffPolicyTrainer._update_step), counting the collected steps, not the stored rows:
    # 6 steps collected, 4 rows stored (t = 1 left out), 6 updates.
    buffer = _Without(6, left_out=(1,))
    algorithm = _Noop()
    collector = Collector(algorithm, DummyVectorEnv([lambda: _Counter(3, False)]), buffer)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=None,
        max_epochs=1,
        epoch_num_steps=6,
        collection_step_num_env_steps=1,
        batch_size=1,
        update_step_num_gradient_steps_per_sample=1.0,
        verbose=False,
        show_progress=False,
    )
    algorithm.create_trainer(params).run()
    assert (len(buffer), algorithm.updates) == (4, 6)


def test_an_episode_end_left_out_of_an_empty_buffer_stops_collection() -> None:
    # The collector reads every ended episode back from its buffer (data/collector.py,
    # Collector._collect step 9, self.buffer[ep_index_array]); a buffer that has stored no
    # row yet has no field to read, whatever index add returned.
    buffer = _Without(4, left_out=(0,))
    with pytest.raises(KeyError, match="obs"):
        _collector(buffer, length=1).collect(n_step=1)
    assert len(buffer) == 0


def test_an_episode_as_long_as_a_prioritized_sub_buffer_stops_collection() -> None:
    # An episode of 3 transitions that ends in a sub-buffer of 3 rows after wrapping round it
    # (it starts at row 2, after an episode of 2) spans get_buffer_indices(2, 2), the empty
    # array (data/buffer/buffer_base.py: start == stop), and Collector._collect (step 9) reads
    # buffer[that array]: the plain buffer returns an empty batch, PrioritizedReplayBuffer's
    # __getitem__ divides by np.max of no weights (data/buffer/prio.py) and raises.
    class _TwoThenThree(_Counter):
        def __init__(self) -> None:
            super().__init__(2, False)
            self.episodes = 0

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            self.length = 2 if self.episodes == 0 else 3
            self.episodes += 1
            return super().reset(seed=seed, options=options)

    plain = Collector(_Zero(), DummyVectorEnv([_TwoThenThree]), VectorReplayBuffer(3, 1))
    plain.reset()
    plain.collect(n_step=5)  # no error: the episode hook would get an empty batch
    prioritized = PrioritizedVectorReplayBuffer(3, 1, alpha=0.6, beta=0.4)
    collector = Collector(_Zero(), DummyVectorEnv([_TwoThenThree]), prioritized)
    collector.reset()
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        collector.collect(n_step=5)


# -- recurrent state in training (xpspec/adapters/tianshou_recurrent.py) --------------------------
def _drqn(stack_num: int) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """Tianshou's recurrent example in miniature (test/discrete/test_drqn.py): its ``Recurrent``
    net under ``DQN``, a ``VectorReplayBuffer(stack_num=...)`` filled by a ``Collector``. The
    returned list gets, per call of the net's LSTM, whether it was given a state and (under
    gradients) the gradient the loss sent back to each position's output."""
    net = Recurrent(layer_num=1, state_shape=1, action_shape=2, hidden_layer_size=4)
    calls: list[dict[str, Any]] = []

    def seen(module: Any, args: tuple[Any, ...], output: Any) -> None:
        call: dict[str, Any] = {"state": len(args) > 1, "grad": None}
        if output[0].requires_grad:

            def keep(grad: torch.Tensor) -> None:
                call["grad"] = grad.detach().abs().sum(dim=-1)

            output[0].register_hook(keep)
        calls.append(call)

    net.nn.register_forward_hook(seen)
    policy = DiscreteQLearningPolicy(
        model=net,
        action_space=_Counter.action_space,
        observation_space=_Counter.observation_space,
    )
    algorithm = DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3))
    buffer = VectorReplayBuffer(20, 1, stack_num=stack_num, ignore_obs_next=True)
    collector = Collector(policy, DummyVectorEnv([lambda: _Counter(3, False)]), buffer)
    collector.reset()
    return algorithm, buffer, collector, calls


def test_a_frame_stack_repeats_its_episode_start_at_the_front() -> None:
    # recurrent.contiguous: a stack of 4 ending at t = 1 holds prev^3 .. the index, and prev
    # stays put at the episode's first transition (data/buffer/buffer_base.py, ReplayBuffer.get):
    # the first observation fills the front, before the real steps.
    buffer = VectorReplayBuffer(10, 1, stack_num=4)
    _collector(buffer).collect(n_step=5)  # t = 0 1 2 | 0 1
    stacks = buffer[np.arange(5)].obs[..., 0]
    assert stacks[1].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert stacks[4].tolist() == [0.0, 0.0, 0.0, 1.0]  # the second episode's t = 1
    assert stacks[2].tolist() == [0.0, 0.0, 1.0, 2.0]


def test_dqn_trains_a_recurrent_net_from_no_state_on_the_last_position_only() -> None:
    # recurrent.initial-state, recurrent.burn-in: the collector stores the net's state
    # (policy.hidden_state) and passes it back in the rollout, but DQN._update_with_batch calls
    # the policy on the stacked batch without one (algorithm/modelfree/dqn.py), and Recurrent
    # returns the values of the stack's last position (fc2(obs[:, -1]), utils/net/common.py):
    # the loss's gradient reaches no other position's output.
    algorithm, buffer, collector, calls = _drqn(stack_num=4)
    collector.collect(n_step=8)
    assert "hidden_state" in buffer.policy  # stored with every transition
    assert any(call["state"] for call in calls)  # the rollout passes the state back
    calls.clear()
    with policy_within_training_step(algorithm.policy):
        algorithm.update(buffer=buffer, sample_size=5)
    trained = [call for call in calls if call["grad"] is not None]
    assert len(trained) == 1 and not trained[0]["state"]
    grad = trained[0]["grad"]
    assert grad.shape == (5, 4)
    assert bool((grad[:, :3] == 0).all()) and bool((grad[:, 3] > 0).all())


def test_the_collector_does_not_reset_a_tensor_hidden_state() -> None:
    # timestep.state-reset (not a recurrent run of the adapter, whose state is a Batch as
    # Recurrent's is): Collector._reset_hidden_state_based_on_type zeroes a torch.Tensor state
    # with state[indices].zero_() (data/collector.py), which zeroes a copy made by advanced
    # indexing; a numpy state is assigned and does reset.
    class _Counting(Policy):
        def __init__(self, tensor: bool) -> None:
            super().__init__(_Counter.action_space, _Counter.observation_space)
            self.tensor, self.seen = tensor, list[float]()

        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
            n = len(batch.obs)
            if state is None:
                state = torch.zeros(n, 1) if self.tensor else np.zeros((n, 1))
            self.seen.append(float(state[0, 0]))
            return Batch(act=np.zeros(n, np.int64), state=state + 1)

    for tensor, expected in ((False, [0.0, 1.0, 2.0, 0.0, 1.0]), (True, [0.0, 1.0, 2.0, 3.0, 4.0])):
        policy = _Counting(tensor)
        collector = Collector(policy, DummyVectorEnv([lambda: _Counter(3, False)]), None)
        collector.reset()
        collector.collect(n_step=5)
        assert policy.seen == expected


def test_a_full_ring_rebuilds_its_oldest_stack_from_the_oldest_held_frame() -> None:
    # stack.earliest-ignored: one episode of 5 transitions into a ring of 3 with stack_num=3
    # and the default sample_avail=False; the ring holds t = 2 3 4 and every index is drawn
    # (ReplayBuffer.sample_indices), but prev stops at the ring's oldest index (last_index,
    # data/buffer/buffer_base.py, ReplayBuffer.prev): t = 2's stack, whose t = 0 and 1 were
    # evicted, is rebuilt as [2, 2, 2], a stack the rollout never had ([0, 1, 2]).
    buffer = VectorReplayBuffer(3, 1, stack_num=3)
    _collector(buffer, length=6).collect(n_step=5)
    stacks = {int(s[-1]): s.tolist() for s in buffer[np.arange(3)].obs[..., 0]}
    assert stacks == {2: [2.0, 2.0, 2.0], 3: [2.0, 2.0, 3.0], 4: [2.0, 3.0, 4.0]}
    assert set(buffer.sample_indices(64).tolist()) == {0, 1, 2}


def test_atari_frame_stack_cannot_wrap_a_box_env() -> None:
    # Tianshou's own FrameStack (env/atari/atari_wrapper.py) builds its space with the dtype
    # get_space_dtype returns, the abstract np.floating, which Gymnasium 1.4.0's Box rejects;
    # the frame-stacking adapter therefore stacks with Gymnasium's FrameStackObservation.
    pytest.importorskip("cv2")  # imported by the atari_wrapper module
    from tianshou.env.atari.atari_wrapper import FrameStack

    with pytest.raises(TypeError, match=r"np\.floating"):
        FrameStack(_Counter(3, False), 4)


def test_a_resumed_trainer_restarts_every_episode() -> None:
    # resume.env-continues: a resumed run builds a new Collector over the same (live) envs and
    # the restored buffer; a new Collector keeps no last observation and refuses to collect
    # before a reset (data/collector.py, Collector._collect), and the trainer's run() resets it
    # (Trainer.reset with reset_collectors=True, its default: trainer.py), so the env's
    # episode in progress at the checkpoint ends there, without a done.
    class _Resume(OffPolicyAlgorithm):
        def _update_with_batch(self, batch: Any) -> TrainingStats:
            return TrainingStats()

    envs = DummyVectorEnv([lambda: _Counter(10, False)])
    buffer = VectorReplayBuffer(10, 1)
    collector = Collector(_Zero(), envs, buffer)
    collector.reset()
    collector.collect(n_step=2)  # the episode stands at t = 2
    restored = pickle.loads(pickle.dumps(buffer))
    env = envs.workers[0].env
    resumed = Collector(_Zero(), DummyVectorEnv([lambda: env]), restored)
    with pytest.raises(ValueError, match="reset the collector"):
        resumed.collect(n_step=1)
    params = OffPolicyTrainerParams(
        training_collector=resumed,
        max_epochs=1,
        epoch_num_steps=1,
        collection_step_num_env_steps=1,
        verbose=False,
        show_progress=False,
    )
    _Resume(policy=_Zero()).create_trainer(params).run()
    assert restored.obs[:3, 0].tolist() == [0.0, 1.0, 0.0]  # t = 2 never stored: a reset
    assert not restored.done[:3].any()


def test_a_pickled_vector_buffer_no_longer_shares_its_rows_with_its_sub_buffers() -> None:
    # A ReplayBufferManager's sub-buffers hold views of its rows (set_batch,
    # data/buffer/manager.py); a pickled buffer (Tianshou's resume tests pickle the collector's
    # buffer; save_hdf5 pickles the sub-buffers too, data/utils/converter.py) comes back with
    # copies. Rows added after the load reach the manager only, and what a sub-buffer reads
    # itself goes stale: with stack_num and sample_avail, its sample_indices walks episodes by
    # its own done flags (ReplayBuffer.prev), so it draws a stack across an episode end.
    def fill(buffer: VectorReplayBuffer, steps: int) -> None:
        for t in steps:
            done = np.array([t == 2])
            buffer.add(
                Batch(
                    obs=np.array([[float(t)]]),
                    act=np.zeros(1),
                    rew=np.ones(1),
                    terminated=done,
                    truncated=np.zeros(1, bool),
                    obs_next=np.zeros((1, 1)),
                )
            )

    live = VectorReplayBuffer(10, 1, stack_num=2, sample_avail=True)
    fill(live, [0, 1])
    restored = pickle.loads(pickle.dumps(live))
    for buffer in (live, restored):
        fill(buffer, [2, 0, 1])  # t = 2 ends the episode; a new one starts at index 3
    assert live.done[:5].tolist() == restored.done[:5].tolist() == [0, 0, 1, 0, 0]
    assert live.buffers[0].done[2] and not restored.buffers[0].done[2]
    assert 3 not in live.sample_indices(0).tolist()  # index 3's stack would be t = 2, 0
    assert 3 in restored.sample_indices(0).tolist()
