"""Checkpoint and resume of a d3rlpy 2.8.0 ``fit_online`` run (clauses ``resume.*``), through
d3rlpy's own save and load API, as a user resumes a pre-empted job:

- the run is stopped after the loop step that ends iteration ``k`` (``fit_online``'s
  ``callback`` raises), as a pre-empted job stops between iterations: ``fit_online`` never
  reaches its closing ``clip_episode(False)``;
- the job writes three files: ``algo.save(path)`` (the config and the networks' and
  optimizers' state, ``base.py:LearnableBase.save``, ``dump_learnable``), the replay buffer's
  ``dump`` (its ``BufferProtocol``'s episodes as HDF5, ``dataset/replay_buffer.py:dump``,
  ``dataset/io.py:dump``) and the user's own record of ``algo.grad_step``, which ``save``
  does not keep and which ``set_grad_step`` is documented to take back "to restart the
  middle of training" (``base.py:LearnableBase.set_grad_step``). An empty buffer is not
  dumped: ``dataset/io.py:dump`` reads ``episodes[0]`` and raises ``IndexError`` on none; the
  resumed job then builds an empty ``ReplayBuffer`` as the first one did;
- every d3rlpy object is dropped (algorithm, replay buffer, the user's ``BufferProtocol``);
  the resumed job seeds d3rlpy again (``d3rlpy.seed``, as a new process's script does),
  builds the algorithm with ``d3rlpy.load_learnable``, calls ``set_grad_step`` with the
  recorded count, and rebuilds the buffer from the dump: ``ReplayBuffer.load(f, buffer)``,
  which is ``ReplayBuffer(buffer, episodes=load(Episode, f))`` (for episode-delayed storage
  the user's ``OutcomeReplayBuffer`` is built the same way, since ``load`` takes no
  ``write_at_termination``); the constructor re-appends every transition of the dumped
  episodes to the new ``BufferProtocol`` (``ReplayBuffer.append_episode``), which the adapter
  does not record as stores: they are the restore, and the ``resume`` event lists them;
- ``fit_online`` is called again with the same arguments and the loop steps still to run
  (``n_steps - k * update_interval``): it takes no start step, so its ``total_step`` counts
  from 1 again and it resets the env (``algos/qlearning/base.py:fit_online``).

The ``resume`` event lists the entries the ``FIFOBuffer`` holds before the save and after the
load (:func:`held_items`). The env is the world and goes on (the same ``ToyEnv``); the
adapter's own recording (its events and counts) is no part of the trainer and goes on.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from typing import Any

import d3rlpy
import numpy as np
from d3rlpy.dataset import Episode, ReplayBuffer, load

from xpspec.adapters.d3rlpy import _TrainerRun
from xpspec.kit.items import decode_item
from xpspec.protocol.trace import Item, Resume

__all__ = ["CheckpointedRun", "held_items"]


class _Pause(Exception):
    """Stops ``fit_online`` after the loop step that ends the checkpoint's iteration."""


def held_items(buffer: ReplayBuffer) -> tuple[Item, ...]:
    """The entries a ``ReplayBuffer``'s ``FIFOBuffer`` holds, oldest first, each named by its
    episode's observation (``dataset/buffers.py:FIFOBuffer.__getitem__``)."""
    fifo: Any = buffer.buffer  # a FIFOBuffer, which BufferProtocol does not promise
    entries = (fifo[j] for j in range(len(fifo)))
    return tuple(decode_item(np.asarray(ep.observations[i])) for ep, i in entries)


class CheckpointedRun(_TrainerRun):
    """A :class:`~xpspec.adapters.d3rlpy._TrainerRun` saved after iteration
    ``checkpoint.after_iteration`` and resumed in d3rlpy objects loaded from the saved files
    (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.pause_at: int | None = None
        self.offset = 0  # loop steps of the first fit_online call, once it has stopped
        super().__init__(*args, **kwargs)

    def _on_step_end(self, algo: Any, epoch: int, total_step: int) -> None:
        step = total_step + self.offset
        super()._on_step_end(algo, epoch, step)
        if self.pause_at is not None and step == self.pause_at * self.config.update_interval:
            raise _Pause

    def _fit_online(self, n_steps: int | None = None) -> None:
        spec = self.scenario.checkpoint
        assert spec is not None
        k, c = spec.after_iteration, self.config
        self.pause_at = k
        try:
            super()._fit_online()
        except _Pause:
            pass
        else:
            raise RuntimeError(f"fit_online ended before iteration {k} ended")
        self.pause_at = None
        saved = held_items(self.buffer)
        with tempfile.TemporaryDirectory() as root:
            self._save(pathlib.Path(root))
            self._load(pathlib.Path(root))
        self.events.append(Resume(k, saved, held_items(self.buffer)))
        self.offset = k * c.update_interval
        super()._fit_online(c.n_steps - self.offset)

    def _save(self, root: pathlib.Path) -> None:
        """The job's files: the algorithm, the buffer's dump (unless empty) and the recorded
        ``grad_step``; the d3rlpy objects are dropped afterwards."""
        self.algo.save(str(root / "algo.d3"))
        if self.buffer.transition_count:
            with (root / "buffer.h5").open("w+b") as f:
                self.buffer.dump(f)
        (root / "progress.json").write_text(json.dumps({"grad_step": self.algo.grad_step}))
        del self.algo, self.buffer

    def _load(self, root: pathlib.Path) -> None:
        """A new algorithm and buffer from the job's files (see the module docstring)."""
        d3rlpy.seed(self.scenario.seed)
        algo = d3rlpy.load_learnable(str(root / "algo.d3"), device="cpu:0")
        algo.set_grad_step(int(json.loads((root / "progress.json").read_text())["grad_step"]))
        self.algo = algo
        fifo = self._new_fifo()
        dump = root / "buffer.h5"
        if not dump.exists():
            self._replay_buffer(self._recording(fifo), env=self.env)
            return
        with dump.open("rb") as f:
            if self.delayed:
                # ReplayBuffer.load(f, buffer) is ReplayBuffer(buffer, episodes=load(Episode,
                # f)) and takes no write_at_termination: the user's subclass is built alike
                self._replay_buffer(fifo, episodes=load(Episode, f))
            else:
                self._install(ReplayBuffer.load(f, fifo, writer_preprocessor=self._writer()))
        # the load re-appended the dumped transitions to the user's fresh buffer: the restore,
        # not stores; its keep and drop are recorded from here on
        self._recording(fifo)
