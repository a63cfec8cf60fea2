"""Checkpoint and resume of a Tianshou 2.0.1 ``OffPolicyTrainer`` run (clauses ``resume.*``),
through Tianshou's own resume path, as its resume tests write it (``test/discrete/test_c51.py``,
``test_c51_resume``: a ``save_checkpoint_fn`` that saves the algorithm's state dict with
``torch.save`` and pickles the collector's buffer, a ``TensorboardLogger`` with ``save_interval``, and
``resume_from_log=True`` in the resumed trainer's parameters):

- the trainer is built as :class:`xpspec.adapters.tianshou._TrainerRun` builds it, with epochs
  of one training step (one iteration): Tianshou resumes at epoch granularity (the logger
  records ``save/epoch``, ``save/env_step`` and ``save/gradient_step`` when an epoch ends,
  ``utils/logger/tensorboard.py:TensorboardLogger.save_data``, and ``Trainer.reset`` restores
  the three counters from it, ``trainer.py``), so the checkpoint after iteration ``k`` is the
  save at the end of epoch ``k``;
- ``TrainerParams.save_checkpoint_fn`` writes the algorithm's ``state_dict`` with
  ``torch.save`` and pickles the replay buffer (its sub-buffers, write heads and
  ``RandomState`` streams) to files, after every epoch; the logger is a
  ``TensorboardLogger(SummaryWriter(dir), save_interval=1)``;
- the run is stopped at the start of training step ``k + 1`` (before it collects anything), as
  a pre-empted job stops between epochs; the resumed job seeds numpy's global stream again as
  a new process's script does (the buffers' draws come from their own pickled
  ``RandomState`` streams);
- every Tianshou object is dropped (trainer, collector, algorithm, policy, buffer, logger, the
  ``DummyVectorEnv``); a new ``DummyVectorEnv`` over the same gymnasium envs (the env is the
  world and goes on), the buffer unpickled, a new policy, algorithm (``load_state_dict`` of
  the saved state), collector, logger over the same log directory and trainer with
  ``resume_from_log=True`` are built, and ``trainer.run()`` runs the rest: its ``reset``
  restores epoch ``k``, the env-step and the update-step counters, and resets the new
  collector (``reset_collectors=True``, the default: a new ``Collector`` refuses to collect
  before a reset, ``data/collector.py:Collector._collect``).

The ``resume`` event lists the items the buffer holds before the save and after the load
(:func:`held_items`). The adapter's own recording (its events, its counts of calls and stored
rows, the rows it named) is no part of the trainer and goes on.
"""

from __future__ import annotations

import functools
import pathlib
import pickle
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from tianshou.env import DummyVectorEnv
from tianshou.utils import TensorboardLogger
from torch.utils.tensorboard import SummaryWriter

from xpspec.adapters.tianshou import _items, _TrainerPlan, _TrainerRun, _unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Item, Resume, Trace

__all__ = ["CheckpointedRun", "held_items", "run_checkpointed"]

_PATCHES = ("add", "store_rows", "drop")
"""The adapter's recording seams on a buffer instance (:func:`_record_stores`), left out of
what is pickled."""


class _Pause(Exception):
    """Stops ``trainer.run()`` at the start of the training step after the checkpoint."""


def held_items(buffer: Any) -> tuple[Item, ...]:
    """The items a Tianshou ``ReplayBufferManager`` (``VectorReplayBuffer``,
    ``CachedReplayBuffer``) holds, read from its ``obs``: per env in env order, oldest first.
    Each sub-buffer is a ring (``len`` rows, the newest at ``last_index``); a sub-buffer that
    holds several envs' rows (a cached buffer's main buffer, filled before the caches) is read
    in its own order and split by env."""
    indices: list[int] = []
    edges = buffer.subbuffer_edges
    for sub, offset in zip(buffer.buffers, edges[:-1]):
        size, newest = len(sub), int(sub.last_index[0])
        first = (newest + 1) % sub.maxsize if size == sub.maxsize else 0
        indices.extend(int(offset) + (first + i) % sub.maxsize for i in range(size))
    if not indices:
        return ()
    obs = buffer.get(np.asarray(indices), "obs", stack_num=1)
    per_env: dict[int, list[Item]] = {}
    for item in _items(obs):
        per_env.setdefault(item[0], []).append(item)
    return tuple(item for env in sorted(per_env) for item in per_env[env])


@contextmanager
def _unpatched(buffer: Any) -> Iterator[None]:
    """``buffer`` without the adapter's recording seams, restored afterwards: what Tianshou's
    pickle of it sees is the buffer a user's run holds."""
    saved = {name: buffer.__dict__.pop(name) for name in _PATCHES if name in buffer.__dict__}
    try:
        yield
    finally:
        buffer.__dict__.update(saved)


class CheckpointedRun(_TrainerRun):
    """A :class:`~xpspec.adapters.tianshou._TrainerRun` saved after iteration
    ``checkpoint.after_iteration`` and resumed in Tianshou objects built anew (see the module
    docstring). ``root``: the directory the checkpoint files and the log go to."""

    def __init__(self, sc: TrainerScenario, plan: _TrainerPlan, root: pathlib.Path) -> None:
        self.root = root
        self.resuming = False
        self.pause_at: int | None = None
        self.writer: SummaryWriter | None = None
        super().__init__(sc, plan)

    @property
    def model_file(self) -> pathlib.Path:
        return self.root / "checkpoint.pth"

    @property
    def buffer_file(self) -> pathlib.Path:
        return self.root / "train_buffer.pkl"

    def _trainer_params(self) -> dict[str, Any]:
        self.writer = SummaryWriter(str(self.root / "log"))
        return {
            "logger": TensorboardLogger(self.writer, save_interval=1),
            "save_checkpoint_fn": self._save,
            "resume_from_log": self.resuming,
        }

    def build(self, envs: DummyVectorEnv, buffer: Any) -> None:
        super().build(envs, buffer)
        training_step = self.trainer._training_step

        def paused_training_step() -> Any:
            if self.pause_at is not None and self.iteration == self.pause_at:
                raise _Pause
            return training_step()

        self.trainer._training_step = paused_training_step

    def _save(self, epoch: int, env_step: int, gradient_step: int) -> str:
        """Tianshou's ``save_checkpoint_fn``: the algorithm's state dict and the pickled buffer,
        to files; the path of the checkpoint."""
        torch.save(self.algorithm.state_dict(), self.model_file)
        with _unpatched(self.buffer), self.buffer_file.open("wb") as f:
            pickle.dump(self.buffer, f)
        return str(self.model_file)

    def resumed(self) -> Trace:
        """The run to the checkpoint, the save, the restore into new objects and the rest."""
        spec = self.sc.checkpoint
        if spec is None:
            raise ValueError("CheckpointedRun: the scenario has no checkpoint spec")
        self.pause_at = spec.after_iteration
        try:
            stopped = self.train()
        except _Pause:
            pass
        else:
            if stopped is not None:
                raise _unsupported(
                    f"the run ended in iteration {self.iteration}, before the checkpoint after "
                    f"iteration {spec.after_iteration} ({stopped}): there is no running trainer "
                    "to save",
                    "trainer.py",
                )
            raise RuntimeError(
                f"trainer.run() ended after iteration {self.iteration}, expected it to stop "
                f"at the start of iteration {spec.after_iteration + 1}"
            )
        self.pause_at = None
        saved = held_items(self.buffer)
        stepper, envs = self.stepper, [worker.env for worker in self.envs.workers]
        assert self.writer is not None
        self.writer.close()
        # nothing of the first trainer but its files goes on
        del self.trainer, self.collector, self.algorithm, self.policy, self.buffer, self.envs
        self.writer = None
        with self.buffer_file.open("rb") as f:
            buffer = pickle.load(f)  # the user's own file, written by _save
        # A resumed job is a new process: its script seeds numpy's global stream again (as the
        # adapter's run does at its start), nothing of the saved run's stream goes on.
        np.random.seed(self.sc.seed)
        self.resuming = True
        self.build(DummyVectorEnv([functools.partial(_itself, env) for env in envs]), buffer)
        self.stepper.current, self.stepper.previous = stepper.current, stepper.previous
        self.stepper.rows = stepper.rows
        del stepper  # the adapter's record of the env goes on, the wrapped old vector env not
        self.algorithm.load_state_dict(torch.load(self.model_file))
        self.events.append(Resume(spec.after_iteration, saved, held_items(self.buffer)))
        try:
            return self.run()
        finally:
            assert self.writer is not None
            self.writer.close()


def _itself(env: Any) -> Any:
    return env


def run_checkpointed(sc: TrainerScenario, plan: _TrainerPlan) -> Trace:
    """``sc`` saved after ``sc.checkpoint.after_iteration`` and resumed (see the module
    docstring), its files in a temporary directory."""
    with tempfile.TemporaryDirectory() as root:
        return CheckpointedRun(sc, plan, pathlib.Path(root)).resumed()
