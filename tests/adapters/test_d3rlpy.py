"""The d3rlpy adapter: what it records of d3rlpy 2.8.0's own online loop and replay buffer, on
scenarios small enough to derive every expected value by hand. Skipped when d3rlpy is not
installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("d3rlpy")

from xpspec.adapters.d3rlpy import D3rlpyAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeSteps,
    ExcludeTasks,
    OverwriteStepType,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import ReplayScenario, TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

F, M = 0, 1
ADAPTER = D3rlpyAdapter()
THREE = EnvSpec(1, (FixedSchedule(3),))
"""One env, terminated episodes of 3 transitions: t = 0, 1, 2 acted on, then a reset."""


def _stored(trace: Trace) -> list[tuple[tuple[int, int, int], int, float]]:
    return [
        ((e.env[i], e.episode[i], e.t[i]), e.step_type[i], e.reward[i])
        for e in trace.of_kind("store")
        for i in range(len(e.env))
    ]


def test_info_names_the_installed_version() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("d3rlpy", "2.8.0")
    assert info.capabilities == ("trainer", "replay", "update-counter", "stack", "checkpoint")
    ADAPTER.smoke()


def test_rows_are_written_when_the_next_observation_arrives_and_at_termination() -> None:
    # collect(5): o(0,0,0..2) then a reset and o(0,1,0..1). Entry t is written when o_t+1 is
    # appended; the terminated episode's last entry at clip_episode(True); the final,
    # unfinished episode's last observation (0,1,1) never gets an entry (clip_episode(False)).
    trace = ADAPTER.run_replay(ReplayScenario(THREE, capacity=8, fill_steps=5, batch_size=4))
    assert _stored(trace) == [
        ((0, 0, 0), F, 0.0),
        ((0, 0, 1), M, 1.0),
        ((0, 0, 2), M, 2.0),
        ((0, 1, 0), F, 0.0),
    ]
    sampled = [w[0] for d in trace.of_kind("sampled") for w in d.windows]
    assert len(sampled) == 4
    assert set(sampled) <= {item for item, _, _ in _stored(trace)}


def test_an_empty_buffer_gives_an_empty_draw() -> None:
    trace = ADAPTER.run_replay(ReplayScenario(THREE, capacity=8, fill_steps=1, batch_size=2))
    assert _stored(trace) == []
    assert [d.windows for d in trace.of_kind("sampled")] == [()]


def test_what_d3rlpy_cannot_express_is_refused() -> None:
    with pytest.raises(Unsupported, match="no vector env"):
        ADAPTER.run_replay(ReplayScenario(EnvSpec(2), capacity=8, fill_steps=4))
    with pytest.raises(Unsupported, match="period 2"):
        ADAPTER.run_replay(
            ReplayScenario(THREE, capacity=8, fill_steps=4, sampling=SamplingSpec(2, period=2))
        )
    with pytest.raises(Unsupported, match="update_interval"):
        ADAPTER.run_trainer(
            TrainerScenario(THREE, TrainerConfig(unroll_length="1/2", num_iterations=2))
        )


def test_train_calls_follow_fit_online_gate() -> None:
    # update_interval 2, batch_size 2: fit_online trains at total_step 2, 4, ... once
    # buffer.transition_count > 2. After step 2 one entry is stored (warmup); after step 4
    # three (trained, one update of two transitions).
    scenario = TrainerScenario(
        THREE,
        TrainerConfig(num_iterations=3, unroll_length=2, mini_batch_size=2, capacity=8),
    )
    trace = ADAPTER.run_trainer(scenario)
    calls = [(e.call, e.status, e.stored_total) for e in trace.of_kind("train_call")]
    assert calls == [(0, "warmup", 1), (1, "trained", 3), (2, "trained", 6)]
    updates = list(trace.of_kind("update"))
    assert [(u.call, len(u.windows)) for u in updates] == [(1, 2), (2, 2)]
    assert [e.env_steps for e in trace.of_kind("iteration_end")] == [2, 4, 6]


def test_each_update_runs_with_the_updates_made_before_it() -> None:
    """update-counter, variant count-before: grad_step is handed to update k as k - 1."""
    scenario = TrainerScenario(
        THREE,
        TrainerConfig(
            num_iterations=4,
            unroll_length=2,
            num_updates_per_train_iter=2,
            capacity=8,
            counter_mode="per-mini-batch",
        ),
    )
    trace = ADAPTER.run_trainer(scenario)
    counters = [u.counter for u in trace.of_kind("update")]
    assert counters == list(range(len(counters))) and len(counters) >= 4
    outcome = _check_outcome("update-counter", scenario)
    assert outcome.status == "deviation" and outcome.variant == "count-before", outcome.message


def test_windows_end_at_the_drawn_entry_and_are_padded_in_front() -> None:
    # Entries (0,0,0..2) and (0,1,0) (see above); windows of 2 from sample_trajectory_batch
    # end at the drawn entry: an episode's first entry gives (padding, first).
    scenario = ReplayScenario(
        THREE, capacity=8, fill_steps=5, sampling=SamplingSpec(2), batch_size=64
    )
    windows = {w for d in ADAPTER.run_replay(scenario).of_kind("sampled") for w in d.windows}
    assert windows == {
        (None, (0, 0, 0)),
        ((0, 0, 0), (0, 0, 1)),
        ((0, 0, 1), (0, 0, 2)),
        (None, (0, 1, 0)),
    }


def _replay_outcomes(scenario: ReplayScenario) -> dict[str, str]:
    """The suite's replay checks on ``scenario``, with the adapter's expectations file."""
    from pathlib import Path

    import xpspec.adapters.d3rlpy as module
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.engine import Session
    from xpspec.conformance.expectations import Expectations

    path = Path(module.__file__).with_suffix(".expectations.toml")
    session = Session(ADAPTER, "d3rlpy", Expectations.load(path))
    return {
        check.name: session.evaluate(check, "one-env", scenario).status
        for check in ALL_CHECKS
        if check.capability == "replay" and check.applies(scenario)
    }


@pytest.mark.parametrize("fill", [4, 11, 30])
def test_single_transitions_pass_the_replay_checks(fill: int) -> None:
    # No catalogue replay scenario has one env (d3rlpy's only case): the suite's checks are
    # run here on one-env scenarios, with evictions (capacity 6) from fill 11 on.
    scenario = ReplayScenario(THREE, capacity=6, fill_steps=fill, batch_size=32, draws=8)
    outcomes = _replay_outcomes(scenario)
    assert outcomes and set(outcomes.values()) == {"pass"}, outcomes


def test_front_padded_windows_are_the_declared_finding() -> None:
    scenario = ReplayScenario(
        THREE, capacity=6, fill_steps=11, sampling=SamplingSpec(2), batch_size=32, draws=8
    )
    outcomes = _replay_outcomes(scenario)
    assert outcomes["replay-windows"] == "deviation", outcomes


def test_one_step_stores_nothing_the_declared_finding() -> None:
    # collect(1) steps from o_0 but its closing clip_episode(False) writes no entry.
    scenario = ReplayScenario(THREE, capacity=6, fill_steps=1, batch_size=32, draws=2)
    outcomes = _replay_outcomes(scenario)
    assert outcomes["replay-no-window"] == "deviation", outcomes
    assert outcomes["replay-windows"] == "pass", outcomes


def test_a_fifo_buffer_of_one_ends_the_run_where_d3rlpy_raises() -> None:
    # FIFOBuffer(limit=1) takes entry (0,0,0) at step 2 and raises IndexError on (0,0,1) at
    # step 3 (dataset/buffers.py); the trace holds the one entry taken and says why it ends.
    scenario = TrainerScenario(THREE, TrainerConfig(num_iterations=6, capacity=1))
    trace = ADAPTER.run_trainer(scenario)
    assert "deque index out of range" in trace.header["stopped"]
    assert _stored(trace) == [((0, 0, 0), F, 0.0)]
    assert trace.events[-1].kind == "run_end"


def _fates(trace: Trace) -> list[tuple[str, int, list[tuple[int, int]]]]:
    """Hold, store and exclude events as ``(kind, iteration, [(episode, t), ...])``."""
    kinds = ("hold", "store", "exclude")
    return [
        (e.kind, e.iteration, list(zip(e.episode, e.t))) for e in trace.events if e.kind in kinds
    ]


def test_write_at_termination_holds_an_episode_and_releases_it_where_it_ends() -> None:
    # ReplayBuffer(write_at_termination=True): every step fit_online appends is held in the
    # writer's active episode; clip_episode(True) at step 3 hands the buffer entries 0..2,
    # annotated with the episode's terminated flag. The held (0,2,0) of step 7 has no
    # transition yet: fit_online's closing clip_episode(False) returns at once and the
    # writer's active episode still holds it, which the run end names.
    scenario = TrainerScenario(THREE, TrainerConfig(num_iterations=7), EpisodeDelayed())
    trace = ADAPTER.run_trainer(scenario)
    assert _fates(trace) == [
        ("hold", 1, [(0, 0)]),
        ("hold", 2, [(0, 1)]),
        ("hold", 3, [(0, 2)]),
        ("store", 3, [(0, 0), (0, 1), (0, 2)]),
        ("hold", 4, [(1, 0)]),
        ("hold", 5, [(1, 1)]),
        ("hold", 6, [(1, 2)]),
        ("store", 6, [(1, 0), (1, 1), (1, 2)]),
        ("hold", 7, [(2, 0)]),
    ]
    assert {a for e in trace.of_kind("store") for a in e.annotation} == {1.0}
    assert [e.pending for e in trace.of_kind("iteration_end")] == [1, 2, 0, 1, 2, 0, 1]
    end = next(trace.of_kind("run_end"))
    assert list(zip(end.env, end.episode, end.t)) == [(0, 2, 0)]


def test_fit_online_writes_a_held_episode_but_its_last_step_when_it_ends() -> None:
    # Eight steps: (2,0) and (2,1) are held when the loop ends; its clip_episode(False)
    # writes entry (2,0), annotated 0 (not terminated), and drops (2,1); nothing stays held.
    scenario = TrainerScenario(THREE, TrainerConfig(num_iterations=8), EpisodeDelayed())
    trace = ADAPTER.run_trainer(scenario)
    last = list(trace.of_kind("store"))[-1]
    assert (last.iteration, list(zip(last.episode, last.t)), last.annotation) == (
        8,
        [(2, 0)],
        (0.0,),
    )
    assert trace.events[-2] == last and next(trace.of_kind("run_end")).t == ()


def test_an_outcome_the_user_buffer_rejects_is_excluded() -> None:
    # keep="failure" on terminated episodes: the ReplayBuffer subclass's clip_episode(True)
    # makes its FIFO leave out every entry the writer hands it, reason "outcome".
    scenario = TrainerScenario(
        THREE, TrainerConfig(num_iterations=6), EpisodeDelayed(keep="failure")
    )
    trace = ADAPTER.run_trainer(scenario)
    excluded = [
        (e.iteration, e.reason, list(zip(e.episode, e.t))) for e in trace.of_kind("exclude")
    ]
    assert excluded == [
        (3, "outcome", [(0, 0), (0, 1), (0, 2)]),
        (6, "outcome", [(1, 0), (1, 1), (1, 2)]),
    ]
    assert list(trace.of_kind("store")) == []
    calls = {e.status for e in trace.of_kind("train_call")}
    assert calls == {"warmup"}


def test_a_user_buffer_protocol_leaves_out_the_selected_entries() -> None:
    # ExcludeSteps(every=3, offset=1): the user's FIFO drops each entry whose observation has
    # t = 1, when d3rlpy's writer hands it over (one loop step after its env step).
    scenario = TrainerScenario(THREE, TrainerConfig(num_iterations=6), ExcludeSteps(3, 1))
    trace = ADAPTER.run_trainer(scenario)
    assert _fates(trace) == [
        ("store", 2, [(0, 0)]),
        ("exclude", 3, [(0, 1)]),
        ("store", 3, [(0, 2)]),
        ("store", 5, [(1, 0)]),
        ("exclude", 6, [(1, 1)]),
        ("store", 6, [(1, 2)]),
    ]
    assert {e.reason for e in trace.of_kind("exclude")} == {"step"}


def test_preprocessing_d3rlpy_cannot_express_is_refused() -> None:
    with pytest.raises(Unsupported, match="task id"):
        ADAPTER.run_trainer(
            TrainerScenario(THREE, TrainerConfig(num_iterations=2), ExcludeTasks((0,)))
        )
    with pytest.raises(Unsupported, match="stores no step type"):
        ADAPTER.run_trainer(
            TrainerScenario(THREE, TrainerConfig(num_iterations=2), OverwriteStepType())
        )


def _check_outcome(check_name: str, scenario: TrainerScenario) -> Any:
    """The suite's ``check_name`` on ``scenario``, with the adapter's expectations file."""
    from pathlib import Path

    import xpspec.adapters.d3rlpy as module
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.engine import Session
    from xpspec.conformance.expectations import Expectations

    path = Path(module.__file__).with_suffix(".expectations.toml")
    session = Session(ADAPTER, "d3rlpy", Expectations.load(path))
    check = next(c for c in ALL_CHECKS if c.name == check_name)
    return session.evaluate(check, "counted", scenario)


def _trainer_outcomes(name: str) -> dict[str, str]:
    """The suite's preprocessing checks on the catalogue scenario ``name``, with the
    adapter's expectations file."""
    from pathlib import Path

    import xpspec.adapters.d3rlpy as module
    from xpspec.conformance.catalog import CATALOG
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.engine import Session
    from xpspec.conformance.expectations import Expectations

    path = Path(module.__file__).with_suffix(".expectations.toml")
    session = Session(ADAPTER, "d3rlpy", Expectations.load(path))
    scenario = CATALOG[name]
    return {
        check.name: session.evaluate(check, name, scenario).status
        for check in ALL_CHECKS
        if check.capability == "trainer"
        and check.applies(scenario)
        and check.name in ("conservation", "exclusion", "delayed-per-env", "pending-at-end")
    }


def test_exclusion_through_the_user_buffer_passes_where_every_step_gets_an_entry() -> None:
    # exclude-episodes-b1: terminated episodes of 4 steps and a run of 4 whole episodes, so
    # d3rlpy's writer hands the user's buffer an entry for every step.
    outcomes = _trainer_outcomes("exclude-episodes-b1")
    assert outcomes == {"conservation": "pass", "exclusion": "pass", "pending-at-end": "pass"}


def test_write_at_termination_runs_are_the_declared_findings() -> None:
    outcomes = _trainer_outcomes("delayed-b1")
    assert outcomes == {
        "conservation": "pass",
        "delayed-per-env": "deviation",
        "pending-at-end": "deviation",
    }


def test_the_closing_release_follows_the_last_partial_iteration() -> None:
    # update_interval 3, n_steps 8: the third iteration (steps 7, 8) is cut by the budget and
    # ends at fit_online's callback of step 8; the closing clip_episode(False) then writes
    # (2,0) and discards (2,1).
    scenario = TrainerScenario(
        THREE,
        TrainerConfig(num_iterations=0, num_env_steps=8, unroll_length=3),
        EpisodeDelayed(),
    )
    trace = ADAPTER.run_trainer(scenario)
    kinds = [e.kind for e in trace.events]
    assert kinds[-3:] == ["iteration_end", "store", "run_end"]
    end = trace.events[-3]
    assert (end.iteration, end.env_steps, end.pending) == (3, 8, 2)
    assert list(zip(trace.events[-2].episode, trace.events[-2].t)) == [(2, 0)]
