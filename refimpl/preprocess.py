"""Experience preprocessing: the hook between unroll and storage (clauses ``preprocess.*``).

The hook sees each unroll step for all ``B`` envs and returns what to do with every row:
store it (possibly transformed or annotated), exclude it (with a reason), or hold it for a
later release. Conservation (``preprocess.conservation``): every unrolled item is stored
exactly once, excluded, or still held — never lost, never duplicated.

The preprocessors form a closed vocabulary of frozen, serialisable values; each builds a
stateful runtime with :func:`build`. Modes (ALF PR 1768, seed 000):

- per-step, no delay: :class:`Identity`, :class:`RewardTransform`, :class:`OverwriteStepType`;
- selective: :class:`ExcludeSteps`, :class:`ExcludeEpisodes`, :class:`ExcludeTasks`;
- episode-delayed: :class:`EpisodeDelayed` holds each env's rows until *that* env's LAST and
  then releases only that env's episode, annotated (``preprocess.delayed-per-env``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Union, get_args

import torch

from refimpl.errors import ConfigError
from refimpl.serial import parse_fraction
from refimpl.step_type import StepType

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


@dataclass(frozen=True)
class Identity:
    """Store every row unchanged (``preprocess.identity-is-plain``)."""

    kind: Literal["identity"] = "identity"

    def build(self) -> Runtime:
        return _Stateless(lambda rows: [Verdict("store", rows)])


@dataclass(frozen=True)
class RewardTransform:
    """Store every row with ``reward * scale + shift`` (exact rationals). ``first="unheld"``
    is the variant ``transition-rows`` of ``preprocess.transform``: a FIRST's reward (the
    reward into a first observation, 0) is stored unchanged, as in a framework whose rows are
    transitions and hold no such reward for a transform to reach."""

    scale: Fraction = Fraction(1)
    shift: Fraction = Fraction(0)
    first: Literal["transform", "unheld"] = "transform"
    kind: Literal["reward_transform"] = "reward_transform"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", parse_fraction("scale", self.scale))
        object.__setattr__(self, "shift", parse_fraction("shift", self.shift))
        if self.first not in ("transform", "unheld"):
            raise ConfigError("first", self.first, "'transform' or 'unheld'")

    def build(self) -> Runtime:
        scale, shift, unheld = float(self.scale), float(self.shift), self.first == "unheld"

        def step(rows: Rows) -> list[Verdict]:
            reward = rows["reward"] * scale + shift
            if unheld:
                reward = torch.where(rows["step_type"] == StepType.FIRST, rows["reward"], reward)
            return [Verdict("store", {**rows, "reward": reward})]

        return _Stateless(step)


@dataclass(frozen=True)
class OverwriteStepType:
    """Overwrite the step type before storage: of truncated LAST rows
    (``when='truncated-last'``), or of rows at time ``t`` (``when='t'``)."""

    to: Literal["FIRST", "MID", "LAST"] = "MID"
    when: Literal["truncated-last", "t"] = "truncated-last"
    t: int = 0
    kind: Literal["overwrite_step_type"] = "overwrite_step_type"

    def __post_init__(self) -> None:
        if self.to not in ("FIRST", "MID", "LAST"):
            raise ConfigError("to", self.to, "'FIRST', 'MID' or 'LAST'")
        if self.when not in ("truncated-last", "t"):
            raise ConfigError("when", self.when, "'truncated-last' or 't'")
        if not isinstance(self.t, int) or self.t < 0:
            raise ConfigError("t", self.t, "an integer >= 0")

    def build(self) -> Runtime:
        new = int(StepType[self.to])

        def step(rows: Rows) -> list[Verdict]:
            if self.when == "t":
                hit = _t(rows) == self.t
            else:
                hit = (rows["step_type"] == StepType.LAST) & (rows["discount"] != 0)
            step_type = torch.where(hit, new, rows["step_type"])
            return [Verdict("store", {**rows, "step_type": step_type})]

        return _Stateless(step)


def _check_modulus(every: object, offset: object) -> None:
    if not isinstance(every, int) or every < 1:
        raise ConfigError("every", every, "an integer >= 1")
    if not isinstance(offset, int) or not 0 <= offset < every:
        raise ConfigError("offset", offset, f"an integer in [0, {every})")


@dataclass(frozen=True)
class ExcludeSteps:
    """Exclude rows whose ``t % every == offset``."""

    every: int = 2
    offset: int = 0
    kind: Literal["exclude_steps"] = "exclude_steps"

    def __post_init__(self) -> None:
        _check_modulus(self.every, self.offset)

    def build(self) -> Runtime:
        return _Stateless(lambda rows: _split(rows, _t(rows) % self.every == self.offset, "step"))


@dataclass(frozen=True)
class ExcludeEpisodes:
    """Exclude every row of the episodes whose index ``k % every == offset``."""

    every: int = 2
    offset: int = 0
    kind: Literal["exclude_episodes"] = "exclude_episodes"

    def __post_init__(self) -> None:
        _check_modulus(self.every, self.offset)

    def build(self) -> Runtime:
        return _Stateless(
            lambda rows: _split(rows, _episode(rows) % self.every == self.offset, "episode")
        )


@dataclass(frozen=True)
class ExcludeTasks:
    """Exclude every row whose task id is in ``task_ids``."""

    task_ids: tuple[int, ...] = (0,)
    kind: Literal["exclude_tasks"] = "exclude_tasks"

    def __post_init__(self) -> None:
        if not self.task_ids or not all(isinstance(i, int) and i >= 0 for i in self.task_ids):
            raise ConfigError("task_ids", self.task_ids, "a non-empty list of integers >= 0")

    def build(self) -> Runtime:
        ids = torch.tensor(self.task_ids, dtype=torch.int64)
        return _Stateless(lambda rows: _split(rows, torch.isin(rows["task_id"], ids), "task"))


@dataclass(frozen=True)
class EpisodeDelayed:
    """Hold each env's rows until that env reaches LAST, then release that env's whole
    episode with ``annotation`` = 1.0 if it terminated (success) else 0.0. ``keep`` filters
    released episodes by outcome; the others are excluded with reason ``outcome``."""

    keep: Literal["all", "success", "failure"] = "all"
    kind: Literal["episode_delayed"] = "episode_delayed"

    def __post_init__(self) -> None:
        if self.keep not in ("all", "success", "failure"):
            raise ConfigError("keep", self.keep, "'all', 'success' or 'failure'")

    def build(self) -> Runtime:
        return _EpisodeDelayedRuntime(self.keep)


PreprocessorSpec = Union[
    Identity,
    RewardTransform,
    OverwriteStepType,
    ExcludeSteps,
    ExcludeEpisodes,
    ExcludeTasks,
    EpisodeDelayed,
]


def require_compatible(spec: PreprocessorSpec, autoreset: str) -> None:
    """Refuse combinations the env cannot serve: episode-delayed release waits for LAST,
    which a same-step auto-resetting env never returns (clause ``timestep.auto-reset``)."""
    if isinstance(spec, EpisodeDelayed) and autoreset == "same-step":
        raise ConfigError(
            "preprocess", spec, "no episode-delayed preprocessing with same-step auto-reset"
        )


def build(spec: PreprocessorSpec) -> Runtime:
    """The runtime of a preprocessor spec; unknown values raise ``ConfigError``."""
    if not isinstance(spec, get_args(PreprocessorSpec)):
        raise ConfigError("preprocess", spec, "one of the named preprocessors")
    return spec.build()


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

    def pending(self) -> Rows | None:
        rows = [r for env in sorted(self._cache) for r in self._cache[env]]
        if not rows:
            return None
        return {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
