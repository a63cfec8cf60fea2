"""RLlib 2.60.0's own DQN train loop (``Algorithm.train`` -> ``DQN.training_step``) on a local
Ray instance, recorded at the seams an RLlib user has: the replay buffer class named in
``replay_buffer_config["type"]``, the learner class of ``config.training(learner_class=...)``
and the ``on_sample_end`` callback. Sources are cited as ``file:function`` under
``ray/rllib`` of the installed wheel.

The run (see :func:`run_trainer`): ``ray.init(num_cpus=1)`` with no dashboard, then
``config.build_algo()`` with ``num_env_runners=0`` (the local env runner samples) and
``num_learners=0`` (the local learner updates), ``num_iterations`` calls of
``Algorithm.train()`` (``min_*_per_iteration = 0``: one ``training_step`` per call), and
``ray.shutdown()`` in a ``finally``. One spec iteration is one ``train()`` call.

Hooks and counters are read where RLlib calls the user's code: the learner's
``after_gradient_based_update`` (``after_update``), an ``on_train_result`` callback
(``after_train_iter``), and, inside the learner's ``_update``, the counter the scenario's
``counter_mode`` names: ``Algorithm.iteration`` (per-iteration) or the learner's
``WEIGHTS_SEQ_NO`` (per-mini-batch), both as RLlib holds them at that moment.
"""

from __future__ import annotations

import copy
import dataclasses
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    import ray
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
    from ray.tune.registry import register_env

from xpspec.adapters.rllib import _new_steps, _seeded, _steps, _ToyVectorEnv, _with_action
from xpspec.adapters.rllib_loss_mask import (
    LossWindows,
    loss_windows,
    sequence_config,
    sequence_support,
)
from xpspec.adapters.rllib_state import StateRecording
from xpspec.kit.events import env_step, exclude, hold, run_end, store
from xpspec.kit.exclusion import exclusion_reason, selects
from xpspec.kit.items import decode_item
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import (
    Event,
    Hook,
    Item,
    IterationEnd,
    IterationStart,
    Trace,
    TrainCall,
    Update,
    Window,
)
from xpspec.refimpl.toy_envs.gym_env import toy_action_space, toy_observation_space

__all__ = [
    "Called",
    "RecordingDQNLearner",
    "RecordingEpisodeReplayBuffer",
    "TrainResultRecorder",
    "run_trainer",
]

_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"
_ENV_NAME = "xpspec-toy"
_MODULE_ID = "default_policy"
_ANNOTATION = "xpspec_annotation"
"""The ``SingleAgentEpisode.custom_data`` key of the user's episode annotation."""


def _unsupported(reason: str, path: str) -> Unsupported:
    return Unsupported(f"RLlib 2.60.0: {reason}", f"{_SOURCE}/{path}")


# -- the user's classes, named in the config -------------------------------------------------
class RecordingEpisodeReplayBuffer(EpisodeReplayBuffer):
    """RLlib's ``EpisodeReplayBuffer`` with a seeded generator (``rng_seed``; RLlib's own is
    ``default_rng(seed=None)``) that keeps, after each ``add``, the time steps each added
    chunk contributed, read back from the episode the buffer then holds under the chunk's
    ``id_`` (the chunk itself if the buffer evicted that episode within the same ``add``)."""

    def __init__(self, *args: Any, rng_seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rng = np.random.default_rng(rng_seed)
        self.added: list[list[Any]] = []

    def add(self, episodes: Any) -> None:
        chunks = episodes if isinstance(episodes, list) else [episodes]
        super().add(chunks)
        steps: list[Any] = []
        for chunk in chunks:
            wanted = [s.item for s in _new_steps(chunk)]
            index = self.episode_id_to_index.get(chunk.id_)
            held = None if index is None else index - self._num_episodes_evicted
            source = self.episodes[held] if held is not None and held >= 0 else chunk
            # The user's episode annotation, in the custom_data of the stored copy.
            note = float(source.custom_data.get(_ANNOTATION, 0.0))
            by_item = {s.item: dataclasses.replace(s, annotation=note) for s in _steps(source)}
            steps.extend(by_item[item] for item in wanted)
        self.added.append(steps)


@dataclass(frozen=True)
class Called:
    """One call RLlib made into the user's code, in call order: a gradient update (``update``,
    with the windows and loss mask its loss received and the counter read when RLlib made
    it) or a hook (``after_update``, ``after_train_iter``)."""

    name: Literal["update", "after_update", "after_train_iter"]
    windows: tuple[Window, ...] = ()
    loss_mask: tuple[tuple[int, ...], ...] = ()
    counter: int = 0


class RecordingDQNLearner(DQNTorchLearner):
    """DQN's torch learner that logs, in the order RLlib calls them, every gradient update
    (``TorchLearner._update`` is one optimizer step) with the windows and loss mask of the
    batch its loss received (:func:`~xpspec.adapters.rllib_loss_mask.loss_windows`, read in
    ``compute_loss_for_module``) and the counter ``read_counter`` returns at that moment,
    and every call of the documented hook ``Learner.after_gradient_based_update``
    (``core/learner/learner.py``; ``Learner.update`` calls it once, after its minibatch
    loop)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[Called] = []
        self.read_counter: Callable[[], int] = self.weights_seq_no
        self._losses: list[LossWindows] = []

    def weights_seq_no(self) -> int:
        """RLlib's count of this learner's ``update`` calls, as its state reports it
        (``Learner.get_state()[WEIGHTS_SEQ_NO]``; ``Learner.update`` increments it before its
        minibatch loop)."""
        return int(self.get_state(components=[])[WEIGHTS_SEQ_NO])

    def _update(self, batch: dict[str, Any]) -> Any:
        counter = self.read_counter()
        self._losses.clear()
        out = super()._update(batch)
        if len(self._losses) != 1:
            raise RuntimeError(
                f"gradient update: expected one loss call for {_MODULE_ID}, got {len(self._losses)}"
            )
        (seen,) = self._losses
        self.log.append(Called("update", seen.windows, seen.loss_mask, counter))
        return out

    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: Any, fwd_out: Any
    ) -> Any:
        """DQN's loss, its batch read first: the rows and ``LOSS_MASK`` it applies."""
        self._losses.append(loss_windows(batch))
        return super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        self.log.append(Called("after_update"))


class TrainResultRecorder:
    """The user's ``on_train_result`` callback (``Algorithm.log_result`` calls it once per
    ``Algorithm.train()``, after ``Algorithm.step``): logs ``after_train_iter`` into the log it
    is given (the learner's, so that the order of all calls is kept)."""

    def __init__(self) -> None:
        self.log: list[Called] = []

    def __call__(self, *, algorithm: Any, **_: Any) -> None:
        self.log.append(Called("after_train_iter"))


# -- the user's on_sample_end hook -------------------------------------------------------------
@dataclass
class _SampleHook:
    """The preprocessing a user writes in ``on_sample_end`` (episodes may be changed there
    before the algorithm adds them to its buffer); it keeps what it excluded and, under
    episode-delayed preprocessing, what it held (per call) and still holds (by ``id_``)."""

    spec: PreprocessorSpec
    excluded: list[tuple[str, list[Item]]] = field(default_factory=list)
    holds: list[list[Item]] = field(default_factory=list)
    held: dict[str, Any] = field(default_factory=dict)

    def __call__(self, *, samples: list[Any], **_: Any) -> None:
        spec = self.spec
        if isinstance(spec, EpisodeDelayed):
            samples[:] = self._hold_and_release(spec, samples)
            return
        if isinstance(spec, RewardTransform):
            for chunk in samples:
                rewards = np.asarray(chunk.get_rewards(), dtype=np.float64)
                if len(rewards):
                    new = rewards * float(spec.scale) + float(spec.shift)
                    chunk.set_rewards(new_data=new.astype(np.float32), at_indices=slice(0, None))
        elif isinstance(spec, OverwriteStepType):
            # A truncated LAST becomes an ongoing MID, on a copy: the env runner keeps the
            # chunk itself for its metrics, and SingleAgentEnvRunner.get_metrics asserts that
            # every done chunk it kept is still done (env/single_agent_env_runner.py:543).
            samples[:] = [_not_truncated(chunk) for chunk in samples]
        elif isinstance(spec, (ExcludeEpisodes, ExcludeTasks)):
            kept = []
            for chunk in samples:
                # a chunk is one episode's: its first observation and info select it
                task_id = chunk.get_infos(0)["task_id"] if isinstance(spec, ExcludeTasks) else None
                if selects(spec, decode_item(chunk.get_observations(0)), task_id):
                    items = [s.item for s in _new_steps(chunk)]
                    self.excluded.append((exclusion_reason(spec), items))
                else:
                    kept.append(chunk)
            samples[:] = kept

    def _hold_and_release(self, spec: EpisodeDelayed, samples: list[Any]) -> list[Any]:
        """Every chunk is held (a deep copy: the env runner keeps its own chunks for its
        metrics), a continuation glued onto its held episode with ``concat_episode``; an
        episode whose chunk is done is released: annotated in ``custom_data`` (1.0 if
        terminated, 0.0 if truncated) and returned for DQN to add, or excluded (reason
        ``outcome``) when ``keep`` rejects its outcome. Releases keep the order of the done
        chunks in ``samples`` (the env runner's order of completion)."""
        released: list[Any] = []
        held_now: list[Item] = []
        for chunk in samples:
            held_now.extend(s.item for s in _new_steps(chunk))
            if chunk.id_ in self.held:
                self.held[chunk.id_].concat_episode(chunk)
            else:
                self.held[chunk.id_] = copy.deepcopy(chunk)
            if not chunk.is_done:
                continue
            episode = self.held.pop(chunk.id_)
            success = bool(episode.is_terminated)
            if spec.keep != "all" and (spec.keep == "success") != success:
                self.excluded.append(("outcome", [s.item for s in _steps(episode)]))
                continue
            episode.custom_data[_ANNOTATION] = float(success)
            released.append(episode)
        self.holds.append(held_now)
        return released

    def pending(self) -> list[Item]:
        """The items of the episodes still held, in increasing env order."""
        episodes = sorted(self.held.values(), key=lambda ep: decode_item(ep.get_observations(0)))
        return [s.item for ep in episodes for s in _steps(ep)]


def _not_truncated(chunk: Any) -> Any:
    """``chunk``, or, if it is truncated, a deep copy of it with ``is_truncated`` cleared."""
    if not chunk.is_truncated:
        return chunk
    copied = copy.deepcopy(chunk)
    copied.is_truncated = False
    return copied


class _SampleRecorder:
    """The first ``on_sample_end`` callback: the time steps of every chunk the env runner
    returned, read before the preprocessing callback runs."""

    def __init__(self) -> None:
        self.chunks: list[tuple[list[Any], bool, str]] = []

    def __call__(self, *, samples: list[Any], **_: Any) -> None:
        for chunk in samples:
            self.chunks.append((_steps(chunk), chunk.t_started > 0, chunk.id_))

    def take(self) -> list[tuple[list[Any], bool, str]]:
        out, self.chunks = self.chunks, []
        return out


# -- configuration ---------------------------------------------------------------------------
def _support(sc: TrainerScenario) -> int:
    """The integer unroll length, or Unsupported for what DQN's loop cannot express."""
    cfg = sc.trainer
    dqn = "algorithms/dqn/dqn.py"
    if cfg.mode != "off-policy":
        raise _unsupported(
            "on-policy mode: this adapter drives DQN's off-policy training_step only "
            "(DQN._training_step_new_api_stack)",
            dqn,
        )
    if cfg.drain is not None:
        raise _unsupported(
            "drain mode: training_step samples synchronously "
            "(synchronous_parallel_sample), there is no asynchronous unroller",
            dqn,
        )
    u = Fraction(cfg.unroll_length)
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: rollout_fragment_length is an integer number of timesteps "
            "per sub-env (AlgorithmConfig.get_rollout_fragment_length)",
            "algorithms/algorithm_config.py",
        )
    if cfg.num_env_steps:
        raise _unsupported(
            "num_env_steps: the loop is the user's train() calls; RLlib has no env-step "
            "budget inside Algorithm.train (the adapter runs num_iterations calls)",
            "algorithms/algorithm.py",
        )
    if cfg.whole_buffer:
        raise _unsupported(
            "whole-buffer training: DQN samples its train batch at random from the buffer "
            "(EpisodeReplayBuffer.sample)",
            dqn,
        )
    sequence_support(sc)  # windows of two or more items: DQN's padded sequences
    buffer_py = "utils/replay_buffers/episode_replay_buffer.py"
    if sc.sampling.period != 1 or sc.sampling.distribution != "uniform-windows":
        raise _unsupported(
            "EpisodeReplayBuffer draws any stored timestep uniformly (no period grid, no "
            "per-env or per-episode law)",
            buffer_py,
        )
    pre = sc.preprocess
    if not isinstance(pre, _EXPRESSED) or (
        isinstance(pre, OverwriteStepType) and (pre.when, pre.to) != ("truncated-last", "MID")
    ):
        raise _unsupported(*_not_expressed(pre))
    return int(u)


_EXPRESSED = (
    Identity,
    RewardTransform,
    OverwriteStepType,
    ExcludeEpisodes,
    ExcludeTasks,
    EpisodeDelayed,
)


def _not_expressed(spec: PreprocessorSpec) -> tuple[str, str]:
    name = type(spec).__name__
    if name == "ExcludeSteps":
        return (
            "ExcludeSteps: on_sample_end sees episode chunks, and a chunk with steps cut out "
            "of it is no episode (SingleAgentEpisode.validate needs len(observations) == "
            "len(actions) + 1); EpisodeReplayBuffer.add glues chunks by id_ with "
            "SingleAgentEpisode.concat_episode, which asserts the chunk starts where the "
            "stored one ends (other.t_started == self.t), so no step can be left out",
            "env/single_agent_episode.py",
        )
    if name == "OverwriteStepType":
        return (
            f"{spec}: an episode has no per-step step type; FIRST, MID and LAST follow from "
            "t_started, the position and is_terminated / is_truncated (SingleAgentEpisode), "
            "so on_sample_end can only turn a truncated LAST into MID (is_truncated = False)",
            "env/single_agent_episode.py",
        )
    raise TypeError(f"preprocess: expected a preprocessor of xpspec.protocol, got {spec!r}")


def _config(sc: TrainerScenario, u: int, hook: _SampleHook, recorder: _SampleRecorder) -> DQNConfig:
    cfg, b = sc.trainer, sc.env.num_envs
    batch = cfg.mini_batch_size or b
    # A stateful module (observable "state"), sequences of mini_batch_length transitions and
    # what RLlib counts for `batch` of them (rllib_loss_mask).
    module, model_config, timesteps = sequence_config(cfg.mini_batch_length, batch)
    native = Fraction(timesteps, u * b)  # dqn.py:calculate_rr_weights, one local runner
    intensity = float(native * cfg.num_updates_per_train_iter)
    config = (
        DQNConfig()
        .environment(
            _ENV_NAME,
            observation_space=toy_observation_space(sc.env),
            action_space=toy_action_space(sc.env),
        )
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=b,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=u,
            batch_mode="truncate_episodes",
        )
        .training(
            train_batch_size_per_learner=timesteps,
            num_steps_sampled_before_learning_starts=cfg.initial_collect_steps,
            training_intensity=intensity if cfg.num_updates_per_train_iter > 1 else None,
            n_step=1,
            double_q=False,  # the acting-state module's forward_train has no QF_NEXT_PREDS
            replay_buffer_config={
                "type": f"{__name__}.RecordingEpisodeReplayBuffer",
                "capacity": cfg.capacity * b,
                "rng_seed": sc.seed,
            },
            learner_class=RecordingDQNLearner,
        )
        .rl_module(rl_module_spec=module, model_config=model_config)
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .learners(num_learners=0)
    )
    hooks: list[Any] = [recorder]
    if not isinstance(sc.preprocess, Identity):
        hooks.append(hook)
    return config.callbacks(on_sample_end=hooks, on_train_result=[TrainResultRecorder()])


# -- recording ---------------------------------------------------------------------------------
def run_trainer(sc: TrainerScenario) -> Trace:
    """``num_iterations`` calls of ``Algorithm.train()`` of a DQN built on a local Ray
    instance, recorded as described in :mod:`xpspec.adapters.rllib`."""
    u = _support(sc)
    hook = _SampleHook(sc.preprocess)
    recorder = _SampleRecorder()
    with _seeded(sc.seed):
        ray.init(
            num_cpus=1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        try:
            register_env(_ENV_NAME, _ToyVectorEnv(sc.env, sc.seed))
            algo = _config(sc, u, hook, recorder).build_algo()
            try:
                # The config is deep-copied on its way to the env runner: read back the
                # callback objects it calls.
                called = list(algo.env_runner.config.callbacks_on_sample_end)
                recorder = next(c for c in called if isinstance(c, _SampleRecorder))
                hook = next((c for c in called if isinstance(c, _SampleHook)), hook)
                return _Run(sc, algo, hook, recorder).run()
            finally:
                algo.stop()
        finally:
            ray.shutdown()


def _raised_by_buffer_sample(exc: BaseException) -> bool:
    """Whether ``exc`` came out of ``EpisodeReplayBuffer``'s sampler (``rng.integers`` over
    no stored timestep: ``ValueError: high <= 0``)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return any(f.filename.endswith("replay_buffers/episode_replay_buffer.py") for f in frames)


class _Run:
    def __init__(
        self, sc: TrainerScenario, algo: Any, hook: _SampleHook, recorder: _SampleRecorder
    ) -> None:
        self.sc, self.algo, self.hook = sc, algo, hook
        self.recorder = recorder
        self.buffer: RecordingEpisodeReplayBuffer = algo.local_replay_buffer
        self.learner: RecordingDQNLearner = algo.learner_group._learner
        self.states = StateRecording(algo)
        # The config is copied into the algorithm: its on_train_result callback writes into
        # the learner's log, so hook and update calls stay in the order RLlib makes them.
        (train_result,) = algo.config.callbacks_on_train_result
        train_result.log = self.learner.log
        # counter_mode chooses which of RLlib's counters is read (iterations or updates);
        # when it grows is RLlib's doing, so a variant model's "-after" mode reads the same.
        if sc.trainer.counter_mode.startswith("per-iteration"):
            self.learner.read_counter = self._iteration_counter
        self.events: list[Event] = []
        self.env_stream: dict[int, list[Any]] = {e: [] for e in range(sc.env.num_envs)}
        self.open: dict[str, tuple[int, int]] = {}
        self.vector_steps = 0
        self.stored = 0
        self.env_steps = 0
        self.calls = 0
        self._started = 0

    def run(self) -> Trace:
        header: dict[str, Any] = {"producer": "rllib", "seed": self.sc.seed}
        iterations = self.sc.trainer.num_iterations
        pending: list[Item] = []  # held by the user's hook after the last recorded iteration
        for iteration in range(1, iterations + 1):
            try:
                self._iteration(iteration)
                pending = self.hook.pending()
            except ValueError as exc:
                if not _raised_by_buffer_sample(exc):
                    raise
                iterations = iteration - 1
                self.events = self.events[: self._started]
                header["stopped"] = (
                    f"ValueError: {exc} (EpisodeReplayBuffer.sample in DQN.training_step of "
                    f"iteration {iteration}; the trace ends with iteration {iterations})"
                )
                break
        policy = self.sc.trainer.pending_at_end
        if policy == "flush" and "stopped" not in header and self.hook.held:
            # The user's flush: the episodes still held go to the buffer, unannotated.
            seen_adds = len(self.buffer.added)
            episodes = sorted(
                self.hook.held.values(), key=lambda ep: decode_item(ep.get_observations(0))
            )
            self.hook.held.clear()
            self.buffer.add(episodes)
            for steps in self.buffer.added[seen_adds:]:
                self.events.append(store(iterations, steps))
                self.stored += len(steps)
            pending = []
        self.events.append(run_end(iterations, self.env_steps, policy, pending))
        return Trace(tuple(self.events), header)

    def _iteration_counter(self) -> int:
        """``Algorithm.iteration``: ``Trainable.train`` increments it after
        ``Algorithm.step``, so the ``k``-th ``train()`` runs with ``k - 1``."""
        return int(self.algo.iteration)

    def _iteration(self, iteration: int) -> None:
        """One ``Algorithm.train()`` call and what RLlib did in it, the updates and hooks in
        the order RLlib called them. The counter of the iteration's start and of its train
        call is read before ``train()``: neither ``Algorithm.iteration`` nor the learner's
        update count changes before ``training_step``'s first ``Learner.update``."""
        self._started = len(self.events)
        u = int(self.sc.trainer.unroll_length)
        counter = self.learner.read_counter()
        self.events.append(IterationStart(iteration, counter, u))
        seen_adds, seen_log = len(self.buffer.added), len(self.learner.log)
        seen_excluded, seen_holds = len(self.hook.excluded), len(self.hook.holds)
        self.algo.train()
        self._env_steps(iteration)
        for items in self.hook.holds[seen_holds:]:
            if items:
                self.events.append(hold(iteration, items))
        for steps in self.buffer.added[seen_adds:]:
            if steps:
                self.events.append(store(iteration, steps))
                self.stored += len(steps)
        for reason, items in self.hook.excluded[seen_excluded:]:
            if items:
                self.events.append(exclude(iteration, items, reason))
        called = self.learner.log[seen_log:]
        trained = any(c.name == "update" for c in called)
        status: Literal["trained", "warmup"] = "trained" if trained else "warmup"
        self.events.append(TrainCall(iteration, self.calls, counter, status, self.stored))
        index = 0
        for c in called:
            if c.name == "after_update" or c.name == "after_train_iter":
                self.events.append(Hook(iteration, c.name))
                continue
            self.events.append(
                Update(iteration, self.calls, index, c.counter, c.windows, c.loss_mask)
            )
            index += 1
        self.calls += 1
        end = self.learner.read_counter()
        self.events.append(IterationEnd(iteration, end, self.env_steps, self.stored, 0))

    def _env_steps(self, iteration: int) -> None:
        """The vector steps of this ``train()`` call: every env's stream (the chunks the local
        env runner returned, glued by ``id_``, read in ``on_sample_end`` before any
        preprocessing) plus the reset observation the runner still holds unreturned (a new
        episode is returned only once it has a transition) grows by the same count."""
        for chunk_steps, continued, id_ in self.recorder.take():
            if id_ in self.open:
                env, newest = self.open[id_]
                self.env_stream[env][newest] = _with_action(
                    self.env_stream[env][newest], chunk_steps[0]
                )
            if continued:
                chunk_steps = chunk_steps[1:]
            else:
                env = chunk_steps[0].item[0]
            self.env_stream[env].extend(chunk_steps)
            self.open[id_] = (env, len(self.env_stream[env]) - 1)
        lengths = set()
        for env, episode in enumerate(self.algo.env_runner._ongoing_episodes):
            held = (
                len(episode.get_observations())
                if episode.t_started == 0 and episode.is_reset
                else 0
            )
            unreturned = 1 if held == 1 and len(episode) == 0 else 0
            lengths.add(len(self.env_stream[env]) + unreturned)
        if len(lengths) != 1:
            raise RuntimeError(f"envs hold streams of different lengths: {sorted(lengths)}")
        (length,) = lengths
        done = length - 1
        rows = [
            [self.env_stream[e][n] for e in range(self.sc.env.num_envs)]
            for n in range(self.vector_steps, done)
        ]
        self.events.extend(env_step(iteration, self.states.with_states(column)) for column in rows)
        self.env_steps += len(rows) * self.sc.env.num_envs
        self.vector_steps = done
