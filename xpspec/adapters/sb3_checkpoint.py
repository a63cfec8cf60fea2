"""Checkpoint and resume of a Stable-Baselines3 2.9.2 ``DQN`` run (clauses ``resume.*``),
through SB3's own save and load API, as a user resumes a run:

- the run is stopped at the start of iteration ``k + 1`` (before it steps anything), as a
  pre-empted job stops between iterations;
- ``model.save(buffer)`` (the algorithm's attributes, ``_last_obs``, ``num_timesteps``,
  ``_n_updates`` and the schedules among them, pickled; the policy's ``state_dict`` apart:
  ``common/base_class.py:BaseAlgorithm.save``) and ``model.save_replay_buffer(buffer)`` (the
  whole ``ReplayBuffer`` pickled, ``pos`` and ``full`` included:
  ``common/off_policy_algorithm.py:save_replay_buffer``) write bytes; the model, its vec env
  wrapper and its buffer are dropped (the adapter's method patches are removed first, so no
  adapter object is pickled with them);
- ``DQN.load(bytes, env=..., force_reset=False)`` builds a new model (``force_reset=False``:
  SB3's documented switch that keeps the saved ``_last_obs`` instead of resetting the env at
  the next ``learn``, ``common/base_class.py:BaseAlgorithm.load``) over a new ``DummyVecEnv``
  of the same gymnasium envs (the env is the world and goes on), and ``load_replay_buffer``
  reads the buffer back;
- ``learn(total - num_timesteps, reset_num_timesteps=False)`` runs the rest
  (``common/base_class.py:_setup_learn`` adds the counted timesteps to the total and does not
  reset the env while ``_last_obs`` is set).

The ``resume`` event lists the items the buffer's ``observations`` array holds before the save
and after the load (per env, oldest first: from ``pos`` once ``full``). The adapter's own
recording (the rows it names, its counts) is no part of the trainer and goes on; the time
step the first vector step after the resume acts on is read from the loaded model's
``_last_obs``.
"""

from __future__ import annotations

import io
from typing import Any

from stable_baselines3 import DQN
from stable_baselines3.common.vec_env import DummyVecEnv

from xpspec.adapters.sb3 import _patch, _silent, _StepRecorder, _TrainerRun
from xpspec.kit.items import decode_items
from xpspec.protocol.trace import Item, Resume

__all__ = ["CheckpointedRun", "held_items"]

_MODEL_PATCHES = ("collect_rollouts", "train")
_BUFFER_PATCHES = ("add", "sample", "store_row", "drop", "hold")


class _Pause(Exception):
    """Stops ``learn`` at the start of the iteration after the checkpoint."""


def held_items(buffer: Any) -> tuple[Item, ...]:
    """The items an SB3 ``ReplayBuffer`` holds, read from its ``observations`` array: per env
    in env order, oldest first (rows ``pos … buffer_size - 1`` then ``0 … pos - 1`` once
    ``full``, else ``0 … pos - 1``)."""
    size, pos = buffer.buffer_size, buffer.pos
    rows = [*range(pos, size), *range(pos)] if buffer.full else list(range(pos))
    per_env: list[list[Item]] = [[] for _ in range(buffer.n_envs)]
    for row in rows:
        for e, item in enumerate(decode_items(buffer.observations[row])):
            per_env[e].append(item)
    return tuple(item for items in per_env for item in items)


class CheckpointedRun(_TrainerRun):
    """A :class:`~xpspec.adapters.sb3._TrainerRun` saved after iteration
    ``checkpoint.after_iteration`` and resumed in a model loaded from the saved bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.pause_at: int | None = None
        self._envs: list[Any] = []
        self._recorded_rows: Any = None
        super().__init__(*args, **kwargs)

    def _wrap(self) -> None:
        super()._wrap()
        collect = self.model.collect_rollouts

        def collect_rollouts(*args: Any, **kwargs: Any) -> Any:
            if self.pause_at is not None and self.iteration == self.pause_at:
                raise _Pause
            return collect(*args, **kwargs)

        _patch(self.model, "collect_rollouts", collect_rollouts)

    def _learn(self) -> None:
        spec = self.scenario.checkpoint
        assert spec is not None
        total = self.config.total_timesteps
        self.pause_at = spec.after_iteration
        try:
            self.model.learn(total)
        except _Pause:
            pass
        else:
            raise RuntimeError(
                f"learn({total}) ended before iteration {spec.after_iteration + 1} began"
            )
        self.pause_at = None
        self._close_iteration()
        saved = held_items(self.buffer)
        model_bytes, buffer_bytes = self._save()
        self._load(model_bytes, buffer_bytes)
        self.events.append(Resume(spec.after_iteration, saved, held_items(self.buffer)))
        self.model.learn(total - self.model.num_timesteps, reset_num_timesteps=False)

    def _save(self) -> tuple[bytes, bytes]:
        """The model and its buffer as bytes, through SB3's ``save`` and
        ``save_replay_buffer``; the model is dropped afterwards."""
        model, buffer = self.model, self.buffer
        for name in _MODEL_PATCHES:
            model.__dict__.pop(name, None)
        for name in _BUFFER_PATCHES:
            buffer.__dict__.pop(name, None)
        model_file, buffer_file = io.BytesIO(), io.BytesIO()
        model.save(model_file)
        model.save_replay_buffer(buffer_file)
        recorder = model.env
        if not isinstance(recorder, _StepRecorder):
            raise TypeError(f"the model's env: expected the adapter's recorder, got {recorder!r}")
        # The env goes on (the gymnasium envs, and the adapter's record of what they returned).
        self._envs = list(recorder.venv.envs)
        self._recorded_rows = recorder._rows
        del self.model, model, buffer, recorder
        return model_file.getvalue(), buffer_file.getvalue()

    def _load(self, model_bytes: bytes, buffer_bytes: bytes) -> None:
        """A new model and buffer from the bytes, over a new vec env of the same envs."""
        envs, self._envs = self._envs, []
        venv = _StepRecorder(DummyVecEnv([lambda env=env: env for env in envs]), self._on_env_step)
        venv._rows = self._recorded_rows
        model = DQN.load(io.BytesIO(model_bytes), env=venv, device="cpu", force_reset=False)
        _silent(model)
        model.load_replay_buffer(io.BytesIO(buffer_bytes))
        venv._obs = model._last_obs  # what the loaded model acts on next
        self.model = model
        self._wrap()
