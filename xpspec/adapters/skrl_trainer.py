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
truncated LAST and the FIRST after it are stored as MID). With a user's memory (below) one
``store`` event holds the rows that one ``add_samples`` call wrote, each read back at the
``(memory_index, env_index)`` it was written to, after that call's ``hold`` and ``exclude``
events. ``train_call`` ``trained``: each
``DQN.update``; ``update``: each ``memory.sample`` in it, its sampled ``observations`` as windows
of one item. An iteration ends at the ``post_interaction`` of each timestep that
``update_interval`` admits (``timestep % update_interval == 0``, counted from 0): there
skrl updates once ``learning_starts`` is reached, and a timestep it admits without an update is
a ``warmup`` call; an update at any other timestep is an adapter error. Timesteps after the
last such one form a last iteration with no train call. The counter is the agent's
``_update_counter`` (gradient steps so far, which keys its target-network updates), declared as
the ``update-counter`` observable and not as ``counter`` (skrl counts no iterations): an
update carries the value after its gradient step, which that step's target-network schedule
reads; skrl has no ``after_update`` / ``after_train_iter``
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
memory's ``add_samples``). ``ExcludeSteps``, ``ExcludeEpisodes`` and ``EpisodeDelayed`` ->
the agent's ``memory`` is a user's ``RandomMemory`` subclass whose ``add_samples`` leaves out
or holds back rows (:mod:`xpspec.adapters.skrl_preprocess`; clauses
``preprocess.exclusion``, ``preprocess.delayed-per-env``, ``preprocess.pending-at-end``):
what it decides is recorded as it decides it, what it stored is read back from skrl's
tensors, the ``run_end``'s pending items are the rows it still holds, and under
``pending_at_end`` ``flush`` its ``flush`` adds them after ``train``. It adds rows one at a
time, which works with several envs as long as nothing is evicted (the memory is then one ring
in write order, not a ring per env). DQN updates at every admitted timestep whatever was
stored (the ``plain`` accounting), and an update on a memory that has stored nothing raises
in skrl: the run stops there (header ``stopped``). Refused: ``ExcludeTasks`` (the memory gets
no ``infos``), ``OverwriteStepType`` (it stores no step type), eviction with several envs,
and a warm-up with such a memory (``learning_starts`` counts timesteps, not stored rows). ``random_timesteps`` and ``exploration_scheduler`` only choose
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

from xpspec.adapters.skrl_preprocess import (
    EpisodeDelayedMemory,
    ExcludingMemory,
    HookedMemory,
    Row,
)
from xpspec.kit.events import env_step, exclude, hold, run_end, store
from xpspec.kit.exclusion import EXCLUSIONS
from xpspec.kit.items import decode_items, single_item_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.rewards import affine_reward
from xpspec.kit.steps import NextStepRows, Step, steps_from_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeTasks,
    Identity,
    RewardTransform,
)
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import (
    Event,
    Item,
    IterationEnd,
    IterationStart,
    Trace,
    TrainCall,
    Update,
    Window,
)
from xpspec.refimpl.toy_envs.gym_vector import ToyVectorEnv, step_types_from_gym

__all__ = [
    "STATELESS",
    "DQNPlan",
    "Shaper",
    "as_numpy",
    "dqn_plan",
    "headless_trainer",
    "run_trainer",
    "unsupported",
]

_VERSION = "2.1.1"
_SRC = f"skrl {_VERSION}"
_LINK = "https://github.com/Toni-SM/skrl/tree/2.1.1/skrl"
_DQN = "agents/torch/dqn/dqn.py"
_LOGGERS = ("skrl",)
_UNSETTLED = -1
"""The counter of an update whose gradient step has not finished yet."""
_EMPTY_MEMORY = (
    # DQN.update's track_data of torch.max over the targets of an empty batch (replacement=False)
    "Expected reduction dim to be specified for input.numel() == 0",
    # RandomMemory.sample's torch.randint(0, 0, ...) (replacement=True)
    "but got from=0 >= to=0",
)


STATELESS = (
    f"DQN.act hands its Q-network the observations alone ({_SRC}, {_DQN}), so the DQN row's "
    "policy acts with no state; skrl's off-policy recurrent agent SAC_RNN "
    "(agents/torch/sac/sac_rnn.py) is not driven yet, and whole-buffer scenarios run "
    "PPO_RNN with a counting recurrent policy"
)
"""The DQN row's trace header ``stateless``: clause ``timestep.state-reset`` has no state to
judge on its runs."""


def headless_trainer(env: Any, agent: Any, timesteps: int) -> SequentialTrainer:
    """skrl's ``SequentialTrainer`` for ``timesteps`` steps, with no progress bar, leaving the
    env open (the adapters read the env after training)."""
    return SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": timesteps,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        },
    )


def unsupported(reason: str, where: str) -> Unsupported:
    """``Unsupported`` with ``reason``, citing ``where`` (``file:function`` under skrl's package)."""
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


def as_numpy(x: Any) -> np.ndarray:
    """A tensor or array-like as a NumPy array (on the CPU)."""
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
    memory: type[HookedMemory] | None = None
    """The user's ``RandomMemory`` subclass that preprocesses (None: skrl's ``RandomMemory``)."""
    memory_kwargs: tuple[tuple[str, Any], ...] = ()
    """Its keyword arguments beyond ``RandomMemory``'s."""


def dqn_plan(scenario: TrainerScenario) -> DQNPlan:
    """The configuration a skrl user gives ``scenario``; Unsupported for what skrl cannot
    express."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.mode != "off-policy":
        raise unsupported(
            "on-policy mode: the trainer operation drives skrl's off-policy DQN, and skrl's "
            "PPO.update trains on rows (Memory.sample_all with sequence_length 1), never on "
            "the chunks of mini_batch_length items of the spec's on-policy mode",
            "agents/torch/ppo/ppo.py:PPO.update",
        )
    if cfg.drain is not None:
        raise unsupported(
            "drain mode: Trainer.train steps the vector env synchronously, one step per timestep",
            "trainers/torch/base.py:Trainer.train",
        )
    if scenario.env.autoreset != "next-step" or scenario.env.goals:
        raise unsupported(
            "same-step autoreset or goal observations: the trainer operation drives a "
            "next-step vector env of plain observations (Gymnasium's default)",
            "envs/wrappers/torch/gymnasium_envs.py:GymnasiumWrapper",
        )
    u = cfg.unroll_length
    if u.denominator != 1:
        raise unsupported(
            f"unroll_length {u}: post_interaction updates when timestep % update_interval == 0, "
            "an integer number of timesteps",
            f"{_DQN}:DQN.post_interaction",
        )
    if cfg.whole_buffer:
        raise unsupported(
            "whole-buffer training: DQN.update samples batch_size rows at random",
            f"{_DQN}:DQN.update",
        )
    if cfg.mini_batch_length != 1:
        raise unsupported(
            f"mini_batch_length {cfg.mini_batch_length}: DQN.update samples single rows "
            "(memory.sample with sequence_length 1)",
            f"{_DQN}:DQN.update",
        )
    s = scenario.sampling
    if s.period != 1 or s.distribution != "uniform-windows":
        raise unsupported(
            f"sampling with period {s.period} and distribution {s.distribution!r}: "
            "RandomMemory.sample draws any stored row uniformly, with no configuration of either",
            "memories/torch/random.py:RandomMemory.sample",
        )
    if cfg.warmup_gate == "size>=":
        raise unsupported(
            "warm-up gate on the buffer size: post_interaction compares the timestep with "
            "learning_starts",
            f"{_DQN}:DQN.post_interaction",
        )
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise unsupported(
            "an env-step budget of non-FIRST items: the trainer's timesteps count every "
            "vector step",
            "trainers/torch/base.py:Trainer.train",
        )
    n = int(u)
    if cfg.num_iterations:
        if cfg.num_env_steps and (cfg.num_iterations - 1) * n * b >= cfg.num_env_steps:
            raise unsupported(
                "training iterations after the env-step budget: the trainer steps the env on "
                "every timestep, and timesteps is its only budget",
                "trainers/torch/base.py:Trainer.train",
            )
        timesteps = cfg.num_iterations * n
    else:
        timesteps = -(-cfg.num_env_steps // b)
    gate = cfg.initial_collect_steps
    starts = gate // b if cfg.warmup_gate == "stored>" else max(-(-gate // b) - 1, 0)
    memory, memory_kwargs = _user_memory(scenario, timesteps)
    return DQNPlan(
        update_interval=n,
        gradient_steps=cfg.num_updates_per_train_iter,
        batch_size=cfg.mini_batch_size or b,
        learning_starts=starts,
        memory_size=cfg.capacity,
        timesteps=timesteps,
        shaping=_shaping(scenario),
        memory=memory,
        memory_kwargs=memory_kwargs,
    )


def _shaping(scenario: TrainerScenario) -> tuple[float, float] | None:
    """DQN_CFG's ``rewards_shaper`` for a ``RewardTransform``; None for any other."""
    try:
        return affine_reward(scenario.preprocess)
    except TypeError:
        return None


def _user_memory(
    scenario: TrainerScenario, timesteps: int
) -> tuple[type[HookedMemory] | None, tuple[tuple[str, Any], ...]]:
    """The ``RandomMemory`` subclass (:mod:`xpspec.adapters.skrl_preprocess`) that does the
    scenario's exclusion or episode-delayed preprocessing; Unsupported for what no
    ``add_samples`` override can express."""
    p, b = scenario.preprocess, scenario.env.num_envs
    name = type(p).__name__
    if isinstance(p, ExcludeTasks):
        raise unsupported(
            f"preprocessing {name}: the task id is in the env's infos, and "
            "DQN.record_transition passes the memory's add_samples the observations, states, "
            "actions, rewards, next observations and terminated flags only, never infos",
            f"{_DQN}:DQN.record_transition",
        )
    if isinstance(p, (*EXCLUSIONS, EpisodeDelayed)):
        if b > 1 and timesteps > scenario.trainer.capacity:
            raise unsupported(
                f"preprocessing {name} with {b} envs and more timesteps ({timesteps}) than "
                f"capacity ({scenario.trainer.capacity}): a memory that leaves out or holds "
                "back one env's row adds rows one at a time, which Memory.add_samples writes "
                "at the next (memory_index, env_index) whatever the env, so the memory is one "
                "ring of memory_size * num_envs rows evicting in write order, never a ring of "
                "capacity rows per env",
                "memories/torch/base.py:Memory.add_samples",
            )
        if scenario.trainer.initial_collect_steps:
            raise unsupported(
                f"preprocessing {name} with a warm-up of {scenario.trainer.initial_collect_steps} "
                "stored items: post_interaction compares the timestep with learning_starts, and "
                "a memory that leaves out or holds back rows stores fewer rows than the "
                "timesteps say, so no learning_starts gates on the stored count",
                f"{_DQN}:DQN.post_interaction",
            )
        if isinstance(p, EpisodeDelayed):
            return EpisodeDelayedMemory, (("keep", p.keep),)
        return ExcludingMemory, (("rule", p),)
    if isinstance(p, (Identity, RewardTransform)):
        return None, ()
    raise unsupported(
        f"preprocessing {name}: neither DQN_CFG's rewards_shaper (which maps the rewards of a "
        "vector step) nor the memory can change a time step's type: the memory stores no step "
        "type, only each transition's terminated flag (DQN.init creates no truncated tensor), "
        "and a row's type follows from the rows before it",
        f"{_DQN}:DQN.record_transition",
    )


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


class Shaper:
    """``rewards_shaper(rewards, timestep, timesteps)``: ``rewards * scale + shift``."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale, self.shift = scale, shift

    def __call__(self, rewards: torch.Tensor, timestep: int, timesteps: int) -> torch.Tensor:
        return rewards * self.scale + self.shift


# -- the recording --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """A vector step's time steps (``env``), the rows one ``add_samples`` call stored
    (``store``), or the items it left out (``exclude``, with ``reason``) or held back
    (``hold``), with the counter."""

    kind: Literal["env", "store", "exclude", "hold"]
    steps: tuple[Step, ...]
    counter: int
    reason: str = ""


@dataclass
class _Call:
    """One train call: its status, the items stored before it, the counter before and after
    it, the windows of each update with the counter then, and the items held after it."""

    status: Literal["trained", "warmup"]
    stored: int
    counter: int
    updates: list[tuple[tuple[Window, ...], int]] = field(default_factory=list)
    counter_after: int = 0
    pending: int = 0


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
        self.written: list[Step] = []
        self.marks: list[_Rows] = []
        self.replacement = replacement
        self.renamed_at_reset = False
        """Whether the wrapper's next reset may return other observations (a new wrapper's
        first reset, which resets the vector env): they are then named as first time steps."""
        self.vector = ToyVectorEnv(
            scenario.env, scenario.seed, autoreset_mode=AutoresetMode.NEXT_STEP
        )
        self._build()

    def _build(self) -> None:
        """skrl's objects over the vector env: the wrapper, the memory and the DQN agent, with
        the adapter's seams."""
        plan, scenario = self.plan, self.scenario
        self.env: Wrapper = wrap_env(self.vector, wrapper="gymnasium", verbose=False)
        memory_class = RandomMemory if plan.memory is None else plan.memory
        self.memory = memory_class(
            memory_size=plan.memory_size,
            num_envs=scenario.env.num_envs,
            device="cpu",
            replacement=self.replacement,
            **dict(plan.memory_kwargs),
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
                rewards_shaper=None if plan.shaping is None else Shaper(*plan.shaping),
                experiment={"write_interval": 0, "checkpoint_interval": 0},
            ),
        )
        self._wrap()

    def counter(self) -> int:
        return int(getattr(self.agent, "_update_counter", 0))

    def _settle(self) -> None:
        """Give the call's newest update the counter after its gradient step: skrl increments
        ``_update_counter`` at the end of each gradient step and keys that step's
        target-network update on the new value (``dqn.py:DQN.update``), so it is read at the
        next ``memory.sample`` or when ``update`` returns."""
        call = self.call
        if call is not None and call.updates and call.updates[-1][1] == _UNSETTLED:
            call.updates[-1] = (call.updates[-1][0], self.counter())

    def held(self) -> list[Item]:
        """The items the user's memory holds back now."""
        memory = self.memory
        return [row.item for row in memory.held()] if isinstance(memory, HookedMemory) else []

    # the seams
    def _wrap(self) -> None:
        env, memory, agent = self.env, self.memory, self.agent
        step, reset = env.step, env.reset
        add, sample = memory.add_samples, memory.sample
        update, post = agent.update, agent.post_interaction
        hooked = isinstance(memory, HookedMemory)

        def reset_env() -> Any:
            obs, infos = reset()
            if self.current is None:
                none = np.zeros(len(self.gym_rows), dtype=bool)
                self.current = self._named(obs, none.astype(np.float64), none, none)
            elif decode_items(as_numpy(obs)) != [s.item for s in self.current]:
                if not self.renamed_at_reset:
                    raise AssertionError("the wrapper's reset returned a new observation mid-run")
                none = np.zeros(len(self.gym_rows), dtype=bool)
                self.gym_rows[:] = True
                self.current = self._named(obs, none.astype(np.float64), none, none)
            self.renamed_at_reset = False
            return obs, infos

        def step_env(actions: torch.Tensor) -> Any:
            assert self.current is not None, "a step before the trainer's reset"
            acts = as_numpy(actions).reshape(-1).tolist()
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
            if not hooked:
                self.written.extend(self._stored_row())
            self._flush_store()

        def sample_rows(names: list[str], **kwargs: Any) -> Any:
            out = sample(names, **kwargs)
            if self.call is None:
                raise AssertionError("memory.sample outside DQN.update")
            observations = as_numpy(out[0][names.index("observations")])
            windows = single_item_windows(decode_items(observations))
            self._settle()
            self.call.updates.append((windows, _UNSETTLED))
            return out

        def update_agent(*, timestep: int, timesteps: int) -> None:
            self.call = _Call("trained", self.stored, self.counter())
            try:
                update(timestep=timestep, timesteps=timesteps)
            finally:
                self._settle()

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
                call.pending = len(self.held())
                self.log.append(call)
            self.call = None

        # this instance's methods only (its class and other instances keep theirs)
        setattr(env, "reset", reset_env)  # noqa: B010
        setattr(env, "step", step_env)  # noqa: B010
        setattr(memory, "add_samples", add_samples)  # noqa: B010
        setattr(memory, "sample", sample_rows)  # noqa: B010
        setattr(agent, "update", update_agent)  # noqa: B010
        setattr(agent, "post_interaction", post_interaction)  # noqa: B010
        if isinstance(memory, HookedMemory):
            self._wrap_hooks(memory)

    def _wrap_hooks(self, memory: HookedMemory) -> None:
        """The user's memory's seams: each row its ``store_row`` wrote is read back from the
        memory's tensors at the position ``Memory.add_samples`` wrote it to; each drop and
        hold is recorded as the memory decides it."""
        store_row, drop, keep = memory.store_row, memory.drop, memory.hold

        def stored(row: Row) -> None:
            at = (memory.memory_index, memory.env_index)
            store_row(row)
            self.written.append(self._stored_one(*at))

        def dropped(rows: list[Row], reason: str) -> None:
            drop(rows, reason)
            steps = tuple(Step(row.item, 0, 0.0) for row in rows)
            self.marks.append(_Rows("exclude", steps, self.counter(), reason))

        def held(row: Row) -> None:
            keep(row)
            self.marks.append(_Rows("hold", (Step(row.item, 0, 0.0),), self.counter()))

        setattr(memory, "store_row", stored)  # noqa: B010
        setattr(memory, "drop", dropped)  # noqa: B010
        setattr(memory, "hold", held)  # noqa: B010

    def _flush_store(self) -> None:
        """The entries of one ``add_samples`` call: its holds, its exclusions (one entry per
        reason, in the order first decided) and one store entry for the rows it wrote."""
        counter = self.counter()
        holds = [step for mark in self.marks if mark.kind == "hold" for step in mark.steps]
        if holds:
            self.log.append(_Rows("hold", tuple(holds), counter))
        reasons = list(dict.fromkeys(m.reason for m in self.marks if m.kind == "exclude"))
        for reason in reasons:
            left = [
                step
                for mark in self.marks
                if mark.kind == "exclude" and mark.reason == reason
                for step in mark.steps
            ]
            self.log.append(_Rows("exclude", tuple(left), counter, reason))
        self.marks = []
        if self.written:
            self.log.append(_Rows("store", tuple(self.written), counter))
            self.stored += len(self.written)
            self.written = []

    def _named(self, obs: Any, reward: Any, terminated: Any, truncated: Any) -> list[Step]:
        """The time steps the wrapper returned: step types from the Gymnasium flags."""
        term = as_numpy(terminated).reshape(-1).astype(bool)
        trunc = as_numpy(truncated).reshape(-1).astype(bool)
        types = step_types_from_gym(term, trunc, self.gym_rows).tolist()
        rewards = as_numpy(reward).reshape(-1).astype(np.float64).tolist()
        self.gym_rows = term | trunc
        discounts = np.where(term, 0.0, 1.0).tolist()
        return steps_from_columns(decode_items(as_numpy(obs)), types, rewards, discounts)

    def _stored_row(self) -> tuple[Step, ...]:
        """The row ``add_samples`` has just written (index ``memory_index - 1``), read back
        from the memory's tensors and named from each env's previous row."""
        memory = self.memory
        row = (memory.memory_index - 1) % memory.memory_size
        return tuple(self._read(row, e) for e in range(memory.num_envs))

    def _stored_one(self, row: int, column: int) -> Step:
        """The one row ``store_row`` has just written at ``(row, column)``."""
        return self._read(row % self.memory.memory_size, column)

    def _read(self, row: int, column: int) -> Step:
        """The transition at ``(row, column)`` of the memory's tensors, named from its env's
        previous stored row (:class:`~xpspec.kit.steps.NextStepRows`); its annotation is the
        user's memory's ``annotations`` entry where it keeps one, else 0."""
        memory = self.memory
        names = memory.get_tensor_names()

        def value(name: str) -> Any:
            return as_numpy(memory.get_tensor_by_name(name)[row, column]).reshape(-1)

        (item,) = decode_items(value("observations").reshape(1, -1))
        annotation = float(value("annotations")[0]) if "annotations" in names else 0.0
        step = self.names.row(item, annotation=annotation)
        truncated = bool(value("truncated")[0]) if "truncated" in names else False
        self.names.follow(step, float(value("rewards")[0]), bool(value("terminated")[0]), truncated)
        return step

    def run(self) -> Trace:
        header: dict[str, Any] = {"producer": producer("skrl"), "stateless": STATELESS}
        self.train(headless_trainer(self.env, self.agent, self.plan.timesteps), header)
        return Trace(tuple(self._events(stopped="stopped" in header)), header)

    def train(self, trainer: SequentialTrainer, header: dict[str, Any]) -> bool:
        """``trainer.train()``; False when skrl stopped the run by an update on a memory that
        holds no row (recorded in ``header["stopped"]``)."""
        try:
            trainer.train()
        except RuntimeError as exc:
            if not any(message in str(exc) for message in _EMPTY_MEMORY):
                raise
            header["stopped"] = (
                f"RuntimeError: {exc} (DQN.update on a memory that holds no row, "
                f"{_DQN}:DQN.update; the trace ends in that update's iteration)"
            )
            call = self.call
            if call is not None:
                call.counter_after, call.pending = self.counter(), len(self.held())
                self.log.append(call)
            return False
        return True

    def _events(self, stopped: bool) -> list[Event]:
        """The log as trainer events: an iteration ends with each train call, or with the log;
        the held rows are flushed (``pending_at_end`` ``flush``) unless skrl stopped the run."""
        events: list[Event] = []
        iteration = calls = env_steps = stored = 0
        body: list[_Rows] = []

        def close(call: _Call | None) -> None:
            nonlocal iteration, calls, env_steps, stored
            iteration += 1
            unrolled = sum(1 for r in body if r.kind == "env")
            start = body[0].counter if body else (call.counter if call else self.counter())
            events.append(IterationStart(iteration, start, unrolled))
            for entry in body:
                events.append(self._event(iteration, entry))
                if entry.kind == "env":
                    env_steps += len(entry.steps)
                elif entry.kind == "store":
                    stored += len(entry.steps)
            end, pending = self.counter(), len(self.held())
            if call is not None:
                events.append(TrainCall(iteration, calls, call.counter, call.status, call.stored))
                for index, (windows, counter) in enumerate(call.updates):
                    masks = ((1,),) * len(windows)
                    events.append(Update(iteration, calls, index, counter, windows, masks))
                calls += 1
                end, pending = call.counter_after, call.pending
            events.append(IterationEnd(iteration, end, env_steps, stored, pending))
            body.clear()

        for entry in self.log:
            if isinstance(entry, _Rows):
                body.append(entry)
            else:
                close(entry)
        if body:
            close(None)
        policy = self.scenario.trainer.pending_at_end
        memory = self.memory
        if policy == "flush" and isinstance(memory, EpisodeDelayedMemory) and not stopped:
            logged = len(self.log)
            memory.flush()
            self._flush_store()
            flushed = self.log[logged:]
            events.extend(self._event(iteration, e) for e in flushed if isinstance(e, _Rows))
        events.append(run_end(iteration, env_steps, policy, self.held()))
        return events

    @staticmethod
    def _event(iteration: int, entry: _Rows) -> Event:
        items = [s.item for s in entry.steps]
        if entry.kind == "env":
            return env_step(iteration, entry.steps)
        if entry.kind == "store":
            return store(iteration, entry.steps)
        if entry.kind == "exclude":
            return exclude(iteration, items, entry.reason)
        return hold(iteration, items)


def run_trainer(scenario: TrainerScenario, replacement: bool) -> Trace:
    """One ``SequentialTrainer.train`` of a DQN agent on ``scenario`` (module docstring), its
    memory sampling with or without ``replacement``; with a checkpoint spec, saved and loaded
    through skrl's own API (:mod:`xpspec.adapters.skrl_checkpoint`)."""
    plan = dqn_plan(scenario)
    with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
        if scenario.checkpoint is not None:
            from xpspec.adapters.skrl_checkpoint import CheckpointedRun

            return CheckpointedRun(scenario, plan, replacement).run()
        return _Run(scenario, plan, replacement).run()
