"""The reference trainer: unroll, preprocess, store, train — exactly as the spec says.

One :class:`Trainer` run is a sequence of iterations (clauses ``iteration.*``):

1. the global counter is incremented (``counter_mode='per-iteration'``; under
   ``'per-iteration-after'`` it is incremented after step 3 instead);
2. the unroll length ``n_k`` of this iteration is computed (``unroll.*``); if interaction is
   still allowed (``num_env_steps``), ``n_k`` vector steps are taken. For each step: the
   policy state is reset where the time step is FIRST (``timestep.state-reset``), the policy
   acts, the env steps, and the pre-step time step with its action and state goes through
   the preprocessing hook, whose verdicts are stored, excluded or held (``preprocess.*``).
   Without preprocessing every row is stored, in one buffer write at the end of the unroll
   (equivalent: nothing reads the buffer during an unroll), recorded there too (the
   events of each step, in step order: nothing else is recorded during an unroll), and no
   Python loop runs over envs;
3. the train accounting says how many train calls the iteration owes (``train.*``); each
   call passes the warm-up gate (``warmup.*``) and then makes its gradient updates;
4. ``after_train_iter`` is called if the iteration unrolled anything.

At the end, rows still held by the preprocessing follow ``pending_at_end``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import torch

from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.preprocessors import Identity, PreprocessorSpec, require_compatible
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Trace
from xpspec.refimpl.accounting import (
    AlfFloorTrainSchedule,
    ExactSchedule,
    FloatCarrySchedule,
    PlainTrainSchedule,
    SyncedTrainSchedule,
)
from xpspec.refimpl.learner import alf_adjusted_mini_batch_size
from xpspec.refimpl.preprocess import Rows, build
from xpspec.refimpl.recorder import Recorder
from xpspec.refimpl.replay import NoValidWindow, ReplayBuffer
from xpspec.refimpl.toy_envs.batched import TimeStep, ToyBatchEnv

__all__ = ["GOAL_FIELDS", "ROW_FIELDS", "RunResult", "Trainer", "trace_header", "train"]

ROW_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "observation": ((3,), torch.float32),
    "step_type": ((), torch.int64),
    "reward": ((), torch.float32),
    "discount": ((), torch.float32),
    "action": ((), torch.int64),
    "policy_state": ((), torch.int64),
    "task_id": ((), torch.int64),
    "annotation": ((), torch.float32),
}
"""The columns the trainer's replay buffer stores per item: (shape, dtype)."""
GOAL_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "achieved_goal": ((3,), torch.float32),
    "desired_goal": ((3,), torch.float32),
}
"""The further columns of a goal env's items."""

_IDENTITY = Identity()
_SAMPLING = SamplingSpec()
_FIRST, _LAST = int(StepType.FIRST), int(StepType.LAST)  # plain ints: cheaper to compare


def trace_header(seed: int) -> dict[str, Any]:
    """The header of the trace of a run with ``seed``."""
    return {"producer": "refimpl", "seed": seed}


@dataclass(frozen=True)
class RunResult:
    """Counters of a finished run and its trace (empty when recording was off)."""

    iterations: int
    env_steps: int
    stored_total: int
    train_calls: int
    updates: int
    trace: Trace


class Trainer:
    """A train run of ``config`` on the toy env ``env`` with a preprocessing hook."""

    def __init__(
        self,
        env: EnvSpec,
        config: TrainerConfig,
        preprocess: PreprocessorSpec = _IDENTITY,
        sampling: SamplingSpec = _SAMPLING,
        seed: int = 0,
        record: bool = False,
        sink: Callable[[list[Event]], None] | None = None,
    ) -> None:
        """``record``: keep a trace of the run, which a trainer built to train does not need
        (off by default; :func:`train`, which returns the run's trace, records by default, and
        so does the reference adapter). Recording never changes what the trainer does.
        ``sink``: hand the events of each iteration to it as the iteration ends (a
        :class:`~xpspec.protocol.trace_file.TraceWriter` writes them out), so that the run
        holds one iteration's events at a time; the result's trace then holds none."""
        require_compatible(preprocess, env.autoreset)
        self.init_arguments = (env, config, preprocess, sampling, seed)
        """The arguments the trainer was built with (a restored trainer is built with them)."""
        if config.mode == "on-policy":
            if not isinstance(preprocess, Identity):
                raise ConfigError("preprocess", preprocess, "identity in on-policy mode")
            # replay.clear: a clear keeps at most max(T - 1, 1) items per env, and the next
            # unroll adds u, so nothing is evicted untrained.
            ring = int(config.unroll_length) + max(config.mini_batch_length - 1, 1)
            config = replace(
                config,
                whole_buffer=True,
                clear="keep-one-step",
                capacity=ring,
                initial_collect_steps=0,
            )
        self.env_spec, self.config, self.seed = env, config, seed
        self.preprocess_spec = preprocess
        self.sampling = replace(sampling, window_length=config.mini_batch_length)
        self.recorder = Recorder(record or sink is not None, copy=False)  # rows never written
        self._sink = sink
        self.env = ToyBatchEnv(env, seed)
        self.num_envs = env.num_envs
        fields = {**ROW_FIELDS, **GOAL_FIELDS} if env.goals else ROW_FIELDS
        self.buffer = ReplayBuffer(self.num_envs, config.capacity, fields)
        self._fields = tuple(fields)
        self._identity = isinstance(preprocess, Identity)
        self._zeros = torch.zeros(self.num_envs)  # the annotation of unannotated rows
        self._runtime = build(preprocess)
        self._generator = torch.Generator().manual_seed(seed)
        self._schedule = self._unroll_schedule()
        self._accounting = self._train_schedule()
        # run state
        self.counter = 0
        self.env_steps = 0
        self.stored_total = 0
        self.unrolled_total = 0
        self.stored_since_clear = 0
        self.train_calls = 0
        self.updates = 0
        self._queue = 0
        self.iteration = 0
        self._time_step: TimeStep | None = None
        self._state = torch.zeros(self.num_envs, dtype=torch.int64)

    # -- checkpoint (clauses resume.*; bytes: xpspec.refimpl.checkpoint) -----------------------
    _RUN_STATE = (
        "counter",
        "env_steps",
        "stored_total",
        "unrolled_total",
        "stored_since_clear",
        "train_calls",
        "updates",
        "_queue",
        "iteration",
    )

    def state_dict(self) -> dict[str, Any]:
        """Everything the run goes on from, as plain values, tensors and the schedules'
        dataclasses (clauses ``resume.*``): counters, the last time step and policy states
        (the env itself is not the trainer's), the buffer with its write heads, the held rows,
        the unroll schedule's carry, the train accounting and the sampling generator."""
        return {
            "run": {name: getattr(self, name) for name in self._RUN_STATE},
            "time_step": self._time_step,
            "policy_state": self._state.clone(),
            "buffer": self.buffer.state_dict(),
            "preprocess": self._runtime.state_dict(),
            "unroll_schedule": self._schedule,
            "train_schedule": self._accounting,
            "generator": self._generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take up the run ``state`` describes (from :meth:`state_dict` of a trainer built
        with the same arguments)."""
        for name in self._RUN_STATE:
            setattr(self, name, state["run"][name])
        self._time_step = state["time_step"]
        self._state = state["policy_state"]
        self.buffer.load_state_dict(state["buffer"])
        self._runtime.load_state_dict(state["preprocess"])
        self._schedule = state["unroll_schedule"]
        self._accounting = state["train_schedule"]
        self._generator.set_state(state["generator"])

    # -- schedules ----------------------------------------------------------------------------
    def _unroll_schedule(self) -> ExactSchedule | FloatCarrySchedule | None:
        if self.config.drain is not None:
            return None
        if self.config.unroll_carry == "alf-float":
            return FloatCarrySchedule(float(self.config.unroll_length))
        return ExactSchedule(self.config.unroll_length)

    def _train_schedule(self) -> Any:
        kind = self.config.train_accounting
        if kind == "plain" or self.config.mode == "on-policy":
            return PlainTrainSchedule()
        if kind == "alf-pr1768-floor":
            return AlfFloorTrainSchedule()
        return SyncedTrainSchedule(Fraction(self.config.unroll_length), self.num_envs)

    def _unroll_length(self, iteration: int) -> int:
        if self._schedule is not None:
            return self._schedule.next_length()
        drain = self.config.drain
        assert drain is not None
        arrivals = drain.arrivals[(iteration - 1) % len(drain.arrivals)]
        self._queue = min(self._queue + arrivals, drain.queue_size)
        n = min(self._queue, drain.max_unroll_length)
        self._queue -= n
        return n

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to the end (``num_iterations``, else ``num_env_steps``) and return the result."""
        self.start()
        while not self.run_iteration():
            pass
        return self.finish()

    def start(self) -> None:
        """Reset the env: the run's first time step (iteration 0 is over)."""
        self._time_step = self.env.reset()
        self._state = torch.zeros(self.num_envs, dtype=torch.int64)
        self.iteration = 0

    def run_iteration(self) -> bool:
        """Run the next iteration; return whether the run is over (``num_iterations``, else
        ``num_env_steps``)."""
        cfg = self.config
        self.iteration += 1
        iteration = self.iteration
        if cfg.counter_mode == "per-iteration":
            self.counter += 1
        n = self._unroll_length(iteration)
        within = not (cfg.num_env_steps and self.env_steps >= cfg.num_env_steps)
        if not within:
            n = 0
        self.recorder.iteration_start(iteration, self.counter, n)
        stored_before = self.stored_total
        if self._time_step is None:
            raise RuntimeError("run_iteration() before start(): call start() first")
        self._time_step, self._state = self._unroll(iteration, n, self._time_step, self._state)
        calls = self._accounting.calls_for_iteration(
            n * self.num_envs, self.stored_total - stored_before
        )
        # A lazily created buffer does not exist before the first store: the iteration
        # ends before training (train.idle-calls, variant alf-lazy-buffer).
        buffer_exists = cfg.replay_creation == "eager" or self.stored_total > 0
        for _ in range(calls if buffer_exists else 0):
            self._train_call(iteration)
        # unroll.global-counter, variant iteration-count-before: counted once the
        # iteration has trained, before its after_train_iter.
        if cfg.counter_mode == "per-iteration-after":
            self.counter += 1
        # ALF's unroll gate passes on every drain-mode iteration within the env-step budget
        # (train.after-train-iter, variant alf-drain-empty).
        gate = n > 0 or (cfg.hook_gate == "unroll-gate" and cfg.drain is not None and within)
        if gate and buffer_exists:
            self.recorder.hook(iteration, "after_train_iter")
        self.recorder.iteration_end(
            iteration, self.counter, self.env_steps, self.stored_total, self._pending_count()
        )
        if self._sink is not None:
            self._sink(self.recorder.drain())
        if cfg.num_iterations:
            return iteration >= cfg.num_iterations
        return self.env_steps >= cfg.num_env_steps

    def finish(self) -> RunResult:
        """End the run (held rows meet ``pending_at_end``) and return its result."""
        self._finish(self.iteration)
        if self._sink is not None:
            self._sink(self.recorder.drain())
        return RunResult(
            self.iteration,
            self.env_steps,
            self.stored_total,
            self.train_calls,
            self.updates,
            self.recorder.trace(trace_header(self.seed)),
        )

    def _unroll(
        self, iteration: int, n: int, time_step: TimeStep, state: torch.Tensor
    ) -> tuple[TimeStep, torch.Tensor]:
        """``n`` vector steps. Without preprocessing the rows of the whole unroll are written
        to the buffer at its end, in one call: nothing reads the buffer during an unroll, so
        this equals writing each step's rows as it is taken. They are recorded there too, as
        each step's ``env_step`` and ``store`` events in step order."""
        staged: list[Rows] | None = [] if self._identity else None
        for _ in range(n):
            time_step, state = self._unroll_step(iteration, time_step, state, staged)
        if staged:
            data = {name: torch.stack([rows[name] for rows in staged]) for name in self._fields}
            self.buffer.add_rows(data)
            self.recorder.unroll(iteration, data, len(staged))
        return time_step, state

    def _unroll_step(
        self,
        iteration: int,
        time_step: TimeStep,
        state: torch.Tensor,
        staged: list[Rows] | None,
    ) -> tuple[TimeStep, torch.Tensor]:
        is_first = time_step.step_type == _FIRST
        state = self._reset_state(is_first, state)
        action = state % self.env_spec.num_actions
        # Rows are read, never written: they may share tensors with the env's time steps.
        rows: Rows = {
            "observation": time_step.observation,
            "step_type": time_step.step_type,
            "reward": time_step.reward,
            "discount": time_step.discount,
            "action": action,
            "policy_state": state,
            "task_id": time_step.task_id,
            "annotation": self._zeros,
            "env_id": time_step.env_id,
        }
        if time_step.achieved_goal is not None and time_step.desired_goal is not None:
            rows["achieved_goal"] = time_step.achieved_goal
            rows["desired_goal"] = time_step.desired_goal
        next_step = self.env.step(action)
        self.unrolled_total += self.num_envs
        if self.config.env_step_count == "non-first":
            self.env_steps += int((~is_first).sum())
        else:
            self.env_steps += self.num_envs
        if staged is not None:  # written and recorded with the whole unroll (_unroll)
            staged.append(rows)
            self._stored(iteration, rows, self.num_envs)
        else:
            self.recorder.env_step(iteration, rows)
            for verdict in self._runtime.step(rows):
                self._apply(iteration, verdict.action, verdict.rows, verdict.reason)
        return next_step, state + 1

    @staticmethod
    def _reset_state(is_first: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The initial policy state wherever the time step is FIRST (``timestep.state-reset``)."""
        return torch.where(is_first, 0, state)

    def _apply(self, iteration: int, action: str, rows: Rows, reason: str) -> None:
        if action == "store":
            self.buffer.add_items(rows["env_id"], {k: rows[k] for k in self._fields})
            self.recorder.store(iteration, rows)
            self._stored(iteration, rows, rows["env_id"].shape[0])
        elif action == "exclude":
            self.recorder.exclude(iteration, rows, reason)
        else:
            self.recorder.hold(iteration, rows)

    def _stored(self, iteration: int, rows: Rows, count: int) -> None:
        """Count ``count`` stored ``rows`` (recorded by the caller)."""
        self.stored_total += count
        self.stored_since_clear += count

    def _pending_count(self) -> int:
        pending = self._runtime.pending()
        return 0 if pending is None else int(pending["env_id"].shape[0])

    def _finish(self, iterations: int) -> None:
        pending = self._runtime.pending()
        if pending is not None and self.config.pending_at_end == "flush":
            self._apply(iterations, "store", pending, "")
            pending = None
        obs = None if pending is None else pending["observation"]
        self.recorder.run_end(iterations, self.env_steps, self.config.pending_at_end, obs)

    # -- training -----------------------------------------------------------------------------
    def _warm(self) -> bool:
        ics, gate = self.config.initial_collect_steps, self.config.warmup_gate
        if gate == "stored>":
            return self.stored_total > ics
        if gate == "size>=":
            return self.buffer.total_size >= ics
        if gate == "unrolled>=":
            return self.unrolled_total >= ics
        return self.stored_total >= ics

    def _train_call(self, iteration: int) -> None:
        call = self.train_calls
        self.train_calls += 1
        cfg = self.config
        fresh = self.stored_since_clear > 0 if cfg.clear != "none" else self.buffer.total_size > 0
        if not fresh:
            status = "no-data"
        elif not self._warm():
            status = "warmup"
        else:
            status = "trained"
        batches = self._batches() if status == "trained" else []
        if status == "trained" and not batches:
            status = "no-data"
        self.recorder.train_call(iteration, call, self.counter, status, self.stored_total)
        for index, (observation, valid, step_type) in enumerate(batches):
            if cfg.counter_mode == "per-mini-batch":
                self.counter += 1
            loss_mask = valid & (step_type != _LAST) if cfg.mask_last else valid
            self.recorder.update(
                iteration, call, index, self.counter, observation, valid, loss_mask
            )
            if cfg.counter_mode == "per-mini-batch-after":
                self.counter += 1
            self.updates += 1
            self.recorder.hook(iteration, "after_update")
        if cfg.counter_mode == "per-train-call-after":  # variant call-count-before
            self.counter += len(batches)
        if status == "trained" and cfg.clear != "none":
            self.buffer.clear(keep_last=self._kept_by_clear())
            self.stored_since_clear = 0

    def _kept_by_clear(self) -> list[int]:
        """Items each env keeps after a trained whole-buffer call (clause ``replay.clear``):
        those the call's chunks did not cover, its newest ``size mod T``; under
        ``keep-one-step`` at least its newest item."""
        sizes = self.buffer.sizes.tolist()
        length = self._chunk_length()
        kept = [n % length for n in sizes]
        if self.config.clear == "keep-one-step":
            kept = [min(n, max(k, 1)) for n, k in zip(sizes, kept)]
        return kept

    def _chunk_length(self) -> int:
        """The whole-buffer chunk length of a call on the buffer as it is (clause
        ``replay.whole-buffer``; variant alf-shortened-chunks: the envs' shortest content
        when that is shorter than ``mini_batch_length``)."""
        length = self.config.mini_batch_length
        if self.config.short_chunks == "shorten":
            shortest = int(self.buffer.sizes.min())
            length = min(length, shortest) if shortest > 0 else length
        return length

    def _batches(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The mini-batches of one train call: (observation, valid mask, step_type)."""
        cfg = self.config
        size = cfg.mini_batch_size or self.num_envs
        if not cfg.whole_buffer:
            out = []
            for _ in range(cfg.num_updates_per_train_iter):
                try:
                    s = self.buffer.sample(size, self.sampling, self._generator)
                except NoValidWindow:
                    return []
                out.append((s.data["observation"], s.mask, s.data["step_type"]))
            return out
        length = self._chunk_length()
        try:
            chunks = self.buffer.chunks(length)
        except NoValidWindow:
            return []
        count = int(chunks.env_ids.shape[0])
        if count == 0:
            return []
        if cfg.mini_batch_resize == "alf":
            size = alf_adjusted_mini_batch_size(count, size)
        out = []
        for _ in range(cfg.num_updates_per_train_iter):
            order = (
                torch.randperm(count, generator=self._generator)
                if size < count
                else torch.arange(count)
            )
            for start in range(0, count, size):
                idx = order[start : start + size]
                out.append(
                    (
                        chunks.data["observation"][idx],
                        chunks.mask[idx],
                        chunks.data["step_type"][idx],
                    )
                )
        return out


def train(
    env: EnvSpec,
    config: TrainerConfig,
    preprocess: PreprocessorSpec = _IDENTITY,
    sampling: SamplingSpec = _SAMPLING,
    seed: int = 0,
    record: bool = True,
    sink: Callable[[list[Event]], None] | None = None,
) -> RunResult:
    """Run the reference trainer once and return the result with its trace (``record=False``:
    without); see :class:`Trainer`."""
    return Trainer(env, config, preprocess, sampling, seed, record, sink).run()
