"""The registry of checks: every check of the suite, the clauses it verifies, the capability
(and observables) it needs, its kind, and the scenarios it concerns. The check functions live
in one module per spec area; :data:`ALL_CHECKS` is the suite, in the order it runs."""

from __future__ import annotations

from collections.abc import Callable

from xpspec.conformance.checks.asynchronous import (
    check_behaviour_logits,
    check_env_steps_counted,
    check_lag_bounded,
    check_version_recorded,
)
from xpspec.conformance.checks.base import Check
from xpspec.conformance.checks.determinism import check_deterministic
from xpspec.conformance.checks.exact import check_exact_schedule, check_exact_stores
from xpspec.conformance.checks.learner import (
    check_bootstrap_masked,
    check_episode_unmodified,
    check_gae,
    check_nstep,
    check_shards,
    check_stats,
    check_truncation,
    check_update_count,
)
from xpspec.conformance.checks.offline import (
    check_items_unchanged,
    check_iteration_accounting,
    check_mix_ratio,
    check_online_schedule,
)
from xpspec.conformance.checks.preprocessing import (
    check_conservation,
    check_delayed_per_env,
    check_exclusion,
    check_identity_is_plain,
    check_pending_at_end,
    check_release_order,
    check_store_order,
    check_transform,
)
from xpspec.conformance.checks.priority import (
    check_eviction,
    check_new_at_max,
    check_priority_law,
    check_priority_probabilities,
    check_priority_weights,
    check_update_sampled,
)
from xpspec.conformance.checks.recurrent import (
    check_burn_in,
    check_carry,
    check_contiguous,
    check_initial_state,
    check_padding,
    check_reset_at_first,
    crosses,
    pads,
)
from xpspec.conformance.checks.relabel import (
    check_eligible,
    check_placement,
    check_ratio,
    check_reward,
    check_same_episode,
    check_uniform_goals,
)
from xpspec.conformance.checks.replay import check_no_window, check_replay_windows, check_uniform
from xpspec.conformance.checks.resume import (
    check_resume_accounting,
    check_resume_buffer,
    check_resume_env,
    check_resume_rng,
    check_resume_same_trace,
)
from xpspec.conformance.checks.stack import (
    check_earliest_ignored,
    check_episode_start,
    check_frames,
    check_no_cross,
    check_sample_equals_rollout,
)
from xpspec.conformance.checks.timesteps import (
    check_auto_reset,
    check_discount,
    check_identity,
    check_loss_mask,
    check_state_reset,
    check_step_types,
)
from xpspec.conformance.checks.train_accounting import (
    check_after_train_iter,
    check_after_update,
    check_bounded_lag,
    check_excluded_earn_nothing,
    check_identity_plain_calls,
    check_idle_calls,
    check_insufficient_data,
    check_synced_schedule,
    check_updates_per_call,
    check_utd_bound,
    check_warmup_gate,
)
from xpspec.conformance.checks.unroll import (
    check_all_envs_step,
    check_budget_run_end,
    check_budget_whole_unroll,
    check_drain,
    check_fractional_schedule,
    check_global_counter,
    check_num_env_steps,
)
from xpspec.conformance.checks.views import buffer_shape
from xpspec.conformance.checks.windows import (
    check_boundary_policy,
    check_clear,
    check_period_anchor,
    check_whole_buffer,
    check_windows_valid,
)
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    RewardTransform,
)
from xpspec.protocol.scenario import RelabelScenario, ReplayScenario, Scenario, TrainerScenario

__all__ = [
    "ALL_CHECKS",
    "ASYNC_CHECKS",
    "DETERMINISM_CHECKS",
    "ENV_CHECKS",
    "LEARNER_CHECKS",
    "OFFLINE_CHECKS",
    "RECURRENT_CHECKS",
    "RELABEL_CHECKS",
    "REPLAY_CHECKS",
    "RESUME_CHECKS",
    "STACK_CHECKS",
    "TRAINER_CHECKS",
]


def _is(*types: type) -> Callable[[Scenario], bool]:
    """Trainer scenarios without a checkpoint whose preprocessing is one of ``types``."""
    return lambda s: (
        isinstance(s, TrainerScenario) and s.checkpoint is None and isinstance(s.preprocess, types)
    )


def _cfg(pred: Callable[[TrainerScenario], object]) -> Callable[[Scenario], bool]:
    """Trainer scenarios without a checkpoint that satisfy ``pred`` (a checkpointed run is
    judged by the ``resume.*`` checks against the same implementation's uninterrupted run,
    whose every other clause the uninterrupted scenario's checks judge)."""
    return lambda s: isinstance(s, TrainerScenario) and s.checkpoint is None and bool(pred(s))


_ANY = _cfg(lambda s: True)
_OFF = _cfg(lambda s: s.trainer.mode == "off-policy")
# The synced schedule's own checks read the calls it owes; with a lazily created buffer the
# calls owed before the first store are dropped, which the exact comparison covers instead.
_SYNCED = _cfg(
    lambda s: (
        s.trainer.mode == "off-policy"
        and s.trainer.train_accounting == "synced"
        and s.trainer.replay_creation == "eager"
    )
)

TRAINER_CHECKS: tuple[Check, ...] = (
    Check("item-identity", ("timestep.identity",), "trainer", "invariant", check_identity, _ANY),
    Check("step-types", ("timestep.step-types",), "trainer", "invariant", check_step_types, _ANY),
    Check("discount", ("timestep.discount",), "trainer", "invariant", check_discount, _ANY),
    Check("auto-reset", ("timestep.auto-reset",), "trainer", "invariant", check_auto_reset, _ANY),
    Check(
        "state-reset",
        ("timestep.state-reset",),
        "trainer",
        "invariant",
        check_state_reset,
        _ANY,
        requires=("state",),
    ),
    Check(
        "loss-mask",
        ("timestep.loss-mask-last",),
        "trainer",
        "invariant",
        check_loss_mask,
        _ANY,
        requires=("loss-mask",),
    ),
    Check(
        "fractional-schedule",
        ("unroll.fractional-schedule",),
        "trainer",
        "invariant",
        check_fractional_schedule,
        _cfg(lambda s: s.trainer.drain is None and s.trainer.unroll_carry == "exact"),
    ),
    Check(
        "all-envs-step",
        ("unroll.all-envs-step",),
        "trainer",
        "invariant",
        check_all_envs_step,
        _ANY,
    ),
    Check(
        "drain",
        ("unroll.drain",),
        "trainer",
        "invariant",
        check_drain,
        _cfg(lambda s: s.trainer.drain is not None),
    ),
    Check(
        "num-env-steps",
        ("unroll.num-env-steps",),
        "trainer",
        "invariant",
        check_num_env_steps,
        _cfg(lambda s: s.trainer.num_env_steps),
    ),
    Check(
        "budget-whole-unroll",
        ("unroll.budget-whole-unroll",),
        "trainer",
        "invariant",
        check_budget_whole_unroll,
        # The expected unroll is the exact or the drain schedule (a float carry is a variant
        # of unroll.fractional-schedule, checked by the exact comparison).
        _cfg(
            lambda s: (
                s.trainer.num_env_steps
                and (s.trainer.drain is not None or s.trainer.unroll_carry == "exact")
            )
        ),
    ),
    Check(
        "budget-run-end",
        ("unroll.budget-run-end",),
        "trainer",
        "invariant",
        check_budget_run_end,
        _cfg(lambda s: s.trainer.num_env_steps),
    ),
    Check(
        "global-counter",
        ("unroll.global-counter",),
        "trainer",
        "invariant",
        check_global_counter,
        _cfg(lambda s: s.trainer.counter_mode in ("per-iteration", "per-iteration-after")),
        requires=("counter",),
    ),
    Check(
        "update-counter",
        ("unroll.global-counter",),
        "trainer",
        "invariant",
        check_global_counter,
        _cfg(
            lambda s: (
                s.trainer.counter_mode
                in ("per-mini-batch", "per-mini-batch-after", "per-train-call-after")
            )
        ),
        requires=("update-counter",),
    ),
    Check(
        "conservation",
        ("preprocess.conservation",),
        "trainer",
        "invariant",
        check_conservation,
        _ANY,
    ),
    Check(
        "identity-is-plain",
        ("preprocess.identity-is-plain",),
        "trainer",
        "invariant",
        check_identity_is_plain,
        _is(Identity),
    ),
    Check(
        "store-order", ("preprocess.store-order",), "trainer", "invariant", check_store_order, _ANY
    ),
    Check(
        "delayed-per-env",
        ("preprocess.delayed-per-env",),
        "trainer",
        "invariant",
        check_delayed_per_env,
        _is(EpisodeDelayed),
    ),
    Check(
        "release-order",
        ("preprocess.release-order",),
        "trainer",
        "invariant",
        check_release_order,
        _is(EpisodeDelayed),
    ),
    Check(
        "exclusion",
        ("preprocess.exclusion",),
        "trainer",
        "invariant",
        check_exclusion,
        _is(ExcludeSteps, ExcludeEpisodes, ExcludeTasks),
    ),
    Check(
        "transform",
        ("preprocess.transform",),
        "trainer",
        "invariant",
        check_transform,
        _is(RewardTransform, OverwriteStepType),
    ),
    Check(
        "pending-at-end",
        ("preprocess.pending-at-end",),
        "trainer",
        "invariant",
        check_pending_at_end,
        _ANY,
    ),
    Check(
        "synced-schedule",
        ("train.synced-schedule",),
        "trainer",
        "invariant",
        check_synced_schedule,
        _SYNCED,
    ),
    Check(
        "identity-plain-calls",
        ("train.identity-reduces-to-plain",),
        "trainer",
        "invariant",
        check_identity_plain_calls,
        _cfg(
            lambda s: (
                _SYNCED(s)
                and isinstance(s.preprocess, (Identity, RewardTransform, OverwriteStepType))
            )
        ),
    ),
    Check(
        "excluded-earn-nothing",
        ("train.excluded-earn-nothing",),
        "trainer",
        "invariant",
        check_excluded_earn_nothing,
        _cfg(
            lambda s: (
                _SYNCED(s)
                and isinstance(s.preprocess, (ExcludeSteps, ExcludeEpisodes, ExcludeTasks))
            )
        ),
    ),
    Check(
        "utd-bound",
        ("train.utd-converges",),
        "trainer",
        "invariant",
        check_utd_bound,
        _cfg(
            lambda s: (
                _SYNCED(s)
                and s.trainer.drain is None  # the bound is in units of 1/u
                and s.trainer.unroll_carry == "exact"
                and not s.trainer.num_env_steps
            )
        ),
    ),
    Check(
        "bounded-lag", ("train.bounded-lag",), "trainer", "invariant", check_bounded_lag, _SYNCED
    ),
    Check(
        "updates-per-call",
        ("train.updates-per-call",),
        "trainer",
        "invariant",
        check_updates_per_call,
        _ANY,
    ),
    Check(
        "insufficient-data",
        ("train.insufficient-data",),
        "trainer",
        "invariant",
        check_insufficient_data,
        _ANY,
    ),
    Check("idle-calls", ("train.idle-calls",), "trainer", "invariant", check_idle_calls, _ANY),
    Check("warmup-gate", ("train.warmup-gate",), "trainer", "invariant", check_warmup_gate, _OFF),
    Check(
        "after-update",
        ("train.after-update",),
        "trainer",
        "invariant",
        check_after_update,
        _ANY,
        requires=("hooks",),
    ),
    Check(
        "after-train-iter",
        ("train.after-train-iter",),
        "trainer",
        "invariant",
        check_after_train_iter,
        _ANY,
        requires=("hooks",),
    ),
    Check(
        "windows-valid",
        ("replay.window-validity", "replay.eviction"),
        "trainer",
        "invariant",
        check_windows_valid,
        _ANY,
    ),
    Check(
        "boundary-policy",
        ("replay.boundary-policy",),
        "trainer",
        "invariant",
        check_boundary_policy,
        _cfg(lambda s: not buffer_shape(s)[0]),
    ),
    Check(
        "period-anchor",
        ("replay.period-anchor",),
        "trainer",
        "invariant",
        check_period_anchor,
        _cfg(lambda s: s.sampling.period > 1 and not buffer_shape(s)[0]),
    ),
    Check(
        "whole-buffer",
        ("replay.whole-buffer",),
        "trainer",
        "invariant",
        check_whole_buffer,
        _cfg(lambda s: buffer_shape(s)[0]),
    ),
    Check(
        "clear",
        ("replay.clear",),
        "trainer",
        "invariant",
        check_clear,
        _cfg(lambda s: buffer_shape(s)[2].mode != "none"),
    ),
    Check(
        "exact-schedule",
        (
            "unroll.fractional-schedule",
            "train.synced-schedule",
            "train.warmup-gate",
            "train.insufficient-data",
        ),
        "trainer",
        "exact",
        check_exact_schedule,
        _ANY,
    ),
    Check(
        "exact-stores",
        ("preprocess.conservation", "preprocess.store-order"),
        "trainer",
        "exact",
        check_exact_stores,
        _ANY,
    ),
)


def _windows_law(s: Scenario) -> bool:
    """The law is checked with period 1 under ``cross`` and ``forbid`` (padding and period
    grids change which windows exist and are left to replay-windows)."""
    return (
        isinstance(s, ReplayScenario)
        and s.priority is None
        and s.sampling.boundary in ("cross", "forbid")
        and s.sampling.period == 1
    )


def _prioritized(s: Scenario) -> bool:
    """Replay scenarios with a priority spec (clauses ``priority.*``)."""
    return isinstance(s, ReplayScenario) and s.priority is not None


ENV_CHECKS: tuple[Check, ...] = (
    Check("env-identity", ("timestep.identity",), "env", "invariant", check_identity),
    Check("env-step-types", ("timestep.step-types",), "env", "invariant", check_step_types),
    Check("env-discount", ("timestep.discount",), "env", "invariant", check_discount),
    Check("env-auto-reset", ("timestep.auto-reset",), "env", "invariant", check_auto_reset),
)

REPLAY_CHECKS: tuple[Check, ...] = (
    Check(
        "replay-windows",
        (
            "replay.window-validity",
            "replay.eviction",
            "replay.boundary-policy",
            "replay.period-anchor",
        ),
        "replay",
        "invariant",
        check_replay_windows,
    ),
    Check("replay-no-window", ("replay.no-window",), "replay", "exact", check_no_window),
    Check(
        "replay-uniform",
        ("replay.uniform-windows",),
        "replay",
        "statistical",
        check_uniform,
        _windows_law,
    ),
    Check(
        "priority-update-sampled",
        ("priority.update-sampled",),
        "replay",
        "invariant",
        check_update_sampled,
        _prioritized,
        requires=("priorities",),
    ),
    Check(
        "priority-new-at-max",
        ("priority.new-at-max",),
        "replay",
        "invariant",
        check_new_at_max,
        _prioritized,
        requires=("priorities",),
    ),
    Check(
        "priority-eviction",
        ("priority.eviction",),
        "replay",
        "invariant",
        check_eviction,
        _prioritized,
        requires=("priorities",),
    ),
    Check(
        "priority-probabilities",
        ("priority.sampling-law",),
        "replay",
        "invariant",
        check_priority_probabilities,
        _prioritized,
        requires=("priorities",),
    ),
    Check(
        "priority-law",
        ("priority.sampling-law",),
        "replay",
        "statistical",
        check_priority_law,
        _prioritized,
        requires=("priorities",),
    ),
    Check(
        "priority-weights",
        ("priority.importance-weights",),
        "replay",
        "invariant",
        check_priority_weights,
        _prioritized,
        requires=("priorities", "importance-weights"),
    ),
)

DETERMINISM_CHECKS: tuple[Check, ...] = (
    Check(
        "deterministic-trainer",
        ("trace.deterministic",),
        "trainer",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
    Check(
        "deterministic-replay",
        ("trace.deterministic",),
        "replay",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)

LEARNER_CHECKS: tuple[Check, ...] = (
    Check("learner-gae", ("learner.gae",), "learner", "exact", check_gae),
    Check(
        "learner-truncation",
        ("learner.truncation-bootstraps",),
        "learner",
        "invariant",
        check_truncation,
    ),
    Check(
        "learner-bootstrap-masked",
        ("learner.bootstrap-timestep-masked",),
        "learner",
        "invariant",
        check_bootstrap_masked,
        requires=("bootstrap",),
    ),
    Check(
        "learner-episode-unmodified",
        ("learner.episode-unmodified",),
        "learner",
        "invariant",
        check_episode_unmodified,
        requires=("caller-episodes",),
    ),
    Check(
        "learner-stats", ("learner.stats-exclude-bootstrap",), "learner", "invariant", check_stats
    ),
    Check(
        "learner-nstep",
        ("learner.nstep-episode-end",),
        "learner",
        "invariant",
        check_nstep,
        requires=("nstep",),
    ),
    Check(
        "learner-update-count",
        ("learner.update-count",),
        "learner",
        "invariant",
        check_update_count,
    ),
    Check(
        "learner-shards",
        ("learner.shard-episodes",),
        "learner",
        "invariant",
        check_shards,
        requires=("shards",),
    ),
    Check(
        "deterministic-learner",
        ("trace.deterministic",),
        "learner",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)


def _uniform_strategy(scenario: Scenario) -> bool:
    """Relabeling whose goals are drawn uniformly among the eligible ones."""
    return isinstance(scenario, RelabelScenario) and scenario.strategy in ("future", "episode")


def _final_ratio_one(scenario: Scenario) -> bool:
    """Relabeling of every row with its episode's final goal."""
    return (
        isinstance(scenario, RelabelScenario)
        and scenario.strategy == "final"
        and scenario.ratio == 1
    )


RELABEL_CHECKS: tuple[Check, ...] = (
    Check(
        "relabel-same-episode",
        ("relabel.same-episode",),
        "relabel",
        "invariant",
        check_same_episode,
    ),
    Check("relabel-eligible", ("relabel.eligible-goals",), "relabel", "invariant", check_eligible),
    Check(
        "relabel-uniform-goals",
        ("relabel.eligible-goals",),
        "relabel",
        "statistical",
        check_uniform_goals,
        _uniform_strategy,
    ),
    Check("relabel-reward", ("relabel.reward-recomputed",), "relabel", "invariant", check_reward),
    Check("relabel-ratio", ("relabel.ratio",), "relabel", "invariant", check_ratio),
    Check(
        "relabel-placement",
        ("relabel.placement",),
        "relabel",
        "invariant",
        check_placement,
        _final_ratio_one,
    ),
    Check(
        "deterministic-relabel",
        ("trace.deterministic",),
        "relabel",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)

RECURRENT_CHECKS: tuple[Check, ...] = (
    # The rollout's own states first: a sequence's stored state is read from it.
    Check(
        "recurrent-rollout-state",
        ("timestep.state-reset",),
        "recurrent",
        "invariant",
        check_state_reset,
    ),
    Check(
        "recurrent-contiguous",
        ("recurrent.contiguous",),
        "recurrent",
        "invariant",
        check_contiguous,
    ),
    Check(
        "recurrent-initial-state",
        ("recurrent.initial-state",),
        "recurrent",
        "invariant",
        check_initial_state,
    ),
    Check(
        "recurrent-reset-at-first",
        ("recurrent.reset-at-first",),
        "recurrent",
        "invariant",
        check_reset_at_first,
        crosses,
    ),
    Check("recurrent-carry", ("recurrent.carry",), "recurrent", "invariant", check_carry),
    Check("recurrent-burn-in", ("recurrent.burn-in",), "recurrent", "invariant", check_burn_in),
    Check(
        "recurrent-padding", ("recurrent.padding",), "recurrent", "invariant", check_padding, pads
    ),
    Check(
        "deterministic-recurrent",
        ("trace.deterministic",),
        "recurrent",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)


# -- frame stacking (clauses stack.*) --
# The rollout's stacks first: a sampled stack is judged against the rollout's.
STACK_CHECKS: tuple[Check, ...] = (
    Check("stack-frames", ("stack.frames",), "stack", "invariant", check_frames),
    Check(
        "stack-episode-start", ("stack.episode-start",), "stack", "invariant", check_episode_start
    ),
    Check("stack-no-cross", ("stack.no-cross",), "stack", "invariant", check_no_cross),
    Check(
        "stack-sample-equals-rollout",
        ("stack.sample-equals-rollout",),
        "stack",
        "invariant",
        check_sample_equals_rollout,
    ),
    Check(
        "stack-earliest-ignored",
        ("stack.earliest-ignored",),
        "stack",
        "invariant",
        check_earliest_ignored,
    ),
    Check(
        "deterministic-stack",
        ("trace.deterministic",),
        "stack",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)


# -- offline and hybrid replay (clauses offline.*) --
# Which items a batch holds first, then whether it has an online part, then how many items
# each part has: a count is judged on parts the schedule says are there.
OFFLINE_CHECKS: tuple[Check, ...] = (
    Check(
        "offline-items-unchanged",
        ("offline.items-unchanged",),
        "offline",
        "invariant",
        check_items_unchanged,
    ),
    Check(
        "offline-online-schedule",
        ("offline.online-schedule",),
        "offline",
        "invariant",
        check_online_schedule,
    ),
    Check("offline-mix-ratio", ("offline.mix-ratio",), "offline", "invariant", check_mix_ratio),
    Check(
        "offline-iteration-accounting",
        ("offline.iteration-accounting",),
        "offline",
        "invariant",
        check_iteration_accounting,
    ),
    Check(
        "deterministic-offline",
        ("trace.deterministic",),
        "offline",
        "exact",
        check_deterministic,
        whole_trace=True,
    ),
)

# -- asynchronous actors and policy lag (clauses async.*) --
# The versions first: the lag and the behaviour log-probabilities are judged by them. No
# determinism check: a real engine's arrival order is its own, and each check judges the
# order it recorded.
ASYNC_CHECKS: tuple[Check, ...] = (
    Check(
        "async-version-recorded",
        ("async.version-recorded",),
        "async",
        "invariant",
        check_version_recorded,
    ),
    Check(
        "async-behaviour-logits",
        ("async.behaviour-logits",),
        "async",
        "invariant",
        check_behaviour_logits,
    ),
    Check("async-lag-bounded", ("async.lag-bounded",), "async", "invariant", check_lag_bounded),
    Check(
        "async-env-steps-counted",
        ("async.env-steps-counted",),
        "async",
        "invariant",
        check_env_steps_counted,
    ),
)


# -- checkpoint and resume (clauses resume.*) --
def _checkpointed(s: Scenario) -> bool:
    """Trainer scenarios with a checkpoint spec."""
    return isinstance(s, TrainerScenario) and s.checkpoint is not None


# In the order a resumed run uses the parts: env, buffer, accounting, random streams.
RESUME_CHECKS: tuple[Check, ...] = (
    Check(
        "resume-env",
        ("resume.env-continues",),
        "trainer",
        "exact",
        check_resume_env,
        _checkpointed,
        requires=("checkpoint",),
    ),
    Check(
        "resume-buffer",
        ("resume.buffer-restored",),
        "trainer",
        "invariant",
        check_resume_buffer,
        _checkpointed,
        requires=("checkpoint",),
    ),
    Check(
        "resume-accounting",
        ("resume.accounting-restored",),
        "trainer",
        "exact",
        check_resume_accounting,
        _checkpointed,
        requires=("checkpoint",),
    ),
    Check(
        "resume-rng",
        ("resume.rng-restored",),
        "trainer",
        "exact",
        check_resume_rng,
        _checkpointed,
        requires=("checkpoint",),
    ),
    Check(
        "resume-same-trace",
        ("resume.same-trace",),
        "trainer",
        "exact",
        check_resume_same_trace,
        _checkpointed,
        requires=("checkpoint",),
    ),
)

ALL_CHECKS: tuple[Check, ...] = (
    TRAINER_CHECKS
    + REPLAY_CHECKS
    + ENV_CHECKS
    + DETERMINISM_CHECKS
    + LEARNER_CHECKS
    + RELABEL_CHECKS
    + RECURRENT_CHECKS
    + RESUME_CHECKS
    + STACK_CHECKS
    + OFFLINE_CHECKS
    + ASYNC_CHECKS
)
