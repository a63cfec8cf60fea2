"""Checks of time steps and episodes on unrolled items (clauses ``timestep.*``)."""

from __future__ import annotations

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.item_index import ItemBytes, Plans, shared_index
from xpspec.conformance.checks.views import (
    env_items,
    items_of,
    trainer_scenario,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Exclude, Hold, Item, RunEnd, Store, Trace

__all__ = [
    "check_auto_reset",
    "check_discount",
    "check_identity",
    "check_loss_mask",
    "check_state_reset",
    "check_step_types",
]


def check_identity(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.identity: every item an event names is one the toy env has, ``t`` within
    its episode's plan. The first bad item of the first kind (env steps, stores, exclusions,
    holds, the run end) that has one is reported; one pass finds them all."""
    sc = scenario
    columnar: tuple[type[EnvStep | Store | Exclude | Hold | RunEnd], ...]
    columnar = (EnvStep, Store, Exclude, Hold, RunEnd)
    first: dict[type, CheckFailure] = {}
    plans = Plans(sc.env, sc.seed)
    for e in trace.events:
        cls = type(e)
        if cls not in columnar or cls in first:
            continue
        kind = e.kind
        for env, episode, t in items_of(e):  # type: ignore[arg-type]
            if not 0 <= env < sc.env.num_envs:
                first[cls] = CheckFailure(
                    f"{kind} names env {env}", f"env in [0, {sc.env.num_envs})", env
                )
                break
            plan = plans(env, episode)
            if not 0 <= t <= plan.length:
                first[cls] = CheckFailure(
                    f"{kind} names item {(env, episode, t)}", f"t in [0, {plan.length}]", t
                )
                break
    for cls in columnar:  # kind by kind, as the events of each are reported
        if cls in first:
            raise first[cls]


def _want_type(t: int, length: int) -> StepType:
    return StepType.FIRST if t == 0 else StepType.LAST if t == length else StepType.MID


def check_step_types(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.step-types: each unrolled item's step type vs its episode's plan."""
    plans = Plans(scenario.env, scenario.seed)
    for it, (env, episode, t), e, i in env_items(trace):
        plan = plans(env, episode)
        want = _want_type(t, plan.length)
        if e.step_type[i] != want:
            raise CheckFailure(
                f"iteration {it}: step type of {(env, episode, t)} (episode of {plan.length} transitions)",
                want.name,
                StepType(e.step_type[i]).name if e.step_type[i] in (0, 1, 2) else e.step_type[i],
            )


def check_discount(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.discount: each unrolled item's discount vs how its episode ends (0 only at the
    LAST of a terminated episode), and its reward vs the toy env's (0 at FIRST). Judged apart
    from the step types, so a wrong discount leaves ``timestep.step-types`` its own verdict."""
    sc = scenario
    plans = Plans(sc.env, sc.seed)
    for it, (env, episode, t), e, i in env_items(trace):
        plan = plans(env, episode)
        want_type = _want_type(t, plan.length)
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
    """timestep.auto-reset: per env, the item after a LAST is FIRST of the next episode.
    Under the ``same-step`` variant (``env.autoreset``) LAST is never returned: the item after
    an episode's step ``L - 1`` is FIRST of the next episode."""
    same_step = scenario.env.autoreset == "same-step"
    previous: dict[int, tuple[Item, int]] = {}
    for it, item, e, i in env_items(trace):
        env = item[0]
        if env in previous:
            (p_env, p_ep, p_t), p_type = previous[env]
            ended = p_type == StepType.LAST or (
                same_step and p_t == scenario.env.episode(scenario.seed, env, p_ep).length - 1
            )
            want = (env, p_ep + 1, 0) if ended else (env, p_ep, p_t + 1)
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
    """timestep.state-reset: the toy policy's state counts steps since FIRST, so state == t.
    A trace whose header says ``stateless`` (a run of an adapter that declares ``state`` with a
    policy that holds none, and why) has no state to judge: not applicable."""
    stateless = trace.header.get("stateless")
    if stateless:
        raise Unsupported(f"the run's policy holds no state: {stateless}")
    for it, item, e, i in env_items(trace):
        if e.policy_state[i] != item[2]:
            raise CheckFailure(
                f"iteration {it}: policy state at {item}", item[2], e.policy_state[i]
            )


def check_loss_mask(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """timestep.loss-mask-last: loss mask is 0 exactly on padding and stored-LAST items."""
    sc = trainer_scenario(scenario)
    stored_type = ItemBytes(shared_index(sc.env, sc.seed))  # a byte per item ever stored
    for e in trace.events:
        if e.kind == "store":
            stored_type.set_all(items_of(e), e.step_type)
        elif e.kind == "update":
            for w, window in enumerate(e.windows):
                for j, item in enumerate(window):
                    masked_last = (
                        item is not None and stored_type.get(tuple(item)) == StepType.LAST  # type: ignore[arg-type]
                    )
                    want = 0 if item is None or (sc.trainer.mask_last and masked_last) else 1
                    if e.loss_mask[w][j] != want:
                        raise CheckFailure(
                            f"iteration {e.iteration}, update {e.index}: loss mask of {item}",
                            want,
                            e.loss_mask[w][j],
                        )
