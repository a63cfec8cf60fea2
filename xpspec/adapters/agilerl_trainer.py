"""AgileRL 2.58.0's off-policy training loop, ``training/train_off_policy.py:train_off_policy``,
run with a ``DQN`` agent on the toy env and recorded at its seams (capability ``trainer``).

**What the loop does** (``train_off_policy``, one agent, one evolution chunk): per vector step
it acts, steps the env, ``memory.add``s the ``B`` rows ``Transition(obs, action, reward,
next_obs, done=terminated)``, then decides whether to learn. With ``learn_step > B`` it
evaluates ``idx_step % (learn_step // B) == 0 and len(memory) >= batch_size and memory.size >
learning_delay`` and makes one update; otherwise it evaluates ``len(memory) >= batch_size and
memory.size > learning_delay`` and makes ``B // learn_step`` updates. An update is one
``memory.sample(batch_size)`` and ``agent.learn``.

**Where the trace comes from.** The env is a recording ``VectorWrapper`` (one ``env_step`` per
vector step, the time step each env was in before it); ``memory`` is a ``ReplayBuffer`` (or
the user's subclass below) whose instance ``add`` and ``sample`` are wrapped (``store`` events
read back from the storage at the rows ``ReplayBuffer.add`` wrote, as many as its ``counter``
grew by from its cursor on; one ``update`` per sample, its rows as windows of one item), and
whose ``__len__`` -- read only by the loop's learn condition, and only when ``idx_step %
learn_step`` let it be evaluated -- marks a train call: the loop evaluated its learn condition
there, so an iteration ends at each such evaluation, ``trained`` when updates followed it,
else ``no-data`` when the buffer's ``size`` was 0 and ``warmup`` when its gate was shut.
Vector steps after the last evaluation form a final iteration with no train call.
``agent.finalize_training_step`` ends the recording (the loop's evaluation episodes after it
are not training).

**Preprocessing** (clauses ``preprocess.*``). AgileRL's route is a ``ReplayBuffer`` subclass
passed as ``memory`` whose ``add`` does the work (:mod:`xpspec.adapters.agilerl_preprocess`):
``RewardTransform`` scales and shifts the rewards of the rows (each holds the reward out of its
step, so the transformed reward shows as the next item's); ``ExcludeSteps`` and
``ExcludeEpisodes`` add the rows their rule does not select, with any number of envs
(``ReplayBuffer.add`` writes the rows of whatever TensorDict it is given); ``EpisodeDelayed``
holds each env's rows until the row after its ``done`` row and adds them annotated in the
subclass's ``annotations`` array, or leaves them out when ``keep`` rejects the outcome. What
the user's ``add`` decides is recorded as it decides it (``exclude`` with the rule's reason,
``hold`` with the rows of the vector step); each ``ReplayBuffer.add`` the subclass makes is
one ``store`` event read back from the buffer, its annotation from the subclass's array. An
iteration's ``pending`` and the run end's pending items are the rows the subclass still holds;
with ``pending_at_end = "flush"`` the subclass's ``flush`` adds them after ``train_off_policy``
returns, stored after the last iteration. The learn gate reads ``len(memory)`` and
``memory.size``, i.e. the rows the subclass wrote, while the learn steps follow the vector
steps whatever was stored (the ``plain`` accounting). Unsupported: ``ExcludeTasks`` (``add``
is handed ``Transition(obs, action, reward, next_obs, done)``, never the env's info holding
the task id) and ``OverwriteStepType`` (the buffer stores no step type).

**Knobs.** ``unroll_length`` ``U`` and ``num_updates_per_train_iter`` ``N`` -> ``learn_step``:
``U * B`` when ``U > 1`` and ``N = 1``; ``B // N`` when ``U = 1`` and ``B // (B // N) = N``.
``mini_batch_size`` -> ``batch_size`` (default ``B``); ``capacity`` -> ``ReplayBuffer(capacity
* B)``; ``initial_collect_steps`` ``n`` -> ``learning_delay = max(n - 1, 0)`` (the gate is
``size > learning_delay`` on the capped size); ``num_iterations`` ``I`` -> ``max_steps =
evo_steps = I * U * B``, ``num_env_steps`` (a multiple of ``B``) -> ``max_steps = evo_steps``.
The trace's counter is the number of updates so far (the adapter declares no ``counter``
observable: AgileRL's step counter is updated once per chunk). The DQN acts with no state:
its traces say so in the header's ``stateless`` (:data:`STATELESS`).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium
import numpy as np
from agilerl.algorithms import DQN
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.training.train_off_policy import train_off_policy

from xpspec.adapters.agilerl_preprocess import (
    EpisodeDelayedBuffer,
    ExcludingBuffer,
    HookedBuffer,
    RewardScalingBuffer,
)
from xpspec.adapters.agilerl_rows import StoredRows, as_numpy
from xpspec.kit.events import exclude, hold, logged_rows, run_end, store
from xpspec.kit.items import decode_items, single_item_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.steps import Step, steps_from_columns
from xpspec.protocol.adapter import Unsupported
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
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import (
    Event,
    Item,
    IterationEnd,
    IterationStart,
    Trace,
    TrainCall,
    Update,
)
from xpspec.refimpl.toy_envs.gym_env import make_env_fns
from xpspec.refimpl.toy_envs.gym_vector import step_types_from_gym

__all__ = ["STATELESS", "LoopConfig", "UserBuffer", "loop_config", "run_trainer", "user_buffer"]

_SRC = "agilerl 2.58.0"
_LINK = "https://github.com/AgileRL/AgileRL/blob/v2.58.0/agilerl/training/train_off_policy.py"
_NET = {"encoder_config": {"hidden_size": [8]}}
"""A tiny Q-network: the spec is about experience, not learning."""


STATELESS = (
    f"train_off_policy calls DQN.get_action(obs, epsilon, action_mask=...) with no hidden state "
    f"({_SRC}, training/train_off_policy.py, algorithms/dqn.py), so the DQN row's policy acts "
    "with no state; whole-buffer scenarios run train_on_policy with a recurrent PPO, whose "
    "collect_rollouts_recurrent feeds the state"
)
"""The DQN row's trace header ``stateless``: clause ``timestep.state-reset`` has no state to
judge on its runs."""


def _unsupported(reason: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC})", _LINK)


@dataclass(frozen=True)
class LoopConfig:
    """``train_off_policy`` and ``DQN`` arguments for a trainer scenario."""

    learn_step: int
    batch_size: int
    max_size: int
    learning_delay: int
    max_steps: int


def loop_config(scenario: TrainerScenario) -> LoopConfig:
    """AgileRL's own configuration of ``scenario``; Unsupported for what it cannot express."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.mode != "off-policy":
        raise _unsupported(
            "on-policy mode: the DQN row drives train_off_policy; on-policy and whole-buffer "
            "scenarios go to the recurrent PPO row (training/train_on_policy.py)"
        )
    if cfg.drain is not None:
        raise _unsupported("drain mode: train_off_policy steps its vector env synchronously")
    user_buffer(scenario.preprocess)
    if scenario.env.autoreset != "next-step":
        raise _unsupported(
            "same-step autoreset: utils/utils.py:make_vect_envs builds NEXT_STEP vector envs"
        )
    if scenario.env.goals:
        raise _unsupported("goal (Dict) observations: not driven by this adapter's DQN agent")
    if cfg.whole_buffer:
        raise _unsupported("whole-buffer training: updates sample memory at random")
    if cfg.mini_batch_length != 1:
        raise _unsupported(
            f"mini_batch_length {cfg.mini_batch_length}: ReplayBuffer.sample returns single "
            "transitions (components/replay_buffer.py)"
        )
    s = scenario.sampling
    if s.period != 1 or s.distribution != "uniform-windows":
        raise _unsupported("sampling: ReplayBuffer.sample draws stored rows by torch.randperm")
    u, updates = cfg.unroll_length, cfg.num_updates_per_train_iter
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: learn_step counts env steps, and learning is decided once per "
            "vector step (train_off_policy)"
        )
    k = int(u)
    if k > 1 and updates == 1:
        learn_step = k * b
    elif k == 1 and updates <= b and b // (b // updates) == updates:
        learn_step = b // updates
    else:
        raise _unsupported(
            f"unroll_length {k} with {updates} updates and {b} envs: train_off_policy makes one update "
            "every learn_step // num_envs vector steps when learn_step > num_envs, else "
            "num_envs // learn_step updates every vector step"
        )
    if cfg.num_iterations and cfg.num_env_steps:
        raise _unsupported(
            "num_iterations with a num_env_steps budget: train_off_policy has one budget, "
            "max_steps env steps, and decides learning only inside its env-step loop, so it "
            "makes no train call once the env budget is spent"
        )
    if cfg.num_iterations:
        max_steps = cfg.num_iterations * k * b
    elif cfg.num_env_steps % b == 0:
        max_steps = cfg.num_env_steps
    else:
        raise _unsupported(
            f"num_env_steps {cfg.num_env_steps} not a multiple of {b} envs: one evolution chunk "
            "runs evo_steps // num_envs vector steps, and a second chunk resets the env"
        )
    if cfg.warmup_gate == "unrolled>=":
        raise _unsupported("a warm-up gate on unrolled items: the gate reads memory.size")
    # the gate is memory.size > learning_delay: 'stored>' n is n, 'stored>=' n is n - 1
    strict = cfg.warmup_gate == "stored>"
    n = cfg.initial_collect_steps
    delay = n if strict else max(n - 1, 0)
    batch = cfg.mini_batch_size or b
    return LoopConfig(learn_step, batch, cfg.capacity * b, delay, max_steps)


@dataclass(frozen=True)
class UserBuffer:
    """The ``memory`` a user hands ``train_off_policy`` for a preprocessing: a ``ReplayBuffer``
    subclass (:mod:`xpspec.adapters.agilerl_preprocess`) and its keyword arguments, or
    AgileRL's own ``ReplayBuffer`` for none."""

    cls: type[ReplayBuffer] = ReplayBuffer
    kwargs: tuple[tuple[str, Any], ...] = ()


def user_buffer(preprocess: PreprocessorSpec) -> UserBuffer:
    """The ``ReplayBuffer`` subclass that does ``preprocess``; Unsupported for what no
    ``add`` override can express."""
    name = type(preprocess).__name__
    if isinstance(preprocess, Identity):
        return UserBuffer()
    if isinstance(preprocess, RewardTransform):
        scale, shift = float(preprocess.scale), float(preprocess.shift)
        return UserBuffer(RewardScalingBuffer, (("scale", scale), ("shift", shift)))
    if isinstance(preprocess, (ExcludeSteps, ExcludeEpisodes)):
        return UserBuffer(ExcludingBuffer, (("rule", preprocess),))
    if isinstance(preprocess, EpisodeDelayed):
        return UserBuffer(EpisodeDelayedBuffer, (("keep", preprocess.keep),))
    if isinstance(preprocess, ExcludeTasks):
        raise _unsupported(
            f"preprocessing {name}: train_off_policy hands memory.add only the TensorDict of "
            "Transition(obs, action, reward, next_obs, done) (training/train_off_policy.py:"
            "train_off_policy); the task id is in the env's info, which never reaches add"
        )
    assert isinstance(preprocess, OverwriteStepType), preprocess
    raise _unsupported(
        f"preprocessing {name}: AgileRL's ReplayBuffer stores no step type, only "
        "Transition(obs, action, reward, next_obs, done) with done the env's terminated and "
        "its truncated dropped (training/train_off_policy.py:train_off_policy); a row's step "
        "type follows from its env's previous row's done, already written when add sees the "
        "row, and add cannot tell a truncated LAST from a MID, so no add override changes "
        "the step type of one time step alone"
    )


# -- the trace, as a log of what the loop did -----------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    kind: str  # "env", "store", "exclude", "hold", "gate", "update", "flush"
    steps: tuple[Step, ...] = ()
    windows: tuple[Any, ...] = ()
    stored: int = 0
    items: tuple[Item, ...] = ()
    reason: str = ""
    pending: int = 0
    size: int = 0


def _gated(cls: type[ReplayBuffer], on_gate: Callable[[], None]) -> type[ReplayBuffer]:
    """``cls`` with a ``__len__`` (read only by the loop's learn condition) that reports each
    read to ``on_gate`` (a subclass: ``len()`` looks ``__len__`` up on the type)."""

    def __len__(self: ReplayBuffer) -> int:
        on_gate()
        return cls.__len__(self)

    return type(f"_Gated{cls.__name__}", (cls,), {"__len__": __len__})


class _Recorder(gymnasium.vector.VectorWrapper):
    """Reports each vector step: the time step every env was in before it and the actions."""

    def __init__(self, env: gymnasium.vector.VectorEnv, log: list[_Entry]) -> None:
        super().__init__(env)
        self._log = log
        self.recording = True
        n = env.num_envs
        self._obs: Any = None
        self._flags = (np.zeros(n, bool), np.zeros(n, bool), np.ones(n, bool))
        self._reward = np.zeros(n)

    def reset(self, **kwargs: Any) -> Any:
        obs, info = super().reset(**kwargs)
        n = self.num_envs
        self._obs = obs
        self._flags = (np.zeros(n, bool), np.zeros(n, bool), np.ones(n, bool))
        self._reward = np.zeros(n)
        return obs, info

    def current(self) -> list[Step]:
        """The time steps of the observation the loop acts on."""
        terminated, truncated, previous = self._flags
        types = step_types_from_gym(terminated, truncated, previous).tolist()
        discounts = np.where(terminated, 0.0, 1.0).tolist()
        return steps_from_columns(decode_items(self._obs), types, self._reward.tolist(), discounts)

    def step(self, actions: Any) -> Any:
        before = self.current()
        obs, reward, terminated, truncated, info = super().step(actions)
        if self.recording:
            acts = np.asarray(actions).reshape(-1).tolist()
            rows = [
                Step(s.item, s.step_type, s.reward, s.discount, action=int(a))
                for s, a in zip(before, acts)
            ]
            self._log.append(_Entry("env", tuple(rows)))
        done = self._flags[0] | self._flags[1]
        self._flags = (np.asarray(terminated, bool), np.asarray(truncated, bool), done)
        self._reward = np.asarray(reward, dtype=np.float64)
        self._obs = obs
        return obs, reward, terminated, truncated, info


class _Run:
    """One ``train_off_policy`` run of a DQN agent, recorded into a log, then into a trace."""

    def __init__(self, scenario: TrainerScenario, config: LoopConfig) -> None:
        self.scenario, self.config = scenario, config
        self.log: list[_Entry] = []
        self.stored = 0
        self.rows = StoredRows()
        self.env = _Recorder(
            gymnasium.vector.SyncVectorEnv(list(make_env_fns(scenario.env, scenario.seed))),
            self.log,
        )
        self.memory = self._new_memory()
        self.written: list[Step] = []
        self.store_kind = "store"
        self.agent = self._new_agent()
        self._wrap()

    def _new_memory(self) -> ReplayBuffer:
        """The scenario's ``memory``, its ``len()`` reads reported as learn-step gates."""
        user = user_buffer(self.scenario.preprocess)
        return _gated(user.cls, self._gate)(self.config.max_size, **dict(user.kwargs))

    def _new_agent(self) -> DQN:
        """A DQN of the scenario's configuration."""
        return DQN(
            self.env.single_observation_space,
            self.env.single_action_space,
            batch_size=self.config.batch_size,
            learn_step=self.config.learn_step,
            net_config=_NET,
        )

    def _gate(self) -> None:
        if self.env.recording:
            held, size = len(self._held()), self.memory.size  # size: ReplayBuffer._size
            self.log.append(_Entry("gate", stored=self.stored, pending=held, size=size))

    def _held(self) -> list[Item]:
        memory = self.memory
        if not isinstance(memory, HookedBuffer):
            return []
        return [item for row in memory.held() for item in decode_items(as_numpy(row["obs"]))]

    def _write(self, write: Callable[[], Any]) -> Any:
        """Run ``write`` and read back the rows it wrote: as many as the buffer's ``counter``
        grew by, from its cursor on (``ReplayBuffer.add`` advances both)."""
        memory = self.memory
        cursor, counter = memory._cursor, memory.counter
        result = write()
        n = memory.counter - counter
        assert n <= memory.max_size, f"one write of {n} rows into a ring of {memory.max_size}"
        if n:
            written = (cursor + np.arange(n)) % memory.max_size
            # what the buffer holds of the rows just written (not the env's flags)
            self.written.extend(self.rows.read(memory, written))
        return result

    def _flush_written(self) -> None:
        """One store entry (``flush`` at the end of the run) for the rows written since the
        last one (none: no entry)."""
        if self.written:
            self.log.append(_Entry(self.store_kind, tuple(self.written)))
            self.stored += len(self.written)
            self.written = []

    def _wrap(self) -> None:
        memory, add, sample = self.memory, self.memory.add, self.memory.sample
        finalize = self.agent.finalize_training_step
        hooked = isinstance(memory, HookedBuffer)

        def add_rows(data: Any) -> Any:
            # the user's add records itself through store_rows, drop and hold
            result = add(data) if hooked else self._write(lambda: add(data))
            self._flush_written()
            return result

        def sample_rows(*args: Any, **kwargs: Any) -> Any:
            samples = sample(*args, **kwargs)
            items = decode_items(samples["obs"].numpy())
            self.log.append(_Entry("update", windows=single_item_windows(items)))
            return samples

        def finalize_step(num_steps: int) -> None:
            self.env.recording = False
            finalize(num_steps)

        # this instance's methods only (its class and other instances keep theirs)
        setattr(memory, "add", add_rows)  # noqa: B010
        setattr(memory, "sample", sample_rows)  # noqa: B010
        setattr(self.agent, "finalize_training_step", finalize_step)  # noqa: B010
        if isinstance(memory, HookedBuffer):
            self._wrap_hooks(memory)

    def _wrap_hooks(self, memory: HookedBuffer) -> None:
        store_rows, drop, keep = memory.store_rows, memory.drop, memory.hold

        def stored(data: Any) -> None:
            self._write(lambda: store_rows(data))
            self._flush_written()

        def dropped(data: Any, reason: str) -> None:
            drop(data, reason)
            items = tuple(decode_items(as_numpy(data["obs"])))
            self.log.append(_Entry("exclude", items=items, reason=reason))

        def held(data: Any) -> None:
            keep(data)
            self.log.append(_Entry("hold", items=tuple(decode_items(as_numpy(data["obs"])))))

        setattr(memory, "store_rows", stored)  # noqa: B010
        setattr(memory, "drop", dropped)  # noqa: B010
        setattr(memory, "hold", held)  # noqa: B010

    def run(self) -> Trace:
        c = self.config
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            self._train(c)
        policy = self.scenario.trainer.pending_at_end
        pending = len(self._held())
        if policy == "flush" and isinstance(self.memory, HookedBuffer):
            self.store_kind = "flush"  # after train_off_policy: its rows earn no learn step
            self.memory.flush()
        events = _events(self.log, pending, policy, self._held())
        return Trace(tuple(events), {"producer": producer("agilerl"), "stateless": STATELESS})

    def _train(self, c: LoopConfig) -> None:
        """``train_off_policy`` for the whole budget, one evolution chunk."""
        self._loop(c.max_steps, c.max_steps)

    def _loop(self, max_steps: int, evo_steps: int) -> None:
        """One ``train_off_policy`` call (its progress bar written to a discarded stream)."""
        train_off_policy(
            self.env,
            "xpspec-toy",
            "DQN",
            [self.agent],
            self.memory,
            max_steps=max_steps,
            evo_steps=evo_steps,
            eval_steps=1,
            learning_delay=self.config.learning_delay,
            verbose=False,
        )


def _events(log: list[_Entry], pending: int, policy: str, held: list[Item]) -> list[Event]:
    """The log as trainer events: an iteration ends at each learn-condition evaluation, with
    its train call and the updates that followed it, or at the end of the log (``pending``
    rows then held). The end-of-run flush's stores follow the last iteration; ``held`` are
    the items still held after it, which meet ``policy``."""
    events: list[Event] = []
    iteration = call = updates = env_steps = stored = 0
    body: list[_Entry] = []

    def close(train: list[Event], held_now: int) -> None:
        nonlocal iteration, env_steps, stored
        iteration += 1
        unrolled = sum(1 for e in body if e.kind == "env")
        events.append(IterationStart(iteration, updates, unrolled))
        for e in body:
            if e.kind == "exclude":
                events.append(exclude(iteration, e.items, e.reason))
            elif e.kind == "hold":
                events.append(hold(iteration, e.items))
            else:
                rows, unrolled_steps, stored_steps = logged_rows(iteration, [e])
                events.extend(rows)
                env_steps += unrolled_steps
                stored += stored_steps
        for event in train:
            events.append(_renumber(event, iteration))
        events.append(IterationEnd(iteration, updates, env_steps, stored, held_now))
        body.clear()

    flushed = [e for e in log if e.kind == "flush"]
    log = [e for e in log if e.kind != "flush"]
    i = 0
    while i < len(log):
        entry = log[i]
        if entry.kind in ("env", "store", "exclude", "hold"):
            body.append(entry)
            i += 1
            continue
        if entry.kind != "gate":
            raise AssertionError(f"an update outside a learn step at log entry {i}")
        j = i + 1
        while j < len(log) and log[j].kind == "gate":  # the condition reads len() once
            j += 1
        train: list[Event] = []
        samples = []
        while j < len(log) and log[j].kind == "update":
            samples.append(log[j])
            j += 1
        # no update followed the learn condition: an empty buffer is no-data, else its gate
        # (len(memory) >= batch_size and memory.size > learning_delay) was shut
        status: Literal["trained", "warmup", "no-data"] = "trained"
        if not samples:
            status = "no-data" if entry.size == 0 else "warmup"
        train.append(TrainCall(0, call, updates, status, entry.stored))
        for index, sample in enumerate(samples):
            updates += 1
            masks = ((1,),) * len(sample.windows)
            train.append(Update(0, call, index, updates, sample.windows, masks))
        call += 1
        close(train, entry.pending)
        i = j
    if body:
        close([], pending)
    events.extend(store(iteration, e.steps) for e in flushed)
    events.append(run_end(iteration, env_steps, policy, held))
    return events


def _renumber(event: Event, iteration: int) -> Event:
    if isinstance(event, TrainCall):
        return TrainCall(iteration, event.call, event.counter, event.status, event.stored_total)
    assert isinstance(event, Update)
    return Update(iteration, event.call, event.index, event.counter, event.windows, event.loss_mask)


def run_trainer(scenario: TrainerScenario) -> Trace:
    """One ``train_off_policy`` run (see the module docstring)."""
    config = loop_config(scenario)
    with seeded_quiet(scenario.seed, ["torch", "numpy", "random"]):
        return _Run(scenario, config).run()
