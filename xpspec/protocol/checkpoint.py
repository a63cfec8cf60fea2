"""How a trainer scenario asks for a checkpoint and resume (clauses ``resume.*``): after
iteration ``after_iteration`` ends, the implementation saves its trainer through its own save
API, drops every live object of it, builds a fresh trainer from what it saved and runs the
rest of the scenario. The env is the world the trainer acts in, not part of the trainer: it
goes on across the checkpoint, and the restored trainer is handed it again (as a framework's
load API takes the env). Standard library only; the reference save and restore is
:mod:`xpspec.refimpl.checkpoint`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpspec.protocol.errors import ConfigError

__all__ = ["CheckpointSpec"]


@dataclass(frozen=True)
class CheckpointSpec:
    """Save after iteration ``after_iteration`` (at least 1) ends, restore into a fresh
    trainer, run the remaining iterations (clause ``resume.same-trace``)."""

    after_iteration: int = 1

    def __post_init__(self) -> None:
        value = self.after_iteration
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError("after_iteration", value, "an integer >= 1")
