"""Checks of trainer runs: time steps, unroll accounting, preprocessing, train accounting,
replay windows in training. Each function verifies one clause on one trace."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from conformance.checks.base import Check, CheckFailure, Context
from conformance.checks.views import items_of, iterations, per_iteration, windows_with_state
from conformance.scenario import Scenario, TrainerScenario
from refimpl.preprocess import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    RewardTransform,
)
from refimpl.step_type import StepType
from refimpl.trace import Item, Trace

__all__ = ["TRAINER_CHECKS"]


def _sc(scenario: Scenario) -> TrainerScenario:
    assert isinstance(scenario, TrainerScenario)
    return scenario


def _env_items(trace: Trace) -> list[tuple[int, Item, Any, int]]:
    """(iteration, item, event, column index) of every unrolled item, in order."""
    out = []
    for e in trace.of_kind("env_step"):
        for i, item in enumerate(items_of(e)):
            out.append((e.iteration, item, e, i))
    return out


# -- time steps --------------------------------------------------------------------------------
def check_identity(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = scenario
    for kind in ("env_step", "store", "exclude", "hold", "run_end"):
        for e in trace.of_kind(kind):
            for env, episode, t in items_of(e):
                if not 0 <= env < sc.env.num_envs:
                    raise CheckFailure(
                        f"{kind} names env {env}", f"env in [0, {sc.env.num_envs})", env
                    )
                plan = sc.env.episode(sc.seed, env, episode)
                if not 0 <= t <= plan.length:
                    raise CheckFailure(
                        f"{kind} names item {(env, episode, t)}", f"t in [0, {plan.length}]", t
                    )


def check_step_fields(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.step-types and timestep.discount: each unrolled item's fields vs its plan."""
    sc = scenario
    for it, (env, episode, t), e, i in _env_items(trace):
        plan = sc.env.episode(sc.seed, env, episode)
        want_type = (
            StepType.FIRST if t == 0 else StepType.LAST if t == plan.length else StepType.MID
        )
        if e.step_type[i] != want_type:
            raise CheckFailure(
                f"iteration {it}: step type of {(env, episode, t)} (episode of {plan.length} transitions)",
                want_type.name,
                StepType(e.step_type[i]).name if e.step_type[i] in (0, 1, 2) else e.step_type[i],
            )
        want_discount = 0.0 if (want_type == StepType.LAST and plan.ending == "terminated") else 1.0
        if e.discount[i] != want_discount:
            raise CheckFailure(
                f"iteration {it}: discount of {(env, episode, t)} ({want_type.name}, {plan.ending})",
                want_discount,
                e.discount[i],
            )
        want_reward = sc.env.reward(sc.seed, env, episode, t)
        if e.reward[i] != want_reward:
            raise CheckFailure(
                f"iteration {it}: reward of {(env, episode, t)}", want_reward, e.reward[i]
            )


def check_auto_reset(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.auto-reset: per env, the item after a LAST is FIRST of the next episode."""
    previous: dict[int, tuple[Item, int]] = {}
    for it, item, e, i in _env_items(trace):
        env = item[0]
        if env in previous:
            (p_env, p_ep, p_t), p_type = previous[env]
            want = (env, p_ep + 1, 0) if p_type == StepType.LAST else (env, p_ep, p_t + 1)
            if item != want:
                raise CheckFailure(
                    f"iteration {it}: step after {(p_env, p_ep, p_t)} ({StepType(p_type).name})",
                    want,
                    item,
                )
        elif item != (env, 0, 0):
            raise CheckFailure(f"iteration {it}: first step of env {env}", (env, 0, 0), item)
        previous[env] = (item, e.step_type[i])


def check_state_reset(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.state-reset: the toy policy's state counts steps since FIRST, so state == t."""
    for it, item, e, i in _env_items(trace):
        if e.policy_state[i] != item[2]:
            raise CheckFailure(
                f"iteration {it}: policy state at {item}", item[2], e.policy_state[i]
            )


def check_loss_mask(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.loss-mask-last: loss mask is 0 exactly on padding and stored-LAST items."""
    sc = _sc(scenario)
    stored_type: dict[tuple[int, ...], int] = {}
    for e in trace.events:
        if e.kind == "store":
            stored_type.update(zip(items_of(e), e.step_type))
        elif e.kind == "update":
            for w, window in enumerate(e.windows):
                for j, item in enumerate(window):
                    masked_last = item is not None and stored_type.get(tuple(item)) == StepType.LAST
                    want = 0 if item is None or (sc.trainer.mask_last and masked_last) else 1
                    if e.loss_mask[w][j] != want:
                        raise CheckFailure(
                            f"iteration {e.iteration}, update {e.index}: loss mask of {item}",
                            want,
                            e.loss_mask[w][j],
                        )


# -- unroll --------------------------------------------------------------------------------------
def _steps_per_iteration(trace: Trace) -> list[int]:
    counts = per_iteration(trace, "env_step")
    return [counts[i] for i in iterations(trace)]


def _expected_unroll(sc: TrainerScenario, count: int) -> list[int]:
    u = sc.trainer.unroll_length
    return [math.floor(k * u) - math.floor((k - 1) * u) for k in range(1, count + 1)]


def check_fractional_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    got = _steps_per_iteration(trace)
    want = _expected_unroll(sc, len(got))
    if sc.trainer.num_env_steps:
        # Interaction may stop early (unroll.num-env-steps): compare the interacting prefix.
        n = next(
            (
                i
                for i, g in enumerate(got)
                if g == 0
                and want[i] > 0
                and sum(got[:i]) * sc.env.num_envs >= sc.trainer.num_env_steps
            ),
            len(got),
        )
        got, want = got[:n], want[:n]
    if got != want:
        raise CheckFailure(
            f"vector steps per iteration with unroll_length {sc.trainer.unroll_length}", want, got
        )


def check_all_envs_step(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    want = tuple(range(sc.env.num_envs))
    for e in trace.of_kind("env_step"):
        if tuple(sorted(e.env)) != want:
            raise CheckFailure(
                f"iteration {e.iteration}: envs stepped by one vector step", want, tuple(e.env)
            )


def check_drain(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    drain = sc.trainer.drain
    assert drain is not None
    got = _steps_per_iteration(trace)
    want, queued = [], 0
    for k in range(1, len(got) + 1):
        queued = min(queued + drain.arrivals[(k - 1) % len(drain.arrivals)], drain.queue_size)
        n = min(queued, drain.max_unroll_length)
        queued -= n
        want.append(n)
    if got != want:
        raise CheckFailure("vector steps drained per iteration", want, got)


def check_num_env_steps(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    limit = sc.trainer.num_env_steps
    count, stopped_at = 0, None
    by_iteration: dict[int, list[Any]] = defaultdict(list)
    for e in trace.of_kind("env_step"):
        by_iteration[e.iteration].append(e)
    for it in iterations(trace):
        steps = by_iteration.get(it, [])
        if steps and count >= limit:
            raise CheckFailure(
                f"iteration {it} unrolled after {count} env steps",
                f"no unroll once {limit} are reached",
                len(steps),
            )
        for e in steps:
            count += sum(
                1 for t in e.step_type if sc.trainer.env_step_count == "all" or t != StepType.FIRST
            )
        if count >= limit and stopped_at is None:
            stopped_at = it
    if (
        not sc.trainer.num_iterations
        and stopped_at is not None
        and iterations(trace)[-1] != stopped_at
    ):
        raise CheckFailure(
            "the run goes on after num_env_steps is reached",
            f"last iteration {stopped_at}",
            iterations(trace)[-1],
        )


def check_global_counter(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    counter = 0
    for e in trace.events:
        if e.kind == "iteration":
            if sc.trainer.counter_mode == "per-iteration":
                counter += 1
            if e.counter != counter:
                raise CheckFailure(
                    f"counter at the start of iteration {e.iteration}", counter, e.counter
                )
        elif e.kind == "update":
            if sc.trainer.counter_mode == "per-mini-batch":
                counter += 1
            if e.counter != counter:
                raise CheckFailure(
                    f"counter at update {e.index} of call {e.call}", counter, e.counter
                )


# -- preprocessing -------------------------------------------------------------------------------
def _fate(trace: Trace) -> tuple[Counter[Item], Counter[Item], Counter[Item], Counter[Item]]:
    unrolled: Counter[Item] = Counter()
    stored: Counter[Item] = Counter()
    excluded: Counter[Item] = Counter()
    pending: Counter[Item] = Counter()
    for e in trace.events:
        target = {
            "env_step": unrolled,
            "store": stored,
            "exclude": excluded,
            "run_end": pending,
        }.get(e.kind)
        if target is not None:
            target.update(items_of(e))
    return unrolled, stored, excluded, pending


def check_conservation(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    unrolled, stored, excluded, pending = _fate(trace)
    accounted = stored + excluded + pending
    for item, n in unrolled.items():
        if accounted[item] != n:
            where = {"stored": stored[item], "excluded": excluded[item], "pending": pending[item]}
            raise CheckFailure(
                f"fate of unrolled item {item}", "exactly one of stored/excluded/pending", where
            )
    extra = sorted(set(accounted) - set(unrolled))
    if extra:
        raise CheckFailure(
            "items stored, excluded or pending that were never unrolled", [], extra[:5]
        )


def check_identity_is_plain(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    events = list(trace.events)
    for i, e in enumerate(events):
        if e.kind != "env_step":
            continue
        nxt = events[i + 1] if i + 1 < len(events) else None
        if nxt is None or nxt.kind != "store" or items_of(nxt) != items_of(e):
            raise CheckFailure(
                f"iteration {e.iteration}: store right after the unroll step of {items_of(e)}",
                "a store of the same items",
                nxt,
            )
        for name in ("step_type", "reward", "discount"):
            if getattr(nxt, name) != getattr(e, name):
                raise CheckFailure(
                    f"iteration {e.iteration}: stored {name} under identity",
                    getattr(e, name),
                    getattr(nxt, name),
                )


def check_store_order(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    unroll_index = {item: n for n, (_, item, _, _) in enumerate(_env_items(trace))}
    last: dict[int, tuple[int, Item]] = {}
    for e in trace.of_kind("store"):
        for item in items_of(e):
            n = unroll_index.get(item, -1)
            if item[0] in last and n <= last[item[0]][0]:
                raise CheckFailure(
                    f"iteration {e.iteration}: env {item[0]} stores {item} after {last[item[0]][1]}",
                    "unroll order",
                    "out of order",
                )
            last[item[0]] = (n, item)


def check_delayed_per_env(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    last_at: dict[tuple[int, int], int] = {}
    for it, (env, episode, _), e, i in _env_items(trace):
        if e.step_type[i] == StepType.LAST:
            last_at[(env, episode)] = it
    closed: set[int] = set()
    for e in trace.events:
        if e.kind == "iteration_end":
            closed.add(e.iteration)
        if e.kind in ("store", "exclude") and e.iteration not in closed:
            items = items_of(e)
            episodes = {(env, ep) for env, ep, _ in items}
            if len(episodes) != 1:
                raise CheckFailure(
                    f"iteration {e.iteration}: one release holds",
                    "exactly one env's episode",
                    sorted(episodes),
                )
            ((env, ep),) = episodes
            plan = sc.env.episode(sc.seed, env, ep)
            if [t for _, _, t in items] != list(range(plan.length + 1)):
                raise CheckFailure(
                    f"iteration {e.iteration}: released episode {(env, ep)}",
                    list(range(plan.length + 1)),
                    [t for _, _, t in items],
                )
            if last_at.get((env, ep)) != e.iteration:
                raise CheckFailure(
                    f"release of episode {(env, ep)}",
                    f"iteration {last_at.get((env, ep))} (its LAST)",
                    f"iteration {e.iteration}",
                )
            if e.kind == "store":
                want = 1.0 if plan.ending == "terminated" else 0.0
                if set(e.annotation) != {want}:
                    raise CheckFailure(
                        f"annotation of episode {(env, ep)} ({plan.ending})",
                        want,
                        sorted(set(e.annotation)),
                    )


def _selected(sc: TrainerScenario, item: Item) -> bool:
    env, episode, t = item
    p = sc.preprocess
    if isinstance(p, ExcludeSteps):
        return t % p.every == p.offset
    if isinstance(p, ExcludeEpisodes):
        return episode % p.every == p.offset
    if isinstance(p, ExcludeTasks):
        return sc.env.task_id(env, episode) in p.task_ids
    return False


def check_exclusion(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    unrolled, stored, excluded, _ = _fate(trace)
    for item in unrolled:
        want = _selected(sc, item)
        if want and (stored[item] or not excluded[item]):
            raise CheckFailure(
                f"selected item {item} under {sc.preprocess}",
                "excluded",
                "stored" if stored[item] else "missing",
            )
        if not want and excluded[item]:
            raise CheckFailure(
                f"unselected item {item} under {sc.preprocess}", "stored", "excluded"
            )
    for e in trace.of_kind("exclude"):
        if not e.reason:
            raise CheckFailure(
                f"iteration {e.iteration}: exclusion reason", "a non-empty reason", e.reason
            )


def check_transform(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    p = sc.preprocess
    unrolled: dict[Item, tuple[int, float, float]] = {}
    for _, item, e, i in _env_items(trace):
        unrolled[item] = (e.step_type[i], e.reward[i], e.discount[i])
    for e in trace.of_kind("store"):
        for item, st, reward in zip(items_of(e), e.step_type, e.reward):
            u_type, u_reward, u_discount = unrolled[item]
            want_reward, want_type = u_reward, u_type
            if isinstance(p, RewardTransform):
                want_reward = float(Fraction(u_reward) * p.scale + p.shift)
            if isinstance(p, OverwriteStepType):
                hit = (
                    item[2] == p.t
                    if p.when == "t"
                    else (u_type == StepType.LAST and u_discount != 0)
                )
                want_type = int(StepType[p.to]) if hit else u_type
            if reward != want_reward or st != want_type:
                raise CheckFailure(
                    f"stored fields of {item} under {p}", (want_type, want_reward), (st, reward)
                )


def check_pending_at_end(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """The run end reports exactly the items neither stored nor excluded; under ``flush``
    that is nothing, because the held items were stored."""
    sc = _sc(scenario)
    unrolled, stored, excluded, pending = _fate(trace)
    held_open = unrolled - stored - excluded
    ends = list(trace.of_kind("run_end"))
    if len(ends) != 1:
        raise CheckFailure("run end events", 1, len(ends))
    if sc.trainer.pending_at_end == "flush" and pending:
        raise CheckFailure("items left pending under policy flush", [], sorted(pending)[:8])
    if sorted(pending.elements()) != sorted(held_open.elements()):
        raise CheckFailure(
            "items reported pending at the end", sorted(held_open)[:8], sorted(pending)[:8]
        )


# -- train accounting ----------------------------------------------------------------------------
def _calls_per_iteration(trace: Trace) -> list[int]:
    counts = per_iteration(trace, "train_call")
    return [counts[i] for i in iterations(trace)]


def _stored_per_iteration(trace: Trace) -> list[int]:
    """Items stored during each iteration; a flush after the last iteration is not counted."""
    counts = dict.fromkeys(iterations(trace), 0)
    closed: set[int] = set()
    for e in trace.events:
        if e.kind == "iteration_end":
            closed.add(e.iteration)
        elif e.kind == "store" and e.iteration not in closed:
            counts[e.iteration] += len(e.env)
    return [counts[i] for i in iterations(trace)]


def buffer_shape(sc: TrainerScenario) -> tuple[bool, int, str]:
    """(whole_buffer, capacity, clear) as the spec defines them: on-policy training is
    whole-buffer training on the iteration's own unroll, cleared after the call."""
    if sc.trainer.mode == "on-policy":
        return True, int(sc.trainer.unroll_length), "all"
    return sc.trainer.whole_buffer, sc.trainer.capacity, sc.trainer.clear


def synced_calls(sc: TrainerScenario, unrolled: list[int], stored: list[int]) -> list[int]:
    """Train calls per iteration under ``train.synced-schedule`` (computed here from the
    clause's formula, independently of refimpl)."""
    u, b = sc.trainer.unroll_length, sc.env.num_envs
    unit = u * b if u else Fraction(b)
    calls, total_u, total_s, out = 0, 0, 0, []
    for k, (du, ds) in enumerate(zip(unrolled, stored), 1):
        total_u, total_s = total_u + du, total_s + ds
        owed = max(calls, math.floor(k - Fraction(total_u - total_s) / unit))
        out.append(owed - calls)
        calls = owed
    return out


def check_synced_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    unrolled = [n * sc.env.num_envs for n in _steps_per_iteration(trace)]
    want = synced_calls(sc, unrolled, _stored_per_iteration(trace))
    got = _calls_per_iteration(trace)
    if got != want:
        raise CheckFailure(
            "train calls per iteration (synced schedule, from unrolled and stored counts)",
            want,
            got,
        )


def check_identity_plain_calls(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    got = _calls_per_iteration(trace)
    if any(c != 1 for c in got):
        raise CheckFailure(
            "train calls per iteration under identity preprocessing", [1] * len(got), got
        )


def check_excluded_earn_nothing(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """Excluding items never adds train calls; with ``X`` excluded items the synced rule
    removes at least ``ceil(X/(u*B) - 1/u)`` calls (the final effective iteration is
    ``K - X/(u*B)``, and no earlier one exceeds it by ``1/u`` or more)."""
    sc = _sc(scenario)
    plain = ctx.rerun(replace(sc, preprocess=Identity()))
    got, base = sum(_calls_per_iteration(trace)), sum(_calls_per_iteration(plain))
    if got > base:
        raise CheckFailure("train calls with exclusions vs the same run without", f"<= {base}", got)
    u = sc.trainer.unroll_length
    if u:
        excluded = sum(len(e.env) for e in trace.of_kind("exclude"))
        least = math.ceil(Fraction(excluded) / (u * sc.env.num_envs) - 1 / u)
        if base - got < least:
            raise CheckFailure(
                f"train calls removed by {excluded} excluded items", f">= {least}", base - got
            )


def check_utd_bound(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    u, b = sc.trainer.unroll_length, sc.env.num_envs
    if not u:
        return
    calls = stored = 0
    for k, (c, s) in enumerate(zip(_calls_per_iteration(trace), _stored_per_iteration(trace)), 1):
        calls, stored = calls + c, stored + s
        gap = calls - Fraction(stored) / (u * b)
        if not -1 < gap < 1 / u:
            raise CheckFailure(
                f"iteration {k}: calls - stored/(u*B)", f"in (-1, {1 / u})", str(gap)
            )


def check_bounded_lag(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    unit = sc.trainer.unroll_length * sc.env.num_envs or Fraction(sc.env.num_envs)
    calls = unrolled = stored = 0
    for k, (c, n, s) in enumerate(
        zip(_calls_per_iteration(trace), _steps_per_iteration(trace), _stored_per_iteration(trace)),
        1,
    ):
        calls, unrolled, stored = calls + c, unrolled + n * sc.env.num_envs, stored + s
        bound = math.ceil(Fraction(unrolled - stored) / unit)
        if k - calls > bound:
            raise CheckFailure(
                f"iteration {k}: lag behind the plain schedule", f"<= {bound}", k - calls
            )


def check_updates_per_call(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    cfg = sc.trainer
    whole, _, _ = buffer_shape(sc)
    size = cfg.mini_batch_size or sc.env.num_envs
    updates: dict[int, list[Any]] = defaultdict(list)
    for e in trace.of_kind("update"):
        updates[e.call].append(e)
    for call in trace.of_kind("train_call"):
        got = updates.get(call.call, [])
        if call.status != "trained":
            if got:
                raise CheckFailure(f"call {call.call} ({call.status}) made updates", 0, len(got))
            continue
        if whole:
            # Each epoch covers all chunks in batches of `size`.
            chunks = sum(len(u.windows) for u in got) // cfg.num_updates_per_train_iter
            want = cfg.num_updates_per_train_iter * math.ceil(chunks / size) if chunks else 0
            if len(got) != want:
                raise CheckFailure(
                    f"updates of whole-buffer call {call.call} ({chunks} chunks)", want, len(got)
                )
        elif len(got) != cfg.num_updates_per_train_iter:
            raise CheckFailure(
                f"updates of call {call.call}", cfg.num_updates_per_train_iter, len(got)
            )
        for u in got:
            if not whole and len(u.windows) != size:
                raise CheckFailure(
                    f"windows in update {u.index} of call {call.call}", size, len(u.windows)
                )
            if any(len(w) != cfg.mini_batch_length for w in u.windows):
                raise CheckFailure(
                    f"window length in call {call.call}",
                    cfg.mini_batch_length,
                    sorted({len(w) for w in u.windows}),
                )


def check_warmup_gate(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    ics, gate = sc.trainer.initial_collect_steps, sc.trainer.warmup_gate
    stored = 0
    for e in trace.events:
        if e.kind == "store":
            stored += len(e.env)
        elif e.kind == "train_call":
            warm = stored > ics if gate == "stored>" else stored >= ics
            if gate == "size>=":
                continue  # capped size is checked by the exact projection
            if e.status == "trained" and not warm:
                raise CheckFailure(
                    f"call {e.call} trained with {stored} items stored",
                    f">= {ics} stored first",
                    e.status,
                )
            if e.status == "warmup" and warm:
                raise CheckFailure(
                    f"call {e.call} held back with {stored} items stored",
                    "trained or no-data",
                    e.status,
                )


def check_hooks(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    events = list(trace.events)
    for i, e in enumerate(events):
        if e.kind == "update":
            nxt = events[i + 1] if i + 1 < len(events) else None
            if nxt is None or nxt.kind != "hook" or nxt.name != "after_update":
                raise CheckFailure(
                    f"event after update {e.index} of call {e.call}", "after_update hook", nxt
                )
    unrolled = per_iteration(trace, "env_step")
    hooks = per_iteration(trace, "hook", lambda e: e.name == "after_train_iter")
    for it in iterations(trace):
        want = 1 if unrolled.get(it) else 0
        if hooks.get(it, 0) != want:
            raise CheckFailure(f"after_train_iter calls in iteration {it}", want, hooks.get(it, 0))


# -- replay windows in training ------------------------------------------------------------------
def check_windows_valid(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    _, capacity, clear = buffer_shape(sc)
    for update, model in windows_with_state(trace, capacity, clear):
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window {window}",
                    "starts at an item in the buffer",
                    "not in the buffer",
                )
            env, start = located
            live = model.live(env)
            real = [w for w in window if w is not None]
            if [tuple(w) for w in real] != live[start : start + len(real)]:
                raise CheckFailure(
                    f"update {update.index} of call {update.call}: window",
                    live[start : start + len(window)],
                    window,
                )
            if any(w is not None for w in window[len(real) :]):
                raise CheckFailure("padding inside a window", "padding only at the end", window)


def check_boundary_policy(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    policy = sc.sampling.boundary
    for update, model in windows_with_state(trace, sc.trainer.capacity, sc.trainer.clear):
        for window in update.windows:
            real = [tuple(w) for w in window if w is not None]
            crosses = any(
                model.step_type[a] == StepType.LAST or model.step_type[b] == StepType.FIRST
                for a, b in itertools.pairwise(real)
            )
            if policy != "cross" and crosses:
                raise CheckFailure(
                    f"window under boundary policy {policy!r}", "no episode boundary inside", window
                )
            if policy == "pad" and len(real) < len(window):
                live = model.live(real[0][0])
                nxt = live.index(real[-1]) + 1
                ends = (
                    model.step_type[real[-1]] == StepType.LAST
                    or nxt >= len(live)
                    or model.step_type[live[nxt]] == StepType.FIRST
                )
                if not ends:
                    raise CheckFailure(
                        "padding before the episode end",
                        "padding only after a boundary or the newest item",
                        window,
                    )
            if policy != "pad" and len(real) < len(window):
                raise CheckFailure(
                    f"padding under boundary policy {policy!r}", "no padding", window
                )


def check_period_anchor(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    p = sc.sampling.period
    for update, model in windows_with_state(trace, sc.trainer.capacity, sc.trainer.clear):
        for window in update.windows:
            located = model.locate(window)
            if located is None:
                continue
            env, index = located
            position = model.start[env] + index
            oldest = model.start[env]
            anchor = 0 if sc.sampling.anchor == "absolute" else oldest
            if (position - anchor) % p:
                raise CheckFailure(
                    f"start position of window {window[:2]}... (period {p}, anchor {sc.sampling.anchor})",
                    f"≡ {anchor % p} mod {p}",
                    position,
                )


def check_whole_buffer(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    sc = _sc(scenario)
    cfg = sc.trainer
    _, capacity, clear = buffer_shape(sc)
    by_call: dict[int, list[Any]] = defaultdict(list)
    models: dict[int, dict[int, list[Item]]] = {}
    for update, model in windows_with_state(trace, capacity, clear):
        by_call[update.call].append(update)
        models.setdefault(update.call, {env: list(model.live(env)) for env in model.stored})
    for call, updates in by_call.items():
        live = models[call]
        want: Counter[tuple[Item, ...]] = Counter()
        for items in live.values():
            n = len(items) // cfg.mini_batch_length
            for c in range(n):
                want[tuple(items[c * cfg.mini_batch_length : (c + 1) * cfg.mini_batch_length])] += (
                    cfg.num_updates_per_train_iter
                )
        got = Counter(tuple(tuple(i) for i in w) for u in updates for w in u.windows)
        if got != want:
            raise CheckFailure(
                f"chunks trained by whole-buffer call {call}",
                sorted(want.items())[:4],
                sorted(got.items())[:4],
            )


def check_clear(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """A call trains only on items stored since the last clear (the windows themselves are
    checked against the clear-aware buffer model by ``windows-valid``)."""
    stored_since_clear = 0
    for e in trace.events:
        if e.kind == "store":
            stored_since_clear += len(e.env)
        elif e.kind == "train_call" and e.status == "trained":
            if stored_since_clear == 0:
                raise CheckFailure(
                    f"call {e.call} trained with nothing stored since the last clear",
                    "no-data",
                    e.status,
                )
            stored_since_clear = 0


def _projection_calls(scenario: Scenario, trace: Trace) -> Any:
    return {
        "unroll": _steps_per_iteration(trace),
        "calls": _calls_per_iteration(trace),
        "status": [e.status for e in trace.of_kind("train_call")],
    }


def check_exact_projection(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    want = _projection_calls(scenario, ctx.reference(scenario))
    got = _projection_calls(scenario, trace)
    for key in want:
        if got[key] != want[key]:
            raise CheckFailure(f"{key} per iteration vs the reference trainer", want[key], got[key])


def _store_projection(scenario: Scenario, trace: Trace) -> Any:
    return [(e.iteration, tuple(items_of(e))) for e in trace.of_kind("store")]


def check_exact_stores(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    want = _store_projection(scenario, ctx.reference(scenario))
    got = _store_projection(scenario, trace)
    if got != want:
        first = next(
            (i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got))
        )
        raise CheckFailure(
            f"stores vs the reference trainer (first difference at store #{first})",
            want[first : first + 2],
            got[first : first + 2],
        )


def _is(*types: type) -> Callable[[Scenario], bool]:
    return lambda s: isinstance(s, TrainerScenario) and isinstance(s.preprocess, types)


def _cfg(pred: Callable[[TrainerScenario], object]) -> Callable[[Scenario], bool]:
    return lambda s: isinstance(s, TrainerScenario) and bool(pred(s))


_ANY = _cfg(lambda s: True)
_OFF = _cfg(lambda s: s.trainer.mode == "off-policy")
_SYNCED = _cfg(lambda s: s.trainer.mode == "off-policy" and s.trainer.train_accounting == "synced")

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
        "state-reset", ("timestep.state-reset",), "trainer", "invariant", check_state_reset, _ANY
    ),
    Check("loss-mask", ("timestep.loss-mask-last",), "trainer", "invariant", check_loss_mask, _ANY),
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
        "global-counter",
        ("unroll.global-counter",),
        "trainer",
        "invariant",
        check_global_counter,
        _ANY,
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
                _SYNCED(s) and s.trainer.unroll_carry == "exact" and not s.trainer.num_env_steps
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
    Check("warmup-gate", ("train.warmup-gate",), "trainer", "invariant", check_warmup_gate, _OFF),
    Check("hooks", ("train.hooks",), "trainer", "invariant", check_hooks, _ANY),
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
        _cfg(lambda s: buffer_shape(s)[2] != "none"),
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
        projection=_projection_calls,
    ),
    Check(
        "exact-stores",
        ("preprocess.conservation", "preprocess.store-order"),
        "trainer",
        "exact",
        check_exact_stores,
        _ANY,
        projection=_store_projection,
    ),
)
