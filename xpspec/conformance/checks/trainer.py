"""The registry of trainer checks: which check verifies which clauses, and on which scenarios."""

from __future__ import annotations

from collections.abc import Callable

from xpspec.conformance.checks.base import Check
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
from xpspec.conformance.checks.timesteps import (
    check_auto_reset,
    check_identity,
    check_loss_mask,
    check_state_reset,
    check_step_fields,
)
from xpspec.conformance.checks.train import (
    check_after_train_iter,
    check_after_update,
    check_bounded_lag,
    check_exact_projection,
    check_exact_stores,
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
from xpspec.protocol.scenario import Scenario, TrainerScenario

__all__ = ["TRAINER_CHECKS"]


def _is(*types: type) -> Callable[[Scenario], bool]:
    return lambda s: isinstance(s, TrainerScenario) and isinstance(s.preprocess, types)


def _cfg(pred: Callable[[TrainerScenario], object]) -> Callable[[Scenario], bool]:
    return lambda s: isinstance(s, TrainerScenario) and bool(pred(s))


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
    Check(
        "step-fields",
        ("timestep.step-types", "timestep.discount"),
        "trainer",
        "invariant",
        check_step_fields,
        _ANY,
    ),
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
        _ANY,
        requires=("counter",),
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
        check_exact_projection,
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
