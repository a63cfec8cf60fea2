"""The skrl adapter: what it records of skrl's own behaviour, on scenarios small enough to
derive every expected value by hand. Skipped when skrl is not installed."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import pytest

pytest.importorskip("skrl")

from xpspec.adapters.skrl import SkrlAdapter, SkrlConfig
from xpspec.adapters.skrl_tlb import SkrlTlbAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import EnvScenario, LearnerScenario, ReplayScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
Ending = Literal["terminated", "truncated"]
ADAPTER = SkrlAdapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def test_info_names_the_installed_version_and_configuration() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("skrl", "2.1.1")
    assert set(info.capabilities) == {"env", "replay", "learner"}
    assert "replacement=False" in info.notes and "time_limit_bootstrap=False" in info.notes
    tlb = SkrlTlbAdapter().info()
    assert tlb.name == "skrl_tlb"
    assert "replacement=True" in tlb.notes and "time_limit_bootstrap=True" in tlb.notes
    ADAPTER.smoke()


@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_passes_the_next_step_autoreset_through(ending: Ending, discount: float) -> None:
    # One env, episodes of 2 transitions: reset -> (0,0,0); steps -> (0,0,1), the LAST (0,0,2),
    # then the next episode's FIRST (0,1,0) with reward 0, and (0,1,1).
    spec = EnvSpec(1, (FixedSchedule(2, ending),))
    trace = ADAPTER.run_env(EnvScenario(spec, steps=5))
    events = list(trace.of_kind("env_step"))
    assert _items(trace, "env_step") == [
        [(0, 0, 0)],
        [(0, 0, 1)],
        [(0, 0, 2)],
        [(0, 1, 0)],
        [(0, 1, 1)],
    ]
    assert [e.step_type for e in events] == [(F,), (M,), (L,), (F,), (M,)]
    assert [e.reward for e in events] == [(0.0,), (1.0,), (2.0,), (0.0,), (1.0,)]
    assert [e.discount for e in events] == [(1.0,), (1.0,), (discount,), (1.0,), (1.0,)]


def _replay(replacement: bool, length: int, fill: int, batch: int) -> Trace:
    # One env, one long episode: the stored rows are t = 0 .. fill - 1.
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(50),)),
        capacity=4,
        fill_steps=fill,
        sampling=SamplingSpec(window_length=length),
        batch_size=batch,
        draws=3,
    )
    return SkrlAdapter(SkrlConfig(replacement=replacement)).run_replay(scenario)


def test_replay_without_replacement_draws_each_start_once() -> None:
    # 3 rows stored, windows of 2: starts t = 0 and 1 only; a batch of 5 comes back as both.
    trace = _replay(replacement=False, length=2, fill=3, batch=5)
    assert [len(s) for s in _items(trace, "store")] == [1, 1, 1]
    for draw in trace.of_kind("sampled"):
        assert sorted(tuple(i[2] for i in w) for w in draw.windows) == [(0, 1), (1, 2)]


def test_replay_with_replacement_crosses_the_write_head() -> None:
    # 6 rows into a ring of 4: the ring holds t = 4, 5, 2, 3 (physical order), the newest at
    # physical row 1. skrl draws starts at physical rows 0..2, so windows are (4,5), (5,2)
    # across the write head, (2,3); the stored sequence (3,4) is never drawn.
    trace = _replay(replacement=True, length=2, fill=6, batch=64)
    seen = {tuple(i[2] for i in w) for d in trace.of_kind("sampled") for w in d.windows}
    assert seen == {(4, 5), (5, 2), (2, 3)}
    assert all(len(d.windows) == 64 for d in trace.of_kind("sampled"))


def test_replay_too_short_is_an_empty_draw() -> None:
    # 1 row stored, windows of 3: torch.randperm of a negative size raises; recorded empty.
    for replacement in (False, True):
        trace = _replay(replacement=replacement, length=3, fill=1, batch=4)
        assert [d.windows for d in trace.of_kind("sampled")] == [(), (), ()]


def _learner(
    num_envs: int = 2, learners: int = 1, ending: Ending = "terminated"
) -> LearnerScenario:
    return LearnerScenario(
        EnvSpec(num_envs, (FixedSchedule(2, ending),)),
        steps=6,
        value_scale=Fraction(0),
        gamma=Fraction(1, 2),
        lam=Fraction(1),
        minibatch_size=4,
        num_epochs=1,
        num_learners=learners,
    )


def test_learner_refuses_what_skrl_cannot_run() -> None:
    with pytest.raises(Unsupported, match="learners"):
        ADAPTER.run_learner(_learner(learners=2))
    with pytest.raises(Unsupported, match="single environment"):
        ADAPTER.run_learner(_learner(num_envs=1))


def test_learner_trains_on_the_final_observation_rows() -> None:
    # Episodes of 2 transitions (rewards 1, 2 into t = 1, 2), 6 time steps per env: (0,0,0..2),
    # (0,1,0..2). skrl acts on 5 of them, the LAST (0,0,2) included, so its memory holds
    # 5 rows per env: 10 rows in ceil(10 / 4) = 3 mini-batches of 4, 3, 3 (np.array_split).
    # With V = 0, gamma 1/2, lambda 1: episode 0's returns are 1 + 2/2 = 2 and 2; its
    # final-observation row continues into episode 1 (reward 0, then 1 + 2/2 discounted).
    trace = SkrlTlbAdapter().run_learner(_learner())
    (plan,) = trace.of_kind("update_plan")
    assert [len(b) for b in plan.minibatch_rows] == [4, 3, 3]
    assert sorted(r for b in plan.minibatch_rows for r in b) == list(range(10))
    episodes = {(e.env, e.episode): e for e in trace.of_kind("advantages")}
    first = episodes[(0, 0)]
    assert first.t == (0, 1, 2)
    assert first.value_target[:2] == pytest.approx((2.0, 2.0))
    assert first.value_target[2] == pytest.approx(0.5 * (1.0 + 0.5 * 2.0))
    last = episodes[(0, 1)]  # in progress: no final-observation row, a stand-in
    assert last.t == (0, 1, 2)
