"""Records trainer events cheaply and turns them into a :class:`~refimpl.trace.Trace`.

During a run the recorder keeps tensors (one small stacked tensor per event); converting
them into event values happens once, in :meth:`Recorder.trace`. With ``enabled=False``
every method returns at once, so a run without tracing pays almost nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from refimpl.trace import (
    EnvStep,
    Event,
    Exclude,
    Hold,
    Hook,
    IterationEnd,
    IterationStart,
    RunEnd,
    Store,
    Trace,
    TrainCall,
    Update,
)

__all__ = ["Recorder"]

_ROW_FIELDS = ("step_type", "reward", "discount")


def _rows_tensor(rows: dict[str, torch.Tensor], *extra: str) -> torch.Tensor:
    cols = [rows["observation"].to(torch.float64)]
    cols += [rows[name].to(torch.float64).reshape(-1, 1) for name in (*_ROW_FIELDS, *extra)]
    return torch.cat(cols, 1)


def _ints(col: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in col.tolist())


def _floats(col: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in col.tolist())


def _window(obs: list[list[float]], mask: list[bool]) -> tuple[Any, ...]:
    return tuple(
        (int(o[0]), int(o[1]), int(o[2])) if m else None for o, m in zip(obs, mask)
    )


class Recorder:
    """Collects events during a run; :meth:`trace` materialises them in order."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._raw: list[tuple[Any, ...]] = []

    def iteration_start(self, iteration: int, counter: int, unroll_steps: int) -> None:
        if self.enabled:
            self._raw.append((IterationStart(iteration, counter, unroll_steps),))

    def env_step(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append(("env_step", iteration, _rows_tensor(rows, "policy_state", "action")))

    def store(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append(("store", iteration, _rows_tensor(rows, "annotation")))

    def exclude(self, iteration: int, rows: dict[str, torch.Tensor], reason: str) -> None:
        if self.enabled:
            self._raw.append(("exclude", iteration, rows["observation"].clone(), reason))

    def hold(self, iteration: int, rows: dict[str, torch.Tensor]) -> None:
        if self.enabled:
            self._raw.append(("hold", iteration, rows["observation"].clone()))

    def train_call(self, iteration: int, call: int, counter: int, status: str, stored: int) -> None:
        if self.enabled:
            self._raw.append((TrainCall(iteration, call, counter, status, stored),))  # type: ignore[arg-type]

    def update(
        self,
        iteration: int,
        call: int,
        index: int,
        counter: int,
        observation: torch.Tensor,
        valid: torch.Tensor,
        loss_mask: torch.Tensor,
    ) -> None:
        if self.enabled:
            self._raw.append(("update", iteration, call, index, counter, observation, valid, loss_mask))

    def hook(self, iteration: int, name: str) -> None:
        if self.enabled:
            self._raw.append((Hook(iteration, name),))  # type: ignore[arg-type]

    def iteration_end(self, iteration: int, counter: int, env_steps: int, stored: int, pending: int) -> None:
        if self.enabled:
            self._raw.append((IterationEnd(iteration, counter, env_steps, stored, pending),))

    def run_end(self, iterations: int, env_steps: int, policy: str, pending: torch.Tensor | None) -> None:
        if self.enabled:
            obs = pending if pending is not None else torch.zeros(0, 3)
            self._raw.append(("run_end", iterations, env_steps, policy, obs))

    def trace(self, header: dict[str, Any] | None = None) -> Trace:
        """The recorded events as a :class:`Trace` (empty when recording was disabled)."""
        return Trace(tuple(self._materialise(r) for r in self._raw), dict(header or {}))

    @staticmethod
    def _materialise(raw: tuple[Any, ...]) -> Event:
        if len(raw) == 1:
            return raw[0]  # type: ignore[no-any-return]
        kind = raw[0]
        if kind in ("env_step", "store"):
            cols = raw[2].T
            env, episode, t, step_type = (_ints(cols[i]) for i in range(4))
            reward, discount = _floats(cols[4]), _floats(cols[5])
            if kind == "store":
                return Store(raw[1], env, episode, t, step_type, reward, discount, _floats(cols[6]))
            return EnvStep(
                raw[1], env, episode, t, step_type, reward, discount, _ints(cols[6]), _ints(cols[7])
            )
        if kind in ("exclude", "hold"):
            cols = raw[2].T
            env, episode, t = (_ints(cols[i]) for i in range(3))
            return Exclude(raw[1], env, episode, t, raw[3]) if kind == "exclude" else Hold(raw[1], env, episode, t)
        if kind == "update":
            _, iteration, call, index, counter, obs, valid, loss_mask = raw
            windows = tuple(_window(o, m) for o, m in zip(obs.tolist(), valid.tolist()))
            mask = tuple(tuple(int(v) for v in row) for row in loss_mask.tolist())
            return Update(iteration, call, index, counter, windows, mask)
        if kind == "run_end":
            _, iterations, env_steps, policy, obs = raw
            cols = obs.T
            return RunEnd(iterations, env_steps, policy, *(_ints(cols[i]) for i in range(3)))
        raise AssertionError(f"unknown raw event {kind!r}")
