"""Checkpoint and resume through Tianshou 2.0.1's own resume path
(xpspec.adapters.tianshou_checkpoint): what crosses the checkpoint is the files its
``save_checkpoint_fn`` and ``TensorboardLogger`` wrote, and what the trace records after it is
read from the objects built anew. Of the catalogue's resume scenarios the Tianshou trainer row
can express ``resume-ungated`` only (the others ask for a warm-up gate or a fractional
unroll). Skipped when Tianshou is not installed."""

from __future__ import annotations

import pathlib
import pickle
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("tianshou")

import numpy as np

from tests.adapters.resume_runs import (
    assert_restored_but_reset,
    context_of,
    iteration_starts,
    resume_of,
)
from xpspec.adapters import tianshou_checkpoint
from xpspec.adapters.tianshou import TianshouAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.resume import (
    check_resume_buffer,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace, Update

ADAPTER = TianshouAdapter()


def _catalogued(name: str) -> TrainerScenario:
    scenario = CATALOG[name]
    assert isinstance(scenario, TrainerScenario) and scenario.checkpoint is not None
    return scenario


def _after(scenario: TrainerScenario) -> int:
    assert scenario.checkpoint is not None
    return scenario.checkpoint.after_iteration


def _windows_after(trace: Trace, k: int) -> list[Any]:
    return [e.windows for e in trace.events if isinstance(e, Update) and e.iteration > k]


def _edited_buffer_file(monkeypatch: pytest.MonkeyPatch, edit: Any) -> None:
    """Every save writes its files, then ``edit(buffer)`` rewrites the pickled buffer."""
    save = tianshou_checkpoint.CheckpointedRun._save

    def edited(self: Any, epoch: int, env_step: int, gradient_step: int) -> str:
        path = save(self, epoch, env_step, gradient_step)
        buffer = pickle.loads(self.buffer_file.read_bytes())
        edit(buffer)
        self.buffer_file.write_bytes(pickle.dumps(buffer))
        return path

    monkeypatch.setattr(tianshou_checkpoint.CheckpointedRun, "_save", edited)


def test_the_catalogues_resume_scenarios_are_not_expressible() -> None:
    with pytest.raises(Unsupported, match="no warm-up gate"):
        ADAPTER.run_trainer(_catalogued("resume-plain"))
    with pytest.raises(Unsupported, match="only integer u"):
        ADAPTER.run_trainer(_catalogued("resume-fractional"))


def test_the_resumed_trainer_holds_the_saved_buffer_and_counters_and_resets_the_envs() -> None:
    """The finding: the resumed trainer's run() resets the new collector, every env anew; the
    buffer and the logger's counters are restored."""
    assert_restored_but_reset(ADAPTER, _catalogued("resume-ungated"), saved=10)


def test_an_emptied_saved_buffer_is_what_the_restored_buffer_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Empty the pickled buffer (``ReplayBuffer.reset``): the restored items are read from
    what Tianshou unpickled, and resume-buffer fails."""
    _edited_buffer_file(monkeypatch, lambda buffer: buffer.reset())
    scenario = _catalogued("resume-ungated")
    trace = ADAPTER.run_trainer(scenario)
    assert resume_of(trace).saved and resume_of(trace).restored == ()
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, context_of(ADAPTER))
    assert failure.value.clause == "resume.buffer-restored"


def test_without_the_logged_counters_the_resumed_trainer_counts_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Delete the log's event files before the resumed trainer reads them: ``restore_data``
    finds no ``save/*`` scalars and the counters start at 0, so the counters after the resume
    came from the log."""
    logger = tianshou_checkpoint.TensorboardLogger
    restore = logger.restore_data

    def wiped(self: Any) -> tuple[int, int, int]:
        for file in pathlib.Path(self.writer.log_dir).glob("events.out.tfevents.*"):
            file.unlink()
        return restore(self)

    monkeypatch.setattr(logger, "restore_data", wiped)
    scenario = _catalogued("resume-ungated")
    k = _after(scenario)
    trace = ADAPTER.run_trainer(scenario)
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    assert iteration_starts(trace)[:k] == iteration_starts(uninterrupted)[:k]
    assert iteration_starts(trace)[k] == (k + 1, 1) != iteration_starts(uninterrupted)[k]


def test_the_buffers_random_streams_are_restored_from_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The windows drawn after the resume come from the ``RandomState`` streams pickled with
    the buffer: two resumed runs draw the same windows, and a buffer whose streams are
    reseeded in the file draws others."""
    scenario = _catalogued("resume-ungated")
    k = _after(scenario)
    trace = ADAPTER.run_trainer(scenario)
    assert _windows_after(trace, k) and _windows_after(ADAPTER.run_trainer(scenario), k) == (
        _windows_after(trace, k)
    )

    def reseeded(buffer: Any) -> None:
        for part in (buffer, *buffer.buffers):
            part._random_state = np.random.RandomState(12345)

    _edited_buffer_file(monkeypatch, reseeded)
    assert _windows_after(ADAPTER.run_trainer(scenario), k) != _windows_after(trace, k)


def test_a_run_that_stops_before_the_checkpoint_is_unsupported() -> None:
    """A frame-stack window no episode is long enough for ends the run in its first update
    (header ``stopped``): there is no running trainer to save."""
    scenario = _catalogued("resume-ungated")
    trainer = replace(scenario.trainer, mini_batch_length=5)
    short = replace(scenario, env=EnvSpec(2, (FixedSchedule(2),)), trainer=trainer)
    assert "stopped" in ADAPTER.run_trainer(replace(short, checkpoint=None)).header
    with pytest.raises(Unsupported, match="before the checkpoint"):
        ADAPTER.run_trainer(short)


def test_a_cached_buffer_is_restored_with_its_caches() -> None:
    """Episode-delayed preprocessing runs a ``CachedReplayBuffer``: an episode in progress is
    in its env's cache, which the pickle carries (``resume-delayed``'s env and ring, no
    warm-up gate, saved after 3 steps of the env's first episode, of 4)."""
    delayed = _catalogued("resume-delayed")
    trainer = replace(delayed.trainer, initial_collect_steps=0, num_iterations=3)
    scenario = replace(delayed, trainer=trainer, checkpoint=CheckpointSpec(1))
    trace = ADAPTER.run_trainer(scenario)
    assert resume_of(trace).saved == ((0, 0, 0), (0, 0, 1), (0, 0, 2))
    check_resume_buffer(scenario, trace, context_of(ADAPTER))
