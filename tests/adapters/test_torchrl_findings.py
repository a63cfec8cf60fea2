"""Minimal reproductions, with TorchRL 0.14.1 alone (no xpspec), of the findings that
xpspec/adapters/torchrl.expectations.toml declares for its preprocessing routes. Each test drives a
three-step gymnasium episode through TorchRL's own Collector, Trainer and replay buffer,
written as a TorchRL user would, and asserts what TorchRL does. Skipped without TorchRL."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torchrl = pytest.importorskip("torchrl")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from tensordict import TensorDict, TensorDictBase  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import LazyTensorStorage, RandomSampler, ReplayBuffer  # noqa: E402
from torchrl.envs import GymWrapper, Transform  # noqa: E402
from torchrl.trainers import ReplayBufferTrainer, Trainer  # noqa: E402

EPISODE = 3


class _Count(gym.Env[np.ndarray, np.int64]):
    """Observation: steps since the reset; reward: that count; terminates after EPISODE
    steps."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: np.int64) -> Any:
        self.t += 1
        return np.full(1, self.t, np.float32), float(self.t), self.t == EPISODE, False, {}


def _collector(
    frames_per_batch: int, batches: int, env: gym.Env[Any, Any] | None = None, **kwargs: Any
) -> Collector:
    torch.manual_seed(0)
    return Collector(
        GymWrapper(env or _Count(), categorical_action_encoding=True),
        policy=None,
        frames_per_batch=frames_per_batch,
        total_frames=frames_per_batch * batches,
        **kwargs,
    )


def _trainer(collector: Collector, buffer: ReplayBuffer, calls: list[int], **kwargs: Any) -> Any:
    weight = torch.nn.Parameter(torch.zeros(()))

    def loss(sample: TensorDictBase) -> TensorDictBase:
        calls.append(sample.numel())
        return TensorDict({"loss": (weight * 0.0).sum()}, [])

    trainer = Trainer(
        collector=collector,
        total_frames=collector.total_frames,
        frame_skip=1,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=torch.optim.SGD([weight], lr=0.0),
        progress_bar=False,
        save_trainer_interval=2**62,
        log_interval=2**62,
        **kwargs,
    )
    return trainer


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_a_reward_postproc_has_no_reward_into_a_reset_observation() -> None:
    # preprocess.transform: the frames carry ("next", "reward") only, the reward of the step
    # out of the root; no entry holds a reward into a reset observation, so a transform
    # r * scale + shift never gives a FIRST item the reward `shift`.
    def rescale(batch: TensorDictBase) -> TensorDictBase:
        batch.set(("next", "reward"), batch.get(("next", "reward")) * 0.5 - 1.0)
        return batch

    collector = _collector(4, 1, postproc=rescale)
    batch = next(iter(collector))
    collector.shutdown()
    assert "reward" not in batch.keys()  # noqa: SIM118 (a TensorDict has no __contains__)
    assert batch.get(("next", "reward")).flatten().tolist() == [-0.5, 0.0, 0.5, -0.5]
    assert batch.get("observation").flatten().tolist() == [0.0, 1.0, 2.0, 0.0]


def test_the_trainer_trains_every_batch_however_few_frames_the_mask_keeps() -> None:
    # train.excluded-earn-nothing: the postproc keeps one frame of each batch of 4; the
    # Trainer counts the kept frames (collected_frames) but runs optim_steps for every batch.
    def keep_first(batch: TensorDictBase) -> TensorDictBase:
        mask = torch.zeros(batch.shape, dtype=torch.bool)
        mask[0] = True
        batch.set(("collector", "mask"), mask)
        return batch

    buffer = ReplayBuffer(storage=LazyTensorStorage(64), sampler=RandomSampler(), batch_size=1)
    writes: list[int] = []
    extend = buffer.extend

    def counted_extend(data: TensorDictBase) -> Any:
        writes.append(data.numel())
        return extend(data)

    buffer.extend = counted_extend
    calls: list[int] = []
    trainer = _trainer(_collector(4, 5, postproc=keep_first), buffer, calls)
    ReplayBufferTrainer(buffer, batch_size=1, flatten_tensordicts=True).register(trainer)
    trainer.train()
    assert writes == [1] * 5  # one write per batch, after the batch: 5 of 20 frames
    # roots of the batches: [0 1 2 0], [1 2 0 1], [2 0 1 2], [0 1 2 0], [1 2 0 1]
    assert buffer.storage[torch.arange(5)].get("observation").flatten().tolist() == [
        0.0,
        1.0,
        2.0,
        0.0,
        1.0,
    ]
    assert trainer.collected_frames == 5
    assert len(calls) == 5  # one optimisation step per batch all the same


def test_a_batch_the_mask_empties_ends_the_trainer() -> None:
    # preprocess.exclusion: a mask that keeps no frame of a batch reaches the buffer as an
    # empty write, which RoundRobinWriter.extend refuses; Trainer.train raises.
    def drop_all(batch: TensorDictBase) -> TensorDictBase:
        batch.set(("collector", "mask"), torch.zeros(batch.shape, dtype=torch.bool))
        return batch

    buffer = ReplayBuffer(storage=LazyTensorStorage(64), sampler=RandomSampler(), batch_size=1)
    trainer = _trainer(_collector(2, 3, postproc=drop_all), buffer, [])
    ReplayBufferTrainer(buffer, batch_size=1, flatten_tensordicts=True).register(trainer)
    with pytest.raises(RuntimeError, match="Expected at least one element in extend"):
        trainer.train()


def test_leaving_out_a_frame_loses_the_reward_into_the_next_root() -> None:
    # preprocess.exclusion: a frame holds no reward into its root; the reward into root t is
    # ("next", "reward") of frame t - 1. The mask leaves out the frame of root 1 (which holds
    # r = 2, the reward into root 2), so the stored frame before root 2 is that of root 0,
    # carrying r = 1, and the reward 2 is held by no stored frame.
    def drop_root_one(batch: TensorDictBase) -> TensorDictBase:
        batch.set(("collector", "mask"), batch.get("observation")[..., 0] != 1.0)
        return batch

    buffer = ReplayBuffer(storage=LazyTensorStorage(64), sampler=RandomSampler(), batch_size=1)
    trainer = _trainer(_collector(4, 1, postproc=drop_root_one), buffer, [])
    ReplayBufferTrainer(buffer, batch_size=1, flatten_tensordicts=True).register(trainer)
    trainer.train()
    stored = buffer.storage[torch.arange(len(buffer))]
    assert "reward" not in stored.keys()  # noqa: SIM118 (a TensorDict has no __contains__)
    assert stored.get("observation").flatten().tolist() == [0.0, 2.0, 0.0]
    assert stored.get(("next", "observation")).flatten().tolist() == [1.0, 3.0, 1.0]
    assert stored.get(("next", "reward")).flatten().tolist() == [1.0, 3.0, 1.0]


def test_a_transform_that_returns_none_drops_a_write() -> None:
    # preprocess.exclusion (episode-delayed, keep success/failure): ReplayBuffer.extend writes
    # nothing when its transform's inverse returns None (data/replay_buffers/replay_buffers/
    # base.py), so a user can drop a rejected trajectory without an empty write.
    class DropUnterminated(Transform):
        def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase | None:
            return tensordict if bool(tensordict.get("terminated")[-1]) else None

    buffer = ReplayBuffer(storage=LazyTensorStorage(8), transform=DropUnterminated())
    index = buffer.extend(TensorDict({"terminated": torch.tensor([False, False])}, [2]))
    assert index.numel() == 0 and buffer.write_count == 0
    buffer.extend(TensorDict({"terminated": torch.tensor([False, True])}, [2]))
    assert buffer.write_count == 2


def test_trajectory_writes_hold_frames_and_keep_open_episodes_unwritten() -> None:
    # preprocess.delayed-per-env / pending-at-end: with trajs_per_batch and a replay buffer
    # the Collector writes each finished episode as its EPISODE frames (roots t = 0..2; the
    # final observation is only ("next", "observation") of the last); the open episode stays
    # in the collector's partial trajectories and is never written, not even at the end.
    buffer = ReplayBuffer(storage=LazyTensorStorage(64))
    collector = _collector(2, 4, trajs_per_batch=1, trajs_per_write=1, replay_buffer=buffer)
    for _ in collector:
        pass
    assert buffer.write_count == 2 * EPISODE  # 8 frames collected, 2 episodes written
    stored = buffer.storage[torch.arange(len(buffer))]
    assert stored.get("observation").flatten().tolist() == [0.0, 1.0, 2.0] * 2
    assert stored.get(("next", "observation")).flatten().tolist() == [1.0, 2.0, 3.0] * 2
    partial = collector._traj_assembly[0]
    assert [c.get("observation").flatten().tolist() for p in partial.values() for c in p] == [
        [0.0, 1.0]
    ]
    collector.shutdown()


def test_the_trainer_samples_before_any_trajectory_was_written() -> None:
    # train.insufficient-data: with trajectory writes the Trainer's batch is None and its
    # gate reads the buffer's write count; with init_random_frames 0 it samples the buffer
    # before the first episode ended, and the sampler raises.
    buffer = ReplayBuffer(storage=LazyTensorStorage(64), sampler=RandomSampler(), batch_size=1)
    collector = _collector(1, 6, trajs_per_batch=1, trajs_per_write=1, replay_buffer=buffer)
    trainer = _trainer(collector, buffer, [], replay_buffer=buffer)
    ReplayBufferTrainer(buffer, batch_size=1).register(trainer)
    with pytest.raises(RuntimeError, match="Cannot sample from an empty storage"):
        trainer.train()
    assert buffer.write_count == 0


def test_one_ring_over_all_envs_evicts_across_envs_and_within_a_write() -> None:
    """Finding replay.eviction (trajectory writes): a 1-D storage is one ring for every env,
    so env 1's frames evict env 0's, and a write longer than the ring overwrites its own
    first frames."""
    rb = ReplayBuffer(storage=LazyTensorStorage(4))

    def frames(env: int, ts: range) -> TensorDict:
        return TensorDict(
            {"env": torch.full((len(ts),), env), "t": torch.tensor(list(ts))}, [len(ts)]
        )

    rb.extend(frames(0, range(3)))
    rb.extend(frames(1, range(2)))
    held = {(int(e), int(t)) for e, t in zip(rb[:]["env"], rb[:]["t"])}
    assert held == {(0, 1), (0, 2), (1, 0), (1, 1)}  # env 0's t = 0 evicted by env 1's write
    rb.extend(frames(0, range(3, 9)))  # six frames into a ring of four
    assert sorted(int(t) for t in rb[:]["t"]) == [5, 6, 7, 8]


class _CountingCore(torch.nn.Module):
    """A torch.nn.GRU-like core for GRUModule whose state counts steps (out = in + 1); it
    notes the state it received at every step (BurnInTransform reads the device of a
    module's first parameter: it has one, unused)."""

    batch_first, bidirectional, num_layers, hidden_size = True, False, 1, 1

    def __init__(self) -> None:
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(()))
        self.received: list[list[float]] = []

    def forward(self, x: torch.Tensor, hx: torch.Tensor, mask: Any = None) -> Any:
        h, outputs = hx[0], []
        for t in range(x.shape[1]):
            self.received.append(h[:, 0].tolist())
            h = h + 1 if mask is None else torch.where(mask[:, t : t + 1], h + 1, h)
            outputs.append(h)
        return torch.stack(outputs, 1), h.unsqueeze(0)


def test_burn_in_carries_the_state_into_a_reset_step() -> None:
    """Finding recurrent.reset-at-first: BurnInTransform writes the state its burn-in steps
    end in at the first remaining step (envs/transforms/_env.py, BurnInTransform.forward)
    whatever that step's is_init, and GRUModule in recurrent mode starts a row from the state
    at its first step without reading is_init there (modules/tensordict_module/rnn.py,
    _split_and_pad_for_reset splits only at is_init[..., 1:]): a sequence whose step after
    the burn-in starts an episode trains that step from the carried count, not from the reset
    state the same step had in the rollout."""
    from torchrl.envs import BurnInTransform
    from torchrl.modules import GRUModule, set_recurrent_mode

    core = _CountingCore()
    gru = GRUModule(gru=core, in_keys=["obs", "rs"], out_keys=["out", ("next", "rs")])
    # one env's steps t = 3, 4 of an episode, then t = 0, 1, 2 of the next (is_init at 2);
    # the stored states are what the rollout gave the policy: the count since the reset
    sequence = TensorDict(
        {
            "obs": torch.zeros(1, 5, 1),
            "is_init": torch.tensor([[False, False, True, False, False]]).unsqueeze(-1),
            "rs": torch.tensor([[3.0, 4.0, 0.0, 1.0, 2.0]]).reshape(1, 5, 1, 1),
        },
        [1, 5],
    )
    with set_recurrent_mode(True):
        gru(sequence.clone())  # no burn-in: the row splits at the reset
        # two pieces, [t = 3, 4] from the stored 3 and [t = 0, 1, 2] from the stored reset 0
        assert [r[0] for r in core.received[:2]] == [3.0, 4.0]
        assert [r[1] for r in core.received] == [0.0, 1.0, 2.0]
        core.received.clear()
        rest = BurnInTransform([gru], burn_in=2)(sequence.clone())
        assert bool(rest["is_init"][0, 0])  # the first trained step is still a reset
        assert rest["rs"][0, 0].item() == 5.0  # ... but holds the carried count
        core.received.clear()
        gru(rest)
    assert core.received == [[5.0], [6.0], [7.0]]  # trained from 5, not from the reset 0


def test_burn_in_needs_a_stored_state() -> None:
    """Finding recurrent.contiguous (zero start with burn-in): BurnInTransform is documented
    "to obtain up-to-date recurrent states when they are not available", but on a sample
    that holds no recurrent state it reads the shape of the missing entry and raises
    (envs/transforms/_env.py, BurnInTransform.forward), while GRUModule alone starts such a
    sample from zeros."""
    from torchrl.envs import BurnInTransform
    from torchrl.modules import GRUModule, set_recurrent_mode

    gru = GRUModule(
        input_size=1, hidden_size=2, in_keys=["obs", "rs"], out_keys=["out", ("next", "rs")]
    )
    sample = TensorDict(
        {"obs": torch.zeros(2, 5, 1), "is_init": torch.zeros(2, 5, 1, dtype=torch.bool)}, [2, 5]
    )
    with set_recurrent_mode(True):
        assert gru(sample.clone())["out"].shape == (2, 5, 2)  # zeros where no state is stored
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'shape'"):
            BurnInTransform([gru], burn_in=2)(sample.clone())


def test_a_restored_collector_starts_every_env_from_a_reset() -> None:
    # resume.env-continues: a Collector resets its env when it is built (_make_carrier) and
    # its state_dict holds counts, the trajectory-id pool and the transforms' state, not the
    # last observation; load_state_dict gives the fresh carrier a new trajectory id. A run
    # saved mid-episode and restored over the same env starts a new episode.
    env = _Count()
    first = _collector(2, 3, env=env)
    frames = next(iter(first))
    assert frames.get("observation").flatten().tolist() == [0.0, 1.0]  # next root: t = 2
    state = first.state_dict()
    del first  # its env, the gymnasium _Count, goes on
    assert env.t == 2
    second = _collector(2, 3, env=env)
    second.load_state_dict(state, strict=False)  # policy=None: a random policy, no weights
    assert (second._frames, second._iter) == (2, 0)  # counts restored
    resumed = next(iter(second))
    assert resumed.get("observation").flatten().tolist() == [0.0, 1.0]  # not [2.0, 0.0]
    second.shutdown()


def test_a_restored_collector_has_lost_its_partial_trajectories() -> None:
    # resume.accounting-restored: with trajs_per_batch the open episode's frames wait in the
    # collector's _traj_assembly until it ends; Collector.state_dict does not hold them, so
    # a restored collector holds none and never writes them.
    buffer = ReplayBuffer(storage=LazyTensorStorage(64))
    first = _collector(2, 4, trajs_per_batch=1, trajs_per_write=1, replay_buffer=buffer)
    next(iter(first))
    held = [c.numel() for p in first._traj_assembly[0].values() for c in p]
    assert held == [2]  # the first two frames of the open episode
    state = first.state_dict()
    assert not any("traj_assembly" in str(key) for key in state)
    second = _collector(2, 4, trajs_per_batch=1, trajs_per_write=1, replay_buffer=buffer)
    second.load_state_dict(state, strict=False)  # policy=None: a random policy, no weights
    assert getattr(second, "_traj_assembly", None) is None
    first.shutdown()
    second.shutdown()


# -- prioritized slices (PrioritizedSliceSampler; its trees are the extension built for this torch)
def _slices(capacity: int, ndim: int = 1, **kwargs: Any) -> tuple[Any, ReplayBuffer]:
    from torchrl.data import PrioritizedSliceSampler

    sampler = PrioritizedSliceSampler(
        max_capacity=capacity, alpha=1.0, beta=1.0, eps=0.0, slice_len=2, traj_key="traj", **kwargs
    )
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(capacity, ndim=ndim),
        sampler=sampler,
        generator=torch.Generator().manual_seed(0),
    )
    return sampler, buffer


def _frames(obs: list[int], traj: list[int]) -> TensorDict:
    return TensorDict(obs=torch.tensor(obs), traj=torch.tensor(traj), batch_size=[len(obs)])


def test_prioritized_slices_of_a_full_two_dim_storage_cross_its_write_cursor() -> None:
    """Two envs, one trajectory each, written one vector step at a time into
    LazyTensorStorage(6, ndim=2) (a ring of 3 steps per env): after the 4th step overwrote
    the 1st, PrioritizedSliceSampler draws the slice (3, 1), the newest step followed by the
    oldest, and never (1, 2); SliceSampler over the same storage draws (1, 2) and (2, 3)
    only. Cited by the finding on replay.window-validity and priority.eviction."""
    from torchrl.data import SliceSampler

    def drawn(sampler: Any) -> set[tuple[int, int]]:
        buffer = ReplayBuffer(
            storage=LazyTensorStorage(6, ndim=2),
            sampler=sampler,
            generator=torch.Generator().manual_seed(0),
        )
        for t in range(4):
            step = TensorDict(
                obs=torch.tensor([[t], [10 + t]]), traj=torch.tensor([[0], [1]]), batch_size=[2, 1]
            )
            buffer.extend(step)
        pairs = buffer.sample(400).get("obs").view(-1, 2).tolist()
        return {(a, b) for a, b in pairs}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy's copy= keyword
        assert drawn(SliceSampler(slice_len=2, traj_key="traj")) == {
            (1, 2),
            (2, 3),
            (11, 12),
            (12, 13),
        }
        prioritized = drawn(_slices(6, ndim=2)[0])
    assert (3, 1) in prioritized and (13, 11) in prioritized
    assert (1, 2) not in prioritized


def test_a_slice_start_keeps_the_mass_it_was_written_with_and_ends_count_in_p_min() -> None:
    """A step gets its mass when it is written (the largest priority given so far), not when a
    whole slice starting at it is stored: step 2, written before the priority 4 was given,
    still holds 1 once step 3 makes its slice whole (priority.new-at-max). The weights divide
    by p_min from the min tree over every written step, which PrioritizedSliceSampler.sample
    does not zero ('no need to update self._min_tree', samplers/prioritized_slice.py): with
    the two valid starts of equal mass 4, each weight is (4 / 1) ** -1, p_min the mass of the
    trajectory's last step, which cannot start a slice (priority.importance-weights)."""
    sampler, buffer = _slices(8)
    buffer.extend(_frames([0, 1, 2], [0, 0, 0]))
    buffer.update_priority(torch.tensor([0, 1]), torch.tensor([4.0, 4.0]))
    sample, info = buffer.sample(8, return_info=True)
    assert set(sample.get("obs").tolist()) == {0, 1, 2}
    assert info["priority_weight"].tolist() == pytest.approx([0.25] * 8)
    buffer.extend(_frames([3], [0]))
    assert float(sampler._max_priority[0]) == 4.0
    assert sampler._sum_tree[2] == 1.0


def test_a_failed_prioritized_slice_sample_leaves_the_trajectory_ends_zeroed() -> None:
    """PrioritizedSliceSampler.sample zeroes the mass of every step too near its trajectory's
    end, samples, then restores them; when no step can start a slice the inner sample raises
    RuntimeError('non-positive p_sum') before the restore (samplers/prioritized_slice.py,
    sample), so the zeroed masses stay 0: once the trajectory holds a slice, its start has
    no mass and every later sample raises too (priority.new-at-max, priority.eviction)."""
    sampler, buffer = _slices(4)
    buffer.extend(_frames([0], [0]))
    with pytest.raises(RuntimeError, match="non-positive p_sum"):
        buffer.sample(2)
    assert sampler._sum_tree[0] == 0.0
    buffer.extend(_frames([1], [0]))
    with pytest.raises(RuntimeError, match="non-positive p_sum"):
        buffer.sample(2)


# -- asynchronous actors (async.version-recorded) ---------------------------------------------
class _Versioned(torch.nn.Module):
    """Logits (0, version): the weights that act name their version."""

    def __init__(self) -> None:
        super().__init__()
        self.version = torch.nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        version = self.version.expand(observation.shape[:-1])
        return torch.stack([torch.zeros_like(version), version], -1)


def test_a_frame_is_tagged_with_the_version_before_the_weights_that_acted_on_it() -> None:
    from tensordict.nn import TensorDictModule
    from torch.distributions import Categorical
    from torchrl.modules import ProbabilisticActor

    net = _Versioned()
    policy = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        out_keys=["action"],
        distribution_class=Categorical,
        return_log_prob=True,
    )
    torch.manual_seed(0)
    collector = Collector(
        GymWrapper(_Count(), categorical_action_encoding=True),
        policy=policy,
        frames_per_batch=4,
        total_frames=12,
        track_policy_version=True,
    )
    tags, acted = [], []
    for batch in collector:
        tags.append(batch.get("policy_version").reshape(-1).tolist())
        acted.append(batch.get("logits")[..., 1].reshape(-1).int().tolist())
        with torch.no_grad():
            net.version.add_(1)
        collector.update_policy_weights_()
    collector.shutdown()
    # The weights of version k act on the whole of batch k, but its first frame carries the
    # tag PolicyVersion wrote when that frame's observation was produced, before the update.
    assert acted == [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2]]
    assert tags == [[0, 0, 0, 0], [0, 1, 1, 1], [1, 2, 2, 2]]
