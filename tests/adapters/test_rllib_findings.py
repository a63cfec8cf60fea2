"""RLlib 2.60.0 alone (no xpspec code), reproducing what the recurrent, priority and checkpoint
rows' expectations cite: each test builds the framework's own objects and asserts the behaviour
the finding describes. Skipped when RLlib is not installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_finding_ppo_masks_the_newest_observation_of_a_cut_chunk() -> None:
    # RLlib's own LSTM example module on CartPole, max_seq_len 4, one chunk of 6 transitions
    # (the episode goes on: truncate_episodes cut it). PPO's learner connector appends the
    # chunk's newest observation as a bootstrap step (AddOneTsToEpisodesAndTruncate), so the
    # 7 rows make sequences of 4 and 3; the second sequence's last real position (inside
    # SEQ_LENS) holds that observation and is out of the loss (LOSS_MASK False), though the
    # episode is not over: the policy acts on that observation in the next chunk.
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=6)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=LSTMContainingRLModule,
                model_config={"lstm_cell_size": 8, "dense_layers": [8], "max_seq_len": 4},
            )
        )
        .training(num_epochs=1, minibatch_size=None)
        .learners(num_learners=0)
        .debugging(seed=0)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        (chunk,) = runner.sample(num_timesteps=6, force_reset=True)
    finally:
        runner.stop()
    assert (len(chunk), chunk.is_done) == (6, False)
    newest = np.asarray(chunk.get_observations(-1))
    learner: Any = config.build_learner(env=runner.env)
    module = next(iter(learner.module.values()))
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=[chunk], shared_data={}
    )
    columns = batch[next(iter(batch))]
    lengths = np.asarray(columns[Columns.SEQ_LENS]).tolist()
    mask = np.asarray(columns[Columns.LOSS_MASK]).astype(int).tolist()
    assert module.is_stateful() and lengths == [4, 3]
    assert mask == [[1, 1, 1, 1], [1, 1, 0, 0]]
    obs = np.asarray(columns[Columns.OBS])
    assert np.array_equal(obs[1, 2], newest)  # a real position: inside SEQ_LENS


def _episode(observations: list[int], terminated: bool, t_started: int = 0) -> Any:
    """A ``SingleAgentEpisode`` of scalar observations (one transition between two)."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    n = len(observations) - 1
    return SingleAgentEpisode(
        observations=[np.array([o], dtype=np.float32) for o in observations],
        actions=[0] * n,
        rewards=[0.0] * n,
        terminated=terminated,
        t_started=t_started,
        len_lookback_buffer=0,
    )


def test_finding_prioritized_nodes_are_transitions_not_observations() -> None:
    # PrioritizedEpisodeReplayBuffer.add gives a stored episode one segment-tree node per
    # transition, (episode, ts) for ts in range(len(episode)): a terminated episode of 4
    # observations gets 3 nodes, none for its final observation, and no sample ever starts
    # there (sample draws o_t of a node and o_(t + n_step)).
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    buffer = PrioritizedEpisodeReplayBuffer(capacity=100, alpha=1.0)
    buffer.add([_episode([10, 11, 12, 13], terminated=True)])
    assert [ts for _, ts, _ in buffer._indices] == [0, 1, 2]
    starts = {float(s.get_observations(0)[0]) for s in buffer.sample(batch_size_B=200, beta=0.0)}
    assert starts == {10.0, 11.0, 12.0}


def test_finding_prioritized_a_chunks_newest_observation_gets_its_node_with_the_next_chunk() -> (
    None
):
    # An episode still running: the chunk's newest observation is stored (it is the next
    # chunk's first) but holds no node until the continuation chunk is added; its node then
    # gets the running maximum _max_priority ** alpha of that moment.
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    buffer = PrioritizedEpisodeReplayBuffer(capacity=100, alpha=1.0)
    first = _episode([0, 1, 2], terminated=False)
    buffer.add([first])
    assert buffer.episodes[0].get_observations(-1)[0] == 2.0
    assert [ts for _, ts, _ in buffer._indices] == [0, 1]
    buffer.sample(batch_size_B=1, beta=0.0)
    buffer.update_priorities(np.array([3.0]))
    following = first.cut()
    following.add_env_step(np.array([3.0], dtype=np.float32), 0, 0.0, terminated=True)
    buffer.add([following])
    assert [ts for _, ts, _ in buffer._indices] == [0, 1, 2]
    assert buffer._sum_segment[buffer._indices[2][2]] == 3.0


def test_finding_prioritized_n_step_nodes_too_near_the_end_keep_their_mass() -> None:
    # With n_step 2 a node one transition before its episode's end starts no window, yet it
    # keeps its mass in _sum_segment: sample() draws it and redraws (ts + n_step > len), so
    # the windows it returns are drawn with mass / (mass of the nodes that fit), not the
    # p_sample = mass / _sum_segment.sum() it computes their weights from.
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    buffer = PrioritizedEpisodeReplayBuffer(capacity=100, alpha=1.0)
    buffer.add([_episode([0, 1, 2], terminated=True)])
    total = buffer._sum_segment.sum()
    assert [ts for _, ts, _ in buffer._indices] == [0, 1] and total == 2.0
    sampled = buffer.sample(batch_size_B=50, n_step=2, beta=0.0)
    assert {float(s.get_observations(0)[0]) for s in sampled} == {0.0}
    assert buffer._sum_segment[buffer._last_sampled_indices[0]] / total == 0.5


def test_finding_prioritized_eviction_is_by_whole_episodes_over_all_timesteps() -> None:
    # PrioritizedEpisodeReplayBuffer.add: capacity 3 timesteps over all episodes. Two
    # episodes of 2 transitions (one per env in a spec run, 3 items each) make 4 > 3, and the
    # first is evicted whole, where per-env rings of 3 items would hold every item of both.
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    buffer = PrioritizedEpisodeReplayBuffer(capacity=3, alpha=1.0)
    buffer.add([_episode([0, 1, 2], terminated=True)])
    buffer.add([_episode([10, 11, 12], terminated=True)])
    assert buffer.get_num_timesteps() == 2 and len(buffer.episodes) == 1
    assert {float(ep.get_observations(0)[0]) for ep in buffer.episodes} == {10.0}


@pytest.fixture(scope="module")
def dqn_resumed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One DQN train() on CartPole (4 timesteps of one env, the episode still going, no
    update yet), saved with ``save_to_path`` under ``store_buffer_in_checkpoints=True`` (DQN's
    documented switch for the buffer's contents) and restored with
    ``Algorithm.from_checkpoint``; what each algorithm's buffer and next sample hold."""
    import ray
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.dqn import DQNConfig

    path = str(tmp_path_factory.mktemp("dqn") / "checkpoint")
    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=4)
        .training(num_steps_sampled_before_learning_starts=1000, store_buffer_in_checkpoints=True)
        .learners(num_learners=0)
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .debugging(seed=0)
    )
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        algo = config.build_algo()
        restored = None
        try:
            algo.train()
            out: dict[str, Any] = {
                "state_keys": set(algo.get_state()),
                "saved_timesteps": algo.local_replay_buffer.get_num_timesteps(),
            }
            algo.save_to_path(path)
            (out["saved_next"],) = algo.env_runner.sample(num_timesteps=1)
            restored = Algorithm.from_checkpoint(path)
            out["restored_timesteps"] = restored.local_replay_buffer.get_num_timesteps()
            (out["restored_next"],) = restored.env_runner.sample(num_timesteps=1)
            return out
        finally:
            algo.stop()
            if restored is not None:
                restored.stop()
    finally:
        ray.shutdown()


def test_finding_store_buffer_in_checkpoints_is_ignored_on_the_new_api_stack(
    dqn_resumed: dict[str, Any],
) -> None:
    # DQNConfig.training documents store_buffer_in_checkpoints ("Set this to True, if you want
    # the contents of your buffer(s) to be stored in any saved checkpoints as well"); only the
    # old stack's Algorithm.__getstate__ reads it, and the new stack's get_state holds no
    # buffer: the restored algorithm's buffer is empty.
    assert dqn_resumed["saved_timesteps"] == 4
    assert "local_replay_buffer" not in dqn_resumed["state_keys"]
    assert dqn_resumed["restored_timesteps"] == 0


def test_finding_a_restored_env_runner_starts_every_episode_anew(
    dqn_resumed: dict[str, Any],
) -> None:
    # The saved algorithm's next sample continues its episode at t = 4; the restored one's
    # env runner holds no episode in progress (SingleAgentEnvRunner.get_state: its connectors,
    # module and NUM_ENV_STEPS_SAMPLED_LIFETIME) and resets its env at its first sample
    # (_needs_initial_reset): its chunk starts a new episode at t = 0.
    saved, restored = dqn_resumed["saved_next"], dqn_resumed["restored_next"]
    assert (saved.t_started, saved.is_done) == (4, False)
    assert restored.t_started == 0 and restored.id_ != saved.id_


def test_finding_dqn_loss_breaks_on_sequences_of_one_step() -> None:
    # DQN's default module with RLlib's own LSTM encoder (use_lstm) and max_seq_len 1, the
    # sequences DQN's training_step samples for a stateful module (batch_length_T =
    # max_seq_len, lookback 1): the learner connector adds a time rank of 1, and
    # compute_loss_for_module squeezes q_next_best to [B] while TERMINATEDS is [B, 1], so the
    # masked mean meets a [B, B] tensor and raises.
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=16)
        .rl_module(model_config={"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 1})
        .training(train_batch_size_per_learner=8)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        learner = config.build_learner(env=runner.env)
        buffer = EpisodeReplayBuffer(capacity=1000)
        buffer.add(runner.sample(num_timesteps=16))
        sequences = buffer.sample(
            num_items=8, n_step=1, batch_length_T=1, lookback=1, sample_episodes=True
        )
    finally:
        runner.stop()
    # The buffer counts a sequence of one transition as two timesteps.
    assert [len(s) for s in sequences] == [1] * 4
    with pytest.raises(IndexError, match="shape of the mask"):
        learner.update(episodes=sequences, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 16})


def _dqn_sequences_of_a_short_chunk() -> tuple[Any, list[Any], Any]:
    """DQN with RLlib's LSTM encoder (max_seq_len 3) on CartPole; one chunk of 2 transitions
    (observations t = 0, 1, 2) in an EpisodeReplayBuffer, sampled as DQN's training_step
    samples a stateful module (batch_length_T = max_seq_len, lookback 1) for
    train_batch_size_per_learner = 4 * (3 + 1), the timesteps of 4 full sequences."""
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=2)
        .rl_module(model_config={"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 3})
        .training(train_batch_size_per_learner=16)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        (chunk,) = runner.sample(num_timesteps=2, force_reset=True)
        learner = config.build_learner(env=runner.env)
    finally:
        runner.stop()
    assert (len(chunk), chunk.is_done) == (2, False)
    buffer = EpisodeReplayBuffer(capacity=1000)
    buffer.rng = np.random.default_rng(0)
    buffer.add([chunk])
    sequences = buffer.sample(
        num_items=16, n_step=1, batch_length_T=3, lookback=1, sample_episodes=True
    )
    return chunk, sequences, learner


def test_finding_dqn_counts_sequences_in_timesteps_so_clipped_ones_add_windows() -> None:
    # train_batch_size_per_learner is a number of timesteps: _sample_episodes adds
    # len(sequence) + 1 per sequence, so sequences clipped at the stored episode's newest step
    # (1 or 2 transitions, not 3) make a batch of more than 4 sequences.
    _, sequences, _ = _dqn_sequences_of_a_short_chunk()
    lengths = [len(s) for s in sequences]
    assert set(lengths) <= {1, 2}
    assert sum(n + 1 for n in lengths) >= 16 and len(sequences) > 4


def test_finding_dqn_sequences_pad_before_the_newest_stored_observation() -> None:
    # A sequence is a slice of transitions: the chunk's newest observation (t = 2, stored in
    # the buffer with the chunk) is never one of its positions, so a sequence starting at
    # t = 1 holds one real position and is padded at t = 2; the learner connector gives it
    # SEQ_LENS 1 and LOSS_MASK [1, 0, 0].
    chunk, sequences, learner = _dqn_sequences_of_a_short_chunk()
    assert all(s.t_started + len(s) <= len(chunk) for s in sequences)
    assert any(s.t_started == 1 for s in sequences)
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=sequences, shared_data={}
    )
    columns = batch[next(iter(batch))]
    lengths = np.asarray(columns[Columns.SEQ_LENS]).tolist()
    mask = np.asarray(columns[Columns.LOSS_MASK]).astype(int).tolist()
    assert sorted(lengths) == sorted(len(s) for s in sequences)
    assert [1, 0, 0] in mask and all(sum(m) == n for m, n in zip(mask, lengths))


# -- asynchronous actors: IMPALA on a local Ray cluster ----------------------------------------
def _impala(num_env_runners: int, fragment: int, learner_class: Any = None) -> Any:
    from ray.rllib.algorithms.impala import IMPALAConfig

    config = (
        IMPALAConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=num_env_runners, rollout_fragment_length=fragment)
        .training(train_batch_size_per_learner=fragment, broadcast_interval=1)
        .learners(num_learners=0, num_aggregator_actors_per_learner=0)
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .debugging(seed=0)
    )
    if learner_class is not None:
        config = config.learners(learner_class=learner_class)
    return config.build_algo()


def test_finding_impala_env_runners_get_the_weights_of_the_update_before() -> None:
    # IMPALA with the local env runner only: each train() samples one fragment of 8 steps and
    # makes one update (train batch 8), broadcast_interval = 1. training_step asks the learner
    # for its state only when its count of calls since the last sync reaches 1, and resets
    # the count to 0 after incrementing it: it syncs every second call. The state
    # IMPALALearner.update returns is taken from the learner's state queue before the update
    # is made: the previous update's (none at the first). After 5 calls the learner has made
    # 5 updates and the env runner holds the weights of the third.
    import ray
    import torch
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        algo = _impala(0, 8)
        try:
            learner = algo.learner_group._learner
            seq = []
            for _ in range(5):
                algo.train()
                seq.append((learner._weights_seq_no, algo.env_runner.get_state()[WEIGHTS_SEQ_NO]))
            assert seq == [(1, 0), (2, 1), (3, 1), (4, 3), (5, 3)]
            ours = algo.env_runner.module.state_dict()
            theirs = next(iter(learner.module.values())).state_dict()
            assert any(not torch.equal(ours[k], theirs[k]) for k in ours if k in theirs)
        finally:
            algo.stop()
    finally:
        ray.shutdown()


def test_finding_impala_counts_the_env_steps_of_a_fetch_before_its_updates() -> None:
    # IMPALA with two remote env runners, fragments of 8 steps, one update per fragment. The
    # first train() sends each runner its sample request; once both samples are ready, the
    # next train() fetches both, counts their 16 steps, then updates on each fragment: the
    # first update's timesteps already hold the second fragment's steps.
    import time

    import ray
    from ray.rllib.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    seen: list[int] = []

    class CountingLearner(IMPALATorchLearner):  # type: ignore[misc]
        def before_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
            seen.append(int(timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, -1)))
            super().before_gradient_based_update(timesteps=timesteps)

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    try:
        algo = _impala(2, 8, CountingLearner)
        try:
            algo.train()
            assert seen == []
            time.sleep(10.0)
            algo.train()
            assert seen == [16, 16]
        finally:
            algo.stop()
    finally:
        ray.shutdown()


# -- offline and hybrid replay: the old API stack's MixedInput ------------------------------------
def _old_stack(config: Any) -> Any:
    return (
        config.api_stack(
            enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False
        )
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=8, batch_mode="complete_episodes")
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .debugging(seed=0)
    )


def test_old_stack_ppo_mixes_the_sampler_and_a_dataset_with_mixed_input(tmp_path: Any) -> None:
    # The online + offline mix RLlib 2.60.0 has: on the old API stack, config.input_ = {
    # "sampler": p, path: q} makes the RolloutWorker read through ShuffledInput(MixedInput),
    # which picks one source per batch with those probabilities (offline/mixed_input.py,
    # evaluation/rollout_worker.py). On the new stack a dict is no offline input
    # (AlgorithmConfig.is_offline needs a path or a list of paths), so no OfflineData is built.
    import ray
    from ray.rllib.offline import MixedInput, ShuffledInput

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ppo = _old_stack(PPOConfig()).training(train_batch_size=32, minibatch_size=16, num_epochs=1)
        algo = ppo.copy(copy_frozen=False).offline_data(output=str(tmp_path)).build_algo()
        try:
            algo.train()
        finally:
            algo.stop()
        mixed = ppo.copy(copy_frozen=False).offline_data(
            input_={"sampler": 0.5, f"{tmp_path}/*.json": 0.5}
        )
        assert not mixed.is_offline
        algo = mixed.build_algo()
        try:
            reader = algo.env_runner.input_reader
            assert isinstance(reader, ShuffledInput) and isinstance(reader.child, MixedInput)
            assert algo.train()["training_iteration"] == 1
        finally:
            algo.stop()
    finally:
        ray.shutdown()


def test_finding_old_stack_dqn_cannot_build_its_replay_buffer() -> None:
    # DQN on the old API stack with the replay buffer config its own validation error asks
    # for: validate_buffer_config replaces replay_buffer_config["type"] by the buffer class
    # (utils/replay_buffers/utils.py), and Algorithm._create_local_replay_buffer_if_necessary
    # then tests `"EpisodeReplayBuffer" in` that class (algorithms/algorithm.py): TypeError.
    import ray
    from ray.rllib.algorithms.dqn import DQNConfig

    config = _old_stack(DQNConfig()).training(
        replay_buffer_config={
            "type": "MultiAgentPrioritizedReplayBuffer",
            "prioritized_replay_alpha": 0.6,
            "prioritized_replay_beta": 0.4,
            "prioritized_replay_eps": 1e-6,
        },
        train_batch_size=8,
    )
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(TypeError, match="argument of type 'ABCMeta' is not iterable"):
            config.build_algo()
    finally:
        ray.shutdown()


def test_finding_mixed_input_takes_each_batch_from_one_source() -> None:
    # MixedInput.next draws one source per call with the dict's probabilities and returns that
    # source's whole batch (np.random.choice(self.choices, p=self.p), offline/mixed_input.py):
    # at 0.5 : 0.5, batches of four rows are all from one source, never two from each.
    from ray.rllib.offline import InputReader, IOContext, MixedInput
    from ray.rllib.policy.sample_batch import SampleBatch

    class Rows(InputReader):
        def __init__(self, source: int) -> None:
            self.source = source

        def next(self) -> SampleBatch:
            return SampleBatch({"source": np.full(4, self.source)})

    np.random.seed(0)
    mixed = MixedInput({lambda ioctx: Rows(0): 0.5, lambda ioctx: Rows(1): 0.5}, IOContext())
    batches = [mixed.next()["source"].tolist() for _ in range(8)]
    assert all(len(set(rows)) == 1 for rows in batches)
    assert {rows[0] for rows in batches} == {0, 1}
