"""Checkpoint and resume through RLlib 2.60.0's own checkpoint API
(xpspec.adapters.rllib_checkpoint): what crosses the checkpoint is the files
``Algorithm.save_to_path`` and the pickled ``EpisodeReplayBuffer.get_state`` wrote, and what the
trace records after it is read from the algorithm ``Algorithm.from_checkpoint`` built. Skipped
when RLlib is not installed."""

from __future__ import annotations

import pathlib
import pickle
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from tests.adapters.resume_runs import (
    assert_restored_but_reset,
    context_of,
    iteration_starts,
    resume_of,
)
from xpspec.adapters import rllib_checkpoint
from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.resume import check_resume_buffer
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADAPTER = RLlibAdapter()


def _perturbed(monkeypatch: pytest.MonkeyPatch, edit: Any) -> None:
    """Run ``edit(path)`` on the saved files before the restore reads them."""
    restore = rllib_checkpoint.CheckpointedRun._restore

    def perturbed(self: Any, path: pathlib.Path) -> None:
        edit(path)
        restore(self, path)

    monkeypatch.setattr(rllib_checkpoint.CheckpointedRun, "_restore", perturbed)


def test_the_restored_algorithm_keeps_buffer_and_counters_but_resets_every_env() -> None:
    # resume-plain: two envs, a ring of 5 per env (RLlib: 10 timesteps over all episodes),
    # saved after iteration 3; the buffer then holds env 0's episode 1 (t 0..4) and env 1's
    # episode 1 (t 0..2).
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    assert_restored_but_reset(ADAPTER, scenario, saved=8)


def test_the_restored_counter_is_read_from_the_saved_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturb ``training_iteration`` in the saved algorithm state: the iterations after the
    resume start with RLlib's counter as the files hold it (Algorithm.iteration is the
    per-iteration counter resume-plain reads)."""

    def later(path: pathlib.Path) -> None:
        file = path / "algorithm" / "algorithm_state.pkl"
        state = pickle.loads(file.read_bytes())
        state["training_iteration"] += 5
        file.write_bytes(pickle.dumps(state))

    _perturbed(monkeypatch, later)
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario) and scenario.checkpoint is not None
    k = scenario.checkpoint.after_iteration
    starts = iteration_starts(ADAPTER.run_trainer(scenario))
    # Algorithm.iteration runs one behind (iteration-count-before): k - 1 before the save.
    assert starts[:k] == [(i, i - 1) for i in range(1, k + 1)]
    assert starts[k:] == [(i, i - 1 + 5) for i in range(k + 1, len(starts) + 1)]


def test_the_restored_buffer_is_read_from_the_saved_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturb the pickled buffer state (an empty buffer's state in its place): the restored
    items are read from what set_state put into the new algorithm's buffer."""
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

    def emptied(path: pathlib.Path) -> None:
        (path / "replay_buffer.pkl").write_bytes(pickle.dumps(EpisodeReplayBuffer().get_state()))

    _perturbed(monkeypatch, emptied)
    scenario = CATALOG["resume-plain"]
    trace = ADAPTER.run_trainer(scenario)
    assert len(resume_of(trace).saved) == 8 and resume_of(trace).restored == ()
    with pytest.raises(CheckFailure) as failure:
        check_resume_buffer(scenario, trace, context_of(ADAPTER))
    assert failure.value.clause == "resume.buffer-restored"


def test_a_fractional_unroll_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="rollout_fragment_length is an integer"):
        ADAPTER.run_trainer(CATALOG["resume-fractional"])
