"""The user's memories of :mod:`xpspec.adapters.skrl_preprocess` on their own: what each
``add_samples`` call leaves in skrl's tensors. Skipped when skrl is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("skrl")

import torch

from xpspec.adapters.skrl_preprocess import EpisodeDelayedMemory, ExcludingMemory, HookedMemory
from xpspec.protocol.preprocessors import ExcludeSteps


def _create(memory: HookedMemory) -> HookedMemory:
    for name in ("observations", "rewards", "terminated"):
        memory.create_tensor(
            name=name, size=3 if name == "observations" else 1, dtype=torch.float32
        )
    return memory


def _add(memory: HookedMemory, rows: list[tuple[int, int, int, float, bool]]) -> None:
    """One add_samples call: a row ``(env, episode, t, reward, terminated)`` per env."""
    memory.add_samples(
        observations=torch.tensor([[float(e), float(k), float(t)] for e, k, t, _, _ in rows]),
        rewards=torch.tensor([[r] for *_, r, _ in rows]),
        terminated=torch.tensor([[float(d)] for *_, d in rows]),
    )


def _stored(memory: HookedMemory) -> list[tuple[int, int, int]]:
    """The stored observations in the memory's flat (write) order."""
    flat = memory.get_tensor_by_name("observations").reshape(-1, 3)[: len(memory)]
    return [tuple(int(v) for v in row) for row in flat.tolist()]


def test_excluding_memory_writes_the_kept_rows_one_after_another() -> None:
    memory = _create(ExcludingMemory(rule=ExcludeSteps(2, 1), memory_size=4, num_envs=2))
    _add(memory, [(0, 0, 0, 0.0, False), (1, 0, 1, 1.0, False)])
    _add(memory, [(0, 0, 1, 1.0, False), (1, 0, 2, 2.0, False)])
    assert _stored(memory) == [(0, 0, 0), (1, 0, 2)]
    assert (memory.memory_index, memory.env_index) == (1, 0)


def test_episode_delayed_memory_releases_after_the_row_following_a_termination() -> None:
    memory = _create(EpisodeDelayedMemory(memory_size=8, num_envs=1))
    _add(memory, [(0, 0, 0, 1.0, False)])
    _add(memory, [(0, 0, 1, 2.0, True)])  # the transition into the LAST (0, 0, 2)
    assert len(memory) == 0 and len(memory.held()) == 2
    _add(memory, [(0, 0, 2, 0.0, False)])  # the LAST's reset row: the episode is released
    assert _stored(memory) == [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    assert memory.get_tensor_by_name("annotations")[:3, 0, 0].tolist() == [1.0, 1.0, 1.0]
    _add(memory, [(0, 1, 0, 1.0, False)])
    assert [row.item for row in memory.held()] == [(0, 1, 0)]
    memory.flush()
    assert _stored(memory)[-1] == (0, 1, 0) and not memory.held()
    assert float(memory.get_tensor_by_name("annotations")[3, 0, 0]) == 0.0


def test_failure_only_drops_every_terminated_episode() -> None:
    dropped: list[int] = []
    memory = _create(EpisodeDelayedMemory(keep="failure", memory_size=8, num_envs=1))
    memory.drop = lambda rows, reason: dropped.append(len(rows))  # type: ignore[method-assign]
    _add(memory, [(0, 0, 0, 1.0, True)])
    _add(memory, [(0, 0, 1, 0.0, False)])
    assert (len(memory), dropped) == (0, [2])
