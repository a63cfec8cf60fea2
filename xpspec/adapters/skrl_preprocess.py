"""Preprocessing as a skrl 2.1.1 user writes it: a ``RandomMemory`` subclass handed to the agent
as its ``memory`` that overrides ``add_samples`` (``agents/torch/dqn/dqn.py:DQN.record_transition``
calls it once per vector step with the rows of all envs: ``observations``, ``states``,
``actions``, ``rewards``, ``next_observations``, ``next_states``, ``terminated``; no
``truncated`` and no ``infos``). Clauses ``preprocess.exclusion``,
``preprocess.delayed-per-env`` and ``preprocess.pending-at-end``.

- :class:`ExcludingMemory`: a row the user's rule (the scenario's exclusion, selected by
  :mod:`xpspec.kit.exclusion` from the row's observation ``[env, episode, t]``) selects is
  never added.
- :class:`EpisodeDelayedMemory`: each env's rows are held in the subclass until the row after a
  ``terminated`` one (the row of the episode's final observation, which the trainer also acts
  on under next-step autoreset) and then added one by one, annotated 1.0 in the memory's own
  ``annotations`` tensor (or dropped when ``keep`` is ``failure``); ``flush`` adds what is
  still held, annotated 0.0. The memory sees no ``truncated`` flag, so a truncated episode's
  rows stay held with the next episode's until a termination.

Rows are added one at a time, each as a batch of one (``shape (1, size)``):
``memories/torch/base.py:Memory.add_samples`` writes a batch of fewer rows than ``num_envs`` at
``[memory_index, env_index:]`` and advances ``env_index``, so with one env the memory is the
env's ring and with ``B`` envs it is one ring of ``memory_size * B`` rows in write order (the
column no longer names the env; ``DQN.update`` samples single rows, for which the order is all
that counts). Every row skrl stores goes through :meth:`HookedMemory.store_row` (the base
``add_samples``), every row the user's rule drops through :meth:`HookedMemory.drop`, every row
held through :meth:`HookedMemory.hold`: the adapter wraps those three on the instance to record
what happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from skrl.memories.torch import RandomMemory

from xpspec.kit.exclusion import Exclusion, exclusion_reason, selects
from xpspec.kit.items import decode_item
from xpspec.protocol.trace import Item

__all__ = ["EpisodeDelayedMemory", "ExcludingMemory", "HookedMemory", "Row"]


@dataclass(frozen=True)
class Row:
    """One env's row of an ``add_samples`` call: each tensor's ``(1, size)`` slice (a copy:
    the trainer reuses its tensors), or None where the agent passed None."""

    tensors: tuple[tuple[str, torch.Tensor | None], ...]

    @classmethod
    def split(cls, tensors: dict[str, Any]) -> list[Row]:
        """The rows of a batch ``(n, size)`` of every named tensor, in env order."""
        n = int(tensors["observations"].shape[0])
        return [
            cls(
                tuple(
                    (name, None if t is None else t[e : e + 1].detach().clone())
                    for name, t in tensors.items()
                )
            )
            for e in range(n)
        ]

    def kwargs(self) -> dict[str, torch.Tensor | None]:
        return dict(self.tensors)

    def get(self, name: str) -> torch.Tensor:
        value = self.kwargs()[name]
        if value is None:
            raise KeyError(f"tensor {name!r}: expected a value, got None")
        return value

    @property
    def item(self) -> Item:
        """The ``[env, episode, t]`` of the row's observation."""
        return decode_item(self.get("observations")[0].cpu().numpy())

    @property
    def terminated(self) -> bool:
        return bool(self.get("terminated").reshape(-1)[0])


class HookedMemory(RandomMemory):
    """A ``RandomMemory`` whose ``add_samples`` goes through three seams: :meth:`store_row`
    (skrl's own ``Memory.add_samples`` on one row), :meth:`drop` and :meth:`hold` (no-ops)."""

    def store_row(self, row: Row) -> None:
        RandomMemory.add_samples(self, **row.kwargs())

    def drop(self, rows: list[Row], reason: str) -> None:
        """The user's rule left ``rows`` out (nothing of them reaches the memory)."""

    def hold(self, row: Row) -> None:
        """The user's memory keeps ``row`` back for now."""

    def held(self) -> list[Row]:
        """The rows kept back and not yet added."""
        return []


class ExcludingMemory(HookedMemory):
    """Adds a row unless the user's rule selects it (by the row's observation)."""

    def __init__(self, *, rule: Exclusion, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule = rule

    def add_samples(self, **tensors: Any) -> None:
        for row in Row.split(tensors):
            if selects(self.rule, row.item):
                self.drop([row], exclusion_reason(self.rule))
            else:
                self.store_row(row)


class EpisodeDelayedMemory(HookedMemory):
    """Holds each env's rows until the row after its ``terminated`` one, then adds them,
    annotated 1.0 (the episode terminated), unless ``keep`` is ``failure``: a termination is
    the one ending the memory sees, so ``success`` keeps what ``all`` keeps."""

    def __init__(self, *, keep: Literal["all", "success", "failure"] = "all", **kwargs: Any):
        super().__init__(**kwargs)
        self.keep = keep
        self.create_tensor(name="annotations", size=1, dtype=torch.float32)
        self._episodes: dict[int, list[Row]] = {}
        self._ended: dict[int, bool] = {}

    def add_samples(self, **tensors: Any) -> None:
        for env, row in enumerate(Row.split(tensors)):
            episode = self._episodes.setdefault(env, [])
            episode.append(row)
            self.hold(row)
            if self._ended.get(env, False):
                self._episodes[env] = []
                if self.keep == "failure":
                    self.drop(episode, "outcome")
                else:
                    for held in episode:
                        self._add_annotated(held, 1.0)
            self._ended[env] = row.terminated

    def held(self) -> list[Row]:
        return [row for env in sorted(self._episodes) for row in self._episodes[env]]

    def flush(self) -> None:
        """Add the rows still held, unannotated (the outcome is unknown), env by env."""
        rows = self.held()
        self._episodes = {}
        for held in rows:
            self._add_annotated(held, 0.0)

    def _add_annotated(self, row: Row, annotation: float) -> None:
        marked = Row((*row.tensors, ("annotations", torch.tensor([[annotation]]))))
        self.store_row(marked)
