"""skrl 2.1.1's ``SequentialTrainer`` driving a ``DQN`` agent on the toy env, recorded at its
seams (capability ``trainer`` of :class:`xpspec.adapters.skrl.SkrlAdapter`). Sources are cited
as ``file:function`` of the installed ``skrl`` package.

**What the loop does.** With one agent, ``SequentialTrainer.train`` runs the base loop
(``trainers/torch/base.py:Trainer.train``): for ``timestep`` in ``0 .. timesteps - 1`` it acts,
steps the vector env once, calls ``DQN.record_transition`` -- which applies
``cfg.rewards_shaper`` to the rewards and ``memory.add_samples`` one row of ``B`` transitions
``(observations, actions, rewards, next_observations, terminated)`` -- and then
``DQN.post_interaction``, which calls ``DQN.update`` when ``timestep >= learning_starts and
timestep % update_interval == 0`` (``agents/torch/dqn/dqn.py``). ``update`` makes
``gradient_steps`` gradient steps, each on ``memory.sample(names, batch_size)`` rows
(``memories/torch/random.py:RandomMemory.sample``: without replacement, skrl's default, a
``torch.randperm`` of the stored rows cut to ``batch_size``; with it, ``torch.randint``). The
toy vector env runs Gymnasium's default next-step autoreset, which skrl's wrapper passes through
(``envs/wrappers/torch/gymnasium_envs.py:GymnasiumWrapper``): the agent also acts on every
episode's LAST, whose row is the reset step's (reward 0, ``terminated`` False, the next
episode's FIRST as its next observation). With one env the loop "resets" after an episode
end, and the wrapper of a vector env returns the observation it last returned.

**Where the trace comes from.** ``env_step``: the wrapper's ``step``, with the time step each
env was in before it (its step type from the Gymnasium flags the wrapper returned with its
observation) and the action. ``store``: each ``memory.add_samples``, the row read back from the
memory's tensors and named by :class:`~xpspec.kit.steps.NextStepRows` from the env's previous
row: its reward, and its ``terminated`` flag (DQN's memory has no ``truncated`` tensor, so a
truncated LAST and the FIRST after it are stored as MID). ``train_call`` ``trained``: each
``DQN.update``; ``update``: each ``memory.sample`` in it, its sampled ``observations`` as windows
of one item. An iteration ends at the ``post_interaction`` of each timestep that
``update_interval`` admits (``timestep % update_interval == 0``, counted from 0): there
skrl updates once ``learning_starts`` is reached, and a timestep it admits without an update is
a ``warmup`` call; an update at any other timestep is an adapter error. Timesteps after the
last such one form a last iteration with no train call. The counter is the agent's
``_update_counter`` (gradient steps so far, which keys its target-network updates), not
declared as the ``counter`` observable; skrl has no ``after_update`` / ``after_train_iter``
hook (no hook event) and its Q-network policy is stateless (``policy_state`` is ``t``).
DQN's loss weighs every sampled row alike: the update's loss masks are ones the adapter
writes, and ``loss-mask`` is not declared.

**Knobs.** ``unroll_length`` ``u`` -> ``update_interval`` (integers only);
``num_updates_per_train_iter`` -> ``gradient_steps``; ``mini_batch_size`` -> ``batch_size``
(default ``B``); ``capacity`` -> ``RandomMemory(memory_size=capacity, num_envs=B)``;
``initial_collect_steps`` ``n`` -> ``learning_starts``, a count of timesteps: the memory holds
``(t + 1) * B`` items at the ``post_interaction`` of timestep ``t``, so ``learning_starts =
max(ceil(n / B) - 1, 0)`` opens the gate once ``n`` items are stored (gate ``stored>=``, and
``unrolled>=``, the same count here) and ``n // B`` once more than ``n`` are (``stored>``);
``num_iterations`` ``I`` -> ``timesteps = I * u``; ``num_env_steps`` ``N`` alone ->
``timesteps = ceil(N / B)`` (skrl's one budget, in vector steps). ``RewardTransform`` ->
``rewards_shaper`` (``r * scale + shift``, applied by ``DQN.record_transition`` before the
memory's ``add_samples``). ``random_timesteps`` and ``exploration_scheduler`` only choose
actions and ``target_update_interval`` only when the target network follows the Q-network
(every that many gradient steps): no spec knob maps onto them, and skrl's defaults stay. What
skrl cannot express raises ``Unsupported``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from skrl.agents.torch.dqn import DQN, DQN_CFG
from skrl.envs.wrappers.torch import Wrapper, wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import DeterministicMixin, Model
from skrl.trainers.torch import SequentialTrainer

from xpspec.kit.events import logged_rows, run_end
from xpspec.kit.items import decode_items, single_item_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.rewards import affine_reward
from xpspec.kit.steps import NextStepRows, Step, steps_from_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import (
    Event,
    IterationEnd,
    IterationStart,
    Trace,
    TrainCall,
    Update,
    Window,
)
from xpspec.refimpl.toy_envs.gym_vector import ToyVectorEnv, step_types_from_gym

__all__ = ["DQNPlan", "dqn_plan", "run_trainer"]

_VERSION = "2.1.1"
_SRC = f"skrl {_VERSION}"
_LINK = "https://github.com/Toni-SM/skrl/tree/2.1.1/skrl"
_DQN = "agents/torch/dqn/dqn.py"
_LOGGERS = ("skrl",)


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


def _as_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


# -- the configuration ----------------------------------------------------------------------------
@dataclass(frozen=True)
class DQNPlan:
    """skrl's own configuration of a trainer scenario: ``DQN_CFG`` fields, the memory's size
    and the trainer's ``timesteps`` (see the module docstring for the mapping)."""

    update_interval: int
    gradient_steps: int
    batch_size: int
    learning_starts: int
    memory_size: int
    timesteps: int
    shaping: tuple[float, float] | None = None
    """``(scale, shift)`` of the ``rewards_shaper``, or None."""


def dqn_plan(scenario: TrainerScenario) -> DQNPlan:
    """The configuration a skrl user gives ``scenario``; Unsupported for what skrl cannot
    express."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.mode != "off-policy":
        raise _unsupported(
            "on-policy mode: the trainer operation drives skrl's off-policy DQN, and skrl's "
            "PPO.update trains on rows (Memory.sample_all with sequence_length 1), never on "
            "the chunks of mini_batch_length items of the spec's on-policy mode",
            "agents/torch/ppo/ppo.py:PPO.update",
        )
    if cfg.drain is not None:
        raise _unsupported(
            "drain mode: Trainer.train steps the vector env synchronously, one step per timestep",
            "trainers/torch/base.py:Trainer.train",
        )
    if scenario.env.autoreset != "next-step" or scenario.env.goals:
        raise _unsupported(
            "same-step autoreset or goal observations: the trainer operation drives a "
            "next-step vector env of plain observations (Gymnasium's default)",
            "envs/wrappers/torch/gymnasium_envs.py:GymnasiumWrapper",
        )
    u = cfg.unroll_length
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: post_interaction updates when timestep % update_interval == 0, "
            "an integer number of timesteps",
            f"{_DQN}:DQN.post_interaction",
        )
    if cfg.whole_buffer:
        raise _unsupported(
            "whole-buffer training: DQN.update samples batch_size rows at random",
            f"{_DQN}:DQN.update",
        )
    if cfg.mini_batch_length != 1:
        raise _unsupported(
            f"mini_batch_length {cfg.mini_batch_length}: DQN.update samples single rows "
            "(memory.sample with sequence_length 1)",
            f"{_DQN}:DQN.update",
        )
    s = scenario.sampling
    if s.period != 1 or s.distribution != "uniform-windows":
        raise _unsupported(
            f"sampling with period {s.period} and distribution {s.distribution!r}: "
            "RandomMemory.sample draws any stored row uniformly, with no configuration of either",
            "memories/torch/random.py:RandomMemory.sample",
        )
    if cfg.warmup_gate == "size>=":
        raise _unsupported(
            "warm-up gate on the buffer size: post_interaction compares the timestep with "
            "learning_starts",
            f"{_DQN}:DQN.post_interaction",
        )
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise _unsupported(
            "an env-step budget of non-FIRST items: the trainer's timesteps count every "
            "vector step",
            "trainers/torch/base.py:Trainer.train",
        )
    n = int(u)
    if cfg.num_iterations:
        if cfg.num_env_steps and (cfg.num_iterations - 1) * n * b >= cfg.num_env_steps:
            raise _unsupported(
                "training iterations after the env-step budget: the trainer steps the env on "
                "every timestep, and timesteps is its only budget",
                "trainers/torch/base.py:Trainer.train",
            )
        timesteps = cfg.num_iterations * n
    else:
        timesteps = -(-cfg.num_env_steps // b)
    gate = cfg.initial_collect_steps
    starts = gate // b if cfg.warmup_gate == "stored>" else max(-(-gate // b) - 1, 0)
    return DQNPlan(
        update_interval=n,
        gradient_steps=cfg.num_updates_per_train_iter,
        batch_size=cfg.mini_batch_size or b,
        learning_starts=starts,
        memory_size=cfg.capacity,
        timesteps=timesteps,
        shaping=_shaping(scenario),
    )


def _shaping(scenario: TrainerScenario) -> tuple[float, float] | None:
    try:
        return affine_reward(scenario.preprocess)
    except TypeError as exc:
        raise _unsupported(
            f"{exc}: skrl's one store-time hook is DQN_CFG's rewards_shaper, which maps the "
            "rewards of a vector step; record_transition adds every env's transition in one "
            "memory row (memories/torch/base.py:Memory.add_samples) and the memory stores no "
            "step type, so nothing leaves out, holds back or retypes a time step",
            f"{_DQN}:DQN.record_transition",
        ) from None


# -- skrl's objects -------------------------------------------------------------------------------
class _QNetwork(DeterministicMixin, Model):
    """A linear Q-network (the spec is about experience, not learning)."""

    def __init__(self, observation_space: Any, action_space: Any) -> None:
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device="cpu"
        )
        DeterministicMixin.__init__(self)
        self.linear = torch.nn.Linear(self.num_observations, self.num_actions)

    def compute(
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return self.linear(inputs["observations"]), {}


class _Shaper:
    """``rewards_shaper(rewards, timestep, timesteps)``: ``rewards * scale + shift``."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale, self.shift = scale, shift

    def __call__(self, rewards: torch.Tensor, timestep: int, timesteps: int) -> torch.Tensor:
        return rewards * self.scale + self.shift


# -- the recording --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """A vector step's time steps (``env``) or a stored row (``store``), with the counter."""

    kind: Literal["env", "store"]
    steps: tuple[Step, ...]
    counter: int


@dataclass
class _Call:
    """One train call: its status, the items stored before it, the counter before and after
    it, and the windows of each update with the counter then."""

    status: Literal["trained", "warmup"]
    stored: int
    counter: int
    updates: list[tuple[tuple[Window, ...], int]] = field(default_factory=list)
    counter_after: int = 0


class _Run:
    """One ``SequentialTrainer.train`` of a DQN agent, recorded into a log (module docstring)."""

    def __init__(self, scenario: TrainerScenario, plan: DQNPlan, replacement: bool) -> None:
        self.scenario, self.plan = scenario, plan
        self.log: list[_Rows | _Call] = []
        self.stored = 0
        self.current: list[Step] | None = None
        self.gym_rows = np.ones(scenario.env.num_envs, dtype=bool)
        self.names = NextStepRows()
        self.call: _Call | None = None
        vector = ToyVectorEnv(scenario.env, scenario.seed, autoreset_mode=AutoresetMode.NEXT_STEP)
        self.env: Wrapper = wrap_env(vector, wrapper="gymnasium", verbose=False)
        self.memory = RandomMemory(
            memory_size=plan.memory_size,
            num_envs=scenario.env.num_envs,
            device="cpu",
            replacement=replacement,
        )
        space = (self.env.observation_space, self.env.action_space)
        self.agent = DQN(
            models={"q_network": _QNetwork(*space), "target_q_network": _QNetwork(*space)},
            memory=self.memory,
            observation_space=space[0],
            action_space=space[1],
            device="cpu",
            cfg=DQN_CFG(
                gradient_steps=plan.gradient_steps,
                batch_size=plan.batch_size,
                learning_starts=plan.learning_starts,
                update_interval=plan.update_interval,
                rewards_shaper=None if plan.shaping is None else _Shaper(*plan.shaping),
                experiment={"write_interval": 0, "checkpoint_interval": 0},
            ),
        )
        self._wrap()

    def counter(self) -> int:
        return int(getattr(self.agent, "_update_counter", 0))

    # the seams
    def _wrap(self) -> None:
        env, memory, agent = self.env, self.memory, self.agent
        step, reset = env.step, env.reset
        add, sample = memory.add_samples, memory.sample
        update, post = agent.update, agent.post_interaction

        def reset_env() -> Any:
            obs, infos = reset()
            if self.current is None:
                none = np.zeros(len(self.gym_rows), dtype=bool)
                self.current = self._named(obs, none.astype(np.float64), none, none)
            elif decode_items(_as_numpy(obs)) != [s.item for s in self.current]:
                raise AssertionError("the wrapper's reset returned a new observation mid-run")
            return obs, infos

        def step_env(actions: torch.Tensor) -> Any:
            assert self.current is not None, "a step before the trainer's reset"
            acts = _as_numpy(actions).reshape(-1).tolist()
            acted = tuple(
                Step(s.item, s.step_type, s.reward, s.discount, action=int(a))
                for s, a in zip(self.current, acts)
            )
            self.log.append(_Rows("env", acted, self.counter()))
            obs, reward, terminated, truncated, infos = step(actions)
            self.current = self._named(obs, reward, terminated, truncated)
            return obs, reward, terminated, truncated, infos

        def add_samples(**tensors: Any) -> None:
            add(**tensors)
            self.log.append(_Rows("store", self._stored_row(), self.counter()))

        def sample_rows(names: list[str], **kwargs: Any) -> Any:
            out = sample(names, **kwargs)
            if self.call is None:
                raise AssertionError("memory.sample outside DQN.update")
            observations = _as_numpy(out[0][names.index("observations")])
            windows = single_item_windows(decode_items(observations))
            self.call.updates.append((windows, self.counter()))
            return out

        def update_agent(*, timestep: int, timesteps: int) -> None:
            self.call = _Call("trained", self.stored, self.counter())
            update(timestep=timestep, timesteps=timesteps)

        def post_interaction(*, timestep: int, timesteps: int) -> None:
            self.call = None
            post(timestep=timestep, timesteps=timesteps)
            call = self.call
            admitted = timestep % self.plan.update_interval == 0
            if call is not None and not admitted:
                raise AssertionError(
                    f"DQN.update at timestep {timestep}, which update_interval "
                    f"{self.plan.update_interval} does not admit"
                )
            if call is None and admitted:
                call = _Call("warmup", self.stored, self.counter())
            if call is not None:
                call.counter_after = self.counter()
                self.log.append(call)
            self.call = None

        # this instance's methods only (its class and other instances keep theirs)
        setattr(env, "reset", reset_env)  # noqa: B010
        setattr(env, "step", step_env)  # noqa: B010
        setattr(memory, "add_samples", add_samples)  # noqa: B010
        setattr(memory, "sample", sample_rows)  # noqa: B010
        setattr(agent, "update", update_agent)  # noqa: B010
        setattr(agent, "post_interaction", post_interaction)  # noqa: B010

    def _named(self, obs: Any, reward: Any, terminated: Any, truncated: Any) -> list[Step]:
        """The time steps the wrapper returned: step types from the Gymnasium flags."""
        term = _as_numpy(terminated).reshape(-1).astype(bool)
        trunc = _as_numpy(truncated).reshape(-1).astype(bool)
        types = step_types_from_gym(term, trunc, self.gym_rows).tolist()
        rewards = _as_numpy(reward).reshape(-1).astype(np.float64).tolist()
        self.gym_rows = term | trunc
        discounts = np.where(term, 0.0, 1.0).tolist()
        return steps_from_columns(decode_items(_as_numpy(obs)), types, rewards, discounts)

    def _stored_row(self) -> tuple[Step, ...]:
        """The row ``add_samples`` has just written (index ``memory_index - 1``), read back
        from the memory's tensors and named from each env's previous row."""
        memory = self.memory
        row = (memory.memory_index - 1) % memory.memory_size
        names = memory.get_tensor_names()
        obs = _as_numpy(memory.get_tensor_by_name("observations")[row])
        rewards = _as_numpy(memory.get_tensor_by_name("rewards")[row]).reshape(-1)
        terminated = _as_numpy(memory.get_tensor_by_name("terminated")[row]).reshape(-1)
        truncated = (
            _as_numpy(memory.get_tensor_by_name("truncated")[row]).reshape(-1)
            if "truncated" in names
            else np.zeros_like(terminated)
        )
        steps = [self.names.row(item) for item in decode_items(obs)]
        for s, r, te, tr in zip(steps, rewards.tolist(), terminated.tolist(), truncated.tolist()):
            self.names.follow(s, r, bool(te), bool(tr))
        self.stored += len(steps)
        return tuple(steps)

    def run(self) -> Trace:
        trainer = SequentialTrainer(
            env=self.env,
            agents=self.agent,
            cfg={
                "timesteps": self.plan.timesteps,
                "headless": True,
                "disable_progressbar": True,
                "close_environment_at_exit": False,
            },
        )
        trainer.train()
        return Trace(tuple(self._events()), {"producer": producer("skrl")})

    def _events(self) -> list[Event]:
        """The log as trainer events: an iteration ends with each train call, or with the log."""
        events: list[Event] = []
        iteration = calls = env_steps = stored = 0
        body: list[_Rows] = []

        def close(call: _Call | None) -> None:
            nonlocal iteration, calls, env_steps, stored
            iteration += 1
            unrolled = sum(1 for r in body if r.kind == "env")
            start = body[0].counter if body else (call.counter if call else self.counter())
            events.append(IterationStart(iteration, start, unrolled))
            rows, unrolled_steps, stored_steps = logged_rows(iteration, body)
            events.extend(rows)
            env_steps += unrolled_steps
            stored += stored_steps
            end = self.counter()
            if call is not None:
                events.append(TrainCall(iteration, calls, call.counter, call.status, call.stored))
                for index, (windows, counter) in enumerate(call.updates):
                    masks = ((1,),) * len(windows)
                    events.append(Update(iteration, calls, index, counter, windows, masks))
                calls += 1
                end = call.counter_after
            events.append(IterationEnd(iteration, end, env_steps, stored, 0))
            body.clear()

        for entry in self.log:
            if isinstance(entry, _Rows):
                body.append(entry)
            else:
                close(entry)
        if body:
            close(None)
        policy = self.scenario.trainer.pending_at_end
        events.append(run_end(iteration, env_steps, policy))
        return events


def run_trainer(scenario: TrainerScenario, replacement: bool) -> Trace:
    """One ``SequentialTrainer.train`` of a DQN agent on ``scenario`` (module docstring), its
    memory sampling with or without ``replacement``."""
    plan = dqn_plan(scenario)
    with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
        return _Run(scenario, plan, replacement).run()
