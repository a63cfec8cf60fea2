"""AgileRL 2.58.0's on-policy training loop, ``training/train_on_policy.py:train_on_policy``,
run with a recurrent ``PPO`` on the toy env and recorded at its seams: the whole-buffer trainer
scenarios of :class:`xpspec.adapters.agilerl.AgileRLAdapter`, and with them the observable
``state`` (clause ``timestep.state-reset``). Sources are cited as ``file:function`` under the
installed ``agilerl`` package.

**What the loop does** (``train_on_policy``, one agent, one evolution chunk): it runs
``ceil(evo_steps / learn_step)`` times ``collect_rollouts_recurrent`` (picked for an agent with
``recurrent=True``) of ``n_steps = ceil(learn_step / num_envs)`` vector steps, then
``agent.learn()``; the env is reset by the chunk's first collection only, each later one goes
on from the observation, flags and hidden state the previous one left. A collection resets the
``RolloutBuffer`` (``rollouts/on_policy.py:_collect_rollouts``), hands ``get_action`` the
agent's hidden state, stores each vector step's ``B`` rows with the state it passed and sets
the state of the envs whose step returned ``terminated or truncated`` back to the initial one.
``PPO.learn`` trains on the whole rollout buffer by BPTT
(``algorithms/ppo.py:PPO._learn_from_rollout_buffer_bptt``): ``prepare_sequence_tensors``
(``components/rollout_buffer.py``) splits each env's rows after every ``done`` row, cuts each
piece of at least ``max_seq_len`` rows into chunks of ``max_seq_len`` and keeps a shorter piece
whole, padded; each of ``update_epochs`` epochs trains every sequence, in mini-batches of
``batch_size`` sequences.

**Spec mapping.** That is whole-buffer training (clause ``replay.whole-buffer``) of a ring of
``u`` items per env that every unroll refills: clearing ``all`` with a capacity of at least
``u``, or no clearing with a capacity of exactly ``u``, when ``T`` divides ``u`` (the rollout
buffer keeps no item for the next call). ``unroll_length`` ``u`` -> ``learn_step = u * B``
(``n_steps = u``); ``mini_batch_length`` ``T`` -> ``max_seq_len`` (``bptt_sequence_type
"chunked"``); ``num_updates_per_train_iter`` -> ``update_epochs``; ``mini_batch_size`` (default
``B``) -> ``batch_size``; ``num_iterations`` ``I`` -> ``max_steps = evo_steps = I * u * B``,
``num_env_steps`` ``N`` alone (a multiple of ``u * B``) -> ``max_steps = evo_steps = N``.
What AgileRL cannot express raises ``Unsupported`` (:func:`ppo_plan`).

**Where the trace comes from.** The actor's encoder is the recurrent row's
:class:`~xpspec.adapters.agilerl_recurrent.CountingEncoder`, whose state counts steps, handed
to ``PPO`` as ``actor_network`` and ``critic_network``. ``env_step``: per ``get_action`` the
loop made, the items the encoder received, the state it received (``policy_state``), the step
types from the flags the env returned before, the action the env got
(:func:`~xpspec.adapters.agilerl_recurrent.act_steps`). ``store``: each ``RolloutBuffer.add``,
the rows read back from the buffer at the position written, named from the env's previous row
(:class:`~xpspec.kit.steps.NextStepRows`; the buffer's ``done`` is ``terminated or
truncated``, one flag, read as the end of the episode GAE cuts at). An iteration ends with each
``agent.learn()`` the loop made (``train_call`` ``trained``); an ``update`` is each training
forward of the actor's encoder in it, its sequences as windows (``None`` where the
mini-batch's ``pad_mask`` flags padding) and, per position, 1 where the loss gradient reached
the step's output (:func:`~xpspec.adapters.agilerl_recurrent.sequences`). ``PPO`` keeps no
count of its updates: every counter is 0 (the adapter declares neither ``counter`` nor
``update-counter``). Nothing is held back (``pending`` 0). ``agent.finalize_training_step``
ends the recording (the loop's evaluation episodes after it are not training).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from agilerl.algorithms import PPO
from agilerl.algorithms import ppo as ppo_module
from agilerl.training.train_on_policy import train_on_policy

from xpspec.adapters.agilerl_recurrent import (
    CountingEncoder,
    EncoderCall,
    act_steps,
    counting_ppo,
    recorded_env,
    sequences,
)
from xpspec.kit.events import run_end, store
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.steps import NextStepRows, Step
from xpspec.protocol.adapter import Unsupported
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
    TrainSequence,
    Update,
)

__all__ = ["PPOPlan", "ppo_plan", "run_ppo_trainer"]

_VERSION = "2.58.0"
_SRC = f"agilerl {_VERSION}"
_LINK = "https://github.com/AgileRL/AgileRL/blob/v2.58.0/agilerl"
_LOOP = "training/train_on_policy.py:train_on_policy"
_COLLECT = "rollouts/on_policy.py:_collect_rollouts"
_PREPARE = "components/rollout_buffer.py:RolloutBuffer.prepare_sequence_tensors"


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


@dataclass(frozen=True)
class PPOPlan:
    """``train_on_policy`` and ``PPO`` arguments for a whole-buffer trainer scenario."""

    n_steps: int
    max_seq_len: int
    batch_size: int
    update_epochs: int
    max_steps: int


def _refuse_ring(scenario: TrainerScenario) -> None:
    """Unsupported unless the spec's ring is the rollout buffer every collection refills."""
    cfg = scenario.trainer
    u, t = int(cfg.unroll_length), cfg.mini_batch_length
    if cfg.mode == "on-policy":
        raise _unsupported(
            "on-policy mode: the spec's on-policy training keeps an unroll's newest item for "
            "the next call's first chunk (clearing keep-one-step), while every "
            "collect_rollouts_recurrent resets the RolloutBuffer and keeps no row",
            _COLLECT,
        )
    if not cfg.whole_buffer:
        raise _unsupported(
            "sampled mode: PPO.learn trains on every row of its rollout buffer, never on "
            "windows drawn at random",
            "algorithms/ppo.py:PPO._learn_from_rollout_buffer_bptt",
        )
    if cfg.clear == "keep-one-step":
        raise _unsupported(
            "clearing keep-one-step: every collect_rollouts_recurrent resets the RolloutBuffer "
            "(rollout_buffer.reset()) and keeps no row for the next learn",
            _COLLECT,
        )
    refilled = cfg.capacity >= u if cfg.clear == "all" else cfg.capacity == u
    if not refilled:
        raise _unsupported(
            f"a ring of {cfg.capacity} items per env with clearing {cfg.clear!r} and "
            f"unroll_length {u}: PPO.learn trains on the last rollout of n_steps rows per env "
            "and nothing else (the RolloutBuffer is reset by every collection)",
            _COLLECT,
        )
    if u % t:
        raise _unsupported(
            f"mini_batch_length {t} not dividing unroll_length {u}: the rollout buffer keeps "
            "no remainder for the next learn (it is reset by every collection)",
            _COLLECT,
        )


def ppo_plan(scenario: TrainerScenario) -> PPOPlan:
    """The configuration an AgileRL user gives ``scenario``; Unsupported for what
    ``train_on_policy`` with a recurrent PPO cannot express."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.drain is not None:
        raise _unsupported("drain mode: the loop steps its vector env synchronously", _COLLECT)
    if scenario.env.autoreset != "next-step":
        raise _unsupported(
            "same-step autoreset: utils/utils.py:make_vect_envs builds NEXT_STEP vector envs",
            "utils/utils.py:make_vect_envs",
        )
    if scenario.env.goals:
        raise _unsupported(
            "goal (Dict) observations: the counting encoder reads a flat observation", _COLLECT
        )
    u = cfg.unroll_length
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: a collection runs n_steps = ceil(learn_step / num_envs) "
            "whole vector steps",
            _LOOP,
        )
    _refuse_ring(scenario)
    n_steps, t = int(u), cfg.mini_batch_length
    if n_steps * b < 2:
        raise _unsupported(
            "a rollout buffer of one row: PPO.learn normalises the advantages of its rows by "
            "their Bessel-corrected std, NaN for one row, and the NaN loss leaves NaN weights",
            "algorithms/ppo.py:PPO._learn_from_rollout_buffer_bptt",
        )
    if cfg.initial_collect_steps:
        raise _unsupported(
            f"a warm-up of {cfg.initial_collect_steps} items: train_on_policy calls "
            "agent.learn() after every collection, with no learning delay",
            _LOOP,
        )
    if cfg.counter_mode not in ("per-iteration", "per-iteration-after"):
        raise _unsupported(
            f"counter_mode {cfg.counter_mode!r}: PPO counts no gradient steps, so it has no "
            "counter per mini-batch or train call",
            "algorithms/ppo.py:PPO.learn",
        )
    if scenario.checkpoint is not None:
        raise _unsupported(
            "a checkpoint spec: the recurrent PPO row drives no save_checkpoint / "
            "load_checkpoint (not yet; the DQN row does)",
            "algorithms/core/base.py:save_checkpoint",
        )
    if not isinstance(scenario.preprocess, Identity):
        raise _unsupported(
            f"preprocessing {type(scenario.preprocess).__name__}: train_on_policy takes no "
            "memory; collect_rollouts_recurrent adds every step to the agent's own "
            "RolloutBuffer",
            _COLLECT,
        )
    if cfg.num_env_steps and cfg.num_iterations:
        raise _unsupported(
            "num_iterations with a num_env_steps budget: train_on_policy has one budget, "
            "max_steps env steps, spent in whole collections",
            _LOOP,
        )
    if cfg.num_env_steps:
        if cfg.env_step_count != "all" or cfg.num_env_steps % (n_steps * b):
            raise _unsupported(
                f"an env-step budget of {cfg.num_env_steps} {cfg.env_step_count} items: the "
                f"loop runs whole collections of n_steps * num_envs = {n_steps * b} env steps",
                _LOOP,
            )
        max_steps = cfg.num_env_steps
    else:
        max_steps = cfg.num_iterations * n_steps * b
    return PPOPlan(
        n_steps=n_steps,
        max_seq_len=t,
        batch_size=cfg.mini_batch_size or b,
        update_epochs=cfg.num_updates_per_train_iter,
        max_steps=max_steps,
    )


# -- the recording --------------------------------------------------------------------------------
@dataclass
class _Log:
    """What the loop did, in order: the encoder calls of its ``get_action``s, the rows each
    ``RolloutBuffer.add`` wrote, and per ``agent.learn()`` the acts before it and its training
    forwards ``[start, end)`` with their ``pad_mask``s."""

    acts: list[EncoderCall] = field(default_factory=list)
    stores: list[tuple[Step, ...]] = field(default_factory=list)
    learns: list[tuple[int, int, int]] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    recording: bool = True


def _record(agent: PPO, encoder: CountingEncoder) -> _Log:
    """The agent's ``get_action``, ``learn`` and ``finalize_training_step`` and its rollout
    buffer's ``add``, recorded into a log (this instance's methods only)."""
    log, names = _Log(), NextStepRows()
    calls = encoder.recorder.calls
    get_action, learn, finalize = agent.get_action, agent.learn, agent.finalize_training_step
    buffer = agent.rollout_buffer
    add = buffer.add

    def act(*args: Any, **kwargs: Any) -> Any:
        start = len(calls)
        out = get_action(*args, **kwargs)
        if log.recording:
            if len(calls) != start + 1:
                raise RuntimeError(
                    f"PPO.get_action: expected one actor-encoder call, got {len(calls) - start}"
                )
            log.acts.append(calls[-1])
        return out

    def add_rows(*args: Any, **kwargs: Any) -> None:
        add(*args, **kwargs)
        row = buffer.pos - 1  # RolloutBuffer.add wrote at pos, then advanced it
        data = buffer.buffer
        items = decode_items(data["observations"][row].numpy())
        rewards, dones = data["rewards"][row].numpy(), data["dones"][row].numpy()
        steps = []
        for e, item in enumerate(items):
            step = names.row(item)
            # one flag, terminated or truncated: the episode end GAE cuts at
            names.follow(step, float(rewards[e]), bool(dones[e]))
            steps.append(step)
        log.stores.append(tuple(steps))

    def learn_all(*args: Any, **kwargs: Any) -> Any:
        encoder.recorder.phase = "train"
        start = len(calls)
        try:
            return learn(*args, **kwargs)
        finally:
            encoder.recorder.phase = "rollout"
            log.learns.append((len(log.acts), start, len(calls)))

    def finalize_step(num_steps: int) -> Any:
        log.recording = False
        return finalize(num_steps)

    setattr(agent, "get_action", act)  # noqa: B010
    setattr(agent, "learn", learn_all)  # noqa: B010
    setattr(agent, "finalize_training_step", finalize_step)  # noqa: B010
    setattr(buffer, "add", add_rows)  # noqa: B010
    return log


def _events(
    plan: PPOPlan,
    calls: list[EncoderCall],
    steps: list[Event],
    log: _Log,
    pending_at_end: str,
) -> list[Event]:
    """The trainer events: an iteration ends with each ``agent.learn()`` the loop made; its
    updates are the training forwards of the actor's encoder in it, however many (clause
    ``train.updates-per-call`` judges their count)."""
    if len(steps) != len(log.stores):
        raise RuntimeError(
            f"train_on_policy: expected one RolloutBuffer.add per act, got {len(steps)} acts "
            f"and {len(log.stores)} adds"
        )
    if len(log.learns) * plan.n_steps != len(steps):
        raise RuntimeError(
            f"train_on_policy: expected collections of {plan.n_steps} acts, got "
            f"{len(log.learns)} learns after {len(steps)} acts"
        )
    events: list[Event] = []
    iteration = env_steps = stored = draws = 0
    done = 0
    for call, (acted, start, end) in enumerate(log.learns):
        iteration += 1
        body: list[Event] = []
        for k in range(done, acted):
            step = steps[k]
            assert isinstance(step, EnvStep)
            body.append(replace(step, iteration=iteration))
            body.append(store(iteration, log.stores[k]))
        done = acted
        events.append(IterationStart(iteration, 0, sum(isinstance(e, EnvStep) for e in body)))
        events.extend(body)
        env_steps += sum(len(e.env) for e in body if isinstance(e, EnvStep))
        stored += sum(len(e.env) for e in body if isinstance(e, Store))
        events.append(TrainCall(iteration, call, 0, "trained", stored))
        forwards = sequences(calls[start:end], log.masks[draws : draws + end - start])
        for index, group in enumerate(_by_draw(forwards)):
            windows = tuple(s.items for s in group)
            masks = tuple(s.loss_mask for s in group)
            events.append(Update(iteration, call, index, 0, windows, masks))
        draws += end - start
        events.append(IterationEnd(iteration, 0, env_steps, stored, 0))
    if done != len(steps) or draws != len(log.masks):
        raise RuntimeError(
            f"train_on_policy: {len(steps) - done} acts after the last learn and "
            f"{len(log.masks) - draws} mini-batches outside a learn"
        )
    events.append(run_end(iteration, env_steps, pending_at_end))
    return events


def _by_draw(forwards: list[Event]) -> list[list[TrainSequence]]:
    """The sequences of each training forward (one mini-batch), in order."""
    groups: dict[int, list[TrainSequence]] = {}
    for e in forwards:
        assert isinstance(e, TrainSequence)
        groups.setdefault(e.draw, []).append(e)
    return [groups[d] for d in sorted(groups)]


def run_ppo_trainer(scenario: TrainerScenario) -> Trace:
    """One ``train_on_policy`` of a recurrent ``PPO`` with the counting encoder on
    ``scenario`` (module docstring)."""
    plan = ppo_plan(scenario)
    b = scenario.env.num_envs
    with seeded_quiet(scenario.seed, ("torch", "numpy")):
        env, env_log = recorded_env(scenario.env, scenario.seed)
        agent, encoder = counting_ppo(
            env, b, plan.n_steps, plan.batch_size, plan.update_epochs, plan.max_seq_len
        )
        log = _record(agent, encoder)
        from_tensordict = ppo_module.RolloutSequenceMinibatch.from_tensordict

        def recorded_batch(td: Any) -> Any:
            out = from_tensordict(td)
            log.masks.append(out.pad_mask.detach().numpy().copy())
            return out

        ppo_module.RolloutSequenceMinibatch.from_tensordict = recorded_batch
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                train_on_policy(
                    env,
                    "xpspec-toy",
                    "PPO",
                    [agent],
                    max_steps=plan.max_steps,
                    evo_steps=plan.max_steps,
                    eval_steps=1,
                    verbose=False,
                )
        finally:
            ppo_module.RolloutSequenceMinibatch.from_tensordict = from_tensordict
    steps = act_steps(log.acts, env_log)
    events = _events(plan, encoder.recorder.calls, steps, log, scenario.trainer.pending_at_end)
    return Trace(tuple(events), {"producer": producer("agilerl")})
