"""Trainer configuration: every knob the spec covers, validated on construction.

Defaults are the spec's defaults; every named variant reproduces one framework's behaviour
and cites it. Counts are in items (one item = one time step of one env) unless a name says
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from xpspec.protocol.codec import parse_fraction
from xpspec.protocol.errors import ConfigError

__all__ = ["DrainSpec", "TrainerConfig"]


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")


@dataclass(frozen=True)
class DrainSpec:
    """The asynchronous unroller of ``unroll_length == 0`` (clause ``unroll.drain``).

    Between iteration ``k-1`` and ``k`` the unroller completes ``arrivals[(k-1) % len]``
    vector steps into its queue, never holding more than ``queue_size`` (it blocks when
    full); iteration ``k`` drains ``min(queued, max_unroll_length)`` of them.
    """

    arrivals: tuple[int, ...] = (1,)
    max_unroll_length: int = 8
    queue_size: int = 200

    def __post_init__(self) -> None:
        if not self.arrivals:
            raise ConfigError("drain.arrivals", self.arrivals, "a non-empty list of integers >= 0")
        for i, a in enumerate(self.arrivals):
            _check_int(f"drain.arrivals[{i}]", a, 0)
        _check_int("drain.max_unroll_length", self.max_unroll_length, 1)
        _check_int("drain.queue_size", self.queue_size, 1)


@dataclass(frozen=True)
class TrainerConfig:
    """The knobs of a train run (clauses named in each field's comment)."""

    mode: Literal["off-policy", "on-policy"] = "off-policy"
    # unroll.fractional-schedule: steps per env per iteration, an exact rational.
    unroll_length: Fraction = Fraction(1)
    unroll_carry: Literal["exact", "alf-float"] = "exact"
    drain: DrainSpec | None = None
    num_iterations: int = 0
    num_env_steps: int = 0
    # unroll.env-step-count: which unrolled items count toward num_env_steps.
    env_step_count: Literal["all", "non-first"] = "all"
    # train.*: train calls per iteration under preprocessing.
    train_accounting: Literal["synced", "plain", "alf-pr1768-floor"] = "synced"
    num_updates_per_train_iter: int = 1
    mini_batch_size: int | None = None
    mini_batch_length: int = 1
    # warmup.*: train only once enough items are stored.
    initial_collect_steps: int = 0
    # "unrolled>=" counts the items unrolled instead of stored (train.warmup-gate, variant
    # unrolled: TorchRL 0.14.1 collected frames, RLlib 2.60.0 sampled steps).
    warmup_gate: Literal["stored>=", "stored>", "size>=", "unrolled>="] = "stored>="
    # "per-mini-batch-after" increments after each update instead of before it, so an update
    # runs with the number of updates made before it (unroll.global-counter, variant
    # count-before: d3rlpy 2.8.0's grad_step); "per-iteration-after" increments after each
    # iteration's train calls instead of at its start, so iteration k runs with k - 1 (variant
    # iteration-count-before: RLlib 2.60.0's Algorithm.iteration); "per-train-call-after"
    # increments by a train call's updates once the call has made them, so every update of a
    # call runs with the updates of earlier calls (variant call-count-before: SB3 2.9.2's
    # _n_updates).
    counter_mode: Literal[
        "per-iteration",
        "per-mini-batch",
        "per-mini-batch-after",
        "per-iteration-after",
        "per-train-call-after",
    ] = "per-iteration"
    # train.idle-calls: "lazy" makes no train call (and no after_train_iter) while
    # nothing has been stored yet; the calls owed then are dropped, not deferred (variant
    # alf-lazy-buffer).
    replay_creation: Literal["eager", "lazy"] = "eager"
    # train.after-train-iter: "unroll-gate" calls after_train_iter on every iteration whose unroll gate
    # passed: in drain mode every iteration within num_env_steps, also when it drained nothing
    # (variant alf-drain-empty, ALF snapshot 23aca492 _train_iter_off_policy). Outside drain
    # mode the gate passes exactly when something is unrolled.
    hook_gate: Literal["unrolled", "unroll-gate"] = "unrolled"
    capacity: int = 1024
    whole_buffer: bool = False
    # train.updates-per-call: "alf" resizes the whole-buffer mini-batch to ceil(n / floor(n/M))
    # when n mod M > 0 and n >= M (variant alf-resized-mini-batch).
    mini_batch_resize: Literal["none", "alf"] = "none"
    # replay.whole-buffer: "shorten" cuts chunks to the fewest items an env holds when that is
    # below mini_batch_length and above 0 (variant alf-shortened-chunks).
    short_chunks: Literal["drop", "shorten"] = "drop"
    clear: Literal["none", "all", "keep-one-step"] = "none"
    mask_last: bool = True
    pending_at_end: Literal["report", "flush"] = "report"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "unroll_length", parse_fraction("unroll_length", self.unroll_length)
        )
        u = self.unroll_length
        if u < 0:
            raise ConfigError("unroll_length", str(u), "a rational >= 0")
        if u == 0 and self.drain is None:
            raise ConfigError("drain", None, "a DrainSpec when unroll_length is 0 (drain mode)")
        if u != 0 and self.drain is not None:
            raise ConfigError("drain", self.drain, "None unless unroll_length is 0")
        if self.mode == "on-policy" and u.denominator != 1:
            raise ConfigError("unroll_length", str(u), "an integer >= 1 in on-policy mode")
        if self.mode == "on-policy" and u == 0:
            raise ConfigError("unroll_length", "0", "an integer >= 1 in on-policy mode")
        for name in ("num_iterations", "num_env_steps", "initial_collect_steps"):
            _check_int(name, getattr(self, name), 0)
        if self.num_iterations == 0 and self.num_env_steps == 0:
            raise ConfigError("num_iterations", 0, "num_iterations or num_env_steps > 0")
        if self.num_iterations == 0 and self.drain is not None and not any(self.drain.arrivals):
            # The run would never reach num_env_steps: nothing ever arrives.
            raise ConfigError(
                "drain.arrivals",
                self.drain.arrivals,
                "some arrival > 0 when the run ends by num_env_steps",
            )
        _check_int("num_updates_per_train_iter", self.num_updates_per_train_iter, 1)
        if self.mini_batch_size is not None:
            _check_int("mini_batch_size", self.mini_batch_size, 1)
        _check_int("mini_batch_length", self.mini_batch_length, 1)
        _check_int("capacity", self.capacity, 1)
        # Shortened whole-buffer chunks (alf-shortened-chunks) fit any ring: they are cut to
        # what the envs hold.
        shortened = self.whole_buffer and self.short_chunks == "shorten"
        if self.mini_batch_length > self.capacity and not shortened:
            raise ConfigError(
                "mini_batch_length", self.mini_batch_length, f"at most capacity ({self.capacity})"
            )
        if self.clear != "none" and not self.whole_buffer:
            raise ConfigError("clear", self.clear, "'none' unless whole_buffer is true")
        _literal("mode", self.mode, ("off-policy", "on-policy"))
        _literal("unroll_carry", self.unroll_carry, ("exact", "alf-float"))
        _literal("env_step_count", self.env_step_count, ("all", "non-first"))
        _literal("train_accounting", self.train_accounting, ("synced", "plain", "alf-pr1768-floor"))
        _literal("warmup_gate", self.warmup_gate, ("stored>=", "stored>", "size>=", "unrolled>="))
        _literal(
            "counter_mode",
            self.counter_mode,
            (
                "per-iteration",
                "per-mini-batch",
                "per-mini-batch-after",
                "per-iteration-after",
                "per-train-call-after",
            ),
        )
        _literal("replay_creation", self.replay_creation, ("eager", "lazy"))
        _literal("hook_gate", self.hook_gate, ("unrolled", "unroll-gate"))
        _literal("mini_batch_resize", self.mini_batch_resize, ("none", "alf"))
        _literal("short_chunks", self.short_chunks, ("drop", "shorten"))
        _literal("clear", self.clear, ("none", "all", "keep-one-step"))
        _literal("pending_at_end", self.pending_at_end, ("report", "flush"))


def _literal(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, " or ".join(repr(a) for a in allowed))
