"""Collection and storage side by side: the reference trainer and a framework's own collector
and replay buffer on the same work, timed in one process.

The work: ``B`` toy envs (``RandomSchedule(5, 50)`` episodes, seed 0) stepped ``STEPS`` vector
steps, every time step stored in a buffer of ``CAPACITY`` items per env, no training. Each
framework steps the gymnasium face of the toy env (``make_env_fns``, what its adapter drives)
through its own vector env, with the cheapest policy it takes, into its own buffer:

- Stable-Baselines3 (2.9.2): ``DQN.learn`` with ``learning_starts`` past the run, so it
  collects with random actions and stores every transition in its ``ReplayBuffer`` and never
  trains (``DummyVecEnv``);
- Tianshou (2.0.1): ``Collector.collect(n_step=...)`` with a constant policy into a
  ``VectorReplayBuffer`` (``DummyVectorEnv``);
- TorchRL (0.14.1): a ``Collector`` with a constant policy over ``GymWrapper(SyncVectorEnv)``,
  each batch ``extend``-ed into a ``ReplayBuffer(LazyTensorStorage)``;
- refimpl: its ``Trainer`` on its batched face of the same env, every train call held back by
  the warm-up gate (``initial_collect_steps`` past the run), recording off.

Each framework runs in a venv of its own (``nox -s bench_peers``, the adapters' install
lists); refimpl is timed in the same process, alternating with the framework, so the ratio
(framework / refimpl env steps per second, medians of ``repeats``) is one run's.

Run: ``python -m benchmarks.bench_peers --framework {refimpl,sb3,tianshou,torchrl}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time
from collections.abc import Callable
from fractions import Fraction
from importlib import metadata
from typing import Any

import torch

from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import RandomSchedule
from xpspec.refimpl.toy_envs.gym_env import make_env_fns
from xpspec.refimpl.trainer import Trainer

__all__ = ["FRAMEWORKS", "run"]

STEPS = 2_000
"""Vector steps per timed run."""
CAPACITY = 10_000
SIZES = (1, 16)


def _spec(num_envs: int) -> EnvSpec:
    return EnvSpec(num_envs, (RandomSchedule(5, 50),), num_actions=2)


def _refimpl(num_envs: int, steps: int) -> Callable[[], None]:
    config = TrainerConfig(
        unroll_length=Fraction(8),
        num_iterations=steps // 8,
        capacity=CAPACITY,
        initial_collect_steps=10**12,
    )
    trainer = Trainer(_spec(num_envs), config)

    def work() -> None:
        trainer.run()

    return work


def _sb3(num_envs: int, steps: int) -> Callable[[], None]:
    from stable_baselines3 import DQN
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv(make_env_fns(_spec(num_envs), 0))
    model = DQN(
        "MlpPolicy",
        venv,
        buffer_size=CAPACITY * num_envs,
        learning_starts=10**12,
        train_freq=1,
        seed=0,
        device="cpu",
    )

    def work() -> None:
        model.learn(total_timesteps=steps * num_envs)

    return work


def _tianshou(num_envs: int, steps: int) -> Callable[[], None]:
    import numpy as np
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch, Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv

    from xpspec.refimpl.toy_envs.gym_env import toy_action_space, toy_observation_space

    spec = _spec(num_envs)

    class Constant(Policy):
        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            return Batch(act=np.zeros(len(batch.obs), dtype=np.int64))

    policy = Constant(
        action_space=toy_action_space(spec),
        observation_space=toy_observation_space(spec),
        action_bound_method=None,
    )
    buffer = VectorReplayBuffer(CAPACITY * num_envs, num_envs)
    collector = Collector(policy, DummyVectorEnv(make_env_fns(spec, 0)), buffer)

    def work() -> None:
        collector.reset()
        collector.collect(n_step=steps * num_envs)

    return work


def _torchrl(num_envs: int, steps: int) -> Callable[[], None]:
    from gymnasium.vector import AutoresetMode, SyncVectorEnv
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.envs import GymWrapper

    class Constant(torch.nn.Module):
        def forward(self, observation: torch.Tensor) -> torch.Tensor:
            return torch.zeros(observation.shape[:-1], dtype=torch.int64)

    def work() -> None:
        vector = SyncVectorEnv(
            make_env_fns(_spec(num_envs), 0), autoreset_mode=AutoresetMode.DISABLED
        )
        env = GymWrapper(vector, categorical_action_encoding=True)
        policy = TensorDictModule(Constant(), in_keys=["observation"], out_keys=["action"])
        buffer = ReplayBuffer(storage=LazyTensorStorage(CAPACITY * num_envs))
        collector = Collector(
            env, policy=policy, frames_per_batch=8 * num_envs, total_frames=steps * num_envs
        )
        for batch in collector:
            buffer.extend(batch.reshape(-1))
        collector.shutdown()

    return work


FRAMEWORKS: dict[str, tuple[str, Callable[[int, int], Callable[[], None]]]] = {
    "refimpl": ("xpspec", _refimpl),
    "sb3": ("stable-baselines3", _sb3),
    "tianshou": ("tianshou", _tianshou),
    "torchrl": ("torchrl", _torchrl),
}


def _rate(make: Callable[[int, int], Callable[[], None]], num_envs: int, steps: int) -> float:
    """Env steps per second of one run built by ``make`` (building it is not timed)."""
    work = make(num_envs, steps)
    start = time.perf_counter()
    work()
    return steps * num_envs / (time.perf_counter() - start)


def run(framework: str, repeats: int = 3, steps: int = STEPS) -> dict[int, float]:
    """Print, per ``B``, the framework's and refimpl's env steps/s and their ratio."""
    package, make = FRAMEWORKS[framework]
    torch.set_num_threads(1)
    version = metadata.version(package)
    print(
        f"collection + storage, {steps} vector steps, capacity {CAPACITY} per env, "
        f"median of {repeats}; {package} {version}, torch {torch.__version__}"
    )
    ratios = {}
    if framework == "refimpl":  # alone: its rates, no ratio
        for b in SIZES:
            rate = statistics.median(_rate(_refimpl, b, steps) for _ in range(repeats))
            print(f"  B = {b:>3}: refimpl {rate / 1e3:8.1f}k env steps/s")
        return ratios
    for b in SIZES:
        _rate(make, b, steps // 10)  # warm-up
        _rate(_refimpl, b, steps // 10)
        rates: dict[str, list[float]] = {framework: [], "refimpl": []}
        for repeat in range(repeats):
            order = [framework, "refimpl"] if repeat % 2 == 0 else ["refimpl", framework]
            for name in order:
                rates[name].append(_rate(FRAMEWORKS[name][1], b, steps))
        med = {name: statistics.median(values) for name, values in rates.items()}
        ratios[b] = med[framework] / med["refimpl"]
        print(
            f"  B = {b:>3}: {framework} {med[framework] / 1e3:8.1f}k env steps/s, refimpl "
            f"{med['refimpl'] / 1e3:8.1f}k; {framework} / refimpl {ratios[b]:.3f}"
        )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS), default="refimpl")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    run(args.framework, args.repeats, args.steps)


if __name__ == "__main__":
    main()
