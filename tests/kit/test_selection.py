"""Exclusion selectors, goal rewards, the toy value and episode helpers of xpspec.kit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xpspec.kit.episodes import (
    episode_rows,
    standin_bootstrap,
    transitions_observed,
)
from xpspec.kit.exclusion import exclusion_reason, selected, selects
from xpspec.kit.goals import goal_rewards
from xpspec.kit.value import ToyValue, toy_value
from xpspec.protocol.env_spec import EnvSpec, goal_reward
from xpspec.protocol.preprocessors import (
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    RewardTransform,
)
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule
from xpspec.protocol.trace import Advantages


def test_exclusions_select_by_item_and_task() -> None:
    items = [(0, 0, 0), (0, 0, 1), (0, 1, 2), (0, 2, 3)]
    assert selected(ExcludeSteps(every=2, offset=1), items) == [False, True, False, True]
    assert selected(ExcludeEpisodes(every=2, offset=0), items) == [True, True, False, True]
    tasks = ExcludeTasks(task_ids=(1, 2))
    assert selected(tasks, items, [0, 1, 2, 3]) == [False, True, True, False]
    assert [exclusion_reason(s) for s in (ExcludeSteps(), ExcludeEpisodes(), tasks)] == [
        "step",
        "episode",
        "task",
    ]


def test_exclusion_errors_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="task_id: expected the task id"):
        selects(ExcludeTasks(), (0, 0, 0))
    with pytest.raises(ValueError, match="task_ids: expected 2"):
        selected(ExcludeTasks(), [(0, 0, 0), (0, 0, 1)], [0])
    with pytest.raises(TypeError, match="expected ExcludeSteps, ExcludeEpisodes or ExcludeTasks"):
        selects(RewardTransform(), (0, 0, 0))  # type: ignore[arg-type]


def test_goal_rewards_apply_the_protocol_goal_reward_row_by_row() -> None:
    achieved = np.asarray([[0, 0, 3], [0, 0, 2]], dtype=np.float32)
    desired = np.asarray([0, 0, 3], dtype=np.float32)  # broadcast against each row
    got = goal_rewards(achieved, desired)
    assert got.dtype == np.float32 and got.shape == (2,)
    assert got.tolist() == [goal_reward((0, 0, 3), (0, 0, 3)), goal_reward((0, 0, 2), (0, 0, 3))]
    assert got.tolist() == [0.0, -1.0]
    assert goal_rewards(torch.zeros(2, 1, 3), torch.zeros(2, 1, 3)).shape == (2, 1)


def test_toy_value_is_scale_times_t() -> None:
    obs = torch.tensor([[0.0, 0.0, 4.0], [1.0, 2.0, 0.0]], dtype=torch.float64)
    assert toy_value(obs, -0.25).tolist() == [[-1.0], [-0.0]]
    module = ToyValue(0.5)
    assert module(obs).dtype == torch.float64 and module(obs).tolist() == [[2.0], [0.0]]
    assert list(module.parameters()) == []


def test_transitions_observed_counts_no_transition_across_an_episode_end() -> None:
    cycle = CycleSchedule((EpisodePlan(1, "terminated"), EpisodePlan(3, "truncated")))
    spec = EnvSpec(num_envs=2, schedules=(FixedSchedule(2), cycle))
    # env 0: episodes of 2 transitions are 3 time steps each (t = 0, 1, 2)
    assert [transitions_observed(spec, 0, 0, n) for n in range(8)] == [0, 0, 1, 2, 2, 3, 4, 4]
    # env 1: episodes of 1, then 3 transitions (2 and 4 time steps)
    assert [transitions_observed(spec, 0, 1, n) for n in range(7)] == [0, 0, 1, 1, 2, 3, 4]


def test_episode_rows_keep_first_appearance_and_batch_order() -> None:
    items = [(1, 0, 0), (0, 2, 5), (1, 0, 1), (0, 2, 6)]
    assert episode_rows(items) == {(1, 0): [0, 2], (0, 2): [1, 3]}


def test_standin_bootstrap_row() -> None:
    first = standin_bootstrap(0, 1, [(0, 1.5, 2.0, 0.5), (1, -1.0, 1.0, -0.5)])
    assert first == Advantages(
        0, 1, (0, 1, 2), (1.5, -1.0, 0.0), (2.0, 1.0, 0.0), (0.5, -0.5, 0.0), (1, 1, 0)
    )
    second = standin_bootstrap(1, 0, [(3, 0.0, 0.0, 0.0)], bootstrap_t=4, bootstrap_target=2.5)
    assert (second.t, second.value_target, second.loss_mask) == ((3, 4), (0.0, 2.5), (1, 0))
    with pytest.raises(ValueError, match="at least one row"):
        standin_bootstrap(0, 0, [])
