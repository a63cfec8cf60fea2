"""The mutant zoo: deliberately broken variants of refimpl, each breaking one clause the way
a real framework plausibly could. The suite must catch every one of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import torch

from xpspec.protocol.adapter import AdapterInfo
from xpspec.protocol.identity import ItemId
from xpspec.protocol.scenario import RelabelScenario, TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Floats, Item, Trace
from xpspec.refimpl import preprocess as pre
from xpspec.refimpl import replay
from xpspec.refimpl.accounting import FloatCarrySchedule
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.asynchronous import Actors
from xpspec.refimpl.checkpoint import run_checkpointed
from xpspec.refimpl.offline import Mixer, Rings
from xpspec.refimpl.priority import PriorityModel
from xpspec.refimpl.recurrent import CountingLearner
from xpspec.refimpl.relabel import Relabeled, SampledTransitions, StoredEpisode, goal_rewards
from xpspec.refimpl.stack import ZERO_FRAME, Held, Stacker
from xpspec.refimpl.trainer import GOAL_FIELDS, ROW_FIELDS, Trainer

__all__ = ["MUTANTS", "Mutant", "MutantAdapter"]


class _ClearAllCaches(pre._EpisodeDelayedRuntime):
    """One env's LAST releases every env's cache (the ALF PR 1768 review concern)."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        out = super().step(rows)
        if any(v.action == "store" for v in out) and self._cache:
            for env in sorted(self._cache):
                cached = self._cache.pop(env)
                out.append(
                    pre.Verdict("store", {k: torch.cat([r[k] for r in cached]) for k in cached[0]})
                )
        return out


def _delayed_with(runtime: type[pre._EpisodeDelayedRuntime]) -> type[Trainer]:
    """A trainer whose episode-delayed mode runs ``runtime`` instead of refimpl's."""

    class Delayed(Trainer):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            if isinstance(self.preprocess_spec, pre.EpisodeDelayed):
                self._runtime = runtime(self.preprocess_spec.keep)

    Delayed.__name__ = Delayed.__qualname__ = runtime.__name__.lstrip("_")
    return Delayed


ClearAllCaches = _delayed_with(_ClearAllCaches)


@dataclass
class _Floor:
    """A train schedule that owes floor(stored / (u*B)) calls per iteration (a module-level
    class, so that a checkpoint pickles it)."""

    unit: Fraction

    def calls_for_iteration(self, unrolled: int, stored: int) -> int:
        return int(Fraction(stored) / self.unit)


class FloorWithoutCarry(Trainer):
    """Effective iterations floor(stored / (u*B)) per iteration, remainders dropped."""

    def _train_schedule(self) -> Any:
        u, b = Fraction(self.config.unroll_length) or Fraction(1), self.num_envs
        return _Floor(u * b)


class FloatCarry(Trainer):
    """ALF's float carry used where the spec asks for the exact schedule."""

    def _unroll_schedule(self) -> Any:
        return (
            None
            if self.config.drain is not None
            else FloatCarrySchedule(float(self.config.unroll_length))
        )


class WarmupIgnoresFirst(Trainer):
    """The warm-up gate counts only non-FIRST stored items (the schedule counts them all)."""

    firsts = 0

    def _stored(self, iteration: int, rows: Any, count: int) -> None:
        super()._stored(iteration, rows, count)
        self.firsts += int((rows["step_type"] == StepType.FIRST).sum())

    def _warm(self) -> bool:
        self.stored_total -= self.firsts
        try:
            return super()._warm()
        finally:
            self.stored_total += self.firsts


class NoStateReset(Trainer):
    """The policy state is never reset at FIRST."""

    @staticmethod
    def _reset_state(is_first: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return state


class MaskNothing(Trainer):
    """LAST items are trained on despite mask_last."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        from dataclasses import replace

        self.config = replace(self.config, mask_last=False)


class HookEveryIteration(Trainer):
    """after_train_iter also on iterations without an unroll."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self._hooked: set[int] = set()

    def _train_call(self, iteration: int) -> None:
        super()._train_call(iteration)
        if self._schedule is not None and iteration not in self._hooked:
            self._hooked.add(iteration)
            self.recorder.hook(iteration, "after_train_iter")


class CounterOnUnrollOnly(Trainer):
    """The counter moves only on iterations that unroll."""

    def _unroll_length(self, iteration: int) -> int:
        n = super()._unroll_length(iteration)
        if n == 0 and self.config.counter_mode == "per-iteration":
            self.counter -= 1
        return n


class SilentExclusion(Trainer):
    """Excluded items are dropped without a record."""

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        if action != "exclude":
            super()._apply(iteration, action, rows, reason)


class DoubleStoreLast(Trainer):
    """A released episode's LAST is stored twice."""

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        super()._apply(iteration, action, rows, reason)
        if action == "store" and isinstance(self.preprocess_spec, pre.EpisodeDelayed):
            last = {k: v[-1:] for k, v in rows.items()}
            super()._apply(iteration, "store", last, reason)


class DrainOneMore(Trainer):
    """Drains one vector step more than max_unroll_length allows when the queue has it."""

    def _unroll_length(self, iteration: int) -> int:
        n = super()._unroll_length(iteration)
        if (
            self.config.drain is not None
            and self._queue > 0
            and n == self.config.drain.max_unroll_length
        ):
            self._queue -= 1
            n += 1
        return n


class NoClear(Trainer):
    """Whole-buffer clearing is skipped, but fresh-data bookkeeping still resets."""

    def _train_call(self, iteration: int) -> None:
        original = self.buffer.clear
        self.buffer.clear = lambda keep_last=0: None  # type: ignore[method-assign]
        try:
            super()._train_call(iteration)
        finally:
            self.buffer.clear = original  # type: ignore[method-assign]


class RetrainWithoutData(Trainer):
    """With clearing, a call trains again on the kept step though nothing new was stored."""

    def _train_call(self, iteration: int) -> None:
        if (
            self.config.clear != "none"
            and self.stored_since_clear == 0
            and self.buffer.total_size > 0
        ):
            self.stored_since_clear = 1
        super()._train_call(iteration)


class IgnoreBoundaryPolicy(Trainer):
    """Samples with boundary 'cross' whatever the scenario asks."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        from dataclasses import replace

        self.sampling = replace(self.sampling, boundary="cross")


class OldestAnchor(Trainer):
    """The period grid anchored at the oldest item where the spec anchors it at 0."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        from dataclasses import replace

        self.sampling = replace(self.sampling, anchor="oldest")


class ForgetPending(Trainer):
    """Items still held at the end are not reported."""

    def _finish(self, iterations: int) -> None:
        self.recorder.run_end(iterations, self.env_steps, self.config.pending_at_end, None)


class NewestChunks(Trainer):
    """Whole-buffer chunks cut from the newest item back, dropping the oldest remainder."""

    def _batches(self) -> Any:
        if not self.config.whole_buffer:
            return super()._batches()
        original = self.buffer.chunks

        def shifted(length: int) -> Any:
            drop = self.buffer.sizes % length
            self.buffer._size -= drop  # pretend the oldest remainder is gone
            try:
                return original(length)
            finally:
                self.buffer._size += drop

        self.buffer.chunks = shifted  # type: ignore[method-assign]
        try:
            return super()._batches()
        finally:
            self.buffer.chunks = original  # type: ignore[method-assign]


class ClearDropsUntrained(Trainer):
    """A clear that empties every ring (keeps only its newest item under keep-one-step),
    dropping the items the call could not train on; on-policy training cleared the same way."""

    def _kept_by_clear(self) -> list[int]:
        keep = 1 if self.config.clear == "keep-one-step" else 0
        return [min(keep, n) for n in self.buffer.sizes.tolist()]


class OnPolicyClearsAll(Trainer):
    """On-policy training as a ring of ``u`` items emptied after every call: the last item of
    each unroll never shares a chunk with its successor."""

    def __init__(self, env: Any, config: Any, *a: Any, **k: Any) -> None:
        super().__init__(env, config, *a, **k)
        if config.mode == "on-policy":
            self.config = replace(self.config, clear="all", capacity=int(config.unroll_length))
            self.buffer = replay.ReplayBuffer(self.num_envs, self.config.capacity, ROW_FIELDS)


class BudgetCutsUnroll(Trainer):
    """The unroll that reaches the env-step budget stops at the first vector step that
    reaches it (RLlib 2.60.0 ``sample(num_timesteps=c)`` checks after every vector step)."""

    def _unroll_length(self, iteration: int) -> int:
        n = super()._unroll_length(iteration)
        budget = self.config.num_env_steps
        if budget and self.env_steps < budget and self.config.env_step_count == "all":
            n = min(n, -(-(budget - self.env_steps) // self.num_envs))
        return n


class StopAtBudget(Trainer):
    """The run ends once the env-step budget is reached, also when ``num_iterations`` asks
    for more iterations (SB3's ``total_timesteps``, TorchRL's ``total_frames``)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        if self.config.num_env_steps:
            self.config = replace(self.config, num_iterations=0)


class SkipIdleCalls(Trainer):
    """A call that would not train (nothing stored, or the warm-up gate shut) is not made
    at all, nor counted (a loop that skips its train step while nothing can be trained)."""

    def _train_call(self, iteration: int) -> None:
        cfg = self.config
        fresh = self.stored_since_clear > 0 if cfg.clear != "none" else self.buffer.total_size > 0
        if fresh and self._warm():
            super()._train_call(iteration)


class AfterUpdateOnIdleCall(Trainer):
    """``after_update`` is also called after a call that made no update (a hook run after
    every train step, whether or not it trained)."""

    def _train_call(self, iteration: int) -> None:
        before = self.updates
        super()._train_call(iteration)
        if self.updates == before:
            self.recorder.hook(iteration, "after_update")


class BudgetSkipsFirst(Trainer):
    """The env-step budget counts only non-FIRST steps where the spec counts every item."""

    def _unroll_step(self, iteration: int, time_step: Any, *rest: Any) -> Any:
        firsts = int((time_step.step_type == StepType.FIRST).sum())
        out = super()._unroll_step(iteration, time_step, *rest)
        if self.config.env_step_count == "all":
            self.env_steps -= firsts
        return out


class _NeverRelease(pre._EpisodeDelayedRuntime):
    """The release loop deleted: every item is held, none is ever released."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        for i in range(rows["env_id"].shape[0]):
            env = int(rows["env_id"][i])
            self._cache.setdefault(env, []).append({k: v[i : i + 1] for k, v in rows.items()})
        return [pre.Verdict("hold", rows)]


NeverRelease = _delayed_with(_NeverRelease)


class _KeepAndOr(pre._EpisodeDelayedRuntime):
    """The keep rule with ``or`` turned into ``and``: keep="all" drops successes and
    keep="success" drops everything."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        out = []
        for verdict in super().step(rows):
            if verdict.action in ("store", "exclude"):
                success = bool(verdict.rows["discount"][-1] == 0)
                kept = self._keep == "all" and (self._keep == "success") == success
                verdict = (
                    pre.Verdict("store", verdict.rows)
                    if kept
                    else pre.Verdict("exclude", verdict.rows, "outcome")
                )
            out.append(verdict)
        return out


class _KeepEqNe(pre._EpisodeDelayedRuntime):
    """The keep rule with ``==`` turned into ``!=``: keep="success" keeps the failures and
    keep="failure" the successes."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        out = []
        for verdict in super().step(rows):
            if verdict.action in ("store", "exclude"):
                success = bool(verdict.rows["discount"][-1] == 0)
                kept = self._keep == "all" or (self._keep == "success") != success
                verdict = (
                    pre.Verdict("store", verdict.rows)
                    if kept
                    else pre.Verdict("exclude", verdict.rows, "outcome")
                )
            out.append(verdict)
        return out


KeepEqNe = _delayed_with(_KeepEqNe)


class _AnnotateTruncation(pre._EpisodeDelayedRuntime):
    """A released episode is annotated 1 when it was truncated and 0 when it terminated."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        out = []
        for verdict in super().step(rows):
            if verdict.action == "store":
                flipped = 1 - verdict.rows["annotation"]
                verdict = pre.Verdict("store", {**verdict.rows, "annotation": flipped})
            out.append(verdict)
        return out


AnnotateTruncation = _delayed_with(_AnnotateTruncation)


class _ExcludeWithoutReason(pre._EpisodeDelayedRuntime):
    """Episodes the keep rule drops are excluded with reason ``episode`` (not ``outcome``)."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        return [
            pre.Verdict("exclude", v.rows, "episode") if v.action == "exclude" else v
            for v in super().step(rows)
        ]


ExcludeWrongReason = _delayed_with(_ExcludeWithoutReason)


KeepAndOr = _delayed_with(_KeepAndOr)


class _ReverseReleases(pre._EpisodeDelayedRuntime):
    """The episodes ending in one vector step are released in decreasing env order."""

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        held, *released = super().step(rows)
        return [held, *reversed(released)]


ReverseReleases = _delayed_with(_ReverseReleases)


class _OneStepLate(pre.Runtime):
    """Identity that holds each vector step's rows and stores them one vector step late."""

    def __init__(self) -> None:
        self._previous: pre.Rows | None = None

    def step(self, rows: pre.Rows) -> list[pre.Verdict]:
        out = [pre.Verdict("hold", rows)]
        if self._previous is not None:
            out.append(pre.Verdict("store", self._previous))
        self._previous = rows
        return out

    def pending(self) -> pre.Rows | None:
        return self._previous

    def state_dict(self) -> dict[str, Any]:
        return {"previous": self._previous}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._previous = state["previous"]


class IdentityOneStepLate(Trainer):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        if isinstance(self.preprocess_spec, pre.Identity):
            self._runtime = _OneStepLate()
            self._identity = False  # refimpl's fast path for identity bypasses the runtime


class ReleaseAtIterationEnd(Trainer):
    """Episode-delayed releases are collected during the unroll and made once it is over,
    in the same order and iteration, instead of in the vector step of each LAST."""

    def _unroll(self, iteration: int, n: int, *rest: Any) -> Any:
        self._deferred: list[tuple[str, Any, str]] | None = []
        try:
            out = super()._unroll(iteration, n, *rest)
        finally:
            deferred, self._deferred = self._deferred, None
        for action, rows, reason in deferred:
            super()._apply(iteration, action, rows, reason)
        return out

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        deferred = getattr(self, "_deferred", None)
        if deferred is not None and action != "hold":
            deferred.append((action, rows, reason))
        else:
            super()._apply(iteration, action, rows, reason)


class ExcludedModeShiftsReward(Trainer):
    """Under a selective exclusion, the items kept are stored with reward + 1."""

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        excluding = (pre.ExcludeSteps, pre.ExcludeEpisodes, pre.ExcludeTasks)
        if action == "store" and isinstance(self.preprocess_spec, excluding):
            rows = {**rows, "reward": rows["reward"] + 1}
        super()._apply(iteration, action, rows, reason)


class DelayedLosesDiscount(Trainer):
    """A released episode is stored with discount 1 everywhere (its LAST's 0 lost)."""

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        if action == "store" and isinstance(self.preprocess_spec, pre.EpisodeDelayed):
            rows = {**rows, "discount": torch.ones_like(rows["discount"])}
        super()._apply(iteration, action, rows, reason)


class TransformLosesDiscount(Trainer):
    """Under a reward transform or a step-type overwrite, items are stored with discount 1
    (a terminated LAST's 0 lost)."""

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        transforming = (pre.RewardTransform, pre.OverwriteStepType)
        if action == "store" and isinstance(self.preprocess_spec, transforming):
            rows = {**rows, "discount": torch.ones_like(rows["discount"])}
        super()._apply(iteration, action, rows, reason)


class IdentityAnnotates(Trainer):
    """Identity preprocessing stores every item with annotation 1."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self._identity = False  # refimpl's fast path for identity bypasses _apply

    def _apply(self, iteration: int, action: str, rows: Any, reason: str) -> None:
        if action == "store" and isinstance(self.preprocess_spec, pre.Identity):
            rows = {**rows, "annotation": torch.ones_like(rows["annotation"])}
        super()._apply(iteration, action, rows, reason)


class _SmallestWidthBuffer(replay.ReplayBuffer):
    """The valid-window table is as wide as the smallest env's ring instead of the largest:
    the starts of a longer ring beyond the shortest one's content are lost, and when some env
    holds fewer items than a window the table is empty although other envs hold valid
    windows."""

    def _valid_table(self, sampling: replay.SamplingSpec) -> Any:
        table = super()._valid_table(sampling)
        smallest = max(int(self._size.min()), 1)
        reach = 0 if sampling.boundary == "pad" else sampling.window_length - 1
        earliest = self._end - self._size
        keep = table.start - earliest[table.env] + reach < smallest
        segment = torch.repeat_interleave(
            torch.arange(table.seg_counts.shape[0]), table.seg_counts
        )[keep]
        _, seg_counts = torch.unique_consecutive(segment, return_counts=True)
        return replay._Table(
            table.env[keep],
            table.start[keep],
            torch.bincount(table.env[keep], minlength=self.num_envs),
            torch.cumsum(seg_counts, 0) - seg_counts,
            seg_counts,
        )


class SmallestWidthTable(Trainer):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        fields = {**ROW_FIELDS, **GOAL_FIELDS} if self.env_spec.goals else ROW_FIELDS
        self.buffer = _SmallestWidthBuffer(self.num_envs, self.config.capacity, fields)


# -- relabeling mutants: refimpl's relabeled batch, then one thing done wrong ------------------
Relabeler = Callable[
    [Sequence[StoredEpisode], SampledTransitions, RelabelScenario, torch.Generator], Relabeled
]


def _reference_relabel(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    scenario: RelabelScenario,
    generator: torch.Generator,
) -> Relabeled:
    return RefimplAdapter()._relabel_batch(store, sample, scenario, generator)


def _with_goals(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    out: Relabeled,
    goals: dict[int, torch.Tensor],
) -> Relabeled:
    """``out`` with row ``i``'s goal replaced by ``goals[i]`` and its reward recomputed with
    it (the goal sources named stay as they were)."""
    desired, reward = out.desired_goal.clone(), out.reward.clone()
    for i, goal in goals.items():
        reached = store[int(sample.episode_index[i])].goal_at(sample.t[i] + 1)
        desired[i] = goal.to(desired.dtype)
        reward[i] = goal_rewards(reached[None], goal[None].to(reached.dtype))[0]
    return replace(out, desired_goal=desired, reward=reward)


def _relabeled_rows(out: Relabeled) -> list[int]:
    return [int(i) for i in torch.nonzero(out.relabeled).flatten().tolist()]


def goal_one_step_early(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    scenario: RelabelScenario,
    generator: torch.Generator,
) -> Relabeled:
    """The goal is read from the row before its source (the achieved goal of ``o_{t'-1}``
    where the bookkeeping names ``t'``: an observation / next-observation mix-up)."""
    out = _reference_relabel(store, sample, scenario, generator)
    goals = {}
    for i in _relabeled_rows(out):
        ep, source = store[int(sample.episode_index[i])], int(out.source_t[i])
        if source - 1 >= ep.t_start:
            goals[i] = ep.goal_at(torch.tensor(source - 1))
    return _with_goals(store, sample, out, goals)


def goal_of_another_row(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    scenario: RelabelScenario,
    generator: torch.Generator,
) -> Relabeled:
    """Each relabeled row gets the goal drawn for the next relabeled row (an index shift
    between the goal lookup and the rows), mostly a goal of another episode; the sources
    named are the rows' own."""
    out = _reference_relabel(store, sample, scenario, generator)
    rows = _relabeled_rows(out)
    shifted = rows[1:] + rows[:1]
    return _with_goals(store, sample, out, {i: out.desired_goal[j] for i, j in zip(rows, shifted)})


def goal_from_the_past(
    store: Sequence[StoredEpisode],
    sample: SampledTransitions,
    scenario: RelabelScenario,
    generator: torch.Generator,
) -> Relabeled:
    """The goal step is drawn uniformly from ``t_start..t``, the steps before the transition
    ends (named truthfully): states the transition did not lead to."""
    out = _reference_relabel(store, sample, scenario, generator)
    rows = _relabeled_rows(out)
    source_t, sources = out.source_t.clone(), list(out.sources)
    goals = {}
    for i in rows:
        ep, t = store[int(sample.episode_index[i])], int(sample.t[i])
        step = int(torch.randint(ep.t_start, t + 1, (), generator=generator))
        source_t[i], sources[i] = step, ItemId(ep.env, ep.episode, step)
        goals[i] = ep.goal_at(torch.tensor(step))
    out = replace(out, source_t=source_t, sources=tuple(sources))
    return _with_goals(store, sample, out, goals)


class _WithoutReplacementBuffer(replay.ReplayBuffer):
    """Uniform windows drawn without replacement within a batch: each batch deals random
    permutations of the valid windows one after another, so no window repeats before every
    valid one was drawn. Every window stays equally likely; the draws of a batch are not
    independent."""

    def sample(
        self, batch_size: int, sampling: replay.SamplingSpec, generator: torch.Generator
    ) -> replay.Sample:
        table = self._valid_table(sampling)
        width = int(table.env.shape[0])
        if sampling.distribution != "uniform-windows" or width == 0:
            return super().sample(batch_size, sampling, generator)
        rounds = -(-batch_size // width)
        k = torch.cat([torch.randperm(width, generator=generator) for _ in range(rounds)])
        k = k[:batch_size]
        return self._gather(
            table.env[k], table.start[k], sampling.window_length, sampling.boundary == "pad"
        )


class _OneEnvPerBatchBuffer(replay.ReplayBuffer):
    """One env per batch: the env is drawn in proportion to its valid windows, then every
    window of the batch uniformly among that env's. Every window stays equally likely over
    batches; the draws of one batch all share their env."""

    def sample(
        self, batch_size: int, sampling: replay.SamplingSpec, generator: torch.Generator
    ) -> replay.Sample:
        table = self._valid_table(sampling)
        width = int(table.env.shape[0])
        if sampling.distribution != "uniform-windows" or width == 0:
            return super().sample(batch_size, sampling, generator)
        env = table.env[int(torch.randint(0, width, (1,), generator=generator))]
        offset = int((torch.cumsum(table.env_counts, 0) - table.env_counts)[env])
        count = int(table.env_counts[env])
        k = offset + torch.randint(0, count, (batch_size,), generator=generator)
        return self._gather(
            table.env[k], table.start[k], sampling.window_length, sampling.boundary == "pad"
        )


class _NewAtOne(PriorityModel):
    """A window that becomes valid starts at priority 1 (the initial maximum), not at the
    largest priority assigned so far: new experience is under-replayed once TD errors above 1
    were seen."""

    def new_priority(self) -> Fraction:
        return Fraction(1)


class _ZeroStart(CountingLearner):
    """Every training sequence starts from the initial state, whatever the scenario asks:
    the rollout state stored in the buffer is ignored (ALF's default, taken for the spec)."""

    def initial_state(self, stored: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(stored)


class _NoResetInTraining(CountingLearner):
    """The state is carried into a FIRST inside a sequence: the learner forgets the reset the
    rollout made (a training loop without ``reset_state_if_necessary``)."""

    def reset(self, state: torch.Tensor, is_first: torch.Tensor) -> torch.Tensor:
        return state


class _BurnInTrained(CountingLearner):
    """The burn-in positions warm the state and are trained on as well."""

    def loss_mask(self, step_type: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        return (real & (step_type != int(StepType.LAST))).to(torch.int64)


class _PaddingTrained(CountingLearner):
    """Padding positions carry loss mask 1 (a mask built from the sequence length alone)."""

    def loss_mask(self, step_type: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        mask = super().loss_mask(step_type, real)
        mask[~real] = 1
        return mask


class _StackCrossesEpisodes(Stacker):
    """The stack is only started once: at a later FIRST it keeps the previous episode's
    frames (a stacker that ignores the episode boundary)."""

    def restart(self, stack: tuple[Item, ...], first: Item) -> tuple[Item, ...]:
        return self.push(stack, first) if stack else super().restart(stack, first)


class _StackZeroPadding(Stacker):
    """Positions before the FIRST hold the zero frame whatever the scenario's padding."""

    def pad(self, first: Item) -> Item:
        return ZERO_FRAME


class _StackStaleNewest(Stacker):
    """The newest position repeats the previous newest frame: the stack lags one step."""

    def push(self, stack: tuple[Item, ...], item: Item) -> tuple[Item, ...]:
        return (*stack[1:], stack[-1])


class _StackRebuildCrosses(Stacker):
    """A stack rebuilt from the ring walks back past the episode's FIRST (the boundary is
    forgotten at sample time only)."""

    def rebuild(self, ring: list[Held], position: int) -> tuple[Item, ...]:
        start = max(position - self.k + 1, 0)
        frames = [h.item for h in ring[start : position + 1]]
        return tuple([frames[0]] * (self.k - len(frames)) + frames)


class _StackSamplesEvicted(Stacker):
    """Every held item is sampled; one whose earlier frames the ring evicted gets a stack
    padded from the oldest held frame."""

    def samplable(self, ring: list[Held], position: int) -> bool:
        return True

    def rebuild(self, ring: list[Held], position: int) -> tuple[Item, ...]:
        frames = [ring[position].item]
        p = position
        while len(frames) < self.k and ring[p].step_type != int(StepType.FIRST) and p > 0:
            p -= 1
            frames.append(ring[p].item)
        return tuple([self.pad(frames[-1])] * (self.k - len(frames)) + frames[::-1])


class _SwappedShares(Mixer):
    """Each source gets the other's share of the batch."""

    def shares(self) -> tuple[int, int]:
        offline, online = super().shares()
        return online, offline


class _OnlineOverwritesOffline(Mixer):
    """One shared ring: each online write also evicts the oldest offline item."""

    def write(self, online: Rings, offline: list[Item], item: Item) -> None:
        super().write(online, offline, item)
        offline[:] = [*offline[1:], item]


class _OnlineStartsLate(Mixer):
    """The online part starts one update after ``online_after``."""

    def online_trains(self, update: int) -> bool:
        return update > self.scenario.online_after and super().online_trains(update)


class _OfflineOnlyUncounted(Mixer):
    """An update without the online part does not count as a training iteration."""

    def count(self, counter: int, online: bool) -> int:
        return counter + 1 if online else counter


class _AsyncLearnerVersion(Actors):
    """The version recorded with an item is the learner's when the actor acts, not the
    version of the (older) weights the actor acts with."""

    def recorded_version(self, acting: int, learner: int) -> int:
        return learner


class _AsyncLearnerLogProb(Actors):
    """The stored log-probability is recomputed under the learner's newest weights instead
    of the behaviour logits that acted."""

    def log_prob(self, logits: Floats, action: int, learner: int) -> float:
        return super().log_prob(self.logits(learner), action, learner)


class _AsyncNoLagBound(Actors):
    """Every arrived item is trained on, however old its version."""

    def trainable(self, lag: int) -> bool:
        return True


class _AsyncCountsTrained(Actors):
    """The env-step counter counts only the items trained on, not those dropped."""

    def count(self, counter: int, arrived: int, trained: int) -> int:
        return counter + trained


@dataclass(frozen=True)
class Mutant:
    name: str
    trainer: type[Trainer]
    breaks: str
    """The clause the mutant breaks: blame charges every failure it causes to this one."""
    relabeler: Relabeler | None = None
    """Replaces refimpl's relabeling (capability ``relabel``); ``trainer`` is then refimpl's."""
    buffer: type[replay.ReplayBuffer] | None = None
    """A replay mutant: the buffer sampled by replay scenarios (the trainer is refimpl's)."""
    priority: type[PriorityModel] | None = None
    """A replay mutant: the priorities prioritized replay scenarios sample by."""
    learner: type[CountingLearner] | None = None
    """A recurrent mutant: the counting network recurrent scenarios train (capability
    ``recurrent``; the trainer is refimpl's)."""
    stacker: type[Stacker] | None = None
    """A frame stacking mutant: the stacker stack scenarios run (capability ``stack``)."""
    mixer: type[Mixer] | None = None
    """An offline mutant: the hybrid sampler offline scenarios run (capability
    ``offline``)."""
    actors: type[Actors] | None = None
    """An async mutant: the actors and learner async scenarios run (capability ``async``)."""
    forgets: tuple[str, ...] = ()
    """A resume mutant: the parts of a saved trainer its restore leaves out
    (:data:`xpspec.refimpl.checkpoint.PARTS`; the trainer is refimpl's)."""
    same_trace_as: tuple[tuple[str, str, str], ...] = ()
    """``(scenario, mutant, clause)``: on that catalogue scenario the mutant's trace is byte
    for byte that of another mutant, which breaks ``clause``; no check can tell them apart
    there, so blame may name ``clause`` on it (tests/conformance/test_zoo.py proves the
    identity)."""

    @property
    def capability(self) -> str:
        """The capability (and scenario kind) whose checks must catch the mutant."""
        if self.relabeler is not None:
            return "relabel"
        if self.learner is not None:
            return "recurrent"
        if self.stacker is not None:
            return "stack"
        if self.mixer is not None:
            return "offline"
        if self.actors is not None:
            return "async"
        return "trainer" if self.buffer is None and self.priority is None else "replay"


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "never-release",
        NeverRelease,
        "preprocess.delayed-per-env",
    ),
    Mutant(
        "keep-and-or",
        KeepAndOr,
        "preprocess.delayed-per-env",
    ),
    Mutant(
        "reverse-releases",
        ReverseReleases,
        "preprocess.release-order",
    ),
    Mutant("release-at-iteration-end", ReleaseAtIterationEnd, "preprocess.release-order"),
    # Reruns with identity preprocessing (train.excluded-earn-nothing compares exclusions with
    # them) fail there as its consequence, downstream.
    Mutant("identity-one-step-late", IdentityOneStepLate, "preprocess.identity-is-plain"),
    Mutant(
        "keep-eq-ne",
        KeepEqNe,
        "preprocess.delayed-per-env",
    ),
    Mutant("annotate-truncation", AnnotateTruncation, "preprocess.delayed-per-env"),
    Mutant("exclude-wrong-reason", ExcludeWrongReason, "preprocess.delayed-per-env"),
    Mutant("excluded-mode-shifts-reward", ExcludedModeShiftsReward, "preprocess.exclusion"),
    Mutant("delayed-loses-discount", DelayedLosesDiscount, "preprocess.delayed-per-env"),
    Mutant("transform-loses-discount", TransformLosesDiscount, "preprocess.transform"),
    Mutant("identity-annotates", IdentityAnnotates, "preprocess.identity-is-plain"),
    Mutant(
        "clear-all-caches",
        ClearAllCaches,
        "preprocess.delayed-per-env",
    ),
    Mutant(
        "smallest-width-table",
        SmallestWidthTable,
        "train.insufficient-data",
    ),
    Mutant("skip-idle-calls", SkipIdleCalls, "train.idle-calls"),
    Mutant(
        "floor-without-carry",
        FloorWithoutCarry,
        "train.synced-schedule",
    ),
    Mutant(
        "float-carry",
        FloatCarry,
        "unroll.fractional-schedule",
    ),
    Mutant(
        "warmup-ignores-first",
        WarmupIgnoresFirst,
        "train.warmup-gate",
    ),
    Mutant("no-state-reset", NoStateReset, "timestep.state-reset"),
    Mutant("mask-nothing", MaskNothing, "timestep.loss-mask-last"),
    Mutant("hook-every-iteration", HookEveryIteration, "train.after-train-iter"),
    Mutant("after-update-on-idle-call", AfterUpdateOnIdleCall, "train.after-update"),
    Mutant("counter-on-unroll-only", CounterOnUnrollOnly, "unroll.global-counter"),
    Mutant(
        "silent-exclusion",
        SilentExclusion,
        "preprocess.conservation",
    ),
    Mutant(
        "double-store-last",
        DoubleStoreLast,
        "preprocess.conservation",
    ),
    Mutant(
        "drain-one-more",
        DrainOneMore,
        "unroll.drain",
    ),
    Mutant(
        "no-clear",
        NoClear,
        "replay.clear",
    ),
    Mutant(
        "retrain-without-data",
        RetrainWithoutData,
        "replay.clear",
    ),
    Mutant(
        "ignore-boundary-policy",
        IgnoreBoundaryPolicy,
        "replay.boundary-policy",
    ),
    Mutant(
        "oldest-anchor",
        OldestAnchor,
        "replay.period-anchor",
    ),
    Mutant(
        "forget-pending",
        ForgetPending,
        "preprocess.pending-at-end",
    ),
    Mutant(
        "newest-chunks",
        NewestChunks,
        "replay.whole-buffer",
        # On-policy, dropping the oldest remainder drops exactly the item the clear keeps.
        same_trace_as=(
            ("on-policy", "on-policy-clears-all", "replay.clear"),
            ("on-policy-keeps-last", "on-policy-clears-all", "replay.clear"),
        ),
    ),
    Mutant(
        "clear-drops-untrained",
        ClearDropsUntrained,
        "replay.clear",
    ),
    Mutant(
        "on-policy-clears-all",
        OnPolicyClearsAll,
        "replay.clear",
    ),
    Mutant(
        "sample-without-replacement",
        Trainer,
        "replay.uniform-windows",
        buffer=_WithoutReplacementBuffer,
    ),
    Mutant("one-env-per-batch", Trainer, "replay.uniform-windows", buffer=_OneEnvPerBatchBuffer),
    Mutant("new-at-one", Trainer, "priority.new-at-max", priority=_NewAtOne),
    Mutant(
        "budget-skips-first",
        BudgetSkipsFirst,
        "unroll.num-env-steps",
    ),
    Mutant(
        "goal-one-step-early",
        Trainer,
        "relabel.same-episode",
        relabeler=goal_one_step_early,
    ),
    Mutant(
        "goal-of-another-row",
        Trainer,
        "relabel.same-episode",
        relabeler=goal_of_another_row,
    ),
    Mutant(
        "goal-from-the-past",
        Trainer,
        "relabel.eligible-goals",
        relabeler=goal_from_the_past,
    ),
    Mutant("budget-cuts-unroll", BudgetCutsUnroll, "unroll.budget-whole-unroll"),
    Mutant("stop-at-budget", StopAtBudget, "unroll.budget-run-end"),
    Mutant("zero-start", Trainer, "recurrent.initial-state", learner=_ZeroStart),
    Mutant("no-reset-in-training", Trainer, "recurrent.reset-at-first", learner=_NoResetInTraining),
    Mutant("burn-in-trained", Trainer, "recurrent.burn-in", learner=_BurnInTrained),
    Mutant("padding-trained", Trainer, "recurrent.padding", learner=_PaddingTrained),
    # frame stacking: each mutant breaks one rule of the stacker
    Mutant("stack-crosses-episodes", Trainer, "stack.no-cross", stacker=_StackCrossesEpisodes),
    Mutant("stack-zero-padding", Trainer, "stack.episode-start", stacker=_StackZeroPadding),
    Mutant("stack-stale-newest", Trainer, "stack.frames", stacker=_StackStaleNewest),
    Mutant(
        "stack-rebuild-crosses",
        Trainer,
        "stack.sample-equals-rollout",
        stacker=_StackRebuildCrosses,
    ),
    Mutant(
        "stack-samples-evicted", Trainer, "stack.earliest-ignored", stacker=_StackSamplesEvicted
    ),
    # offline and hybrid replay: each mutant breaks one rule of the mixer
    Mutant("offline-swapped-shares", Trainer, "offline.mix-ratio", mixer=_SwappedShares),
    Mutant(
        "online-overwrites-offline",
        Trainer,
        "offline.items-unchanged",
        mixer=_OnlineOverwritesOffline,
    ),
    Mutant("online-starts-late", Trainer, "offline.online-schedule", mixer=_OnlineStartsLate),
    Mutant(
        "offline-only-uncounted",
        Trainer,
        "offline.iteration-accounting",
        mixer=_OfflineOnlyUncounted,
    ),
    # asynchronous actors: each mutant breaks one rule of the actors or the learner
    Mutant("async-learner-version", Trainer, "async.version-recorded", actors=_AsyncLearnerVersion),
    Mutant(
        "async-learner-log-prob", Trainer, "async.behaviour-logits", actors=_AsyncLearnerLogProb
    ),
    Mutant("async-no-lag-bound", Trainer, "async.lag-bounded", actors=_AsyncNoLagBound),
    Mutant("async-counts-trained", Trainer, "async.env-steps-counted", actors=_AsyncCountsTrained),
    # checkpoint and resume: a restore that leaves the unroll schedule's carry out
    Mutant(
        "resume-forgets-carry", Trainer, "resume.accounting-restored", forgets=("unroll_schedule",)
    ),
)


class MutantAdapter(RefimplAdapter):
    """refimpl with one mutant trainer, relabeler or replay buffer; everything else is the
    reference's."""

    def __init__(self, mutant: Mutant) -> None:
        self.mutant = mutant
        if mutant.buffer is not None:
            self.replay_buffer = mutant.buffer
        if mutant.priority is not None:
            self.priority_model = mutant.priority
        if mutant.learner is not None:
            self.recurrent_learner = mutant.learner
        if mutant.stacker is not None:
            self.stacker = mutant.stacker
        if mutant.mixer is not None:
            self.mixer = mutant.mixer
        if mutant.actors is not None:
            self.actors = mutant.actors
        self.checkpoint_forgets = mutant.forgets

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            f"mutant:{self.mutant.name}",
            "refimpl mutant",
            "0",
            capabilities=(
                "trainer",
                "counter",
                "update-counter",
                "hooks",
                "state",
                "loss-mask",
                "relabel",
                "replay",
                "priorities",
                "importance-weights",
                "recurrent",
                "checkpoint",
                "stack",
                "offline",
                "async",
            ),
        )

    def _relabel_batch(
        self,
        store: Sequence[StoredEpisode],
        sample: SampledTransitions,
        scenario: RelabelScenario,
        generator: torch.Generator,
    ) -> Relabeled:
        if self.mutant.relabeler is None:
            return super()._relabel_batch(store, sample, scenario, generator)
        return self.mutant.relabeler(store, sample, scenario, generator)

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        sc = scenario
        if sc.checkpoint is not None:
            return run_checkpointed(sc, self.checkpoint_forgets, self.mutant.trainer)
        trainer = self.mutant.trainer(
            sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, record=True
        )
        return trainer.run().trace
