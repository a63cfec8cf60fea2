"""Checkpoint and resume through d3rlpy 2.8.0's own save and load API
(xpspec.adapters.d3rlpy_checkpoint): what crosses the checkpoint is what d3rlpy saved (and the
user's record of grad_step), and what the trace records after it is read from the loaded
objects. Skipped when d3rlpy is not installed."""

from __future__ import annotations

import json
import pathlib
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("d3rlpy")

from d3rlpy.dataset import Episode, dump, load

from tests.adapters.resume_runs import (
    assert_restored_but_reset,
    context_of,
    iteration_starts,
    resume_of,
)
from xpspec.adapters import d3rlpy_checkpoint
from xpspec.adapters.d3rlpy import D3rlpyAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.resume import check_resume_buffer
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import EpisodeDelayed, ExcludeSteps, Identity, RewardTransform
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import EnvStep


def _scenario(**config: Any) -> TrainerScenario:
    """Episodes of 10 steps, two loop steps an iteration, saved after iteration 3 (step 6, in
    the middle of the first episode)."""
    cfg = dict(unroll_length=Fraction(2), num_iterations=6, capacity=8) | config
    return TrainerScenario(
        EnvSpec(1, (FixedSchedule(10),)), TrainerConfig(**cfg), checkpoint=CheckpointSpec(3)
    )


def test_the_buffer_and_counters_are_restored_but_the_env_is_reset() -> None:
    # Six loop steps before the save: five entries (the sixth observation's entry awaits the
    # next one), restored from the dump; grad_step goes on through set_grad_step; the second
    # fit_online resets the env.
    assert_restored_but_reset(D3rlpyAdapter(), _scenario(), saved=5)


def test_the_warm_up_starts_over_after_the_resume() -> None:
    # update_start_step = 4 loop steps: the uninterrupted run trains from iteration 3 on; the
    # resumed fit_online counts its steps from 1 again and skips iterations 4 and 5.
    scenario = _scenario(initial_collect_steps=4)
    trace = D3rlpyAdapter().run_trainer(scenario)
    uninterrupted = D3rlpyAdapter().run_trainer(replace(scenario, checkpoint=None))

    def statuses(events: Any) -> list[str]:
        return [e.status for e in events if e.kind == "train_call"]

    assert statuses(uninterrupted.events) == ["warmup", "warmup", *["trained"] * 4]
    assert statuses(trace.events) == ["warmup", "warmup", "trained", "warmup", "warmup", "trained"]


def _corrupting(monkeypatch: pytest.MonkeyPatch, corrupt: Any) -> None:
    """Every save is followed by ``corrupt(root)``, which rewrites the saved files."""
    save = d3rlpy_checkpoint.CheckpointedRun._save

    def saved(self: Any, root: pathlib.Path) -> None:
        save(self, root)
        corrupt(root)

    monkeypatch.setattr(d3rlpy_checkpoint.CheckpointedRun, "_save", saved)


def test_a_corrupted_buffer_dump_changes_the_restored_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturb the dump (its one episode's last transition cut off): the restored items are
    read from what ReplayBuffer.load built, so the check sees it."""

    def cut(root: pathlib.Path) -> None:
        with (root / "buffer.h5").open("rb") as f:
            (episode,) = load(Episode, f)
        shorter = Episode(
            episode.observations[:-1], episode.actions[:-1], episode.rewards[:-1], False
        )
        with (root / "buffer.h5").open("w+b") as f:
            dump([shorter], f)

    _corrupting(monkeypatch, cut)
    scenario = _scenario()
    trace = D3rlpyAdapter().run_trainer(scenario)
    resume = resume_of(trace)
    assert (len(resume.saved), len(resume.restored)) == (5, 4)
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, context_of(D3rlpyAdapter()))
    assert failure.value.clause == "resume.buffer-restored"


def test_a_corrupted_gradient_step_record_changes_the_counters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturb the user's record of grad_step: the counters after the resume are read from
    the loaded algorithm, so they follow the record."""

    def shifted(root: pathlib.Path) -> None:
        record = json.loads((root / "progress.json").read_text())
        (root / "progress.json").write_text(json.dumps({"grad_step": record["grad_step"] + 7}))

    _corrupting(monkeypatch, shifted)
    scenario = _scenario()
    trace = D3rlpyAdapter().run_trainer(scenario)
    plain = dict(iteration_starts(D3rlpyAdapter().run_trainer(replace(scenario, checkpoint=None))))
    starts = dict(iteration_starts(trace))
    assert [starts[i] - plain[i] for i in sorted(plain)] == [0, 0, 0, 7, 7, 7]


def test_the_episode_held_at_the_checkpoint_is_lost() -> None:
    # resume-delayed: one env, episodes held until they end; the episode in progress at the
    # save is held by the writer, which neither dump nor load carries.
    scenario = CATALOG["resume-delayed"]
    assert isinstance(scenario, TrainerScenario)
    trace = D3rlpyAdapter().run_trainer(scenario)
    resume = resume_of(trace)
    assert resume.saved == resume.restored and resume.saved
    k = resume.iteration
    ends = {e.iteration: e.pending for e in trace.events if e.kind == "iteration_end"}
    assert ends[k] > 0 and ends[k + 1] < ends[k] + 3
    first = next(e for e in trace.events if isinstance(e, EnvStep) and e.iteration == k + 1)
    assert first.t == (0,)


def test_several_envs_are_refused() -> None:
    with pytest.raises(Unsupported, match="no vector env"):
        D3rlpyAdapter().run_trainer(CATALOG["resume-plain"])


@pytest.mark.parametrize(
    "preprocess",
    [
        Identity(),
        ExcludeSteps(3, 1),
        RewardTransform(Fraction(2), Fraction(1)),
        EpisodeDelayed(),
    ],
    ids=["identity", "exclude", "transform", "delayed"],
)
def test_a_full_fifo_is_restored_with_the_users_buffer_objects(preprocess: Any) -> None:
    # Episodes of 3 steps into a FIFO of 5 transitions, saved after 8 loop steps: the oldest
    # dumped episode was partly evicted, and ReplayBuffer.load re-appends all of it to the
    # user's fresh buffer, whose limit evicts it again. The re-appends are the restore, not
    # stores; the stores after the resume are recorded from the restored buffer.
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(3),)),
        TrainerConfig(unroll_length=Fraction(2), num_iterations=8, capacity=5),
        preprocess,
        checkpoint=CheckpointSpec(4),
    )
    trace = D3rlpyAdapter().run_trainer(scenario)
    resume = resume_of(trace)
    assert resume.saved and resume.restored == resume.saved
    check_resume_buffer(scenario, trace, context_of(D3rlpyAdapter()))
    index = list(trace.events).index(resume)
    assert [e.kind for e in trace.events[index + 1 : index + 3]] == ["iteration", "env_step"]
    assert any(e.kind == "store" for e in trace.events[index:])
