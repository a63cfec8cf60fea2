"""Preprocessing as a d3rlpy 2.8.0 user writes it for ``fit_online``, which takes any
``ReplayBufferBase`` (``algos/qlearning/base.py:QLearningAlgoBase.fit_online``). Clauses
``preprocess.transform``, ``preprocess.exclusion``, ``preprocess.delayed-per-env`` and
``preprocess.pending-at-end``.

- :class:`RewardTransformWriter`: a ``WriterPreprocessProtocol`` (``dataset/writers.py``)
  whose ``process_reward`` returns ``reward * scale + shift``.
- :class:`FilteringFIFO`: a ``BufferProtocol`` (``dataset/buffers.py``), d3rlpy's
  ``FIFOBuffer`` whose ``append(episode, index)`` leaves out the entries :meth:`rejects`
  names a reason for. Every entry kept goes through :meth:`keep` (``FIFOBuffer.append``),
  every entry left out through :meth:`drop` (a no-op): the adapter wraps both on the instance
  to record what happened.
- :class:`ExcludingFIFO`: the exclusion rule (the scenario's ``ExcludeSteps`` or
  ``ExcludeEpisodes``, selected by :mod:`xpspec.kit.exclusion`) applied to the entry's own
  observation, which d3rlpy's episode holds.
- :class:`OutcomeReplayBuffer`: d3rlpy's ``ReplayBuffer(write_at_termination=True)``, whose
  writer holds an episode's entries and hands them to the buffer at ``clip_episode``
  (``dataset/writers.py:ExperienceWriter.clip_episode``); ``clip_episode(terminated)`` makes
  its :class:`FilteringFIFO` leave out the entries of an episode whose outcome ``keep``
  rejects (reason ``outcome``).
"""

from __future__ import annotations

from typing import Any

from d3rlpy.dataset import BasicWriterPreprocess, FIFOBuffer, ReplayBuffer
from numpy import asarray

from xpspec.kit.exclusion import Exclusion, exclusion_reason, selects
from xpspec.kit.items import decode_item

__all__ = [
    "ExcludingFIFO",
    "FilteringFIFO",
    "OutcomeReplayBuffer",
    "RewardTransformWriter",
]


class RewardTransformWriter(BasicWriterPreprocess):
    """``RewardTransform`` as d3rlpy's writer preprocess: ``process_reward`` returns
    ``reward * scale + shift``; observations and actions pass unchanged."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale, self.shift = scale, shift

    def process_reward(self, reward: Any) -> Any:
        return reward * self.scale + self.shift


class FilteringFIFO(FIFOBuffer):
    """d3rlpy's ``FIFOBuffer`` leaving out the entries :meth:`rejects` names a reason for;
    ``rejecting`` (a reason, or None) leaves out every entry while it is set."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.rejecting: str | None = None

    def rejects(self, episode: Any, index: int) -> str | None:
        """The reason to leave out entry ``(episode, index)``, or None to keep it."""
        return self.rejecting

    def append(self, episode: Any, index: int) -> None:
        reason = self.rejects(episode, index)
        if reason is None:
            self.keep(episode, index)
        else:
            self.drop(episode, index, reason)

    def keep(self, episode: Any, index: int) -> None:
        """d3rlpy's own ``FIFOBuffer.append``."""
        FIFOBuffer.append(self, episode, index)

    def drop(self, episode: Any, index: int, reason: str) -> None:
        """The user's rule left entry ``(episode, index)`` out of the buffer."""


class ExcludingFIFO(FilteringFIFO):
    """Leaves out an entry whose observation ``[env, episode, t]`` the rule selects."""

    def __init__(self, limit: int, rule: Exclusion) -> None:
        super().__init__(limit)
        self.rule = rule

    def rejects(self, episode: Any, index: int) -> str | None:
        if self.rejecting is not None:
            return self.rejecting
        item = decode_item(asarray(episode.observations[index]))
        return exclusion_reason(self.rule) if selects(self.rule, item) else None


class OutcomeReplayBuffer(ReplayBuffer):
    """``ReplayBuffer(write_at_termination=True)`` over a :class:`FilteringFIFO`; with
    ``keep`` ``success`` (``failure``) the entries of an episode clipped with ``terminated``
    False (True) are left out with reason ``outcome``."""

    def __init__(self, buffer: FilteringFIFO, keep: str, **kwargs: Any) -> None:
        super().__init__(buffer, write_at_termination=True, **kwargs)
        self.fifo, self.keep = buffer, keep

    def clip_episode(self, terminated: bool) -> None:
        rejected = self.keep != "all" and (self.keep == "success") != bool(terminated)
        self.fifo.rejecting = "outcome" if rejected else None
        try:
            super().clip_episode(terminated)
        finally:
            self.fifo.rejecting = None
