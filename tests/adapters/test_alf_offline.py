"""The ALF adapter's offline row (:mod:`xpspec.adapters.alf_offline`): an ``RLTrainer``
(snapshot 23aca492, run from a checkout) in hybrid training on the dataset saved as a
replay-buffer checkpoint. The suite's way (a worker forking a child per operation) for the
recorded traces, and in a new interpreter with ALF's offline loading or hybrid sampling
perturbed, to show that the records follow what ALF computed. Skipped when ALF is not on the
path."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from tests.adapters.alf_runs import run_patched
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.offline import (
    check_items_unchanged,
    check_iteration_accounting,
    check_mix_ratio,
    check_online_schedule,
)
from xpspec.conformance.harness import connect
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Mixed, Trace

SCENARIO = OfflineScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    offline=((2, 0, 0), (2, 0, 1), (2, 0, 2), (3, 0, 0), (3, 0, 1)),
    updates=5,
    steps_per_update=2,
    batch_size=4,
    online_after=2,
    online_every=2,
    capacity=3,
)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _mixed(trace: Trace) -> list[Mixed]:
    return list(trace.of_kind("mixed"))


def _context(trace: Trace) -> Context:
    return Context(lambda s: trace, lambda s: trace)


def test_the_online_part_follows_alfs_global_counter(adapter: Any) -> None:
    events = _mixed(adapter.run_offline(SCENARIO))
    assert [e.update for e in events] == list(range(5))
    # ALF's counter is incremented before the update: update u is number u + 1, so the online
    # part (number >= 2, even) is at updates 1 and 3, and ALF unrolls from update 1 on
    assert [e.counter for e in events] == [1, 2, 3, 4, 5]
    online = [[i for i in e.batch if i[0] < 2] for e in events]
    assert [len(o) for o in online] == [0, 2, 0, 2, 0]
    assert [len(e.written) for e in events] == [0, 4, 4, 4, 4]  # two vector steps of two envs
    written: list = []
    for e, items in zip(events, online):
        written += e.written
        offline = [i for i in e.batch if i[0] >= 2]
        assert len(offline) == 2 and all(i in SCENARIO.offline for i in offline)
        held = {i for env in (0, 1) for i in [w for w in written if w[0] == env][-3:]}
        assert all(i in held for i in items)
        assert e.offline_held == SCENARIO.offline  # the one row ALF loaded, in order
    trace = adapter.run_offline(SCENARIO)
    ctx = _context(trace)
    check_items_unchanged(SCENARIO, trace, ctx)
    check_mix_ratio(SCENARIO, trace, ctx)
    check_iteration_accounting(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match="update 1: online items"):
        check_online_schedule(SCENARIO, trace, ctx)
    check_online_schedule(replace(SCENARIO, first_update=1), trace, ctx)  # counted-from-one


def test_an_online_weight_of_zero_is_pure_offline_training(adapter: Any) -> None:
    sc = replace(SCENARIO, batch_size=3, online_weight=0)
    events = _mixed(adapter.run_offline(sc))
    assert [e.counter for e in events] == [1, 2, 3, 4, 5]
    assert all(e.written == () for e in events)  # ALF never unrolls
    assert all(len(e.batch) == 3 and set(e.batch) <= set(sc.offline) for e in events)


def test_what_alf_cannot_express_is_unsupported(adapter: Any) -> None:
    with pytest.raises(Unsupported, match="samples the offline buffer at every update"):
        adapter.run_offline(replace(SCENARIO, offline_weight=0))
    with pytest.raises(Unsupported, match="fixed 1:1 split of an even batch"):
        adapter.run_offline(replace(SCENARIO, offline_weight=2))
    with pytest.raises(Unsupported, match="fixed 1:1 split of an even batch"):
        adapter.run_offline(replace(SCENARIO, batch_size=5))


def _perturbed(tmp_path: Path, patch: str) -> Trace:
    """``SCENARIO`` run in a new interpreter after ``patch``."""
    return run_patched(tmp_path, patch, "run_offline", SCENARIO)


def test_a_perturbed_offline_sample_shows_in_the_trace(tmp_path: Path) -> None:
    """Perturbation: ALF's offline buffer returns one window fewer than its hybrid branch asks
    for: ALF updates on one offline item (and, sliced to that batch size, one online item),
    which fails offline.mix-ratio; the items are still the dataset's."""
    trace = _perturbed(
        tmp_path,
        """
        from alf.experience_replayers.replay_buffer import ReplayBuffer
        original = ReplayBuffer.get_batch
        def get_batch(self, batch_size, batch_length):
            if "offline" in self._name:
                batch_size -= 1
            return original(self, batch_size, batch_length)
        ReplayBuffer.get_batch = get_batch
        """,
    )
    assert [len(e.batch) for e in _mixed(trace)] == [1, 2, 1, 2, 1]
    ctx = _context(trace)
    check_items_unchanged(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match="update 0: offline items of the batch"):
        check_mix_ratio(SCENARIO, trace, ctx)


def test_a_perturbed_checkpoint_shows_in_the_offline_buffer(tmp_path: Path) -> None:
    """Perturbation: the saved checkpoint's observations are shifted by one episode before
    ALF loads it: the offline buffer and its mini-batches hold the shifted items, and
    offline.items-unchanged fails: the offline items come from ALF's loaded buffer."""
    trace = _perturbed(
        tmp_path,
        """
        from alf.algorithms.rl_algorithm import RLAlgorithm
        original = RLAlgorithm.load_offline_replay_buffer
        def load(self, spec):
            state = torch.load(self._offline_buffer_dir)
            for key, value in state["algorithm"].items():
                if key.endswith("time_step|observation"):
                    value[..., 1] += 1
            torch.save(state, self._offline_buffer_dir)
            return original(self, spec)
        RLAlgorithm.load_offline_replay_buffer = load
        """,
    )
    (first, *_) = _mixed(trace)
    assert sorted(first.offline_held) == sorted((e, k + 1, t) for e, k, t in SCENARIO.offline)
    with pytest.raises(CheckFailure, match="offline item of the batch"):
        check_items_unchanged(SCENARIO, trace, _context(trace))


def test_runs_are_deterministic(adapter: Any) -> None:
    assert pickle.dumps(adapter.run_offline(SCENARIO)) == pickle.dumps(
        adapter.run_offline(SCENARIO)
    )
