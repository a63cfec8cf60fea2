"""AgileRL 2.58.0 alone: the behaviours ``xpspec/adapters/agilerl.expectations.toml`` declares
as findings, reproduced with AgileRL's own ``ReplayBuffer`` and no xpspec code. Skipped when
AgileRL is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("agilerl")

from typing import Any

import gymnasium
import numpy as np
import torch
from agilerl.components.replay_buffer import ReplayBuffer
from tensordict import TensorDict


def _buffer(rows: int, max_size: int = 64) -> ReplayBuffer:
    """A ``ReplayBuffer`` holding ``rows`` rows whose ``obs`` is the row's write index."""
    buffer = ReplayBuffer(max_size=max_size)
    for i in range(rows):
        buffer.add(TensorDict({"obs": torch.tensor([[float(i)]])}, batch_size=[1]))
    return buffer


def _drawn(buffer: ReplayBuffer, batch_size: int) -> list[int]:
    return [int(v) for v in buffer.sample(batch_size)["obs"].reshape(-1).tolist()]


def test_a_batch_never_repeats_a_row() -> None:
    """replay.uniform-windows: below 16384 stored rows, ReplayBuffer._sample_indices draws
    torch.randperm(size)[:k], so a batch holds k distinct rows. With 8 rows and batches of 8,
    200 batches are each a permutation of the 8 rows; independent draws with replacement
    would give a permutation with probability 8!/8**8 (about 0.0024) per batch."""
    torch.manual_seed(0)
    buffer = _buffer(8)
    for _ in range(200):
        assert sorted(_drawn(buffer, 8)) == list(range(8))


def test_a_batch_is_cut_to_the_rows_stored() -> None:
    """replay.window-validity: ReplayBuffer.sample draws min(batch_size, size) rows, so a
    batch of 16 asked of a buffer holding 5 rows has 5 rows, not 16 (nor none)."""
    torch.manual_seed(0)
    buffer = _buffer(5)
    drawn = _drawn(buffer, 16)
    assert len(drawn) == 5
    assert sorted(drawn) == [0, 1, 2, 3, 4]


# -- train_off_policy's learn-step accounting ---------------------------------------------------
class _CountingBuffer(ReplayBuffer):
    """AgileRL's ReplayBuffer noting, at each sample, how many vector steps were added."""

    def __init__(self, max_size: int) -> None:
        super().__init__(max_size=max_size)
        self.adds = 0
        self.sampled_after: list[int] = []

    def add(self, data: TensorDict) -> None:
        super().add(data)
        self.adds += 1

    def sample(self, batch_size: int, return_idx: bool = False, *, beta: float = 0.4) -> TensorDict:
        self.sampled_after.append(self.adds)
        return super().sample(batch_size, return_idx, beta=beta)


def _train(num_envs: int, learn_step: int, vector_steps: int) -> list[int]:
    """Run train_off_policy with a DQN on CartPole for ``vector_steps`` vector steps; the
    number of vector steps stored before each update."""
    import contextlib
    import io

    import gymnasium
    from agilerl.algorithms import DQN
    from agilerl.training.train_off_policy import train_off_policy

    torch.manual_seed(0)
    env = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("CartPole-v1") for _ in range(num_envs)]
    )
    agent = DQN(
        env.single_observation_space,
        env.single_action_space,
        batch_size=1,
        learn_step=learn_step,
        net_config={"encoder_config": {"hidden_size": [8]}},
    )
    memory = _CountingBuffer(max_size=1000)
    steps = vector_steps * num_envs
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        train_off_policy(
            env,
            "CartPole-v1",
            "DQN",
            [agent],
            memory,
            max_steps=steps,
            evo_steps=steps,
            eval_steps=1,
            verbose=False,
        )
    return memory.sampled_after


def test_the_first_update_of_a_learn_step_comes_after_one_vector_step() -> None:
    """unroll.fractional-schedule: with learn_step = 2 * num_envs the loop learns when
    idx_step % (learn_step // num_envs) == 0 (training/train_off_policy.py, train_off_policy),
    after vector steps 1, 3, 5 of 6 -- not after 2, 4, 6: the first update follows one vector
    step and the last vector step earns none."""
    assert _train(num_envs=2, learn_step=4, vector_steps=6) == [1, 3, 5]


def test_learn_step_is_floored_to_whole_vector_steps() -> None:
    """train.updates-per-call: learn_step counts env steps per update, but the loop makes
    num_envs // learn_step updates per vector step when learn_step <= num_envs, and one
    update every learn_step // num_envs vector steps otherwise. With 3 envs and learn_step 2
    (1.5 updates per vector step asked) it makes 1 per vector step; with 2 envs and learn_step
    3 (one update per 1.5 vector steps) it makes one every vector step."""
    assert _train(num_envs=3, learn_step=2, vector_steps=4) == [1, 2, 3, 4]
    assert _train(num_envs=2, learn_step=3, vector_steps=4) == [1, 2, 3, 4]


# -- what train_off_policy stores ----------------------------------------------------------------
def test_the_buffer_keeps_no_truncation_and_stores_the_reset_transition() -> None:
    """preprocess.identity-is-plain: train_off_policy stores Transition(obs, action, reward,
    next_obs, done=done) with ``done`` the vector env's terminated flags and its ``trunc``
    dropped (training/train_off_policy.py, train_off_policy), and under Gymnasium's NEXT_STEP
    autoreset it also stores the step that acts on an episode's final observation, into the
    next episode's first (reward 0). CartPole cut by a TimeLimit of 2 steps: every episode is
    truncated, no stored row is done, and every third row starts at a final observation --
    rows of a truncated LAST and of the FIRST after it read as any other."""
    import contextlib
    import io

    import gymnasium
    from agilerl.algorithms import DQN
    from agilerl.training.train_off_policy import train_off_policy

    torch.manual_seed(0)
    env = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.wrappers.TimeLimit(gymnasium.make("CartPole-v1"), 2)]
    )
    agent = DQN(
        env.single_observation_space,
        env.single_action_space,
        batch_size=1,
        learn_step=1,
        net_config={"encoder_config": {"hidden_size": [8]}},
    )
    memory = ReplayBuffer(max_size=100)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        train_off_policy(
            env, "CartPole-v1", "DQN", [agent], memory, max_steps=9, evo_steps=9, eval_steps=1
        )
    stored = memory.storage
    assert stored is not None and len(memory) == 9
    assert stored["done"][:9].sum().item() == 0  # three truncated episodes, no row done
    rewards = stored["reward"][:9].reshape(-1).tolist()
    # rows 2, 5, 8 act on a final observation into the reset: reward 0, next_obs a new FIRST
    assert [i for i, r in enumerate(rewards) if r == 0.0] == [2, 5, 8]
    assert torch.equal(stored["obs"][2], stored["next_obs"][1])


# -- PPO's learner-side preprocessing ------------------------------------------------------------
class _Counter(gymnasium.Env[np.ndarray, np.int64]):
    """Observes its own step count t, reward 1 per step; an episode ends after ``length``
    steps, terminated or truncated."""

    observation_space = gymnasium.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, length: int, terminated: bool) -> None:
        self.length, self.terminated = length, terminated

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        end = self.t == self.length
        obs = np.array([float(self.t)], np.float32)
        return obs, 1.0, end and self.terminated, end and not self.terminated, {}


def _ppo(num_envs: int, learn_step: int, **kwargs: Any) -> Any:
    from agilerl.algorithms import PPO

    torch.manual_seed(0)
    space = gymnasium.spaces.Box(0.0, 10.0, (1,), "float32")
    return PPO(
        space,
        gymnasium.spaces.Discrete(2),
        num_envs=num_envs,
        learn_step=learn_step,
        net_config={"encoder_config": {"hidden_size": [8]}},
        **kwargs,
    )


def test_gae_reads_the_done_flag_of_the_next_row() -> None:
    """learner.gae, learner.truncation-bootstraps: collect_rollouts stores in row t the done
    flag of the step taken from row t's observation (rollouts/on_policy.py), but
    RolloutBuffer.compute_returns_and_advantages gates row t by ``1 - dones[t + 1]``
    (components/rollout_buffer.py). An episode of two steps that terminates, then the row of
    its final observation, then one more row; every value 10, gamma 0.5, lambda 0: the
    terminating step (row 1) bootstraps ``1 + 0.5 * 10 - 10 = -4`` instead of ``1 - 10 = -9``,
    and the step before it (row 0) is cut, ``1 - 10 = -9`` instead of ``-4``."""
    from agilerl.components.rollout_buffer import RolloutBuffer

    space = gymnasium.spaces.Box(0.0, 10.0, (1,), "float32")
    buffer = RolloutBuffer(4, space, gymnasium.spaces.Discrete(2), gae_lambda=0.0, gamma=0.5)
    for t, (reward, done) in enumerate([(1.0, False), (1.0, True), (0.0, False), (1.0, False)]):
        buffer.add(
            obs=[[float(t)]], action=[0], reward=[reward], done=[done], value=[10.0], log_prob=[0.0]
        )
    buffer.compute_returns_and_advantages(last_value=[10.0], last_done=[False])
    advantages = buffer.buffer["advantages"][:, 0].tolist()
    assert advantages[:2] == [-9.0, -4.0]


def test_a_return_runs_on_into_the_next_episode() -> None:
    """learner.gae, learner.truncation-bootstraps: the rows of test_gae_reads_the_done_flag_of_
    the_next_row with lambda 1: the episode's last transition (row 1) reads the flag of its
    final observation's row (not done) and runs on through it into the next episode, return
    ``1 + 0.5 * (0 + 0.5 * (1 + 0.5 * 10)) = 2.5``, where the terminated episode's is 1 (and
    a truncated one's ``1 + 0.5 * 10 = 6``)."""
    from agilerl.components.rollout_buffer import RolloutBuffer

    space = gymnasium.spaces.Box(0.0, 10.0, (1,), "float32")
    buffer = RolloutBuffer(4, space, gymnasium.spaces.Discrete(2), gae_lambda=1.0, gamma=0.5)
    for t, (reward, done) in enumerate([(1.0, False), (1.0, True), (0.0, False), (1.0, False)]):
        buffer.add(
            obs=[[float(t)]], action=[0], reward=[reward], done=[done], value=[10.0], log_prob=[0.0]
        )
    buffer.compute_returns_and_advantages(last_value=[10.0], last_done=[False])
    assert buffer.buffer["returns"][1, 0].item() == 2.5


def test_collect_rollouts_stores_a_row_for_an_episode_final_observation() -> None:
    """learner.update-count, learner.stats-exclude-bootstrap: under Gymnasium's NEXT_STEP
    autoreset (SyncVectorEnv's default) collect_rollouts also acts on an episode's final
    observation and stores that row (reward 0, not done), and PPO.learn trains on every row of
    the buffer. Episodes of two truncated steps, six vector steps: rows observe t = 0, 1, 2,
    0, 1, 2 -- rows 2 and 5 hold final observations."""
    from agilerl.rollouts import collect_rollouts

    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=False)])
    agent = _ppo(1, 6)
    collect_rollouts(agent, env, n_steps=6)
    rows = agent.rollout_buffer.buffer
    assert rows["observations"][:, 0, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert rows["rewards"][:, 0].tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert rows["dones"][:, 0].tolist() == [False, True, False, False, True, False]
    assert agent.rollout_buffer.size() == 6


def _learn(agent: Any) -> tuple[int, torch.Tensor]:
    """PPO.learn on the agent's rollout buffer: the number of mini-batches it evaluated and
    the normalised advantages of the batch it built (read back from its RolloutMinibatch)."""
    from agilerl.algorithms import ppo

    built: list[Any] = []
    original = ppo.RolloutMinibatch.from_tensordict
    calls = []
    evaluate = agent.evaluate_actions

    def spy(td: Any) -> Any:
        built.append(original(td))
        return built[-1]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return evaluate(*args, **kwargs)

    ppo.RolloutMinibatch.from_tensordict = spy
    agent.evaluate_actions = counted
    try:
        agent.learn()
    finally:
        ppo.RolloutMinibatch.from_tensordict = original
    return len(calls), built[0].advantages


def test_ppo_learn_makes_epochs_times_ceil_rows_over_batch_size_updates() -> None:
    """learner.update-count: PPO._learn_from_rollout_buffer_flat makes, per epoch,
    ceil(rows / batch_size) mini-batches over every row of the buffer (algorithms/ppo.py),
    rows of final observations included: 6 rows of which 2 hold final observations (4
    transitions), batch_size 4, 2 epochs: 2 * ceil(6 / 4) = 4 updates, not 2 * ceil(4 / 4) = 2."""
    from agilerl.rollouts import collect_rollouts

    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=False)])
    agent = _ppo(1, 6, batch_size=4, update_epochs=2)
    collect_rollouts(agent, env, n_steps=6)
    updates, _ = _learn(agent)
    assert updates == 4


def test_ppo_normalises_advantages_over_every_row_with_the_sample_std() -> None:
    """learner.stats-exclude-bootstrap: PPO._learn_from_rollout_buffer_flat normalises
    ``(A - A.mean()) / (A.std() + 1e-8)`` over every buffer row (algorithms/ppo.py), rows of
    final observations included, with torch's Bessel-corrected std."""
    from agilerl.rollouts import collect_rollouts

    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=False)])
    agent = _ppo(1, 6)
    collect_rollouts(agent, env, n_steps=6)
    raw = agent.rollout_buffer.buffer["advantages"][:, 0].clone()
    _, normalized = _learn(agent)
    want = (raw - raw.mean()) / (raw.std(correction=1) + 1e-8)
    assert torch.allclose(normalized.reshape(-1), want, atol=1e-6)
    population = (raw - raw.mean()) / raw.std(correction=0)
    assert not torch.allclose(normalized.reshape(-1), population, atol=1e-3)


# -- recurrent PPO: the rollout's hidden state and the BPTT sequences ------------------------------
def _recurrent_ppo(length: int, n_steps: int, max_seq_len: int, terminated: bool = True) -> Any:
    """AgileRL's recurrent PPO (its default LSTM encoder) after one collect_rollouts_recurrent
    of ``n_steps`` on one env of episodes of ``length`` steps, terminated or truncated."""
    from agilerl.algorithms import PPO
    from agilerl.rollouts import collect_rollouts_recurrent

    torch.manual_seed(0)
    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(length, terminated)])
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        num_envs=1,
        learn_step=n_steps,
        recurrent=True,
        max_seq_len=max_seq_len,
        net_config={"encoder_config": {"hidden_state_size": 8}},
    )
    collect_rollouts_recurrent(agent, env, n_steps=n_steps)
    return agent


def test_the_rollout_resets_the_hidden_state_at_an_episodes_final_observation() -> None:
    """timestep.state-reset: collect_rollouts_recurrent sets an env's hidden state back to
    get_initial_hidden_state (zeros) after a step that returned terminated or truncated
    (rollouts/on_policy.py, _collect_rollouts), and under Gymnasium's NEXT_STEP autoreset the
    next observation is the episode's final one: the policy acts there from the initial state
    and on the next episode's first observation from the state after it. Episodes of two
    steps: rows observe t = 0, 1, 2, 0, 1, 2; the stored states (the ones the policy acted
    with) are the initial one at rows 0, 2 and 5, and not at row 3, the second episode's
    first."""
    agent = _recurrent_ppo(2, 6, 3)
    rows = agent.rollout_buffer.buffer
    assert rows["observations"][:, 0, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    states = torch.cat([v[:, 0].reshape(6, -1) for v in rows["hidden_states"].values()], dim=1)
    initial = [bool((row == 0).all()) for row in states]
    assert initial == [True, False, True, False, False, True]


def test_a_bptt_sequence_runs_from_an_episodes_final_observation_into_the_next() -> None:
    """recurrent.contiguous: RolloutBuffer.prepare_sequence_tensors splits each env's rows
    after every done row (components/rollout_buffer.py), and collect_rollouts_recurrent
    stores the row of an episode's final observation after its done row: that row starts the
    next piece, followed by the next episode's first rows, so one training sequence holds
    the end of one episode and the start of the next. Episodes of two steps, six rows (t = 0,
    1, 2, 0, 1, 2; done at rows 1 and 4): the sequences observe [0, 1], [2, 0, 1] and [2],
    zero-padded to 3 and flagged in pad_mask."""
    agent = _recurrent_ppo(2, 6, 3)
    buffer = agent.rollout_buffer
    buffer.prepare_sequence_tensors()
    padded = buffer.padded_data.view(buffer.num_sequences, buffer.max_sequence_length)
    assert padded["observations"][..., 0].tolist() == [[0, 1, 0], [2, 0, 1], [2, 0, 0]]
    assert padded["pad_mask"].tolist() == [
        [True, True, False],
        [True, True, True],
        [True, False, False],
    ]


def test_sequences_are_padded_to_the_longest_piece_not_to_max_seq_len() -> None:
    """recurrent.contiguous: prepare_sequence_tensors zero-pads the sequences to the longest
    one (RolloutBuffer._pad_sequences with target_length=None, components/rollout_buffer.py),
    so when no piece of rows between done rows reaches max_seq_len every sequence is shorter
    than max_seq_len. The rows of the test above with max_seq_len 4: sequences of 3."""
    agent = _recurrent_ppo(2, 6, 4)
    buffer = agent.rollout_buffer
    buffer.prepare_sequence_tensors()
    assert (buffer.num_sequences, buffer.max_sequence_length) == (3, 3)
    assert buffer.padded_data["observations"].shape[0] == 3 * 3


def test_the_rollout_buffer_stores_a_truncation_as_done() -> None:
    """preprocess.identity-is-plain (train_on_policy with a recurrent PPO):
    collect_rollouts_recurrent stores done = terminated or truncated (rollouts/on_policy.py,
    _collect_rollouts) and RolloutBuffer.add keeps it as dones, with no truncation column
    (components/rollout_buffer.py): truncated and terminated episodes of two steps leave the
    same rows, done at rows 1 and 4 (after t = 1)."""
    truncated = _recurrent_ppo(2, 6, 3, terminated=False).rollout_buffer.buffer
    terminated = _recurrent_ppo(2, 6, 3, terminated=True).rollout_buffer.buffer
    assert truncated["observations"][:, 0, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert truncated["dones"][:, 0].tolist() == [False, True, False, False, True, False]
    assert truncated["dones"].tolist() == terminated["dones"].tolist()
    # a TensorDict iterates over its batch dimension, not its keys
    assert not [key for key in truncated.keys() if "trunc" in str(key)]  # noqa: SIM118


def test_bptt_chunks_start_after_done_rows_and_leave_remainders_out() -> None:
    """replay.whole-buffer: prepare_sequence_tensors (components/rollout_buffer.py) splits the
    rows after every done row and cuts each piece into chunks of max_seq_len from its first
    row, leaving the remainder out, a shorter piece padded. Six rows t = 0, 1, 2, 0, 1, 2
    (done at rows 1 and 4) with max_seq_len 2: pieces [0, 1], [2, 0, 1], [2] give the
    sequences [0, 1], [2, 0] and [2] padded; the row at index 4 (t = 1) is in none, where
    chunks cut from the oldest row would be [0, 1], [2, 0], [1, 2]."""
    buffer = _recurrent_ppo(2, 6, 2).rollout_buffer
    buffer.prepare_sequence_tensors()
    padded = buffer.padded_data.view(buffer.num_sequences, buffer.max_sequence_length)
    assert padded["observations"][..., 0].tolist() == [[0, 1], [2, 0], [2, 0]]
    assert padded["pad_mask"].tolist() == [[True, True], [True, True], [True, False]]


# -- preprocessing in a ReplayBuffer subclass's add ------------------------------------------------
class _Ramp(_Counter):
    """A ``_Counter`` whose reward into step ``t`` is ``t``."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self.t), terminated, truncated, info


def _loop(env: Any, memory: ReplayBuffer, vector_steps: int, batch_size: int = 1) -> None:
    """train_off_policy with a DQN (learn_step = num_envs) for ``vector_steps`` steps."""
    import contextlib
    import io

    from agilerl.algorithms import DQN
    from agilerl.training.train_off_policy import train_off_policy

    torch.manual_seed(0)
    agent = DQN(
        env.single_observation_space,
        env.single_action_space,
        batch_size=batch_size,
        learn_step=env.num_envs,
        net_config={"encoder_config": {"hidden_size": [8]}},
    )
    steps = vector_steps * env.num_envs
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        train_off_policy(
            env, "toy", "DQN", [agent], memory, max_steps=steps, evo_steps=steps, eval_steps=1
        )


def _stored(memory: ReplayBuffer, key: str) -> list[float]:
    assert memory.storage is not None
    return memory.storage[key][: len(memory)].reshape(-1).tolist()


class _Scaling(ReplayBuffer):
    def add(self, data: TensorDict) -> None:
        data = data.clone()
        data["reward"] = data["reward"] * 0.5 - 1.0
        super().add(data)


def test_a_reward_transform_in_add_misses_only_the_runs_first_reward() -> None:
    """preprocess.transform: a row is (o_t, a_t, r_t+1, o_t+1), so the reward into a time
    step is held by the row before it. Under NEXT_STEP autoreset the row before a FIRST is the
    reset row (reward 0), which a transform in add reaches (0 * 0.5 - 1 = -1); but no row
    comes before an env's first FIRST of the run, so its reward, 0, is never transformed.
    Episodes of 2 terminated steps: the rows hold 1, 2, then the reset row's 0, each scaled."""
    env = gymnasium.vector.SyncVectorEnv([lambda: _Ramp(2, terminated=True)])
    memory = _Scaling(max_size=32)
    _loop(env, memory, vector_steps=6)
    assert _stored(memory, "obs") == [0.0, 1.0, 2.0] * 2
    assert _stored(memory, "reward") == [-0.5, 0.0, -1.0] * 2


class _LeavingOut(ReplayBuffer):
    """Leaves out the rows whose observation is ``t = 2``."""

    def add(self, data: TensorDict) -> None:
        keep = data["obs"].reshape(-1) != 2.0
        if bool(keep.any()):
            super().add(data[keep])


def test_leaving_out_a_row_loses_the_next_steps_reward_and_the_episode_end() -> None:
    """preprocess.exclusion: a row holds the reward into the next time step and, in done,
    whether the episode ends there (training/train_off_policy.py, train_off_policy). An add
    that leaves out the row of t = 2 in episodes of 3 terminated steps loses r_3 = 3 and the
    only done of each episode: the stored row of the LAST t = 3 follows a row that is not
    done, and nothing in the buffer says an episode ended."""
    env = gymnasium.vector.SyncVectorEnv([lambda: _Ramp(3, terminated=True)])
    memory = _LeavingOut(max_size=32)
    _loop(env, memory, vector_steps=8)
    assert _stored(memory, "obs") == [0.0, 1.0, 3.0, 0.0, 1.0, 3.0]
    assert _stored(memory, "reward") == [1.0, 2.0, 0.0] * 2
    assert _stored(memory, "done") == [0.0] * 6


class _HoldingToEpisodeEnd(ReplayBuffer):
    """Holds every row until the row after a done row (the row of the episode's final
    observation), then adds the episode."""

    def __init__(self, max_size: int) -> None:
        super().__init__(max_size=max_size)
        self.held: list[TensorDict] = []
        self.ended = False

    def add(self, data: TensorDict) -> None:
        self.held.append(data.clone())
        if self.ended:
            super().add(torch.cat(self.held))
            self.held = []
        self.ended = bool(data["done"].reshape(-1)[0])


def test_an_add_waiting_for_an_episode_end_never_sees_a_truncation() -> None:
    """preprocess.delayed-per-env: train_off_policy hands add done = terminated and drops
    trunc (training/train_off_policy.py, train_off_policy), so an add holding rows until an
    episode ends sees terminated ends only. Episodes of 2 truncated steps: after 9 vector
    steps every row is still held, nothing is stored and the loop never learned; with
    terminated episodes the same add releases each one at the row of its final observation."""
    truncated = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=False)])
    memory = _HoldingToEpisodeEnd(max_size=32)
    _loop(truncated, memory, vector_steps=9)
    assert (len(memory), len(memory.held)) == (0, 9)
    terminated = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=True)])
    memory = _HoldingToEpisodeEnd(max_size=32)
    _loop(terminated, memory, vector_steps=9)
    assert (len(memory), len(memory.held)) == (9, 0)
    assert _stored(memory, "obs") == [0.0, 1.0, 2.0] * 3


def test_learning_waits_for_a_batch_of_stored_rows() -> None:
    """train.warmup-gate: besides memory.size > learning_delay the loop's learn condition
    asks len(memory) >= batch_size (training/train_off_policy.py, train_off_policy), so with
    learning_delay 0 and batch_size 3 it makes no update until 3 rows are stored: an add that
    stores one row every other vector step first learns after 5 vector steps."""

    class _EveryOther(_CountingBuffer):
        def add(self, data: TensorDict) -> None:
            if self.adds % 2 == 0:
                ReplayBuffer.add(self, data)
            self.adds += 1

    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(50, terminated=True)])
    memory = _EveryOther(max_size=32)
    _loop(env, memory, vector_steps=7, batch_size=3)
    assert memory.sampled_after == [5, 6, 7]


# -- MultiStepReplayBuffer and RainbowDQN's n-step targets ----------------------------------------
def _n_step_buffer(
    rewards: list[list[float]], dones: list[list[float]], n_step: int = 3, gamma: float = 0.5
) -> Any:
    """A ``MultiStepReplayBuffer`` handed one vector step per entry of ``rewards`` as
    train_off_policy hands it (``n_step_memory.add``); an env's ``obs`` at vector step ``s`` is
    ``s`` and its ``next_obs`` ``s + 1``."""
    from agilerl.components.replay_buffer import MultiStepReplayBuffer

    buffer = MultiStepReplayBuffer(max_size=64, n_step=n_step, gamma=gamma)
    for s, (reward, done) in enumerate(zip(rewards, dones, strict=True)):
        b = len(reward)
        buffer.add(
            TensorDict(
                {
                    "obs": torch.full((b, 1), float(s)),
                    "action": torch.zeros(b, 1),
                    "reward": torch.tensor(reward).reshape(b, 1),
                    "next_obs": torch.full((b, 1), float(s + 1)),
                    "done": torch.tensor(done).reshape(b, 1),
                },
                batch_size=[b],
            )
        )
    return buffer


def test_a_multi_step_buffer_never_stores_the_last_n_minus_one_starts() -> None:
    """learner.nstep-episode-end: MultiStepReplayBuffer.add stores a row only once n_step
    transitions follow its start (components/replay_buffer.py, MultiStepReplayBuffer.add:
    nothing while its deque holds fewer), and nothing flushes the deque: after 5 transitions
    with n_step = 3 the starts 3 and 4 have no n-step row, where the clause cuts their windows
    at the newest stored step."""
    buffer = _n_step_buffer([[1.0]] * 5, [[0.0]] * 5)
    assert len(buffer) == 3
    assert buffer.storage["obs"][:3].reshape(-1).tolist() == [0.0, 1.0, 2.0]


def test_a_window_from_an_episodes_last_transition_runs_into_the_next_episode() -> None:
    """learner.nstep-episode-end: MultiStepReplayBuffer._get_n_step_info checks the done flag
    of the 2nd to n-th transitions of a window only, and overwrites the first's with the last
    one's (components/replay_buffer.py): a window starting at an episode's terminated last
    transition sums the next episode's rewards and is not done. One env, n_step 3, gamma 0.5,
    rewards 1, 2, 4, done at the first: 1 + 0.5 * 2 + 0.25 * 4 = 3, not done, not 1, done."""
    buffer = _n_step_buffer([[1.0], [2.0], [4.0]], [[1.0], [0.0], [0.0]])
    row = buffer.sample_from_indices(torch.tensor([0]))
    assert row["reward"].item() == 3.0
    assert row["done"].item() == 0.0 and row["next_obs"].item() == 3.0


def test_any_envs_termination_cuts_every_envs_window_bootstrapped_with_gamma_n() -> None:
    """learner.nstep-episode-end: MultiStepReplayBuffer._get_n_step_info stops summing at the
    first vector step where done.bool().any(), over all envs of the vector step, and
    RainbowDQN.learn bootstraps every n-step row with gamma ** n_step
    (algorithms/dqn_rainbow.py, RainbowDQN.learn -> _dqn_loss). Two envs, n_step 3, gamma 0.5,
    rewards 1, 2, 4: env 1 terminates at the second step, so env 0's window from step 0 sums
    1 + 0.5 * 2 = 2 (k = 2, not 1 + 1 + 1 = 3), ends at next_obs 2 not done, and is bootstrapped
    with 0.5 ** 3, not 0.5 ** 2."""
    from agilerl.algorithms import RainbowDQN

    buffer = _n_step_buffer(
        [[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]], [[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    )
    row = buffer.sample_from_indices(torch.tensor([0]))  # env 0, start 0
    assert row["reward"].item() == 2.0
    assert row["next_obs"].item() == 2.0 and row["done"].item() == 0.0

    torch.manual_seed(0)
    agent = RainbowDQN(
        gymnasium.spaces.Box(0.0, 10.0, (1,), np.float32),
        gymnasium.spaces.Discrete(2),
        batch_size=1,
        gamma=0.5,
        n_step=3,
        net_config={"encoder_config": {"hidden_size": [8]}},
    )
    gammas: list[float] = []
    loss = agent._dqn_loss

    def recorded(*args: Any) -> Any:
        gammas.append(args[-1])
        return loss(*args)

    agent._dqn_loss = recorded
    one_step = row.clone()
    one_step["idxs"] = torch.tensor([0])
    agent.learn(one_step, n_experiences=row)
    assert gammas == [0.5**3]


def test_a_window_runs_through_a_truncation_and_from_a_final_observation() -> None:
    """learner.nstep-episode-end: train_off_policy hands the buffer done = terminated and,
    under Gymnasium's NEXT_STEP autoreset, the step that acts on an episode's final observation
    (training/train_off_policy.py; test_the_buffer_keeps_no_truncation_and_stores_the_reset_transition).
    Episodes of 2 steps, truncated, reward 1 per step, n_step 3, gamma 0.5: the window from the
    first observation sums 1 + 0.5 * 1 + 0.25 * 0 past the truncation and ends at the next
    episode's first observation, and the final observation gets an n-step row of its own,
    0 + 0.5 * 1 + 0.25 * 1 of the next episode's rewards."""
    from agilerl.components.data import Transition, transition_to_tensordict
    from agilerl.components.replay_buffer import MultiStepReplayBuffer

    env = gymnasium.vector.SyncVectorEnv([lambda: _Counter(2, terminated=False)])
    buffer = MultiStepReplayBuffer(max_size=64, n_step=3, gamma=0.5)
    obs, _ = env.reset(seed=0)
    for _ in range(6):
        next_obs, reward, terminated, _, _ = env.step(np.zeros(1, dtype=np.int64))
        transition = transition_to_tensordict(
            Transition(
                obs=obs, action=np.zeros(1), reward=reward, next_obs=next_obs, done=terminated
            )
        )
        transition.batch_size = torch.Size([1])
        buffer.add(transition)
        obs = next_obs
    stored = buffer.storage
    assert len(buffer) == 4
    assert stored["obs"][:4].reshape(-1).tolist() == [0.0, 1.0, 2.0, 0.0]
    assert stored["reward"][0].item() == 1.5 and stored["next_obs"][0].item() == 0.0
    assert stored["reward"][2].item() == 0.75 and stored["done"][:4].sum().item() == 0


# -- checkpoint and resume: save_checkpoint / load_checkpoint around train_off_policy -------------
class _ResetLog(gymnasium.vector.VectorWrapper):
    """Notes each reset and step of the vector env it wraps."""

    def __init__(self, env: gymnasium.vector.VectorEnv) -> None:
        super().__init__(env)
        self.calls: list[str] = []

    def reset(self, **kwargs: Any) -> Any:
        self.calls.append("reset")
        return super().reset(**kwargs)

    def step(self, actions: Any) -> Any:
        self.calls.append("step")
        return super().step(actions)


def _dqn(env: gymnasium.vector.VectorEnv) -> Any:
    from agilerl.algorithms import DQN

    return DQN(
        env.single_observation_space,
        env.single_action_space,
        batch_size=1,
        learn_step=1,
        net_config={"encoder_config": {"hidden_size": [8]}},
    )


def _quiet_train(env: Any, agent: Any, memory: ReplayBuffer, max_steps: int, evo: int) -> None:
    import contextlib
    import io

    from agilerl.training.train_off_policy import train_off_policy

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        train_off_policy(
            env, "CartPole-v1", "DQN", [agent], memory, max_steps=max_steps, evo_steps=evo
        )


def test_an_agent_checkpoint_saves_no_replay_buffer(tmp_path: Any) -> None:
    """resume.buffer-restored: ReplayBuffer has no save or load API (components/replay_buffer.py),
    and save_checkpoint saves the agent's attributes and networks (algorithms/core/base.py,
    get_checkpoint_dict), of which train_off_policy's memory is none: a run resumed from a
    checkpoint trains on a new, empty memory, warming up again."""
    torch.manual_seed(0)
    env = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")])
    agent, memory = _dqn(env), ReplayBuffer(max_size=100)
    _quiet_train(env, agent, memory, 4, 4)
    assert len(memory) == 4
    path = str(tmp_path / "agent.pt")
    agent.save_checkpoint(path)
    import dill

    saved = torch.load(path, pickle_module=dill, weights_only=False)
    assert saved["steps"] == 4
    assert not [v for v in saved.values() if isinstance(v, ReplayBuffer)]
    assert not [
        name
        for name in ("save", "load", "state_dict", "load_state_dict", "save_to_disk")
        if hasattr(ReplayBuffer, name)
    ]


def test_train_off_policy_resets_its_env_when_called_again(tmp_path: Any) -> None:
    """resume.env-continues: train_off_policy resets its vector env at the start of every
    evolution chunk (training/train_off_policy.py: obs, info = vec_env.reset()) and tests the
    agent on it after the chunk (agent.test): a run resumed by a second call with the loaded
    agent starts every env's episode anew, though the agent's step count goes on."""
    torch.manual_seed(0)
    env = _ResetLog(gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")]))
    agent = _dqn(env)
    _quiet_train(env, agent, ReplayBuffer(max_size=100), 4, 4)
    path = str(tmp_path / "agent.pt")
    agent.save_checkpoint(path)
    assert env.calls[:5] == ["reset", "step", "step", "step", "step"]
    mark = len(env.calls)
    resumed = _dqn(env)
    resumed.load_checkpoint(path)
    assert resumed.steps == 4
    _quiet_train(env, resumed, ReplayBuffer(max_size=100), 8, 4)
    assert env.calls[mark : mark + 5] == ["reset", "step", "step", "step", "step"]
    assert resumed.steps == 8
