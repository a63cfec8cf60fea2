"""Which rows an exclusion preprocessor selects (clause ``preprocess.exclusion``): by the
row's item and, for :class:`~xpspec.protocol.preprocessors.ExcludeTasks`, its task id.

Selection only: leaving the selected rows out is the framework's own mechanism (a buffer's
``add``, a collector's mask, a callback's list), which the adapter drives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

from xpspec.protocol.preprocessors import ExcludeEpisodes, ExcludeSteps, ExcludeTasks
from xpspec.protocol.trace import Item

__all__ = ["EXCLUSIONS", "Exclusion", "exclusion_reason", "selected", "selects"]

Exclusion = Union[ExcludeSteps, ExcludeEpisodes, ExcludeTasks]
EXCLUSIONS = (ExcludeSteps, ExcludeEpisodes, ExcludeTasks)
"""The exclusion preprocessors, for ``isinstance``."""

_EXPECTED = "ExcludeSteps, ExcludeEpisodes or ExcludeTasks"
_REASONS = {ExcludeSteps: "step", ExcludeEpisodes: "episode", ExcludeTasks: "task"}


def exclusion_reason(spec: Exclusion) -> str:
    """The reason an ``Exclude`` event of ``spec`` records: ``step``, ``episode`` or
    ``task``."""
    try:
        return _REASONS[type(spec)]
    except KeyError:
        raise TypeError(f"spec: expected {_EXPECTED}, got {spec!r}") from None


def selects(spec: Exclusion, item: Item, task_id: int | None = None) -> bool:
    """Whether ``spec`` selects the row of ``item``: ``t % every == offset`` (steps),
    ``episode % every == offset`` (episodes), or its ``task_id`` in ``task_ids`` (tasks,
    which need the task id)."""
    if isinstance(spec, ExcludeSteps):
        return int(item[2]) % spec.every == spec.offset
    if isinstance(spec, ExcludeEpisodes):
        return int(item[1]) % spec.every == spec.offset
    if isinstance(spec, ExcludeTasks):
        if task_id is None:
            raise ValueError(f"task_id: expected the task id of {item}, got None")
        return int(task_id) in spec.task_ids
    raise TypeError(f"spec: expected {_EXPECTED}, got {spec!r}")


def selected(
    spec: Exclusion, items: Sequence[Item], task_ids: Sequence[int] | None = None
) -> list[bool]:
    """:func:`selects` for each row of a batch (``task_ids`` one per row, or None)."""
    if task_ids is not None and len(task_ids) != len(items):
        raise ValueError(f"task_ids: expected {len(items)} (one per row), got {len(task_ids)}")
    return [
        selects(spec, item, None if task_ids is None else task_ids[i])
        for i, item in enumerate(items)
    ]
