"""The TorchRL adapter: what it records of TorchRL 0.14.1's own behaviour, on scenarios small
enough to derive every expected value by hand. Skipped when TorchRL is not installed."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Any, Literal

import pytest

pytest.importorskip("torchrl")

from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeSteps,
    OverwriteStepType,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RelabelScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule
from xpspec.protocol.trace import Trace

F, M, L = 0, 1, 2
Ending = Literal["terminated", "truncated"]
ADAPTER = TorchRLAdapter()


def _items(trace: Trace, kind: str) -> list[list[tuple[int, int, int]]]:
    return [list(zip(e.env, e.episode, e.t)) for e in trace.of_kind(kind)]


def _trainer(env: EnvSpec, sampling: SamplingSpec | None = None, **knobs: Any) -> Trace:
    scenario = TrainerScenario(env, TrainerConfig(**knobs), sampling=sampling or SamplingSpec())
    return ADAPTER.run_trainer(scenario)


def test_info_names_the_installed_versions() -> None:
    info = ADAPTER.info()
    assert (info.name, info.framework_version) == ("torchrl", "0.14.1")
    assert info.extra_versions["tensordict"] == "0.14.3"
    assert set(info.capabilities) == {
        "env",
        "trainer",
        "replay",
        "learner",
        "relabel",
        "counter",
        "update-counter",
        "hooks",
        "state",
        "nstep",
        "loss-mask",
        "recurrent",
        "checkpoint",
        "stack",
        "offline",
        "async",
        "priorities",
        "importance-weights",
    }
    ADAPTER.smoke()


@pytest.mark.parametrize(("ending", "discount"), [("terminated", 0.0), ("truncated", 1.0)])
def test_env_splits_the_frame_that_ends_an_episode(ending: Ending, discount: float) -> None:
    # Episodes of 2 transitions, 4 collector steps: frames from (0,0,0), (0,0,1), (0,1,0),
    # (0,1,1). The frames from t=1 end an episode: their ("next", ...) is the LAST (0,k,2),
    # recorded after them with no action (-1); TorchRL's reset gives the next FIRST.
    trace = ADAPTER.run_env(EnvScenario(EnvSpec(1, (FixedSchedule(2, ending),)), steps=4))
    events = list(trace.of_kind("env_step"))
    assert _items(trace, "env_step") == [
        [(0, 0, 0)],
        [(0, 0, 1)],
        [(0, 0, 2)],
        [(0, 1, 0)],
        [(0, 1, 1)],
        [(0, 1, 2)],
    ]
    assert [e.step_type for e in events] == [(F,), (M,), (L,)] * 2
    assert [e.reward for e in events] == [(0.0,), (1.0,), (2.0,)] * 2
    assert [e.discount for e in events] == [(1.0,), (1.0,), (discount,)] * 2
    # the counting policy acted at t = 0, 1 (state t, action t % 2); nothing acts at LAST
    assert [e.action for e in events] == [(0,), (1,), (-1,)] * 2
    assert [e.policy_state for e in events] == [(0,), (1,), (2,)] * 2


def test_trainer_stores_frames_and_never_a_last_row() -> None:
    # u = 1, one env, episodes of 2 transitions: each episode is 2 frames (roots t = 0, 1);
    # the final observation (t = 2) is only the second frame's next observation.
    trace = _trainer(EnvSpec(1, (FixedSchedule(2),)), num_iterations=4)
    expected = [[(0, 0, 0)], [(0, 0, 1)], [(0, 1, 0)], [(0, 1, 1)]]
    assert _items(trace, "env_step") == expected
    assert _items(trace, "store") == expected
    assert [e.step_type for e in trace.of_kind("store")] == [(F,), (M,), (F,), (M,)]
    assert [e.reward for e in trace.of_kind("store")] == [(0.0,), (1.0,), (0.0,), (1.0,)]
    assert [c.status for c in trace.of_kind("train_call")] == ["trained"] * 4
    assert [e.counter for e in trace.of_kind("iteration")] == [1, 2, 3, 4]
    # one update per call; call k samples one of the k frames stored so far
    for k, update in enumerate(trace.of_kind("update"), start=1):
        ((item,),) = update.windows
        assert item in [i[0] for i in expected[:k]]
    assert [e.name for e in trace.of_kind("hook")] == ["after_update", "after_train_iter"] * 4


@pytest.mark.parametrize(
    ("threshold", "gate", "statuses"),
    [
        # two frames per iteration: collected 2, 4, 6 against init_random_frames
        (3, "stored>=", ["warmup", "trained", "trained"]),
        (4, "stored>=", ["warmup", "trained", "trained"]),
        (4, "stored>", ["warmup", "warmup", "trained"]),  # passed as init_random_frames 5
    ],
)
def test_warmup_gate_counts_collected_frames(
    threshold: int, gate: str, statuses: list[str]
) -> None:
    trace = _trainer(
        EnvSpec(2, (FixedSchedule(3),)),
        num_iterations=3,
        initial_collect_steps=threshold,
        warmup_gate=gate,
    )
    assert [c.status for c in trace.of_kind("train_call")] == statuses


def test_random_frames_leave_the_policy_state_behind() -> None:
    # init_random_frames 2 with one frame per batch: the collector replaces the policy by
    # env.rand_action for the frames from t = 0 and t = 1, so the primer's state 0 is never
    # advanced; the policy first acts at t = 2 with state 0 and counts on from there.
    trace = _trainer(EnvSpec(1, (FixedSchedule(5),)), num_iterations=4, initial_collect_steps=2)
    assert [e.policy_state for e in trace.of_kind("env_step")] == [(0,), (0,), (0,), (1,)]
    assert [e.t for e in trace.of_kind("env_step")] == [(0,), (1,), (2,), (3,)]


def test_per_mini_batch_counter_is_the_trainers_optimisation_count() -> None:
    trace = _trainer(
        EnvSpec(1, (FixedSchedule(5),)),
        num_iterations=2,
        num_updates_per_train_iter=2,
        counter_mode="per-mini-batch",
    )
    assert [u.counter for u in trace.of_kind("update")] == [1, 2, 3, 4]
    assert [e.counter for e in trace.of_kind("iteration")] == [0, 2]


def _loss_mask_check(scenario: Any, trace: Trace) -> None:
    from xpspec.conformance.checks.base import Context
    from xpspec.conformance.checks.registry import ALL_CHECKS

    check = next(c for c in ALL_CHECKS if c.name == "loss-mask")
    check.verify(scenario, trace, Context(lambda s: trace, lambda s: trace))


def test_the_loss_mask_is_what_torchrls_mask_batch_lets_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SliceSampler(pad_output=True) marks its padding in ("collector", "mask") and the
    Trainer's mask_batch op drops it before the loss: the padded positions of a window have
    loss mask 0 (timestep.loss-mask-last). Perturbation: with mask_batch keeping every
    position, the padding reaches the loss and the check fails."""
    from xpspec.adapters import torchrl as adapter_module
    from xpspec.conformance.catalog import CATALOG
    from xpspec.conformance.checks.base import CheckFailure

    scenario = CATALOG["pad-boundaries"]
    trace = ADAPTER.run_trainer(scenario)  # type: ignore[arg-type]
    updates = list(trace.of_kind("update"))
    padded = [(w, m) for u in updates for w, m in zip(u.windows, u.loss_mask) if None in w]
    assert padded and all(m == tuple(0 if item is None else 1 for item in w) for w, m in padded)
    _loss_mask_check(scenario, trace)
    monkeypatch.setattr(adapter_module, "mask_batch", lambda batch: batch)
    perturbed = ADAPTER.run_trainer(scenario)  # type: ignore[arg-type]
    with pytest.raises(CheckFailure, match="loss mask"):
        _loss_mask_check(scenario, perturbed)


def test_slice_sampler_without_a_slice_stops_the_run() -> None:
    # Windows of 2 after one frame: SliceSampler raises, which ends TorchRL's Trainer.train.
    trace = _trainer(EnvSpec(1, (FixedSchedule(5),)), num_iterations=3, mini_batch_length=2)
    assert "Did not find a single trajectory" in trace.header["stopped"]
    assert [c.status for c in trace.of_kind("train_call")] == ["trained"]
    assert list(trace.of_kind("update")) == []
    assert [e.kind for e in trace.events][-1] == "run_end"


@pytest.mark.parametrize(
    "knobs",
    [
        {"unroll_length": Fraction(1, 2)},
        {"whole_buffer": True},
        {"warmup_gate": "size>="},
        {"num_env_steps": 4},
    ],
)
def test_trainer_knobs_torchrl_cannot_express(knobs: dict[str, Any]) -> None:
    with pytest.raises(Unsupported):
        _trainer(EnvSpec(1, (FixedSchedule(3),)), num_iterations=2, **knobs)


def test_unexpressible_overwrites_and_periods_are_unsupported() -> None:
    env = EnvSpec(1, (FixedSchedule(3),))
    with pytest.raises(Unsupported, match="never LAST"):
        ADAPTER.run_trainer(
            TrainerScenario(
                env, TrainerConfig(num_iterations=2), preprocess=OverwriteStepType("LAST", "t", 1)
            )
        )
    with pytest.raises(Unsupported, match="period"):
        ADAPTER.run_replay(
            ReplayScenario(env, 8, 4, SamplingSpec(window_length=2, period=2), batch_size=2)
        )


def _preprocessed(preprocess: Any, env: EnvSpec, **knobs: Any) -> Trace:
    scenario = TrainerScenario(env, TrainerConfig(**knobs), preprocess=preprocess)
    return ADAPTER.run_trainer(scenario)


def test_exclusion_masks_frames_and_still_trains_every_batch() -> None:
    # One env, u = 2, episodes of 3 transitions, ExcludeSteps(2, 1): batches of roots
    # [t0, t1], [t2, t0'], [t1', t2']; the mask drops every t = 1. Stores are read back from
    # the storage, one write per batch.
    trace = _preprocessed(
        ExcludeSteps(2, 1),
        EnvSpec(1, (FixedSchedule(3),)),
        unroll_length=Fraction(2),
        num_iterations=3,
    )
    assert _items(trace, "store") == [[(0, 0, 0)], [(0, 0, 2), (0, 1, 0)], [(0, 1, 2)]]
    assert _items(trace, "exclude") == [[(0, 0, 1)], [(0, 1, 1)]]
    assert [e.reason for e in trace.of_kind("exclude")] == ["step", "step"]
    # the reward into t = 2 (2) was in the excluded frame: the storage holds it nowhere, and
    # t = 2 is named with the reward the previous stored frame (t = 0) carries, 1
    assert [e.reward for e in trace.of_kind("store")] == [(0.0,), (1.0, 0.0), (1.0,)]
    assert [e.discount for e in trace.of_kind("store")] == [(1.0,), (1.0, 1.0), (1.0,)]
    # TorchRL's Trainer trains on every batch, however few frames the mask kept
    assert [c.status for c in trace.of_kind("train_call")] == ["trained"] * 3
    assert [e.stored_total for e in trace.of_kind("iteration_end")] == [1, 3, 4]


def test_a_batch_the_mask_empties_stops_the_run() -> None:
    trace = _preprocessed(ExcludeSteps(2, 0), EnvSpec(1, (FixedSchedule(3),)), num_iterations=3)
    assert "Expected at least one element in extend" in trace.header["stopped"]
    assert _items(trace, "exclude") == [[(0, 0, 0)]]
    assert list(trace.of_kind("store")) == []


def test_a_rejected_episode_is_dropped_without_a_write() -> None:
    # keep="failure" with terminated episodes of 2 transitions: the transform's inverse
    # returns None for each finished episode, ReplayBuffer.extend writes nothing, and the run
    # goes on to its end with both episodes excluded (reason outcome) and nothing stored.
    trace = _preprocessed(
        EpisodeDelayed("failure"),
        EnvSpec(1, (FixedSchedule(2),)),
        num_iterations=4,
        initial_collect_steps=5,
    )
    assert "stopped" not in trace.header
    assert list(trace.of_kind("store")) == []
    assert _items(trace, "exclude") == [[(0, 0, 0), (0, 0, 1)], [(0, 1, 0), (0, 1, 1)]]
    assert [e.reason for e in trace.of_kind("exclude")] == ["outcome", "outcome"]
    assert [c.status for c in trace.of_kind("train_call")] == ["warmup"] * 4


def test_reward_transform_rescales_the_stored_next_reward() -> None:
    # reward into t is t; stored 1/2 * t - 1 except at FIRST, where no reward is stored
    trace = _preprocessed(
        RewardTransform(Fraction(1, 2), Fraction(-1)),
        EnvSpec(1, (FixedSchedule(3),)),
        num_iterations=4,
    )
    assert [e.reward for e in trace.of_kind("env_step")] == [(0.0,), (1.0,), (2.0,), (0.0,)]
    assert [e.reward for e in trace.of_kind("store")] == [(0.0,), (-0.5,), (0.0,), (0.0,)]


def test_delayed_episodes_are_written_whole_and_annotated() -> None:
    # Episodes of 2 transitions; warm-up 1 so that the Trainer does not sample the empty
    # buffer. Iteration 2 ends episode 0: its 2 frames are written, annotated 1 (terminated);
    # episode 1's first frame is still in the collector's partial trajectories at the end.
    trace = _preprocessed(
        EpisodeDelayed(), EnvSpec(1, (FixedSchedule(2),)), num_iterations=3, initial_collect_steps=1
    )
    stores = list(trace.of_kind("store"))
    assert _items(trace, "store") == [[(0, 0, 0), (0, 0, 1)]]
    assert [(e.iteration, e.annotation) for e in stores] == [(2, (1.0, 1.0))]
    assert [c.status for c in trace.of_kind("train_call")] == ["warmup", "trained", "trained"]
    assert [e.pending for e in trace.of_kind("iteration_end")] == [1, 0, 1]
    ((end,),) = [list(trace.of_kind("run_end"))]
    assert list(zip(end.env, end.episode, end.t)) == [(0, 1, 0)]


def test_delayed_without_warmup_samples_the_empty_buffer() -> None:
    trace = _preprocessed(EpisodeDelayed(), EnvSpec(1, (FixedSchedule(2),)), num_iterations=3)
    assert "Cannot sample from an empty storage" in trace.header["stopped"]
    ((end,),) = [list(trace.of_kind("run_end"))]
    assert list(zip(end.env, end.episode, end.t)) == [(0, 0, 0)]


def test_replay_slices_are_uniform_over_trajectories() -> None:
    # Episodes of 2 then 8 transitions, 10 frames: trajectory 0 holds one window of 2 frames,
    # trajectory 1 seven. SliceSampler draws the trajectory first, so the lone window gets
    # Binomial(2000, 1/2) draws (sd 22.4), where uniform windows would give it 2000/8 = 250.
    plans = (EpisodePlan(2, "terminated"), EpisodePlan(8, "terminated"))
    scenario = ReplayScenario(
        EnvSpec(1, (CycleSchedule(plans),)),
        capacity=16,
        fill_steps=10,
        sampling=SamplingSpec(window_length=2),
        batch_size=100,
        draws=20,
    )
    trace = ADAPTER.run_replay(scenario)
    windows = [w for d in trace.of_kind("sampled") for w in d.windows]
    assert len(windows) == 2000
    assert all(w[0][1] == w[1][1] and w[1][2] == w[0][2] + 1 for w in windows)
    lone = sum(1 for w in windows if w == ((0, 0, 0), (0, 0, 1)))
    assert abs(lone - 1000) < 5 * math.sqrt(2000 * 0.25)


def _learner(**knobs: Any) -> Trace:
    env = EnvSpec(1, (FixedSchedule(2, "terminated"),))
    base: dict[str, Any] = {"steps": 3, "gamma": Fraction(1, 2), "lam": Fraction(3, 4)}
    base.update(value_scale=Fraction(1), nstep=2, num_epochs=2, minibatch_size=1, num_learners=1)
    base.update(knobs)
    return ADAPTER.run_learner(LearnerScenario(env, **base))


def test_multistep_bootstraps_from_the_terminal_observation() -> None:
    # One terminated episode of 2 transitions, rewards 1 and 2, V(s) = t, gamma 1/2, n = 2.
    # t=0: the window reaches the terminal step after 2 rewards; the spec's target is
    # 1 + 2/2 = 2.0. MultiStep leaves ("next", "terminated") of this frame False, so
    # TD0Estimator adds gamma^2 * V(o_2) = 0.5: 2.5. t=1: 2.0, its own flag is terminated.
    ((nstep),) = list(_learner().of_kind("nstep"))
    assert nstep.t == (0, 1)
    assert nstep.steps == (2, 1)
    assert nstep.target == pytest.approx((2.5, 2.0))


def test_gae_is_per_episode_and_normalised_with_the_sample_std() -> None:
    # delta_1 = 2 - 1 = 1 (terminated), A_1 = 1; delta_0 = 1 + 1/2 * 1 - 0 = 3/2,
    # A_0 = 3/2 + 1/2 * 3/4 * 1 = 15/8; the bootstrap row t=2 is masked.
    ((adv),) = list(_learner().of_kind("advantages"))
    assert adv.t == (0, 1, 2)
    assert adv.advantage == pytest.approx((1.875, 1.0, 0.0))
    assert adv.loss_mask == (1, 1, 0)
    real = [1.875, 1.0]
    mean, sample_std = statistics.fmean(real), statistics.stdev(real)
    # GAE(average_gae=True) divides by torch's default (Bessel-corrected) std: +-1/sqrt(2)
    # here, where the spec's population std gives +-1.
    assert adv.normalized[:2] == pytest.approx([(a - mean) / sample_std for a in real])
    assert adv.normalized[0] == pytest.approx(1 / math.sqrt(2))


def test_update_plan_uses_every_row_once_per_epoch() -> None:
    ((plan),) = list(_learner().of_kind("update_plan"))
    assert plan.num_updates == 4  # 2 epochs x ceil(2 rows / 1)
    assert sorted(plan.minibatch_rows[:2]) == [(0,), (1,)]
    assert sorted(plan.minibatch_rows[2:]) == [(0,), (1,)]


def test_several_learners_are_unsupported() -> None:
    with pytest.raises(Unsupported, match="num_learners"):
        _learner(num_learners=2)


def test_relabel_final_uses_the_episodes_last_step() -> None:
    # Time steps 0..3 of a terminated episode of 3 transitions: frames t = 0, 1, 2. With
    # strategy final the goal is the last next achieved goal, step 3; the reward of the
    # transition at t is 0 iff t + 1 == 3. Ratio 1/2 of 8 rows: the first 4 are relabeled.
    scenario = RelabelScenario(
        EnvSpec(1, (FixedSchedule(3),), goals=True),
        fill_steps=4,
        capacity=8,
        strategy="final",
        ratio=Fraction(1, 2),
        batch_size=8,
        draws=2,
    )
    trace = ADAPTER.run_relabel(scenario)
    assert _items(trace, "store") == [[(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3)]]
    for event in trace.of_kind("relabel"):
        assert event.goal_t == (3,) * 4 + (-1,) * 4
        assert event.reward == tuple(0.0 if t == 2 else -1.0 for t in event.t)


def test_relabel_beyond_capacity_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="1-D storage"):
        ADAPTER.run_relabel(
            RelabelScenario(EnvSpec(1, (FixedSchedule(3),), goals=True), fill_steps=9, capacity=4)
        )
