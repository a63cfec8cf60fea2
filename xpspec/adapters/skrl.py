"""Adapter over skrl 2.1.1 (torch backend): its Gymnasium wrapper (``GymnasiumWrapper``), its
``RandomMemory``, its ``SequentialTrainer`` driving a ``DQN`` agent, and one ``PPO`` update
driven by the same trainer, on the toy env and recorded at their seams. Nothing of skrl is
re-implemented; sources are cited as ``file:function`` of the installed ``skrl`` package. The
configuration (``SkrlConfig``: sampling with or without replacement, ``time_limit_bootstrap``)
is the adapter's; each registered configuration has its own module and expectations file
(``skrl``: skrl's defaults; ``skrl_tlb``: the other settings).

Offered: ``env``, ``trainer`` (:mod:`xpspec.adapters.skrl_trainer`: DQN's collect/update
accounting, ``update_interval``, ``gradient_steps``, ``batch_size``, ``learning_starts``,
``rewards_shaper`` and, for exclusion and episode-delayed preprocessing, a user's
``RandomMemory`` subclass as the agent's memory: :mod:`xpspec.adapters.skrl_preprocess`; for
whole-buffer scenarios :mod:`xpspec.adapters.skrl_state`: ``PPO_RNN``'s rollouts, epochs and
mini-batches with a counting recurrent policy, whose state skrl feeds it: ``state``),
``replay``, ``learner``, ``recurrent`` (:mod:`xpspec.adapters.skrl_recurrent`: ``PPO_RNN``
with a counting recurrent model) and ``checkpoint`` (:mod:`xpspec.adapters.skrl_checkpoint`:
``Agent.save`` / ``load`` and ``Memory.save`` / ``load`` around two ``SequentialTrainer``
runs). Not offered: ``relabel`` (skrl has no
hindsight relabeling). The observable ``update-counter`` is DQN's ``_update_counter`` (the
gradient steps so far). ``state`` is the state ``PPO_RNN`` hands the counting policy in the
whole-buffer rows; the DQN row's Q-network gets none (its traces say so in the header's
``stateless``). ``counter``, ``hooks``, ``bootstrap``, ``loss-mask`` and ``caller-episodes``
are not declared: skrl keys schedules on its timestep (no count of iterations) and DQN's
``_update_counter``, has no ``after_update`` / ``after_train_iter`` hooks, PPO appends no
bootstrap time step, and DQN's loss weighs every sampled row alike (no mask to read).

**Trainer.** See :mod:`xpspec.adapters.skrl_trainer`.

**Time steps.** skrl wraps a Gymnasium ``VectorEnv`` as it is (``envs/wrappers/torch/
gymnasium_envs.py:GymnasiumWrapper``): ``reset`` resets the vector env once and afterwards
returns the last observation, relying on the vector env's own autoreset, and ``step`` passes
the vector env's observation, reward, ``terminated`` and ``truncated`` through as tensors
(``infos`` untouched). ``run_env`` builds the toy vector env in the scenario's autoreset mode
and records every time step the wrapper returns (a ``SAME_STEP`` row that ends an episode
holds two time steps, the LAST read from ``infos["final_obs"]``).

**Learner.** See :class:`_LearnerRun`.

**Replay.** ``RandomMemory(memory_size=capacity, num_envs=B, replacement=...)``: one row of
``B`` per vector step (``memories/torch/base.py:Memory.add_samples``), every time step stored
(the adapter calls the memory's own ``add_samples`` with the observation, as an agent's
``record_transition`` does). ``RandomMemory.sample(names, batch_size, sequence_length)`` is
seeded through torch's global generator; its flat indexes ``m * B + e`` make a sequence of
``sequence_length`` consecutive rows ``m`` of one env, so the windows are read from the
sampled observations as ``[batch, length, 3]``. skrl samples windows across episode
boundaries with no period grid, uniformly over its start indexes (with replacement:
``torch.randint``; without, the default: ``torch.randperm(size)[:batch_size]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

try:
    import skrl
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.envs.wrappers.torch import Wrapper, wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model

    from xpspec.adapters.skrl_recurrent import run_recurrent
    from xpspec.adapters.skrl_state import run_ppo_trainer
    from xpspec.adapters.skrl_trainer import headless_trainer, run_trainer
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        f"xpspec.adapters.skrl drives skrl 2.1.1's API, which is not importable here ({exc})"
    ) from exc

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from xpspec.kit.events import env_step, store
from xpspec.kit.items import decode_item, decode_items, decode_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import check_release, producer
from xpspec.kit.rollout import RolloutRow, rollout_advantages, rollout_plan, rollout_rows
from xpspec.kit.steps import Step
from xpspec.kit.value import toy_value
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RecurrentScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Sampled, Trace
from xpspec.refimpl.toy_envs.gym_vector import ToyVectorEnv

__all__ = ["SkrlAdapter", "SkrlConfig"]

_VERSION = "2.1.1"
_SRC = "skrl 2.1.1"
_LINK = "https://github.com/Toni-SM/skrl/tree/2.1.1/skrl"
_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
_LOGGERS = ("skrl",)


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


@dataclass(frozen=True)
class SkrlConfig:
    """The skrl configuration an adapter instance runs: ``RandomMemory(replacement=...)``
    for replay and ``PPO_CFG(time_limit_bootstrap=...)`` for the learner (skrl's defaults:
    both ``False``)."""

    replacement: bool = False
    time_limit_bootstrap: bool = False


def _wrapped(spec: EnvSpec, seed: int) -> Wrapper:
    """The toy vector env in the scenario's autoreset mode, through skrl's ``wrap_env``
    (``envs/wrappers/torch/__init__.py:wrap_env``, which picks ``GymnasiumWrapper``)."""
    same = spec.autoreset == "same-step"
    mode = AutoresetMode.SAME_STEP if same else AutoresetMode.NEXT_STEP
    return wrap_env(
        ToyVectorEnv(spec, seed, autoreset_mode=mode), wrapper="gymnasium", verbose=False
    )


class _Rows:
    """The time step every env is in, from the Gymnasium flags the wrapper passed through:
    FIRST after a reset or an episode end (``NEXT_STEP``), LAST at ``terminated`` or
    ``truncated`` (discount 0 iff terminated), else MID."""

    def __init__(self, num_envs: int) -> None:
        self.done = np.ones(num_envs, dtype=bool)

    def steps(self, obs: Any, reward: Any, terminated: Any, truncated: Any) -> list[Step]:
        term = np.asarray(terminated).reshape(-1).astype(bool)
        trunc = np.asarray(truncated).reshape(-1).astype(bool)
        rewards = np.asarray(reward, dtype=np.float64).reshape(-1)
        out = []
        for e, item in enumerate(decode_items(obs)):
            if self.done[e]:
                out.append(Step(item, _FIRST, float(rewards[e]), action=0))
            elif term[e] or trunc[e]:
                out.append(Step(item, _LAST, float(rewards[e]), 0.0 if term[e] else 1.0, action=0))
            else:
                out.append(Step(item, _MID, float(rewards[e]), action=0))
        self.done = term | trunc
        return out


def _as_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


class SkrlAdapter:
    """skrl 2.1.1 (see the module docstring for the mapping)."""

    def __init__(self, config: SkrlConfig = SkrlConfig(), name: str = "skrl") -> None:
        self.config, self.name = config, name

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name=self.name,
            framework="skrl",
            framework_version=skrl.__version__,
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                "env",
                "trainer",
                "replay",
                "learner",
                "update-counter",
                "state",  # PPO_RNN's whole-buffer trainer row (skrl_state)
                "recurrent",
                "checkpoint",
            ),
            issue_tracker="https://github.com/Toni-SM/skrl/issues",
            notes=(
                "torch backend: GymnasiumWrapper over the toy vector env (NEXT_STEP autoreset); "
                f"RandomMemory(replacement={self.config.replacement}); DQN trained by "
                "SequentialTrainer (PPO_RNN with a counting recurrent model for whole-buffer "
                "scenarios); one PPO update by SequentialTrainer with "
                f"time_limit_bootstrap={self.config.time_limit_bootstrap}; PPO_RNN with a "
                "counting recurrent model (skrl's documented RNN model) for recurrent; "
                "Agent.save/load and Memory.save/load around two SequentialTrainer runs for "
                "checkpoint"
            ),
            extra_versions={
                "torch": torch.__version__,
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        check_release("skrl", skrl.__version__, _VERSION)
        memory = RandomMemory(memory_size=2, num_envs=1, device="cpu")
        memory.create_tensor(name="observations", size=3, dtype=torch.float32)
        memory.add_samples(observations=torch.zeros(1, 3))

    # -- env ----------------------------------------------------------------------------------
    def run_env(self, scenario: EnvScenario) -> Trace:
        """The time steps skrl's ``GymnasiumWrapper`` returns for ``reset`` and ``steps - 1``
        calls of ``step`` with action 0: one event per call; under ``SAME_STEP`` a row that
        ended episodes is recorded as the LASTs (``infos["final_obs"]``) and then the FIRSTs."""
        events: list[Event] = []
        with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
            env = _wrapped(scenario.env, scenario.seed)
            b = env.num_envs
            rows = _Rows(b)
            obs, _ = env.reset()
            zeros = np.zeros(b)
            events.append(env_step(0, rows.steps(_as_numpy(obs), zeros, zeros, zeros)))
            actions = torch.zeros((b, 1), dtype=torch.int64)
            same_step = scenario.env.autoreset == "same-step"
            for _ in range(scenario.steps - 1):
                obs, reward, terminated, truncated, infos = env.step(actions)
                if not same_step:
                    events.append(
                        env_step(
                            0,
                            rows.steps(
                                _as_numpy(obs),
                                _as_numpy(reward),
                                _as_numpy(terminated),
                                _as_numpy(truncated),
                            ),
                        )
                    )
                    continue
                events.extend(self._same_step(obs, reward, terminated, truncated, infos))
        return Trace(tuple(events), {"producer": producer("skrl")})

    @staticmethod
    def _same_step(
        obs: Any, reward: Any, terminated: Any, truncated: Any, infos: Any
    ) -> list[Event]:
        term = _as_numpy(terminated).reshape(-1).astype(bool)
        trunc = _as_numpy(truncated).reshape(-1).astype(bool)
        rewards = _as_numpy(reward).reshape(-1).astype(np.float64)
        items = decode_items(_as_numpy(obs))
        ended = term | trunc
        row = [Step(item, _MID, float(r), action=0) for item, r in zip(items, rewards)]
        for e in np.flatnonzero(ended):
            last = decode_item(np.asarray(infos["final_obs"][e]))
            row[e] = Step(last, _LAST, float(rewards[e]), 0.0 if term[e] else 1.0, action=0)
        out: list[Event] = [env_step(0, row)]
        firsts = [Step(items[e], _FIRST, 0.0, action=0) for e in np.flatnonzero(ended)]
        if firsts:
            out.append(env_step(0, firsts))
        return out

    # -- trainer ------------------------------------------------------------------------------
    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One ``SequentialTrainer.train``: of ``PPO_RNN`` with a counting recurrent policy for
        whole-buffer and on-policy scenarios (:mod:`xpspec.adapters.skrl_state`), else of a
        ``DQN`` agent whose ``RandomMemory`` samples with the configuration's ``replacement``
        (:mod:`xpspec.adapters.skrl_trainer`)."""
        cfg = scenario.trainer
        if cfg.whole_buffer or cfg.mode == "on-policy":
            return run_ppo_trainer(scenario, self.config.time_limit_bootstrap)
        return run_trainer(scenario, self.config.replacement)

    # -- learner ------------------------------------------------------------------------------
    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """One PPO update by skrl's own code (see :class:`_LearnerRun`)."""
        return _LearnerRun(scenario, self.config.time_limit_bootstrap).run()

    # -- recurrent ----------------------------------------------------------------------------
    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """One ``SequentialTrainer.train`` of ``PPO_RNN`` with a counting recurrent policy
        (:mod:`xpspec.adapters.skrl_recurrent`), ``time_limit_bootstrap`` from the
        configuration (it changes rewards only)."""
        return run_recurrent(scenario, self.config.time_limit_bootstrap)

    # -- replay -------------------------------------------------------------------------------
    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill a ``RandomMemory`` with the wrapper's observations, one ``add_samples`` per
        vector step; then ``draws`` calls of ``RandomMemory.sample`` (see the module
        docstring). A draw skrl answers with no index, or by raising from torch's index draw
        (a negative or empty range: nothing stored, or too few rows for the sequence), is an
        empty draw (``replay.no-window``)."""
        s = scenario.sampling
        if s.boundary != "cross":
            raise _unsupported(
                f"boundary policy {s.boundary!r}: RandomMemory.sample takes any "
                "sequence_length consecutive rows of an env, across episode ends",
                "memories/torch/random.py:RandomMemory.sample",
            )
        if s.period != 1:
            raise _unsupported(
                f"period {s.period}: RandomMemory.sample starts a sequence at any row",
                "memories/torch/random.py:RandomMemory.sample",
            )
        if s.distribution != "uniform-windows":
            raise _unsupported(
                f"sampling distribution {s.distribution!r}: RandomMemory draws a start index "
                "uniformly, with no configuration of the distribution",
                "memories/torch/random.py:RandomMemory.sample",
            )
        events: list[Event] = []
        with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
            env = _wrapped(scenario.env, scenario.seed)
            b = env.num_envs
            memory = RandomMemory(
                memory_size=scenario.capacity,
                num_envs=b,
                device="cpu",
                replacement=self.config.replacement,
            )
            memory.create_tensor(name="observations", size=3, dtype=torch.float32)
            rows = _Rows(b)
            obs, _ = env.reset()
            zeros = np.zeros(b)
            steps = rows.steps(_as_numpy(obs), zeros, zeros, zeros)
            actions = torch.zeros((b, 1), dtype=torch.int64)
            for i in range(scenario.fill_steps):
                memory.add_samples(observations=obs)
                events.append(store(0, steps))
                if i == scenario.fill_steps - 1:
                    break
                obs, reward, terminated, truncated, _ = env.step(actions)
                steps = rows.steps(
                    _as_numpy(obs), _as_numpy(reward), _as_numpy(terminated), _as_numpy(truncated)
                )
            length = s.window_length
            for draw in range(scenario.draws):
                try:
                    (batch,) = memory.sample(
                        ["observations"], batch_size=scenario.batch_size, sequence_length=length
                    )
                except RuntimeError as exc:  # torch.randperm/randint of a negative size
                    if "negative dimension" not in str(exc) and "but got from=0 >=" not in str(exc):
                        raise
                    events.append(Sampled(draw, ()))
                    continue
                observations = _as_numpy(batch[0])
                if observations.shape[0] == 0:
                    events.append(Sampled(draw, ()))
                    continue
                windows = observations.reshape(-1, length, observations.shape[-1])
                events.append(Sampled(draw, decode_windows(windows)))
        return Trace(tuple(events), {"producer": producer("skrl")})


# -- learner-side preprocessing ---------------------------------------------------------------
class _Policy(CategoricalMixin, Model):
    """Uniform logits over the toy env's actions. One parameter, which the logits multiply
    by zero, gives PPO's optimiser something to hold; the policy never changes."""

    def __init__(self, observation_space: Any, action_space: Any) -> None:
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device="cpu"
        )
        CategoricalMixin.__init__(self)
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def compute(
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        n = inputs["observations"].shape[0]
        return torch.zeros(n, self.num_actions) * self.anchor, {}


class _Value(DeterministicMixin, Model):
    """The toy value ``V(o) = value_scale * t(o)`` as a skrl value model."""

    def __init__(self, observation_space: Any, action_space: Any, scale: float) -> None:
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device="cpu"
        )
        DeterministicMixin.__init__(self)
        self.scale = scale

    def compute(
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return toy_value(inputs["observations"], self.scale), {}


class _LearnerRun:
    """One ``PPO`` update of skrl 2.1.1 on the toy env, driven by ``SequentialTrainer``.

    ``rollouts = timesteps = steps - 1`` (every env's first ``steps`` time steps: the trainer
    acts on ``steps - 1`` observations and the last is the ``next_observations`` of the final
    transition, which ``PPO.update`` values as ``last_values``), ``learning_epochs =
    num_epochs``, ``mini_batches = ceil(rows / minibatch_size)`` (skrl is configured with a
    count of mini-batches, ``memories/torch/base.py:Memory.sample_by_index`` splits the
    permuted indexes with ``np.array_split``), ``discount_factor = gamma``, ``gae_lambda =
    lam``, ``time_limit_bootstrap`` from the adapter's configuration. What is recorded is read
    from skrl: the memory's ``observations``, ``values``, ``returns``, ``advantages`` and
    ``terminated``/``truncated`` after the update, and the observations of every mini-batch
    ``RandomMemory.sample`` returned to the update.

    Under Gymnasium's ``NEXT_STEP`` autoreset (the learner scenarios' mode, and
    ``SyncVectorEnv``'s default) the trainer also acts on an episode's final observation: the
    vector env ignores that action and returns the next episode's first observation with
    reward 0, and ``PPO.record_transition`` stores the row. Such a row is recorded as the
    episode's row ``L`` with skrl's values and loss mask 1 (it is in the update's mini-batches);
    an in-progress episode has no row ``L`` in the memory and gets a stand-in (zeros, loss
    mask 0). The adapter does not declare ``bootstrap``. The update plan names the training
    rows ``0 .. N - 1`` env-major in time order, and the rows of final observations after them.
    skrl computes no n-step return (no torch agent has one), so no ``nstep`` event is recorded.
    """

    def __init__(self, scenario: LearnerScenario, time_limit_bootstrap: bool) -> None:
        self.scenario = scenario
        self.tlb = time_limit_bootstrap
        b = scenario.env.num_envs
        if scenario.num_learners != 1:
            raise _unsupported(
                f"{scenario.num_learners} learners: a skrl agent trains alone; distributed "
                "runs give each process envs of its own, never episodes split across learners",
                "agents/torch/ppo/ppo.py:PPO.update",
            )
        if scenario.steps < 2:
            raise _unsupported(
                f"{scenario.steps} time steps: no transition to train on",
                "trainers/torch/sequential.py:SequentialTrainer.train",
            )
        self.timesteps = scenario.steps - 1
        self.rows = self.timesteps * b
        self.mini_batches = -(-self.rows // scenario.minibatch_size)

    def run(self) -> Trace:
        sc = self.scenario
        with seeded_quiet(sc.seed, ("torch",), _LOGGERS):
            env = _wrapped(sc.env, sc.seed)
            memory = RandomMemory(memory_size=self.timesteps, num_envs=env.num_envs, device="cpu")
            models = {
                "policy": _Policy(env.observation_space, env.action_space),
                "value": _Value(env.observation_space, env.action_space, float(sc.value_scale)),
            }
            cfg = PPO_CFG(
                rollouts=self.timesteps,
                learning_epochs=sc.num_epochs,
                mini_batches=self.mini_batches,
                discount_factor=float(sc.gamma),
                gae_lambda=float(sc.lam),
                time_limit_bootstrap=self.tlb,
                experiment={"write_interval": 0, "checkpoint_interval": 0},
            )
            agent = PPO(
                models=models,
                memory=memory,
                observation_space=env.observation_space,
                action_space=env.action_space,
                device="cpu",
                cfg=cfg,
            )
            batches: list[list[Item]] = []
            sample = memory.sample

            def recorded(names: list[str], **kwargs: Any) -> Any:
                out = sample(names, **kwargs)
                at = names.index("observations")
                batches.extend(decode_items(_as_numpy(batch[at])) for batch in out)
                return out

            memory.sample = recorded
            ended = self._record_endings(env)
            trainer = headless_trainer(env, agent, self.timesteps)
            trainer.train()
            rows = self._rows(memory, ended)
        events: list[Event] = list(rollout_advantages(rows))
        events.append(rollout_plan(rows, batches))
        return Trace(tuple(events), {"producer": producer("skrl")})

    @staticmethod
    def _record_endings(env: Wrapper) -> list[np.ndarray]:
        """Per vector step, which envs the wrapped env's ``step`` ended (terminated or
        truncated), as the trainer received them."""
        ended: list[np.ndarray] = []
        step = env.step

        def stepped(actions: Any) -> Any:
            out = step(actions)
            ended.append(_as_numpy(out[2]).reshape(-1) | _as_numpy(out[3]).reshape(-1))
            return out

        env.step = stepped
        return ended

    def _rows(self, memory: Any, ended: list[np.ndarray]) -> list[list[RolloutRow]]:
        """Every env's rows in time order, read from the memory after the update (the
        advantage as ``returns - values``). A row follows an episode's end when the memory's
        ``terminated`` or ``truncated`` says so; skrl 2.0.0's PPO stores no ``truncated``
        (``agents/torch/ppo/ppo.py:PPO.init``), and there the env's own endings as the trainer
        received them (``ended``) say it: they only place the final-observation rows, every
        value recorded is still skrl's."""
        values = _as_numpy(memory.get_tensor_by_name("values"))[..., 0]
        returns = _as_numpy(memory.get_tensor_by_name("returns"))[..., 0]
        if "truncated" in memory.get_tensor_names():
            done = (
                _as_numpy(memory.get_tensor_by_name("terminated"))[..., 0]
                | _as_numpy(memory.get_tensor_by_name("truncated"))[..., 0]
            )
        else:
            done = np.stack(ended[: self.timesteps]).astype(bool)
        return rollout_rows(
            _as_numpy(memory.get_tensor_by_name("observations")),
            done,
            returns - values,
            returns,
            _as_numpy(memory.get_tensor_by_name("advantages"))[..., 0],
        )
