"""The loss mask of RLlib 2.60.0's DQN train loop (capability ``loss-mask``, clause
``timestep.loss-mask-last``): what ``DQNTorchLearner.compute_loss_for_module`` receives.
Sources are cited as ``file:function`` under ``ray/rllib`` of the installed wheel (commit
``b7f4259e``).

**Sequences.** The trainer's windows of ``W >= 2`` items are DQN's replayed sequences: with a
stateful module, ``DQN._training_step_new_api_stack`` samples its ``EpisodeReplayBuffer``
with ``batch_length_T = model_config["max_seq_len"]`` and ``lookback = 1``
(``algorithms/dqn/dqn.py``). The module is the user's counting Q module
(:class:`~xpspec.adapters.rllib_recurrent.CountingQModule`, stateful in the env runner's copy
and in the learner's) with ``max_seq_len = W``. The buffer slices a stored episode from a
uniformly drawn transition start, clipped at the episode's end or its newest stored step
(``utils/replay_buffers/episode_replay_buffer.py``, ``_sample_episodes``), and counts each
sequence of ``n`` transitions as ``n + 1`` timesteps toward ``train_batch_size_per_learner``
(set to ``mini_batch_size * (W + 1)``: that many full sequences; clipped ones count less, so
RLlib draws more of them). The learner connector zero-pads every sequence to ``max_seq_len``
and writes ``SEQ_LENS`` and ``LOSS_MASK`` (``connectors/common/
add_time_dim_to_batch_and_zero_pad.py``). This is the spec's ``pad`` boundary policy: a
sequence never runs on into the env's next episode; ``cross`` and ``forbid`` are
:class:`~xpspec.protocol.adapter.Unsupported`. Windows of one item stay single transitions
with a learner module that has no state (:mod:`xpspec.adapters.rllib_state` says why).

**Recorded** (:func:`loss_windows`, called by the trainer's learner from its
``compute_loss_for_module`` with the batch DQN's loss receives): one window per batch row, its
items decoded from the row's observations, ``None`` at positions past its ``SEQ_LENS`` entry;
the loss mask is the batch's ``LOSS_MASK`` as the loss reads it (``dqn_torch_learner.py``:
``if Columns.LOSS_MASK in batch``; ``burn_in_len`` is 0, so nothing more is cleared). A batch
without ``LOSS_MASK`` (windows of one item) is averaged over every row (the loss's ``else``
branch: ``possibly_masked_mean = torch.mean``): mask 1 on every row. A stored LAST item is
never a row: DQN's rows are transitions, the final observation is only a ``NEXT_OBS``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from xpspec.adapters.rllib_recurrent import CountingQModule
from xpspec.adapters.rllib_state import sequence_timesteps, stateful_module
from xpspec.kit.items import decode_items
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Window

__all__ = ["LossWindows", "loss_windows", "sequence_config", "sequence_support"]

_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"


@dataclass(frozen=True)
class LossWindows:
    """The windows of one loss call (``None`` marks padding) and the loss mask it applied."""

    windows: tuple[Window, ...]
    loss_mask: tuple[tuple[int, ...], ...]


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def loss_windows(batch: Mapping[str, Any]) -> LossWindows:
    """The windows and loss mask of the module batch ``compute_loss_for_module`` receives:
    rows ``[B, T]`` with ``SEQ_LENS`` and ``LOSS_MASK`` for a stateful module, rows ``[B]``
    without a mask otherwise (the loss then averages every row)."""
    obs = _numpy(batch[Columns.OBS])
    if Columns.LOSS_MASK not in batch:
        items = decode_items(obs)
        return LossWindows(tuple((item,) for item in items), ((1,),) * len(items))
    mask = _numpy(batch[Columns.LOSS_MASK])
    lengths = _numpy(batch[Columns.SEQ_LENS])
    if obs.ndim != 3 or mask.shape != obs.shape[:2] or lengths.shape != obs.shape[:1]:
        raise RuntimeError(
            f"DQN's loss batch: expected OBS [B, T, d], LOSS_MASK [B, T] and SEQ_LENS [B], "
            f"got {obs.shape}, {mask.shape} and {lengths.shape}"
        )
    windows: list[Window] = []
    for row, length in zip(obs, lengths):
        decoded = decode_items(row[: int(length)])
        windows.append(tuple(decoded) + (None,) * (obs.shape[1] - int(length)))
    masks = tuple(tuple(int(bool(m)) for m in row) for row in mask)
    return LossWindows(tuple(windows), masks)


def sequence_support(sc: TrainerScenario) -> None:
    """Unsupported for windows of ``W >= 2`` under a boundary policy other than ``pad``."""
    if sc.trainer.mini_batch_length < 2 or sc.sampling.boundary == "pad":
        return
    if sc.sampling.boundary == "cross":
        raise Unsupported(
            f"windows of {sc.trainer.mini_batch_length} under boundary 'cross': RLlib 2.60.0's "
            "DQN samples sequences as slices of one stored episode "
            "(EpisodeReplayBuffer._sample_episodes, sample_episodes=True), clipped at its end "
            "and zero-padded by the learner connector; a sequence never runs on into the "
            "env's next episode",
            f"{_SOURCE}/utils/replay_buffers/episode_replay_buffer.py",
        )
    raise Unsupported(
        f"windows of {sc.trainer.mini_batch_length} under boundary 'forbid': RLlib 2.60.0's "
        "DQN passes min_batch_length_T = burn_in_len to the buffer (algorithms/dqn/dqn.py, "
        "_training_step_new_api_stack), and DQNTorchLearner.compute_loss_for_module clears "
        "the first burn_in_len positions of LOSS_MASK, so only-full sequences cannot be asked "
        "for without masking their first items out of the loss",
        f"{_SOURCE}/algorithms/dqn/dqn.py",
    )


def sequence_config(width: int, batch: int) -> tuple[RLModuleSpec, dict[str, Any], int]:
    """``rl_module_spec``, ``model_config`` and ``train_batch_size_per_learner`` of DQN's
    trainer row for windows of ``width`` items and ``batch`` windows per update: the
    acting-state module for one item (:mod:`xpspec.adapters.rllib_state`), the counting Q
    module with ``max_seq_len = width`` otherwise."""
    if width == 1:
        spec, model_config = stateful_module()
        return spec, model_config, sequence_timesteps(batch)
    spec = RLModuleSpec(module_class=CountingQModule)
    model_config = {"max_seq_len": width, "reset_to": 0.0}
    return spec, model_config, sequence_timesteps(batch, width)
