"""Frame stacking in TorchRL 0.14.1 (clauses ``stack.*``): ``CatFrames`` as an env transform
in the rollout and, rebuilt from single frames, as a replay-buffer transform at sample time.
Sources are cited as ``file:function`` under the installed ``torchrl`` package.

- **Rollout**: the adapter's batched toy env (:func:`xpspec.adapters.torchrl._vector_env`)
  with ``CatFrames(N=num_frames, dim=-1, in_keys=["observation"],
  out_keys=["observation_stack"], padding=...)`` appended (``envs/transforms/_observation.py``):
  ``padding="same"`` (TorchRL's default: the first frame repeated) for padding
  ``repeat-first``, ``"constant"`` with ``padding_value=0`` for ``zeros``. A ``Collector`` of
  one vector step per batch runs the counting policy; each batch holds the stack the policy
  received at each env (``observation_stack``, frames oldest first along the last axis) next
  to the raw ``observation`` that names its item.
- **Storage and sampling**: TorchRL's documented route for stacking at sample time,
  ``CatFrames.make_rb_transform_and_sampler(batch_size)``: a ``SliceSampler(slice_len=N)``
  (``strict_length=True``: only slices of ``N`` consecutive frames of one stored trajectory,
  cut at ``("next", "done")``) and a transform that runs ``CatFrames`` over each slice and keeps
  its last frame. The buffer stores the frames without their stacks (the ``CatFrames`` output
  excluded), in a ``LazyTensorStorage(capacity * B, ndim=2)`` (one ring of ``capacity`` frames
  per env, written one vector step per ``extend``, as the adapter's replay scenarios do).
  A sampled item is its slice's last frame (its raw ``observation``) with the stack
  ``CatFrames`` rebuilt for it.
"""

from __future__ import annotations

from typing import Any

import torch
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import CatFrames

from xpspec.adapters.torchrl import _NO_SLICE, _collector, _seeded, _vector_env
from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace

__all__ = ["run_stack"]

_STACK = "observation_stack"
_LINK = "https://github.com/pytorch/rl/blob/v0.14.1/torchrl/data/replay_buffers/samplers/slice.py"


def _stacks(stacked: torch.Tensor, k: int) -> tuple[tuple[Item, ...], ...]:
    """``CatFrames`` output ``[N, 3 * k]`` as ``N`` stacks of ``k`` decoded frames."""
    return tuple(tuple(decode_items(s)) for s in stacked.reshape(-1, k, 3))


def _cat_frames(scenario: StackScenario) -> CatFrames:
    padding: dict[str, Any] = (
        {"padding": "constant", "padding_value": 0.0}
        if scenario.padding == "zeros"
        else {"padding": "same"}
    )
    return CatFrames(
        N=scenario.num_frames, dim=-1, in_keys=["observation"], out_keys=[_STACK], **padding
    )


def run_stack(scenario: StackScenario) -> Trace:
    """The rollout's stacks from the collector's batches, then ``draws`` batches sampled
    through ``make_rb_transform_and_sampler`` (see the module docstring)."""
    spec, k = scenario.env, scenario.num_frames
    b = spec.num_envs
    if k == 1:
        raise Unsupported(
            "TorchRL 0.14.1 CatFrames(N=1) cannot rebuild stacks at sample time: the transform "
            "of make_rb_transform_and_sampler raises IndexError in CatFrames.unfolding "
            "(envs/transforms/_observation.py); reproduced with TorchRL alone by "
            "tests/adapters/test_torchrl_stack.py::test_cat_frames_of_one_frame_cannot_be_sampled",
            "https://github.com/pytorch/rl/blob/v0.14.1/torchrl/envs/transforms/_observation.py",
        )
    events: list[Event] = []
    with _seeded(scenario.seed):
        env = _vector_env(spec, scenario.seed)
        cat = _cat_frames(scenario)
        env.append_transform(cat)
        transform, sampler = cat.make_rb_transform_and_sampler(batch_size=scenario.batch_size)
        buffer = ReplayBuffer(
            storage=LazyTensorStorage(scenario.capacity * b, ndim=2),
            sampler=sampler,
            transform=transform,
            batch_size=scenario.batch_size,
            generator=torch.Generator().manual_seed(scenario.seed),
        )
        collector = _collector(env, spec, b, b * scenario.steps)
        for n, batch in enumerate(collector):
            items = decode_items(batch.get("observation"))
            stacks = _stacks(batch.get(_STACK), k)
            events.append(Stacked("rollout", n, *item_columns(items), stacks))
            buffer.extend(batch.exclude(_STACK, ("next", _STACK)))
        collector.shutdown()
        for draw in range(scenario.draws):
            try:
                sample = buffer.sample()
            except RuntimeError as exc:
                if _NO_SLICE not in str(exc):
                    raise
                raise Unsupported(
                    f"TorchRL 0.14.1 CatFrames.make_rb_transform_and_sampler samples with "
                    f"SliceSampler(slice_len={k}, strict_length=True) "
                    "(data/replay_buffers/samplers/slice.py): only items with "
                    f"{k - 1} earlier frames in their stored trajectory, and this run stores "
                    "none",
                    _LINK,
                ) from exc
            items = decode_items(sample.get("observation"))
            stacks = _stacks(sample.get(_STACK), k)
            events.append(Stacked("sample", draw, *item_columns(items), stacks))
    return Trace(tuple(events), {"producer": "torchrl"})
