"""Checks of train-iteration accounting on a trainer trace (clauses ``train.*``): the synced
schedule and what it owes, warm-up, updates per call, calls without data, and the hooks."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.item_index import shared_index
from xpspec.conformance.checks.views import (
    BufferModel,
    BufferVisitor,
    buffer_shape,
    buffer_walk,
    calls_per_iteration,
    iterations,
    steps_per_iteration,
    stored_per_iteration,
    trainer_scenario,
)
from xpspec.protocol.preprocessors import Identity
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Trace, TrainCall
from xpspec.refimpl.learner import alf_adjusted_mini_batch_size

__all__ = [
    "check_after_train_iter",
    "check_after_update",
    "check_bounded_lag",
    "check_excluded_earn_nothing",
    "check_identity_plain_calls",
    "check_idle_calls",
    "check_insufficient_data",
    "check_synced_schedule",
    "check_updates_per_call",
    "check_utd_bound",
    "check_warmup_gate",
    "synced_calls",
]


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
    """train.synced-schedule: each iteration makes the ``C_k - C_{k-1}`` calls the synced
    rule owes, ``C_k = max(C_{k-1}, floor(k - (U_k - S_k)/q))``, computed by
    :func:`synced_calls` from the trace's own unrolled and stored counts."""
    sc = trainer_scenario(scenario)
    unrolled = [n * sc.env.num_envs for n in steps_per_iteration(trace)]
    want = synced_calls(sc, unrolled, stored_per_iteration(trace))
    got = calls_per_iteration(trace)
    if got != want:
        raise CheckFailure(
            "train calls per iteration (synced schedule, from unrolled and stored counts)",
            want,
            got,
        )


def check_identity_plain_calls(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.identity-reduces-to-plain: under a preprocessor that stores every item when it
    is unrolled (identity, a reward transform, a step-type overwrite), every iteration makes
    exactly one train call."""
    got = calls_per_iteration(trace)
    if any(c != 1 for c in got):
        raise CheckFailure(
            "train calls per iteration under identity preprocessing", [1] * len(got), got
        )


def check_excluded_earn_nothing(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """Excluding items never adds train calls; with ``X`` excluded items the synced rule
    removes at least ``ceil(X/(u*B) - 1/u)`` calls (the final effective iteration is
    ``K - X/(u*B)``, and no earlier one exceeds it by ``1/u`` or more)."""
    sc = trainer_scenario(scenario)
    plain = ctx.rerun(replace(sc, preprocess=Identity()))
    got, base = sum(calls_per_iteration(trace)), sum(calls_per_iteration(plain))
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
    """train.utd-converges: after every iteration, the calls made so far minus the items
    stored so far divided by ``u * B`` lies in ``(-1, 1/u)``, so calls per stored item
    converge to ``1/(u * B)`` (``u > 0``, exact carry, no env-step budget)."""
    sc = trainer_scenario(scenario)
    u, b = sc.trainer.unroll_length, sc.env.num_envs  # u > 0: drain mode does not apply
    calls = stored = 0
    for k, (c, s) in enumerate(zip(calls_per_iteration(trace), stored_per_iteration(trace)), 1):
        calls, stored = calls + c, stored + s
        gap = calls - Fraction(stored) / (u * b)
        if not -1 < gap < 1 / u:
            raise CheckFailure(
                f"iteration {k}: calls - stored/(u*B)", f"in (-1, {1 / u})", str(gap)
            )


def check_bounded_lag(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.bounded-lag: after every iteration ``k``, ``0 <= k - C_k <=
    ceil((U_k - S_k)/q)``: never more calls than the plain schedule, and never fewer than
    the unstored items' worth of effective iterations behind it."""
    sc = trainer_scenario(scenario)
    unit = sc.trainer.unroll_length * sc.env.num_envs or Fraction(sc.env.num_envs)
    calls = unrolled = stored = 0
    for k, (c, n, s) in enumerate(
        zip(calls_per_iteration(trace), steps_per_iteration(trace), stored_per_iteration(trace)),
        1,
    ):
        calls, unrolled, stored = calls + c, unrolled + n * sc.env.num_envs, stored + s
        bound = math.ceil(Fraction(unrolled - stored) / unit)
        if not 0 <= k - calls <= bound:
            raise CheckFailure(
                f"iteration {k}: lag behind the plain schedule (train.bounded-lag: never more "
                "calls than the plain schedule, never fewer than the unstored items' worth)",
                f"in [0, {bound}]",
                k - calls,
            )


def check_updates_per_call(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.updates-per-call: a call that did not train makes no update; one that trained
    makes ``num_updates_per_train_iter`` updates, each of ``mini_batch_size`` windows
    (``B`` without one) of ``mini_batch_length`` items. With whole-buffer training it makes
    ``num_updates_per_train_iter * ceil(chunks / M)`` updates (``M`` resized by ALF's rule
    under ``alf-resized-mini-batch``), its windows all of one length (shorter under
    ``alf-shortened-chunks``)."""
    sc = trainer_scenario(scenario)
    cfg = sc.trainer
    whole, _, _ = buffer_shape(sc)
    size = cfg.mini_batch_size or sc.env.num_envs

    def problem(u: Any) -> tuple[str, object, object] | None:
        """What is wrong with update ``u`` on its own (its call's number goes in later)."""
        if not whole and len(u.windows) != size:
            return f"windows in update {u.index} of call {{}}", size, len(u.windows)
        lengths = sorted({len(w) for w in u.windows})
        # Under alf-shortened-chunks a whole-buffer call may use one shorter length.
        short = whole and cfg.short_chunks == "shorten" and len(lengths) == 1
        if lengths != [cfg.mini_batch_length] and not (
            short and lengths[0] < cfg.mini_batch_length
        ):
            return "window length in call {}", cfg.mini_batch_length, lengths
        return None

    # Per call: its updates, their windows, and the first update wrong on its own (one pass;
    # the updates themselves are not kept).
    count: dict[int, int] = defaultdict(int)
    windows: dict[int, int] = defaultdict(int)
    wrong: dict[int, tuple[str, object, object]] = {}
    for e in trace.of_kind("update"):
        count[e.call] += 1
        windows[e.call] += len(e.windows)
        if e.call not in wrong and (found := problem(e)) is not None:
            wrong[e.call] = found
    for call in trace.of_kind("train_call"):
        got = count.get(call.call, 0)
        if call.status != "trained":
            if got:
                raise CheckFailure(f"call {call.call} ({call.status}) made updates", 0, got)
            continue
        if whole:
            # Each epoch covers all chunks in batches of `size` (resized by ALF's rule under
            # the variant alf-resized-mini-batch).
            chunks = windows.get(call.call, 0) // cfg.num_updates_per_train_iter
            batch = size
            if chunks and cfg.mini_batch_resize == "alf":
                batch = alf_adjusted_mini_batch_size(chunks, size)
            want = cfg.num_updates_per_train_iter * math.ceil(chunks / batch) if chunks else 0
            if got != want:
                raise CheckFailure(
                    f"updates of whole-buffer call {call.call} ({chunks} chunks)", want, got
                )
        elif got != cfg.num_updates_per_train_iter:
            raise CheckFailure(f"updates of call {call.call}", cfg.num_updates_per_train_iter, got)
        if call.call in wrong:
            what, expected, actual = wrong[call.call]
            raise CheckFailure(what.format(call.call), expected, actual)


def check_warmup_gate(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.warmup-gate: no call trains before ``initial_collect_steps`` items are stored
    (more than that under the variant ``strict``, ``warmup_gate="stored>"``), and no call is
    held back as ``warmup`` once they are. The variant ``capped-size`` (``"size>="``) is
    judged by the exact comparison with refimpl."""
    sc = trainer_scenario(scenario)
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
                    f"status of call {e.call} with {stored} items stored (the gate opens at "
                    f"{ics}{', exclusive' if gate == 'stored>' else ''})",
                    "warmup",
                    e.status,
                )
            if e.status == "warmup" and warm:
                raise CheckFailure(
                    f"status of call {e.call} with {stored} items stored (the gate opens at "
                    f"{ics}{', exclusive' if gate == 'stored>' else ''})",
                    "trained or no-data",
                    e.status,
                )


def check_after_update(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.after-update: every update is followed immediately by one ``after_update``, and
    every ``after_update`` follows an update. (One pass, holding the previous event only.)"""
    before: Any = None
    events: Iterable[Any] = trace.events
    for e in events:
        if before is not None and before.kind == "update" and not _is_after_update(e):
            raise CheckFailure(
                f"event after update {before.index} of call {before.call}",
                "after_update hook",
                e,
                iteration=before.iteration,
            )
        if _is_after_update(e) and (before is None or before.kind != "update"):
            raise CheckFailure(
                f"event before an after_update hook in iteration {e.iteration}",
                "an update",
                before,
                iteration=e.iteration,
            )
        before = e
    if before is not None and before.kind == "update":
        raise CheckFailure(
            f"event after update {before.index} of call {before.call}",
            "after_update hook",
            None,
            iteration=before.iteration,
        )


def _is_after_update(e: Any) -> bool:
    return bool(e.kind == "hook" and e.name == "after_update")


def check_after_train_iter(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.after-train-iter: one ``after_train_iter`` in every iteration that unrolled, none
    in the others (none before the first store under ``alf-lazy-buffer``)."""
    lazy = trainer_scenario(scenario).trainer.replay_creation == "lazy"
    unrolled: dict[int, int] = defaultdict(int)  # env_step events per iteration
    stored: dict[int, int] = defaultdict(int)  # items stored per iteration
    hooks: dict[int, int] = defaultdict(int)  # after_train_iter calls per iteration
    events: Iterable[Any] = trace.events
    for e in events:  # one pass, by kind
        kind = e.kind
        if kind == "env_step":
            unrolled[e.iteration] += 1
        elif kind == "store":
            stored[e.iteration] += len(e.env)
        elif kind == "hook" and e.name == "after_train_iter":
            hooks[e.iteration] += 1
    stored_so_far = 0
    for it in iterations(trace):
        stored_so_far += stored.get(it, 0)
        # A lazily created buffer does not exist before the first store (alf-lazy-buffer).
        want = 1 if unrolled.get(it) and (stored_so_far or not lazy) else 0
        if hooks.get(it, 0) != want:
            raise CheckFailure(
                f"after_train_iter calls in iteration {it}",
                want,
                hooks.get(it, 0),
                iteration=it,
            )


def _owed_calls(sc: TrainerScenario, trace: Trace) -> list[int]:
    """Train calls each iteration owes under the scenario's accounting (``train.synced-schedule``
    or its variants ``plain`` and ``alf-pr1768-floor``), from the trace's unrolled and stored
    counts."""
    b = sc.env.num_envs
    steps, stored = steps_per_iteration(trace), stored_per_iteration(trace)
    if sc.trainer.mode == "on-policy" or sc.trainer.train_accounting == "plain":
        return [1] * len(steps)
    if sc.trainer.train_accounting == "alf-pr1768-floor":
        return [s // (n * b) if n else 1 for n, s in zip(steps, stored)]
    return synced_calls(sc, [n * b for n in steps], stored)


def _fresh_before_calls(sc: TrainerScenario, trace: Trace) -> dict[int, int]:
    """Per iteration: the items the buffer has to offer when its calls begin, as
    ``train.insufficient-data`` counts them for ``no-data``: stored so far, or, with clearing,
    stored since the last call that trained (and cleared)."""
    clearing = buffer_shape(sc)[2].mode != "none"
    out: dict[int, int] = {}
    fresh = 0
    for e in trace.events:
        if e.kind == "store":
            fresh += len(e.env)
        elif e.kind == "train_call":
            out.setdefault(e.iteration, fresh)
            if clearing and e.status == "trained":
                fresh = 0
        elif e.kind == "iteration_end":
            out.setdefault(e.iteration, fresh)
    return out


def check_idle_calls(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.idle-calls: a call that cannot train is still made. In an iteration whose calls
    all find no item stored yet (``no-data``) or the warm-up gate shut (``warmup``), the
    iteration makes every call its accounting owes (none before the first store under
    ``alf-lazy-buffer``); calls missing also where they would train are left to
    ``train.synced-schedule``. A run the framework ended by raising (the trace header's
    ``stopped``) where the reference makes a call that does not train fails too."""
    sc = trainer_scenario(scenario)
    cfg = sc.trainer
    owed, got = _owed_calls(sc, trace), calls_per_iteration(trace)
    short: list[tuple[int, int, int, int, str]] = []  # (iteration, owed, made, stored, idle)
    off = False  # some iteration whose calls would train made more or fewer than it owes
    fresh = _fresh_before_calls(sc, trace)
    stored_so_far = 0
    for it, s, want, made in zip(iterations(trace), stored_per_iteration(trace), owed, got):
        stored_so_far += s
        idle = ""
        if not fresh.get(it, stored_so_far):  # a trace without its iteration's end: so far
            idle = "no-data"
            if cfg.replay_creation == "lazy" and not stored_so_far:
                want = 0  # variant alf-lazy-buffer: no buffer, no call
        elif (cfg.warmup_gate == "stored>=" and stored_so_far < cfg.initial_collect_steps) or (
            cfg.warmup_gate == "stored>" and stored_so_far <= cfg.initial_collect_steps
        ):
            idle = "warmup"
        if idle and made < want:
            short.append((it, want, made, stored_so_far, idle))
        elif not idle and made != want:
            off = True
    # Calls missing only where they would not train were skipped for that reason; when the
    # calls are off also where they would train, the schedule itself is (train.synced-schedule).
    if short and not off:
        it, want, made, stored_so_far, idle = short[0]
        raise CheckFailure(
            f"train calls in iteration {it}, with {stored_so_far} items stored so far "
            f"(every call would be {idle}; train.idle-calls: a call that does not train is "
            "still made)",
            want,
            made,
            iteration=it,
        )
    stopped = str(trace.header.get("stopped", ""))
    if stopped:
        calls = list(trace.of_kind("train_call"))
        reference = list(ctx.reference(scenario).of_kind("train_call"))
        if len(calls) < len(reference) and reference[len(calls)].status != "trained":
            at = reference[len(calls)]
            raise CheckFailure(
                f"the run ended by raising ({stopped!r}) after {len(calls)} train calls, where "
                f"call {at.call} (iteration {at.iteration}) is {at.status!r} and the run goes on",
                f"{len(reference)} calls",
                len(calls),
                iteration=at.iteration,
            )


def _valid_starts(
    sc: TrainerScenario, model: BufferModel, env: int, first_only: bool = False
) -> list[int]:
    """The valid sampled-mode starts (absolute positions) of ``env`` in ``model``, from the
    definitions of ``replay.window-validity``, ``replay.boundary-policy`` and the period grid;
    windows are ``mini_batch_length`` items long. ``first_only``: the first one, if any."""
    size = model.size(env)
    earliest, t = model.start[env], sc.trainer.mini_batch_length
    p, anchor, policy = sc.sampling.period, sc.sampling.anchor, sc.sampling.boundary
    steps = [model.step_type[item] for item in model.live(env)] if policy == "forbid" else []
    starts = []
    for i in range(size):
        if ((earliest + i) if anchor == "absolute" else i) % p:
            continue
        if policy != "pad" and i + t > size:
            continue
        if policy == "forbid" and any(
            steps[q] == StepType.LAST or steps[q + 1] == StepType.FIRST for q in range(i, i + t - 1)
        ):
            continue
        starts.append(earliest + i)
        if first_only:
            break
    return starts


def check_insufficient_data(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """train.insufficient-data: a call is ``no-data`` only when the buffer (as the trace's
    stores, evictions and clears leave it) holds no item, nothing stored since the last
    clear, or no valid window to draw (whole-buffer: no whole chunk); a call that ``trained``
    had data and a valid window. Whether the warm-up gate was shut is left to
    ``train.warmup-gate``."""
    sc = trainer_scenario(scenario)
    cfg = sc.trainer
    whole, capacity, clear = buffer_shape(sc)

    def visit(call: TrainCall, model: BufferModel, fresh: int) -> None:
        if call.status not in ("no-data", "trained"):
            return
        sizes = {env: model.size(env) for env in range(sc.env.num_envs)}
        empty = (fresh == 0) if clear.mode != "none" else not any(sizes.values())
        if whole:
            length = cfg.mini_batch_length
            shortest = min(sizes.values())
            if cfg.short_chunks == "shorten" and 0 < shortest < length:
                length = shortest  # variant alf-shortened-chunks
            counts = {env: n // length for env, n in sizes.items()}
            drawable = any(counts.values())
            why = f"whole chunks of {length} per env"
        else:
            # Whether an env holds a valid window is what counts (looked for until found);
            # how many, only what a failure says.
            holds = (bool(_valid_starts(sc, model, env, first_only=True)) for env in sizes)
            # env-balanced: every env must hold a valid window
            drawable = all(holds) if sc.sampling.distribution == "env-balanced" else any(holds)
            why = (
                f"valid windows per env (length {cfg.mini_batch_length}, "
                f"boundary {sc.sampling.boundary!r}, period {sc.sampling.period}, "
                f"anchor {sc.sampling.anchor!r})"
            )
        has_data = not empty and drawable
        if (call.status == "no-data") == has_data:
            if not whole:
                counts = {env: len(_valid_starts(sc, model, env)) for env in sizes}
            raise CheckFailure(
                f"call {call.call} (iteration {call.iteration}) with {sizes} items per env, "
                f"{fresh} stored since the last clear and {why} {counts} "
                "(train.insufficient-data: no-data exactly when the buffer holds no item or no "
                "valid window)",
                "trained (or warmup)" if has_data else "no-data",
                call.status,
            )

    buffer_walk(trace, capacity, clear, shared_index(sc.env, sc.seed), BufferVisitor(call=visit))
