"""The AgileRL adapter: what it records of AgileRL 2.58.0's own ReplayBuffer and Sampler, on
scenarios small enough to derive every expected value by hand. Skipped when AgileRL is not
installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agilerl")

from xpspec.adapters.agilerl import AgileRLAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
ADAPTER = AgileRLAdapter()


def _replay(env: EnvSpec, capacity: int, fill: int, **sampling: Any) -> Trace:
    draws = sampling.pop("draws", 4)
    batch = sampling.pop("batch_size", 4)
    seed = sampling.pop("seed", 0)
    scenario = ReplayScenario(
        env, capacity, fill, SamplingSpec(**sampling), batch_size=batch, draws=draws, seed=seed
    )
    return ADAPTER.run_replay(scenario)


def _sampled(trace: Trace) -> list[tuple[Any, ...]]:
    return [d.windows for d in trace.of_kind("sampled")]


def test_info_names_the_installed_versions() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("agilerl", "2.58.0")
    assert info.capabilities == ("replay",)
    ADAPTER.smoke()


def test_every_vector_step_is_one_store_of_every_envs_row() -> None:
    # Two envs, terminated episodes of 2 transitions, 4 vector steps: the rows' obs are
    # t = 0, 1, 2 (the LAST, whose row holds the next FIRST as next_obs), then t = 0 of the
    # next episode; the reward into a step is t (0 at a FIRST), the LAST's discount 0.
    trace = _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4)
    stores = list(trace.of_kind("store"))
    assert [list(zip(s.env, s.episode, s.t)) for s in stores] == [
        [(0, 0, 0), (1, 0, 0)],
        [(0, 0, 1), (1, 0, 1)],
        [(0, 0, 2), (1, 0, 2)],
        [(0, 1, 0), (1, 1, 0)],
    ]
    assert [s.step_type for s in stores] == [(F, F), (M, M), (L, L), (F, F)]
    assert [s.reward for s in stores] == [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (0.0, 0.0)]
    assert [s.discount for s in stores] == [(1.0, 1.0), (1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]
    assert trace.header["stored_rows"] == 8


def test_each_env_keeps_its_newest_capacity_rows() -> None:
    # max_size = capacity * B = 6 rows for 2 envs and rings of 3: after 5 vector steps each
    # env holds t = 2, 3, 4 of its one long episode, and a batch of 6 is all of them.
    trace = _replay(EnvSpec(2, (FixedSchedule(100),)), capacity=3, fill=5, batch_size=6)
    assert trace.header["stored_rows"] == 6
    for windows in _sampled(trace):
        assert sorted(windows) == [((e, 0, t),) for e in (0, 1) for t in (2, 3, 4)]


def test_a_draw_before_any_row_is_an_empty_draw() -> None:
    # ReplayBuffer.sample asserts that something was stored; the adapter records the refusal.
    trace = _replay(EnvSpec(1, (FixedSchedule(4),)), capacity=4, fill=0, draws=2)
    assert _sampled(trace) == [(), ()]


def test_a_batch_larger_than_the_buffer_is_cut_to_it() -> None:
    # 3 rows stored, batches of 8: AgileRL returns the 3 rows, each once (finding, see
    # tests/adapters/test_agilerl_findings.py).
    trace = _replay(EnvSpec(1, (FixedSchedule(100),)), capacity=8, fill=3, batch_size=8)
    for windows in _sampled(trace):
        assert sorted(windows) == [((0, 0, 0),), ((0, 0, 1),), ((0, 0, 2),)]


@pytest.mark.parametrize(
    "sampling",
    [
        {"window_length": 2},
        {"period": 2},
        {"distribution": "env-balanced"},
        {"distribution": "uniform-episodes"},
    ],
)
def test_what_a_row_sampler_cannot_express_is_unsupported(sampling: dict[str, Any]) -> None:
    with pytest.raises(Unsupported, match=r"agilerl 2\.58\.0"):
        _replay(EnvSpec(2, (FixedSchedule(2),)), capacity=4, fill=4, **sampling)


def test_runs_repeat_byte_for_byte_and_follow_the_seed() -> None:
    def run(seed: int) -> str:
        env = EnvSpec(2, (FixedSchedule(3),))
        return _replay(env, 6, 9, batch_size=8, seed=seed).to_jsonl()

    assert run(3) == run(3)
    assert run(3) != run(4)
