"""Checkpoint and resume of an AgileRL 2.58.0 ``train_off_policy`` run of a ``DQN`` agent
(clauses ``resume.*``), through AgileRL's own save and load API, as a user resumes a run:

- the first ``train_off_policy`` call runs the vector steps through the end of iteration ``k``
  (``max_steps = evo_steps`` of ``(k - 1) * v + 1`` vector steps, ``v = learn_step // B`` when
  ``learn_step > B``, else 1: the loop evaluates its learn condition after vector steps
  ``1, v + 1, ...``, and an iteration ends at each evaluation,
  :mod:`xpspec.adapters.agilerl_trainer`);
- ``agent.save_checkpoint(path)`` (``torch.save`` of the agent's attributes, its step count
  among them, and its networks' and optimizer's state dicts, ``algorithms/core/base.py``)
  writes a file; AgileRL has no save API for a ``ReplayBuffer`` (``components/replay_buffer.py``),
  so nothing of the memory is saved. The agent and the memory are dropped;
- a new ``DQN`` of the same configuration loads the file with ``load_checkpoint(path)``
  (documented as restoring the full training state to resume a run), and a new memory of the
  same class is built;
- the second ``train_off_policy`` call, over the same vector env (the env is the world and goes
  on), runs the rest: ``max_steps`` the run's budget, ``evo_steps`` the env steps left (the loop
  runs while the agent's restored step count is below ``max_steps``, one chunk of
  ``evo_steps``).

The ``resume`` event lists the items the memory's storage holds before the save and after the
load, per env in env order, oldest first (:func:`held_items`). The adapter's recording goes on;
its naming of stored rows restarts with the new memory, whose rows follow no earlier row.
``corrupt``, when given, rewrites the saved bytes before they are loaded (the perturbation that
shows the restored run depends on them alone).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable

import numpy as np
import torch
from agilerl.components.replay_buffer import ReplayBuffer

from xpspec.adapters.agilerl_rows import StoredRows, as_numpy
from xpspec.adapters.agilerl_trainer import LoopConfig, _Run, loop_config
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Event, Item, IterationEnd, Resume, Trace

__all__ = ["CheckpointedRun", "held_items", "run_checkpointed"]


def held_items(memory: ReplayBuffer, num_envs: int) -> tuple[Item, ...]:
    """The items a ``ReplayBuffer`` holds, read from its storage's ``obs``: per env in env
    order, oldest first (ring positions from the cursor on once full; ``add`` writes ``B`` rows
    in env order, so position ``i`` is env ``i mod B``)."""
    storage = memory.storage
    size = len(memory)
    if storage is None or size == 0:
        return ()
    start = memory._cursor if size == memory.max_size else 0
    order = (start + np.arange(size)) % memory.max_size
    items = decode_items(as_numpy(storage["obs"][torch.as_tensor(order)]))
    return tuple(item for e in range(num_envs) for item in items if item[0] == e)


class CheckpointedRun(_Run):
    """A :class:`~xpspec.adapters.agilerl_trainer._Run` saved after iteration
    ``checkpoint.after_iteration`` and resumed with a loaded agent and a new memory."""

    def __init__(
        self,
        scenario: TrainerScenario,
        config: LoopConfig,
        corrupt: Callable[[bytes], bytes] | None = None,
    ) -> None:
        super().__init__(scenario, config)
        self.corrupt = corrupt
        self.resume: Resume | None = None

    def run(self) -> Trace:
        trace = super().run()
        if self.resume is None:
            return trace
        return Trace(tuple(_with_resume(list(trace.events), self.resume)), trace.header)

    def _train(self, c: LoopConfig) -> None:
        spec = self.scenario.checkpoint
        assert spec is not None
        b = self.scenario.env.num_envs
        every = c.learn_step // b if c.learn_step > b else 1
        first = ((spec.after_iteration - 1) * every + 1) * b
        if first >= c.max_steps:  # the run ends before iteration k + 1: nothing to resume
            self._loop(c.max_steps, c.max_steps)
            return
        self._loop(first, first)
        saved = held_items(self.memory, b)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "agent.pt")
            self._save(path)
            self._load(path)
        self.resume = Resume(spec.after_iteration, saved, held_items(self.memory, b))
        self.env.recording = True
        self._loop(c.max_steps, c.max_steps - first)

    def _save(self, path: str) -> None:
        """The agent as a file through ``save_checkpoint`` (the adapter's patch removed first,
        so no adapter object is saved with it); the agent and the memory are dropped."""
        del self.agent.finalize_training_step  # the instance patch of _Run._wrap
        with contextlib.redirect_stdout(io.StringIO()):
            self.agent.save_checkpoint(path)
        if self.corrupt is not None:
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(self.corrupt(data))
        del self.agent, self.memory

    def _load(self, path: str) -> None:
        """A new DQN loading the file, a new memory, both recorded as the first ones were."""
        self.agent = self._new_agent()
        self.agent.load_checkpoint(path)
        self.memory = self._new_memory()
        self.rows = StoredRows()
        self._wrap()


def run_checkpointed(
    scenario: TrainerScenario, corrupt: Callable[[bytes], bytes] | None = None
) -> Trace:
    """One ``train_off_policy`` run saved and resumed (see the module docstring)."""
    config = loop_config(scenario)
    with seeded_quiet(scenario.seed, ["torch", "numpy", "random"]):
        return CheckpointedRun(scenario, config, corrupt).run()


def _with_resume(events: list[Event], resume: Resume) -> list[Event]:
    """``events`` with ``resume`` right after the end of its iteration."""
    at = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, IterationEnd) and e.iteration == resume.iteration
    )
    return [*events[: at + 1], resume, *events[at + 1 :]]
