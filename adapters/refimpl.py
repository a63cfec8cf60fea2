"""The reference adapter: runs refimpl itself. It passes every clause by construction of the
spec, and it is the model for adapters of real frameworks."""

from __future__ import annotations

import torch

import refimpl
from conformance.protocol import PROTOCOL_VERSION, AdapterInfo
from conformance.scenario import EnvScenario, ReplayScenario, TrainerScenario
from refimpl.recorder import Recorder
from refimpl.replay import ReplayBuffer
from refimpl.toy_envs.batched import ToyBatchEnv
from refimpl.trace import Sampled, Trace
from refimpl.trainer import train

__all__ = ["RefimplAdapter"]

_FIELDS = {
    "observation": ((3,), torch.float32),
    "step_type": ((), torch.int64),
    "reward": ((), torch.float32),
    "discount": ((), torch.float32),
}


def _window(obs: list[list[float]], mask: list[bool]) -> tuple:
    return tuple((int(o[0]), int(o[1]), int(o[2])) if m else None for o, m in zip(obs, mask))


class RefimplAdapter:
    """Adapter over :mod:`refimpl`."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="refimpl",
            framework="xpspec refimpl",
            framework_version="0.1.0",
            protocol_version=PROTOCOL_VERSION,
            capabilities=("env", "trainer", "replay"),
            extra_versions={"torch": torch.__version__},
        )

    def smoke(self) -> None:
        refimpl.train(refimpl.EnvSpec(), refimpl.TrainerConfig(num_iterations=1), record=False)

    def run_env(self, scenario: EnvScenario) -> Trace:
        env = ToyBatchEnv(scenario.env, scenario.seed)
        recorder = Recorder()
        ts = env.reset()
        zeros = torch.zeros(env.num_envs, dtype=torch.int64)
        for _ in range(scenario.steps):
            rows = {
                "observation": ts.observation, "step_type": ts.step_type, "reward": ts.reward,
                "discount": ts.discount, "policy_state": ts.observation[:, 2], "action": zeros,
            }
            recorder.env_step(0, rows)
            ts = env.step(zeros)
        return recorder.trace({"producer": "refimpl"})

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        result = train(scenario.env, scenario.trainer, scenario.preprocess, scenario.sampling, scenario.seed)
        return result.trace

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        env = ToyBatchEnv(scenario.env, scenario.seed)
        buffer = ReplayBuffer(env.num_envs, scenario.capacity, _FIELDS)
        recorder = Recorder()
        ts = env.reset()
        action = torch.zeros(env.num_envs, dtype=torch.int64)
        for _ in range(scenario.fill_steps):
            rows = {"observation": ts.observation, "step_type": ts.step_type, "reward": ts.reward,
                    "discount": ts.discount, "annotation": torch.zeros(env.num_envs)}
            buffer.add_row({k: rows[k] for k in _FIELDS})
            recorder.store(0, rows)
            ts = env.step(action)
        events = list(recorder.trace().events)
        generator = torch.Generator().manual_seed(scenario.seed)
        for draw in range(scenario.draws):
            s = buffer.sample(scenario.batch_size, scenario.sampling, generator)
            windows = tuple(_window(o, m) for o, m in zip(s.data["observation"].tolist(), s.mask.tolist()))
            events.append(Sampled(draw, windows))
        return Trace(tuple(events), {"producer": "refimpl"})
