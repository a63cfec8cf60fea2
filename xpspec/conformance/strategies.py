"""Hypothesis strategies for scenarios, exported for third parties, and the ``ci`` and
``thorough`` profiles.

:func:`trainer_scenarios` and :func:`relabel_scenarios` draw from the whole generated space
of their kind; their keyword arguments pin parts of it. :func:`scenarios_for` gives each
trainer and relabel check a strategy whose every scenario the check concerns
(``check.applies``) by construction, so no example is filtered away."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from xpspec.conformance.checks.base import Check
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import DrainSpec, TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    AsyncScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    Scenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule, RandomSchedule

__all__ = [
    "async_scenarios",
    "env_specs",
    "offline_scenarios",
    "preprocessor_specs",
    "preprocessors",
    "prioritized_scenarios",
    "recurrent_scenarios",
    "relabel_scenarios",
    "scenarios_for",
    "stack_scenarios",
    "trainer_configs",
    "trainer_scenarios",
    "unroll_lengths",
]

settings.register_profile(
    "ci", max_examples=12, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)
# Both profiles are derandomised: a run draws the same examples every time (reproducible).
settings.register_profile(
    "thorough",
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_plans = st.builds(EpisodePlan, st.integers(1, 6), st.sampled_from(["terminated", "truncated"]))
schedules = st.one_of(
    st.builds(FixedSchedule, st.integers(1, 6), st.sampled_from(["terminated", "truncated"])),
    st.builds(
        CycleSchedule, st.lists(_plans, min_size=1, max_size=4).map(tuple), st.integers(0, 3)
    ),
    st.builds(RandomSchedule, st.integers(1, 3), st.integers(3, 7), st.integers(0, 1000)),
)


@st.composite
def env_specs(draw: st.DrawFn, max_envs: int = 4) -> EnvSpec:
    b = draw(st.integers(1, max_envs))
    shared = draw(st.booleans())
    scheds = (draw(schedules),) if shared else tuple(draw(schedules) for _ in range(b))
    return EnvSpec(b, scheds, num_tasks=draw(st.integers(1, 3)))


unroll_lengths = st.builds(Fraction, st.integers(1, 8), st.integers(1, 5))

# One strategy per preprocessor type, in the order `preprocessors` has always drawn them.
_PREPROCESSORS: dict[type, st.SearchStrategy[PreprocessorSpec]] = {
    Identity: st.just(Identity()),
    RewardTransform: st.builds(
        RewardTransform,
        st.sampled_from([Fraction(1), Fraction(1, 2), Fraction(-2)]),
        st.sampled_from([Fraction(0), Fraction(1)]),
    ),
    OverwriteStepType: st.builds(
        OverwriteStepType,
        st.sampled_from(["MID", "LAST"]),
        st.sampled_from(["truncated-last", "t"]),
        st.integers(0, 3),
    ),
    ExcludeSteps: st.integers(1, 4).flatmap(
        lambda m: st.builds(ExcludeSteps, st.just(m), st.integers(0, m - 1))
    ),
    ExcludeEpisodes: st.integers(1, 3).flatmap(
        lambda m: st.builds(ExcludeEpisodes, st.just(m), st.integers(0, m - 1))
    ),
    ExcludeTasks: st.builds(ExcludeTasks, st.just((1,))),
    EpisodeDelayed: st.builds(EpisodeDelayed, st.sampled_from(["all", "success", "failure"])),
}


def preprocessor_specs(*types: type) -> st.SearchStrategy[PreprocessorSpec]:
    """The generated preprocessors of the given spec types (every type when none is given)."""
    unknown = [t.__name__ for t in types if t not in _PREPROCESSORS]
    if unknown:
        raise ValueError(f"no strategy for preprocessor types {unknown}")
    return st.one_of(*(s for t, s in _PREPROCESSORS.items() if not types or t in types))


preprocessors = preprocessor_specs()

_ACCOUNTING = ["synced", "synced", "plain", "alf-pr1768-floor"]  # synced half the time
_CLEAR_MODES = {None: ["none", "all", "keep-one-step"], True: ["all", "keep-one-step"]}


def trainer_configs(
    *,
    drain: bool | None = None,
    whole_buffer: bool | None = None,
    clear: bool | None = None,
    env_step_budget: bool | None = None,
    synced: bool | None = None,
    counter_mode: str | None = None,
) -> st.SearchStrategy[TrainerConfig]:
    """Valid trainer configs. Each knob left ``None`` is drawn; ``True``/``False`` pins it:
    ``drain`` (drain mode, ``unroll_length == 0``), ``whole_buffer``, ``clear`` (a clearing
    whole buffer: ``clear != "none"``), ``env_step_budget`` (``num_env_steps > 0``),
    ``synced`` (``train_accounting == "synced"``) and ``counter_mode`` (the mode itself)."""
    if clear and whole_buffer is False:
        raise ValueError("clear=True needs a whole buffer (whole_buffer=True or None)")
    modes = ["per-iteration", "per-mini-batch"] if counter_mode is None else [counter_mode]
    return _trainer_configs(
        drain, True if clear else whole_buffer, clear, env_step_budget, synced, modes
    )


def _either(draw: st.DrawFn, pinned: bool | None) -> bool:
    """``pinned``, or a draw that is true a quarter of the time."""
    return pinned if pinned is not None else draw(st.booleans()) and draw(st.booleans())


@st.composite
def _trainer_configs(
    draw: st.DrawFn,
    drain: bool | None,
    whole_buffer: bool | None,
    clear: bool | None,
    env_step_budget: bool | None,
    synced: bool | None,
    counter_modes: list[str],
) -> TrainerConfig:
    drains = _either(draw, drain)
    whole = _either(draw, whole_buffer)
    mbl = draw(st.integers(1, 3))
    capacity = draw(st.integers(mbl, 12))
    accounting = {True: ["synced"], False: _ACCOUNTING[2:], None: _ACCOUNTING}[synced]
    knobs: dict[str, Any] = dict(
        num_iterations=draw(st.integers(1, 16)),
        num_updates_per_train_iter=draw(st.integers(1, 3)),
        mini_batch_size=draw(st.one_of(st.none(), st.integers(1, 5))),
        mini_batch_length=mbl,
        capacity=capacity,
        initial_collect_steps=draw(st.integers(0, 12)),
        counter_mode=draw(st.sampled_from(counter_modes)),
        pending_at_end=draw(st.sampled_from(["report", "flush"])),
        train_accounting=draw(st.sampled_from(accounting)),
    )
    if drains:
        arrivals = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=4)))
        knobs.update(
            unroll_length=0,
            drain=DrainSpec(arrivals, draw(st.integers(1, 4)), draw(st.integers(1, 8))),
        )
    else:
        knobs.update(unroll_length=draw(unroll_lengths))
    if whole:
        knobs.update(whole_buffer=True)
        if clear is not False:
            knobs.update(clear=draw(st.sampled_from(_CLEAR_MODES[clear])))
    if draw(st.booleans()) if env_step_budget is None else env_step_budget:
        # An env-step budget, alone or with an iteration count (interaction then stops early).
        stalls = drains and not any(knobs["drain"].arrivals)  # could never reach the budget
        knobs.update(
            num_env_steps=draw(st.integers(1, 40)),
            num_iterations=knobs["num_iterations"]
            if stalls
            else draw(st.sampled_from([0, knobs["num_iterations"]])),
            env_step_count=draw(st.sampled_from(["all", "non-first"])),
        )
    return TrainerConfig(**knobs)


def trainer_scenarios(
    *,
    preprocessors: st.SearchStrategy[PreprocessorSpec] = preprocessors,
    periodic: bool | None = None,
    drain: bool | None = None,
    whole_buffer: bool | None = None,
    clear: bool | None = None,
    env_step_budget: bool | None = None,
    synced: bool | None = None,
    counter_mode: str | None = None,
    checkpoint: bool = False,
) -> st.SearchStrategy[TrainerScenario]:
    """Valid trainer scenarios; with no arguments, the whole generated space of runs without
    a checkpoint. ``periodic`` pins whether sampling starts lie on a grid of period > 1;
    ``checkpoint`` draws runs of at least 2 iterations saved after one of them and resumed
    (clauses ``resume.*``; no drain mode, no env-step budget); the other knobs are those of
    :func:`trainer_configs`, and ``preprocessors`` draws the preprocessing."""
    configs = trainer_configs(
        drain=False if checkpoint else drain,
        whole_buffer=whole_buffer,
        clear=clear,
        env_step_budget=False if checkpoint else env_step_budget,
        synced=synced,
        counter_mode=counter_mode,
    )
    periods = {True: st.integers(2, 3), False: st.just(1), None: st.integers(1, 3)}[periodic]
    return _trainer_scenarios(configs, preprocessors, periods, checkpoint)


@st.composite
def _trainer_scenarios(
    draw: st.DrawFn,
    configs: st.SearchStrategy[TrainerConfig],
    preprocessors: st.SearchStrategy[PreprocessorSpec],
    periods: st.SearchStrategy[int],
    checkpointed: bool = False,
) -> TrainerScenario:
    env = draw(env_specs())
    cfg = draw(configs)
    checkpoint = None
    if checkpointed:
        cfg = replace(cfg, num_iterations=max(cfg.num_iterations, 2))
        checkpoint = CheckpointSpec(draw(st.integers(1, cfg.num_iterations - 1)))
    sampling = SamplingSpec(
        window_length=cfg.mini_batch_length,
        boundary=draw(st.sampled_from(["cross", "forbid", "pad"])),
        period=draw(periods),
        anchor=draw(st.sampled_from(["absolute", "oldest"])),
    )
    return TrainerScenario(
        env, cfg, draw(preprocessors), sampling, draw(st.integers(0, 3)), checkpoint=checkpoint
    )


_EXCLUSIONS = (ExcludeSteps, ExcludeEpisodes, ExcludeTasks)
# The part of the space each trainer check concerns, as keyword arguments of
# `trainer_scenarios` that make its `applies` predicate hold by construction. Generated
# scenarios are all off-policy, exactly carried and eagerly buffered, so the predicates'
# clauses on `mode`, `unroll_carry` and `replay_creation` hold everywhere.
_SYNCED: dict[str, Any] = dict(synced=True)
_CONCERNS: dict[str, dict[str, Any]] = {
    "fractional-schedule": dict(drain=False),
    "drain": dict(drain=True),
    "num-env-steps": dict(env_step_budget=True),
    "budget-whole-unroll": dict(env_step_budget=True),  # exactly carried: see above
    "budget-run-end": dict(env_step_budget=True),
    "identity-is-plain": dict(preprocessors=preprocessor_specs(Identity)),
    "delayed-per-env": dict(preprocessors=preprocessor_specs(EpisodeDelayed)),
    "release-order": dict(preprocessors=preprocessor_specs(EpisodeDelayed)),
    "exclusion": dict(preprocessors=preprocessor_specs(*_EXCLUSIONS)),
    "transform": dict(preprocessors=preprocessor_specs(RewardTransform, OverwriteStepType)),
    "synced-schedule": _SYNCED,
    "identity-plain-calls": dict(
        _SYNCED, preprocessors=preprocessor_specs(Identity, RewardTransform, OverwriteStepType)
    ),
    "excluded-earn-nothing": dict(_SYNCED, preprocessors=preprocessor_specs(*_EXCLUSIONS)),
    "utd-bound": dict(_SYNCED, drain=False, env_step_budget=False),
    "bounded-lag": _SYNCED,
    "warmup-gate": {},  # off-policy: every generated scenario is
    "boundary-policy": dict(whole_buffer=False),
    "period-anchor": dict(whole_buffer=False, periodic=True),
    "whole-buffer": dict(whole_buffer=True),
    "clear": dict(clear=True),
    "global-counter": dict(counter_mode="per-iteration"),
    "update-counter": dict(counter_mode="per-mini-batch"),
    # checkpoint and resume
    "resume-env": dict(checkpoint=True),
    "resume-buffer": dict(checkpoint=True),
    "resume-accounting": dict(checkpoint=True),
    "resume-rng": dict(checkpoint=True),
    "resume-same-trace": dict(checkpoint=True),
}
# Checks whose predicate holds on every trainer scenario: the whole space.
_EVERYWHERE = frozenset(
    {
        "item-identity",
        "step-types",
        "discount",
        "auto-reset",
        "state-reset",
        "loss-mask",
        "all-envs-step",
        "conservation",
        "store-order",
        "pending-at-end",
        "updates-per-call",
        "insufficient-data",
        "idle-calls",
        "after-update",
        "after-train-iter",
        "windows-valid",
        "exact-schedule",
        "exact-stores",
        "deterministic-trainer",
    }
)


# -- relabel scenarios ------------------------------------------------------------------------
_STRATEGIES = ("future", "final", "episode")
# Ratios SB3 (1 - 1/(n + 1)) and Tianshou (1 - 1/future_k) can express, and 0 and 1.
_RATIOS = (Fraction(0), Fraction(1, 2), Fraction(2, 3), Fraction(3, 4), Fraction(1))


def _schedules(min_length: int) -> st.SearchStrategy[Any]:
    """Episode schedules whose episodes have at least ``min_length`` transitions."""
    ending = st.sampled_from(["terminated", "truncated"])
    lengths = st.integers(min_length, 6)
    plans = st.builds(EpisodePlan, lengths, ending)
    return st.one_of(
        st.builds(FixedSchedule, lengths, ending),
        st.builds(
            CycleSchedule, st.lists(plans, min_size=1, max_size=4).map(tuple), st.integers(0, 3)
        ),
        st.builds(
            RandomSchedule, st.integers(min_length, 3), st.integers(3, 7), st.integers(0, 1000)
        ),
    )


def _step_in_episode(env: EnvSpec, seed: int, e: int, n: int) -> tuple[int, int]:
    """``(t, L)`` of the ``n``-th time step of env ``e`` (next-step auto-reset: episode ``k``
    takes ``L + 1`` steps, ``t = 0 .. L``)."""
    k = 0
    while True:
        length = env.episode(seed, e, k).length
        if n <= length:
            return n, length
        n -= length + 1
        k += 1


def _is_mid(t: int, length: int) -> bool:
    return 0 < t < length


def relabel_scenarios(
    *,
    strategy: str | tuple[str, ...] | None = None,
    ratio: Fraction | None = None,
    in_progress: bool | None = None,
) -> st.SearchStrategy[RelabelScenario]:
    """Valid relabel scenarios of a goal env (1 to 3 envs, short fills and rings, a few
    small batches); with no arguments, the whole generated space. ``strategy`` (a name or a
    tuple of names) and ``ratio`` pin those fields; ``in_progress=True`` pins a sample drawn while env 0's episode is in
    progress: its newest stored step is a MID, so the buffer holds transitions of an episode
    that has not ended (unpinned, fills end anywhere and such samples are common)."""
    if in_progress is False:
        raise ValueError("in_progress pins samples during an episode (True) or nothing (None)")
    names = (strategy,) if isinstance(strategy, str) else strategy or _STRATEGIES
    strategies = st.sampled_from(names)
    ratios = st.just(Fraction(ratio)) if ratio is not None else st.sampled_from(_RATIOS)
    return _relabel_scenarios(strategies, ratios, bool(in_progress))


@st.composite
def _relabel_scenarios(
    draw: st.DrawFn,
    strategies: st.SearchStrategy[str],
    ratios: st.SearchStrategy[Fraction],
    in_progress: bool,
) -> RelabelScenario:
    b = draw(st.integers(1, 3))
    schedules = _schedules(2 if in_progress else 1)
    shared = draw(st.booleans())
    scheds = (draw(schedules),) if shared else tuple(draw(schedules) for _ in range(b))
    env = EnvSpec(b, scheds, goals=True)
    seed = draw(st.integers(0, 3))
    if in_progress:
        # Fills whose last step of env 0 is a MID (every episode has one: L >= 2).
        fills = [n for n in range(3, 31) if _is_mid(*_step_in_episode(env, seed, 0, n - 1))]
        fill_steps = draw(st.sampled_from(fills))
    else:
        fill_steps = draw(st.integers(2, 30))
    return RelabelScenario(
        env,
        fill_steps=fill_steps,
        capacity=draw(st.integers(2, 24)),
        strategy=draw(strategies),  # type: ignore[arg-type]
        ratio=draw(ratios),
        batch_size=draw(st.integers(1, 32)),
        draws=draw(st.integers(1, 6)),
        seed=seed,
    )


# The part of the relabel space each relabel check concerns (keyword arguments of
# `relabel_scenarios`); the others concern every relabel scenario.
_RELABEL_CONCERNS: dict[str, dict[str, Any]] = {
    "relabel-uniform-goals": dict(strategy=("future", "episode")),
    "relabel-placement": dict(strategy="final", ratio=Fraction(1)),
}
_RELABEL_EVERYWHERE = frozenset(
    {
        "relabel-same-episode",
        "relabel-eligible",
        "relabel-reward",
        "relabel-ratio",
        "deterministic-relabel",
    }
)


def _relabel_strategy(check: Check) -> st.SearchStrategy[RelabelScenario]:
    if check.name in _RELABEL_CONCERNS:
        return relabel_scenarios(**_RELABEL_CONCERNS[check.name])
    if check.name in _RELABEL_EVERYWHERE:
        return relabel_scenarios()
    raise ValueError(
        f"no scenario strategy for relabel check {check.name!r}: add the keyword arguments of "
        "relabel_scenarios() that satisfy its applies() predicate to _RELABEL_CONCERNS in "
        "xpspec.conformance.strategies (or its name to _RELABEL_EVERYWHERE if it always holds)"
    )


# -- prioritized replay scenarios -------------------------------------------------------------
@st.composite
def prioritized_scenarios(draw: st.DrawFn) -> ReplayScenario:
    """Valid prioritized replay scenarios (clauses ``priority.*``): 1 to 3 envs, short fills
    (empty ones included) into small rings, windows of 1 to 3 items under ``cross`` or
    ``forbid``, a few small batches, vector steps stored between the draws, and every knob
    of the priority spec."""
    env = draw(env_specs(max_envs=3))
    capacity = draw(st.integers(2, 10))
    length = draw(st.sampled_from([1, 1, 2, 3]))
    return ReplayScenario(
        env,
        capacity=max(capacity, length),
        fill_steps=draw(st.integers(0, 12)),
        sampling=SamplingSpec(
            window_length=length, boundary=draw(st.sampled_from(["cross", "forbid"]))
        ),
        batch_size=draw(st.integers(1, 32)),
        draws=draw(st.integers(1, 8)),
        seed=draw(st.integers(0, 3)),
        priority=PrioritySpec(
            alpha=draw(st.sampled_from([Fraction(1, 2), Fraction(3, 5), Fraction(1)])),
            beta=draw(st.sampled_from([Fraction(0), Fraction(2, 5), Fraction(1)])),
            eps=draw(st.sampled_from([Fraction(0), Fraction(1, 100)])),
            levels=draw(st.integers(1, 5)),
            add_steps=draw(st.integers(0, 3)),
            weights=draw(st.sampled_from(["buffer-max", "batch-max"])),
        ),
    )


# -- recurrent scenarios ----------------------------------------------------------------------
def recurrent_scenarios(
    boundary: str | None = None, min_length: int = 1
) -> st.SearchStrategy[RecurrentScenario]:
    """Valid recurrent scenarios (clauses ``recurrent.*``): 1 to 3 envs, short rollouts,
    sequences of ``min_length`` to 6 positions with any burn-in below their length, either
    boundary (``boundary`` pins one) and either initial state, a few small batches."""
    boundaries = st.just(boundary) if boundary is not None else st.sampled_from(["cross", "pad"])
    return _recurrent_scenarios(boundaries, st.integers(min_length, 6))


@st.composite
def _recurrent_scenarios(
    draw: st.DrawFn, boundaries: st.SearchStrategy[str], lengths: st.SearchStrategy[int]
) -> RecurrentScenario:
    env = draw(env_specs(max_envs=3))
    length = draw(lengths)
    boundary = draw(boundaries)
    low = length if boundary == "cross" else 1
    return RecurrentScenario(
        env,
        steps=draw(st.integers(low, 16)),
        sequence_length=length,
        burn_in=draw(st.integers(0, length - 1)),
        boundary=boundary,  # type: ignore[arg-type]
        batch_size=draw(st.integers(1, 8)),
        draws=draw(st.integers(1, 3)),
        seed=draw(st.integers(0, 3)),
        initial_state=draw(st.sampled_from(["stored", "zeros"])),
    )


# The part of the recurrent space each recurrent check concerns or mostly finds something to
# judge in (keyword arguments of `recurrent_scenarios`): a FIRST inside a sequence needs a
# crossing boundary and some length, a carry a second position, padding the pad boundary.
_RECURRENT_CONCERNS: dict[str, dict[str, Any]] = {
    "recurrent-reset-at-first": dict(boundary="cross", min_length=4),
    "recurrent-carry": dict(min_length=2),
    "recurrent-padding": dict(boundary="pad"),
}


# -- frame stacking scenarios -----------------------------------------------------------------
@st.composite
def stack_scenarios(draw: st.DrawFn, min_steps: int = 1) -> StackScenario:
    """Valid stack scenarios (clauses ``stack.*``): 1 to 3 envs, rollouts of ``min_steps`` to
    20 vector steps, stacks of 1 to 5 frames, either padding, rings from the stack's width to
    twice it (short ones evict frames of the oldest held items' stacks), a few small
    batches."""
    k = draw(st.integers(1, 5))
    return StackScenario(
        draw(env_specs(max_envs=3)),
        steps=draw(st.integers(min_steps, 20)),
        num_frames=k,
        padding=draw(st.sampled_from(["repeat-first", "zeros"])),
        capacity=draw(st.integers(k, 2 * k + 2)),
        batch_size=draw(st.integers(1, 8)),
        draws=draw(st.integers(1, 3)),
        seed=draw(st.integers(0, 3)),
    )


# Stack checks that mostly find something to judge only in longer rollouts: an episode that
# follows another (no-cross), a held item whose stack lost frames (earliest-ignored).
_STACK_CONCERNS: dict[str, dict[str, Any]] = {
    "stack-no-cross": dict(min_steps=8),
    "stack-earliest-ignored": dict(min_steps=10),
}


# -- offline and hybrid replay scenarios --------------------------------------------------------
@st.composite
def offline_scenarios(draw: st.DrawFn, min_online_weight: int = 0) -> OfflineScenario:
    """Valid offline scenarios (clauses ``offline.*``): 1 to 3 online envs, an offline
    dataset of 1 to 12 distinct items at 1 or 2 env indices past them, 1 to 6 updates of 1 to
    3 vector steps each, batches of 1 to 9 items, weights 0 to 3 (not both 0), an online part
    from update 0 every update (the mixers without a schedule) or later and sparser (ALF's
    knobs), online rings of 1 to 6 items per env."""
    env = draw(env_specs(max_envs=3))
    b = env.num_envs
    offline = draw(
        st.lists(
            st.tuples(st.integers(b, b + 1), st.integers(0, 2), st.integers(0, 5)),
            min_size=1,
            max_size=12,
            unique=True,
        )
    )
    online_weight = draw(st.integers(min_online_weight, 3))
    offline_weight = draw(st.integers(0 if online_weight else 1, 3))
    scheduled = draw(st.booleans())
    return OfflineScenario(
        env,
        tuple(offline),
        updates=draw(st.integers(1, 6)),
        steps_per_update=draw(st.integers(1, 3)),
        batch_size=draw(st.integers(1, 9)),
        offline_weight=offline_weight,
        online_weight=online_weight,
        online_after=draw(st.integers(0, 3)) if scheduled else 0,
        online_every=draw(st.integers(1, 3)) if scheduled else 1,
        capacity=draw(st.integers(1, 6)),
        seed=draw(st.integers(0, 3)),
    )


# -- asynchronous actors scenarios -------------------------------------------------------------
@st.composite
def async_scenarios(
    draw: st.DrawFn, min_arrivals: int = 1, bounded: bool | None = None
) -> AsyncScenario:
    """Valid async scenarios (clauses ``async.*``): 1 to 3 actors, fragments of 1 to 5 items,
    ``min_arrivals`` to 12 arrivals in any order, no lag bound or one of 0 to 3 updates
    (``bounded`` forces one or the other), 2 or 3 actions."""
    env = draw(env_specs(max_envs=3))
    env = EnvSpec(env.num_envs, env.schedules, num_actions=draw(st.integers(2, 3)))
    arrivals = draw(st.lists(st.integers(0, env.num_envs - 1), min_size=min_arrivals, max_size=12))
    with_bound = draw(st.booleans()) if bounded is None else bounded
    return AsyncScenario(
        env,
        fragment_length=draw(st.integers(1, 5)),
        arrivals=tuple(arrivals),
        max_lag=draw(st.integers(0, 3)) if with_bound else None,
        seed=draw(st.integers(0, 3)),
    )


# The schedule is seen only through the online part: scenarios where it has items.
_OFFLINE_CONCERNS: dict[str, dict[str, Any]] = {
    "offline-online-schedule": dict(min_online_weight=1),
}
# Async checks that judge something only with a lag bound (lag-bounded) or once the learner
# has updated before an arrival (version-recorded, behaviour-logits).
_ASYNC_CONCERNS: dict[str, dict[str, Any]] = {
    "async-lag-bounded": dict(min_arrivals=3, bounded=True),
    "async-version-recorded": dict(min_arrivals=3),
    "async-behaviour-logits": dict(min_arrivals=3),
}


def scenarios_for(check: Check) -> st.SearchStrategy[Scenario]:
    """Scenarios that ``check`` (a trainer, relabel, priority or recurrent check) concerns, and only
    those: every one satisfies ``check.applies``, with the full diversity of the generated
    space within it. Raises ``ValueError`` for a check without a strategy here (rather than
    filter examples)."""
    if check.capability == "relabel":
        return _relabel_strategy(check)
    if check.capability == "replay" and "priorities" in check.requires:
        return prioritized_scenarios()
    if check.capability == "recurrent":
        return recurrent_scenarios(**_RECURRENT_CONCERNS.get(check.name, {}))
    if check.capability == "stack":
        return stack_scenarios(**_STACK_CONCERNS.get(check.name, {}))
    if check.capability == "offline":
        return offline_scenarios(**_OFFLINE_CONCERNS.get(check.name, {}))
    if check.capability == "async":
        return async_scenarios(**_ASYNC_CONCERNS.get(check.name, {}))
    if check.capability != "trainer":
        raise ValueError(
            f"check {check.name!r} is neither a trainer nor a relabel check ({check.capability!r})"
        )
    if check.name in _CONCERNS:
        return trainer_scenarios(**_CONCERNS[check.name])
    if check.name in _EVERYWHERE:
        return trainer_scenarios()
    raise ValueError(
        f"no scenario strategy for trainer check {check.name!r}: add the keyword arguments of "
        "trainer_scenarios() that satisfy its applies() predicate to _CONCERNS in "
        "xpspec.conformance.strategies (or its name to _EVERYWHERE if the predicate always holds)"
    )
