"""skrl 2.1.1's ``SequentialTrainer`` driving ``PPO_RNN`` on the toy env, recorded at its seams:
the whole-buffer trainer scenarios of :class:`xpspec.adapters.skrl.SkrlAdapter`, and with them
the observable ``state`` (clause ``timestep.state-reset``). Sources are cited as
``file:function`` of the installed ``skrl`` package.

**What the loop does.** With one agent, ``SequentialTrainer.train`` runs the base loop
(``trainers/torch/base.py:Trainer.train``): for ``timestep`` in ``0 .. timesteps - 1`` it
calls ``PPO_RNN.act``, which hands the policy the agent's current RNN states and keeps the
states it returns, steps the vector env once, calls ``PPO_RNN.record_transition`` -- which
applies ``cfg.rewards_shaper``, writes one row of ``B`` transitions with the RNN states
(``memory.add_samples``) and zeroes the states of the envs whose transition was
``terminated | truncated`` -- and then ``PPO_RNN.post_interaction``, which counts the
timestep in ``_rollout`` and calls ``PPO_RNN.update`` when ``_rollout % rollouts == 0``
(``agents/torch/ppo/ppo_rnn.py``). The memory holds ``rollouts`` rows, which
``Memory.add_samples`` overwrites from row 0 on in every rollout
(``memories/torch/base.py``). ``update`` cuts the whole memory with
``Memory.sample_all(names, mini_batches, sequence_length=T)``: with ``T > 1`` every env's rows
in time order, env after env, split by ``np.array_split`` into ``mini_batches`` parts; with
``T = 1`` the rows in memory order, cut into ``mini_batches`` slices of ``rows //
mini_batches`` rows. Each of ``learning_epochs`` epochs trains every part, the policy viewing
a part as sequences of ``T`` rows (:class:`~xpspec.adapters.skrl_recurrent.CountingPolicy`,
skrl's documented recurrent model with a counting RNN).

**Spec mapping.** That is whole-buffer training (clause ``replay.whole-buffer``) of a ring of
``u`` items per env that each unroll refills: clearing ``all`` with a capacity of at least
``u``, or no clearing with a capacity of exactly ``u``, when ``T`` divides ``u`` (no item is
left for the next call). ``unroll_length`` ``u`` -> ``rollouts = memory_size = u``;
``mini_batch_length`` -> the model's ``sequence_length``; ``num_updates_per_train_iter`` ->
``learning_epochs``; ``mini_batch_size`` ``M`` (default ``B``) -> ``mini_batches = n / M`` of
the ``n = u * B / T`` chunks; ``num_iterations`` ``I`` -> ``timesteps = I * u``;
``num_env_steps`` ``N`` alone -> ``timesteps = ceil(N / B)``; ``RewardTransform`` ->
``rewards_shaper``. What skrl cannot express raises ``Unsupported``: on-policy mode (the
spec's keeps one step, skrl's memory none), clearing ``keep-one-step``, a ring other than the
rollout, ``T`` not dividing ``u``, a chunk count ``M`` does not divide, a warm-up (PPO has no
``learning_starts``), counters per mini-batch or train call (``PPO_RNN`` counts no gradient
steps: ``_rollout`` counts timesteps), other preprocessing, drain mode, same-step autoreset
and checkpoints (this row drives no ``Agent.save``).

**Where the trace comes from.** ``env_step``: per timestep, the items the policy's rollout
forward received and the state the counting RNN received with them (``policy_state``), the
step types from the flags the wrapped env returned, the action skrl passed to the env
(:func:`~xpspec.adapters.skrl_recurrent.rollout_steps`). ``store``: each ``add_samples``, the
row read back from the memory's tensors and named by :class:`~xpspec.kit.steps.NextStepRows`
from the env's previous row (``terminated`` and ``truncated`` are both stored). An iteration
ends with each ``PPO_RNN.update`` skrl made (``train_call`` ``trained``); timesteps after the
last one form a last iteration with no train call. ``update``: per training forward of the
policy, its sequences as windows and, per position, 1 where the gradient of skrl's loss reached
the position's logits. ``PPO_RNN`` keeps no count of its updates: every counter is 0 (the
``counter`` and ``update-counter`` observables are not judged on these scenarios). skrl holds
no item back (``pending`` 0, ``run_end`` holds nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from skrl.agents.torch.ppo import PPO_CFG, PPO_RNN
from skrl.memories.torch import RandomMemory

from xpspec.adapters.skrl_recurrent import (
    CountingPolicy,
    ToyValue,
    forward_windows,
    recorded_env,
    rollout_steps,
    toy_observations,
)
from xpspec.adapters.skrl_trainer import Shaper, as_numpy, headless_trainer, unsupported
from xpspec.kit.events import run_end, store
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.rewards import affine_reward
from xpspec.kit.steps import NextStepRows, Step
from xpspec.protocol.preprocessors import Identity
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import (
    EnvStep,
    Event,
    IterationEnd,
    IterationStart,
    Store,
    Trace,
    TrainCall,
    Update,
)

__all__ = ["PPOPlan", "ppo_plan", "run_ppo_trainer"]

_PPO_RNN = "agents/torch/ppo/ppo_rnn.py"
_SAMPLE_ALL = "memories/torch/base.py:Memory.sample_all"
_LOGGERS = ("skrl",)
_ENTROPY_SCALE = 0.01
"""So that the gradient of the loss reaches every position it covers (as in the recurrent
row)."""


# -- the configuration ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PPOPlan:
    """skrl's own configuration of a whole-buffer trainer scenario (module docstring)."""

    rollouts: int
    sequence_length: int
    mini_batches: int
    learning_epochs: int
    timesteps: int
    shaping: tuple[float, float] | None = None
    """``(scale, shift)`` of the ``rewards_shaper``, or None."""


def _refuse_ring(scenario: TrainerScenario) -> None:
    """Unsupported unless the spec's ring is the rollout memory skrl refills (module
    docstring)."""
    cfg = scenario.trainer
    u, t = int(cfg.unroll_length), cfg.mini_batch_length
    if cfg.mode == "on-policy":
        raise unsupported(
            "on-policy mode: the spec's on-policy training keeps an unroll's newest item for "
            "the next call's first chunk (clearing keep-one-step), while PPO_RNN's memory of "
            "rollouts rows is rewritten from row 0 by every rollout and keeps none",
            "memories/torch/base.py:Memory.add_samples",
        )
    if not cfg.whole_buffer:
        raise unsupported(
            "sampled mode: PPO_RNN.update trains on every row of its memory "
            "(Memory.sample_all), never on mini-batches drawn at random",
            f"{_PPO_RNN}:PPO_RNN.update",
        )
    if cfg.clear == "keep-one-step":
        raise unsupported(
            "clearing keep-one-step: PPO_RNN's memory of rollouts rows is rewritten from row 0 "
            "by every rollout and keeps no row for the next update",
            "memories/torch/base.py:Memory.add_samples",
        )
    # clearing all keeps nothing of a ring of u or more; no clearing needs a ring of exactly u
    refilled = cfg.capacity >= u if cfg.clear == "all" else cfg.capacity == u
    if not refilled:
        raise unsupported(
            f"a ring of {cfg.capacity} items per env with clearing {cfg.clear!r} and "
            f"unroll_length {u}: PPO_RNN.update trains on all memory_size rows "
            "(Memory.sample_all) every rollouts timesteps, and compute_gae reads them as one "
            "rollout in time order that ends at the current next observation, so its memory "
            "holds the last rollout and nothing else (memory_size = rollouts)",
            f"{_PPO_RNN}:compute_gae",
        )
    if u % t:
        raise unsupported(
            f"mini_batch_length {t} not dividing unroll_length {u}: the documented recurrent "
            "model views a mini-batch as (-1, sequence_length) rows of one env, and the "
            "memory keeps no remainder for the next update",
            _SAMPLE_ALL,
        )


def ppo_plan(scenario: TrainerScenario) -> PPOPlan:
    """The configuration a skrl user gives ``scenario``; Unsupported for what skrl cannot
    express."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.drain is not None:
        raise unsupported(
            "drain mode: Trainer.train steps the vector env synchronously, one step per timestep",
            "trainers/torch/base.py:Trainer.train",
        )
    if scenario.env.autoreset != "next-step":
        raise unsupported(
            "same-step autoreset: the trainer operation drives Gymnasium's default next-step "
            "vector env",
            "envs/wrappers/torch/gymnasium_envs.py:GymnasiumWrapper",
        )
    u = cfg.unroll_length
    if u.denominator != 1:
        raise unsupported(
            f"unroll_length {u}: PPO_RNN.post_interaction updates when _rollout % rollouts "
            "== 0, an integer number of timesteps",
            f"{_PPO_RNN}:PPO_RNN.post_interaction",
        )
    _refuse_ring(scenario)
    rollouts, t = int(u), cfg.mini_batch_length
    if rollouts * b < 2:
        raise unsupported(
            "a memory of one row: compute_gae normalises the advantages by their "
            "Bessel-corrected std, NaN for one row",
            f"{_PPO_RNN}:compute_gae",
        )
    chunks, size = rollouts * b // t, cfg.mini_batch_size or b
    if chunks % size:
        raise unsupported(
            f"mini_batch_size {size} of {chunks} chunks: mini_batches is a count, and "
            "Memory.sample_all cuts the rows into parts that differ by a row (T > 1, "
            "np.array_split) or drops the remainder (T = 1) unless they divide evenly",
            _SAMPLE_ALL,
        )
    if cfg.initial_collect_steps:
        raise unsupported(
            f"a warm-up of {cfg.initial_collect_steps} items: PPO_CFG has no learning_starts, "
            "PPO_RNN.post_interaction updates after every rollout",
            f"{_PPO_RNN}:PPO_RNN.post_interaction",
        )
    if cfg.counter_mode not in ("per-iteration", "per-iteration-after"):
        raise unsupported(
            f"counter_mode {cfg.counter_mode!r}: PPO_RNN counts no gradient steps (its "
            "_rollout counts timesteps), so it has no counter per mini-batch or train call",
            f"{_PPO_RNN}:PPO_RNN.post_interaction",
        )
    if scenario.checkpoint is not None:
        raise unsupported(
            "a checkpoint spec: the PPO_RNN row drives no Agent.save / load (not yet; "
            "the DQN row does)",
            "agents/torch/base.py:Agent.save",
        )
    p = scenario.preprocess
    try:
        shaping = affine_reward(p)
    except TypeError:
        shaping = None
        if not isinstance(p, Identity):
            raise unsupported(
                f"preprocessing {type(p).__name__}: PPO_CFG's rewards_shaper maps the rewards "
                "of a vector step, and PPO_RNN.record_transition hands the memory every "
                "transition (no user memory drives the PPO_RNN row)",
                f"{_PPO_RNN}:PPO_RNN.record_transition",
            ) from None
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise unsupported(
            "an env-step budget of non-FIRST items: the trainer's timesteps count every "
            "vector step",
            "trainers/torch/base.py:Trainer.train",
        )
    if cfg.num_iterations:
        if cfg.num_env_steps and (cfg.num_iterations - 1) * rollouts * b >= cfg.num_env_steps:
            raise unsupported(
                "training iterations after the env-step budget: the trainer steps the env on "
                "every timestep, and timesteps is its only budget",
                "trainers/torch/base.py:Trainer.train",
            )
        timesteps = cfg.num_iterations * rollouts
    else:
        timesteps = -(-cfg.num_env_steps // b)
    return PPOPlan(
        rollouts=rollouts,
        sequence_length=t,
        mini_batches=chunks // size,
        learning_epochs=cfg.num_updates_per_train_iter,
        timesteps=timesteps,
        shaping=shaping,
    )


# -- the recording --------------------------------------------------------------------------------
@dataclass
class _Log:
    """Per ``add_samples`` the rows it wrote; per ``PPO_RNN.update`` the timestep it ran at and
    the training forwards of the policy it made (``[start, end)``)."""

    stores: list[tuple[Step, ...]] = field(default_factory=list)
    updates: list[tuple[int, int, int]] = field(default_factory=list)


def _record(policy: CountingPolicy, memory: RandomMemory, agent: PPO_RNN) -> _Log:
    """The memory's ``add_samples`` and the agent's ``update``, recorded into a log (this
    instance's methods only)."""
    log, names = _Log(), NextStepRows()
    add, update = memory.add_samples, agent.update

    def value(name: str, row: int) -> np.ndarray:
        return as_numpy(memory.get_tensor_by_name(name)[row])

    def add_samples(**tensors: Any) -> None:
        add(**tensors)
        row = (memory.memory_index - 1) % memory.memory_size
        observations = toy_observations(policy, memory.get_tensor_by_name("observations")[row])
        items = decode_items(as_numpy(observations))
        rewards, terminated = value("rewards", row), value("terminated", row)
        truncated = value("truncated", row)
        steps = []
        for e, item in enumerate(items):
            step = names.row(item)
            names.follow(step, float(rewards[e, 0]), bool(terminated[e, 0]), bool(truncated[e, 0]))
            steps.append(step)
        log.stores.append(tuple(steps))

    def update_agent(*, timestep: int, timesteps: int) -> None:
        start = len(policy.log.training)
        update(timestep=timestep, timesteps=timesteps)
        log.updates.append((timestep, start, len(policy.log.training)))

    setattr(memory, "add_samples", add_samples)  # noqa: B010
    setattr(agent, "update", update_agent)  # noqa: B010
    return log


def _events(
    plan: PPOPlan, policy: CountingPolicy, steps: list[EnvStep], log: _Log, pending_at_end: str
) -> list[Event]:
    """The trainer events: an iteration ends with each update skrl made, or with the run; a
    call's updates are the training forwards skrl made in it, however many (clause
    ``train.updates-per-call`` judges their count)."""
    if len(steps) != plan.timesteps or len(log.stores) != plan.timesteps:
        raise RuntimeError(
            f"SequentialTrainer.train: expected {plan.timesteps} acts and stores, got "
            f"{len(steps)} acts and {len(log.stores)} stores"
        )
    ends = {timestep: (start, end) for timestep, start, end in log.updates}
    events: list[Event] = []
    body: list[Event] = []
    iteration = calls = env_steps = stored = draws = 0
    for timestep, (step, rows) in enumerate(zip(steps, log.stores, strict=True)):
        body.append(replace(step, iteration=iteration + 1))
        body.append(store(iteration + 1, rows))
        if timestep not in ends and timestep != plan.timesteps - 1:
            continue
        iteration += 1
        unrolled = sum(1 for e in body if isinstance(e, EnvStep))
        events.append(IterationStart(iteration, 0, unrolled))
        events.extend(body)
        env_steps += sum(len(e.env) for e in body if isinstance(e, EnvStep))
        stored += sum(len(e.env) for e in body if isinstance(e, Store))
        body = []
        if timestep in ends:
            start, end = ends[timestep]
            events.append(TrainCall(iteration, calls, 0, "trained", stored))
            for index, forward in enumerate(policy.log.training[start:end]):
                windows, masks = forward_windows(forward, plan.sequence_length, draws)
                events.append(Update(iteration, calls, index, 0, windows, masks))
                draws += 1
            calls += 1
        events.append(IterationEnd(iteration, 0, env_steps, stored, 0))
    events.append(run_end(iteration, env_steps, pending_at_end))
    return events


def run_ppo_trainer(scenario: TrainerScenario, time_limit_bootstrap: bool = False) -> Trace:
    """One ``SequentialTrainer.train`` of ``PPO_RNN`` with the counting policy on ``scenario``
    (module docstring), ``time_limit_bootstrap`` from the adapter's configuration."""
    plan = ppo_plan(scenario)
    with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
        env, env_log = recorded_env(scenario.env, scenario.seed)
        policy = CountingPolicy(env, plan.sequence_length)
        memory = RandomMemory(memory_size=plan.rollouts, num_envs=env.num_envs, device="cpu")
        agent = PPO_RNN(
            models={"policy": policy, "value": ToyValue(env)},
            memory=memory,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
            cfg=PPO_CFG(
                rollouts=plan.rollouts,
                learning_epochs=plan.learning_epochs,
                mini_batches=plan.mini_batches,
                entropy_loss_scale=_ENTROPY_SCALE,
                time_limit_bootstrap=time_limit_bootstrap,
                rewards_shaper=None if plan.shaping is None else Shaper(*plan.shaping),
                experiment={"write_interval": 0, "checkpoint_interval": 0},
            ),
        )
        log = _record(policy, memory, agent)
        headless_trainer(env, agent, plan.timesteps).train()
    steps = [e for e in rollout_steps(policy, env_log) if isinstance(e, EnvStep)]
    events = _events(plan, policy, steps, log, scenario.trainer.pending_at_end)
    return Trace(tuple(events), {"producer": producer("skrl")})
