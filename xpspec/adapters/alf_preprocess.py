"""Preprocessing written as an ALF user writes it: a subclass of the algorithm that overrides
``Algorithm.observe_for_replay`` (``alf/algorithms/algorithm.py``), the method
``RLAlgorithm._process_unroll_step`` (``alf/algorithms/rl_algorithm.py``) calls with each
unrolled vector step's ``Experience`` before it is stored (clauses ``preprocess.transform``,
``preprocess.exclusion``, ``preprocess.delayed-per-env``, ``preprocess.pending-at-end``).

What reaches the buffer goes through ALF's own ``Algorithm.observe_for_replay`` (the ``super()``
call): it creates the ``ReplayBuffer`` at the first store and writes with
``ReplayBuffer.add_batch(exp, exp.env_id)``, so a subset of rows is written for just those
envs. The hook's own decisions (rows excluded with their reason, rows held) are told to a
:class:`Journal`; everything else about storage is read from ALF's buffer by the caller.

The annotation of episode-delayed mode is kept in the experience's ``rollout_info`` (the
algorithm's rollout step returns a zero annotation; the hook overwrites it on release). The
task id that :class:`~xpspec.refimpl.preprocess.ExcludeTasks` selects on is the env's ``env_info``.
Needs ALF importable (it is imported by ``xpspec.adapters.alf`` only).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from xpspec.kit.arrays import ints
from xpspec.kit.exclusion import EXCLUSIONS, Exclusion, exclusion_reason, selected
from xpspec.kit.items import decode_items
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.step_type import StepType

__all__ = ["Journal", "preprocessing_algorithm"]

_LAST = int(StepType.LAST)


class Journal(Protocol):
    """Where the user's hook tells what it decided (observations are ``[N, 3]``)."""

    def exclude(self, observation: torch.Tensor, reason: str) -> None: ...

    def hold(self, observation: torch.Tensor) -> None: ...


class _Silent:
    def exclude(self, observation: torch.Tensor, reason: str) -> None:
        pass

    def hold(self, observation: torch.Tensor) -> None:
        pass


def _rows(exp: Any, mask: torch.Tensor | slice) -> Any:
    import alf

    return alf.nest.map_structure(lambda x: x[mask], exp)


def _t(exp: Any) -> torch.Tensor:
    return exp.time_step.observation[:, 2].to(torch.int64)


def preprocessing_algorithm(base: type, spec: PreprocessorSpec) -> type:
    """``base`` (an off-policy ALF algorithm class) with ``observe_for_replay`` overridden as
    ``spec`` says; ``base`` itself for identity. Instances have a ``journal`` attribute."""
    if isinstance(spec, Identity):
        return base
    if isinstance(spec, (RewardTransform, OverwriteStepType)):
        return _per_step(base, spec)
    if isinstance(spec, EXCLUSIONS):
        return _excluding(base, spec)
    if isinstance(spec, EpisodeDelayed):
        return _delayed(base, spec)
    raise TypeError(f"expected a preprocessor spec of xpspec.refimpl.preprocess, got {spec!r}")


def _per_step(base: type, spec: RewardTransform | OverwriteStepType) -> type:
    class PerStepAlgorithm(base):
        journal: Journal = _Silent()

        def observe_for_replay(self, exp: Any) -> None:
            ts = exp.time_step
            if isinstance(spec, RewardTransform):
                ts = ts._replace(reward=ts.reward * float(spec.scale) + float(spec.shift))
            else:
                if spec.when == "t":
                    hit = _t(exp) == spec.t
                else:
                    hit = (ts.step_type == _LAST) & (ts.discount != 0)
                new = torch.full_like(ts.step_type, int(StepType[spec.to]))
                ts = ts._replace(step_type=torch.where(hit, new, ts.step_type))
            super().observe_for_replay(exp._replace(time_step=ts))

    return PerStepAlgorithm


def _excluding(base: type, spec: Exclusion) -> type:
    class ExcludingAlgorithm(base):
        journal: Journal = _Silent()

        def observe_for_replay(self, exp: Any) -> None:
            ts = exp.time_step
            tasks = ints(ts.env_info["task_id"]) if isinstance(spec, ExcludeTasks) else None
            rows = selected(spec, decode_items(ts.observation), tasks)
            excluded = torch.tensor(rows, dtype=torch.bool)
            if bool(excluded.any()):
                self.journal.exclude(ts.observation[excluded], exclusion_reason(spec))
            if not bool(excluded.all()):
                super().observe_for_replay(_rows(exp, ~excluded))

    return ExcludingAlgorithm


def _delayed(base: type, spec: EpisodeDelayed) -> type:
    class EpisodeDelayedAlgorithm(base):
        """Holds each env's experience until that env's LAST; then releases (or excludes,
        by outcome) that env's episode, annotated 1.0 if it terminated, else 0.0."""

        journal: Journal = _Silent()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._held: dict[int, list[Any]] = {}

        def observe_for_replay(self, exp: Any) -> None:
            ts = exp.time_step
            self.journal.hold(ts.observation)
            env_ids = [int(e) for e in ts.env_id.tolist()]
            for row, env in enumerate(env_ids):
                self._held.setdefault(env, []).append(_rows(exp, slice(row, row + 1)))
            last = torch.nonzero(ts.step_type == _LAST).flatten().tolist()
            ended = sorted(env_ids[row] for row in last)
            for env in ended:
                episode = self._held.pop(env)
                success = bool(episode[-1].time_step.discount[0] == 0)
                annotated = [
                    step._replace(rollout_info=torch.full_like(step.rollout_info, float(success)))
                    for step in episode
                ]
                if spec.keep == "all" or (spec.keep == "success") == success:
                    self.release(annotated)
                else:
                    observation = torch.cat([step.time_step.observation for step in episode])
                    self.journal.exclude(observation, "outcome")

        def release(self, episode: list[Any]) -> None:
            """Store one env's episode, step by step, through ALF's store."""
            for step in episode:
                super().observe_for_replay(step)

        def flush_pending(self) -> None:
            """Store every held step as it is (unannotated), env by env, and hold nothing."""
            for env in sorted(self._held):
                for step in self._held[env]:
                    super().observe_for_replay(step)
            self._held.clear()

        def pending_observations(self) -> torch.Tensor:
            """The held steps' observations, env by env in unroll order (``[N, 3]``)."""
            held = [s.time_step.observation for env in sorted(self._held) for s in self._held[env]]
            return torch.cat(held) if held else torch.zeros(0, 3)

    return EpisodeDelayedAlgorithm
