"""The named scenarios the suite runs. Names are stable: reports and expectations refer to
them. Each covers a knob or a mode of the spec; the Hypothesis strategies in
:mod:`xpspec.conformance.strategies` add generated scenarios on top."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import DrainSpec, TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    AsyncScenario,
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    Scenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule, RandomSchedule
from xpspec.protocol.trace import Item

__all__ = ["CATALOG"]

_MIXED = CycleSchedule(
    (EpisodePlan(3, "terminated"), EpisodePlan(5, "truncated"), EpisodePlan(2, "terminated")),
    offset=1,
)
_ENV1 = EnvSpec(1, (FixedSchedule(4),))
_ENV3 = EnvSpec(3, (_MIXED,), num_tasks=2)
_RANDOM4 = EnvSpec(4, (RandomSchedule(1, 6, 400),), num_tasks=3)
_GOALS2 = EnvSpec(2, (_MIXED,), goals=True)
_LONG2 = EnvSpec(
    2,
    (CycleSchedule((EpisodePlan(19, "terminated"), EpisodePlan(4, "truncated")), offset=1),),
)


def _dataset(first_env: int, envs: int, episodes: int, length: int) -> tuple[Item, ...]:
    """An offline dataset: ``episodes`` episodes of ``length`` items at each of ``envs`` env
    indices from ``first_env`` (past the online envs)."""
    return tuple(
        (e, j, t)
        for e in range(first_env, first_env + envs)
        for j in range(episodes)
        for t in range(length)
    )


def _t(
    env: EnvSpec,
    seed: int = 0,
    preprocess: PreprocessorSpec | None = None,
    sampling: SamplingSpec | None = None,
    **knobs: Any,
) -> TrainerScenario:
    return TrainerScenario(
        env,
        TrainerConfig(**knobs),
        Identity() if preprocess is None else preprocess,
        SamplingSpec() if sampling is None else sampling,
        seed=seed,
    )


def _checkpointed(after: int, env: EnvSpec, **kwargs: Any) -> TrainerScenario:
    """``_t(env, **kwargs)`` saved after iteration ``after`` and resumed (``resume.*``)."""
    return replace(_t(env, **kwargs), checkpoint=CheckpointSpec(after))


CATALOG: dict[str, Scenario] = {
    # unroll accounting
    "plain-u1-b1": _t(_ENV1, num_iterations=12),
    "plain-u2-b3": _t(_ENV3, unroll_length=Fraction(2), num_iterations=10, mini_batch_length=2),
    "fractional-u1/4-b1": _t(_ENV1, unroll_length=Fraction(1, 4), num_iterations=16),
    "fractional-u1/10-b2": _t(
        EnvSpec(2, (FixedSchedule(2),)), unroll_length=Fraction(1, 10), num_iterations=25
    ),
    "fractional-u3/10-b3": _t(_ENV3, unroll_length=Fraction(3, 10), num_iterations=30),
    "fractional-u3/2-b4": _t(
        _RANDOM4, unroll_length=Fraction(3, 2), num_iterations=12, mini_batch_length=2
    ),
    "alf-float-u1/10": _t(
        _ENV1, unroll_length=Fraction(1, 10), unroll_carry="alf-float", num_iterations=25
    ),
    "drain-b2": _t(
        EnvSpec(2, (_MIXED,)),
        unroll_length=0,
        drain=DrainSpec((0, 3, 1, 5), 2, 4),
        num_iterations=12,
    ),
    "env-steps-limit-b3": _t(_ENV3, unroll_length=Fraction(2), num_env_steps=20),
    "env-steps-then-train": _t(
        _ENV3, unroll_length=Fraction(2), num_env_steps=12, num_iterations=6
    ),
    "counter-per-mini-batch": _t(
        _ENV3, num_iterations=8, counter_mode="per-mini-batch", num_updates_per_train_iter=2
    ),
    # One env: the per-mini-batch counter of a framework that steps a single env (d3rlpy).
    "counter-per-mini-batch-b1": _t(
        _ENV1, num_iterations=8, counter_mode="per-mini-batch", num_updates_per_train_iter=2
    ),
    # warm-up and updates
    "warmup-b3": _t(
        _ENV3,
        num_iterations=10,
        initial_collect_steps=10,
        mini_batch_size=4,
        num_updates_per_train_iter=3,
    ),
    # Exactly on the boundary: 9 items are stored after iteration 3 (3 envs).
    "warmup-boundary": _t(_ENV3, num_iterations=6, initial_collect_steps=9),
    "warmup-strict": _t(_ENV3, num_iterations=8, initial_collect_steps=9, warmup_gate="stored>"),
    "long-windows": _t(_ENV3, num_iterations=10, mini_batch_length=4, capacity=6),
    "small-capacity": _t(
        _RANDOM4, unroll_length=Fraction(3), num_iterations=10, capacity=5, mini_batch_length=3
    ),
    # sampling policies
    "forbid-boundaries": _t(
        _ENV3,
        unroll_length=Fraction(2),
        num_iterations=10,
        mini_batch_length=3,
        sampling=SamplingSpec(boundary="forbid"),
    ),
    "pad-boundaries": _t(
        _ENV3,
        unroll_length=Fraction(2),
        num_iterations=10,
        mini_batch_length=3,
        sampling=SamplingSpec(boundary="pad"),
    ),
    "period-absolute": _t(
        _ENV3,
        unroll_length=Fraction(2),
        num_iterations=12,
        mini_batch_length=2,
        capacity=7,
        sampling=SamplingSpec(period=2),
    ),
    "period-oldest": _t(
        _ENV3,
        unroll_length=Fraction(2),
        num_iterations=12,
        mini_batch_length=2,
        capacity=7,
        sampling=SamplingSpec(period=2, anchor="oldest"),
    ),
    # whole buffer
    "whole-buffer": _t(
        _ENV3,
        unroll_length=Fraction(4),
        num_iterations=6,
        whole_buffer=True,
        capacity=16,
        mini_batch_length=2,
        mini_batch_size=4,
        num_updates_per_train_iter=2,
    ),
    "whole-buffer-clear": _t(
        _ENV3,
        unroll_length=Fraction(4),
        num_iterations=6,
        whole_buffer=True,
        capacity=8,
        mini_batch_length=2,
        clear="all",
    ),
    "whole-buffer-keep-one": _t(
        _ENV3,
        unroll_length=Fraction(3),
        num_iterations=6,
        whole_buffer=True,
        capacity=8,
        mini_batch_length=2,
        clear="keep-one-step",
    ),
    # chunks of 3 from rings of 4, 5, 6, ...: clears that must keep one and two untrained items
    "whole-buffer-clear-t3": _t(
        _ENV3,
        unroll_length=Fraction(4),
        num_iterations=6,
        whole_buffer=True,
        capacity=8,
        mini_batch_length=3,
        clear="all",
    ),
    "whole-buffer-clear-fractional": _t(
        _ENV3,
        unroll_length=Fraction(1, 2),
        num_iterations=8,
        whole_buffer=True,
        capacity=8,
        clear="keep-one-step",
    ),
    # The first two calls find 1 and 2 items per env: no whole chunk of 3 (variant
    # alf-shortened-chunks trains chunks of 1 and 2 instead).
    "whole-buffer-short": _t(
        _ENV3,
        unroll_length=Fraction(1),
        num_iterations=4,
        whole_buffer=True,
        capacity=8,
        mini_batch_length=3,
    ),
    "on-policy": _t(
        _ENV3, mode="on-policy", unroll_length=Fraction(4), num_iterations=5, mini_batch_length=2
    ),
    # u = 3 and chunks of 3: each call's first chunk starts with the item the previous call
    # kept, so the last item of one unroll and the first of the next share a chunk.
    "on-policy-keeps-last": _t(
        EnvSpec(num_envs=2, schedules=(FixedSchedule(4),)),
        mode="on-policy",
        unroll_length=Fraction(3),
        num_iterations=4,
        mini_batch_length=3,
    ),
    # preprocessing modes
    "reward-transform": _t(
        _ENV3, num_iterations=8, preprocess=RewardTransform(Fraction(1, 2), Fraction(-1))
    ),
    "overwrite-truncated": _t(
        _ENV3,
        unroll_length=Fraction(2),
        num_iterations=8,
        mini_batch_length=2,
        preprocess=OverwriteStepType("MID", "truncated-last"),
    ),
    "exclude-steps": _t(
        _ENV3, unroll_length=Fraction(2), num_iterations=10, preprocess=ExcludeSteps(3, 1)
    ),
    "exclude-episodes": _t(_ENV3, num_iterations=16, preprocess=ExcludeEpisodes(2, 0)),
    # Whole-episode exclusion by task at an integer unroll length, windows of one item: what a
    # framework that filters whole episodes but unrolls whole steps can express.
    "exclude-tasks": _t(_RANDOM4, num_iterations=24, preprocess=ExcludeTasks((1,))),
    "exclude-tasks-fractional": _t(
        _RANDOM4, unroll_length=Fraction(1, 3), num_iterations=30, preprocess=ExcludeTasks((1,))
    ),
    # One env: a buffer that writes every env's row at one shared position can leave rows
    # out only when there is one env, so selective exclusion needs a B = 1 form too.
    "exclude-episodes-b1": _t(_ENV1, num_iterations=16, preprocess=ExcludeEpisodes(2, 1)),
    "delayed-b1": _t(_ENV1, num_iterations=14, preprocess=EpisodeDelayed()),
    "delayed-mixed-b3": _t(_ENV3, num_iterations=14, preprocess=EpisodeDelayed()),
    "delayed-success-only": _t(
        _ENV3, unroll_length=Fraction(2), num_iterations=10, preprocess=EpisodeDelayed("success")
    ),
    "delayed-failure-only": _t(
        _ENV3, num_iterations=12, preprocess=EpisodeDelayed("failure"), pending_at_end="flush"
    ),
    "delayed-fractional": _t(
        _RANDOM4, unroll_length=Fraction(2, 3), num_iterations=20, preprocess=EpisodeDelayed()
    ),
    "delayed-flush": _t(
        _ENV3, num_iterations=7, preprocess=EpisodeDelayed(), pending_at_end="flush"
    ),
    # Envs release episodes at different times, so their rings differ in size: after the
    # first releases one env holds nothing while another holds whole episodes (windows of 2
    # inside one episode exist; an env with no valid window must not make the call no-data).
    "delayed-forbid": _t(
        _ENV3,
        num_iterations=10,
        mini_batch_length=2,
        preprocess=EpisodeDelayed(),
        sampling=SamplingSpec(boundary="forbid"),
    ),
    # An episode of 20 items is released into a ring of 8 in one write (its oldest 12 are
    # overwritten within that write), and the two envs release at different steps, so their
    # rings are written out of lockstep (replay.eviction, replay.storage).
    "delayed-long-episodes": _t(
        _LONG2,
        unroll_length=Fraction(4),
        num_iterations=14,
        capacity=8,
        mini_batch_length=2,
        preprocess=EpisodeDelayed(),
    ),
    # Held items count as unrolled, never as stored: the gate opens on stored items only
    # (train.warmup-gate), which lag the unrolled count here.
    "warmup-delayed": _t(
        _ENV3, num_iterations=10, initial_collect_steps=9, preprocess=EpisodeDelayed()
    ),
    "delayed-plain-accounting": _t(
        _ENV3, num_iterations=12, preprocess=EpisodeDelayed(), train_accounting="plain"
    ),
    "delayed-alf-floor": _t(
        _ENV3, num_iterations=12, preprocess=EpisodeDelayed(), train_accounting="alf-pr1768-floor"
    ),
    # replay sampling on its own
    "replay-uniform": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=8,
        fill_steps=11,
        batch_size=64,
        draws=40,
        sampling=SamplingSpec(window_length=3),
    ),
    "replay-forbid": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=8,
        fill_steps=11,
        batch_size=64,
        draws=10,
        sampling=SamplingSpec(window_length=2, boundary="forbid"),
    ),
    "replay-period-oldest": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=7,
        fill_steps=12,
        batch_size=64,
        draws=10,
        sampling=SamplingSpec(window_length=2, period=2, anchor="oldest"),
    ),
    # 11 writes into rings of 8 leave positions 3..10: absolute starts 4, 6, 8 and
    # oldest-anchored starts 3, 5, 7 are disjoint, so every draw tells the anchors apart
    "replay-period-absolute": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=8,
        fill_steps=11,
        batch_size=64,
        draws=10,
        sampling=SamplingSpec(window_length=3, period=2),
    ),
    # windows one item shorter than the ring, after 15 writes into rings of 6: each env holds
    # two valid windows, both running across the ring's physical end
    "replay-near-capacity": ReplayScenario(
        _RANDOM4,
        capacity=6,
        fill_steps=15,
        batch_size=32,
        draws=25,
        sampling=SamplingSpec(window_length=5),
    ),
    # nothing to sample (replay.no-window): an empty buffer, and windows longer than what each
    # env holds; every draw must come back empty
    "replay-empty": ReplayScenario(_ENV3, capacity=8, fill_steps=0, batch_size=4, draws=2),
    "replay-too-short": ReplayScenario(
        _ENV3,
        capacity=8,
        fill_steps=3,
        batch_size=4,
        draws=2,
        sampling=SamplingSpec(window_length=5),
    ),
    # prioritized replay (priority.*): 16 single-item windows whose priorities the draws
    # update, enough draws for the law's statistical test
    "priority-law": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=8,
        fill_steps=8,
        batch_size=64,
        draws=60,
        priority=PrioritySpec(),
    ),
    # one vector step stored after every draw into rings of 6: windows become valid after
    # priorities above 1 were assigned (new-at-max), and old ones are evicted (eviction)
    "priority-new-items": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=6,
        fill_steps=4,
        batch_size=16,
        draws=12,
        priority=PrioritySpec(add_steps=1, eps=Fraction(1, 100)),
    ),
    # windows of 3 items keyed by their first item: a start gets its priority when the window
    # it starts is whole, and loses it when its first item is evicted
    "priority-windows": ReplayScenario(
        EnvSpec(2, (_MIXED,)),
        capacity=7,
        fill_steps=5,
        batch_size=16,
        draws=10,
        sampling=SamplingSpec(window_length=3),
        priority=PrioritySpec(add_steps=1),
    ),
    # nothing to sample at first (replay.no-window under priorities): windows of 2 after 0,
    # then 1 stored vector steps, then the priorities of the first windows; weights
    # normalised by the batch's largest (the variant batch-max's own knob)
    "priority-warmup": ReplayScenario(
        EnvSpec(1, (FixedSchedule(3),)),
        capacity=4,
        fill_steps=0,
        batch_size=8,
        draws=6,
        sampling=SamplingSpec(window_length=2),
        priority=PrioritySpec(add_steps=1, weights="batch-max"),
    ),
    # env stepping
    "env-mixed": EnvScenario(EnvSpec(3, (_MIXED,)), steps=20),
    "env-random": EnvScenario(_RANDOM4, steps=30, seed=7),
    # learner-side preprocessing: 38 and 47 training rows (short last minibatches), episodes
    # of mixed endings with in-progress chunks; the longest n-step windows reach past every end
    "learner-mixed": LearnerScenario(
        EnvSpec(3, (_MIXED,)), steps=17, minibatch_size=5, num_learners=3
    ),
    # One learner: frameworks without episode sharding can run every other learner check.
    "learner-single": LearnerScenario(EnvSpec(3, (_MIXED,)), steps=17, nstep=3, num_learners=1),
    "learner-truncated": LearnerScenario(
        EnvSpec(4, (RandomSchedule(1, 7, 500),)),
        steps=15,
        seed=1,
        gamma=Fraction(99, 100),
        lam=Fraction(19, 20),
        value_scale=Fraction(-1, 4),
        nstep=4,
        num_epochs=3,
        minibatch_size=8,
        num_learners=2,
    ),
    "learner-long-nstep": LearnerScenario(
        EnvSpec(1, (FixedSchedule(4, "truncated"),)),
        steps=12,
        gamma=Fraction(1),
        lam=Fraction(1),
        nstep=8,
        num_epochs=1,
        minibatch_size=64,
        num_learners=1,
    ),
    # hindsight relabeling: evicted episode heads and in-progress episodes in the buffer
    "relabel-future": RelabelScenario(
        _GOALS2,
        fill_steps=23,
        capacity=12,
        strategy="future",
        ratio=Fraction(3, 4),
        batch_size=63,
        draws=40,
    ),
    "relabel-final": RelabelScenario(
        EnvSpec(3, (RandomSchedule(2, 6, 300),), goals=True),
        fill_steps=20,
        capacity=20,
        strategy="final",
        ratio=Fraction(1),
        batch_size=32,
        draws=6,
    ),
    "relabel-episode": RelabelScenario(
        _GOALS2,
        fill_steps=25,
        capacity=7,
        strategy="episode",
        ratio=Fraction(2, 3),
        batch_size=50,
        draws=60,
        seed=2,
    ),
    # recurrent state in training: sequences across episode ends (resets at FIRST inside),
    # burn-in, padded sequences that stop at LAST, and the zero-start variant
    "recurrent-cross": RecurrentScenario(
        _ENV3, steps=20, sequence_length=6, burn_in=2, batch_size=8, draws=3
    ),
    "recurrent-pad": RecurrentScenario(
        _ENV3, steps=20, sequence_length=6, burn_in=1, boundary="pad", batch_size=8, draws=3, seed=1
    ),
    "recurrent-long": RecurrentScenario(
        _LONG2, steps=30, sequence_length=8, burn_in=3, batch_size=6, draws=2, seed=2
    ),
    "recurrent-zero-start": RecurrentScenario(
        _ENV3, steps=16, sequence_length=5, burn_in=2, batch_size=8, draws=2, initial_state="zeros"
    ),
    # Without a burn-in: the frameworks that have none (ALF, skrl, RLlib's PPO) run these, so
    # their start, reset, carry and order are judged on the catalogue, not only on generated
    # scenarios. The chunk shapes divide evenly (skrl's mini-batches are whole sequences);
    # the two-env one has a rollout that is no multiple of the sequence length.
    "recurrent-chunks": RecurrentScenario(
        _ENV3, steps=20, sequence_length=5, batch_size=4, draws=3
    ),
    "recurrent-chunks-b2": RecurrentScenario(
        EnvSpec(2, (_MIXED,)), steps=10, sequence_length=4, batch_size=5, draws=1, seed=1
    ),
    "recurrent-pad-no-burn-in": RecurrentScenario(
        _ENV3, steps=20, sequence_length=6, boundary="pad", batch_size=8, draws=3, seed=3
    ),
    "recurrent-zero-start-no-burn-in": RecurrentScenario(
        _ENV3, steps=16, sequence_length=5, batch_size=8, draws=2, initial_state="zeros", seed=4
    ),
    # -- checkpoint and resume (resume.*): saved after an iteration, resumed in a fresh trainer --
    # episodes in progress at the checkpoint, a ring that evicts before and after it, training
    # (two updates a call) on both sides of it: every part of the trainer shows after the resume
    "resume-plain": _checkpointed(
        3,
        EnvSpec(2, (_MIXED,)),
        seed=4,
        unroll_length=Fraction(2),
        num_iterations=8,
        capacity=5,
        initial_collect_steps=6,
        mini_batch_size=4,
        num_updates_per_train_iter=2,
    ),
    # resume-plain without its warm-up gate: training from the first call on both sides of
    # the checkpoint (a trainer with no gate, Tianshou's OffPolicyTrainer, can run it)
    "resume-ungated": _checkpointed(
        3,
        EnvSpec(2, (_MIXED,)),
        seed=4,
        unroll_length=Fraction(2),
        num_iterations=8,
        capacity=5,
        mini_batch_size=4,
        num_updates_per_train_iter=2,
    ),
    # u = 3/2: the schedule's carry decides n_4 (2 vector steps, where a restart gives 1)
    "resume-fractional": _checkpointed(
        3,
        EnvSpec(2, (_MIXED,)),
        unroll_length=Fraction(3, 2),
        num_iterations=8,
        capacity=6,
        mini_batch_length=2,
        counter_mode="per-mini-batch",
    ),
    # episodes of 19 steps held until they end, an episode held at the checkpoint and the
    # calls the synced accounting owes for the held rows still to come; training waits for
    # the first episode's release (a framework that trains on an empty buffer may not)
    "resume-delayed": _checkpointed(
        8,
        EnvSpec(1, _LONG2.schedules),
        preprocess=EpisodeDelayed(),
        unroll_length=Fraction(3),
        num_iterations=12,
        capacity=16,
        initial_collect_steps=20,
    ),
    # -- frame stacking (stack.*): stacks across episode ends of 3, 5 and 2 transitions, a
    # stack wider than every episode, the zero-fill variant, and rings short enough that the
    # oldest held items have lost frames of their stacks by the draws
    "stack-cross": StackScenario(_ENV3, steps=20, num_frames=4, capacity=6, batch_size=8, draws=3),
    "stack-long": StackScenario(
        _LONG2, steps=30, num_frames=3, capacity=6, batch_size=6, draws=2, seed=2
    ),
    "stack-wide": StackScenario(
        EnvSpec(2, (_MIXED,)), steps=24, num_frames=7, capacity=8, batch_size=8, draws=2, seed=1
    ),
    "stack-zeros": StackScenario(
        _ENV3, steps=16, num_frames=3, capacity=5, batch_size=8, draws=2, padding="zeros", seed=3
    ),
    # -- offline and hybrid replay (offline.*): an offline dataset of whole episodes mixed with
    # online experience whose ring evicts between updates; an even split, an uneven one whose
    # shares are not whole, one whose shares are whole only in exact arithmetic, and ALF's
    # schedule knobs (online part from update 2, every 2nd)
    "offline-even": OfflineScenario(
        _ENV3, _dataset(3, 2, 2, 4), updates=6, steps_per_update=2, batch_size=6, capacity=3
    ),
    "offline-uneven": OfflineScenario(
        EnvSpec(2, (_MIXED,)),
        _dataset(2, 1, 3, 5),
        updates=5,
        steps_per_update=3,
        batch_size=7,
        offline_weight=2,
        online_weight=1,
        capacity=4,
        seed=1,
    ),
    # weights 5:6 of 55 items: whole shares (25 and 30) a float product misses by a hair
    "offline-whole-shares": OfflineScenario(
        EnvSpec(2, (_MIXED,)),
        _dataset(2, 2, 2, 3),
        updates=3,
        steps_per_update=4,
        batch_size=55,
        offline_weight=5,
        online_weight=6,
        capacity=6,
        seed=3,
    ),
    "offline-schedule": OfflineScenario(
        _ENV3,
        _dataset(3, 1, 2, 6),
        updates=8,
        batch_size=8,
        online_after=2,
        online_every=2,
        capacity=4,
        seed=2,
    ),
    # -- asynchronous actors (async.*): two actors without a lag bound, whose fragments arrive
    # out of turn (an actor's second fragment acted with weights two updates old); two actors
    # with a bound of one update (the second actor's first fragment is dropped); three actors
    # with a bound of 0 (only fragments acted with the learner's newest weights are trained on)
    "async-lag": AsyncScenario(
        EnvSpec(2, (FixedSchedule(3),)), fragment_length=4, arrivals=(0, 1, 0, 1, 1, 0, 0, 1)
    ),
    "async-bounded": AsyncScenario(
        EnvSpec(2, (_MIXED,)),
        fragment_length=3,
        arrivals=(0, 0, 0, 1, 1, 0, 1, 1),
        max_lag=1,
        seed=1,
    ),
    "async-three": AsyncScenario(
        EnvSpec(3, (_MIXED,)),
        fragment_length=2,
        arrivals=(0, 1, 2, 0, 1, 2, 2, 1, 0),
        max_lag=0,
        seed=2,
    ),
}
