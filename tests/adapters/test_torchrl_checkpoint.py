"""Checkpoint and resume through TorchRL 0.14.1's own checkpoint API
(xpspec.adapters.torchrl_checkpoint): what crosses the checkpoint is the files TorchRL's
``Checkpoint`` wrote, and what the trace records after it is read from the restored objects.
Skipped when TorchRL is not installed."""

from __future__ import annotations

import json
import pathlib
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("torchrl")

import torch

from xpspec.adapters import torchrl_checkpoint
from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.resume import (
    check_resume_accounting,
    check_resume_buffer,
    check_resume_env,
    check_resume_rng,
    check_resume_same_trace,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, IterationEnd, IterationStart, Resume, Trace, Update

ADAPTER = TorchRLAdapter()


def _context() -> Context:
    return Context(ADAPTER.run_trainer, ADAPTER.run_trainer, ADAPTER.run_trainer)


def _resume(trace: Trace) -> Resume:
    return next(e for e in trace.events if isinstance(e, Resume))


def _scenario(name: str) -> TrainerScenario:
    scenario = CATALOG[name]
    assert isinstance(scenario, TrainerScenario) and scenario.checkpoint is not None
    return scenario


def _starts(trace: Trace) -> list[tuple[int, int]]:
    return [(e.iteration, e.counter) for e in trace.events if isinstance(e, IterationStart)]


def _perturbed_load(monkeypatch: pytest.MonkeyPatch, edit: Any) -> None:
    """``Trainer.load_from_file`` reads the checkpoint after ``edit(path)`` changed its files."""
    trainer_class = torchrl_checkpoint.Trainer
    load = trainer_class.load_from_file

    def perturbed(self: Any, file: Any, **kwargs: Any) -> Any:
        edit(pathlib.Path(file))
        return load(self, file, **kwargs)

    monkeypatch.setattr(trainer_class, "load_from_file", perturbed)


def _component(path: pathlib.Path, name: str) -> pathlib.Path:
    return next(path.glob(f"components/*-{name}"))


def test_the_restored_trainer_holds_the_saved_buffer_and_counters() -> None:
    scenario = _scenario("resume-plain")
    k = scenario.checkpoint.after_iteration if scenario.checkpoint else 0
    trace = ADAPTER.run_trainer(scenario)
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    index = list(trace.events).index(_resume(trace))
    # Up to the save the run is the uninterrupted one; the buffer is restored item for item.
    assert list(trace.events[:index]) == list(uninterrupted.events[:index])
    assert len(_resume(trace).saved) == 10
    check_resume_buffer(scenario, trace, _context())
    # The collector's counts are restored: iterations go on with the uninterrupted counters.
    assert _starts(trace) == _starts(uninterrupted)
    # The finding: the restored collector starts every env from a reset.
    first = next(e for e in trace.events[index + 1 :] if isinstance(e, EnvStep))
    assert first.iteration == k + 1
    assert set(first.t) == {0} and set(first.step_type) == {int(StepType.FIRST)}
    for check, clause in (
        (check_resume_env, "resume.env-continues"),
        (check_resume_accounting, "resume.accounting-restored"),
        (check_resume_same_trace, "resume.same-trace"),
    ):
        with pytest.raises(CheckFailure) as failure:
            check(scenario, trace, _context())
        assert failure.value.clause == clause
    with pytest.raises(Unsupported, match="cannot be judged"):
        check_resume_rng(scenario, trace, _context())


def test_a_perturbed_saved_buffer_is_what_the_restored_buffer_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturb the saved replay buffer's files (its storage's length and the writer's cursor
    set to 0, as if empty): the restored items are read from what TorchRL loaded."""

    def emptied(path: pathlib.Path) -> None:
        buffer = _component(path, "replay_buffer")
        for name, key in (
            ("storage/storage_metadata.json", "len"),
            ("writer/metadata.json", "cursor"),
        ):
            file = buffer / name
            data = json.loads(file.read_text())
            data[key] = 0
            file.write_text(json.dumps(data))

    _perturbed_load(monkeypatch, emptied)
    scenario = _scenario("resume-plain")
    trace = ADAPTER.run_trainer(scenario)
    assert _resume(trace).saved and _resume(trace).restored == ()
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, _context())
    assert failure.value.clause == "resume.buffer-restored"


def test_without_a_load_the_rebuilt_trainer_starts_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the load: the rebuilt buffer is empty and the collector counts from 0, so nothing
    of the first trainer reached the second but through the checkpoint's files."""
    monkeypatch.setattr(
        torchrl_checkpoint.Trainer, "load_from_file", lambda self, file, **kwargs: self
    )
    scenario = _scenario("resume-plain")
    trace = ADAPTER.run_trainer(scenario)
    assert _resume(trace).restored == ()
    k = scenario.checkpoint.after_iteration if scenario.checkpoint else 0
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    assert _starts(trace)[k] != _starts(uninterrupted)[k]


def _windows_after(trace: Trace, k: int) -> list[Any]:
    return [e.windows for e in trace.events if isinstance(e, Update) and e.iteration > k]


def test_the_buffers_generator_is_restored_from_the_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the delayed scenario the windows drawn after the resume are the uninterrupted run's
    (resume-rng passes); with the saved generator state replaced by a fresh generator's, they
    are not: the draws come from the generator TorchRL loaded."""
    scenario = _scenario("resume-delayed")
    k = scenario.checkpoint.after_iteration if scenario.checkpoint else 0
    trace = ADAPTER.run_trainer(scenario)
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    check_resume_rng(scenario, trace, _context())
    assert _windows_after(trace, k) and _windows_after(trace, k) == _windows_after(uninterrupted, k)

    def reseeded(path: pathlib.Path) -> None:
        memmap = next((_component(path, "replay_buffer") / "rng_state").glob("*.memmap"))
        fresh = torch.Generator().manual_seed(12345).get_state()
        assert memmap.stat().st_size == fresh.numel()
        memmap.write_bytes(fresh.numpy().tobytes())

    _perturbed_load(monkeypatch, reseeded)
    perturbed = ADAPTER.run_trainer(scenario)
    assert _windows_after(perturbed, k) != _windows_after(trace, k)


def test_a_fractional_unroll_is_unsupported() -> None:
    scenario = _scenario("resume-fractional")
    assert scenario.trainer.unroll_length == Fraction(3, 2)
    with pytest.raises(Unsupported, match="only integer u"):
        ADAPTER.run_trainer(scenario)


def test_the_restored_collector_holds_no_partial_trajectory() -> None:
    """Episode-delayed writes: the first accounting difference after the resume is the
    iteration end's count of held rows, the open episode the saved collector assembled and
    the restored one does not hold (a finding, with the reset that also cuts it)."""
    scenario = _scenario("resume-delayed")
    k = scenario.checkpoint.after_iteration if scenario.checkpoint else 0
    trace = ADAPTER.run_trainer(scenario)
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    ends = {e.iteration: e for e in trace.events if isinstance(e, IterationEnd)}
    want = {e.iteration: e for e in uninterrupted.events if isinstance(e, IterationEnd)}
    assert ends[k] == want[k] and ends[k].pending > 0  # an episode held at the save
    assert ends[k + 1].pending < want[k + 1].pending
    with pytest.raises(CheckFailure) as failure:
        check_resume_accounting(scenario, trace, _context())
    assert failure.value.clause == "resume.accounting-restored"
    assert failure.value.diverged == "iteration_end"
