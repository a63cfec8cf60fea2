"""Prioritized replay in ALF (snapshot ``23aca492``; capabilities ``priorities`` and
``importance-weights``, clauses ``priority.*``): its ``ReplayBuffer(prioritized_sampling=True)``
with its sum tree, and the two methods of ``Algorithm`` that turn a loss's priorities into the
buffer's masses and the buffer's ``BatchInfo`` into loss weights. Nothing of ALF is
re-implemented; sources are cited as ``file:function`` of the ``alf`` package.

**The buffer.** ``ReplayBuffer(spec, B, max_length=capacity, prioritized_sampling=True,
with_replacement=...)`` (``alf/experience_replayers/replay_buffer.py``) filled with the toy
env's ALF time steps by ``add_batch``, as ``run_replay`` fills, and by ``priority.add_steps``
more vector steps after every draw but the last. A draw is ``get_batch(batch_size, T)``;
ALF's ``_prioritized_sample`` draws ``r · Σ`` in the sum tree (``find_sum_bound``), with
``with_replacement=True`` independent uniforms ``r`` and with ALF's default ``False`` one ``r``
in each of ``b`` equal strata: the scenario's ``draws`` (``independent``/``stratified``) picks
that documented option. A new item's start gets ``initial_priority`` (``max(1, the tree's
largest value)``); for windows of ``T > 1`` ALF keeps the last ``T - 1`` starts of each env at
0 (``_initialize_priority``, ``_change_mini_batch_length``, the latter run by the first
``get_batch``).

**What is recorded.** Before each draw (``Priorities``): every positive leaf of ALF's
``SumSegmentTree`` as ALF's sampler reads it (captured in ``find_sum_bound``, after the draw's
window-length change; from the tree as it stands when ALF finds no mass), named by the item
ALF stores at that leaf's ``(env_id, idx)`` (``_index_to_env_id_idx``). The draw
(``Sampled``): the observations ``get_batch`` returns. ``Prioritized``: each window's
probability ``importance_weights / nnz`` — ALF's ``BatchInfo.importance_weights`` is
``leaf · nnz / Σ`` (``N · P(w)``, ``_prioritized_sample``) — and the weight ALF's
``Algorithm._aggregate_loss`` multiplies the window's loss by: ``importance_weights ** -beta``,
divided by the batch's largest with ``TrainerConfig.normalize_importance_weights_by_max``
(``alf/algorithms/algorithm.py``), read as the aggregated loss of a ``LossInfo`` of ones.
ALF has no normalisation by the buffer's largest weight: the option divides by the batch's,
and without it the weights are not normalised at all; the adapter sets the option (the
spec's variant ``batch-max``, see the expectations). The update: ALF's
``Algorithm._update_priority`` with ``LossInfo(priority=|δ|)`` (the scenario's TD error of each
sampled window), which stores ``(|δ| + priority_replay_eps) ** priority_replay_alpha`` through
``ReplayBuffer.update_priority``.

Unsupported: windows that must not cross episode boundaries (the ``cross`` policy is ALF's
only one, as in ``run_replay``).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import torch

from xpspec.kit.arrays import floats, ints
from xpspec.kit.events import store
from xpspec.kit.items import decode_items, decode_windows, item_columns
from xpspec.kit.steps import steps_from_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.priority import td_error
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.trace import Event, Priorities, Prioritized, Sampled, Trace

__all__ = ["priority_problem", "run_prioritized"]

_LINK = (
    "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/experience_replayers/replay_buffer.py"
)
_NO_MASS = "There is no data in the buffer"
"""The ``AssertionError`` of ALF's ``ReplayBuffer._prioritized_sample`` when its sum tree holds
no mass (an empty buffer, or no env holding a whole window)."""


def priority_problem(scenario: ReplayScenario) -> Unsupported | None:
    """Why ALF cannot run ``scenario``'s prioritized draws (None if it can)."""
    if scenario.sampling.boundary != "cross":
        return Unsupported(
            f"boundary policy {scenario.sampling.boundary!r} under priorities: ALF's "
            "ReplayBuffer.get_batch windows cross episode boundaries and it has no option to "
            "forbid them (alf snapshot 23aca492, alf/experience_replayers/replay_buffer.py)",
            _LINK,
        )
    return None


class _Filler:
    """The toy env stepped into ALF's buffer, one ``Store`` event per vector step (the reset's
    FIRST first); the env goes on from one call to the next."""

    def __init__(self, env_cls: Callable[[EnvSpec, int], Any], sc: ReplayScenario) -> None:
        self.env = env_cls(sc.env, sc.seed)
        self.action = torch.zeros(sc.env.num_envs, dtype=torch.int64)
        self.steps = 0
        self.buffer: Any = None
        self.capacity = sc.capacity
        self.with_replacement = sc.priority is not None and sc.priority.draws == "independent"

    def make_buffer(self, ts: Any) -> Any:
        from alf.experience_replayers.replay_buffer import ReplayBuffer
        from alf.utils import dist_utils

        return ReplayBuffer(
            dist_utils.extract_spec(ts, from_dim=1),
            int(ts.step_type.shape[0]),
            max_length=self.capacity,
            prioritized_sampling=True,
            with_replacement=self.with_replacement,
        )

    def fill(self, steps: int) -> list[Event]:
        events: list[Event] = []
        for _ in range(steps):
            ts = self.env.reset() if self.steps == 0 else self.env.step(self.action)
            self.steps += 1
            if self.buffer is None:
                self.buffer = self.make_buffer(ts)
            self.buffer.add_batch(ts)
            rows = steps_from_columns(
                decode_items(ts.observation),
                ints(ts.step_type),
                floats(ts.reward),
                floats(ts.discount),
            )
            events.append(store(0, rows))
        return events


def _alf_frame(exc: BaseException) -> str | None:
    """``alf/file.py:line (function)`` of the innermost frame of ``exc`` in ALF's code, or None
    when ALF's code is not where it was raised from (library frames below ALF's do not count;
    the adapter's own frames mean the adapter raised)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = frame.filename.replace(os.sep, "/")
        if "/adapters/" in path:
            return None
        if "/alf/" in path:
            return f"alf/{path.rsplit('/alf/', 1)[1]}:{frame.lineno} ({frame.name})"
    return None


def _held(buffer: Any, draw: int) -> Priorities:
    """Every positive leaf of ALF's sum tree, named by the item ALF stores at its slot."""
    tree = buffer._sum_tree
    leaves = tree[torch.arange(buffer._num_envs * buffer._max_length)]
    held = torch.nonzero(leaves > 0).reshape(-1)
    env_ids, idx = buffer._index_to_env_id_idx(held)
    items = decode_items(buffer._buffer.observation[env_ids, idx]) if held.numel() else []
    return Priorities(draw, *item_columns(items), tuple(float(m) for m in leaves[held]))


def _capturing(
    find: Callable[[Any], Any], buffer: Any, draw: int, seen: list[Priorities]
) -> Callable[[Any], Any]:
    """ALF's ``find_sum_bound``, noting the tree's leaves in ``seen`` as the sampler reads it."""

    def captured(thresholds: Any) -> Any:
        seen.append(_held(buffer, draw))
        return find(thresholds)

    return captured


def _algorithm(sc: ReplayScenario, workdir: str) -> Any:
    """An ALF ``Algorithm`` whose ``TrainerConfig`` holds the scenario's priority spec: the
    object whose ``_update_priority`` and ``_aggregate_loss`` ALF's ``_update`` calls."""
    from alf.algorithms.algorithm import Algorithm
    from alf.algorithms.config import TrainerConfig

    spec = sc.priority
    assert spec is not None
    config = TrainerConfig(
        root_dir=workdir,
        priority_replay=True,
        priority_replay_alpha=float(spec.alpha),
        priority_replay_beta=float(spec.beta),
        priority_replay_eps=float(spec.eps),
        normalize_importance_weights_by_max=True,
    )
    return Algorithm(config=config, name="xpspec-priority")


def run_prioritized(
    sc: ReplayScenario, env_cls: Callable[[EnvSpec, int], Any], workdir: str
) -> Trace:
    """The prioritized replay scenario ``sc`` through ALF (see the module docstring)."""
    from alf.data_structures import LossInfo

    spec = sc.priority
    assert spec is not None
    torch.manual_seed(sc.seed)
    filler = _Filler(env_cls, sc)
    events = filler.fill(sc.fill_steps)
    if filler.buffer is None:  # nothing stored yet: the spec comes from a time step
        filler.buffer = filler.make_buffer(env_cls(sc.env, sc.seed).reset())
    algorithm = _algorithm(sc, os.path.join(workdir, "priority"))
    length = sc.sampling.window_length
    for draw in range(sc.draws):
        buffer = filler.buffer
        seen: list[Priorities] = []
        tree = buffer._sum_tree
        tree.find_sum_bound = _capturing(tree.find_sum_bound, buffer, draw, seen)
        try:
            batch, info = buffer.get_batch(sc.batch_size, length)
        except AssertionError as exc:
            if _NO_MASS not in str(exc):
                raise
            events.extend((_held(buffer, draw), Sampled(draw, ()), Prioritized(draw, (), ())))
        except RuntimeError as exc:
            where = _alf_frame(exc)
            if where is None:
                raise
            # ALF ended the run inside its own sampler (see the expectations' finding)
            first = str(exc).strip().splitlines()[0]
            header = {"producer": "alf", "seed": sc.seed}
            header["stopped"] = f"ALF raised RuntimeError in draw {draw} at {where}: {first}"
            return Trace(tuple(events), header)
        else:
            windows = decode_windows(batch.observation)
            nnz = float(tree.nnz)
            ones = LossInfo(loss=torch.ones(1, len(windows)))
            weighted = algorithm._aggregate_loss(ones, None, info)
            events.append(seen[0])
            events.append(Sampled(draw, windows))
            events.append(
                Prioritized(
                    draw,
                    tuple(float(w) / nnz for w in info.importance_weights),
                    tuple(float(w) for w in weighted.loss.reshape(-1)),
                )
            )
            td = [float(abs(td_error(w[0], draw, spec.levels))) for w in windows]
            algorithm._update_priority(
                LossInfo(priority=torch.tensor(td, dtype=torch.float32)), info, buffer
            )
        finally:
            del tree.find_sum_bound
        if draw < sc.draws - 1 and spec.add_steps:
            events.extend(filler.fill(spec.add_steps))
    return Trace(tuple(events), {"producer": "alf", "seed": sc.seed})
