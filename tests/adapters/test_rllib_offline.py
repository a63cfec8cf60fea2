"""The RLlib adapter's offline row (:mod:`xpspec.adapters.rllib_offline`): old-API-stack PPO
reading through ``MixedInput`` from its sampler and a dataset RLlib's ``JsonWriter`` wrote.
What it records of the batches PPO learned on, what RLlib cannot express, and that the records
follow what RLlib computed (a perturbed dataset reader shows in the trace and fails the check).
Skipped when RLlib is not installed."""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.offline.json_reader import JsonReader
from ray.rllib.policy.sample_batch import SampleBatch

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.offline import (
    check_items_unchanged,
    check_iteration_accounting,
    check_mix_ratio,
    check_online_schedule,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Mixed, Trace

pytestmark = pytest.mark.filterwarnings("ignore")

ADAPTER = RLlibAdapter()
# Two online envs of three-step episodes, five dataset items at env indices 2 and 3, six updates
# of batches of four (a multiple of the two envs, as RLlib requires) mixed 1:1.
SCENARIO = OfflineScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    offline=((2, 0, 0), (2, 0, 1), (2, 0, 2), (3, 0, 0), (3, 0, 1)),
    updates=6,
    batch_size=4,
    capacity=3,
)


def _mixed(trace: Trace) -> list[Mixed]:
    return list(trace.of_kind("mixed"))


def _context(trace: Trace) -> Context:
    return Context(lambda s: trace, lambda s: trace)


def _counts(trace: Trace) -> list[tuple[int, int]]:
    return [
        (sum(i[0] >= 2 for i in e.batch), sum(i[0] < 2 for i in e.batch)) for e in _mixed(trace)
    ]


@pytest.fixture(scope="module")
def trace() -> Trace:
    return ADAPTER.run_offline(SCENARIO)


def test_each_batch_holds_dataset_items_or_the_samplers_own(trace: Trace) -> None:
    events = _mixed(trace)
    assert [e.update for e in events] == list(range(6))
    assert [e.counter for e in events] == [1, 2, 3, 4, 5, 6]  # Algorithm.iteration
    for e in events:
        assert len(e.batch) == 4
        assert e.offline_held == SCENARIO.offline  # JsonReader.read_all_files, in order
        offline = [i for i in e.batch if i[0] >= 2]
        online = [i for i in e.batch if i[0] < 2]
        assert set(offline) <= set(SCENARIO.offline)
        assert sorted(online) == sorted(e.written)  # PPO learns on what its sampler returned
    ctx = _context(trace)
    check_items_unchanged(SCENARIO, trace, ctx)
    check_iteration_accounting(SCENARIO, trace, ctx)


def test_mixed_input_draws_whole_fragments_so_the_split_strays(trace: Trace) -> None:
    # MixedInput.next picks one source per call: four dataset lines of one item, or one sampler
    # fragment of two steps of one env; a batch of four is 4:0 or 2:2, never by the weights
    counts = _counts(trace)
    assert all(c in {(4, 0), (2, 2), (0, 4)} for c in counts)
    assert (4, 0) in counts
    ctx = _context(trace)
    with pytest.raises(CheckFailure, match="offline items of the batch"):
        check_mix_ratio(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match="online items in the batch"):
        check_online_schedule(SCENARIO, trace, ctx)


def test_a_single_source_passes_the_mix_checks() -> None:
    # A zero weight makes MixedInput pick one source always: the mix checks can pass
    for sc, counts in (
        (replace(SCENARIO, updates=2, online_weight=0), (4, 0)),
        (replace(SCENARIO, updates=2, offline_weight=0), (0, 4)),
    ):
        trace = ADAPTER.run_offline(sc)
        assert _counts(trace) == [counts, counts]
        ctx = _context(trace)
        check_items_unchanged(sc, trace, ctx)
        check_mix_ratio(sc, trace, ctx)
        check_iteration_accounting(sc, trace, ctx)


def test_what_rllib_cannot_express_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="no schedule"):
        ADAPTER.run_offline(replace(SCENARIO, online_after=1))
    with pytest.raises(Unsupported, match="no schedule"):
        ADAPTER.run_offline(replace(SCENARIO, online_every=2))
    with pytest.raises(Unsupported, match="validate_train_batch_size_vs_rollout_fragment_length"):
        ADAPTER.run_offline(replace(SCENARIO, batch_size=5))
    with pytest.raises(Unsupported, match="keeps no online buffer"):
        ADAPTER.run_offline(replace(SCENARIO, capacity=1))  # fragments of two steps


def test_a_perturbed_dataset_reader_shows_in_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbation: RLlib's JsonReader parses each dataset line one episode later than
    written: the offline items of the batches and the dataset read back are the shifted ones,
    and offline.items-unchanged fails: the records are what RLlib read, not the scenario's."""
    parse = JsonReader._try_parse

    def shifted(self: Any, line: str) -> Any:
        batch = parse(self, line)
        if batch is not None:
            observation = np.array(batch[SampleBatch.OBS])
            observation[:, 1] += 1
            batch[SampleBatch.OBS] = observation
        return batch

    monkeypatch.setattr(JsonReader, "_try_parse", shifted)
    sc = replace(SCENARIO, updates=2, online_weight=0)
    trace = ADAPTER.run_offline(sc)
    (first, _) = _mixed(trace)
    assert first.offline_held == tuple((e, k + 1, t) for e, k, t in SCENARIO.offline)
    assert all(i[1] == 1 for i in first.batch)
    with pytest.raises(CheckFailure, match="offline item of the batch"):
        check_items_unchanged(sc, trace, _context(trace))


def test_runs_are_deterministic(trace: Trace) -> None:
    assert pickle.dumps(ADAPTER.run_offline(SCENARIO)) == pickle.dumps(trace)
