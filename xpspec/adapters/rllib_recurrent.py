"""RLlib 2.60.0's own recurrent machinery on a :class:`~xpspec.protocol.scenario.RecurrentScenario`
(clauses ``recurrent.*``): a stateful ``TorchRLModule`` in RLlib's rollout, sequence making and
learner. Sources are cited as ``file:function`` under ``ray/rllib`` of the installed wheel
(commit ``b7f4259e``).

**The module.** The user's stateful RLModule (``get_initial_state``, ``Columns.STATE_IN`` /
``Columns.STATE_OUT``, ``model_config["max_seq_len"]``; the documented pattern of
``examples/rl_modules/classes/lstm_containing_rlm.py``) keeps one float, the count, and unrolls
over the time rank RLlib gives it, position ``i`` receiving ``STATE_IN + i``. RLlib supplies the
state: ``get_initial_state`` at an episode start, the previous step's ``STATE_OUT`` otherwise
(``AddStatesFromEpisodesToBatch``, for the env runner and for the learner). With a
:class:`Recorder` attached the module keeps what it received: in the rollout, the items and the
count of each forward call (one per vector step); in training, each row's items, counts and
sequence length (``Columns.SEQ_LENS``) and the gradient the loss sends back to the row's
embeddings. :class:`CountingModule` has PPO's API (``ValueFunctionAPI``),
:class:`CountingQModule` DQN's (``QNetAPI``, ``TargetNetworkAPI``).

**Two routes, by what the scenario asks.** RLlib's sequences come from one of two places:

- ``burn_in == 0``: PPO's rollout chunks. ``draws`` iterations as PPO's ``training_step`` makes
  them: ``SingleAgentEnvRunner.sample(num_timesteps=n)`` over the iteration's share of the
  ``steps`` vector steps (``truncate_episodes``: an episode cut by one call goes on in the
  next, its chunk carrying a one-step lookback), then ``Learner.update(episodes=...,
  num_epochs=1, minibatch_size=batch_size * sequence_length)``. The learner connector makes
  the sequences: ``AddOneTsToEpisodesAndTruncate`` appends a bootstrap step to every chunk,
  ``AddStatesFromEpisodesToBatch`` cuts each chunk into ``max_seq_len = sequence_length``
  pieces and starts piece ``k`` from the chunk's stored ``STATE_OUT`` of the step before it
  (``get_initial_state`` for a piece at ``t_started = 0``), ``AddTimeDimToBatchAndZeroPad``
  zero-pads the last piece and writes ``SEQ_LENS`` and ``LOSS_MASK``, and
  ``MiniBatchCyclicIterator`` slices the batch by sequences, cycling to fill its last
  minibatch (``connectors/common/add_states_from_episodes_to_batch.py``,
  ``connectors/common/add_time_dim_to_batch_and_zero_pad.py``, ``utils/minibatch_utils.py``).
- ``burn_in > 0``: DQN's replayed sequences, the only place RLlib has a burn-in
  (``DQNConfig.training(burn_in_len=...)``, ``algorithms/dqn/dqn.py``). Each iteration adds
  its chunks to an ``EpisodeReplayBuffer`` and makes the call of
  ``DQN._training_step_new_api_stack``: ``sample(num_items=train_batch_size_per_learner,
  n_step=1, batch_length_T=max_seq_len, lookback=1, min_batch_length_T=burn_in_len,
  sample_episodes=True)`` with ``train_batch_size_per_learner = batch_size *
  sequence_length`` (RLlib counts timesteps, not sequences), then ``Learner.update``. The
  buffer slices a stored episode at a uniformly drawn step (redrawn while fewer than
  ``burn_in_len + 1`` transitions remain), clipped at the episode's end or its newest stored
  step; the same connectors pad it; ``DQNTorchLearner.compute_loss_for_module`` clears the
  first ``burn_in_len`` positions of ``LOSS_MASK``. DQN's default buffer
  (``PrioritizedEpisodeReplayBuffer``) samples no sequences (it slices with
  ``len_lookback_buffer=0``, ``utils/replay_buffers/prioritized_episode_buffer.py``): a
  stateful DQN names ``EpisodeReplayBuffer``.

**Recorded.** ``EnvStep``: vector step ``n`` is the rollout module's ``n``-th forward call; its
items and ``policy_state`` are what that call received, its step types, rewards and actions
come from the chunks the runner returned (matched by item). ``TrainSequence``: one per row of
every ``forward_train`` call of an iteration (draw = iteration, index = row count within it):
the items decoded from the row's observations (``None`` past the row's ``SEQ_LENS``), the
counts the module received at every position (RLlib runs the module on the padding too: those
are counts, not ``-1``), and the loss mask as the loss applies it: 1 where the gradient of the
framework's loss reaches the position's embedding, 0 where the loss's
``possibly_masked_mean`` drops it (``algorithms/ppo/torch/ppo_torch_learner.py``,
``algorithms/dqn/torch/dqn_torch_learner.py``: ``compute_loss_for_module``). PPO runs with
``entropy_coeff`` 0.01 so that every position its loss keeps sends a gradient back; DQN's
TD error does so by itself.

**Not expressed** (:class:`~xpspec.protocol.adapter.Unsupported`): boundary ``cross`` (RLlib
cuts and pads every episode separately: a sequence never runs on into the next episode) and
``initial_state="zeros"`` (``AddStatesFromEpisodesToBatch`` always starts a piece from the
stored ``STATE_OUT``; no config knob starts it from zeros).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS, QF_TARGET_NEXT_PREDS
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.learner.utils import make_target_network
    from ray.rllib.core.rl_module.apis import QNetAPI, TargetNetworkAPI, ValueFunctionAPI
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

from xpspec.adapters.rllib import (
    _DRAW_LIMIT,
    _BoundedRng,
    _env_steps,
    _new_steps,
    _SamplerStuck,
    _seeded,
    _ToyVectorEnv,
)
from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.steps import Step
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence
from xpspec.refimpl.toy_envs.gym_env import toy_action_space, toy_observation_space

__all__ = ["CountingModule", "CountingQModule", "Recorder", "run_recurrent"]

_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"
_MODULE_ID = "default_policy"
_ENTROPY_COEFF = 0.01
"""PPO's ``entropy_coeff``: with it every position the loss keeps sends a gradient back to its
embedding (the entropy of a non-uniform categorical has a non-zero gradient)."""
_EMBEDDING = 8


# -- the user's stateful modules ----------------------------------------------------------------
@dataclass
class _TrainRow:
    """What one row of a ``forward_train`` call received: its observations, the count at each
    position, its ``SEQ_LENS`` entry, and (after the backward pass) the gradient's size at each
    position's embedding."""

    observations: np.ndarray
    counts: np.ndarray
    length: int
    gradient: list[np.ndarray] = field(default_factory=list)


@dataclass
class Recorder:
    """Attached to a counting module instance: the rollout's forward calls (items and counts
    per call) and the training forward calls (rows per call)."""

    rollout: list[tuple[list[Item], list[int]]] = field(default_factory=list)
    train: list[list[_TrainRow]] = field(default_factory=list)


class _Counting(TorchRLModule):
    """The counting state and the recording shared by both modules. ``model_config["reset_to"]``
    is the initial count (0: the spec's counting policy; a test perturbs it)."""

    recorder: Recorder | None = None

    def setup(self) -> None:
        size = int(np.prod(self.observation_space.shape))
        self._embed = torch.nn.Linear(size, _EMBEDDING)
        self._head = torch.nn.Linear(_EMBEDDING, int(self.action_space.n))

    def get_initial_state(self) -> dict[str, np.ndarray]:
        start = float(self.model_config.get("reset_to", 0.0))
        return {"count": np.full((1,), start, dtype=np.float32)}

    def _unroll(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The count received at each position ``[B, T]`` and the state after the last."""
        state = batch[Columns.STATE_IN]["count"]
        counts = []
        for _ in range(batch[Columns.OBS].shape[1]):
            counts.append(state)
            state = state + 1.0
        return torch.stack(counts, dim=1)[..., 0], state

    def _embedding(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self._embed(obs / 64.0))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        counts, state = self._unroll(batch)
        if self.recorder is not None:
            obs = batch[Columns.OBS].detach().cpu().numpy()
            if obs.shape[1] != 1:
                raise RuntimeError(f"rollout forward: expected one time step, got {obs.shape}")
            counted = [int(c) for c in counts[:, 0].tolist()]
            self.recorder.rollout.append((decode_items(obs[:, 0]), counted))
        logits = self._head(self._embedding(batch[Columns.OBS]))
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.STATE_OUT: {"count": state}}

    def _train_embedding(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The embedding of a training forward pass and the state after it; the rows recorded."""
        counts, state = self._unroll(batch)
        embeddings = self._embedding(batch[Columns.OBS])
        if self.recorder is not None:
            self.recorder.train.append(_record_rows(batch, counts, embeddings))
        return embeddings, state


def _record_rows(
    batch: dict[str, Any], counts: torch.Tensor, embeddings: torch.Tensor
) -> list[_TrainRow]:
    obs = batch[Columns.OBS].detach().cpu().numpy()
    lengths = batch[Columns.SEQ_LENS].detach().cpu().numpy()
    values = counts.detach().cpu().numpy()
    rows = [_TrainRow(obs[b], values[b], int(lengths[b])) for b in range(obs.shape[0])]
    if embeddings.requires_grad:

        def keep(grad: torch.Tensor) -> None:
            sizes = grad.detach().abs().sum(dim=-1).cpu().numpy()
            for b, row in enumerate(rows):
                row.gradient.append(sizes[b])

        embeddings.register_hook(keep)
    return rows


class CountingModule(_Counting, ValueFunctionAPI):
    """The counting module with PPO's API: logits and values from a linear embedding."""

    def setup(self) -> None:
        super().setup()
        self._value = torch.nn.Linear(_EMBEDDING, 1)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state = self._train_embedding(batch)
        return {
            Columns.ACTION_DIST_INPUTS: self._head(embeddings),
            Columns.STATE_OUT: {"count": state},
            Columns.EMBEDDINGS: embeddings,
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            embeddings = self._embedding(batch[Columns.OBS])
        return self._value(embeddings)[..., 0]


class CountingQModule(_Counting, QNetAPI, TargetNetworkAPI):
    """The counting module with DQN's API: Q-values (the head) of a linear embedding, a
    target copy of both layers; ``_forward_train`` returns what DQN's loss reads
    (``QF_PREDS``, ``QF_TARGET_NEXT_PREDS``; ``double_q=False``)."""

    def make_target_networks(self) -> None:
        self._target_embed = make_target_network(self._embed)
        self._target_head = make_target_network(self._head)

    def get_target_network_pairs(self) -> list[tuple[Any, Any]]:
        return [(self._embed, self._target_embed), (self._head, self._target_head)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        embeddings = torch.tanh(self._target_embed(batch[Columns.OBS] / 64.0))
        return {QF_PREDS: self._target_head(embeddings)}

    def compute_q_values(self, batch: dict[str, Any]) -> dict[str, Any]:
        _, state = self._unroll(batch)
        q = self._head(self._embedding(batch[Columns.OBS]))
        return {QF_PREDS: q, Columns.STATE_OUT: {"count": state}}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state = self._train_embedding(batch)
        target = self.forward_target(
            {Columns.OBS: batch[Columns.NEXT_OBS], Columns.STATE_IN: batch[Columns.NEXT_STATE_IN]}
        )
        return {
            QF_PREDS: self._head(embeddings),
            QF_TARGET_NEXT_PREDS: target[QF_PREDS],
            Columns.STATE_OUT: {"count": state},
        }


# -- configuration ---------------------------------------------------------------------------
def _support(sc: RecurrentScenario) -> None:
    if sc.initial_state != "stored":
        raise Unsupported(
            "initial_state 'zeros': RLlib 2.60.0's AddStatesFromEpisodesToBatch starts every "
            "piece from the episode's stored STATE_OUT of the step before it (the module's "
            "get_initial_state only at t_started == 0); no config knob starts it from zeros "
            "(the old API stack's replay_zero_init_states is read by its MultiAgentReplayBuffer "
            "only, not by the new stack's connectors or EpisodeReplayBuffer)",
            f"{_SOURCE}/connectors/common/add_states_from_episodes_to_batch.py",
        )
    if sc.boundary != "pad":
        raise Unsupported(
            "boundary 'cross': RLlib 2.60.0's learner connector cuts every episode into "
            "max_seq_len pieces on its own (AddStatesFromEpisodesToBatch, "
            "AddTimeDimToBatchAndZeroPad: split_and_zero_pad per episode) and zero-pads the "
            "last piece, and EpisodeReplayBuffer._sample_episodes slices one stored episode; "
            "a sequence never runs on into the env's next episode",
            f"{_SOURCE}/connectors/common/add_time_dim_to_batch_and_zero_pad.py",
        )
    if not sum(_shares(sc)):
        raise Unsupported(
            f"steps {sc.steps}: no transition is sampled before the last vector step, and "
            "RLlib 2.60.0 trains on transitions (SingleAgentEnvRunner._sample returns an "
            "episode only once it holds one; Learner.update has no empty batch)",
            f"{_SOURCE}/env/single_agent_env_runner.py",
        )


def _config(sc: RecurrentScenario, reset_to: float) -> AlgorithmConfig:
    """A local config with the counting module (``max_seq_len = sequence_length``): PPO's, or
    DQN's with ``burn_in_len`` when the scenario has a burn-in."""
    spec = sc.env
    model_config = {"max_seq_len": sc.sequence_length, "reset_to": reset_to}
    config: Any
    if sc.burn_in:
        module = RLModuleSpec(module_class=CountingQModule)
        config = DQNConfig().training(
            double_q=False,
            n_step=1,
            burn_in_len=sc.burn_in,
            train_batch_size_per_learner=sc.batch_size * sc.sequence_length,
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 10**6},
        )
    else:
        module = RLModuleSpec(module_class=CountingModule)
        config = PPOConfig().training(
            num_epochs=1,
            minibatch_size=sc.batch_size * sc.sequence_length,
            shuffle_batch_per_epoch=True,
            entropy_coeff=_ENTROPY_COEFF,
        )
    return (
        config.environment(
            _ToyVectorEnv(spec, sc.seed),
            observation_space=toy_observation_space(spec),
            action_space=toy_action_space(spec),
        )
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=spec.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
            batch_mode="truncate_episodes",
        )
        # DQN's training_step reads max_seq_len from the config's model_config.
        .rl_module(rl_module_spec=module, model_config=model_config)
        .learners(num_learners=0)
    )


# -- the routes -----------------------------------------------------------------------------------
def _shares(sc: RecurrentScenario) -> list[int]:
    """RLlib's timesteps (non-reset env steps) of each iteration's share of the vector steps:
    iteration ``k`` ends when the observations of the vector steps before
    ``(k + 1) * steps // draws`` are in (``_sample`` counts a step into a non-FIRST
    observation; it acts on an observation in its next loop, so in the next call)."""
    ends = [(k + 1) * sc.steps // sc.draws for k in range(sc.draws)]
    counts = [_env_steps(sc.env, sc.seed, end) for end in ends]
    return [b - a for a, b in zip([0, *counts[:-1]], counts)]


class _PPOTraining:
    """PPO's iteration: the sampled chunks go to ``Learner.update`` as they are."""

    def __init__(self, sc: RecurrentScenario, learner: Any) -> None:
        self.sc, self.learner = sc, learner

    def train(self, chunks: list[Any], sampled_lifetime: int) -> None:
        self.learner.update(
            episodes=chunks,
            num_epochs=1,
            minibatch_size=self.sc.batch_size * self.sc.sequence_length,
            shuffle_batch_per_epoch=True,
        )


class _DQNTraining:
    """DQN's iteration: the chunks go into an ``EpisodeReplayBuffer`` (seeded, its draws
    bounded), a sample of sequences to ``Learner.update`` (``dqn.py``,
    ``_training_step_new_api_stack``)."""

    def __init__(self, sc: RecurrentScenario, learner: Any, config: Any) -> None:
        self.sc, self.learner, self.config = sc, learner, config
        self.buffer: Any = EpisodeReplayBuffer(capacity=config.replay_buffer_config["capacity"])
        self.buffer.rng = _BoundedRng(np.random.default_rng(sc.seed), _DRAW_LIMIT)

    def train(self, chunks: list[Any], sampled_lifetime: int) -> None:
        self.buffer.add(chunks)
        self.buffer.rng.draws = 0
        try:
            sequences = self.buffer.sample(
                num_items=self.config.total_train_batch_size,
                n_step=self.config.n_step,
                batch_length_T=self.config.model_config["max_seq_len"],
                lookback=1,
                min_batch_length_T=self.config.burn_in_len,
                gamma=self.config.gamma,
                beta=self.config.replay_buffer_config.get("beta"),
                sample_episodes=True,
            )
        except _SamplerStuck:
            raise Unsupported(
                f"burn_in {self.sc.burn_in}: RLlib 2.60.0's EpisodeReplayBuffer."
                "_sample_episodes redraws a start while fewer than min_batch_length_T + 1 = "
                f"{self.sc.burn_in + 1} transitions of its stored episode follow it, and no "
                f"start was accepted within {_DRAW_LIMIT} draws (no stored episode is long "
                "enough, so the loop would not end)",
                f"{_SOURCE}/utils/replay_buffers/episode_replay_buffer.py",
            ) from None
        self.learner.update(
            episodes=sequences, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled_lifetime}
        )


# -- recording ---------------------------------------------------------------------------------
def _env_step_events(rollout: list[tuple[list[Item], list[int]]], chunks: list[Any]) -> list[Event]:
    """One ``EnvStep`` per rollout forward call: its items and received counts, with the step
    fields of each item as the runner's chunks hold them."""
    by_item: dict[Item, Step] = {}
    for chunk in chunks:
        for step in _new_steps(chunk):
            by_item.setdefault(step.item, step)
    events: list[Event] = []
    for items, counts in rollout:
        steps = []
        for item, count in zip(items, counts, strict=True):
            held = by_item.get(item)
            if held is None:
                raise RuntimeError(f"rollout item {item} is in no chunk the runner returned")
            steps.append(Step(item, held.step_type, held.reward, held.discount, count, held.action))
        events.append(env_step(0, steps))
    return events


def _sequences(draw: int, calls: list[list[_TrainRow]]) -> list[TrainSequence]:
    out: list[TrainSequence] = []
    for row in (r for rows in calls for r in rows):
        if len(row.gradient) != 1:
            raise RuntimeError(
                f"training row: expected one backward pass through it, got {len(row.gradient)}"
            )
        width = len(row.counts)
        decoded = decode_items(row.observations)
        items = tuple(decoded[t] if t < row.length else None for t in range(width))
        mask = tuple(int(bool(g > 0.0)) for g in row.gradient[0])
        state = tuple(int(c) for c in row.counts)
        out.append(TrainSequence(draw, len(out), items, state, mask))
    return out


def run_recurrent(sc: RecurrentScenario, *, reset_to: float = 0.0) -> Trace:
    """``draws`` iterations (sample, then train) with the counting module, recorded as the
    module docstring says. ``reset_to`` is the module's initial count (0 for the scenario;
    tests perturb it)."""
    _support(sc)
    config = _config(sc, reset_to)
    sequences: list[Event] = []
    chunks: list[Any] = []
    sampled = 0
    with _seeded(sc.seed):
        runner = SingleAgentEnvRunner(config=config)
        learner: Any = config.build_learner()
        training = _DQNTraining(sc, learner, config) if sc.burn_in else _PPOTraining(sc, learner)
        rollout: Any = runner.module
        trained: Any = learner.module[_MODULE_ID]
        rollout.recorder, trained.recorder = Recorder(), Recorder()
        try:
            for draw, share in enumerate(_shares(sc)):
                if share == 0:
                    continue
                fresh = runner.sample(num_timesteps=share)
                chunks.extend(copy.deepcopy(fresh))  # RLlib's connectors mutate them
                sampled += share
                seen = len(trained.recorder.train)
                training.train(fresh, sampled)
                sequences.extend(_sequences(draw, trained.recorder.train[seen:]))
            # The policy has not acted on the newest observations yet (nor on a vector step
            # at which every env was at LAST): one more call acts on them; its chunks are read
            # for the step fields of those items, not trained on.
            while len(rollout.recorder.rollout) < sc.steps:
                chunks.extend(runner.sample(num_timesteps=1))
        finally:
            runner.stop()
    acted = rollout.recorder.rollout[: sc.steps]
    events = _env_step_events(acted, chunks)
    return Trace(tuple(events + sequences), {"producer": "rllib", "seed": sc.seed})
