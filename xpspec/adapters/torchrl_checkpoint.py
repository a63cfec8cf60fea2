"""Checkpoint and resume of a TorchRL 0.14.1 ``Trainer`` run (clauses ``resume.*``), through
TorchRL's own checkpoint API (``torchrl/checkpoint/_checkpoint.py``, ``trainers/trainers.py``),
as a user resumes a run:

- the trainer is built as :mod:`xpspec.adapters.torchrl` builds it, with
  ``Trainer(checkpoint=Checkpoint(), save_trainer_file=...)``: the Trainer registers its
  checkpointable parts on the ``Checkpoint`` (``Trainer._sync_checkpoint_components``): the
  collector (``Collector.state_dict``: its frame and batch counts, the trajectory-id pool, the
  env's transforms and the policy, ``collectors/_single.py``), the optimizer, the replay
  buffer (``ReplayBuffer.dump``: storage, sampler, writer and the buffer's generator,
  ``data/replay_buffers/replay_buffers/base.py``) and the Trainer's counters
  (``collected_frames``, ``_optim_count``); the process-global random streams are registered
  as ``GlobalRNGState`` (what TorchRL's checkpoint documentation registers as ``rng``);
- after iteration ``k`` a ``post_steps`` op calls ``Trainer.request_stop``: the Trainer saves
  (``save_trainer(force_save=True)``, to files) and leaves its loop at that safe boundary;
- every TorchRL object is dropped; a new ``GymWrapper`` and transforms, collector, buffer and
  Trainer are built the same way over the same Gymnasium vector env (the env is the world and
  goes on), ``Trainer.load_from_file`` restores them from the files, and ``Trainer.train``
  runs the rest (the collector iterates while its restored frame count is short of the total).

The ``resume`` event lists the items the buffer's storage holds before the save and after the
load (:func:`held_items`). The adapter's own recording (its event list, its counts of calls
and stored rows, the rewards it names rows with) is no part of the trainer and goes on; the
time steps after the resume are read from the restored collector's batches.
"""

from __future__ import annotations

import functools
import pathlib
import tempfile
from typing import Any

import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from xpspec.adapters.torchrl import (
    _SOURCE,
    _STOPS,
    Collector,
    Trainer,
    _build_trainer,
    _gym_vector,
    _seeded,
    _trainer_support,
    _TrainerRecorder,
)
from xpspec.kit.items import decode_items
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Item, Resume, Trace

try:
    from torchrl.checkpoint import Checkpoint, GlobalRNGState
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        f"xpspec.adapters.torchrl_checkpoint needs torchrl.checkpoint ({exc})"
    ) from exc

__all__ = ["held_items", "run_checkpointed"]


def held_items(buffer: Any) -> tuple[Item, ...]:
    """The items a TorchRL ``ReplayBuffer`` holds, read from its storage (``len`` written
    elements, the writer's cursor): per env in env order, oldest first. An ``ndim=2``
    storage is ``[time, env]`` (one ring per env along time), a 1-D one a single ring in write
    order; the cursor is the next slot the writer writes, the oldest once the storage is
    full."""
    storage = buffer.storage
    size = len(storage)
    if size == 0:
        return ()
    observation: torch.Tensor = storage.get(slice(None)).get("observation")
    width = observation.shape[1] if storage.ndim == 2 else 1
    slots = size // width
    cursor = int(buffer.writer._cursor) % (storage.max_size // width)
    full = size >= storage.max_size
    order = [*range(cursor, slots), *range(cursor)] if full else list(range(slots))
    per_env: dict[int, list[Item]] = {}
    for slot in order:
        row = observation[slot].reshape(-1, observation.shape[-1])
        for item in decode_items(row):
            per_env.setdefault(item[0], []).append(item)
    return tuple(item for env in sorted(per_env) for item in per_env[env])


def run_checkpointed(sc: TrainerScenario) -> Trace:
    """``sc`` run by a Trainer saved after iteration ``sc.checkpoint.after_iteration`` and
    resumed in a Trainer restored from the files (see the module docstring)."""
    spec = sc.checkpoint
    if spec is None:
        raise ValueError("run_checkpointed: the scenario has no checkpoint spec")
    _trainer_support(sc)
    recorder = _TrainerRecorder(sc)
    with _seeded(sc.seed), tempfile.TemporaryDirectory() as root:
        path = pathlib.Path(root) / "checkpoint"
        vector = _gym_vector(sc.env, sc.seed)
        trainer = _checkpointed_trainer(sc, recorder, vector, path)
        buffer = _replay_buffer(trainer)

        def stop() -> None:
            if recorder.iteration == spec.after_iteration:
                trainer.request_stop("checkpoint")

        trainer.register_op("post_steps", stop)
        stopped = _train(trainer, recorder)
        if stopped:
            raise Unsupported(
                f"TorchRL 0.14.1 ended the run in iteration {recorder.iteration}, before the "
                f"checkpoint after iteration {spec.after_iteration} "
                f"({stopped.header['stopped']}): there is no running trainer to save",
                f"{_SOURCE}/trainers/trainers.py",
            )
        if recorder.iteration != spec.after_iteration:
            raise RuntimeError(
                f"the Trainer ended after iteration {recorder.iteration}, expected it to stop "
                f"after iteration {spec.after_iteration}"
            )
        if not path.exists():
            raise RuntimeError(f"Trainer.request_stop: expected a checkpoint at {path}")
        saved = held_items(buffer)
        del trainer, buffer, stop  # nothing of the first trainer but its files goes on
        recorder.collector = recorder.trainer = None
        recorder.weight = torch.nn.Parameter(torch.zeros(()))  # a new loss module's parameter
        trainer = _checkpointed_trainer(sc, recorder, _same_envs(vector), path)
        trainer.load_from_file(path)
        recorder.events.append(
            Resume(spec.after_iteration, saved, held_items(_replay_buffer(trainer)))
        )
        stopped = _train(trainer, recorder)
        if stopped:
            return stopped
    return recorder.trace()


def _same_envs(vector: SyncVectorEnv) -> SyncVectorEnv:
    """A new Gymnasium vector env over the envs of ``vector``: the env goes on across the
    checkpoint (the first Trainer's end closed ``vector`` through ``GymWrapper.close``; the
    toy envs have nothing to close)."""
    fns = [functools.partial(_itself, env) for env in vector.envs]
    return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)


def _itself(env: Any) -> Any:
    return env


def _checkpointed_trainer(
    sc: TrainerScenario, recorder: _TrainerRecorder, vector: Any, path: pathlib.Path
) -> Trainer:
    checkpoint = Checkpoint()
    checkpoint.register("rng", GlobalRNGState())
    _, trainer, _ = _build_trainer(
        sc, recorder, vector, checkpoint=checkpoint, save_trainer_file=path
    )
    return trainer


def _replay_buffer(trainer: Trainer) -> Any:
    """The replay buffer the Trainer's checkpoint saves and restores."""
    return trainer.checkpoint.components["replay_buffer"]


def _train(trainer: Trainer, recorder: _TrainerRecorder) -> Trace | None:
    """``trainer.train()``; the stopped trace where TorchRL raises one of the errors that end a
    run (see :mod:`xpspec.adapters.torchrl`), else None."""
    try:
        trainer.train()
    except RuntimeError as exc:
        if not any(stop in str(exc) for stop in _STOPS):
            raise
        collector: Collector = trainer.collector
        collector.shutdown()
        return recorder.trace(stopped=f"RuntimeError: {exc}")
    return None
