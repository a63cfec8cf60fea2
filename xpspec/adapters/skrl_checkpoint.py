"""Checkpoint and resume of a skrl 2.1.1 ``DQN`` run under ``SequentialTrainer`` (clauses
``resume.*``), through skrl's own save and load API, as a user resumes a run:

- the first ``SequentialTrainer`` runs the timesteps through the end of iteration ``k``
  (``(k - 1) * update_interval + 1``: skrl's iterations end at the timesteps
  ``update_interval`` admits, counted from 0; :mod:`xpspec.adapters.skrl_trainer`);
- ``Agent.save(path)`` (``torch.save`` of the state dicts of the agent's
  ``checkpoint_modules``: DQN's ``q_network``, ``target_q_network`` and ``optimizer``,
  ``agents/torch/base.py:Agent.save``) and ``Memory.save(directory)`` (``torch.save`` of the
  memory's tensors by name, ``memories/torch/base.py:Memory.save``) write files; the wrapper,
  the memory and the agent are dropped;
- a new ``GymnasiumWrapper`` over the same Gymnasium vector env (the env is the world and goes
  on), a new ``RandomMemory`` and ``DQN`` of the same configuration, and a new
  ``SequentialTrainer`` for the remaining timesteps (its ``__init__`` calls ``DQN.init``,
  which creates the memory's tensors); then ``Agent.load(path)`` and ``Memory.load(path)``
  read the files back into them;
- ``train()`` runs the rest. skrl's trainer has no starting timestep: the new trainer counts
  its timesteps from 0 (``trainers/torch/base.py:Trainer.train``), and ``DQN`` reads them for
  ``learning_starts`` and ``update_interval``.

The ``resume`` event lists the items the memory's ``observations`` tensor holds before the
save and after the load, per env, oldest first (from ``memory_index`` once ``filled``); a row
is held when its observation is not NaN (``Memory.create_tensor`` fills a float tensor with
NaN). The adapter's own recording (the time step each env is in, its naming of stored rows)
is no part of the trainer and goes on; the new wrapper's first reset, which resets the vector
env (``envs/wrappers/torch/gymnasium_envs.py:GymnasiumWrapper.reset``), is recorded as the
first time steps it returned.
"""

from __future__ import annotations

import glob
import os
import tempfile
from typing import Any

import numpy as np

from xpspec.adapters.skrl_trainer import STATELESS, _Run, headless_trainer
from xpspec.kit.items import decode_items
from xpspec.kit.release import producer
from xpspec.protocol.trace import Event, Item, IterationEnd, Resume, Trace

__all__ = ["CheckpointedRun", "held_items"]


def held_items(memory: Any) -> tuple[Item, ...]:
    """The items a skrl memory holds, read from its ``observations`` tensor: per env in env
    order, oldest first (rows ``memory_index … memory_size - 1`` then ``0 … memory_index - 1``
    once ``filled``), the rows whose observation is not NaN."""
    observations = memory.get_tensor_by_name("observations").detach().cpu().numpy()
    size, at = memory.memory_size, memory.memory_index
    rows = [*range(at, size), *range(at)] if memory.filled else list(range(size))
    items: list[Item] = []
    for e in range(memory.num_envs):
        column = np.stack([observations[row, e] for row in rows]) if rows else observations[:0, e]
        kept = column[~np.isnan(column).any(axis=1)]
        items.extend(decode_items(kept))
    return tuple(items)


class CheckpointedRun(_Run):
    """A :class:`~xpspec.adapters.skrl_trainer._Run` saved after iteration
    ``checkpoint.after_iteration`` and resumed in objects loaded from the saved files."""

    def run(self) -> Trace:
        spec = self.scenario.checkpoint
        assert spec is not None
        first = (spec.after_iteration - 1) * self.plan.update_interval + 1
        rest = self.plan.timesteps - first
        header: dict[str, Any] = {"producer": producer("skrl"), "stateless": STATELESS}
        going = self.train(headless_trainer(self.env, self.agent, first), header)
        resume: Resume | None = None
        if going:
            saved = held_items(self.memory)
            with tempfile.TemporaryDirectory() as directory:
                agent_path, memory_path = self._save(directory)
                trainer = self._load(agent_path, memory_path, rest)
            resume = Resume(spec.after_iteration, saved, held_items(self.memory))
            self.train(trainer, header)
        events = self._events(stopped="stopped" in header)
        if resume is not None:
            events = _with_resume(events, resume)
        return Trace(tuple(events), header)

    def _save(self, directory: str) -> tuple[str, str]:
        """The agent and its memory as files, through ``Agent.save`` and ``Memory.save``;
        the wrapper, the memory and the agent are dropped afterwards."""
        agent_path = os.path.join(directory, "agent.pt")
        self.agent.save(agent_path)
        self.memory.save(directory, format="pt")
        (memory_path,) = glob.glob(os.path.join(directory, "memories", "*.pt"))
        del self.agent, self.memory, self.env
        return agent_path, memory_path

    def _load(self, agent_path: str, memory_path: str, timesteps: int) -> Any:
        """New skrl objects over the same vector env, a trainer of ``timesteps`` for them
        (which initialises the agent and its memory's tensors), then the files loaded into
        the agent and the memory."""
        self._build()
        self.renamed_at_reset = True
        trainer = headless_trainer(self.env, self.agent, timesteps)
        self.agent.load(agent_path)
        self.memory.load(memory_path)
        return trainer


def _with_resume(events: list[Event], resume: Resume) -> list[Event]:
    """``events`` with ``resume`` right after the end of its iteration."""
    at = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, IterationEnd) and e.iteration == resume.iteration
    )
    return [*events[: at + 1], resume, *events[at + 1 :]]
