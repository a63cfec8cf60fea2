"""Minimal reproductions, with skrl 2.1.1 (torch backend) and Gymnasium alone, of the findings
that xpspec/adapters/skrl.expectations.toml and skrl_tlb.expectations.toml declare. Skipped
when skrl is not installed."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pytest

pytest.importorskip("skrl")

import gymnasium
import torch
from skrl.agents.torch.dqn import DQN, DQN_CFG
from skrl.agents.torch.ppo import PPO, PPO_CFG, PPO_RNN
from skrl.agents.torch.ppo.ppo import compute_gae
from skrl.envs.wrappers.torch import wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
from skrl.trainers.torch import SequentialTrainer


def _memory(size: int, values: list[float], replacement: bool) -> RandomMemory:
    """A one-env memory of ``size`` rows into which ``values`` were added in order."""
    memory = RandomMemory(memory_size=size, num_envs=1, device="cpu", replacement=replacement)
    memory.create_tensor(name="x", size=1, dtype=torch.float32)
    for v in values:
        memory.add_samples(x=torch.tensor([[v]]))
    return memory


def test_sampling_without_replacement_returns_fewer_rows_than_asked() -> None:
    """RandomMemory's default (replacement=False) draws torch.randperm(size)[:batch_size]
    (memories/torch/random.py, RandomMemory.sample): a batch larger than the stored rows
    comes back short, not as a full batch."""
    memory = _memory(8, [0.0, 1.0, 2.0], replacement=False)
    torch.manual_seed(0)
    ((x,),) = memory.sample(["x"], batch_size=10)
    assert x.shape[0] == 3
    assert sorted(x.reshape(-1).tolist()) == [0.0, 1.0, 2.0]


def test_sequences_cross_the_write_head_of_a_full_memory() -> None:
    """Once the ring is full, RandomMemory.sample draws sequence starts among the physical
    rows 0 .. memory_size - sequence_length (memories/torch/random.py, RandomMemory.sample):
    a sequence may hold the newest row followed by the oldest (it crosses the write head),
    and the chronological sequence that wraps the physical end is never drawn."""
    memory = _memory(4, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], replacement=True)  # rows [4, 5, 2, 3]
    torch.manual_seed(0)
    ((x,),) = memory.sample(["x"], batch_size=200, sequence_length=2)
    windows = {tuple(w) for w in x.reshape(-1, 2).tolist()}
    assert (5.0, 2.0) in windows  # newest, then oldest: not a stored sequence
    assert (3.0, 4.0) not in windows  # a stored sequence, never drawn
    assert windows == {(4.0, 5.0), (5.0, 2.0), (2.0, 3.0)}


def test_mini_batches_is_a_count_split_as_evenly_as_possible() -> None:
    """PPO samples len(memory) indexes split into cfg.mini_batches parts by np.array_split
    (memories/torch/base.py, Memory.sample_by_index): 10 rows in 3 mini-batches are 4, 3
    and 3 rows, where mini-batches of a size would be 4, 4 and 2."""
    memory = _memory(10, [float(v) for v in range(10)], replacement=False)
    batches = memory.sample(["x"], batch_size=len(memory), mini_batches=3)
    assert [b[0].shape[0] for b in batches] == [4, 3, 3]


def test_advantages_are_normalised_over_every_row_with_the_sample_std() -> None:
    """compute_gae standardises the advantages of every memory row with the Bessel-corrected
    std plus 1e-8 (agents/torch/ppo/ppo.py, compute_gae): with rows of advantages 1, 2, 6
    (one step each, gamma 0), the normalised values use std sqrt(7), not sqrt(14/3)."""
    rewards = torch.tensor([[1.0], [2.0], [6.0]])
    flags = torch.ones(3, 1, dtype=torch.bool)
    _, advantages = compute_gae(
        rewards=rewards,
        terminated=flags,
        truncated=~flags,
        values=torch.zeros(3, 1),
        last_values=torch.zeros(1),
        discount_factor=0.0,
    )
    expected = (torch.tensor([1.0, 2.0, 6.0]) - 3.0) / (7.0**0.5 + 1e-8)
    assert torch.allclose(advantages.reshape(-1), expected)


def _gae_of_truncated_row(next_reward: float, time_limit_bootstrap: bool) -> float:
    """compute_gae over one env's rows as skrl's trainer stores them under NEXT_STEP
    autoreset: the truncated last transition of an episode (row 0), the row of that episode's
    final observation (row 1: reward 0, neither flag), the next episode's first row (row 2,
    reward ``next_reward``); every value 1."""
    rewards = torch.tensor([[1.0], [0.0], [next_reward]])
    truncated = torch.tensor([[True], [False], [False]])
    terminated = torch.zeros(3, 1, dtype=torch.bool)
    returns, _ = compute_gae(
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        values=torch.ones(3, 1),
        last_values=torch.ones(1),
        discount_factor=0.9,
        lambda_coefficient=0.75,
        time_limit_bootstrap=time_limit_bootstrap,
    )
    return float(returns[0, 0])


def test_without_time_limit_bootstrap_a_truncated_episode_reads_the_next_one() -> None:
    """With time_limit_bootstrap=False (the default), compute_gae gates by terminated only
    (agents/torch/ppo/ppo.py, compute_gae): a truncated transition's return runs on through
    the final observation's row into the next episode's reward. With True it stops there
    (and PPO.record_transition adds gamma * V(next_observations) to the truncated reward)."""
    assert _gae_of_truncated_row(0.0, False) != _gae_of_truncated_row(5.0, False)
    assert _gae_of_truncated_row(0.0, True) == _gae_of_truncated_row(5.0, True) == 1.0


class _Counter(gymnasium.Env[np.ndarray, np.int64]):
    """Observes its own step count t; an episode is truncated after two steps, every reward
    1 (subclasses change where and how it ends and the reward into t)."""

    observation_space = gymnasium.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    length, truncates, reward_is_t = 2, True, False

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        end = self.t == self.length
        reward = float(self.t) if self.reward_is_t else 1.0
        obs = np.array([float(self.t)], np.float32)
        return obs, reward, end and not self.truncates, end and self.truncates, {}


class _Policy(CategoricalMixin, Model):
    def __init__(self, env: Any) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        CategoricalMixin.__init__(self)
        self.w = torch.nn.Parameter(torch.zeros(1))

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        return torch.zeros(inputs["observations"].shape[0], 2) * self.w, {}


class _Value(DeterministicMixin, Model):
    def __init__(self, env: Any) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        DeterministicMixin.__init__(self)

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        return torch.zeros(inputs["observations"].shape[0], 1), {}


def test_the_trainer_stores_a_row_for_an_episode_final_observation() -> None:
    """Gymnasium's vector envs autoreset NEXT_STEP by default; skrl's GymnasiumWrapper passes
    their steps through (envs/wrappers/torch/gymnasium_envs.py) and SequentialTrainer records
    every step as a transition (trainers/torch/sequential.py, train). The step taken at an
    episode's final observation (t = 2) is stored as a row of reward 0 and neither flag, which
    PPO's update trains on like any other row (agents/torch/ppo/ppo.py, update)."""
    venv = gymnasium.vector.SyncVectorEnv([_Counter, _Counter])
    env = wrap_env(venv, wrapper="gymnasium", verbose=False)
    memory = RandomMemory(memory_size=4, num_envs=2, device="cpu")
    cfg = PPO_CFG(rollouts=100, experiment={"write_interval": 0, "checkpoint_interval": 0})
    agent = PPO(
        models={"policy": _Policy(env), "value": _Value(env)},
        memory=memory,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device="cpu",
        cfg=cfg,
    )
    cfg_trainer = {"timesteps": 4, "headless": True, "disable_progressbar": True}
    SequentialTrainer(
        env=env, agents=agent, cfg={**cfg_trainer, "close_environment_at_exit": False}
    ).train()
    obs = memory.get_tensor_by_name("observations")[:, 0, 0].tolist()
    rewards = memory.get_tensor_by_name("rewards")[:, 0, 0].tolist()
    truncated = memory.get_tensor_by_name("truncated")[:, 0, 0].tolist()
    assert obs == [0.0, 1.0, 2.0, 0.0]  # row 2 holds the final observation t = 2
    assert rewards == [1.0, 1.0, 0.0, 1.0]
    assert truncated == [False, True, False, False]


class _Q(DeterministicMixin, Model):
    """A linear Q-network."""

    def __init__(self, env: Any) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        DeterministicMixin.__init__(self)
        self.linear = torch.nn.Linear(1, 2)

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        return self.linear(inputs["observations"]), {}


def _train_dqn(timesteps: int, memory_size: int = 8, **cfg: Any) -> tuple[DQN, list[int]]:
    """SequentialTrainer.train of a DQN agent on two _Counter envs in a SyncVectorEnv
    (NEXT_STEP autoreset, Gymnasium's default), ``cfg`` its DQN_CFG; returns the agent and
    the timesteps at which DQN.update ran."""
    memory = RandomMemory(memory_size=memory_size, num_envs=2, device="cpu")
    return _dqn_with(memory, [_Counter, _Counter], timesteps, **cfg)


class _RecurrentQ(_Q):
    """The linear Q-network declaring one RNN state per env as skrl's documented recurrent
    models do (``get_specification``), recording the input keys of every forward."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.num_envs = env.num_envs
        self.keys: list[set[str]] = []

    def get_specification(self) -> dict[str, Any]:
        return {"rnn": {"sequence_length": 1, "sizes": [(1, self.num_envs, 1)]}}

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        self.keys.append(set(inputs))
        return super().compute(inputs, role)


def test_dqn_hands_its_q_network_no_recurrent_state() -> None:
    """DQN.act passes its Q-network observations and states only (agents/torch/dqn/dqn.py),
    and DQN keeps no RNN states: a Q-network declaring an RNN specification never receives an
    ``rnn`` input under SequentialTrainer, so a recurrent state under DQN would be the
    model's own, not one skrl feeds and resets (PPO_RNN does, agents/torch/ppo/ppo_rnn.py)."""
    torch.manual_seed(0)
    env = wrap_env(
        gymnasium.vector.SyncVectorEnv([_Counter, _Counter]), wrapper="gymnasium", verbose=False
    )
    q = _RecurrentQ(env)
    agent = DQN(
        models={"q_network": q, "target_q_network": _RecurrentQ(env)},
        memory=RandomMemory(memory_size=8, num_envs=2, device="cpu"),
        observation_space=env.observation_space,
        action_space=env.action_space,
        device="cpu",
        cfg=DQN_CFG(experiment={"write_interval": 0, "checkpoint_interval": 0}, batch_size=2),
    )
    cfg_trainer = {"timesteps": 4, "headless": True, "disable_progressbar": True}
    SequentialTrainer(
        env=env, agents=agent, cfg={**cfg_trainer, "close_environment_at_exit": False}
    ).train()
    assert len(q.keys) >= 4  # it acted at every timestep (and trained)
    assert all("rnn" not in keys for keys in q.keys)
    assert all("observations" in keys for keys in q.keys)


def test_dqn_updates_after_the_first_timestep_then_every_update_interval() -> None:
    """DQN.post_interaction updates when timestep >= learning_starts and timestep %
    update_interval == 0 (agents/torch/dqn/dqn.py), the trainer counting timesteps from 0
    (trainers/torch/base.py, Trainer.train): with update_interval 3 the updates follow vector
    steps 1, 4, 7, ..., not 3, 6, ...; over 6 timesteps the last two earn no update."""
    _, updates = _train_dqn(6, update_interval=3, batch_size=2)
    assert updates == [0, 3]


def test_dqn_memory_keeps_no_truncation_and_stores_the_reset_transition() -> None:
    """DQN's memory has no truncated tensor (agents/torch/dqn/dqn.py, DQN.init;
    record_transition adds terminated only), and under NEXT_STEP autoreset the trainer also
    acts on an episode's final observation, whose transition into the next episode's first
    observation is stored like any other: a truncated episode's end leaves no mark in the
    memory (row 1 reaches the final observation t = 2 unflagged; row 2 goes from it to t = 0
    with reward 0 and terminated False)."""
    agent, _ = _train_dqn(4, learning_starts=100)
    memory = agent.memory
    assert "truncated" not in memory.get_tensor_names()
    obs = memory.get_tensor_by_name("observations")[:4, 0, 0].tolist()
    following = memory.get_tensor_by_name("next_observations")[:4, 0, 0].tolist()
    rewards = memory.get_tensor_by_name("rewards")[:4, 0, 0].tolist()
    terminated = memory.get_tensor_by_name("terminated")[:4, 0, 0].tolist()
    assert obs == [0.0, 1.0, 2.0, 0.0]
    assert following == [1.0, 2.0, 0.0, 1.0]
    assert rewards == [1.0, 1.0, 0.0, 1.0]
    assert terminated == [False, False, False, False]


def test_rewards_shaper_shapes_the_reset_transition_of_a_final_observation() -> None:
    """DQN.record_transition applies rewards_shaper to every transition before add_samples
    (agents/torch/dqn/dqn.py), the reset step from an episode's final observation included:
    that row's reward 0 is stored as shaper(0) (here -1), so the next episode's first
    observation follows a row of reward -1, while an env's very first observation follows no
    row at all."""
    shaper = lambda rewards, timestep, timesteps: rewards * 0.5 - 1.0  # noqa: E731
    agent, _ = _train_dqn(4, learning_starts=100, rewards_shaper=shaper)
    rewards = agent.memory.get_tensor_by_name("rewards")[:4, 0, 0].tolist()
    assert rewards == [-0.5, -0.5, -1.0, -0.5]


def test_dqn_mini_batches_are_cut_to_the_rows_stored_without_replacement() -> None:
    """DQN.update samples memory.sample(names, batch_size) (agents/torch/dqn/dqn.py); the
    default RandomMemory draws torch.randperm(len(memory))[:batch_size]
    (memories/torch/random.py): after one timestep of two envs, an update of batch_size 4
    trains on the 2 stored rows."""
    sizes: list[int] = []
    sample = RandomMemory.sample

    def recorded(self: RandomMemory, names: list[str], **kwargs: Any) -> Any:
        out = sample(self, names, **kwargs)
        sizes.append(int(out[0][0].shape[0]))
        return out

    RandomMemory.sample = recorded  # type: ignore[method-assign]
    try:
        _, updates = _train_dqn(1, batch_size=4)
    finally:
        RandomMemory.sample = sample  # type: ignore[method-assign]
    assert (updates, sizes) == ([0], [2])


def test_no_agent_computes_n_step_returns() -> None:
    """No torch agent of skrl 2.1.1 has an n-step setting: the value-based agents (DQN, DDQN,
    SARSA, Q-learning) and the actor-critics bootstrap one step, PPO, A2C, RPO and TRPO use
    GAE (agents/torch/*/*_cfg.py). So the adapter declares no ``nstep`` observable and
    learner.nstep-episode-end is not applicable."""
    import dataclasses
    import importlib

    names = ["a2c", "amp", "cem", "ddpg", "ddqn", "dqn", "ppo", "q_learning", "rpo", "sac"]
    names += ["sarsa", "td3", "trpo"]
    for name in names:
        module = importlib.import_module(f"skrl.agents.torch.{name}")
        cfg = getattr(module, f"{name.upper()}_CFG")
        fields = {f.name for f in dataclasses.fields(cfg)}
        assert not {f for f in fields if "n_step" in f or "nstep" in f}, (name, fields)
        assert "rollouts" in fields or "discount_factor" in fields, (name, fields)


# -- preprocessing through a user's memory (a RandomMemory subclass overriding add_samples) ---


class _Keeping(RandomMemory):
    """A user's memory whose add_samples adds the rows whose observation ``keep`` accepts
    (one env), and remembers the tensor names it was given."""

    def __init__(self, keep: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keep = keep
        self.names: set[str] = set()

    def add_samples(self, **tensors: Any) -> None:
        self.names |= set(tensors)
        if self.keep(float(tensors["observations"][0, 0])):
            super().add_samples(**tensors)


class _Rewarding(_Counter):
    """Observes its step count t, reward t into t; terminates at t = 3."""

    length, truncates, reward_is_t = 3, False, True


def _dqn_with(
    memory: RandomMemory, env_classes: Any, timesteps: int, **cfg: Any
) -> tuple[DQN, list[int]]:
    """SequentialTrainer.train of a DQN agent with ``memory`` on a SyncVectorEnv of
    ``env_classes`` (one env class, or a list of them), ``cfg`` its DQN_CFG; returns the agent
    and the timesteps at which DQN.update ran."""
    torch.manual_seed(0)
    classes = env_classes if isinstance(env_classes, list) else [env_classes]
    env = wrap_env(gymnasium.vector.SyncVectorEnv(classes), wrapper="gymnasium", verbose=False)
    agent = DQN(
        models={"q_network": _Q(env), "target_q_network": _Q(env)},
        memory=memory,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device="cpu",
        cfg=DQN_CFG(experiment={"write_interval": 0, "checkpoint_interval": 0}, **cfg),
    )
    updates: list[int] = []
    update = agent.update

    def recorded(*, timestep: int, timesteps: int) -> None:
        updates.append(timestep)
        update(timestep=timestep, timesteps=timesteps)

    agent.update = recorded  # type: ignore[method-assign]
    cfg_trainer = {"timesteps": timesteps, "headless": True, "disable_progressbar": True}
    SequentialTrainer(
        env=env, agents=agent, cfg={**cfg_trainer, "close_environment_at_exit": False}
    ).train()
    return agent, updates


@pytest.mark.parametrize(
    ("replacement", "message"),
    [(False, "input.numel() == 0"), (True, "from=0 >= to=0")],
)
def test_dqn_update_on_a_memory_that_stored_nothing_raises(replacement: bool, message: str) -> None:
    """DQN.post_interaction updates at timestep 0 with learning_starts 0 (agents/torch/dqn/
    dqn.py), whatever the memory holds. A user's memory that has added nothing yet (it holds
    rows back) makes RandomMemory.sample return an empty batch without replacement, on which
    the gradient step runs and track_data's torch.max raises; with replacement
    torch.randint(0, 0, ...) raises (memories/torch/random.py, RandomMemory.sample)."""
    memory = _Keeping(lambda obs: False, memory_size=8, num_envs=1, replacement=replacement)
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _dqn_with(memory, _Rewarding, 2)
    assert len(memory) == 0


def test_rows_a_memory_leaves_out_earn_the_same_updates() -> None:
    """DQN.post_interaction gates on the timestep alone (agents/torch/dqn/dqn.py): a memory
    that leaves out the rows of t = 1 (two of the six) gets as many updates as one that adds
    them all."""
    kept = _Keeping(lambda obs: obs != 1.0, memory_size=8, num_envs=1)
    _, updates = _dqn_with(kept, _Rewarding, 6)
    everything = _Keeping(lambda obs: True, memory_size=8, num_envs=1)
    _, all_updates = _dqn_with(everything, _Rewarding, 6)
    assert (len(kept), len(everything)) == (4, 6)
    assert updates == all_updates == [0, 1, 2, 3, 4, 5]


def test_leaving_out_a_row_drops_the_reward_into_the_next_one() -> None:
    """A memory row is (o_t, a_t, r_t+1, o_t+1, terminated) (agents/torch/dqn/dqn.py,
    DQN.record_transition): leaving out the row of t = 1 leaves out the reward into t = 2
    (2), which no other row holds, so the stored row of t = 2 follows a row of reward 1."""
    memory = _Keeping(lambda obs: obs != 1.0, memory_size=8, num_envs=1)
    _dqn_with(memory, _Rewarding, 4, learning_starts=100)
    obs = memory.get_tensor_by_name("observations")[:3, 0, 0].tolist()
    rewards = memory.get_tensor_by_name("rewards")[:3, 0, 0].tolist()
    assert obs == [0.0, 2.0, 3.0]
    assert rewards == [1.0, 3.0, 0.0]  # the reward into t = 2 is in no row


def test_a_memory_sees_neither_truncation_nor_infos() -> None:
    """DQN.record_transition passes its memory's add_samples observations, states, actions,
    rewards, next observations, next states and terminated, never truncated nor infos
    (agents/torch/dqn/dqn.py): a memory subclass cannot tell a truncated episode's end (nor
    read a task id from infos)."""
    memory = _Keeping(lambda obs: True, memory_size=8, num_envs=1)
    _dqn_with(memory, _Counter, 4, learning_starts=100)  # truncated after 2 steps
    assert memory.names == {
        "observations",
        "states",
        "actions",
        "rewards",
        "next_observations",
        "next_states",
        "terminated",
    }
    assert memory.get_tensor_by_name("terminated")[:4, 0, 0].tolist() == [False] * 4


def test_rows_added_one_at_a_time_fill_a_memory_of_several_envs_in_write_order() -> None:
    """Memory.add_samples writes a batch of fewer rows than num_envs at [memory_index,
    env_index:] and advances env_index (memories/torch/base.py): rows added one at a time fill
    a memory of 2 envs in write order, whatever env they came from, and it evicts in that
    order once memory_size * num_envs rows are written."""
    memory = RandomMemory(memory_size=2, num_envs=2, device="cpu")
    memory.create_tensor(name="x", size=1, dtype=torch.float32)
    for v in range(5):
        memory.add_samples(x=torch.tensor([[float(v)]]))
    assert memory.get_tensor_by_name("x")[..., 0].tolist() == [[4.0, 1.0], [2.0, 3.0]]
    assert (len(memory), memory.filled) == (4, True)


def test_several_rows_into_a_one_env_memory_land_at_different_positions_per_tensor() -> None:
    """With num_envs 1, Memory.add_samples stores a batch of n rows at memory_index and
    advances memory_index inside its loop over the tensors (memories/torch/base.py): the
    second tensor of the same call is written n rows further on, so a one-env memory cannot
    take a vector step's rows as a flat list."""
    memory = RandomMemory(memory_size=8, num_envs=1, device="cpu")
    memory.create_tensor(name="x", size=1, dtype=torch.float32)
    memory.create_tensor(name="y", size=1, dtype=torch.float32)
    memory.add_samples(x=torch.tensor([[1.0], [2.0]]), y=torch.tensor([[11.0], [12.0]]))
    assert memory.get_tensor_by_name("x")[:2, 0, 0].tolist() == [1.0, 2.0]
    assert memory.get_tensor_by_name("y")[2:4, 0, 0].tolist() == [11.0, 12.0]
    assert memory.memory_index == 4


# -- recurrent state: PPO_RNN with skrl's documented recurrent model (a counting RNN) ---------


class _Terminating(_Counter):
    """Observes its step count t; terminates at t = 3."""

    length, truncates = 3, False


class _CountingRNN(CategoricalMixin, Model):
    """skrl's documented recurrent categorical model (docs/source/snippets/
    categorical_model.py, rnn-sequential-torch) whose RNN counts: the state it returns is the
    state it received plus one. ``rollout`` and ``training`` keep the states it received."""

    def __init__(self, env: Any, sequence_length: int) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        CategoricalMixin.__init__(self)
        self.num_envs, self.sequence_length = env.num_envs, sequence_length
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.rollout: list[list[float]] = []
        self.training_states: list[list[list[float]]] = []

    def get_specification(self) -> dict[str, Any]:
        return {"rnn": {"sequence_length": self.sequence_length, "sizes": [(1, self.num_envs, 1)]}}

    def _count(self, length: int, h: torch.Tensor, received: list[torch.Tensor]) -> torch.Tensor:
        for _ in range(length):
            received.append(h[0, :, 0].clone())
            h = h + 1
        return h

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        n, h = inputs["observations"].shape[0], inputs["rnn"][0]
        received: list[torch.Tensor] = []
        if self.training:
            t = self.sequence_length
            h = h.view(1, -1, t, h.shape[-1])[:, :, 0, :].contiguous()
            terminated = inputs["terminated"].view(-1, t)
            cuts = (terminated[:, :-1].any(dim=0).nonzero(as_tuple=True)[0] + 1).tolist()
            bounds = [0, *cuts, t]
            for i0, i1 in pairwise(bounds):
                h = self._count(i1 - i0, h, received)
                h[:, terminated[:, i1 - 1], :] = 0
            self.training_states.append(torch.stack(received, dim=1).tolist())
        else:
            h = self._count(1, h, received)
            self.rollout.append(received[0].tolist())
        return torch.zeros(n, 2) * self.w, {"rnn": [h]}


def _ppo_rnn(
    envs: int, timesteps: int, sequence_length: int, rollouts: int
) -> tuple[_CountingRNN, RandomMemory]:
    """SequentialTrainer.train of PPO_RNN with the counting model on a SyncVectorEnv of
        ``envs`` _Terminating envs, memory of ``timesteps`` rows, updating every ``rollouts`` on
    one mini-batch in one epoch."""
    venv = gymnasium.vector.SyncVectorEnv([_Terminating] * envs)
    env = wrap_env(venv, wrapper="gymnasium", verbose=False)
    memory = RandomMemory(memory_size=timesteps, num_envs=envs, device="cpu")
    policy = _CountingRNN(env, sequence_length)
    cfg = PPO_CFG(
        rollouts=rollouts,
        learning_epochs=1,
        mini_batches=1,
        experiment={"write_interval": 0, "checkpoint_interval": 0},
    )
    agent = PPO_RNN(
        models={"policy": policy, "value": _Value(env)},
        memory=memory,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device="cpu",
        cfg=cfg,
    )
    trainer_cfg = {"timesteps": timesteps, "headless": True, "disable_progressbar": True}
    SequentialTrainer(
        env=env, agents=agent, cfg={**trainer_cfg, "close_environment_at_exit": False}
    ).train()
    return policy, memory


def test_ppo_rnn_resets_the_rollout_state_at_an_episode_last_observation() -> None:
    """PPO_RNN.record_transition zeroes the states the policy returned for the envs whose
    transition was terminated or truncated (agents/torch/ppo/ppo_rnn.py): under Gymnasium's
    NEXT_STEP autoreset that transition leads to the episode's final observation, so the
    policy acts there (t = 3) from the zero state and on the next episode's first observation
    (t = 0) from 1, not from 0."""
    policy, memory = _ppo_rnn(envs=1, timesteps=6, sequence_length=2, rollouts=100)
    obs = memory.get_tensor_by_name("observations")[:, 0, 0].tolist()
    assert obs == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0]
    assert [s[0] for s in policy.rollout] == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]


def test_ppo_rnn_stores_the_state_its_policy_returned_instead_of_the_one_it_received() -> None:
    """PPO_RNN.record_transition stores self._rnn_initial_states and then sets it to
    self._rnn_final_states, the same dict from then on; PPO_RNN.act writes the states the
    policy returned into that dict's "policy" entry (agents/torch/ppo/ppo_rnn.py). From the
    second timestep on, rnn_policy_0 holds the state the policy returned at that step (before
    the reset at an episode end), not the state it received there, and a sequence starting at
    such a row starts from it."""
    policy, memory = _ppo_rnn(envs=1, timesteps=6, sequence_length=2, rollouts=100)
    received = [s[0] for s in policy.rollout]
    stored = memory.get_tensor_by_name("rnn_policy_0")[:, 0, 0, 0].tolist()
    assert received == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert stored == [0.0, 2.0, 3.0, 1.0, 2.0, 3.0]


class _ObservedValue(_Value):
    """V(o) = o: the value of an observation is the step count it shows."""

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict]:
        return inputs["observations"][:, :1].clone(), {}


def test_time_limit_bootstrap_stores_the_reward_bootstrapped_from_the_acted_observation() -> None:
    """With time_limit_bootstrap, PPO_RNN.record_transition adds discount_factor * values *
    truncated to the rewards before the memory's add_samples, values being the value model's
    output for the observations acted on (agents/torch/ppo/ppo_rnn.py): the memory holds
    r + gamma * V(o_t) at the transition that truncated, neither the env's reward r nor
    r + gamma * V(o_t+1) of the final observation."""
    venv = gymnasium.vector.SyncVectorEnv([_Counter])
    env = wrap_env(venv, wrapper="gymnasium", verbose=False)
    memory = RandomMemory(memory_size=4, num_envs=1, device="cpu")
    agent = PPO_RNN(
        models={"policy": _CountingRNN(env, 1), "value": _ObservedValue(env)},
        memory=memory,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device="cpu",
        cfg=PPO_CFG(
            rollouts=100,
            discount_factor=0.5,
            time_limit_bootstrap=True,
            experiment={"write_interval": 0, "checkpoint_interval": 0},
        ),
    )
    trainer_cfg = {"timesteps": 4, "headless": True, "disable_progressbar": True}
    SequentialTrainer(
        env=env, agents=agent, cfg={**trainer_cfg, "close_environment_at_exit": False}
    ).train()
    observations = memory.get_tensor_by_name("observations")[:, 0, 0].tolist()
    truncated = memory.get_tensor_by_name("truncated")[:, 0, 0].tolist()
    rewards = memory.get_tensor_by_name("rewards")[:, 0, 0].tolist()
    assert observations == [0.0, 1.0, 2.0, 0.0]
    assert truncated == [False, True, False, False]
    # the env's rewards are 1, 1, 0 (the reset transition), 1; the truncating one gets
    # 0.5 * V(1) = 0.5 added, not 0.5 * V(2) = 1
    assert rewards == [1.0, 1.5, 0.0, 1.0]


def test_the_documented_model_resets_after_a_terminated_row_so_a_first_carries_on() -> None:
    """In PPO_RNN.update the documented recurrent model zeroes a sequence's state after a
    position whose sampled terminated flag is set: the transition into an episode's final
    observation, one step before the next episode's first observation. Trained on one
    sequence of the six rows (from row 0, whose stored state is the one received), the model
    receives 0 at the final observation t = 3 and 1 at the next t = 0."""
    policy, _ = _ppo_rnn(envs=1, timesteps=6, sequence_length=6, rollouts=6)
    assert policy.training_states == [[[0.0, 1.0, 2.0, 0.0, 1.0, 2.0]]]


def test_sample_all_sequences_run_from_one_env_into_the_next() -> None:
    """Memory.sample_all with sequence_length > 1 returns every env's rows in time order, env
    after env (all_sequence_indexes, memories/torch/base.py), and PPO_RNN's model views them
    as consecutive sequences: with 3 rows per env and sequences of 2, the second sequence is
    env 0's last row followed by env 1's first."""
    memory = RandomMemory(memory_size=3, num_envs=2, device="cpu")
    memory.create_tensor(name="x", size=1, dtype=torch.float32)
    for m in range(3):
        memory.add_samples(x=torch.tensor([[float(m)], [10.0 + m]]))
    ((x,),) = memory.sample_all(["x"], mini_batches=1, sequence_length=2)
    assert x.view(-1, 2).tolist() == [[0.0, 1.0], [2.0, 10.0], [11.0, 12.0]]


# -- checkpoint and resume: Agent.save / load, Memory.save / load ---------------------------------
def test_memory_load_leaves_the_tensors_a_memory_reads_unchanged(tmp_path: Any) -> None:
    """Memory.save writes the memory's tensors by name; Memory.load sets the attributes
    _tensor_<name> (memories/torch/base.py, Memory.load), while get_tensor_by_name and sample
    read the tensors and tensors_view dicts that Memory.create_tensor filled, and neither
    memory_index nor filled is saved: a memory loaded after create_tensor holds no row."""
    saved = _memory(4, [1.0, 2.0, 3.0], replacement=False)
    saved.save(str(tmp_path), format="pt")
    (path,) = (tmp_path / "memories").glob("*.pt")
    loaded = RandomMemory(memory_size=4, num_envs=1, device="cpu")
    loaded.create_tensor(name="x", size=1, dtype=torch.float32)
    loaded.load(str(path))
    assert loaded._tensor_x[:3].reshape(-1).tolist() == [1.0, 2.0, 3.0]
    assert len(loaded) == 0
    assert torch.isnan(loaded.get_tensor_by_name("x")).all()


def test_agent_save_keeps_the_modules_not_the_update_count_and_a_trainer_starts_at_0(
    tmp_path: Any,
) -> None:
    """Agent.save saves the state dicts of checkpoint_modules (agents/torch/base.py,
    Agent.save): DQN's networks and optimizer, not _update_counter, which keys its
    target-network updates. A SequentialTrainer counts its timesteps from 0
    (trainers/torch/base.py, Trainer.train), and DQN.post_interaction reads them for
    learning_starts and update_interval: a resumed run's first update follows its first
    timestep again."""
    agent, updates = _train_dqn(5, update_interval=2, batch_size=2)
    assert updates == [0, 2, 4]
    assert agent._update_counter == 3
    agent.save(str(tmp_path / "agent.pt"))
    assert set(torch.load(tmp_path / "agent.pt", weights_only=False)) == {
        "q_network",
        "target_q_network",
        "optimizer",
    }
    fresh, later = _train_dqn(1, update_interval=2, batch_size=2)
    fresh.load(str(tmp_path / "agent.pt"))
    assert later == [0]  # the first timestep of a new trainer is admitted, as in the first run
    assert fresh._update_counter == 1  # its own update only: the loaded count is not kept


class _Terminating5(_Counter):
    """Episodes of five steps."""

    length = 5


def test_a_new_wrapper_over_a_running_vector_env_resets_it() -> None:
    """GymnasiumWrapper.reset of a vector env calls the env's reset the first time and later
    returns the last observation (envs/wrappers/torch/gymnasium_envs.py); Trainer.train starts
    with env.reset() (trainers/torch/base.py). A wrapper built for a resumed run over the
    same, running vector env resets it: the episodes in progress end without a done."""
    vector = gymnasium.vector.SyncVectorEnv([_Terminating5])
    first = wrap_env(vector, wrapper="gymnasium", verbose=False)
    first.reset()
    obs, *_ = first.step(torch.zeros((1, 1), dtype=torch.int64))
    assert obs.reshape(-1).tolist() == [1.0]
    assert first.reset()[0].reshape(-1).tolist() == [1.0]  # the same wrapper goes on
    again = wrap_env(vector, wrapper="gymnasium", verbose=False)
    assert again.reset()[0].reshape(-1).tolist() == [0.0]
