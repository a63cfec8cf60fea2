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

from tests.adapters.resume_runs import (
    assert_restored_but_reset,
    context_of,
    iteration_starts,
    resume_of,
)
from xpspec.adapters import torchrl_checkpoint
from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.resume import (
    check_resume_accounting,
    check_resume_buffer,
    check_resume_rng,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import IterationEnd, Trace, Update

ADAPTER = TorchRLAdapter()


def _scenario(name: str) -> TrainerScenario:
    scenario = CATALOG[name]
    assert isinstance(scenario, TrainerScenario) and scenario.checkpoint is not None
    return scenario


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
    """The finding: the restored collector starts every env from a reset; the buffer and the
    collector's counts are restored."""
    assert_restored_but_reset(ADAPTER, _scenario("resume-plain"), saved=10)


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
    assert resume_of(trace).saved and resume_of(trace).restored == ()
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, context_of(ADAPTER))
    assert failure.value.clause == "resume.buffer-restored"


def test_without_a_load_the_rebuilt_trainer_starts_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the load: the rebuilt buffer is empty and the collector counts from 0, so nothing
    of the first trainer reached the second but through the checkpoint's files."""
    monkeypatch.setattr(
        torchrl_checkpoint.Trainer, "load_from_file", lambda self, file, **kwargs: self
    )
    scenario = _scenario("resume-plain")
    trace = ADAPTER.run_trainer(scenario)
    assert resume_of(trace).restored == ()
    k = scenario.checkpoint.after_iteration if scenario.checkpoint else 0
    uninterrupted = ADAPTER.run_trainer(replace(scenario, checkpoint=None))
    assert iteration_starts(trace)[k] != iteration_starts(uninterrupted)[k]


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
    check_resume_rng(scenario, trace, context_of(ADAPTER))
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
        check_resume_accounting(scenario, trace, context_of(ADAPTER))
    assert failure.value.clause == "resume.accounting-restored"
    assert failure.value.diverged == "iteration_end"
