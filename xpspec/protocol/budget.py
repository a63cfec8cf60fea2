"""The suite's resource budget: upper bounds on what one scenario may ask for.

A scenario is checked against :data:`BUDGET` when it is constructed (each scenario type's
``__post_init__`` calls :func:`check_budget`), before any env, buffer or trace exists, so a
scenario that would allocate gigabytes or run for hours is refused up front with one
:class:`BudgetError` naming the fields, the limit and what they ask for, e.g.
``env.num_envs × steps: expected at most 2,000,000 env steps in one scenario (the suite's
resource budget), got 10,000,000,000``.

What a run costs is bounded from the scenario's fields alone: env steps (vector steps times
``num_envs``), buffer items (``capacity`` times ``num_envs``, allocated up front by most
buffers), sampled items (windows times their length, every one of which lands in the trace)
and, for a train run, iterations. For a train run the vector steps and iterations are upper
bounds derived from ``num_iterations``, ``unroll_length``, the drain spec and
``num_env_steps`` (:func:`trainer_extent`). The limits are far above every catalogue
scenario, spec vector and generated scenario (the largest ask for a few thousand items).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Final

from xpspec.protocol.errors import ConfigError
from xpspec.protocol.schedule import CycleSchedule, FixedSchedule, RandomSchedule, Schedule

if TYPE_CHECKING:
    from xpspec.protocol.env_spec import EnvSpec
    from xpspec.protocol.scenario import Scenario, TrainerScenario

__all__ = ["BUDGET", "Budget", "BudgetError", "TrainerExtent", "check_budget", "trainer_extent"]


@dataclass(frozen=True)
class Budget:
    """Upper bounds on one scenario."""

    envs: int = 1_024
    """``env.num_envs``."""
    actions: int = 1_024
    """``env.num_actions``: frameworks size their policy's output by it."""
    env_steps: int = 2_000_000
    """Vector steps times ``num_envs``."""
    iterations: int = 100_000
    """Train iterations of a train run (each adds events even when it unrolls nothing)."""
    buffer_items: int = 2_000_000
    """``capacity`` times ``num_envs``."""
    sampled_items: int = 2_000_000
    """Items of every window sampled (or n-step window or minibatch row computed)."""
    learners: int = 1_024
    """``num_learners`` of a learner scenario (one shard each)."""


BUDGET: Final = Budget()
"""The budget the suite enforces."""


class BudgetError(ConfigError):
    """A scenario asks for more than the resource budget: ``field`` names the fields (or the
    product of fields) over the limit, ``value`` what they ask for."""

    def __init__(self, field: str, value: int, limit: int, unit: str, bound: bool = False) -> None:
        allowed = f"at most {limit:,} {unit} in one scenario (the suite's resource budget)"
        super().__init__(field, value, allowed)
        got = f"up to {value:,}" if bound else f"{value:,}"
        self.args = (f"{field}: expected {allowed}, got {got}",)


@dataclass(frozen=True)
class TrainerExtent:
    """Upper bounds on a train run, from its configuration alone; each ``*_by`` names the
    fields the bound follows from."""

    iterations: int
    iterations_by: str
    vector_steps: int
    vector_steps_by: str
    train_calls: int


def check_budget(scenario: Scenario, budget: Budget = BUDGET) -> None:
    """Raise :class:`BudgetError` if ``scenario`` asks for more than ``budget``."""
    env = scenario.env
    _limit("env.num_envs", env.num_envs, budget.envs, "envs")
    _limit("env.num_actions", env.num_actions, budget.actions, "actions")
    b = env.num_envs
    if scenario.kind == "trainer":
        _check_trainer(scenario, budget)
    elif scenario.kind == "env":
        _limit("env.num_envs × steps", b * scenario.steps, budget.env_steps, "env steps")
    elif scenario.kind == "replay":
        if scenario.priority is None:
            what, steps = "env.num_envs × fill_steps", scenario.fill_steps
        else:
            what = "env.num_envs × (fill_steps + priority.add_steps × draws)"
            steps = scenario.fill_steps + scenario.priority.add_steps * scenario.draws
        _limit(what, b * steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × capacity", b * scenario.capacity, budget.buffer_items, "buffer items"
        )
        sampled = scenario.batch_size * scenario.sampling.window_length * scenario.draws
        _limit(
            "batch_size × sampling.window_length × draws",
            sampled,
            budget.sampled_items,
            "sampled items",
        )
    elif scenario.kind == "relabel":
        _limit("env.num_envs × fill_steps", b * scenario.fill_steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × capacity", b * scenario.capacity, budget.buffer_items, "buffer items"
        )
        _limit(
            "batch_size × 2 × draws (transitions of two items)",
            scenario.batch_size * 2 * scenario.draws,
            budget.sampled_items,
            "sampled items",
        )
    elif scenario.kind == "recurrent":
        steps = b * scenario.steps
        _limit("env.num_envs × steps", steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × steps (every item stored)", steps, budget.buffer_items, "buffer items"
        )
        _limit(
            "batch_size × sequence_length × draws",
            scenario.batch_size * scenario.sequence_length * scenario.draws,
            budget.sampled_items,
            "sampled items",
        )
    elif scenario.kind == "stack":
        steps = b * scenario.steps
        _limit("env.num_envs × steps", steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × capacity", b * scenario.capacity, budget.buffer_items, "buffer items"
        )
        _limit(
            "env.num_envs × steps × num_frames (the rollout's stacks)",
            steps * scenario.num_frames,
            budget.sampled_items,
            "stacked frames",
        )
        _limit(
            "batch_size × num_frames × draws",
            scenario.batch_size * scenario.num_frames * scenario.draws,
            budget.sampled_items,
            "sampled items",
        )
    elif scenario.kind == "offline":
        steps = b * scenario.steps_per_update * scenario.updates
        _limit("env.num_envs × steps_per_update × updates", steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × capacity + len(offline)",
            b * scenario.capacity + len(scenario.offline),
            budget.buffer_items,
            "buffer items",
        )
        _limit(
            "(batch_size + len(offline)) × updates (each update's batch and offline buffer)",
            (scenario.batch_size + len(scenario.offline)) * scenario.updates,
            budget.sampled_items,
            "sampled items",
        )
    elif scenario.kind == "async":
        _limit(
            "len(arrivals) × fragment_length",
            len(scenario.arrivals) * scenario.fragment_length,
            budget.env_steps,
            "env steps",
        )
    elif scenario.kind == "learner":
        steps = b * scenario.steps
        _limit("env.num_envs × steps", steps, budget.env_steps, "env steps")
        _limit(
            "env.num_envs × steps × (nstep + 1)",
            steps * (scenario.nstep + 1),
            budget.sampled_items,
            "items of n-step windows",
        )
        _limit(
            "env.num_envs × steps × num_epochs",
            steps * scenario.num_epochs,
            budget.sampled_items,
            "minibatch rows",
        )
        _limit("num_learners", scenario.num_learners, budget.learners, "learners")


def _limit(field: str, value: int, limit: int, unit: str, bound: bool = False) -> None:
    if value > limit:
        raise BudgetError(field, value, limit, unit, bound)


def _check_trainer(sc: TrainerScenario, budget: Budget) -> None:
    cfg, b = sc.trainer, sc.env.num_envs
    extent = trainer_extent(sc)
    _limit(
        f"env.num_envs × {extent.vector_steps_by}",
        b * extent.vector_steps,
        budget.env_steps,
        "env steps",
        True,
    )
    derived = extent.iterations_by != "trainer.num_iterations"
    _limit(extent.iterations_by, extent.iterations, budget.iterations, "train iterations", derived)
    on_policy = cfg.mode == "on-policy"
    if not on_policy:  # on-policy training holds one unroll, not `capacity`
        _limit(
            "env.num_envs × trainer.capacity", b * cfg.capacity, budget.buffer_items, "buffer items"
        )
    updates = "trainer.num_updates_per_train_iter"
    if on_policy:
        ring = int(cfg.unroll_length) + max(cfg.mini_batch_length - 1, 1)
        per_call = ring * b
        per_call_by = "(trainer.unroll_length + max(mini_batch_length − 1, 1)) × env.num_envs"
    elif cfg.whole_buffer:
        per_call, per_call_by = cfg.capacity * b, "trainer.capacity × env.num_envs"
    else:
        size = cfg.mini_batch_size or b
        per_call = size * cfg.mini_batch_length
        per_call_by = (
            "trainer.mini_batch_size" if cfg.mini_batch_size else "env.num_envs"
        ) + " × trainer.mini_batch_length"
    _limit(
        f"{updates} × {per_call_by} per train call, over up to {extent.train_calls:,} train calls",
        extent.train_calls * cfg.num_updates_per_train_iter * per_call,
        budget.sampled_items,
        "sampled items",
        True,
    )


def trainer_extent(sc: TrainerScenario) -> TrainerExtent:
    """Upper bounds on the iterations, vector steps and train calls of a train run.

    With ``num_iterations`` the run has that many iterations, each unrolling at most
    ``ceil(unroll_length)`` vector steps (``drain.max_unroll_length`` in drain mode). With
    ``num_env_steps`` interaction stops once that many env steps are counted: per env, at
    least a known share of the vector steps counts (all of them under ``"all"``; under
    ``"non-first"`` every step but the first of each episode, see :func:`_counted_share`), so
    the vector steps needed, plus one iteration's unroll, bound the run; the iterations follow
    from the steps each iteration takes (``unroll_length``, or in drain mode one step per
    positive arrival per cycle of ``drain.arrivals``). Train calls: at most one per iteration
    under the synced and plain schedules; ``alf-pr1768-floor`` may owe one per stored vector
    step besides.
    """
    cfg, b = sc.trainer, sc.env.num_envs
    u, drain = cfg.unroll_length, cfg.drain
    if drain is not None:
        per_iteration = drain.max_unroll_length
        per_iteration_by = "trainer.drain.max_unroll_length"
    else:
        per_iteration, per_iteration_by = math.ceil(u), "ceil(trainer.unroll_length)"
    bounds: list[tuple[int, str, int, str]] = []
    if cfg.num_iterations:
        bounds.append(
            (
                cfg.num_iterations,
                "trainer.num_iterations",
                cfg.num_iterations * per_iteration,
                f"trainer.num_iterations × {per_iteration_by}",
            )
        )
    # Nothing ever arrives: the run ends by num_iterations (TrainerConfig requires it).
    stalls = drain is not None and not any(drain.arrivals)
    if cfg.num_env_steps and not stalls:
        share = sum(_counted_share(sc.env, e, cfg.env_step_count) for e in range(b))
        if not share:
            raise ConfigError(
                "trainer.env_step_count",
                cfg.env_step_count,
                "'all' when every episode is one step long under same-step auto-reset (no step "
                "would count toward num_env_steps, and the run would never end)",
            )
        needed = math.ceil(cfg.num_env_steps / share) + _slack(sc.env)
        if drain is not None:  # each positive arrival drains at least one vector step
            positive = sum(1 for a in drain.arrivals if a > 0)
            iterations = math.ceil(needed / positive) * len(drain.arrivals) + 1
        else:
            iterations = math.ceil(needed / u) + 1
        steps_by = "vector steps to count trainer.num_env_steps (plus one iteration's unroll)"
        bounds.append(
            (
                iterations,
                "iterations to count trainer.num_env_steps",
                needed + per_iteration,
                steps_by,
            )
        )
    iterations, iterations_by, steps, steps_by = min(bounds, key=lambda x: x[2])
    if len(bounds) == 2:  # the run ends at num_iterations; interaction may stop earlier
        iterations, iterations_by = cfg.num_iterations, "trainer.num_iterations"
    calls = iterations
    if cfg.train_accounting == "alf-pr1768-floor" and cfg.mode == "off-policy":
        calls += steps
    return TrainerExtent(iterations, iterations_by, steps, steps_by, calls)


def _counted_share(env: EnvSpec, e: int, count: str) -> Fraction:
    """A lower bound on the share of env ``e``'s vector steps that count toward
    ``num_env_steps``. Under ``"non-first"`` the first step of each episode does not count:
    an episode of ``L`` transitions is ``L + 1`` steps under next-step auto-reset (``L``
    count) and ``L`` steps under same-step auto-reset (``L - 1`` count). A random schedule
    whose episodes may be one step long under same-step auto-reset has no worst case; its
    mean length stands in."""
    if count == "all":
        return Fraction(1)
    schedule = env.schedule(e)
    first_only = 1 if env.autoreset == "same-step" else 0
    if isinstance(schedule, RandomSchedule):
        shortest = Fraction(schedule.min_length)
        if first_only and shortest == 1:
            shortest = Fraction(schedule.min_length + schedule.max_length, 2)
        return (shortest - first_only) / (shortest + 1 - first_only)
    lengths = _lengths(schedule)
    return Fraction(
        sum(lengths) - first_only * len(lengths), sum(lengths) + len(lengths) * (1 - first_only)
    )


def _lengths(schedule: Schedule) -> list[int]:
    if isinstance(schedule, FixedSchedule):
        return [schedule.length]
    if isinstance(schedule, CycleSchedule):
        return [p.length for p in schedule.episodes]
    return [schedule.min_length]


def _slack(env: EnvSpec) -> int:
    """Vector steps an env may take beyond its counted share: one episode, or one cycle."""
    longest = 0
    for schedule in env.schedules:
        if isinstance(schedule, RandomSchedule):
            longest = max(longest, schedule.max_length + 1)
        else:
            longest = max(longest, sum(_lengths(schedule)) + len(_lengths(schedule)))
    return longest
