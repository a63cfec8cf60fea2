"""The policy state RLlib 2.60.0 feeds a stateful RLModule in DQN's own train loop (observable
``state``, clause ``timestep.state-reset``). Sources are cited as ``file:function`` under
``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

**The module.** DQN's trainer row (:mod:`xpspec.adapters.rllib_trainer`) runs the user's
:class:`ActingStateQModule`: :class:`~xpspec.adapters.rllib_recurrent.CountingQModule` (DQN's
``QNetAPI`` and ``TargetNetworkAPI``; ``get_initial_state`` a count of 0, ``STATE_OUT`` the
count it received plus one) whose state is kept where it acts, in the env runner's copy
(built with ``inference_only=True``, ``env/single_agent_env_runner.py``, ``make_module``),
with ``model_config["max_seq_len"] = 1``. RLlib supplies the state:
``AddStatesFromEpisodesToBatch`` gives the env runner's module ``module.get_initial_state()``
for an episode that has no step yet and the episode's last ``STATE_OUT`` otherwise
(``connectors/common/add_states_from_episodes_to_batch.py``, ``__call__``); a chunk cut by
``truncate_episodes`` goes on with a one-step lookback that holds it. DQN reads
``is_stateful()`` from the env runner's module and then samples its buffer with
``batch_length_T = max_seq_len`` and ``lookback = 1`` (``algorithms/dqn/dqn.py``,
``_training_step_new_api_stack``): one ``rng.integers`` draw per transition start as for a
stateless module, each sampled transition a sequence of one step, which the buffer counts as
two timesteps toward ``train_batch_size_per_learner`` (:func:`sequence_timesteps`;
``training_intensity`` is scaled from the same count).

The learner's copy has no state: a stateful learner module makes the learner connector add a
time rank of ``max_seq_len = 1``, and DQN's loss then broadcasts ``TERMINATEDS`` of shape
``[B, 1]`` against ``q_next_best`` of shape ``[B]`` (``.squeeze()`` without a dim,
``algorithms/dqn/torch/dqn_torch_learner.py``, ``compute_loss_for_module``) and raises for a
batch of two or more sequences (reproduced with RLlib alone in
``tests/adapters/test_rllib_findings.py``). Windows of one item need sequences of one step,
so the state lives in the acting copy only; clause ``timestep.state-reset`` is about the
state the policy acts with. Windows of two or more items are sequences of ``max_seq_len >= 2``,
on which the loss works: there the counting module is stateful in both copies
(:mod:`xpspec.adapters.rllib_loss_mask`), and :class:`StateRecording` reads its acting copy
the same way.

**Recorded.** The ``policy_state`` of an item is the count the env runner's module received
with it in its forward pass (:class:`StateRecording`: a
:class:`~xpspec.adapters.rllib_recurrent.Recorder` on ``algo.env_runner.module``, one entry per
vector step, the items decoded from the observations of that same call). An item the module
never received has no recorded state, and the recording raises rather than name one.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS, QF_TARGET_NEXT_PREDS
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from xpspec.adapters.rllib_recurrent import CountingQModule, Recorder
from xpspec.kit.steps import Step
from xpspec.protocol.trace import Item

__all__ = ["ActingStateQModule", "StateRecording", "sequence_timesteps", "stateful_module"]

_SEQ_LEN = 1
"""``max_seq_len`` of the trainer's module: DQN samples sequences of this many transitions, one
per transition start (the trainer's windows of one item)."""


class ActingStateQModule(CountingQModule):
    """The counting Q module, stateful in its inference-only copy (the env runner's, which
    acts) and stateless in the learner's, which trains on single transitions."""

    def get_initial_state(self) -> dict[str, Any]:
        return super().get_initial_state() if self.inference_only else {}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings = self._embedding(batch[Columns.OBS])
        target = self.forward_target({Columns.OBS: batch[Columns.NEXT_OBS]})
        return {QF_PREDS: self._head(embeddings), QF_TARGET_NEXT_PREDS: target[QF_PREDS]}


def sequence_timesteps(sequences: int, length: int = _SEQ_LEN) -> int:
    """``train_batch_size_per_learner`` for ``sequences`` sampled sequences of ``length``
    transitions: with ``batch_length_T`` set, ``EpisodeReplayBuffer._sample_episodes`` counts
    a sequence of ``n`` transitions as ``n + 1`` timesteps toward ``num_items`` (``B +=
    actual_length - episode_ts + 1``, ``utils/replay_buffers/episode_replay_buffer.py``), so
    sequences of one transition count 2 each."""
    return sequences * (length + 1)


def stateful_module() -> tuple[RLModuleSpec, dict[str, Any]]:
    """The ``rl_module_spec`` and ``model_config`` of ``config.rl_module(...)`` for DQN's
    trainer row: the acting-state module, its initial count 0, sequences of one step."""
    spec = RLModuleSpec(module_class=ActingStateQModule)
    return spec, {"max_seq_len": _SEQ_LEN, "reset_to": 0.0}


class StateRecording:
    """The counts the env runner's module received, by item. Attach it after
    ``config.build_algo()`` and before the first ``Algorithm.train()``."""

    def __init__(self, algo: Any) -> None:
        module = algo.env_runner.module
        if not (isinstance(module, CountingQModule) and module.is_stateful()):
            raise TypeError(
                f"env runner module: expected a stateful CountingQModule, got {module!r}"
            )
        self.recorder = Recorder()
        module.recorder = self.recorder
        self._states: dict[Item, int] = {}
        self._read = 0

    def _received(self) -> dict[Item, int]:
        """Every item received so far with its count (each item is received once: the module
        acts once per vector step on each env's newest observation)."""
        for items, counts in self.recorder.rollout[self._read :]:
            for item, count in zip(items, counts, strict=True):
                seen = self._states.setdefault(item, count)
                if seen != count:
                    raise RuntimeError(
                        f"item {item}: received with count {seen} and again with {count}"
                    )
        self._read = len(self.recorder.rollout)
        return self._states

    def with_states(self, steps: Sequence[Step]) -> list[Step]:
        """``steps`` with the count the module received at each as its ``policy_state``."""
        received = self._received()
        out = []
        for step in steps:
            if step.item not in received:
                raise RuntimeError(
                    f"item {step.item}: unrolled, but the env runner's module never received it"
                )
            out.append(dataclasses.replace(step, policy_state=received[step.item]))
        return out
