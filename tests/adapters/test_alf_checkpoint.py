"""The ALF adapter's checkpoint-and-resume row (:mod:`xpspec.adapters.alf_checkpoint`): an
``RLTrainer`` (snapshot 23aca492, run from a checkout) saved through its ``Checkpointer`` after
iteration ``k`` and a new ``RLTrainer`` restoring it from the files. The suite's way (a worker
forking a child per operation) for the recorded traces, and in a new interpreter with ALF's
``Checkpointer.load`` given corrupted or no files, to show that nothing but the files reaches
the restored trainer. Skipped when ALF is not on the path."""

from __future__ import annotations

import pickle
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

alf_adapter = pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from tests.adapters.alf_runs import run_patched  # noqa: E402
from xpspec.adapters import alf_checkpoint  # noqa: E402
from xpspec.conformance.catalog import CATALOG  # noqa: E402
from xpspec.conformance.harness import connect  # noqa: E402
from xpspec.protocol.scenario import TrainerScenario  # noqa: E402
from xpspec.protocol.trace import IterationStart, Resume, Trace  # noqa: E402

PLAIN = CATALOG["resume-plain"]
assert isinstance(PLAIN, TrainerScenario) and PLAIN.checkpoint is not None
K = PLAIN.checkpoint.after_iteration


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _resume(trace: Trace) -> Resume:
    (resume,) = trace.of_kind("resume")
    return resume


def _starts(trace: Trace) -> list[IterationStart]:
    return list(trace.of_kind("iteration"))


def test_the_restored_buffer_holds_the_saved_items(adapter: Any) -> None:
    trace = adapter.run_trainer(PLAIN)
    resume = _resume(trace)
    assert resume.iteration == K
    assert len(resume.saved) == 2 * PLAIN.trainer.capacity  # two full rings
    assert resume.restored == resume.saved
    # the resume event follows the saving trainer's last iteration end
    index = trace.events.index(resume)
    assert trace.events[index - 1].kind == "iteration_end"
    assert trace.events[index - 1].iteration == K  # type: ignore[union-attr]


def test_the_restored_trainer_runs_one_iteration_before_it_loads(adapter: Any) -> None:
    # Trainer._restore_checkpoint's train_iter: a new process's global counter (1), then the
    # loaded one (K + 1 onwards), and one iteration more than the uninterrupted run
    trace = adapter.run_trainer(PLAIN)
    counters = [s.counter for s in _starts(trace)]
    assert counters == [*range(1, K + 1), 1, *range(K + 1, PLAIN.trainer.num_iterations + 1)]
    uninterrupted = adapter.run_trainer(replace(PLAIN, checkpoint=None))
    assert [s.counter for s in _starts(uninterrupted)] == list(
        range(1, PLAIN.trainer.num_iterations + 1)
    )


def _perturbed(tmp_path: Path, load: str) -> Trace:
    """``resume-plain`` run in a new interpreter whose ``Checkpointer.load`` is ``load`` (the
    body of ``def load(self, *args, **kwargs)``, ``original`` being ALF's)."""
    body = textwrap.indent(textwrap.dedent(load).strip(), "    ")
    patch = "\n".join(
        [
            "from alf.utils.checkpoint_utils import Checkpointer",
            "original = Checkpointer.load",
            "def load(self, *args, **kwargs):",
            body,
            "Checkpointer.load = load",
        ]
    )
    return run_patched(tmp_path, patch, "run_trainer", CATALOG["resume-plain"])


def test_corrupted_buffer_files_are_what_the_restored_buffer_holds(tmp_path: Path) -> None:
    """Perturbation: the saved replay buffer's file has each env's ``_current_size`` set to 0
    before ALF loads it; the restored buffer is empty, though the saving trainer's buffer was
    full: the restored items come from the files."""
    trace = _perturbed(
        tmp_path,
        """
        import glob
        for path in glob.glob(self._ckpt_dir + "/ckpt-*-replay_buffer"):
            state = torch.load(path, weights_only=False)
            for key in state["algorithm"]:
                if key.endswith("._current_size"):
                    state["algorithm"][key] = torch.zeros_like(state["algorithm"][key])
            torch.save(state, path)
        return original(self, *args, **kwargs)
        """,
    )
    resume = _resume(trace)
    assert len(resume.saved) == 2 * PLAIN.trainer.capacity
    assert resume.restored == ()


def test_without_a_load_the_restored_trainer_starts_anew(tmp_path: Path) -> None:
    """Perturbation: ``Checkpointer.load`` loads nothing (ALF's answer when there is no
    checkpoint): the restored buffer holds only what the pre-load iteration stored, and the
    counters restart, so nothing of the first trainer but its files reached the second."""
    trace = _perturbed(tmp_path, "return -1")
    resume = _resume(trace)
    assert resume.restored != resume.saved
    assert all(item[1] == 0 and item[2] < 2 for item in resume.restored)  # a reset env's start
    counters = [s.counter for s in _starts(trace)]
    assert counters[K + 1] != K + 1  # the restored counter would be K + 1


def test_a_run_alf_ends_before_the_checkpoint_is_unsupported(adapter: Any) -> None:
    # resume-fractional: ALF's uniform sampler raises in iteration 1 (a declared finding)
    from xpspec.protocol.adapter import Unsupported

    with pytest.raises(Unsupported, match="no running trainer to save"):
        adapter.run_trainer(CATALOG["resume-fractional"])


def test_held_items_reads_each_env_oldest_first() -> None:
    import alf
    import torch
    from alf.experience_replayers.replay_buffer import ReplayBuffer

    buffer = ReplayBuffer(
        alf.nest.map_structure(
            lambda t: alf.TensorSpec(t.shape[1:], t.dtype),
            {"time_step": {"observation": torch.zeros(2, 3)}},
        ),
        2,
        max_length=2,
    )
    for t in range(3):  # env e holds (e, 0, 1), (e, 0, 2) once (e, 0, 0) is evicted
        obs = torch.tensor([[0.0, 0.0, float(t)], [1.0, 0.0, float(t)]])
        buffer.add_batch({"time_step": {"observation": obs}})
    assert alf_checkpoint.held_items(buffer) == ((0, 0, 1), (0, 0, 2), (1, 0, 1), (1, 0, 2))
    assert alf_checkpoint.held_items(None) == ()
    assert pickle.loads(pickle.dumps(PLAIN)) == PLAIN
