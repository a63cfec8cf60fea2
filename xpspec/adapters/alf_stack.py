"""Frame stacking in ALF (snapshot ``23aca492``; clauses ``stack.*``): its ``FrameStacker`` as
the algorithm's data transformer, stacking the rollout's time steps and rebuilding the stacks
of the experience ALF samples from its ``ReplayBuffer``. Nothing of ALF is re-implemented;
sources are cited as ``file:function`` of the ``alf`` package.

**The run.** ``TrainerConfig(unroll_length=steps, replay_buffer_length=capacity,
mini_batch_length=1, mini_batch_size=batch_size, num_updates_per_train_iter=draws,
whole_replay_buffer_training=False, clear_replay_buffer=False, initial_collect_steps=0,
data_transformer_ctor=[partial(FrameStacker, stack_size=num_frames)])``, its
``data_transformer`` made by ``create_data_transformer`` from the env's observation spec as
``RLTrainer`` makes it (``alf/trainers/policy_trainer.py``), and one ``train_iter`` of the
adapter's counting algorithm (an off-policy ``RLAlgorithm``, acting ``state % num_actions``)
built on the transformed observation spec. ``Algorithm`` then creates its ``ReplayBuffer``
with ``num_earliest_frames_ignored = stack_size - 1`` (``alf/algorithms/algorithm.py``): the
earliest ``num_frames - 1`` positions of each env's ring of ``capacity`` are never sampled.

- **Rollout**: ``RLAlgorithm._sync_unroll`` passes each time step through
  ``FrameStacker.transform_timestep`` (first frame repeated at FIRST,
  ``alf/algorithms/data_transformer.py``) before ``rollout_step``; the stack recorded is the
  observation ``rollout_step`` receives (``[B, 3 * k]``, frames oldest first), its item the raw
  observation of the time step ``_process_unroll_step`` then stores.
- **Sampling**: ``train_from_replay_buffer`` draws with ``ReplayBuffer.get_batch`` and
  ``Algorithm._prepare_experience_data`` rebuilds the stacks with
  ``FrameStacker.transform_experience`` (previous positions clamped to the episode's begin
  position); ``_train_experience`` splits the draw into ``draws`` mini-batches of
  ``batch_size``, one ``_update`` each. Per mini-batch the stacks recorded are the observations
  of the experience ``_update`` receives, each item the raw frame ALF's buffer holds at the
  row's ``BatchInfo`` (``ReplayBuffer.get_field("observation", env_ids, positions)``).

Unsupported: padding ``zeros`` (``FrameStacker`` has no padding option), same-step auto-reset
(ALF's environments return FIRST on the step after LAST), and a run after which some env holds
no position past its earliest ``num_frames - 1`` (``get_batch`` then refuses to sample:
``Not all environments have enough data``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace

__all__ = ["run_stack", "stack_problem"]

_LINK = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/algorithms/data_transformer.py"
_BUFFER_LINK = (
    "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/experience_replayers/replay_buffer.py"
)
_NOT_ENOUGH = "Not all environments have enough data"


def stack_problem(scenario: StackScenario) -> Unsupported | None:
    """Why ALF cannot express ``scenario`` (None if it can)."""
    if scenario.padding != "repeat-first":
        return Unsupported(
            f"padding {scenario.padding!r}: ALF (snapshot 23aca492) FrameStacker always "
            "repeats an episode's first frame (transform_timestep) and rebuilds replayed stacks "
            "clamped to the episode's begin position (transform_experience); it has no "
            "padding option (alf/algorithms/data_transformer.py)",
            _LINK,
        )
    if getattr(scenario.env, "autoreset", "next-step") != "next-step":
        return Unsupported(
            "same-step auto-reset: ALF's environments return FIRST on the step after LAST",
            _LINK,
        )
    return None


def _stacks(observation: torch.Tensor, k: int) -> tuple[tuple[Item, ...], ...]:
    """ALF's stacked observations ``[..., 3 * k]`` as stacks of ``k`` decoded frames."""
    return tuple(tuple(decode_items(s)) for s in observation.reshape(-1, k, 3))


def run_stack(
    scenario: StackScenario,
    env_cls: Callable[..., Any],
    root_dir: str,
    algorithm_cls: Any = None,
) -> Trace:
    """One ``train_iter`` of the counting algorithm with ALF's ``FrameStacker`` (see the
    module docstring); ``env_cls(spec, seed)`` is the toy env as an ALF environment,
    ``algorithm_cls`` the algorithm class (default: the adapter's counting algorithm)."""
    from alf.algorithms.config import TrainerConfig
    from alf.algorithms.data_transformer import FrameStacker, create_data_transformer

    from xpspec.adapters.alf import _classes

    k = scenario.num_frames
    torch.manual_seed(scenario.seed)
    env = env_cls(scenario.env, scenario.seed)
    config = TrainerConfig(
        root_dir=root_dir,
        unroll_length=scenario.steps,
        replay_buffer_length=scenario.capacity,
        mini_batch_length=1,
        mini_batch_size=scenario.batch_size,
        num_updates_per_train_iter=scenario.draws,
        whole_replay_buffer_training=False,
        clear_replay_buffer=False,
        initial_collect_steps=0,
        data_transformer_ctor=[partial(FrameStacker, stack_size=k)],
    )
    transformer = create_data_transformer(config.data_transformer_ctor, env.observation_spec())
    config.data_transformer = transformer
    cls = algorithm_cls or _classes()["algorithm"]
    events: list[Event] = []
    received: list[torch.Tensor] = []

    class Recorded(cls):  # type: ignore[misc, valid-type]
        """The counting algorithm, keeping the observation each ``rollout_step`` receives."""

        def rollout_step(self, time_step: Any, state: Any) -> Any:
            received.append(time_step.observation.clone())
            return super().rollout_step(time_step, state)

    alg = Recorded(
        transformer.transformed_observation_spec, env.action_spec(), env=env, config=config
    )
    process = alg._process_unroll_step

    def _process_unroll_step(
        policy_step: Any, action: Any, time_step: Any, *rest: Any, **kw: Any
    ) -> Any:
        if len(received) != len(events) + 1:
            raise RuntimeError(
                f"rollout_step calls: expected {len(events) + 1} by vector step "
                f"{len(events)}, got {len(received)}"
            )
        items = decode_items(time_step.observation)
        stacks = _stacks(received[-1], k)
        events.append(Stacked("rollout", len(events), *item_columns(items), stacks))
        return process(policy_step, action, time_step, *rest, **kw)

    update = alg._update
    draws: list[Stacked] = []

    def _update(experience: Any, batch_info: Any, weight: Any) -> Any:
        frames = alg._replay_buffer.get_field(
            "observation", batch_info.env_ids, batch_info.positions
        )
        items = decode_items(frames)
        stacks = _stacks(experience.observation, k)
        draws.append(Stacked("sample", len(draws), *item_columns(items), stacks))
        return update(experience, batch_info, weight)

    alg._process_unroll_step = _process_unroll_step
    alg._update = _update
    try:
        alg.train_iter()
    except AssertionError as exc:  # ALF's answer to "no item it may sample"
        if _NOT_ENOUGH not in str(exc):
            raise
        raise Unsupported(
            f"ALF (snapshot 23aca492) Algorithm creates its ReplayBuffer with "
            f"num_earliest_frames_ignored={k - 1} for a FrameStacker of {k} frames, which "
            f"never samples an env's earliest {k - 1} positions "
            "(alf/experience_replayers/replay_buffer.py, get_batch: 'Not all environments "
            "have enough data'), and this run stores no later position in some env: nothing "
            "is sampled",
            _BUFFER_LINK,
        ) from exc
    if len(draws) != scenario.draws:
        raise RuntimeError(
            f"mini-batches ALF trained on: expected {scenario.draws} "
            f"(num_updates_per_train_iter), got {len(draws)}"
        )
    return Trace((*events, *draws), {"producer": "alf", "seed": scenario.seed})
