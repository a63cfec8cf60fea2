"""The ALF adapter: what it records of ALF's own behaviour (snapshot 23aca492, run from a
checkout), on scenarios small enough to derive every expected value by hand, served as the
suite serves it (a worker forking a child per operation). Skipped when ALF is not on the path
(it is not on PyPI; see the conformance(alf) nox session)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
import torch

alf_adapter = pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from xpspec.conformance.harness import connect  # noqa: E402
from xpspec.conformance.outcomes import AdapterUnavailable  # noqa: E402
from xpspec.protocol.adapter import Unsupported  # noqa: E402
from xpspec.protocol.config import DrainSpec, TrainerConfig  # noqa: E402
from xpspec.protocol.env_spec import EnvSpec  # noqa: E402
from xpspec.protocol.preprocessors import EpisodeDelayed, ExcludeSteps  # noqa: E402
from xpspec.protocol.scenario import (  # noqa: E402
    LearnerScenario,
    RelabelScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule  # noqa: E402
from xpspec.protocol.trace import Trace  # noqa: E402
from xpspec.refimpl.adapter import RefimplAdapter  # noqa: E402
from xpspec.refimpl.preprocess import RewardTransform  # noqa: E402
from xpspec.refimpl.replay import SamplingSpec  # noqa: E402

F, M, L = 0, 1, 2


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _trainer(adapter: Any, env: EnvSpec, **knobs: Any) -> Trace:
    trace: Trace = adapter.run_trainer(TrainerScenario(env, TrainerConfig(**knobs)))
    return trace


def _calls(trace: Trace) -> list[int]:
    per = {e.iteration: 0 for e in trace.of_kind("iteration")}
    for e in trace.of_kind("train_call"):
        per[e.iteration] += 1
    return [per[k] for k in sorted(per)]


def _unrolled(trace: Trace) -> list[int]:
    return [e.iteration for e in trace.of_kind("env_step")]


def test_info_and_smoke(adapter: Any) -> None:
    info = adapter.info()
    assert info.name == "alf"
    assert {
        "trainer",
        "replay",
        "learner",
        "relabel",
        "counter",
        "update-counter",
        "hooks",
        "state",
        "loss-mask",
        "bootstrap",
        "nstep",
        "recurrent",
        "stack",
        "priorities",
        "importance-weights",
        "checkpoint",
        "offline",
        "env",
        "async",
    } == set(info.capabilities)
    assert info.framework_version == "unknown" or len(info.framework_version) == 8
    adapter.smoke()


def test_alf_needs_a_fresh_process_per_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    # One process would carry ALF's locked configuration, global counter and env from one
    # operation into the next: inline isolation is refused, and so is a second operation.
    with pytest.raises(AdapterUnavailable, match="needs a fresh process per operation"):
        connect("alf", isolation="inline")
    monkeypatch.setattr(alf_adapter, "_claimed", True)  # as after one operation
    with pytest.raises(RuntimeError, match="expected a process that has run no ALF operation"):
        alf_adapter.ALFAdapter().smoke()


def test_plain_run_records_every_seam_in_order(adapter: Any) -> None:
    # Episodes of 2 transitions, u = 1, 4 iterations: items (0,0,0) F, (0,0,1) M, (0,0,2) L,
    # (0,1,0) F; the policy state counts steps since FIRST (0, 1, 2, 0) and the action is
    # state % 2 (0, 1, 0, 0). Each iteration: its counter k, one env step, its store, one
    # call that trains one window of one stored item, after_update, after_train_iter.
    trace = _trainer(adapter, EnvSpec(1, (FixedSchedule(2),)), num_iterations=4)
    steps = list(trace.of_kind("env_step"))
    assert [(e.episode[0], e.t[0], e.step_type[0]) for e in steps] == [
        (0, 0, F),
        (0, 1, M),
        (0, 2, L),
        (1, 0, F),
    ]
    assert [e.policy_state[0] for e in steps] == [0, 1, 2, 0]
    assert [e.action[0] for e in steps] == [0, 1, 0, 0]
    assert [e.discount[0] for e in steps] == [1.0, 1.0, 0.0, 1.0]
    first = [e.kind for e in trace.events[:8]]
    assert first == [
        "iteration",
        "env_step",
        "store",
        "train_call",
        "update",
        "hook",
        "hook",
        "iteration_end",
    ]
    assert [e.counter for e in trace.of_kind("iteration")] == [1, 2, 3, 4]
    assert [e.status for e in trace.of_kind("train_call")] == ["trained"] * 4
    stored = [(0, e.episode[0], e.t[0]) for e in trace.of_kind("store")]
    for update in trace.of_kind("update"):
        ((item,),) = update.windows
        assert item in stored[: update.iteration]  # only items stored so far
        assert update.loss_mask == ((0 if item == (0, 0, 2) else 1,),)  # LAST masked
    assert trace.events[-1].kind == "run_end"


def test_the_loss_mask_is_alfs_own(adapter: Any) -> None:
    """The recorded loss mask is read from ALF (the valid_masks it passes to
    update_with_gradient), not made by the adapter: turning ALF's own
    mask_out_loss_for_last_step off unmasks the LAST in the recorded mask."""
    env = EnvSpec(1, (FixedSchedule(2),))
    for mask_last in (True, False):
        trace = _trainer(adapter, env, num_iterations=9, mini_batch_size=8, mask_last=mask_last)
        seen = {
            (item, mask)
            for update in trace.of_kind("update")
            for window, row in zip(update.windows, update.loss_mask)
            for item, mask in zip(window, row)
        }
        lasts = {mask for (_, _, t), mask in seen if t == 2}
        others = {mask for (_, _, t), mask in seen if t != 2}
        assert lasts == ({0} if mask_last else {1}) and others == {1}


def test_fractional_unroll_and_the_lazy_buffer(adapter: Any) -> None:
    # u = 1/4: unrolls on iterations 4 and 8 (0.25 is exact in binary). ALF builds its replay
    # buffer at the first store and returns from train_iter while it has none, so iterations
    # 1-3 make no train call; from 4 on one call per iteration. after_train_iter only follows
    # an unroll.
    trace = _trainer(
        adapter, EnvSpec(1, (FixedSchedule(4),)), unroll_length=Fraction(1, 4), num_iterations=8
    )
    assert _unrolled(trace) == [4, 8]
    assert _calls(trace) == [0, 0, 0, 1, 1, 1, 1, 1]
    hooks = [e.iteration for e in trace.of_kind("hook") if e.name == "after_train_iter"]
    assert hooks == [4, 8]


def test_float_carry_delays_the_tenth_unroll(adapter: Any) -> None:
    # The fraction is carried in a double: ten additions of 0.1 give 0.9999999999999999, so the
    # first unroll is on iteration 11, not 10 (and the next on 21, not 20).
    carry, expected = 0.0, []
    for k in range(1, 23):
        x = carry + 0.1
        if int(x):
            expected.append(k)
        carry = x - int(x)
    assert expected == [11, 21]
    trace = _trainer(
        adapter, EnvSpec(1, (FixedSchedule(4),)), unroll_length=Fraction(1, 10), num_iterations=22
    )
    assert _unrolled(trace) == expected


def test_warmup_counts_the_capped_size(adapter: Any) -> None:
    # B = 2, rings of 2 items, initial_collect_steps 6: ALF compares the current size (at most
    # 2 * 2 = 4) with 6, so no call ever trains, although 6 items are stored by iteration 3.
    trace = _trainer(
        adapter,
        EnvSpec(2, (FixedSchedule(4),)),
        num_iterations=5,
        capacity=2,
        initial_collect_steps=6,
    )
    assert [e.status for e in trace.of_kind("train_call")] == ["warmup"] * 5
    assert [e.stored_total for e in trace.of_kind("train_call")] == [2, 4, 6, 8, 10]
    assert not list(trace.of_kind("update"))


def test_clearing_keeps_a_ring_of_u_plus_one(adapter: Any) -> None:
    # u = 2, whole buffer with clearing: ALF's ring holds 3 items and initial_collect_steps
    # becomes 3. Iteration 1 stores t = 0, 1 (size 2 < 3: warm-up); iteration 2 stores t = 2, 3
    # and trains on the ring's 3 items t = 1, 2, 3 (windows of 1, mini-batches of B = 1: three
    # updates); iteration 3 on t = 3, 4, 5.
    trace = _trainer(
        adapter,
        EnvSpec(1, (FixedSchedule(20),)),
        unroll_length=Fraction(2),
        num_iterations=3,
        whole_buffer=True,
        clear="keep-one-step",
        capacity=8,
    )
    assert [e.status for e in trace.of_kind("train_call")] == ["warmup", "trained", "trained"]
    by_call: dict[int, list[int]] = {}
    for u in trace.of_kind("update"):
        ((item,),) = u.windows
        by_call.setdefault(u.call, []).append(item[2])
    assert {c: sorted(ts) for c, ts in by_call.items()} == {1: [1, 2, 3], 2: [3, 4, 5]}


def test_per_mini_batch_counter(adapter: Any) -> None:
    # update_counter_every_mini_batch: no increment per iteration; K = 2 updates per call, so
    # the counter reads 0, 2, 4 at the starts of iterations 1-3 and 1, 2, 3, ... at updates.
    trace = _trainer(
        adapter,
        EnvSpec(1, (FixedSchedule(4),)),
        num_iterations=3,
        counter_mode="per-mini-batch",
        num_updates_per_train_iter=2,
    )
    assert [e.counter for e in trace.of_kind("iteration")] == [0, 2, 4]
    assert [e.counter for e in trace.of_kind("update")] == [1, 2, 3, 4, 5, 6]


def test_alf_raising_ends_the_run_with_its_source_line(adapter: Any) -> None:
    # Windows of 2 after one stored item per env: ALF's get_batch asserts in iteration 1
    # instead of waiting, and the run ends there with nothing completed.
    trace = _trainer(
        adapter, EnvSpec(1, (FixedSchedule(4),)), num_iterations=2, mini_batch_length=2
    )
    assert re.search(r"replay_buffer\.py.*enough data", trace.header["stopped"])
    assert "iteration 1" in trace.header["stopped"]
    assert [e.kind for e in trace.events] == ["run_end"]
    # A fractional unroll length with clearing makes a ring of 1.5 items: iteration 1 unrolls
    # nothing, iteration 2 stores the first item and ALF fails to create the buffer.
    trace = _trainer(
        adapter,
        EnvSpec(1, (FixedSchedule(4),)),
        unroll_length=Fraction(1, 2),
        num_iterations=3,
        whole_buffer=True,
        clear="all",
    )
    assert "TypeError" in trace.header["stopped"] and "tensor_specs.py" in trace.header["stopped"]
    assert [e.iteration for e in trace.of_kind("iteration")] == [1]
    # The same buffer created by the user's end-of-run flush: an episode-delaying hook holds
    # every step of the unfinished episode through the run, so nothing is stored until the
    # flush, where ALF raises; every iteration completed.
    trace = adapter.run_trainer(
        TrainerScenario(
            EnvSpec(1, (FixedSchedule(6, "truncated"),)),
            TrainerConfig(
                unroll_length=Fraction(1, 2),
                num_iterations=4,
                whole_buffer=True,
                clear="all",
                pending_at_end="flush",
            ),
            EpisodeDelayed(),
        )
    )
    assert "in the end-of-run flush" in trace.header["stopped"]
    assert "tensor_specs.py" in trace.header["stopped"]
    assert [e.iteration for e in trace.of_kind("iteration_end")] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("knobs", "sampling", "why"),
    [
        ({"mode": "on-policy", "unroll_length": Fraction(2)}, None, "on-policy"),
        ({"unroll_length": Fraction(0), "drain": DrainSpec()}, None, "drain"),
        ({}, SamplingSpec(boundary="forbid"), "forbid"),
        ({}, SamplingSpec(period=2), "period 2"),
    ],
)
def test_inexpressible_scenarios_are_unsupported(
    adapter: Any, knobs: dict[str, Any], sampling: SamplingSpec | None, why: str
) -> None:
    scenario = TrainerScenario(
        EnvSpec(), TrainerConfig(num_iterations=2, **knobs), sampling=sampling or SamplingSpec()
    )
    with pytest.raises(Unsupported, match=why):
        adapter.run_trainer(scenario)


def test_whole_buffer_training_of_unequal_envs_is_gather_alls_documented_precondition(
    adapter: Any,
) -> None:
    # Leaving out the rows of task 1 stores unequally per env: gather_all documents that it
    # raises for envs of different sizes, so the scenario does not meet ALF's precondition
    # (not applicable), where a stop would be a finding.
    from xpspec.protocol.preprocessors import ExcludeTasks, Identity

    scenario = TrainerScenario(
        EnvSpec(2, (FixedSchedule(1, "terminated"),), num_tasks=2),
        TrainerConfig(num_iterations=1, whole_buffer=True, capacity=1),
        ExcludeTasks((1,)),
    )
    with pytest.raises(Unsupported, match="gather_all documents"):
        adapter.run_trainer(scenario)
    # The control: the same run without exclusion trains on the whole buffer.
    plain = replace(scenario, preprocess=Identity())
    assert "stopped" not in adapter.run_trainer(plain).header


def test_relabel_strategies_other_than_future_are_unsupported(adapter: Any) -> None:
    with pytest.raises(Unsupported, match="future goals only"):
        adapter.run_relabel(RelabelScenario(EnvSpec(goals=True), fill_steps=4, strategy="final"))


def _stored(trace: Trace) -> list[tuple[int, tuple[int, ...], tuple[float, ...]]]:
    return [(e.iteration, e.t, e.annotation) for e in trace.of_kind("store")]


def test_a_reward_transform_is_stored_as_alf_holds_it(adapter: Any) -> None:
    # The user's observe_for_replay scales the reward before ALF's own store: what ALF's buffer
    # holds (read back) is 2r + 1 of what was unrolled, every other field unchanged.
    trace = _trainer(adapter, EnvSpec(2, (FixedSchedule(2),)), num_iterations=3)
    scenario = TrainerScenario(
        EnvSpec(2, (FixedSchedule(2),)),
        TrainerConfig(num_iterations=3),
        RewardTransform(Fraction(2), Fraction(1)),
    )
    scaled = adapter.run_trainer(scenario)
    for plain, store in zip(trace.of_kind("store"), scaled.of_kind("store"), strict=True):
        assert store.reward == tuple(2 * r + 1 for r in plain.reward)
        assert (store.t, store.step_type, store.discount) == (
            plain.t,
            plain.step_type,
            plain.discount,
        )


def test_exclusion_stores_the_other_rows_and_trains_every_iteration(adapter: Any) -> None:
    # Episodes of 2 transitions, t = 0, 1, 2, 0 over 4 iterations; rows with even t are dropped
    # by the user's hook. Iteration 1 stores nothing, so ALF has no buffer and makes no call;
    # from iteration 2 on it makes one call per iteration, whatever was stored.
    scenario = TrainerScenario(
        EnvSpec(2, (FixedSchedule(2),)), TrainerConfig(num_iterations=4), ExcludeSteps(2, 0)
    )
    trace = adapter.run_trainer(scenario)
    assert [(e.iteration, e.env, e.t) for e in trace.of_kind("store")] == [(2, (0, 1), (1, 1))]
    excluded = [(e.iteration, e.t, e.reason) for e in trace.of_kind("exclude")]
    assert excluded == [(1, (0, 0), "step"), (3, (2, 2), "step"), (4, (0, 0), "step")]
    assert _calls(trace) == [0, 1, 1, 1]


def test_an_episode_is_released_at_its_last_annotated_by_outcome(adapter: Any) -> None:
    # One env, episodes of 2 transitions that terminate: t = 0, 1 are held, the LAST of
    # iteration 3 releases (0, 0, 0..2) as one store annotated 1.0; (0, 1, 0) is still held
    # at the end and named by the run end.
    scenario = TrainerScenario(
        EnvSpec(1, (FixedSchedule(2),)), TrainerConfig(num_iterations=4), EpisodeDelayed()
    )
    trace = adapter.run_trainer(scenario)
    assert [e.t for e in trace.of_kind("hold")] == [(0,), (1,), (2,), (0,)]
    assert _stored(trace) == [(3, (0, 1, 2), (1.0, 1.0, 1.0))]
    assert [e.pending for e in trace.of_kind("iteration_end")] == [1, 2, 0, 1]
    assert _calls(trace) == [0, 0, 1, 1]
    end = trace.events[-1]
    assert (end.env, end.episode, end.t) == ((0,), (1,), (0,))
    # Only failures kept, and the held step flushed at the end: excluded by outcome instead,
    # and the flush stores (0, 1, 0) unannotated after the last iteration.
    scenario = replace(scenario, preprocess=EpisodeDelayed("failure"))
    scenario = replace(scenario, trainer=replace(scenario.trainer, pending_at_end="flush"))
    trace = adapter.run_trainer(scenario)
    assert [(e.iteration, e.t, e.reason) for e in trace.of_kind("exclude")] == [
        (3, (0, 1, 2), "outcome")
    ]
    assert _stored(trace) == [(4, (0,), (0.0,))]
    assert trace.events[-1].t == ()


def test_finding_an_env_with_nothing_stored_stops_sampling() -> None:
    # ALF alone: a hook that stores env 0's rows only (add_batch with env_ids) leaves env 1's
    # ring empty, and the uniform sampler refuses every draw however much env 0 holds.
    import alf
    from alf.experience_replayers.replay_buffer import ReplayBuffer

    buffer = ReplayBuffer({"x": alf.TensorSpec(())}, num_environments=2, max_length=8)
    for x in range(4):
        buffer.add_batch({"x": torch.tensor([float(x)])}, env_ids=torch.tensor([0]))
    assert int(buffer.total_size) == 4
    with pytest.raises(AssertionError, match="Not all environments have enough data"):
        buffer.get_batch(2, 1)


def test_delayed_release_in_one_env_ends_the_run(adapter: Any) -> None:
    # Two envs with episodes of 2 and 3 transitions: env 0 releases its first episode in
    # iteration 3 while env 1 still holds all of its own; ALF's first train call then raises.
    env = EnvSpec(2, (FixedSchedule(2), FixedSchedule(3)))
    trace = adapter.run_trainer(
        TrainerScenario(env, TrainerConfig(num_iterations=6), EpisodeDelayed())
    )
    assert "Not all environments have enough data" in trace.header["stopped"]
    assert "iteration 3" in trace.header["stopped"]
    assert [e.iteration for e in trace.of_kind("iteration_end")] == [1, 2]


def test_replay_balances_envs_and_stays_in_the_ring(adapter: Any) -> None:
    # Two envs, rings of 4, 6 writes: each env holds its items 2..5. ALF assigns envs
    # arange(2) repeated batch // 2 times, so a batch of 4 comes as envs 0, 1, 0, 1; every
    # window of 2 is two consecutive items still in its env's ring.
    env = EnvSpec(2, (FixedSchedule(3),))
    scenario = ReplayScenario(
        env, capacity=4, fill_steps=6, batch_size=4, draws=3, sampling=SamplingSpec(2)
    )
    trace = adapter.run_replay(scenario)
    ring = {e: [(e, 0, 2), (e, 0, 3), (e, 1, 0), (e, 1, 1)] for e in (0, 1)}
    draws = list(trace.of_kind("sampled"))
    assert len(draws) == 3
    for d in draws:
        assert [w[0][0] for w in d.windows] == [0, 1, 0, 1]
        for a, b in d.windows:
            live = ring[a[0]]
            assert live.index(b) == live.index(a) + 1


def test_relabel_future_goals_and_rewards(adapter: Any) -> None:
    # Ratio 1: ALF relabels every row (rand < 1); each goal step lies in [t + 1, t_end] of the
    # row's episode and the reward is 0 iff the goal is the successor's achieved goal. Pairs
    # starting at a LAST (get_batch crosses episodes) are no transitions and are left out.
    plans = (EpisodePlan(2, "terminated"), EpisodePlan(3, "truncated"))
    env = EnvSpec(1, (CycleSchedule(plans),), goals=True)
    scenario = RelabelScenario(
        env, fill_steps=9, capacity=9, ratio=Fraction(1), batch_size=8, draws=3
    )
    trace = adapter.run_relabel(scenario)
    # 9 stored items: episode 0 is t = 0..2, episode 1 is t = 0..3, episode 2 is in progress
    # with t = 0, 1; t_end is each one's LAST, or its newest item.
    ends = {0: 2, 1: 3, 2: 1}
    assert sum(len(e.t) for e in trace.of_kind("relabel")) > 0
    for e in trace.of_kind("relabel"):
        assert len(e.t) <= 8
        for k, t, g, r in zip(e.episode, e.t, e.goal_t, e.reward):
            assert t < ends[k]
            assert t + 1 <= g <= ends[k]
            assert r == (0.0 if g == t + 1 else -1.0)
    unchanged = adapter.run_relabel(
        RelabelScenario(env, fill_steps=9, capacity=9, ratio=Fraction(0), batch_size=8, draws=2)
    )
    assert all(g == -1 for e in unchanged.of_kind("relabel") for g in e.goal_t)


# -- learner ------------------------------------------------------------------------------------
# One env of terminated episodes of 2 transitions, 5 time steps: rows F M L F M, so episode 0
# ends at its LAST (row 2) and episode 1 is in progress, its row L the buffer's newest row.
_LEARNER = LearnerScenario(
    EnvSpec(1, (FixedSchedule(2),)), steps=5, num_epochs=2, minibatch_size=2, num_learners=1
)


def test_learner_records_ppo_rows_as_alf_computed_them(adapter: Any) -> None:
    trace = adapter.run_learner(_LEARNER)
    done, running = trace.of_kind("advantages")
    assert (done.episode, done.t, running.episode, running.t) == (0, (0, 1, 2), 1, (0, 1))
    # ALF masks the LAST row only: the in-progress episode's newest row is trained (finding)
    assert (done.loss_mask, running.loss_mask) == ((1, 1, 0), (1, 1))
    # rows L: advantage 0, return V(o_L) = value_scale * t
    assert (done.advantage[2], done.value_target[2]) == (0.0, 1.0)
    assert (running.advantage[1], running.value_target[1]) == (0.0, 0.5)
    # the transitions' advantages and targets are GAE's, as refimpl computes them
    want = {
        (e.episode, t): (a, v)
        for e in RefimplAdapter().run_learner(_LEARNER).of_kind("advantages")
        for t, a, v in zip(e.t, e.advantage, e.value_target)
    }
    for e in (done, running):
        for t, a, v in list(zip(e.t, e.advantage, e.value_target))[:-1]:
            assert (a, v) == pytest.approx(want[(e.episode, t)], abs=1e-5)
    # n = 3 with TDLoss(td_lambda=1): cut at the LAST (row 2, no bootstrap: discount 0) and at
    # the newest row (bootstrap gamma * V(o_1) = 0.9 * 0.5)
    (nstep,) = trace.of_kind("nstep")
    assert list(zip(nstep.episode, nstep.t, nstep.steps)) == [(0, 0, 2), (0, 1, 1), (1, 0, 1)]
    reward = _LEARNER.env.reward
    assert nstep.target[1] == pytest.approx(reward(0, 0, 0, 2))
    assert nstep.target[2] == pytest.approx(reward(0, 0, 1, 1) + 0.9 * 0.5)
    # 5 buffer rows (3 transitions numbered 0..2, then the rows L 3 and 4), mini-batch 2
    # resized to ceil(5 / 2) = 3: per epoch a mini-batch of 3 and one of 2, every row once
    (plan,) = trace.of_kind("update_plan")
    assert [len(rows) for rows in plan.minibatch_rows] == [3, 2, 3, 2]
    for epoch in (plan.minibatch_rows[:2], plan.minibatch_rows[2:]):
        assert sorted(r for rows in epoch for r in rows) == [0, 1, 2, 3, 4]


def test_learner_refuses_what_alf_cannot_express(adapter: Any) -> None:
    with pytest.raises(Unsupported, match="activate_ddp"):
        adapter.run_learner(replace(_LEARNER, num_learners=2))
    with pytest.raises(Unsupported, match="at least 2"):
        adapter.run_learner(replace(_LEARNER, steps=1))


def test_runs_are_deterministic(adapter: Any) -> None:
    scenario = TrainerScenario(
        EnvSpec(2, (FixedSchedule(3),)),
        TrainerConfig(num_iterations=5, mini_batch_size=3, num_updates_per_train_iter=2),
    )
    assert adapter.run_trainer(scenario).to_jsonl() == adapter.run_trainer(scenario).to_jsonl()
