"""Adapter over skrl 2.1.1 (torch backend): its Gymnasium wrapper (``GymnasiumWrapper``) and
its ``RandomMemory``, driven on the toy env and recorded at their seams. Nothing of skrl is
re-implemented; sources are cited as ``file:function`` of the installed ``skrl`` package.

**Time steps.** skrl wraps a Gymnasium ``VectorEnv`` as it is (``envs/wrappers/torch/
gymnasium_envs.py:GymnasiumWrapper``): ``reset`` resets the vector env once and afterwards
returns the last observation, relying on the vector env's own autoreset, and ``step`` passes
the vector env's observation, reward, ``terminated`` and ``truncated`` through as tensors
(``infos`` untouched). ``run_env`` builds the toy vector env in the scenario's autoreset mode
and records every time step the wrapper returns (a ``SAME_STEP`` row that ends an episode
holds two time steps, the LAST read from ``infos["final_obs"]``).

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
    from skrl.envs.wrappers.torch import Wrapper, wrap_env
    from skrl.memories.torch import RandomMemory
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError("xpspec.adapters.skrl needs skrl 2.1.1: pip install 'xpspec[adapter-skrl]'") from exc

import gymnasium
from gymnasium.vector import AutoresetMode
import numpy as np
import torch

from xpspec.kit.events import env_step, store
from xpspec.kit.items import decode_item, decode_items, decode_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.steps import Step
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import EnvScenario, ReplayScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Sampled, Trace
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
    (skrl's default is ``False``)."""

    replacement: bool = False


def _wrapped(spec: EnvSpec, seed: int) -> Wrapper:
    """The toy vector env in the scenario's autoreset mode, through skrl's ``wrap_env``
    (``envs/wrappers/torch/__init__.py:wrap_env``, which picks ``GymnasiumWrapper``)."""
    same = spec.autoreset == "same-step"
    mode = AutoresetMode.SAME_STEP if same else AutoresetMode.NEXT_STEP
    return wrap_env(ToyVectorEnv(spec, seed, autoreset_mode=mode), wrapper="gymnasium", verbose=False)


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
                out.append(Step(item, _FIRST, 0.0, action=0))
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

    def __init__(self, config: SkrlConfig = SkrlConfig()) -> None:
        self.config = config

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="skrl",
            framework="skrl",
            framework_version=skrl.__version__,
            protocol_version=PROTOCOL_VERSION,
            capabilities=("env", "replay"),
            issue_tracker="https://github.com/Toni-SM/skrl/issues",
            notes=(
                "torch backend: GymnasiumWrapper over the toy vector env; "
                f"RandomMemory(replacement={self.config.replacement})"
            ),
            extra_versions={
                "torch": torch.__version__,
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        if skrl.__version__ != _VERSION:
            raise RuntimeError(f"skrl: expected {_VERSION}, got {skrl.__version__}")
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
                    events.append(env_step(0, rows.steps(_as_numpy(obs), _as_numpy(reward), _as_numpy(terminated), _as_numpy(truncated))))
                    continue
                events.extend(self._same_step(obs, reward, terminated, truncated, infos))
        return Trace(tuple(events), {"producer": f"skrl {_VERSION}"})

    @staticmethod
    def _same_step(obs: Any, reward: Any, terminated: Any, truncated: Any, infos: Any) -> list[Event]:
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

    # -- replay -------------------------------------------------------------------------------
    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill a ``RandomMemory`` with the wrapper's observations, one ``add_samples`` per
        vector step; then ``draws`` calls of ``RandomMemory.sample`` (see the module
        docstring). A draw skrl answers with no index is an empty draw; one it answers by
        raising is recorded as the run's ``stopped`` exception."""
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
        header = {"producer": f"skrl {_VERSION}"}
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
                except RuntimeError as exc:
                    header["stopped"] = f"RuntimeError: {exc}"
                    break
                observations = _as_numpy(batch[0])
                if observations.shape[0] == 0:
                    events.append(Sampled(draw, ()))
                    continue
                windows = observations.reshape(-1, length, observations.shape[-1])
                events.append(Sampled(draw, decode_windows(windows)))
        return Trace(tuple(events), header)
