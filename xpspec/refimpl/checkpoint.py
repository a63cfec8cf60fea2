"""The reference checkpoint and resume (clauses ``resume.*``): a trainer's state saved to
bytes after an iteration, every live object of it dropped, and a fresh trainer built from the
bytes alone that runs the rest of the scenario. The env goes on across the checkpoint (it is
the world the trainer acts in, handed to the restored trainer as a framework's load API takes
it), so the restored trainer must carry its own view of the env: the last time step it saw and
its policy states.

The trace of a checkpointed run is the uninterrupted run's with one :class:`Resume` event
after the ``IterationEnd`` of ``after_iteration`` (clause ``resume.same-trace``).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

import torch

from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Event, Item, Resume, Trace
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv
from xpspec.refimpl.trainer import Trainer, trace_header

__all__ = ["FORMAT", "PARTS", "SavedTrainer", "held_items", "restore", "run_checkpointed", "save"]

FORMAT: Final = "xpspec-refimpl-checkpoint/1"
PARTS: Final = (
    "run",
    "time_step",
    "policy_state",
    "buffer",
    "preprocess",
    "unroll_schedule",
    "train_schedule",
    "generator",
)
"""The parts of a saved trainer (:meth:`Trainer.state_dict`); ``forget`` in :func:`restore`
leaves some out, as an implementation that does not save them would."""


@dataclass(frozen=True)
class SavedTrainer:
    """What :func:`save` wrote: the bytes, and the items the buffer held then."""

    data: bytes
    held: tuple[Item, ...]


def held_items(trainer: Trainer) -> tuple[Item, ...]:
    """The items ``trainer``'s replay buffer holds, per env in env order, oldest first, read
    from the stored observations (clause ``resume.buffer-restored``)."""
    observation = trainer.buffer.field("observation")
    out = []
    for env, slot in trainer.buffer.held_positions():
        e, k, t = observation[env, slot].to(torch.float64).to(torch.int64).tolist()
        out.append((e, k, t))
    return tuple(out)


def save(trainer: Trainer) -> SavedTrainer:
    """``trainer``'s state as bytes (the scenario's arguments and :meth:`Trainer.state_dict`)."""
    payload = {
        "format": FORMAT,
        "arguments": (
            trainer.init_arguments,
            trainer.state_dict(),
        ),
    }
    buffer = io.BytesIO()
    pickle.dump(payload, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return SavedTrainer(buffer.getvalue(), held_items(trainer))


def restore(
    data: bytes,
    env: ToyBatchEnv,
    record: bool = True,
    forget: Collection[str] = (),
    trainer_class: type[Trainer] = Trainer,
) -> Trainer:
    """A fresh trainer (of ``trainer_class``) built from ``data`` alone, acting in the live
    ``env``. ``forget``: parts of :data:`PARTS` left at a new trainer's values, as an
    implementation that does not save them would."""
    payload: dict[str, Any] = pickle.loads(data)  # bytes this module wrote
    if payload.get("format") != FORMAT:
        raise ValueError(f"checkpoint format: expected {FORMAT!r}, got {payload.get('format')!r}")
    arguments, state = payload["arguments"]
    unknown = set(forget) - set(PARTS)
    if unknown:
        raise ValueError(f"forget: expected parts from {PARTS}, got {sorted(unknown)}")
    env_spec, config, preprocess, sampling, seed = arguments
    trainer = trainer_class(env_spec, config, preprocess, sampling, seed, record=record)
    fresh = trainer.state_dict()
    trainer.load_state_dict({k: fresh[k] if k in forget else v for k, v in state.items()})
    trainer.env = env
    return trainer


def run_checkpointed(
    scenario: TrainerScenario,
    forget: Collection[str] = (),
    trainer_class: type[Trainer] = Trainer,
) -> Trace:
    """Run ``scenario`` to ``checkpoint.after_iteration``, save, drop the trainer, restore a
    fresh one (of ``trainer_class``) from the bytes and run to the end; the trace holds both
    parts around one :class:`Resume` event (clauses ``resume.*``)."""
    spec = scenario.checkpoint
    if spec is None:
        raise ValueError("run_checkpointed: the scenario has no checkpoint spec")
    first = trainer_class(
        scenario.env,
        scenario.trainer,
        scenario.preprocess,
        scenario.sampling,
        scenario.seed,
        record=True,
    )
    first.start()
    while first.iteration < spec.after_iteration:
        first.run_iteration()
    events: list[Event] = first.recorder.drain()
    saved = save(first)
    env = first.env
    del first  # nothing of the first trainer but its bytes crosses the checkpoint
    second = restore(saved.data, env, forget=forget, trainer_class=trainer_class)
    events.append(Resume(spec.after_iteration, saved.held, held_items(second)))
    while not second.run_iteration():
        pass
    events.extend(second.finish().trace.events)
    return Trace(tuple(events), trace_header(scenario.seed))
