"""Checkpoint and resume of RLlib 2.60.0's DQN ``Algorithm.train`` run (clauses ``resume.*``),
through RLlib's own checkpoint API, as a user resumes a run on the new API stack. Sources are
cited as ``file:function`` under ``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

- the algorithm is built and trained as :mod:`xpspec.adapters.rllib_trainer` does, through
  the ``Algorithm.train()`` call of iteration ``k``;
- ``Algorithm.save_to_path(directory)`` writes the algorithm's state
  (``utils/checkpoints.py:Checkpointable.save_to_path``): its class and config (the
  constructor arguments, ``Algorithm.get_ctor_args_and_kwargs``), the learner group (module
  weights, optimizer, the learner's ``WEIGHTS_SEQ_NO``), the local env runner (its connectors
  and ``NUM_ENV_STEPS_SAMPLED_LIFETIME``), the metrics logger (the lifetime counters DQN's
  warm-up gate and target updates read) and ``training_iteration``
  (``algorithms/algorithm.py:Algorithm.get_state``). It holds no replay buffer on the new API
  stack: DQN's ``store_buffer_in_checkpoints`` is read only by the old stack's
  ``Algorithm.__getstate__`` (``algorithms/algorithm.py``; an RLlib-alone reproduction is in
  ``tests/adapters/test_rllib_findings.py``). RLlib documents no file for a buffer on the new
  stack; ``EpisodeReplayBuffer.get_state`` is documented for checkpointing the buffer ("The
  buffer's state can be saved to disk and reloaded when the trial is resumed",
  ``utils/replay_buffers/episode_replay_buffer.py``) and the old stack pickles that state into
  its checkpoint (``Algorithm.__getstate__``), so the user pickles ``get_state()`` to a file
  beside the checkpoint, with the episodes the user's ``on_sample_end`` hook holds
  (``SingleAgentEpisode.get_state``: the hook is the user's code, which RLlib's checkpoint does
  not cover);
- the algorithm is stopped (``Algorithm.stop``) and every RLlib object dropped; the env creator
  is registered again over the same toy envs (the env is the world and goes on: RLlib's env
  runner builds its env from the registered creator, ``env/single_agent_env_runner.py:
  make_env``); ``Algorithm.from_checkpoint(directory)`` builds a new algorithm from the saved
  class and config and restores its state; ``local_replay_buffer.set_state`` reads the
  buffer back and the hook's held episodes are rebuilt with ``SingleAgentEpisode.from_state``;
  the resumed job seeds torch's and numpy's global streams again, as a new process's script
  does (RLlib saves neither, nor the buffer's generator);
- ``Algorithm.train()`` runs the remaining iterations.

The Ray instance is the runtime, not the trainer: it stays up across the checkpoint. The
``resume`` event lists the items the buffer's stored episodes hold before the save and after
the restore (:func:`held_items`). The adapter's own recording (its events and counts, each
env's time steps so far) is no part of the trainer and goes on; the time steps after the
resume are read from the restored env runner's chunks.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import pickle
import tempfile
import uuid
import warnings
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    import ray
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.tune.registry import register_env

from xpspec.adapters.rllib import _seeded, _steps, _ToyVectorEnv
from xpspec.adapters.rllib_trainer import (
    _ENV_NAME,
    _config,
    _Run,
    _SampleHook,
    _SampleRecorder,
    _support,
)
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Item, Resume, Trace

__all__ = ["CheckpointedRun", "WorldEnv", "held_items", "run_checkpointed"]

_BUFFER_FILE = "replay_buffer.pkl"
_HOOK_FILE = "sample_hook.pkl"


def held_items(buffer: Any) -> tuple[Item, ...]:
    """The items an RLlib ``EpisodeReplayBuffer`` holds, read from its stored episodes'
    observations (the final observation included): per env in env order, each env's episodes
    in the buffer's order (oldest first, ``buffer.episodes``)."""
    per_env: dict[int, list[Item]] = {}
    for episode in buffer.episodes:
        for step in _steps(episode):
            per_env.setdefault(step.item[0], []).append(step.item)
    return tuple(item for env in sorted(per_env) for item in per_env[env])


@dataclasses.dataclass(frozen=True)
class WorldEnv:
    """RLlib's env creator over the world's toy envs: the first call builds them (as
    :class:`~xpspec.adapters.rllib._ToyVectorEnv` does), later calls (the restored algorithm's
    env runner) return a new ``SyncVectorEnv`` over the same env objects, which go on where
    they stood. RLlib pickles a creator into its registry (``tune/registry.py``), so the envs
    are kept in this module, under ``key``."""

    factory: _ToyVectorEnv
    key: str
    worlds: ClassVar[dict[str, list[Any]]] = {}

    def __call__(self, config: Any) -> gymnasium.vector.SyncVectorEnv:
        envs = WorldEnv.worlds.get(self.key)
        if envs is None:
            vector = self.factory(config)
            WorldEnv.worlds[self.key] = list(vector.envs)
            return vector
        return gymnasium.vector.SyncVectorEnv([functools.partial(_same, env) for env in envs])


def _same(env: Any) -> Any:
    """An env constructor that hands back an env that already exists."""
    return env


def run_checkpointed(sc: TrainerScenario) -> Trace:
    """:func:`xpspec.adapters.rllib_trainer.run_trainer` saved after iteration
    ``checkpoint.after_iteration`` and resumed in an algorithm restored from the files."""
    u = _support(sc)
    hook = _SampleHook(sc.preprocess)
    recorder = _SampleRecorder()
    world = WorldEnv(_ToyVectorEnv(sc.env, sc.seed), uuid.uuid4().hex)
    with _seeded(sc.seed):
        ray.init(
            num_cpus=1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        run: CheckpointedRun | None = None
        try:
            register_env(_ENV_NAME, world)
            algo = _config(sc, u, hook, recorder).build_algo()
            run = CheckpointedRun(sc, algo, *_callbacks(algo, hook, recorder))
            return run.run()
        finally:
            if run is not None and hasattr(run, "algo"):
                run.algo.stop()
            WorldEnv.worlds.pop(world.key, None)
            ray.shutdown()


def _callbacks(
    algo: Any, hook: _SampleHook, recorder: _SampleRecorder
) -> tuple[_SampleHook, _SampleRecorder]:
    """The ``on_sample_end`` callback objects the env runner calls (its config is a copy)."""
    called = list(algo.env_runner.config.callbacks_on_sample_end)
    recorder = next(c for c in called if isinstance(c, _SampleRecorder))
    hook = next((c for c in called if isinstance(c, _SampleHook)), hook)
    return hook, recorder


class CheckpointedRun(_Run):
    """A :class:`~xpspec.adapters.rllib_trainer._Run` saved after iteration
    ``checkpoint.after_iteration`` and resumed in an algorithm restored from files."""

    def _iteration(self, iteration: int) -> None:
        spec = self.sc.checkpoint
        assert spec is not None
        if iteration == spec.after_iteration + 1:
            saved = held_items(self.buffer)
            with tempfile.TemporaryDirectory() as directory:
                path = pathlib.Path(directory)
                self._save(path)
                self._restore(path)
            self.events.append(Resume(spec.after_iteration, saved, held_items(self.buffer)))
        super()._iteration(iteration)

    def _save(self, path: pathlib.Path) -> None:
        """The algorithm through ``save_to_path``, the buffer's and the hook's state pickled
        beside it; the algorithm is stopped and dropped afterwards."""
        # The adapter's recording callback writes into the learner's log: the config saved
        # with the algorithm gets a callback with an empty one.
        (train_result,) = self.algo.config.callbacks_on_train_result
        train_result.log = []
        self.algo.save_to_path(str(path / "algorithm"))
        with open(path / _BUFFER_FILE, "wb") as f:
            pickle.dump(self.buffer.get_state(), f)
        held = {id_: episode.get_state() for id_, episode in self.hook.held.items()}
        with open(path / _HOOK_FILE, "wb") as f:
            pickle.dump(held, f)
        self.algo.stop()
        del self.algo, self.buffer, self.learner, self.hook, self.recorder

    def _restore(self, path: pathlib.Path) -> None:
        """A new algorithm from the files (``Algorithm.from_checkpoint``), its buffer and the
        user's hook set from theirs; the recording moves to the new objects."""
        # A resumed job is a new process: its script seeds the global streams again.
        np.random.seed(self.sc.seed)
        torch.manual_seed(self.sc.seed)
        algo = Algorithm.from_checkpoint(str(path / "algorithm"))
        with open(path / _BUFFER_FILE, "rb") as f:
            algo.local_replay_buffer.set_state(pickle.load(f))
        hook, recorder = _callbacks(algo, _SampleHook(self.sc.preprocess), _SampleRecorder())
        with open(path / _HOOK_FILE, "rb") as f:
            held = pickle.load(f)
        hook.held = {id_: SingleAgentEpisode.from_state(state) for id_, state in held.items()}
        old_events, stream, stored = self.events, self.env_stream, self.stored
        env_steps, calls, vector_steps = self.env_steps, self.calls, self.vector_steps
        super().__init__(self.sc, algo, hook, recorder)
        self.events, self.stored, self.env_steps = old_events, stored, env_steps
        self.calls, self.vector_steps = calls, vector_steps
        # Each env's time steps so far are the adapter's record; the restored env runner
        # starts from what its env returns next (the time step the saved one held unacted,
        # if any, is RLlib's to keep; its chunks name it again if it does).
        self.env_stream = {env: steps[:vector_steps] for env, steps in stream.items()}
