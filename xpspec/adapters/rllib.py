"""Adapter for RLlib 2.60.0 (``ray[rllib]``, new API stack): its ``SingleAgentEnvRunner``, the
PPO learner connector pipeline with ``Learner.update``, ``TrainingData.shard`` and the
``EpisodeReplayBuffer``, driven in-process on the toy env; and, for ``run_trainer``, DQN's own
train loop (``Algorithm.train``) on a local Ray instance that the operation starts and shuts
down (:mod:`xpspec.adapters.rllib_trainer`; every operation runs in a fresh process). Sources are
cited as ``file:function`` under ``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

**The env.** The toy env's Gymnasium face goes in as RLlib's vector env: a callable env whose
vector entry point returns ``gymnasium.vector.SyncVectorEnv(make_env_fns(spec, seed))``
(``config.env_runners(gym_env_vectorize_mode="vector_entry_point")``; RLlib wraps it in
``DictInfoToList``). RLlib never sets an autoreset mode, so Gymnasium's ``NEXT_STEP`` applies:
the call after an env's LAST returns its reset observation, and ``SingleAgentEnvRunner._sample``
starts a new episode with it (``add_env_reset``) without counting a timestep. Every vector step
therefore moves every env by one time step, as in the spec. RLlib's episodes hold ``L + 1``
observations for ``L`` transitions, the final (LAST) observation included.

**Items.** A time step is named by its observation ``[e, k, t]``. An episode chunk's
observation ``i`` is FIRST if ``i = 0`` and ``t_started = 0``, LAST if it is the final
observation of a terminated or truncated chunk (discount 0 iff terminated), MID otherwise; its
reward is ``rewards[i - 1]`` (0 at FIRST). A continuation chunk (``t_started > 0``, same
``id_``, one-step lookback) starts with its predecessor's final observation, which is not a new
time step (``EpisodeReplayBuffer.add`` glues chunks the same way, by ``id_``).

- ``run_env``: repeated ``runner.sample()`` with ``rollout_fragment_length = 2`` per sub-env
  (``truncate_episodes``), chunks glued by ``id_``; time step ``n`` of every env is vector step
  ``n``. RLlib's modules are stateless: ``policy_state`` holds ``t``; the action at a LAST
  (discarded by the env) is recorded as ``-1``.
- ``run_learner``: the episodes of the first ``steps`` vector steps come from one
  ``runner.sample(num_timesteps=n)``, with ``n`` the number of non-reset env steps in them
  (RLlib's unit, so the loop ``while ts < n`` stops after exactly those vector steps; a new
  episode holding only its FIRST is not returned, as the scenario leaves it out), sorted into
  the scenario's canonical order (env-major, oldest first). Then:
  ``PPOConfig(...).build_learner()`` (local) with a module whose ``compute_values`` is
  ``value_scale * obs[..., 2]``; ``Learner.update(episodes=..., num_epochs, minibatch_size,
  shuffle_batch_per_epoch=True)`` as PPO's ``training_step`` calls it. The learner connector's
  output batch gives the rows (``AddOneTsToEpisodesAndTruncate``'s bootstrap row last in each
  episode), ``VALUE_TARGETS``, ``ADVANTAGES`` (already standardised by
  ``GeneralAdvantageEstimation``) and ``LOSS_MASK``; the raw advantage is the target minus the
  module's values, as the connector computes it. ``Learner._update`` calls are the gradient
  updates; their rows are numbered in the module batch's order, **bootstrap rows included**
  (RLlib counts them as rows). Shards come from ``TrainingData.shard`` called as
  ``LearnerGroup.update`` calls it for ``num_learners`` learners. n-step targets: RLlib computes
  them in ``EpisodeReplayBuffer._sample_episodes`` (reward sum, ``n_step``, ``terminated``,
  next observation) and DQN's loss (``r + gamma ** n_step * (1 - terminated) * Q(next)``,
  ``algorithms/dqn/torch/dqn_torch_learner.py:compute_loss_for_module``); the adapter samples
  the episodes into that buffer until every transition start has been drawn and applies that
  loss line with ``Q(next) = value_scale * t(next)``.
- ``run_replay``: ``runner.sample(num_timesteps=1)`` then ``buffer.add`` until the fill's
  non-reset steps are stored (one vector step per call); ``EpisodeReplayBuffer(capacity=
  capacity * B)`` (RLlib counts capacity in timesteps over all episodes and evicts whole
  episodes, oldest first). A window of ``W`` items is the ``W`` observations of one sampled
  row or sequence: ``cross`` (and ``W = 1``) use the default ``sample(batch_size_B,
  batch_length_T=W)`` rows; ``forbid`` uses ``sample_episodes=True`` sequences of ``W - 1``
  transitions with ``min_batch_length_T = W - 2`` (RLlib redraws a start ``ts`` while
  ``ts + min_batch_length_T >= len``, so only full sequences remain; its docstring says "at
  least min_batch_length_T", the code needs one more) and ``batch_size_B = batch_size * W``
  (RLlib counts ``len + 1`` per sequence); ``pad`` uses the same sequences without a minimum,
  one ``sample(batch_size_B=1)`` per window, a sequence clipped at an episode end or the newest
  step padded with ``None``.

**What RLlib decides** (the suite's failures on it): the default rows start at a uniformly drawn
stored transition (never at an episode's final observation) and, past an episode's final
observation or the newest step of a chunk, continue with a uniformly drawn stored episode from
its ``t = 0`` (``_sample_batch``), not with the env's next episode; eviction is by whole
episodes over all envs; GAE standardises over bootstrap rows too; ``Learner.update`` cycles
minibatches of exactly ``minibatch_size`` rows, bootstrap rows counted; ``TrainingData.shard``
splits episodes; n-step items bootstrap with ``gamma ** n`` for the requested ``n`` and lose
``terminated`` when clipped; its connector mutates the episodes it is given (id suffix, one
more step, truncated flag): the adapter hands ``Learner.update`` a copy of its own and reports
what that copy holds before and after the call (``caller_episode``).

- ``run_trainer``: one spec iteration is one ``Algorithm.train()`` of a DQN built with
  ``num_env_runners=0``, ``num_learners=0`` and ``min_*_per_iteration = 0``, so one
  ``DQN._training_step_new_api_stack`` (``algorithms/dqn/dqn.py``): ``store_weight`` sampling
  rounds of ``rollout_fragment_length = u`` per sub-env, each added to the buffer, then, once
  ``NUM_ENV_STEPS_SAMPLED_LIFETIME >= num_steps_sampled_before_learning_starts``
  (``initial_collect_steps``), ``sample_and_train_weight`` buffer samples each followed by
  ``LearnerGroup.update``: the train call and its updates (``num_updates_per_train_iter`` k
  -> ``training_intensity`` = k times the native ratio, ``dqn.py:calculate_rr_weights``;
  ``mini_batch_size`` -> ``train_batch_size_per_learner``, default ``B``; ``capacity`` ->
  buffer capacity ``capacity * B`` timesteps). Recorded: time steps from the chunks the runner
  returned (a first ``on_sample_end`` callback reads them before any preprocessing, glued by
  ``id_`` as in ``run_env``) plus the reset observation it still holds unreturned
  (``SingleAgentEnvRunner._ongoing_episodes``); stores from the buffer class named in
  ``replay_buffer_config["type"]`` (a subclass that reads back, after RLlib's ``add``, the steps
  each chunk added to the stored episode, and seeds RLlib's ``default_rng(seed=None)``);
  updates from the learner class of ``config.training(learner_class=...)`` (a
  ``DQNTorchLearner`` whose ``_update`` keeps its batch's observations: a window of one item
  per sampled transition; for windows of ``W >= 2`` items under boundary ``pad``, DQN's
  sequences of ``max_seq_len = W`` with the ``LOSS_MASK`` its loss received, observable
  ``loss-mask``, :mod:`xpspec.adapters.rllib_loss_mask`). The module is the user's stateful
  counting module (observable
  ``state``, :mod:`xpspec.adapters.rllib_state`): each time step's ``policy_state`` is the
  count the env runner's module received with it, as ``AddStatesFromEpisodesToBatch`` fed
  it; DQN then samples sequences of one transition, which its buffer counts as two
  timesteps (``train_batch_size_per_learner = 2 * mini_batch_size``). A train call without
  an update is ``warmup``. A sampler that
  raises on an empty buffer ends the run (header ``stopped``). RLlib holds no item back at
  the end (``pending`` empty).
- ``run_replay`` with a priority spec: DQN's default buffer, ``PrioritizedEpisodeReplayBuffer``,
  filled the same way, its segment trees read before every draw and ``update_priorities``
  called after it (:mod:`xpspec.adapters.rllib_priority`).
- ``run_stack``: RLlib's frame-stacking connector pieces, ``FrameStackingEnvToModule`` in the
  env runner and ``FrameStackingLearner`` on sampled transitions
  (:mod:`xpspec.adapters.rllib_stack`).
- ``run_trainer`` with a checkpoint spec: ``Algorithm.save_to_path`` after iteration ``k``,
  the buffer's own ``get_state`` pickled beside it (RLlib's checkpoint holds no buffer on the
  new API stack), ``Algorithm.stop``, then ``Algorithm.from_checkpoint`` and the buffer's
  ``set_state``, over the same toy envs (:mod:`xpspec.adapters.rllib_checkpoint`).
- ``run_recurrent``: a stateful counting RLModule (``STATE_IN`` / ``STATE_OUT``,
  ``max_seq_len``) through PPO's rollout chunks and learner connector, or, for a burn-in,
  DQN's replayed sequences with ``burn_in_len`` (:mod:`xpspec.adapters.rllib_recurrent`).
- ``run_async``: IMPALA's own ``training_step`` with one remote env runner per actor on a local
  Ray cluster, the toy versioned policy as an RLModule whose weight a toy loss raises by one
  per update, each item's version RLlib's ``WEIGHTS_SEQ_NO`` (:mod:`xpspec.adapters.rllib_async`).
- ``run_offline``: the old API stack's PPO reading through ``MixedInput`` from its sampler and
  a dataset ``JsonWriter`` wrote, each update's items read from the ``train_batch`` of the
  ``on_learn_on_batch`` callback (:mod:`xpspec.adapters.rllib_offline`).
- Hooks (observable ``hooks``), recorded where RLlib calls the user's code, in call order:
  ``after_update`` is the learner's ``after_gradient_based_update`` (the documented
  override point of ``core/learner/learner.py``, where DQN's own ``DQNLearner`` updates its
  target network): ``Learner.update`` calls it once after its minibatch loop, and DQN's
  ``LearnerGroup.update(episodes=...)`` passes no ``minibatch_size`` or ``num_epochs``, so
  the loop is ``MiniBatchDummyIterator``'s single ``_update``: one hook call per gradient
  update. ``after_train_iter`` is an ``on_train_result`` callback
  (``config.callbacks(on_train_result=...)``), which ``Algorithm.log_result`` calls once per
  ``Algorithm.train()``, after ``Algorithm.step``. (``on_learn_on_batch`` belongs to the old
  API stack and is not called here.)
- Counters, read inside the learner's ``_update`` at each update and around each
  ``train()``: per-iteration (observable ``counter``) ``Algorithm.iteration``, which
  ``Trainable.train`` increments after ``Algorithm.step``, so iteration ``k`` runs with
  ``k - 1`` (declared deviation: variant ``iteration-count-before``); per-mini-batch
  (observable ``update-counter``) the learner's ``WEIGHTS_SEQ_NO`` (``Learner.get_state``),
  which ``Learner.update`` increments before its minibatch loop and RLlib counts gradient
  updates by (``DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY`` is its difference,
  ``core/learner/torch/torch_learner.py``); with one ``_update`` per ``Learner.update`` it is
  the number of updates made so far. DQN's own schedules key on neither: its target-network
  update and learning-rate schedules read ``NUM_ENV_STEPS_SAMPLED_LIFETIME``, the env steps
  sampled (``algorithms/dqn/dqn_learner.py``, ``after_gradient_based_update``).
- Preprocessing is the user's ``on_sample_end`` callback (``env/single_agent_env_runner.py:
  sample`` calls it with the list it then returns; ``config.callbacks(on_sample_end=...)``):
  ``RewardTransform`` rescales each chunk's rewards (``SingleAgentEpisode.set_rewards``; a
  reset observation has no reward to rescale), ``OverwriteStepType(when='truncated-last')``
  clears ``is_truncated``, ``ExcludeEpisodes`` / ``ExcludeTasks`` remove whole chunks from the
  list (episode index from the first observation, task from its info) and record the Exclude.
  ``EpisodeDelayed`` is a hold-and-release in the same callback
  (``rllib_trainer._SampleHook._hold_and_release``): the callback runs on the list
  ``sample()`` then returns (``env/single_agent_env_runner.py:286-300``) and DQN adds whatever
  that list holds (``algorithms/dqn/dqn.py:668``), so the hook removes every chunk, keeps a
  deep copy by ``id_`` across ``sample()`` calls, glues each continuation onto it
  (``SingleAgentEpisode.concat_episode``, ``env/single_agent_episode.py:597-661``: same
  ``id_``, ``other.t_started == self.t``, the held part not done) and, at the chunk that ends
  the episode, writes the annotation into the episode's ``custom_data``
  (``env/single_agent_episode.py:496``) and puts the whole episode back into the list (or
  records it excluded, reason ``outcome``, when ``keep`` rejects it). ``EpisodeReplayBuffer.add``
  stores a deep copy (``utils/replay_buffers/episode_replay_buffer.py:213``) as a new episode
  (``:231-238``), and the recording reads the annotation back from that copy. Under pending
  policy ``flush`` the user adds the episodes still held to ``algo.local_replay_buffer`` after
  the last ``train()``. DQN's warm-up gate counts sampled env steps, not stored ones
  (``algorithms/dqn/dqn.py:677-682``): it opens on a buffer that may still hold nothing.

**Not expressed** (:class:`~xpspec.protocol.adapter.Unsupported`): in the trainer, on-policy mode
(only DQN's loop is driven), drain mode, fractional unroll lengths, ``num_env_steps`` budgets,
whole-buffer training, windows of two or more items under boundary ``cross`` or ``forbid``
(DQN's sequences are padded slices of one episode, :mod:`xpspec.adapters.rllib_loss_mask`),
period grids and non-uniform distributions; per-step exclusion (a chunk with steps cut out is no episode, and
``SingleAgentEpisode.concat_episode`` requires the chunk to start where the stored episode
ends); in replay, period grids and non-uniform distributions, same-step env specs, and
samplers that do not terminate: n-step sampling (the batch counter of ``_sample_episodes``
can decrease for ``n_step >= 4``) and ``forbid`` windows no stored episode can hold (redrawn
for ever). The adapter bounds their random draws (:class:`_BoundedRng`) and reports the
scenario unsupported when the bound is hit.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    try:
        import gymnasium
        from ray.rllib.algorithms.ppo import PPOConfig
        from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import (
            DefaultPPOTorchRLModule,
        )
        from ray.rllib.core.columns import Columns
        from ray.rllib.core.learner.training_data import TrainingData
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec
        from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
        from ray.rllib.evaluation.postprocessing import Postprocessing
        from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
    except ImportError as exc:  # pragma: no cover - exercised only without the framework
        raise ImportError(
            "xpspec.adapters.rllib drives RLlib 2.60.0 (ray[rllib]==2.60.0), which is not importable "
            "here: install it with `pip install -e '.[adapter-rllib]' -c constraints/torch.txt` "
            f"({exc})"
        ) from exc

from xpspec.kit.episodes import episode_rows, transitions_observed
from xpspec.kit.events import env_step, store
from xpspec.kit.items import decode_item, item_columns
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.steps import Step
from xpspec.kit.value import toy_value
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.asynchronous import AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Advantages,
    CallerEpisode,
    Event,
    Item,
    NStep,
    Sampled,
    Shard,
    Store,
    Trace,
    UpdatePlan,
)
from xpspec.refimpl.toy_envs.gym_env import make_env_fns, toy_action_space, toy_observation_space

__all__ = ["RLlibAdapter"]

_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"
_MODULE_ID = "default_policy"
_ENV_FRAGMENT = 2
"""``rollout_fragment_length`` (per sub-env) of ``run_env``: several ``sample()`` calls, so
episodes are cut into chunks and continued."""
_DRAW_LIMIT = 4000
"""Random draws after which one of RLlib's episode samplers is taken as not terminating: n-step
sampling for all transition starts (a few seconds; it needs far fewer), or one batch of windows
(bounded at ``max(_DRAW_LIMIT, 50 * batch_size * W)``)."""


# -- quiet, seeded execution ----------------------------------------------------------------------
def _seeded(seed: int) -> AbstractContextManager[None]:
    """RLlib's log output and warnings silenced; torch's global generator (module weights,
    exploration) and numpy's global state (``SampleBatch.shuffle`` uses ``np.random``) seeded
    with ``seed``; all restored afterwards."""
    return seeded_quiet(seed, ("torch", "numpy"), ("ray", "ray.rllib"))


# -- bounded sampling ---------------------------------------------------------------------------
class _SamplerStuck(Exception):
    """A sampler of RLlib exceeded its bound of random draws."""


class _BoundedRng:
    """A replay buffer's ``numpy`` generator, counting draws and stopping the sampler (by
    raising :class:`_SamplerStuck` out of it) after ``limit`` draws since the last reset; RLlib's
    samplers loop until they have enough items, and some never get there."""

    def __init__(self, rng: np.random.Generator, limit: int) -> None:
        self.rng, self.limit, self.draws = rng, limit, 0

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        self.draws += 1
        if self.draws > self.limit:
            raise _SamplerStuck(self.draws)
        return self.rng.integers(*args, **kwargs)


# -- configuration ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ToyVectorEnv:
    """RLlib's env creator: the vector entry point receives ``{"num_envs": n, ...}`` and returns
    Gymnasium's ``SyncVectorEnv`` over the toy envs (default autoreset ``NEXT_STEP``)."""

    spec: EnvSpec
    seed: int

    def __call__(self, config: Any) -> gymnasium.vector.SyncVectorEnv:
        num_envs = dict(config).get("num_envs", self.spec.num_envs)
        if num_envs != self.spec.num_envs:
            raise ValueError(f"num_envs: expected {self.spec.num_envs}, got {num_envs}")
        return gymnasium.vector.SyncVectorEnv(make_env_fns(self.spec, self.seed))


class _ToyValueModule(DefaultPPOTorchRLModule):
    """PPO's default torch module with ``V(s) = value_scale * t(s)``
    (``model_config["value_scale"]``); the policy head is PPO's own."""

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        config: Any = self.model_config
        return toy_value(batch[Columns.OBS], float(config["value_scale"]))[..., 0]


def _config(
    spec: EnvSpec,
    seed: int,
    *,
    value_scale: float = 0.0,
    gamma: float = 0.99,
    lam: float = 1.0,
    num_epochs: int = 1,
    minibatch_size: int | None = None,
) -> PPOConfig:
    """A local PPO config over the toy env: no remote env runners or learners."""
    if spec.autoreset != "next-step":
        raise Unsupported(
            "env.autoreset 'same-step': RLlib 2.60.0's SingleAgentEnvRunner._sample is written "
            "for Gymnasium's NEXT_STEP autoreset (it adds the reset observation returned after "
            "a done with add_env_reset); a SAME_STEP vector env silently corrupts its episodes "
            "(the final observation replaced by the reset one)",
            f"{_SOURCE}/env/single_agent_env_runner.py",
        )
    module = RLModuleSpec(
        module_class=_ToyValueModule,
        model_config={"fcnet_hiddens": [8], "value_scale": float(value_scale)},
    )
    return (
        PPOConfig()
        .environment(
            _ToyVectorEnv(spec, seed),
            observation_space=toy_observation_space(spec),
            action_space=toy_action_space(spec),
        )
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=spec.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=_ENV_FRAGMENT,
            batch_mode="truncate_episodes",
        )
        .rl_module(rl_module_spec=module)
        .training(
            gamma=gamma,
            lambda_=lam,
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            shuffle_batch_per_epoch=True,
        )
        .learners(num_learners=0)
    )


def _env_steps(spec: EnvSpec, seed: int, steps: int) -> int:
    """RLlib's count of sampled timesteps in the first ``steps`` vector steps after a reset:
    every time step except the FIRSTs (a reset is no timestep, ``SingleAgentEnvRunner._sample``)."""
    return sum(transitions_observed(spec, seed, env, steps) for env in range(spec.num_envs))


# -- episodes as time steps ------------------------------------------------------------------------
def _steps(chunk: Any) -> list[Step]:
    """The time steps a chunk holds (lookback excluded), its first one included, with the
    action taken at each (``-1`` where none is recorded: a LAST, or the newest observation of
    a chunk); the modules are stateless, so the policy state is ``t``."""
    observations = chunk.get_observations()
    rewards = [float(r) for r in chunk.get_rewards()]
    actions = [int(a) for a in chunk.get_actions()]
    length = len(rewards)
    out = []
    for i, obs in enumerate(observations):
        final = i == length
        if i == 0 and chunk.t_started == 0:
            step_type = _FIRST
        elif final and chunk.is_done:
            step_type = _LAST
        else:
            step_type = _MID
        reward = rewards[i - 1] if i > 0 else 0.0
        discount = 0.0 if step_type == _LAST and chunk.is_terminated else 1.0
        action = actions[i] if i < length else -1
        out.append(Step(decode_item(obs), step_type, reward, discount, action=action))
    return out


def _new_steps(chunk: Any) -> list[Step]:
    """The time steps a chunk adds to its episode: a continuation's first observation is its
    predecessor's final one."""
    steps = _steps(chunk)
    return steps[1:] if chunk.t_started > 0 else steps


# -- env ---------------------------------------------------------------------------------------
def _run_env(sc: EnvScenario) -> Trace:
    streams: dict[int, list[Step]] = {e: [] for e in range(sc.env.num_envs)}
    open_chunks: dict[str, tuple[int, int]] = {}  # id_ -> (env, index of its newest step)
    with _seeded(sc.seed):
        runner = SingleAgentEnvRunner(config=_config(sc.env, sc.seed))
        vector_env: Any = runner.env
        mode = vector_env.unwrapped.metadata.get("autoreset_mode")
        try:
            while min(len(s) for s in streams.values()) <= sc.steps:
                for chunk in runner.sample():
                    steps = _steps(chunk)
                    if chunk.id_ in open_chunks:
                        env, newest = open_chunks[chunk.id_]
                        # the glued step gets the action the continuation recorded at it
                        streams[env][newest] = _with_action(streams[env][newest], steps[0])
                        steps = steps[1:]
                    else:
                        env = steps[0].item[0]
                    streams[env].extend(steps)
                    open_chunks[chunk.id_] = (env, len(streams[env]) - 1)
        finally:
            runner.stop()
    events: list[Event] = [
        env_step(0, [streams[e][n] for e in range(sc.env.num_envs)]) for n in range(sc.steps)
    ]
    return Trace(tuple(events), {"producer": "rllib", "autoreset_mode": str(mode)})


def _with_action(step: Step, continued: Step) -> Step:
    return dataclasses.replace(step, action=continued.action)


# -- replay ------------------------------------------------------------------------------------
def _replay_support(sc: ReplayScenario) -> None:
    s = sc.sampling
    buffer_py = f"{_SOURCE}/utils/replay_buffers/episode_replay_buffer.py"
    if s.period != 1:
        raise Unsupported(
            f"period {s.period}: RLlib 2.60.0's EpisodeReplayBuffer draws any stored "
            "(episode, timestep) uniformly (sample: self.rng.integers(len(self._indices))); "
            "it has no grid of window starts",
            buffer_py,
        )
    if s.distribution != "uniform-windows":
        raise Unsupported(
            f"distribution {s.distribution!r}: RLlib 2.60.0's EpisodeReplayBuffer draws "
            "uniformly over stored timesteps, never per env or per episode",
            buffer_py,
        )


def _fill(runner: Any, buffer: Any, budget: int, sampled: int, events: list[Event]) -> int:
    """Sample ``runner`` one timestep per env at a time into ``buffer`` until ``budget`` env
    steps are sampled (``sampled`` of them already), each chunk's store recorded in
    ``events``; returns the env steps sampled."""
    while sampled < budget:
        chunks = runner.sample(num_timesteps=1)
        buffer.add(chunks)
        sampled += sum(len(chunk) for chunk in chunks)
        store = _store(chunks)
        if store is not None:
            events.append(store)
    return sampled


def _store(chunks: Sequence[Any]) -> Store | None:
    steps = [s for chunk in chunks for s in _new_steps(chunk)]
    return store(0, steps) if steps else None


def _windows_of(observations: Any, length: int) -> tuple[Item | None, ...]:
    items: list[Item | None] = [decode_item(o) for o in observations]
    return tuple(items + [None] * (length - len(items)))


def _draw(buffer: Any, sc: ReplayScenario) -> tuple[tuple[Item | None, ...], ...]:
    """One batch of ``batch_size`` windows of ``W`` items, by RLlib's own samplers (see the
    module docstring). Under ``forbid`` RLlib rejects too-short sequences and redraws, for
    ever if no stored episode holds a full window: that is reported as unsupported."""
    width, boundary = sc.sampling.window_length, sc.sampling.boundary
    buffer.rng.draws = 0
    try:
        return _windows(buffer, sc, width, boundary)
    except _SamplerStuck:
        raise Unsupported(
            f"windows of {width} under {boundary!r}: RLlib 2.60.0's "
            "EpisodeReplayBuffer._sample_episodes redraws a start while it is less than "
            f"min_batch_length_T = {width - 2} transitions from its episode end, and no "
            f"window was accepted within {buffer.rng.limit} draws (none of the stored "
            "episodes is long enough, so the loop would not end)",
            f"{_SOURCE}/utils/replay_buffers/episode_replay_buffer.py",
        ) from None


def _windows(
    buffer: Any, sc: ReplayScenario, width: int, boundary: str
) -> tuple[tuple[Item | None, ...], ...]:
    if width == 1 or boundary == "cross":
        rows = buffer.sample(batch_size_B=sc.batch_size, batch_length_T=width)["obs"]
        return tuple(_windows_of(row, width) for row in rows)
    transitions = width - 1
    if boundary == "forbid":
        sequences = buffer.sample(
            batch_size_B=sc.batch_size * width,
            batch_length_T=transitions,
            n_step=1,
            sample_episodes=True,
            min_batch_length_T=transitions - 1,
        )
    else:
        sequences = [
            seq
            for _ in range(sc.batch_size)
            for seq in buffer.sample(
                batch_size_B=1, batch_length_T=transitions, n_step=1, sample_episodes=True
            )
        ]
    return tuple(_windows_of(seq.get_observations(), width) for seq in sequences)


def _run_replay(sc: ReplayScenario) -> Trace:
    _replay_support(sc)
    events: list[Event] = []
    with _seeded(sc.seed):
        runner = SingleAgentEnvRunner(config=_config(sc.env, sc.seed))
        buffer: Any = EpisodeReplayBuffer(capacity=sc.capacity * sc.env.num_envs)
        limit = max(_DRAW_LIMIT, 50 * sc.batch_size * sc.sampling.window_length)
        buffer.rng = _BoundedRng(np.random.default_rng(sc.seed), limit)
        try:
            _fill(runner, buffer, _env_steps(sc.env, sc.seed, sc.fill_steps), 0, events)
        finally:
            runner.stop()
        if buffer.get_num_timesteps() == 0:
            raise Unsupported(
                f"fill of {sc.fill_steps} vector steps: RLlib 2.60.0 stores an episode only once "
                "it holds a transition (SingleAgentEnvRunner._sample skips episodes with t == 0), "
                "and EpisodeReplayBuffer cannot sample from an empty buffer",
                f"{_SOURCE}/env/single_agent_env_runner.py",
            )
        for draw in range(sc.draws):
            events.append(Sampled(draw, _draw(buffer, sc)))
    return Trace(tuple(events), {"producer": "rllib", "seed": sc.seed})


# -- learner -----------------------------------------------------------------------------------
class _Capture:
    """Stands in for the learner's connector pipeline: calls it and keeps its output batch."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline
        self.batch: dict[str, np.ndarray] = {}

    def __call__(self, **kwargs: Any) -> Any:
        out = self.pipeline(**kwargs)
        self.batch = {
            key: np.array(torch.as_tensor(value).detach().cpu().numpy())
            for key, value in out[_MODULE_ID].items()
            if isinstance(value, (torch.Tensor, np.ndarray))
        }
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline, name)


@dataclass(frozen=True)
class _LearnerData:
    """What the learner produced: the module batch's rows and columns, the values the module
    gave them, and the minibatch of every gradient update (rows by batch index)."""

    items: list[Item]
    columns: dict[str, np.ndarray]
    values: np.ndarray
    minibatches: list[tuple[int, ...]]
    handed: list[CallerEpisode]


def _learner_episodes(sc: LearnerScenario, config: PPOConfig) -> list[Any]:
    """The runner's episodes of the first ``steps`` vector steps, in canonical order."""
    runner = SingleAgentEnvRunner(config=config)
    try:
        episodes = runner.sample(num_timesteps=_env_steps(sc.env, sc.seed, sc.steps))
    finally:
        runner.stop()
    return sorted(episodes, key=lambda ep: decode_item(ep.get_observations(0))[:2])


def _held(episode: Any) -> tuple[int, int, int]:
    """``(transitions, terminated, truncated)`` of an RLlib episode object, read from it."""
    return (len(episode), int(episode.is_terminated), int(episode.is_truncated))


def _update(sc: LearnerScenario, config: PPOConfig, episodes: list[Any]) -> _LearnerData:
    """``Learner.update`` on the caller's copy of the episodes, each read before and after the
    call (``caller_episode``: RLlib's connector mutates them in place); the originals stay for
    the shards and n-step items."""
    learner: Any = config.build_learner()
    capture = _Capture(learner._learner_connector)
    learner._learner_connector = capture
    update = learner._update
    seen: list[list[Item]] = []

    def recorded_update(batch: dict[str, Any], **kwargs: Any) -> Any:
        seen.append([decode_item(o) for o in batch[_MODULE_ID][Columns.OBS].detach().cpu().numpy()])
        return update(batch, **kwargs)

    learner._update = recorded_update
    handed = copy.deepcopy(episodes)
    keys = [decode_item(ep.get_observations(0))[:2] for ep in handed]
    before = [_held(ep) for ep in handed]
    learner.update(
        episodes=handed,
        num_epochs=sc.num_epochs,
        minibatch_size=sc.minibatch_size,
        shuffle_batch_per_epoch=True,
    )
    columns = capture.batch
    items = [decode_item(o) for o in columns[Columns.OBS]]
    index = {item: i for i, item in enumerate(items)}
    if len(index) != len(items):
        raise RuntimeError("the learner batch holds a time step twice")
    module = learner.module[_MODULE_ID]
    with torch.no_grad():
        values = module.compute_values({Columns.OBS: torch.as_tensor(columns[Columns.OBS])})
    minibatches = [tuple(index[i] for i in rows) for rows in seen]
    callers = [CallerEpisode(env, k, b, _held(ep)) for (env, k), b, ep in zip(keys, before, handed)]
    return _LearnerData(items, columns, values.detach().cpu().numpy(), minibatches, callers)


def _advantage_events(data: _LearnerData) -> list[Advantages]:
    """One event per episode: its rows in batch order (``t = 0..L``, the bootstrap row last)."""
    targets = data.columns[Postprocessing.VALUE_TARGETS]
    normalized = data.columns[Postprocessing.ADVANTAGES]
    mask = data.columns[Columns.LOSS_MASK]
    return [
        Advantages(
            e,
            k,
            tuple(data.items[i][2] for i in rows),
            tuple(float(targets[i] - data.values[i]) for i in rows),
            tuple(float(targets[i]) for i in rows),
            tuple(float(normalized[i]) for i in rows),
            tuple(int(bool(mask[i])) for i in rows),
        )
        for (e, k), rows in episode_rows(data.items).items()
    ]


def _shard_events(sc: LearnerScenario, config: PPOConfig, episodes: list[Any]) -> list[Shard]:
    """``TrainingData.shard`` as ``LearnerGroup.update`` calls it for ``num_learners`` remote
    learners (``core/learner/learner_group.py:update``); piece ``[t_started, t)`` of each
    (sliced) episode."""
    shards = TrainingData(episodes=copy.deepcopy(episodes)).shard(
        num_shards=sc.num_learners,
        len_lookback_buffer=config.episode_lookback_horizon,
        num_epochs=sc.num_epochs,
        minibatch_size=sc.minibatch_size,
        shuffle_batch_per_epoch=True,
    )
    events = []
    for learner, (data, _) in enumerate(shards):
        pieces = [(decode_item(ep.get_observations(0)), ep.t_started, ep.t) for ep in data.episodes]
        env, episode, _ = item_columns([item for item, _, _ in pieces])
        starts = tuple(start for _, start, _ in pieces)
        events.append(Shard(learner, env, episode, starts, tuple(stop for _, _, stop in pieces)))
    return events


def _nstep_event(sc: LearnerScenario, episodes: list[Any]) -> NStep:
    """n-step items of every transition start from ``EpisodeReplayBuffer._sample_episodes``
    (sampled until each start was drawn), with DQN's target line applied to each."""
    buffer: Any = EpisodeReplayBuffer(capacity=10**6)
    buffer.add(copy.deepcopy(episodes))
    starts = {step.item for ep in episodes for step in _steps(ep)[:-1] if step.step_type != _LAST}
    rng = _BoundedRng(np.random.default_rng(sc.seed), _DRAW_LIMIT)
    buffer.rng = rng
    gamma, scale = float(sc.gamma), float(sc.value_scale)
    found: dict[Item, tuple[float, int]] = {}
    try:
        while starts - set(found):
            for item in buffer.sample(
                batch_size_B=len(starts), n_step=sc.nstep, gamma=gamma, sample_episodes=True
            ):
                first, nxt = (decode_item(o) for o in item.get_observations())
                n_step = int(item.get_extra_model_outputs("n_step")[0])
                reward = float(item.get_rewards()[0])
                alive = 0.0 if item.is_terminated else 1.0
                target = reward + gamma**n_step * alive * scale * nxt[2]
                found[first] = (target, nxt[2] - first[2])
    except _SamplerStuck:
        raise Unsupported(
            f"n_step {sc.nstep}: RLlib 2.60.0's EpisodeReplayBuffer._sample_episodes did not "
            f"return within {_DRAW_LIMIT} draws. Its batch counter adds "
            "(actual_length - ts - (n_step - 1) + 1) or 1 per sampled item, which is negative "
            "for a window clipped at an episode end once n_step >= 4, so `while B < "
            "batch_size_B` need not end on short episodes",
            f"{_SOURCE}/utils/replay_buffers/episode_replay_buffer.py",
        ) from None
    keys = sorted(found)
    targets = tuple(found[k][0] for k in keys)
    return NStep(*item_columns(keys), targets, tuple(found[k][1] for k in keys))


def _run_learner(sc: LearnerScenario) -> Trace:
    config = _config(
        sc.env,
        sc.seed,
        value_scale=float(sc.value_scale),
        gamma=float(sc.gamma),
        lam=float(sc.lam),
        num_epochs=sc.num_epochs,
        minibatch_size=sc.minibatch_size,
    )
    events: list[Event] = []
    with _seeded(sc.seed):
        episodes = _learner_episodes(sc, config)
        if not episodes:
            raise Unsupported(
                f"steps {sc.steps}: no transition was sampled, and RLlib 2.60.0's "
                "Learner.update has no empty batch (MiniBatchCyclicIterator raises on one)",
                f"{_SOURCE}/utils/minibatch_utils.py",
            )
        data = _update(sc, config, episodes)
        events.extend(_advantage_events(data))
        events.extend(data.handed)
        events.append(_nstep_event(sc, episodes))
        events.append(UpdatePlan(len(data.minibatches), tuple(data.minibatches)))
        events.extend(_shard_events(sc, config, episodes))
    return Trace(tuple(events), {"producer": "rllib", "seed": sc.seed})


# -- the adapter ---------------------------------------------------------------------------------
def _version(package: str) -> str:
    return metadata.version(package)


class RLlibAdapter:
    """RLlib 2.60.0 behind the xpspec protocol (capabilities env, trainer, replay, learner,
    recurrent, priorities, stack, checkpoint, async, offline)."""

    fresh_process_per_operation = True
    """A trainer run starts and shuts down a Ray instance in its own process."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="rllib",
            framework="RLlib (ray[rllib], new API stack)",
            framework_version=_version("ray"),
            protocol_version=PROTOCOL_VERSION,
            # AddOneTsToEpisodesAndTruncate appends a real bootstrap timestep: "bootstrap";
            # Algorithm.iteration, the learner's WEIGHTS_SEQ_NO, after_gradient_based_update
            # and on_train_result: "counter", "update-counter", "hooks"; the state RLlib
            # feeds the trainer's stateful module when it acts: "state" (rllib_state).
            capabilities=(
                "env",
                "trainer",
                "replay",
                "learner",
                "counter",
                "update-counter",
                "hooks",
                "state",
                "loss-mask",  # the LOSS_MASK DQN's loss receives (rllib_loss_mask)
                "bootstrap",
                "caller-episodes",
                "nstep",
                "shards",
                "recurrent",
                "priorities",
                "importance-weights",
                "stack",
                "checkpoint",
                "async",
                "offline",  # old-stack PPO through MixedInput (rllib_offline)
            ),
            issue_tracker="https://github.com/ray-project/ray/issues",
            notes=(
                "SingleAgentEnvRunner, the PPO learner connector pipeline with Learner.update, "
                "TrainingData.shard and EpisodeReplayBuffer driven in-process; DQN's "
                "Algorithm.train on a local Ray instance for trainer runs; episodes hold the "
                "final observation (NEXT_STEP autoreset)."
            ),
            extra_versions={
                "gymnasium": _version("gymnasium"),
                "numpy": _version("numpy"),
                "torch": torch.__version__,
            },
        )

    def smoke(self) -> None:
        _run_env(EnvScenario(EnvSpec(), steps=2))

    def run_env(self, scenario: EnvScenario) -> Trace:
        """Time steps of repeated ``SingleAgentEnvRunner.sample()`` calls, chunks glued by
        ``id_`` (see the module docstring)."""
        return _run_env(scenario)

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """``Algorithm.train()`` of a DQN on a local Ray instance (:mod:`xpspec.adapters.rllib_trainer`);
        with a checkpoint spec, saved with ``save_to_path`` and resumed with
        ``Algorithm.from_checkpoint`` (:mod:`xpspec.adapters.rllib_checkpoint`)."""
        if scenario.checkpoint is not None:
            from xpspec.adapters.rllib_checkpoint import run_checkpointed

            return run_checkpointed(scenario)
        from xpspec.adapters.rllib_trainer import run_trainer

        return run_trainer(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """``EpisodeReplayBuffer`` filled from ``SingleAgentEnvRunner.sample(num_timesteps=1)``
        and sampled by its own samplers (see the module docstring); with a priority spec,
        ``PrioritizedEpisodeReplayBuffer`` (:mod:`xpspec.adapters.rllib_priority`)."""
        if scenario.priority is not None:
            from xpspec.adapters.rllib_priority import run_prioritized

            return run_prioritized(scenario)
        return _run_replay(scenario)

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """PPO's learner connector and ``Learner.update``, ``TrainingData.shard`` and n-step
        items of ``EpisodeReplayBuffer`` on the runner's episodes (see the module docstring)."""
        return _run_learner(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        """``FrameStackingEnvToModule`` in the env runner, ``FrameStackingLearner`` on the
        transitions an ``EpisodeReplayBuffer`` samples (:mod:`xpspec.adapters.rllib_stack`)."""
        from xpspec.adapters.rllib_stack import run_stack

        return run_stack(scenario)

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """A stateful counting RLModule through PPO's rollout chunks, or DQN's replayed
        sequences when the scenario has a burn-in (:mod:`xpspec.adapters.rllib_recurrent`)."""
        from xpspec.adapters.rllib_recurrent import run_recurrent

        return run_recurrent(scenario)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        """IMPALA's ``train()`` with one remote env runner per actor on a local Ray cluster,
        versions read from RLlib's ``WEIGHTS_SEQ_NO`` (:mod:`xpspec.adapters.rllib_async`)."""
        from xpspec.adapters.rllib_async import run_async

        return run_async(scenario)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """Old-API-stack PPO reading through ``MixedInput`` from its sampler and a dataset
        written by ``JsonWriter`` (:mod:`xpspec.adapters.rllib_offline`)."""
        from xpspec.adapters.rllib_offline import run_offline

        return run_offline(scenario)
