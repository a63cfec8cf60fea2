"""Spec variants as executable models: each named variant of a clause maps a scenario to the
same scenario with refimpl configured to behave as that variant.

A declared deviation with a variant is *reproduced* when the adapter's trace passes every
check that applies to the variant scenario — including the exact comparisons with refimpl
run as that variant. So a deviation is explained by a model, not only by prose.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.preprocessors import RewardTransform
from xpspec.protocol.sampling import Rounding, per_env_capacity
from xpspec.protocol.scenario import (
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

__all__ = [
    "UNDECLARABLE",
    "VARIANTS",
    "VariantModel",
    "model_scenario",
    "undeclarable",
    "variant_scenario",
]

Transform = Callable[[Scenario], "Scenario | None"]


@dataclass(frozen=True)
class VariantModel:
    """refimpl configured as one spec variant. Called on a scenario, it gives that scenario
    with refimpl so configured, or None when the variant does not concern its kind (or has
    no model for it); ``knobs`` says what it sets, in the scenario file's field names."""

    knobs: str
    apply: Transform

    def __call__(self, scenario: Scenario) -> Scenario | None:
        return self.apply(scenario)


def _knobs(prefix: str, knobs: dict[str, Any]) -> str:
    return ", ".join(f"{prefix}{name} = {json.dumps(value)}" for name, value in knobs.items())


def _trainer(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, TrainerScenario):
            return None
        return replace(s, trainer=replace(s.trainer, **knobs))

    return VariantModel(_knobs("trainer.", knobs), apply)


def _sampling(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, (TrainerScenario, ReplayScenario)):
            return None
        return replace(s, sampling=replace(s.sampling, **knobs))

    return VariantModel(_knobs("sampling.", knobs), apply)


def _env(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(
            s, (TrainerScenario, ReplayScenario, EnvScenario, StackScenario, OfflineScenario)
        ):
            return None
        return replace(s, env=replace(s.env, **knobs))

    return VariantModel(_knobs("env.", knobs), apply)


def _relabel(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, RelabelScenario):
            return None
        return replace(s, **knobs)

    return VariantModel(_knobs("", knobs), apply)


def _learner(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, LearnerScenario):
            return None
        return replace(s, **knobs)

    return VariantModel(_knobs("", knobs), apply)


def _recurrent(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, RecurrentScenario):
            return None
        return replace(s, **knobs)

    return VariantModel(_knobs("", knobs), apply)


def _stack(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, StackScenario):
            return None
        return replace(s, **knobs)

    return VariantModel(_knobs("", knobs), apply)


def _last_position() -> VariantModel:
    """A burn-in of every position but the last (its value depends on the scenario)."""

    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, RecurrentScenario):
            return None
        return replace(s, burn_in=s.sequence_length - 1)

    return VariantModel("burn_in = sequence_length - 1", apply)


def _offline(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, OfflineScenario):
            return None
        return replace(s, **knobs)

    return VariantModel(_knobs("", knobs), apply)


def _priority(**knobs: Any) -> VariantModel:
    def apply(s: Scenario) -> Scenario | None:
        if not isinstance(s, ReplayScenario) or s.priority is None:
            return None
        return replace(s, priority=replace(s.priority, **knobs))

    return VariantModel(_knobs("priority.", knobs), apply)


def _total_capacity(rounding: Rounding) -> VariantModel:
    """replay.eviction ``floor``/``ceil``: the framework is given the scenario's ``capacity``
    as its total ``C`` over the ``B`` envs and keeps ``per_env_capacity(C, B, rounding)``
    items per env. A ring too short for the scenario's windows (or below one item) has no
    model."""

    def apply(s: Scenario) -> Scenario | None:
        if isinstance(s, TrainerScenario):
            ring = per_env_capacity(s.trainer.capacity, s.env.num_envs, rounding)
            return replace(s, trainer=replace(s.trainer, capacity=ring))
        if isinstance(s, (ReplayScenario, RelabelScenario)):
            ring = per_env_capacity(s.capacity, s.env.num_envs, rounding)
            if isinstance(s, RelabelScenario) and ring < 2:
                return None  # a relabel buffer holds at least one transition per env
            return replace(s, capacity=ring)
        return None

    return VariantModel(
        f"capacity = per_env_capacity(capacity, num_envs, {json.dumps(rounding)}): the "
        "scenario's capacity taken as a total over the envs",
        apply,
    )


def _unheld_first_reward(s: Scenario) -> Scenario | None:
    """preprocess.transform ``transition-rows``: a reward transform leaves FIRST items'
    reward as unrolled (:class:`~xpspec.refimpl.preprocess.RewardTransform` ``first="unheld"``)."""
    if not isinstance(s, TrainerScenario) or not isinstance(s.preprocess, RewardTransform):
        return None
    return replace(s, preprocess=replace(s.preprocess, first="unheld"))


def _count_before(s: Scenario) -> Scenario | None:
    """unroll.global-counter ``count-before``: a per-mini-batch counter grows after each
    update, not before it (``counter_mode="per-mini-batch-after"``); a per-iteration counter
    is left as it is."""
    if not isinstance(s, TrainerScenario):
        return None
    if s.trainer.counter_mode != "per-mini-batch":
        return s
    return replace(s, trainer=replace(s.trainer, counter_mode="per-mini-batch-after"))


def _call_count_before(s: Scenario) -> Scenario | None:
    """unroll.global-counter ``call-count-before``: a per-mini-batch counter grows by a train
    call's updates after the call (``counter_mode="per-train-call-after"``); a per-iteration
    counter is left as it is."""
    if not isinstance(s, TrainerScenario):
        return None
    if s.trainer.counter_mode != "per-mini-batch":
        return s
    return replace(s, trainer=replace(s.trainer, counter_mode="per-train-call-after"))


def _iteration_count_before(s: Scenario) -> Scenario | None:
    """unroll.global-counter ``iteration-count-before``: a per-iteration counter grows at the
    end of each iteration, not at its start (``counter_mode="per-iteration-after"``); a
    per-mini-batch counter is left as it is."""
    if not isinstance(s, TrainerScenario):
        return None
    if s.trainer.counter_mode != "per-iteration":
        return s
    return replace(s, trainer=replace(s.trainer, counter_mode="per-iteration-after"))


VARIANTS: dict[tuple[str, str], VariantModel] = {
    ("timestep.auto-reset", "same-step"): _env(autoreset="same-step"),
    # SB3 2.9.2, Tianshou 2.0.1, TorchRL 0.14.1: a row is a transition holding the reward out
    # of its observation, so no row holds the reward into a first observation.
    ("preprocess.transform", "transition-rows"): VariantModel(
        'preprocess.first = "unheld" (a reward transform)', _unheld_first_reward
    ),
    ("unroll.fractional-schedule", "alf-float-carry"): _trainer(unroll_carry="alf-float"),
    ("unroll.num-env-steps", "non-first"): _trainer(env_step_count="non-first"),
    # d3rlpy 2.8.0 QLearningAlgoBase.update passes grad_step to the update, then increments it.
    ("unroll.global-counter", "count-before"): VariantModel(
        'trainer.counter_mode = "per-mini-batch-after" (where it was "per-mini-batch")',
        _count_before,
    ),
    # RLlib 2.60.0 Trainable.train increments Algorithm.iteration after Algorithm.step.
    # SB3 2.9.2's DQN.train adds gradient_steps to _n_updates after its loop.
    ("unroll.global-counter", "call-count-before"): VariantModel(
        'trainer.counter_mode = "per-train-call-after" (where it was "per-mini-batch")',
        _call_count_before,
    ),
    ("unroll.global-counter", "iteration-count-before"): VariantModel(
        'trainer.counter_mode = "per-iteration-after" (where it was "per-iteration")',
        _iteration_count_before,
    ),
    ("train.synced-schedule", "plain"): _trainer(train_accounting="plain"),
    ("train.synced-schedule", "alf-pr1768-floor"): _trainer(train_accounting="alf-pr1768-floor"),
    ("train.warmup-gate", "strict"): _trainer(warmup_gate="stored>"),
    ("train.warmup-gate", "capped-size"): _trainer(warmup_gate="size>="),
    # ALF snapshot 23aca492: the replay buffer is created at the first store and
    # _train_iter_off_policy returns before training while it does not exist.
    ("train.idle-calls", "alf-lazy-buffer"): _trainer(replay_creation="lazy"),
    # ALF snapshot 23aca492 Algorithm._train_experience / _prepare_experience_data.
    ("train.updates-per-call", "alf-resized-mini-batch"): _trainer(mini_batch_resize="alf"),
    ("replay.whole-buffer", "alf-shortened-chunks"): _trainer(short_chunks="shorten"),
    ("timestep.loss-mask-last", "no-mask"): _trainer(mask_last=False),
    ("replay.period-anchor", "oldest-anchored"): _sampling(anchor="oldest"),
    ("replay.uniform-windows", "env-balanced"): _sampling(distribution="env-balanced"),
    ("replay.uniform-windows", "uniform-episodes"): _sampling(distribution="uniform-episodes"),
    # TorchRL 0.14.1 SliceSampler: a trajectory uniformly, then a start inside it; slices never
    # cross a trajectory boundary, whatever the scenario's boundary policy.
    ("replay.uniform-windows", "uniform-episodes-forbid"): _sampling(
        boundary="forbid", distribution="uniform-episodes"
    ),
    # Tianshou 2.0.1 frame-stack windows (stack_num, sample_avail): uniform over the windows
    # inside one episode, whatever boundary policy was asked for.
    ("replay.uniform-windows", "uniform-windows-forbid"): _sampling(boundary="forbid"),
    # RLlib 2.60.0 learner connector, Learner.update, TrainingData.shard and
    # EpisodeReplayBuffer n-step items (xpspec.refimpl.learner variant "rllib-2.60").
    ("learner.stats-exclude-bootstrap", "rllib-includes-bootstrap"): _learner(
        advantage_variant="rllib-2.60"
    ),
    ("learner.update-count", "rllib-cyclic"): _learner(update_variant="rllib-2.60"),
    ("learner.nstep-episode-end", "rllib-requested-n"): _learner(nstep_variant="rllib-2.60"),
    ("learner.shard-episodes", "rllib-splits-episodes"): _learner(shard_variant="rllib-2.60"),
    # RLlib 2.60.0 AddOneTsToEpisodesAndTruncate grows the caller's episodes in place.
    ("learner.episode-unmodified", "rllib-mutates-episode"): _learner(
        episode_handling="rllib-2.60"
    ),
    # ALF snapshot 23aca492 Algorithm._train_experience resizes the mini-batch.
    ("learner.update-count", "alf-resized-mini-batch"): _learner(update_variant="alf"),
    # SB3 2.9.2 ReplayBuffer (buffer_size // n_envs), Flashbax 0.1.3 (max_size // add_batch_size);
    # Tianshou 2.0.1 VectorReplayBuffer (ceil(total_size / buffer_num)).
    ("replay.eviction", "floor"): _total_capacity("floor"),
    ("replay.eviction", "ceil"): _total_capacity("ceil"),
    # ALF snapshot 23aca492 HindsightExperienceTransformer: rand(B) < her_proportion.
    ("relabel.ratio", "alf-bernoulli"): _relabel(selection="bernoulli"),
    # Tianshou 2.0.1 PrioritizedReplayBuffer(weight_norm=True): weights over the batch's largest.
    ("priority.importance-weights", "batch-max"): _priority(weights="batch-max"),
    # Flashbax 0.1.3 sum_tree.stratified_sample: one draw in each of b equal strata of the mass.
    ("priority.sampling-law", "stratified"): _priority(draws="stratified"),
    # ALF (snapshot 23aca492) TrainerConfig.use_rollout_state=False: each training sequence
    # starts from the algorithm's initial (zero) state, not the stored rollout state.
    ("recurrent.initial-state", "zero-start"): _recurrent(initial_state="zeros"),
    # Tianshou 2.0.1 Recurrent nets under DQN: only a frame stack's last position is trained.
    ("recurrent.burn-in", "last-position"): _last_position(),
    # SB3 2.9.2 StackedObservations.reset/update zero the stack at a reset; TorchRL 0.14.1
    # CatFrames(padding="constant").
    ("stack.episode-start", "zero-fill"): _stack(padding="zeros"),
    # ALF (snapshot 23aca492) Algorithm.train_from_replay_buffer: the hybrid schedule reads the
    # global counter, which _train_iter_off_policy increments before the update, so update u
    # is number u + 1.
    ("offline.online-schedule", "counted-from-one"): _offline(first_update=1),
    # TorchRL 0.14.1 GAE(average_gae=True): the Bessel-corrected std (adv.std()).
    ("learner.stats-exclude-bootstrap", "sample-std"): _learner(normalization="sample"),
}


def variant_scenario(clause: str, variant: str, scenario: Scenario) -> Scenario | None:
    """``scenario`` with refimpl configured as ``variant`` of ``clause``; None when the
    variant has no executable model or does not concern this kind of scenario."""
    transform = VARIANTS.get((clause, variant))
    if transform is None:
        return None
    try:
        return transform(scenario)
    except ConfigError:  # the variant cannot serve this scenario (e.g. same-step + delayed)
        return None


def model_scenario(scenario: Scenario, variants: list[tuple[str, str]]) -> Scenario:
    """``scenario`` with refimpl configured as all ``(clause, variant)`` pairs together (an
    adapter's model). Variants are applied until none applies any more, so one that only fits
    once another has (a ring shorter than the windows needs shortened chunks) is not lost to
    declaration order; one that does not concern this kind of scenario leaves it unchanged."""
    model, pending = scenario, list(variants)
    progress = True
    while pending and progress:
        progress = False
        for clause, variant in list(pending):
            applied = variant_scenario(clause, variant, model)
            if applied is not None:
                model, progress = applied, True
                pending.remove((clause, variant))
    return model


def _alf_fixed_length(s: Scenario) -> Scenario | None:
    """ALF snapshot ``23aca492`` clears by the ring's length (``adjust_replay_buffer_length``
    in ``alf/algorithms/rl_algorithm.py``): whole-buffer training with ``clear_replay_buffer``
    keeps ``U + 1`` items per env and never empties it, so each call trains on the previous
    call's newest item and the new ``U`` — and on the same items again when nothing new was
    stored since (an iteration past ``num_env_steps``); ``RLAlgorithm.__init__`` raises
    ``initial_collect_steps`` to ``(U + 1)·B``, compared with the buffer's capped size.
    Modelled as a ring of ``U + 1`` without clearing, with that gate; a fractional ``U`` has no
    model (ALF fails to allocate a ring of ``U + 1`` items)."""
    if not isinstance(s, TrainerScenario):
        return None
    cfg = s.trainer
    if not cfg.whole_buffer or cfg.clear == "none" or cfg.mode == "on-policy":
        return s
    if cfg.unroll_length.denominator != 1:
        return None
    ring = int(cfg.unroll_length) + 1
    try:
        trainer = replace(
            cfg,
            clear="none",
            capacity=ring,
            initial_collect_steps=max(cfg.initial_collect_steps, ring * s.env.num_envs),
            warmup_gate="size>=",
        )
    except ConfigError:  # e.g. windows longer than the ring
        return None
    return replace(s, trainer=trainer)


VARIANTS[("replay.clear", "alf-fixed-length")] = VariantModel(
    'trainer.clear = "none", trainer.capacity = U + 1, trainer.initial_collect_steps = '
    'max(initial_collect_steps, (U + 1)·B), trainer.warmup_gate = "size>=" (whole-buffer '
    "training with clearing, integer U)",
    _alf_fixed_length,
)


UNDECLARABLE: dict[tuple[str, str], str] = {
    # Not observable: no trace can show them, so no check fails because of them.
    ("relabel.reward-recomputed", "tianshou-in-place"): (
        "Tianshou 2.0.1 restores the relabeled rows before the next add, sample or save, so "
        "every batch it returns, and every trace, equals the spec's; no check can fail because "
        "of it and no declaration of it could ever match a failure"
    ),
    # Observable, but refimpl has no model of it yet.
    ("replay.eviction", "episode-fifo"): (
        "no executable model: refimpl's replay buffer and the checks' buffer model keep one "
        "ring per env; a capacity in timesteps over all envs that evicts whole episodes needs "
        "both replaced; declare what it breaks as a [[finding]]"
    ),
    # xpspec.refimpl.relabel.relabel computes them, but a relabel scenario has no field that selects
    # them, so the reference cannot be run as them.
    ("relabel.eligible-goals", "torchrl-root-goal"): (
        "no executable model yet: xpspec.refimpl.relabel.relabel(variant='torchrl-0.14.1') computes it, "
        "but no relabel scenario field selects it and the relabel checks know the spec's goal "
        "steps only; declare what it breaks as a [[finding]]"
    ),
    ("relabel.eligible-goals", "complete-episodes-only"): (
        "no executable model yet: xpspec.refimpl.relabel.relabel(variant='sb3-2.9.2') computes it, "
        "but no relabel scenario field selects it (the reference's sampler draws from "
        "in-progress episodes too); declare what it breaks as a [[finding]]"
    ),
    ("relabel.eligible-goals", "tianshou-per-episode-goal"): (
        "no executable model yet: xpspec.refimpl.relabel.relabel(variant='tianshou-2.0.1') computes it, "
        "but no relabel scenario field selects it and the relabel checks know the spec's goal "
        "steps only; declare what it breaks as a [[finding]]"
    ),
    ("relabel.ratio", "per-episode"): (
        "no executable model yet: xpspec.refimpl.relabel.relabel(unit='episode') computes it, but no "
        "relabel scenario field selects it and the ratio check counts rows only; declare what "
        "it breaks as a [[finding]]"
    ),
    ("train.warmup-gate", "unrolled"): (
        "no executable model yet: refimpl has the knob (TrainerConfig(warmup_gate='unrolled>=')) "
        "but the warmup-gate check does not read it yet; declare what it breaks as a [[finding]]"
    ),
    ("train.after-train-iter", "alf-drain-empty"): (
        "no executable model yet: refimpl has the knob (TrainerConfig(hook_gate='unroll-gate')) "
        "but the after-train-iter check does not read it yet; declare what it breaks as a [[finding]]"
    ),
    ("train.updates-per-call", "sb3-gradient-steps-all"): (
        "no executable model: the update count depends on how the adapter maps the scenario's "
        "num_updates_per_train_iter to gradient_steps, which the variant does not state, and the "
        "updates-per-call check reads only num_updates_per_train_iter; declare what it breaks as "
        "a [[finding]]"
    ),
    ("train.updates-per-call", "tianshou-round-half-even"): (
        "no executable model: the update count depends on how the adapter maps the scenario's "
        "num_updates_per_train_iter to update_step_num_gradient_steps_per_sample, which the "
        "variant does not state, and the updates-per-call check reads only "
        "num_updates_per_train_iter; declare what it breaks as a [[finding]]"
    ),
    ("train.updates-per-call", "torchrl-floor-configured"): (
        "no executable model: the update count depends on how the adapter maps the scenario's "
        "num_updates_per_train_iter to utd_ratio and frames_per_batch, which the variant does "
        "not state, and the updates-per-call check reads only num_updates_per_train_iter; "
        "declare what it breaks as a [[finding]]"
    ),
    ("train.updates-per-call", "rllib-training-intensity"): (
        "no executable model: the update rounds depend on how the adapter maps the scenario's "
        "num_updates_per_train_iter to training_intensity, which the variant does not state, "
        "and the updates-per-call check reads only num_updates_per_train_iter; declare what it "
        "breaks as a [[finding]]"
    ),
}
"""Variants the spec names that an expectations file may not declare, with the reason the
loader gives. A variant here has no executable model, so a declaration of it could never be
reproduced; every other variant the spec names is in :data:`VARIANTS`."""


def undeclarable(clause: str, variant: str) -> str:
    """Why ``variant`` of ``clause`` cannot be declared ("" when it can: it has a model)."""
    if (clause, variant) in VARIANTS:
        return ""
    return UNDECLARABLE.get(
        (clause, variant), "no executable model (xpspec.conformance.variants.VARIANTS has none)"
    )
