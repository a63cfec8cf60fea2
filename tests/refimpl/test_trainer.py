"""The reference trainer (xpspec/refimpl/trainer.py): each knob changes what the spec says it does.
Expected values are derived in the comments."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from xpspec.refimpl import (
    ConfigError,
    DrainSpec,
    EnvSpec,
    EpisodeDelayed,
    ExcludeSteps,
    FixedSchedule,
    TrainerConfig,
    train,
)


def _calls(result) -> list[int]:  # type: ignore[no-untyped-def]
    per = {e.iteration: 0 for e in result.trace.of_kind("iteration")}
    for e in result.trace.of_kind("train_call"):
        per[e.iteration] += 1
    return list(per.values())


def _steps(result) -> list[int]:  # type: ignore[no-untyped-def]
    per = {e.iteration: 0 for e in result.trace.of_kind("iteration")}
    for e in result.trace.of_kind("env_step"):
        per[e.iteration] += 1
    return list(per.values())


ENV2 = EnvSpec(2, (FixedSchedule(3),))


def test_fractional_unroll_and_one_call_per_iteration() -> None:
    r = train(ENV2, TrainerConfig(unroll_length="2/3", num_iterations=6))
    # floor(k*2/3) = 0,1,2,2,3,4 -> per iteration 0,1,1,0,1,1
    assert _steps(r) == [0, 1, 1, 0, 1, 1]
    assert _calls(r) == [1] * 6
    assert r.env_steps == 4 * 2


def test_drain_mode_follows_arrivals() -> None:
    cfg = TrainerConfig(
        unroll_length=0,
        drain=DrainSpec((3, 0, 5), max_unroll_length=2, queue_size=4),
        num_iterations=5,
    )
    # queue: +3 -> drain 2 (1 left); +0 -> 1; +5 capped at 4 -> 2 (2 left); +3 -> min(5,4)=4 -> 2; +0 -> 2
    assert _steps(train(ENV2, cfg)) == [2, 1, 2, 2, 2]


def test_num_env_steps_stops_interaction_with_overshoot() -> None:
    # u = 2, B = 2: 4 items per iteration; 10 is reached after 3 iterations (12 items).
    r = train(ENV2, TrainerConfig(unroll_length=2, num_env_steps=10))
    assert r.iterations == 3 and r.env_steps == 12


def test_warmup_counts_stored_items_of_all_envs() -> None:
    # 2 items per iteration; 5 stored items are first reached at iteration 3 (6 items).
    r = train(ENV2, TrainerConfig(num_iterations=4, initial_collect_steps=5))
    assert [e.status for e in r.trace.of_kind("train_call")] == [
        "warmup",
        "warmup",
        "trained",
        "trained",
    ]


def test_strict_gate_variant() -> None:
    r = train(ENV2, TrainerConfig(num_iterations=4, initial_collect_steps=4, warmup_gate="stored>"))
    assert [e.status for e in r.trace.of_kind("train_call")] == [
        "warmup",
        "warmup",
        "trained",
        "trained",
    ]


def test_excluded_steps_earn_no_training() -> None:
    # B = 2, u = 1, episodes of 3 transitions (t = 0..3). Excluding t % 2 == 1 stores 1 of 2
    # items on odd-t iterations: E_k = k - excluded/2 = k - (number of odd t so far).
    r = train(ENV2, TrainerConfig(num_iterations=4), preprocess=ExcludeSteps(2, 1))
    # t = 0,1,2,3 -> excluded 0,2,0,2 items -> E = 1, 1, 2, 2 -> calls 1,0,1,0
    assert _calls(r) == [1, 0, 1, 0]


def test_delayed_release_repays_calls() -> None:
    # One env, episodes of 3 transitions = 4 steps, held until LAST at iteration 4.
    r = train(
        EnvSpec(1, (FixedSchedule(3),)),
        TrainerConfig(num_iterations=8),
        preprocess=EpisodeDelayed(),
    )
    assert _calls(r) == [0, 0, 0, 4, 0, 0, 0, 4]


def test_delayed_plain_variant_trains_every_iteration() -> None:
    r = train(
        EnvSpec(1, (FixedSchedule(3),)),
        TrainerConfig(num_iterations=8, train_accounting="plain"),
        preprocess=EpisodeDelayed(),
    )
    assert _calls(r) == [1] * 8


def test_updates_per_call_and_counter_per_mini_batch() -> None:
    r = train(
        ENV2,
        TrainerConfig(
            num_iterations=3, num_updates_per_train_iter=2, counter_mode="per-mini-batch"
        ),
    )
    updates = list(r.trace.of_kind("update"))
    assert len(updates) == 6
    assert [u.counter for u in updates] == [1, 2, 3, 4, 5, 6]
    assert all(len(u.windows) == 2 for u in updates)  # mini_batch_size defaults to B


def test_counter_after_each_update_runs_the_update_with_the_count_before_it() -> None:
    """unroll.global-counter variant count-before: update k carries k - 1, iteration k
    starts with every update so far counted."""
    r = train(
        ENV2,
        TrainerConfig(
            num_iterations=3, num_updates_per_train_iter=2, counter_mode="per-mini-batch-after"
        ),
    )
    assert [u.counter for u in r.trace.of_kind("update")] == [0, 1, 2, 3, 4, 5]
    assert [i.counter for i in r.trace.of_kind("iteration")] == [0, 2, 4]


def test_counter_after_each_call_runs_its_updates_with_the_count_of_earlier_calls() -> None:
    """unroll.global-counter variant call-count-before: the updates of a call carry the
    updates of earlier calls, and the next iteration starts with every update so far."""
    r = train(
        ENV2,
        TrainerConfig(
            num_iterations=3, num_updates_per_train_iter=2, counter_mode="per-train-call-after"
        ),
    )
    assert [u.counter for u in r.trace.of_kind("update")] == [0, 0, 2, 2, 4, 4]
    assert [i.counter for i in r.trace.of_kind("iteration")] == [0, 2, 4]


def test_counter_after_each_iteration_runs_iteration_k_with_k_minus_one() -> None:
    """unroll.global-counter variant iteration-count-before: iteration k and its updates carry
    k - 1, its end (and its after_train_iter) comes after the increment."""
    r = train(
        ENV2,
        TrainerConfig(
            num_iterations=3, num_updates_per_train_iter=2, counter_mode="per-iteration-after"
        ),
    )
    assert [i.counter for i in r.trace.of_kind("iteration")] == [0, 1, 2]
    assert [u.counter for u in r.trace.of_kind("update")] == [0, 0, 1, 1, 2, 2]
    assert [i.counter for i in r.trace.of_kind("iteration_end")] == [1, 2, 3]


def test_whole_buffer_keep_one_step() -> None:
    # u = 2, B = 2, chunks of 1: call 1 sees 2 items per env; later calls 1 kept + 2 new.
    r = train(
        ENV2,
        TrainerConfig(
            unroll_length=2, num_iterations=3, whole_buffer=True, clear="keep-one-step", capacity=8
        ),
    )
    sizes = [
        sum(len(u.windows) for u in r.trace.of_kind("update") if u.call == c) for c in range(3)
    ]
    assert sizes == [4, 6, 6]


def test_lazy_replay_drops_the_calls_before_the_first_store() -> None:
    # u = 1/4, B = 2: the first vector step comes in iteration 4 (floor(4/4) = 1). An eager
    # buffer gets a no-data call in iterations 1-3; a lazy one gets none and no hook there.
    cfg = TrainerConfig(unroll_length="1/4", num_iterations=8)
    eager = train(ENV2, cfg)
    lazy = train(ENV2, replace(cfg, replay_creation="lazy"))
    assert _calls(eager) == [1] * 8
    assert _calls(lazy) == [0, 0, 0, 1, 1, 1, 1, 1]
    assert [e.status for e in eager.trace.of_kind("train_call")][:3] == ["no-data"] * 3
    hooks = [e.iteration for e in lazy.trace.of_kind("hook") if e.name == "after_train_iter"]
    assert hooks == [4, 8]


def test_alf_resized_mini_batch_squeezes_the_short_last_batch() -> None:
    # u = 3, B = 2, chunks of 1: 6 chunks. M = 4 gives batches 4 + 2 per epoch (2 updates);
    # ALF's rule gives M' = ceil(6 / floor(6/4)) = 6: one update of 6 per epoch.
    cfg = TrainerConfig(
        unroll_length=3,
        num_iterations=1,
        whole_buffer=True,
        mini_batch_size=4,
        num_updates_per_train_iter=2,
        capacity=8,
    )
    spec = [len(u.windows) for u in train(ENV2, cfg).trace.of_kind("update")]
    alf = [
        len(u.windows)
        for u in train(ENV2, replace(cfg, mini_batch_resize="alf")).trace.of_kind("update")
    ]
    assert sorted(spec) == [2, 2, 4, 4]
    assert alf == [6, 6]


def test_shortened_chunks_train_what_is_there() -> None:
    # u = 1, B = 2, T = 2: after iteration 1 each env holds 1 item, no whole chunk: the spec
    # trains nothing (no-data); alf-shortened-chunks trains each env's item as a chunk of 1.
    cfg = TrainerConfig(num_iterations=1, whole_buffer=True, mini_batch_length=2, capacity=8)
    assert [e.status for e in train(ENV2, cfg).trace.of_kind("train_call")] == ["no-data"]
    short = train(ENV2, replace(cfg, short_chunks="shorten"))
    (update,) = short.trace.of_kind("update")
    assert sorted(update.windows) == [((0, 0, 0),), ((1, 0, 0),)]


def test_on_policy_requires_identity() -> None:
    with pytest.raises(ConfigError, match="preprocess"):
        train(
            ENV2,
            TrainerConfig(mode="on-policy", unroll_length=2, num_iterations=1),
            preprocess=EpisodeDelayed(),
        )


def test_same_seed_same_bytes() -> None:
    cfg = TrainerConfig(unroll_length=Fraction(3, 2), num_iterations=6, mini_batch_length=2)
    assert train(ENV2, cfg, seed=3).trace.to_jsonl() == train(ENV2, cfg, seed=3).trace.to_jsonl()


def test_recording_by_reference_or_by_copy_gives_the_same_trace() -> None:
    from xpspec.refimpl.recorder import Recorder

    cfg = TrainerConfig(unroll_length=Fraction(3, 2), num_iterations=6, mini_batch_length=2)
    reference = train(ENV2, cfg, preprocess=EpisodeDelayed(), seed=1).trace.to_jsonl()
    from xpspec.refimpl.trainer import Trainer

    trainer = Trainer(ENV2, cfg, preprocess=EpisodeDelayed(), seed=1)
    trainer.recorder = Recorder(enabled=True, copy=True)
    assert trainer.run().trace.to_jsonl() == reference


def test_unrolled_gate_counts_excluded_items() -> None:
    # B = 2, plain calls, odd t excluded: unrolled 2, 4, 6, 8 items, stored 2, 2, 4, 4. With
    # initial_collect_steps = 4 the stored gate opens at iteration 3, the unrolled one at 2.
    def statuses(gate: str) -> list[str]:
        cfg = TrainerConfig(
            num_iterations=4, initial_collect_steps=4, warmup_gate=gate, train_accounting="plain"
        )
        r = train(ENV2, cfg, preprocess=ExcludeSteps(2, 1))
        return [e.status for e in r.trace.of_kind("train_call")]

    assert statuses("stored>=") == ["warmup", "warmup", "trained", "trained"]
    assert statuses("unrolled>=") == ["warmup", "trained", "trained", "trained"]


@pytest.mark.parametrize(
    ("hook_gate", "creation", "budget", "iterations"),
    [
        ("unrolled", "eager", 0, [2, 5]),  # only where something was drained
        ("unroll-gate", "eager", 0, [1, 2, 3, 4, 5]),  # ALF: every drain-mode iteration
        ("unroll-gate", "lazy", 0, [2, 3, 4, 5]),  # ... once its buffer exists
        ("unroll-gate", "eager", 2, [1, 2]),  # ... within num_env_steps
    ],
)
def test_after_train_iter_follows_the_hook_gate(
    hook_gate: str, creation: str, budget: int, iterations: list[int]
) -> None:
    # Arrivals 0, 2, 0, 0, 2: iterations 2 and 5 drain 2 vector steps, the others nothing.
    cfg = TrainerConfig(
        unroll_length=0,
        drain=DrainSpec((0, 2, 0)),
        num_iterations=5,
        num_env_steps=budget,
        hook_gate=hook_gate,  # type: ignore[arg-type]
        replay_creation=creation,  # type: ignore[arg-type]
    )
    hooks = train(ENV2, cfg).trace.of_kind("hook")
    assert [e.iteration for e in hooks if e.name == "after_train_iter"] == iterations


def _chunks_per_call(run: Any) -> dict[int, list[tuple[Any, ...]]]:
    calls: dict[int, list[tuple[Any, ...]]] = {}
    for u in run.trace.of_kind("update"):
        calls.setdefault(u.call, []).extend(u.windows)
    return calls


@pytest.mark.parametrize("clear", ["all", "keep-one-step"])
def test_clear_keeps_every_untrained_item(clear: str) -> None:
    # replay.clear with T = 3 > 2, one env, u = 4: rings of 4, 5 and 6 items. The rule that
    # kept only the newest item (or none) dropped items 3 (all) and 6 (both modes) untrained.
    env = EnvSpec(num_envs=1, schedules=(FixedSchedule(100),))
    config = TrainerConfig(
        unroll_length=4, num_iterations=3, whole_buffer=True, mini_batch_length=3, clear=clear
    )
    calls = _chunks_per_call(train(env, config))
    trained = Counter(t for chunks in calls.values() for chunk in chunks for _, _, t in chunk)
    # call 1: (0 1 2), keeps 3; call 2: (3 4 5) of 3..7, keeps 6 7; call 3: two chunks of 6..11
    assert [sorted(t for c in calls[k] for _, _, t in c) for k in range(3)] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8, 9, 10, 11],
    ]
    assert set(trained) == set(range(12)) and set(trained.values()) == {1}


def test_keep_one_step_trains_the_newest_item_again_when_the_ring_was_whole_chunks() -> None:
    # T = 2, u = 2, one env: call 1's ring (0 1) is one whole chunk, so its clear keeps the
    # newest trained item 1, which starts call 2's chunk with its successor 2; the ring
    # (1 2 3) then keeps 3, untrained, and call 3 trains (3 4).
    env = EnvSpec(num_envs=1, schedules=(FixedSchedule(100),))
    config = TrainerConfig(
        unroll_length=2,
        num_iterations=3,
        whole_buffer=True,
        mini_batch_length=2,
        clear="keep-one-step",
    )
    calls = _chunks_per_call(train(env, config))
    assert [sorted(tuple(t for _, _, t in c) for c in calls[k]) for k in range(3)] == [
        [(0, 1)],
        [(1, 2)],
        [(3, 4)],
    ]


def test_on_policy_trains_the_transition_between_unrolls() -> None:
    # On-policy u = 3, T = 3: each call's first chunk starts with what the previous call kept,
    # so the last item of unroll k and the first of unroll k + 1 share a chunk. With a ring of
    # u cleared entirely they never did.
    env = EnvSpec(num_envs=1, schedules=(FixedSchedule(100),))
    run = train(
        env, TrainerConfig(mode="on-policy", unroll_length=3, num_iterations=4, mini_batch_length=3)
    )
    pairs = {
        (a[2], b[2])
        for chunks in _chunks_per_call(run).values()
        for chunk in chunks
        for a, b in itertools.pairwise(chunk)
    }
    assert {(2, 3), (5, 6), (8, 9)} <= pairs


def test_a_trainer_records_only_when_asked_and_recording_changes_nothing() -> None:
    from xpspec.refimpl.trainer import Trainer

    cfg = TrainerConfig(unroll_length=Fraction(3, 2), num_iterations=6, mini_batch_length=2)
    silent = Trainer(ENV2, cfg, preprocess=EpisodeDelayed(), seed=1).run()
    recorded = Trainer(ENV2, cfg, preprocess=EpisodeDelayed(), seed=1, record=True).run()
    via_train = train(ENV2, cfg, preprocess=EpisodeDelayed(), seed=1)
    assert silent.trace.events == ()
    assert recorded.trace.events and recorded.trace.to_jsonl() == via_train.trace.to_jsonl()
    counters = ("iterations", "env_steps", "stored_total", "train_calls", "updates")
    for name in counters:
        assert getattr(silent, name) == getattr(recorded, name) == getattr(via_train, name)


@pytest.mark.parametrize("copy", [False, True])
def test_an_unroll_recorded_at_once_gives_the_events_of_its_steps(copy: bool) -> None:
    # Recorder.unroll of [steps, B, ...] rows: per step an env_step then a store event, as
    # recording each step's rows would give; mixed with per-step entries around it.
    import torch

    from xpspec.refimpl.recorder import Recorder
    from xpspec.refimpl.trainer import ROW_FIELDS

    def rows(step: int) -> dict[str, torch.Tensor]:  # B = 4 envs, distinct values per step
        return {
            name: ((torch.arange(4 * math.prod(shape)) + 7 * step) % 11)
            .reshape(4, *shape)
            .to(dtype)
            for name, (shape, dtype) in ROW_FIELDS.items()
        }

    steps = [rows(s) for s in range(5)]
    one_by_one, at_once = Recorder(copy=copy), Recorder(copy=copy)
    for recorder in (one_by_one, at_once):
        recorder.iteration_start(1, 1, 5)
        recorder.env_step(1, steps[0])
        recorder.store(1, steps[0])
    for r in steps[1:4]:
        one_by_one.env_step(1, r)
        one_by_one.store(1, r)
    at_once.unroll(1, {k: torch.stack([r[k] for r in steps[1:4]]) for k in ROW_FIELDS}, 3)
    at_once.unroll(1, {k: v[:0] for k, v in rows(9).items()}, 0)  # an empty unroll
    for recorder in (one_by_one, at_once):
        recorder.env_step(1, steps[4])
        recorder.store(1, steps[4])
    expected = one_by_one.trace().to_jsonl()
    assert at_once.trace().to_jsonl() == expected
    assert len(one_by_one.trace().events) == 0  # drained
    assert expected.count('"kind":"env_step"') == 5 == expected.count('"kind":"store"')
