"""Language-neutral test vectors, generated from the reference implementation.

A vector is one JSON file under ``spec/vectors/``: a scenario in the spec's vocabulary and the
projection of the reference trace that any conforming implementation must reproduce. Two
kinds exist:

- ``trainer`` vectors run :func:`refimpl.train` and keep, per iteration, the counter, the
  unroll length, the unrolled, stored and excluded items, the train calls (status, number of
  updates, and for whole-buffer training the windows and loss masks each call used), the
  hooks, and at the end the pending or flushed items;
- ``replay`` vectors fill a :class:`~refimpl.replay.ReplayBuffer` with every item of
  ``fill_steps`` vector steps and keep the stored items, every valid window under the sampling
  spec (``null`` marks padding) and its exact sampling probability.

Nothing in a projection depends on a random number generator, so the vectors are the same
for every implementation. ``python -m refimpl.vectors --write`` regenerates the files;
``--check`` exits with status 1 when the checked-in files differ from a fresh generation.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Union

import torch

from refimpl.config import DrainSpec, TrainerConfig
from refimpl.preprocess import (
    EpisodeDelayed,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from refimpl.replay import ReplayBuffer, SamplingSpec
from refimpl.serial import to_jsonable
from refimpl.step_type import StepType
from refimpl.toy_envs.batched import ToyBatchEnv
from refimpl.toy_envs.schedule import CycleSchedule, EpisodePlan, FixedSchedule
from refimpl.toy_envs.spec import EnvSpec
from refimpl.trace import Trace
from refimpl.trainer import train

__all__ = [
    "CASES",
    "FORMAT",
    "ReplayCase",
    "TrainerCase",
    "default_directory",
    "generate",
    "main",
    "replay_projection",
    "stale_files",
    "trainer_projection",
    "write",
]

FORMAT = "xpspec-vector/1"

Item = list[int]


@dataclass(frozen=True)
class TrainerCase:
    """A train run whose trace projection is a vector."""

    name: str
    description: str
    clauses: tuple[str, ...]
    env: EnvSpec
    trainer: TrainerConfig
    preprocess: PreprocessorSpec = field(default_factory=Identity)
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    seed: int = 0

    def scenario(self) -> dict[str, Any]:
        return {
            "kind": "trainer",
            "env": to_jsonable(self.env),
            "trainer": to_jsonable(self.trainer),
            "preprocess": to_jsonable(self.preprocess),
            # windows are as long as the mini-batch length, as the trainer samples them
            "sampling": to_jsonable(
                replace(self.sampling, window_length=self.trainer.mini_batch_length)
            ),
            "seed": self.seed,
        }

    def expected(self) -> dict[str, Any]:
        result = train(self.env, self.trainer, self.preprocess, self.sampling, self.seed)
        return trainer_projection(result.trace, self.trainer.whole_buffer)


@dataclass(frozen=True)
class ReplayCase:
    """A filled replay buffer whose valid windows and probabilities are a vector."""

    name: str
    description: str
    clauses: tuple[str, ...]
    env: EnvSpec
    capacity: int
    fill_steps: int
    sampling: SamplingSpec
    seed: int = 0

    def scenario(self) -> dict[str, Any]:
        return {
            "kind": "replay",
            "env": to_jsonable(self.env),
            "capacity": self.capacity,
            "fill_steps": self.fill_steps,
            "sampling": to_jsonable(self.sampling),
            "batch_size": 16,
            "draws": 1,
            "seed": self.seed,
        }

    def expected(self) -> dict[str, Any]:
        return replay_projection(self.env, self.capacity, self.fill_steps, self.sampling, self.seed)


Case = Union[TrainerCase, ReplayCase]


# -- projections ----------------------------------------------------------------------------
def _items(event: Any) -> list[Item]:
    return [[e, k, t] for e, k, t in zip(event.env, event.episode, event.t)]


def _window(window: Sequence[Any]) -> list[Item | None]:
    return [None if item is None else list(item) for item in window]


def trainer_projection(trace: Trace, whole_buffer: bool) -> dict[str, Any]:
    """The RNG-free projection of a trainer trace (see the module docstring).

    Windows are kept only for whole-buffer training, where the multiset of windows a call
    uses does not depend on the shuffling; they are listed sorted, each with its loss mask.
    """
    iterations: list[dict[str, Any]] = []
    run_end: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    calls: dict[int, dict[str, Any]] = {}
    ended = False
    for raw in trace.events:
        event: Any = raw
        kind = event.kind
        if kind == "iteration":
            current = {
                "iteration": event.iteration,
                "counter": event.counter,
                "unroll_steps": event.unroll_steps,
                "unrolled": [],
                "stored": [],
                "stored_values": [],
                "excluded": [],
                "train_calls": [],
                "after_update": 0,
                "after_train_iter": 0,
            }
            iterations.append(current)
            calls = {}
            ended = False
        elif kind == "store" and ended:
            run_end.setdefault("flushed", []).extend(_items(event))
        elif current is None:
            continue
        elif kind == "env_step":
            current["unrolled"].extend(_items(event))
        elif kind == "store":
            current["stored"].extend(_items(event))
            current["stored_values"].extend(
                [s, r, d, a]
                for s, r, d, a in zip(
                    event.step_type, event.reward, event.discount, event.annotation
                )
            )
        elif kind == "exclude":
            current["excluded"].extend([*item, event.reason] for item in _items(event))
        elif kind == "train_call":
            call: dict[str, Any] = {"status": event.status, "counter": event.counter, "updates": 0}
            if whole_buffer:
                call["windows"] = []
            calls[event.call] = call
            current["train_calls"].append(call)
        elif kind == "update":
            call = calls[event.call]
            call["updates"] += 1
            if whole_buffer:
                call["windows"].extend(
                    [_window(w), list(m)] for w, m in zip(event.windows, event.loss_mask)
                )
        elif kind == "hook":
            current[event.name] += 1
        elif kind == "iteration_end":
            current["counter_at_end"] = event.counter
            current["env_steps"] = event.env_steps
            current["stored_total"] = event.stored_total
            current["pending"] = event.pending
            for call in current["train_calls"]:
                if whole_buffer:
                    call["windows"].sort(key=_window_key)
            ended = True
        elif kind == "run_end":
            run_end["iterations"] = event.iterations
            run_end["env_steps"] = event.env_steps
            run_end["pending_policy"] = event.pending_policy
            run_end["pending"] = _items(event)
    run_end.setdefault("flushed", [])
    return {"iterations": iterations, "run_end": run_end}


def _window_key(entry: list[Any]) -> tuple[Any, ...]:
    window, mask = entry
    return (tuple((-1, -1, -1) if i is None else tuple(i) for i in window), tuple(mask))


def replay_projection(
    env: EnvSpec, capacity: int, fill_steps: int, sampling: SamplingSpec, seed: int
) -> dict[str, Any]:
    """Stored items and every valid window (with its probability) after storing every item
    of ``fill_steps`` vector steps of ``env`` into per-env rings of ``capacity``."""
    toy = ToyBatchEnv(env, seed)
    fields = {"observation": ((3,), torch.float32), "step_type": ((), torch.int64)}
    buffer = ReplayBuffer(env.num_envs, capacity, fields)
    written: list[list[tuple[int, int, int, int]]] = [[] for _ in range(env.num_envs)]
    step = toy.reset()
    for _ in range(fill_steps):
        buffer.add_row({"observation": step.observation, "step_type": step.step_type})
        for e in range(env.num_envs):
            o = step.observation[e].tolist()
            written[e].append((int(o[0]), int(o[1]), int(o[2]), int(step.step_type[e])))
        step = toy.step(torch.zeros(env.num_envs, dtype=torch.int64))
    sizes = buffer.sizes.tolist()
    stored = [
        [list(item[:3]) for item in written[e][len(written[e]) - sizes[e] :]]
        for e in range(env.num_envs)
    ]
    probabilities = buffer.window_probabilities(sampling)
    windows = []
    for e in range(env.num_envs):
        for start in buffer.valid_starts(e, sampling):
            items = _window_items(written[e], start, sampling)
            windows.append(
                {
                    "env": e,
                    "start": start,
                    "items": items,
                    "probability": str(probabilities.get((e, start), Fraction(0))),
                }
            )
    return {"stored": stored, "windows": windows}


def _window_items(
    written: list[tuple[int, int, int, int]], start: int, sampling: SamplingSpec
) -> list[Item | None]:
    """The items of window ``start``; under ``pad`` the items past the start's episode
    segment or past the newest write are ``None`` (padding)."""
    out: list[Item | None] = []
    alive = True
    for i in range(sampling.window_length):
        p = start + i
        if p >= len(written):
            alive = False
        elif i > 0 and sampling.boundary == "pad":
            before, here = written[p - 1][3], written[p][3]
            if before == StepType.LAST or here == StepType.FIRST:
                alive = False
        out.append(list(written[p][:3]) if alive else None)
    return out


# -- the cases --------------------------------------------------------------------------------
def _cases() -> tuple[Case, ...]:
    one_env = EnvSpec(num_envs=1, schedules=(FixedSchedule(100),))
    two_envs = EnvSpec(num_envs=2, schedules=(FixedSchedule(3),))
    staggered = EnvSpec(num_envs=2, schedules=(FixedSchedule(2), FixedSchedule(3)))
    mixed = EnvSpec(
        num_envs=2,
        schedules=(
            CycleSchedule((EpisodePlan(2, "terminated"), EpisodePlan(3, "truncated")), offset=1),
        ),
    )
    tasks = EnvSpec(num_envs=2, schedules=(FixedSchedule(2),), num_tasks=2)
    third = Fraction(1, 3)
    return (
        TrainerCase(
            "unroll-quarter-identity",
            "u = 1/4 with 2 envs and identity preprocessing: one unroll every 4 iterations, "
            "one train call every iteration, counter = iteration.",
            (
                "unroll.fractional-schedule",
                "unroll.all-envs-step",
                "unroll.global-counter",
                "train.synced-schedule",
                "train.identity-reduces-to-plain",
                "train.hooks",
                "preprocess.identity-is-plain",
            ),
            two_envs,
            TrainerConfig(unroll_length=Fraction(1, 4), num_iterations=12),
        ),
        TrainerCase(
            "unroll-three-halves",
            "u = 3/2 with 3 envs: 1, 2, 1, 2 ... vector steps per iteration.",
            (
                "unroll.fractional-schedule",
                "unroll.all-envs-step",
                "train.identity-reduces-to-plain",
            ),
            EnvSpec(num_envs=3, schedules=(FixedSchedule(4),)),
            TrainerConfig(unroll_length=Fraction(3, 2), num_iterations=6),
        ),
        TrainerCase(
            "unroll-alf-float-carry",
            "Variant alf-float-carry: u = 0.1 carried in IEEE doubles unrolls on iterations 11 "
            "and 21 (the exact schedule: 10 and 20).",
            ("unroll.fractional-schedule",),
            one_env,
            TrainerConfig(
                unroll_length=Fraction(1, 10), unroll_carry="alf-float", num_iterations=22
            ),
        ),
        TrainerCase(
            "unroll-drain",
            "unroll_length 0: the asynchronous unroller completes 3, 0, 1 vector steps between "
            "iterations (cycling) into a queue of 4; each iteration drains at most 2.",
            ("unroll.drain", "train.synced-schedule", "train.hooks"),
            two_envs,
            TrainerConfig(
                unroll_length=Fraction(0),
                drain=DrainSpec(arrivals=(3, 0, 1), max_unroll_length=2, queue_size=4),
                num_iterations=8,
            ),
        ),
        TrainerCase(
            "unroll-num-env-steps-overshoot",
            "num_env_steps = 10 with u = 3 and 2 envs and no iteration budget: the check before "
            "each unroll lets the second unroll overshoot to 12.",
            ("unroll.num-env-steps",),
            two_envs,
            TrainerConfig(unroll_length=Fraction(3), num_env_steps=10),
        ),
        TrainerCase(
            "unroll-num-env-steps-then-train",
            "num_env_steps = 4 with num_iterations = 5: interaction stops after iteration 2, "
            "iterations 3 to 5 still make their train calls.",
            ("unroll.num-env-steps", "train.synced-schedule", "train.hooks"),
            two_envs,
            TrainerConfig(unroll_length=Fraction(1), num_env_steps=4, num_iterations=5),
        ),
        TrainerCase(
            "unroll-num-env-steps-non-first",
            "Variant non-first: only non-FIRST items count toward num_env_steps = 4.",
            ("unroll.num-env-steps",),
            two_envs,
            TrainerConfig(unroll_length=Fraction(1), num_env_steps=4, env_step_count="non-first"),
        ),
        TrainerCase(
            "counter-per-mini-batch",
            "counter_mode per-mini-batch: the counter moves once before every update and never "
            "otherwise (2 updates per call).",
            ("unroll.global-counter", "train.hooks", "train.updates-per-call"),
            two_envs,
            TrainerConfig(
                num_iterations=4,
                counter_mode="per-mini-batch",
                num_updates_per_train_iter=2,
            ),
        ),
        TrainerCase(
            "delayed-staggered-envs",
            "Episode-delayed preprocessing with env 0 ending every 3 steps and env 1 every 4: "
            "an env at LAST releases only its own episode; training lags by pending/(u*B).",
            (
                "preprocess.delayed-per-env",
                "preprocess.conservation",
                "preprocess.store-order",
                "preprocess.pending-at-end",
                "train.synced-schedule",
                "train.bounded-lag",
            ),
            staggered,
            TrainerConfig(num_iterations=8),
            EpisodeDelayed(),
        ),
        TrainerCase(
            "delayed-keep-success-flush",
            "Episode-delayed preprocessing that keeps only terminated episodes (annotation 1); "
            "truncated ones are excluded with reason outcome; held items are flushed at the end.",
            (
                "preprocess.delayed-per-env",
                "preprocess.exclusion",
                "preprocess.pending-at-end",
                "preprocess.conservation",
                "train.excluded-earn-nothing",
            ),
            mixed,
            TrainerConfig(num_iterations=8, pending_at_end="flush"),
            EpisodeDelayed(keep="success"),
        ),
        TrainerCase(
            "exclude-steps",
            "Every item with odd t is excluded: half of each iteration is excluded, so the "
            "synced schedule makes a call every second iteration.",
            (
                "preprocess.exclusion",
                "preprocess.conservation",
                "train.synced-schedule",
                "train.excluded-earn-nothing",
                "train.utd-converges",
            ),
            two_envs,
            TrainerConfig(num_iterations=8),
            ExcludeSteps(every=2, offset=1),
        ),
        TrainerCase(
            "exclude-task-synced",
            "Two tasks alternate between the envs so one env in two is excluded at every step: "
            "the synced schedule carries the half iterations.",
            ("preprocess.exclusion", "train.synced-schedule", "train.excluded-earn-nothing"),
            tasks,
            TrainerConfig(num_iterations=6),
            ExcludeTasks((1,)),
        ),
        TrainerCase(
            "exclude-task-alf-pr1768-floor",
            "Variant alf-pr1768-floor on the same run: floor(1/2) = 0 calls on every iteration.",
            ("train.synced-schedule",),
            tasks,
            TrainerConfig(num_iterations=6, train_accounting="alf-pr1768-floor"),
            ExcludeTasks((1,)),
        ),
        TrainerCase(
            "exclude-task-plain",
            "Variant plain on the same run: one call per iteration whatever was stored.",
            ("train.synced-schedule",),
            tasks,
            TrainerConfig(num_iterations=6, train_accounting="plain"),
            ExcludeTasks((1,)),
        ),
        TrainerCase(
            "transform-step-type",
            "Truncated LAST items are stored as MID, so their loss is not masked (whole-buffer "
            "training shows the masks).",
            ("preprocess.transform", "timestep.loss-mask-last", "timestep.discount"),
            EnvSpec(num_envs=1, schedules=(FixedSchedule(2, "truncated"),)),
            TrainerConfig(num_iterations=3, unroll_length=Fraction(3), whole_buffer=True),
            OverwriteStepType(to="MID", when="truncated-last"),
        ),
        TrainerCase(
            "transform-reward",
            "A reward transform stores reward * 2 - 1 and nothing else changes.",
            ("preprocess.transform",),
            two_envs,
            TrainerConfig(num_iterations=3),
            RewardTransform(scale=Fraction(2), shift=Fraction(-1)),
        ),
        TrainerCase(
            "loss-mask-last",
            "Whole-buffer training of 2 envs with a terminated episode of 2 transitions: LAST "
            "items have loss mask 0.",
            ("timestep.loss-mask-last", "replay.whole-buffer", "train.updates-per-call"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(2),)),
            TrainerConfig(num_iterations=2, unroll_length=Fraction(3), whole_buffer=True),
        ),
        TrainerCase(
            "loss-mask-last-no-mask",
            "Variant no-mask of the same run: LAST items keep loss mask 1.",
            ("timestep.loss-mask-last",),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(2),)),
            TrainerConfig(
                num_iterations=2, unroll_length=Fraction(3), whole_buffer=True, mask_last=False
            ),
        ),
        TrainerCase(
            "whole-buffer-clear-keep-one",
            "Whole-buffer training with mini_batch_length 2 and clearing that keeps the newest "
            "item of each env: each call trains on the previous newest item plus the new ones.",
            ("replay.whole-buffer", "replay.clear", "train.updates-per-call"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(5),)),
            TrainerConfig(
                num_iterations=4,
                unroll_length=Fraction(3),
                whole_buffer=True,
                mini_batch_length=2,
                clear="keep-one-step",
            ),
        ),
        TrainerCase(
            "whole-buffer-clear-keeps-untrained",
            "Whole-buffer training with chunks of 3, u = 4 and clearing all: each clear keeps "
            "the items its call could not train on (one, then two), so every item is trained "
            "in exactly one call.",
            ("replay.whole-buffer", "replay.clear"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(5),)),
            TrainerConfig(
                num_iterations=4,
                unroll_length=Fraction(4),
                whole_buffer=True,
                mini_batch_length=3,
                clear="all",
            ),
        ),
        TrainerCase(
            "on-policy-keeps-the-last-item",
            "On-policy with u = 3 and chunks of 3: each call's first chunk starts with the "
            "item the previous call kept, so the last item of one unroll and the first of the "
            "next share a chunk.",
            ("replay.clear", "replay.whole-buffer"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(4),)),
            TrainerConfig(
                mode="on-policy", num_iterations=4, unroll_length=Fraction(3), mini_batch_length=3
            ),
        ),
        TrainerCase(
            "whole-buffer-epochs",
            "Whole-buffer training, 2 epochs, mini_batch_size 3 over 4 chunks of length 2 (2 "
            "per env): 2 x ceil(4/3) = 4 updates per call; each env's fifth item is not used.",
            ("replay.whole-buffer", "train.updates-per-call"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(9),)),
            TrainerConfig(
                num_iterations=1,
                unroll_length=Fraction(5),
                whole_buffer=True,
                mini_batch_length=2,
                mini_batch_size=3,
                num_updates_per_train_iter=2,
            ),
        ),
        TrainerCase(
            "warmup-stored-geq",
            "initial_collect_steps = 4 with 2 envs: the gate opens when 4 items are stored.",
            ("train.warmup-gate",),
            two_envs,
            TrainerConfig(num_iterations=4, initial_collect_steps=4),
        ),
        TrainerCase(
            "warmup-strict",
            "Variant strict of the same run: the gate opens only above 4 stored items.",
            ("train.warmup-gate",),
            two_envs,
            TrainerConfig(num_iterations=4, initial_collect_steps=4, warmup_gate="stored>"),
        ),
        TrainerCase(
            "warmup-capped-size",
            "Variant capped-size: with 1 item of capacity per env the buffer never holds 3 "
            "items, so training never starts (the default gate opens at iteration 2).",
            ("train.warmup-gate",),
            two_envs,
            TrainerConfig(
                num_iterations=4, initial_collect_steps=3, capacity=1, warmup_gate="size>="
            ),
        ),
        TrainerCase(
            "insufficient-data",
            "mini_batch_length 3: calls before any env holds 3 items are recorded as no-data "
            "and the run goes on.",
            ("train.insufficient-data", "replay.window-validity"),
            two_envs,
            TrainerConfig(num_iterations=4, mini_batch_length=3),
        ),
        ReplayCase(
            "period-anchor-absolute",
            "Period 2, window 3, ring of 8, 11 items written: starts are absolute multiples of "
            "2 (4, 6, 8).",
            ("replay.period-anchor", "replay.window-validity", "replay.eviction"),
            one_env,
            capacity=8,
            fill_steps=11,
            sampling=SamplingSpec(window_length=3, period=2),
        ),
        ReplayCase(
            "period-anchor-oldest",
            "Variant oldest-anchored of the same buffer: starts 3, 5, 7 (Flashbax 0.1.3 uniform "
            "trajectory buffer).",
            ("replay.period-anchor",),
            one_env,
            capacity=8,
            fill_steps=11,
            sampling=SamplingSpec(window_length=3, period=2, anchor="oldest"),
        ),
        ReplayCase(
            "boundary-cross",
            "Boundary policy cross: windows of 3 may hold LAST followed by FIRST.",
            ("replay.boundary-policy", "replay.window-validity", "replay.uniform-windows"),
            EnvSpec(num_envs=1, schedules=(FixedSchedule(2),)),
            capacity=8,
            fill_steps=7,
            sampling=SamplingSpec(window_length=3, boundary="cross"),
        ),
        ReplayCase(
            "boundary-forbid",
            "Boundary policy forbid: only windows inside one episode.",
            ("replay.boundary-policy", "replay.window-validity"),
            EnvSpec(num_envs=1, schedules=(FixedSchedule(2),)),
            capacity=8,
            fill_steps=7,
            sampling=SamplingSpec(window_length=3, boundary="forbid"),
        ),
        ReplayCase(
            "boundary-pad",
            "Boundary policy pad: every stored start; items past the episode or past the newest "
            "write are padding (null).",
            ("replay.boundary-policy", "replay.window-validity"),
            EnvSpec(num_envs=1, schedules=(FixedSchedule(2),)),
            capacity=8,
            fill_steps=7,
            sampling=SamplingSpec(window_length=3, boundary="pad"),
        ),
        ReplayCase(
            "eviction-per-env",
            "Rings of 3 per env after 5 writes: each env keeps its own newest 3 items.",
            ("replay.eviction", "replay.window-validity"),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(2), FixedSchedule(3))),
            capacity=3,
            fill_steps=5,
            sampling=SamplingSpec(window_length=2),
        ),
        ReplayCase(
            "distribution-uniform-windows",
            "Uniform over valid windows, pooled over envs, with episodes of 1 and 3 "
            "transitions (forbid, window 2): 3 + 4 windows, 1/7 each.",
            ("replay.uniform-windows",),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(1), FixedSchedule(3))),
            capacity=16,
            fill_steps=6,
            sampling=SamplingSpec(window_length=2, boundary="forbid"),
        ),
        ReplayCase(
            "distribution-env-balanced",
            "Variant env-balanced of the same buffer: each env gets half the mass, 1/6 and 1/8 "
            "per window (ALF).",
            ("replay.uniform-windows",),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(1), FixedSchedule(3))),
            capacity=16,
            fill_steps=6,
            sampling=SamplingSpec(window_length=2, boundary="forbid", distribution="env-balanced"),
        ),
        ReplayCase(
            "distribution-uniform-episodes",
            "Variant uniform-episodes of the same buffer: an episode segment first, then a start "
            "in it (TorchRL 0.14.1 SliceSampler).",
            ("replay.uniform-windows",),
            EnvSpec(num_envs=2, schedules=(FixedSchedule(1), FixedSchedule(3))),
            capacity=16,
            fill_steps=6,
            sampling=SamplingSpec(
                window_length=2, boundary="forbid", distribution="uniform-episodes"
            ),
        ),
        TrainerCase(
            "synced-third-three-envs",
            "u = 1/3 with 3 envs and every FIRST item (t = 0) excluded: episodes of one "
            "transition, so half of the items are excluded.",
            ("train.synced-schedule", "train.utd-converges", "train.bounded-lag"),
            EnvSpec(num_envs=3, schedules=(FixedSchedule(1),)),
            TrainerConfig(unroll_length=third, num_iterations=12),
            ExcludeSteps(every=2, offset=0),
        ),
    )


CASES: tuple[Case, ...] = _cases()


# -- files ----------------------------------------------------------------------------------
def default_directory() -> Path:
    """``spec/vectors`` of the source tree this module lives in."""
    return Path(__file__).resolve().parents[1] / "spec" / "vectors"


def _dump(value: Any, indent: int = 0) -> str:
    """JSON with one line per container of containers; lists of scalars stay on one line."""
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if all(not isinstance(v, (dict, list)) for v in value.values()):
            inline = json.dumps(value, sort_keys=True)
            if len(inline) <= 90:
                return inline
        parts = [f"{pad}{json.dumps(k)}: {_dump(value[k], indent + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(parts) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(not isinstance(v, (dict, list)) for v in value):
            return json.dumps(value)
        flat = all(
            v is None or (isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v))
            for v in value
        )
        if flat and len(json.dumps(value)) <= 90:
            return json.dumps(value)
        parts = [f"{pad}{_dump(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(parts) + "\n" + " " * indent + "]"
    return json.dumps(value)


def _document(case: Case) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": case.name,
        "description": case.description,
        "clauses": list(case.clauses),
        "scenario": case.scenario(),
        "expected": case.expected(),
    }


def generate(cases: Sequence[Case] = CASES) -> dict[str, str]:
    """File name -> file text of every vector."""
    return {f"{case.name}.json": _dump(_document(case)) + "\n" for case in cases}


def write(directory: Path) -> list[str]:
    """Write every vector into ``directory`` and remove stale ``*.json`` files there;
    return the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    files = generate()
    for old in directory.glob("*.json"):
        if old.name not in files:
            old.unlink()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return sorted(files)


def stale_files(directory: Path) -> list[str]:
    """Names of vectors that are missing, different or no longer generated."""
    files = generate()
    present = {p.name: p.read_text(encoding="utf-8") for p in directory.glob("*.json")}
    differ = [name for name, text in files.items() if present.get(name) != text]
    extra = [name for name in present if name not in files]
    return sorted(differ + extra)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m refimpl.vectors --write|--check [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m refimpl.vectors", description=__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="(re)generate the vector files")
    action.add_argument("--check", action="store_true", help="exit 1 if the files are stale")
    parser.add_argument("--out", type=Path, default=None, help="directory (default spec/vectors)")
    args = parser.parse_args(argv)
    directory = args.out or default_directory()
    if args.write:
        names = write(directory)
        print(f"wrote {len(names)} vectors to {directory}")
        return 0
    stale = stale_files(directory)
    if stale:
        print(f"stale vectors in {directory}: {', '.join(stale)}", file=sys.stderr)
        print("regenerate with: python -m refimpl.vectors --write", file=sys.stderr)
        return 1
    print(f"{len(generate())} vectors up to date in {directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
