"""Experience preprocessing: the hook between unroll and storage (clauses ``preprocess.*``).

The hook sees each unroll step for all ``B`` envs and returns what to do with every row:
store it (possibly transformed or annotated), exclude it (with a reason), or hold it for a
later release. Conservation (``preprocess.conservation``): every unrolled item is stored
exactly once, excluded, or still held — never lost, never duplicated.

The preprocessors are the protocol's closed vocabulary of values
(:mod:`xpspec.protocol.preprocessors`); :func:`build` makes the stateful runtime of one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
    require_compatible,
)
from xpspec.protocol.step_type import StepType

__all__ = [
    "EpisodeDelayed",
    "ExcludeEpisodes",
    "ExcludeSteps",
    "ExcludeTasks",
    "Identity",
    "OverwriteStepType",
    "PreprocessorSpec",
    "RewardTransform",
    "Rows",
    "Runtime",
    "Verdict",
    "build",
    "require_compatible",
]

Rows = dict[str, torch.Tensor]
"""Experience rows: field -> tensor with a leading row dimension; always has ``env_id``."""


@dataclass(frozen=True)
class Verdict:
    """What the hook decided for some rows: ``store``, ``exclude`` (with reason) or ``hold``."""

    action: Literal["store", "exclude", "hold"]
    rows: Rows
    reason: str = ""


def _select(rows: Rows, mask: torch.Tensor) -> Rows:
    return {k: v[mask] for k, v in rows.items()}


def _split(rows: Rows, excluded: torch.Tensor, reason: str) -> list[Verdict]:
    out = []
    if bool(excluded.any()):
        out.append(Verdict("exclude", _select(rows, excluded), reason))
    if not bool(excluded.all()):
        out.append(Verdict("store", _select(rows, ~excluded)))
    return out


def _t(rows: Rows) -> torch.Tensor:
    return rows["observation"][:, 2].to(torch.int64)


def _episode(rows: Rows) -> torch.Tensor:
    return rows["observation"][:, 1].to(torch.int64)


class Runtime:
    """A preprocessor at work. ``step(rows)`` is called once per unroll step with the
    ``B`` rows of that step; ``pending()`` returns the rows still held."""

    def step(self, rows: Rows) -> list[Verdict]:
        raise NotImplementedError

    def pending(self) -> Rows | None:
        return None

    def state_dict(self) -> dict[str, Any]:
        """What the runtime holds between steps (clause ``resume.accounting-restored``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Hold what ``state`` (from :meth:`state_dict`) holds."""


def _reward_transform(spec: RewardTransform) -> Runtime:
    scale, shift, unheld = float(spec.scale), float(spec.shift), spec.first == "unheld"

    def step(rows: Rows) -> list[Verdict]:
        reward = rows["reward"] * scale + shift
        if unheld:
            reward = torch.where(rows["step_type"] == StepType.FIRST, rows["reward"], reward)
        return [Verdict("store", {**rows, "reward": reward})]

    return _Stateless(step)


def _overwrite_step_type(spec: OverwriteStepType) -> Runtime:
    new = int(StepType[spec.to])

    def step(rows: Rows) -> list[Verdict]:
        if spec.when == "t":
            hit = _t(rows) == spec.t
        else:
            hit = (rows["step_type"] == StepType.LAST) & (rows["discount"] != 0)
        step_type = torch.where(hit, new, rows["step_type"])
        return [Verdict("store", {**rows, "step_type": step_type})]

    return _Stateless(step)


def _exclude_tasks(spec: ExcludeTasks) -> Runtime:
    ids = torch.tensor(spec.task_ids, dtype=torch.int64)
    return _Stateless(lambda rows: _split(rows, torch.isin(rows["task_id"], ids), "task"))


def build(spec: PreprocessorSpec) -> Runtime:
    """The runtime of a preprocessor spec; unknown values raise ``ConfigError``."""
    if isinstance(spec, Identity):
        return _Stateless(lambda rows: [Verdict("store", rows)])
    if isinstance(spec, RewardTransform):
        return _reward_transform(spec)
    if isinstance(spec, OverwriteStepType):
        return _overwrite_step_type(spec)
    if isinstance(spec, ExcludeSteps):
        return _Stateless(lambda rows: _split(rows, _t(rows) % spec.every == spec.offset, "step"))
    if isinstance(spec, ExcludeEpisodes):
        return _Stateless(
            lambda rows: _split(rows, _episode(rows) % spec.every == spec.offset, "episode")
        )
    if isinstance(spec, ExcludeTasks):
        return _exclude_tasks(spec)
    if isinstance(spec, EpisodeDelayed):
        return _EpisodeDelayedRuntime(spec.keep)
    raise ConfigError("preprocess", spec, "one of the named preprocessors")


class _Stateless(Runtime):
    def __init__(self, fn: Callable[[Rows], list[Verdict]]) -> None:
        self._fn = fn

    def step(self, rows: Rows) -> list[Verdict]:
        return self._fn(rows)


class _EpisodeDelayedRuntime(Runtime):
    """Per-env caches; an env's LAST releases only that env's cached rows."""

    def __init__(self, keep: str) -> None:
        self._keep = keep
        self._cache: dict[int, list[Rows]] = {}

    def step(self, rows: Rows) -> list[Verdict]:
        out = [Verdict("hold", rows)]
        last = rows["step_type"] == StepType.LAST
        for i in range(rows["env_id"].shape[0]):
            env = int(rows["env_id"][i])
            self._cache.setdefault(env, []).append({k: v[i : i + 1] for k, v in rows.items()})
        for i in torch.nonzero(last).flatten().tolist():
            env = int(rows["env_id"][i])
            cached = self._cache.pop(env)
            episode = {k: torch.cat([r[k] for r in cached]) for k in cached[0]}
            success = bool(episode["discount"][-1] == 0)
            episode["annotation"] = torch.full_like(episode["annotation"], float(success))
            kept = self._keep == "all" or (self._keep == "success") == success
            out.append(
                Verdict("store", episode) if kept else Verdict("exclude", episode, "outcome")
            )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"cache": {env: [dict(r) for r in rows] for env, rows in self._cache.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._cache = {env: [dict(r) for r in rows] for env, rows in state["cache"].items()}

    def pending(self) -> Rows | None:
        rows = [r for env in sorted(self._cache) for r in self._cache[env]]
        if not rows:
            return None
        return {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
