"""Frame stacking in RLlib 2.60.0 (clauses ``stack.*``): the connector pieces of RLlib's frame
stacking example (``examples/connectors/frame_stacking.py``), ``FrameStackingEnvToModule`` in
the env runner's env-to-module pipeline and ``FrameStackingLearner`` in the learner connector
pipeline (both ``connectors/common/frame_stacking.py:FrameStacking``). Sources are cited as
``file:function`` under ``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

- **The env.** ``FrameStacking`` stacks image-like frames whose last axis has size 1
  (``_convert_individual_space`` asserts it; the env-to-module piece concatenates along axis
  2), as RLlib's Atari wrapper makes them. Each toy env is wrapped in Gymnasium's
  ``ReshapeObservation(env, (3, 1, 1))``, the one change a user makes for it; the vector env
  is the replay row's (``vector_entry_point``, Gymnasium's ``NEXT_STEP`` autoreset).
  ``episode_lookback_horizon = k - 1``: RLlib documents that an env-to-module connector can
  look back only that far into the preceding chunk of an episode
  (``algorithms/algorithm_config.py``, ``env_runners``), and a stack needs ``k - 1`` frames.
- **Rollout**: ``SingleAgentEnvRunner.sample(num_timesteps=1)`` (``truncate_episodes``) until
  ``steps`` vector steps have been taken (one more when the last call's first step only
  returned reset observations, which RLlib does not count: every step whose items the buffer
  can sample is recorded), with ``env_to_module_connector`` returning
  ``FrameStackingEnvToModule(num_frames=k)``. The stack the policy receives at a vector step
  is the ``Columns.OBS`` batch its RLModule's forward call got, read there (one row per env,
  ``(3, 1, k)``, frame ``i`` at ``[..., i]``, oldest first); the item it belongs to is the
  observation the vector env returned last (a ``SyncVectorEnv`` that keeps it).
- **Storage and sampling**: every chunk goes into an ``EpisodeReplayBuffer(capacity * B)``
  (capacity in timesteps over all episodes, whole episodes evicted, oldest first; the replay
  row's finding), which stores single frames. A draw is ``sample(batch_size_B=2 * batch_size,
  batch_length_T=1, n_step=1, lookback=k - 1, sample_episodes=True)`` (RLlib counts
  ``len + 1`` per sampled sequence toward ``batch_size_B``): one transition per item, sliced from its stored episode with ``k - 1`` steps of lookback
  (``utils/replay_buffers/episode_replay_buffer.py:_sample_episodes``), then
  ``FrameStackingLearner(num_frames=k)`` called as the learner pipeline calls its pieces, on
  the sampled episodes: the ``Columns.OBS`` rows it built are the sampled stacks, the item the
  stack's own transition start (the sampled episode's first observation).

RLlib pads with zeros (``get_observations(..., fill=0.0)`` past the lookback, in both pieces):
variant zero-fill of ``stack.episode-start``. Padding ``repeat-first`` is what the toy stack
scenarios ask by default; RLlib has no other fill, and the row records what it does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
    from ray.rllib.connectors.learner.frame_stacking import FrameStackingLearner
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

from xpspec.adapters.rllib import _SOURCE, _seeded
from xpspec.kit.items import decode_item, decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace
from xpspec.refimpl.toy_envs.gym_env import make_env_fns, toy_action_space, toy_observation_space

__all__ = ["run_stack"]

_FRAME = (3, 1, 1)
"""The toy observation as an image-like frame whose last axis RLlib stacks along."""


class _TapVectorEnv(gymnasium.vector.SyncVectorEnv):
    """Gymnasium's ``SyncVectorEnv``, keeping the observations it returned last."""

    last: Any = None

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        obs, infos = super().reset(*args, **kwargs)
        self.last = np.array(obs)
        return obs, infos

    def step(self, actions: Any) -> Any:
        out = super().step(actions)
        self.last = np.array(out[0])
        return out


@dataclass
class _Taps:
    """Where the vector env and the module report to (one run)."""

    env: _TapVectorEnv | None = None
    rollout: list[tuple[list[Item], tuple[tuple[Item, ...], ...]]] | None = None


_TAPS = _Taps()


@dataclass(frozen=True)
class _FrameEnv:
    """RLlib's env creator: the toy envs, each reshaped to ``(3, 1, 1)``."""

    spec: EnvSpec
    seed: int

    def __call__(self, config: Any) -> gymnasium.vector.SyncVectorEnv:
        fns = [
            (lambda fn=fn: gymnasium.wrappers.ReshapeObservation(fn(), _FRAME))
            for fn in make_env_fns(self.spec, self.seed)
        ]
        env = _TapVectorEnv(fns)
        _TAPS.env = env
        return env


def _stacks(obs: np.ndarray) -> tuple[tuple[Item, ...], ...]:
    """RLlib's stacked rows ``[N, 3, 1, k]`` as ``N`` stacks of ``k`` decoded frames."""
    array = np.asarray(obs, dtype=np.float64)
    return tuple(tuple(decode_items(row[:, 0, :].T)) for row in array)


class _StackTap(TorchRLModule):
    """The user's RLModule: logits from a linear layer over the stacked observation; each
    exploration forward call's ``Columns.OBS`` is recorded with the items the env returned."""

    def setup(self) -> None:
        size = int(np.prod(self.observation_space.shape))
        self._head = torch.nn.Linear(size, int(self.action_space.n))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        if _TAPS.rollout is not None and _TAPS.env is not None:
            items = decode_items(_TAPS.env.last.reshape(-1, 3))
            _TAPS.rollout.append((items, _stacks(obs.detach().cpu().numpy())))
        return {Columns.ACTION_DIST_INPUTS: self._head(obs.reshape(obs.shape[0], -1) / 64.0)}


def _config(sc: StackScenario) -> PPOConfig:
    k = sc.num_frames
    space: Any = toy_observation_space(sc.env)
    frame_space = gymnasium.spaces.Box(
        np.reshape(space.low, _FRAME), np.reshape(space.high, _FRAME), dtype=np.float32
    )
    return (
        PPOConfig()
        .environment(
            _FrameEnv(sc.env, sc.seed),
            observation_space=frame_space,
            action_space=toy_action_space(sc.env),
        )
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=sc.env.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=1,
            batch_mode="truncate_episodes",
            env_to_module_connector=lambda env, spaces=None, device=None: FrameStackingEnvToModule(
                num_frames=k
            ),
            episode_lookback_horizon=max(1, k - 1),
        )
        .rl_module(rl_module_spec=RLModuleSpec(module_class=_StackTap))
        .learners(num_learners=0)
    )


def _support(sc: StackScenario) -> None:
    if sc.env.goals:
        raise Unsupported(
            "goal-conditioned (Dict) observations: RLlib 2.60.0's FrameStacking stacks a Box "
            "whose last axis has size 1 (_convert_individual_space asserts both)",
            f"{_SOURCE}/connectors/common/frame_stacking.py",
        )
    if sc.env.autoreset != "next-step":
        raise Unsupported(
            "env.autoreset 'same-step': RLlib 2.60.0's SingleAgentEnvRunner._sample is written "
            "for Gymnasium's NEXT_STEP autoreset",
            f"{_SOURCE}/env/single_agent_env_runner.py",
        )


def _sampled(buffer: Any, sc: StackScenario) -> tuple[list[Item], tuple[tuple[Item, ...], ...]]:
    """One draw: RLlib's sampled transitions and the stacks ``FrameStackingLearner`` built."""
    k = sc.num_frames
    episodes = buffer.sample(
        batch_size_B=2 * sc.batch_size,
        batch_length_T=1,
        n_step=1,
        lookback=k - 1,
        sample_episodes=True,
    )
    if len(episodes) != sc.batch_size:
        raise RuntimeError(f"sampled transitions: expected {sc.batch_size}, got {len(episodes)}")
    for episode in episodes:
        episode.to_numpy()
    piece = FrameStackingLearner(num_frames=k)
    batch: dict[str, Any] = {}
    piece(rl_module=None, batch=batch, episodes=episodes, shared_data={})
    # The piece groups its rows by episode id (ConnectorV2.add_n_batch_items), each
    # episode's in the order it met them: the j-th sampled episode of an id has its j-th row.
    columns = {key: list(rows) for key, rows in batch[Columns.OBS].items()}
    rows = [np.asarray(columns[(ep.id_,)].pop(0))[0] for ep in episodes]
    items = [decode_item(np.asarray(ep.get_observations(0)).reshape(3)) for ep in episodes]
    return items, _stacks(np.stack(rows))


def run_stack(sc: StackScenario) -> Trace:
    """The rollout's stacks as the RLModule received them, then ``draws`` batches sampled
    from an ``EpisodeReplayBuffer`` and stacked by ``FrameStackingLearner`` (see the module
    docstring)."""
    _support(sc)
    events: list[Event] = []
    with _seeded(sc.seed):
        _TAPS.rollout = []
        try:
            runner = SingleAgentEnvRunner(config=_config(sc))
            buffer: Any = EpisodeReplayBuffer(capacity=sc.capacity * sc.env.num_envs)
            buffer.rng = np.random.default_rng(sc.seed)
            try:
                while len(_TAPS.rollout) < sc.steps:
                    buffer.add(runner.sample(num_timesteps=1))
            finally:
                runner.stop()
            for index, (items, stacks) in enumerate(_TAPS.rollout):
                events.append(Stacked("rollout", index, *item_columns(items), stacks))
        finally:
            _TAPS.rollout, _TAPS.env = None, None
        for draw in range(sc.draws):
            items, stacks = _sampled(buffer, sc)
            events.append(Stacked("sample", draw, *item_columns(items), stacks))
    return Trace(tuple(events), {"producer": "rllib", "seed": sc.seed})
