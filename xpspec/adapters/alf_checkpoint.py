"""Checkpoint and resume of an ALF ``RLTrainer`` run (snapshot ``23aca492``; capability
``checkpoint``, clauses ``resume.*``), through ALF's own ``Checkpointer``
(``alf/utils/checkpoint_utils.py``) as ``RLTrainer`` drives it, as a user goes on with a run
from its root directory. Sources are cited as ``file:function`` of the ``alf`` package.

- The trainer is configured as :mod:`xpspec.adapters.alf` configures it, with
  ``ReplayBuffer.enable_checkpoint=True`` (the replay buffer's documented switch; without it
  ALF leaves the buffer out of the checkpoint), and built with
  ``TrainerConfig(num_iterations=k)``. ``RLTrainer.train`` runs iterations ``1 … k`` and then
  saves (``Trainer._save_checkpoint``: ``Checkpointer(algorithm=..., metrics=...,
  trainer_progress=...).save`` writes ``ckpt-N``, ``ckpt-N-optimizer`` and
  ``ckpt-N-replay_buffer`` under ``root_dir/train/algorithm``), and closes its env
  (``alf.close_env``).
- Every ALF object of that trainer is dropped, and the process-wide global counter
  (``alf.summary``) is set back to 0, its value in a new process; the adapter's recording (its
  event list and counts, no part of the trainer) goes on.
- A new ``RLTrainer(TrainerConfig(num_iterations=num_iterations))`` on the same root directory
  is built the same way: ``alf.get_env`` creates its env through the configured
  ``env_load_fn``, which hands it the same toy env (the world goes on; ALF re-seeds the process's
  random streams as it creates an env, ``alf/config_helpers.py:get_env``). Its ``train`` restores
  (``Trainer._restore_checkpoint``: as ALF's comment there says, it runs ``train_iter()`` once
  so that the lazily built replay buffer exists, then ``Checkpointer.load``, then
  ``set_global_counter``) and runs the rest (``RLTrainer._train``, from the restored
  ``_TrainerProgress``).

ALF pins torch 2.2.0 (``setup.py``), whose ``torch.load`` unpickles; the operation sets
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, torch's documented switch back to that default, as
``Checkpointer.load`` passes no ``weights_only`` (torch 2.6 and later load weights only and
refuse ALF's checkpoint files).

The ``resume`` event follows the last event of the saving trainer; it lists the items ALF's
buffer held when ``train`` returned (after its save) and those the restored buffer holds after
``Checkpointer.load``, each read with ``ReplayBuffer.get_field`` per env, oldest first
(:func:`held_items`). Every call of ``train_iter`` the restored trainer makes is recorded as an
iteration, the one ``_restore_checkpoint`` makes before loading included.

Unsupported: a scenario ALF ends by raising before the checkpoint (no running trainer to
save; the uninterrupted run's stop is judged on its own scenario).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from xpspec.adapters.alf import (
    _GATHER_LINK,
    _GATHER_PRECONDITION,
    _LINK,
    ALFRaised,
    _classes,
    _describe,
    _origin,
    _TrainerRun,
    _unequal_gather,
    _wrap_after,
)
from xpspec.kit.events import run_end
from xpspec.kit.items import decode_items
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Event, Item, Resume, Trace

__all__ = ["held_items", "run_checkpointed"]

_TRAINER = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/trainers/policy_trainer.py"


def held_items(buffer: Any) -> tuple[Item, ...]:
    """The items an ALF ``ReplayBuffer`` holds (none if it does not exist yet), read with
    ``get_field`` at every position from ``_current_pos - _current_size`` to
    ``_current_pos - 1`` of each env: per env in env order, oldest first."""
    if buffer is None:
        return ()
    items: list[Item] = []
    for env in range(int(buffer.num_environments)):
        end = int(buffer.get_current_position()[env])
        size = int(buffer._current_size[env])
        if size == 0:
            continue
        positions = torch.arange(end - size, end, dtype=torch.int64)
        env_ids = torch.full_like(positions, env)
        observation = buffer.get_field("time_step.observation", env_ids, positions)
        items.extend(decode_items(observation))
    return tuple(items)


class _LiveEnv:
    """The ``env_load_fn`` of both trainers: the toy env, made once and handed again (the env
    is the world and goes on across the checkpoint)."""

    batched = True

    def __init__(self, scenario: TrainerScenario) -> None:
        self.scenario = scenario
        self.env: Any = None

    def __call__(self, env_name: str, batch_size: int = 1, **kwargs: Any) -> Any:
        assert batch_size == self.scenario.env.num_envs
        if self.env is None:
            self.env = _classes()["env"](self.scenario.env, self.scenario.seed)
        return self.env


class _CheckpointedRun(_TrainerRun):
    """A trainer run saved after iteration ``k`` and resumed (see the module docstring)."""

    def run(self) -> Trace:
        import alf
        from alf.algorithms.config import TrainerConfig
        from alf.trainers.policy_trainer import RLTrainer

        sc, cfg, spec = self.sc, self.sc.trainer, self.sc.checkpoint
        assert spec is not None
        alf.config(
            "create_environment",
            env_name="xpspec-toy",
            env_load_fn=_LiveEnv(sc),
            num_parallel_environments=sc.env.num_envs,
        )
        alf.config("ReplayBuffer", enable_checkpoint=True)
        self._configure_training()

        def trainer(num_iterations: int) -> Any:
            try:
                return RLTrainer(
                    TrainerConfig(root_dir=self.workdir, num_iterations=num_iterations)
                )
            except AssertionError as exc:
                raise Unsupported(
                    f"ALF's RLTrainer refuses the configuration: {exc}", _LINK
                ) from exc

        first = trainer(spec.after_iteration)
        stopped = self._train(first)
        if stopped is not None:
            raise Unsupported(
                f"ALF ended the run before the checkpoint after iteration "
                f"{spec.after_iteration} ({stopped}): there is no running trainer to save",
                _TRAINER,
            )
        if self.iteration != spec.after_iteration:
            raise RuntimeError(
                f"RLTrainer ended after iteration {self.iteration}, expected it to end after "
                f"iteration {spec.after_iteration}"
            )
        saved = held_items(getattr(self.alg, "_replay_buffer", None))
        mark = len(self.events)
        del first  # nothing of the first trainer goes on but its files
        self.alg = None
        alf.summary.set_global_counter(0)
        second = trainer(cfg.num_iterations)
        restored: list[tuple[Item, ...]] = []
        _wrap_after(
            second,
            "_restore_checkpoint",
            lambda *a, **k: restored.append(held_items(self.alg._replay_buffer)),
        )
        stopped = self._train(second)
        resume = Resume(spec.after_iteration, saved, restored[0] if restored else ())
        self.events.insert(mark, resume)
        if self._start >= mark:  # the index of the iteration under way moved with it
            self._start += 1
        if stopped is not None:
            return self._stopped(stopped)
        return self._finish()

    def _train(self, trainer: Any) -> str | None:
        """``trainer.train()``; how ALF ended it if it raised from its own code."""
        try:
            trainer.train()
        except Exception as exc:
            if _unequal_gather(exc):
                raise Unsupported(_GATHER_PRECONDITION, _GATHER_LINK) from exc
            where = "in" if self._inside else "after"
            described = _describe(exc, f" {where} iteration {self.iteration}")
            if not _origin(exc)[1]:
                raise ALFRaised(described) from exc
            # ALF names the root directory, a temporary one: the same run, the same words
            return described.replace(self.workdir, "<root_dir>")
        return None

    def _finish(self) -> Trace:
        """The user's end-of-run flush and the run's end, as :class:`_TrainerRun` ends."""
        cfg = self.sc.trainer
        env_steps = self._env_steps()
        if cfg.pending_at_end == "flush" and hasattr(self.alg, "flush_pending"):
            try:
                self.alg.flush_pending()
            except Exception as exc:
                described = _describe(exc, " in the end-of-run flush")
                if not _origin(exc)[1]:
                    raise ALFRaised(described) from exc
                return self._stopped(described)
        held = decode_items(self._pending()) if cfg.pending_at_end == "report" else []
        self.events.append(run_end(self.iteration, env_steps, cfg.pending_at_end, held))
        events: tuple[Event, ...] = tuple(e for e in self.events if e is not None)
        return Trace(events, {"producer": "alf", "seed": self.sc.seed})


def run_checkpointed(scenario: TrainerScenario, workdir: str) -> Trace:
    """``scenario`` run by an ``RLTrainer`` saved after iteration
    ``scenario.checkpoint.after_iteration`` and resumed by a new one from the files (see the
    module docstring)."""
    # ALF pins torch 2.2.0 (setup.py), whose torch.load unpickles by default; from torch 2.6
    # on it loads weights only unless told otherwise, and Checkpointer.load does not say. This
    # operation takes torch's documented switch back to the default ALF was written for, and
    # gives it back when it returns (no other operation of the process loads with it).
    previous = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        return _CheckpointedRun(scenario, workdir).run()
    finally:
        if previous is None:
            del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
        else:
            os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = previous
