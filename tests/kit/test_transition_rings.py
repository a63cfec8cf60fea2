"""Rings of transition rows that stand for a relabel scenario's ring of time steps."""

from __future__ import annotations

from xpspec.kit.transition_rings import rows_within_capacity
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RelabelScenario
from xpspec.protocol.schedule import CycleSchedule, EpisodePlan, FixedSchedule


def test_rows_of_capacity_time_steps_by_hand() -> None:
    # One env, episodes of 3 transitions: rows t = 0, 1, 2 per episode, the third done (its
    # next observation the LAST). 9 rows; the newest 6 are two whole episodes, 6 rows and 2
    # LASTs = 8 time steps; 7 rows would hold 10.
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    assert rows_within_capacity(RelabelScenario(spec, fill_steps=9, capacity=8)) == 6
    # Episodes of 1 transition: every row is done, 3 rows are 6 time steps.
    short = EnvSpec(1, (FixedSchedule(1),), goals=True)
    assert rows_within_capacity(RelabelScenario(short, fill_steps=5, capacity=6)) == 3


def test_a_fill_that_fits_keeps_the_capacity() -> None:
    # 3 rows and 1 LAST are 4 time steps: the ring never wraps, any size from 3 on will do.
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    assert rows_within_capacity(RelabelScenario(spec, fill_steps=3, capacity=8)) == 8


def test_the_newest_rows_next_step_counts_while_its_episode_runs() -> None:
    # Episodes of 3 transitions, 8 rows: the newest, (0, 2, 1), also holds (0, 2, 2). The
    # newest 3 rows hold (0, 1, 2), its LAST (0, 1, 3), (0, 2, 0), (0, 2, 1) and (0, 2, 2):
    # 5 time steps; 4 rows would hold 6.
    spec = EnvSpec(1, (FixedSchedule(3),), goals=True)
    assert rows_within_capacity(RelabelScenario(spec, fill_steps=8, capacity=5)) == 3


def test_the_env_holding_most_time_steps_sets_the_size() -> None:
    # Env 0 cycles episodes of 2 and 5 transitions, env 1 has episodes of 5: of 10 rows, the
    # newest 4 of env 0 hold 2 LASTs and the next step of its running episode (7 time steps),
    # the newest 3 hold 5; env 1's newest 3 rows end an episode (4 time steps).
    plans = (EpisodePlan(2, "terminated"), EpisodePlan(5, "terminated"))
    spec = EnvSpec(2, (CycleSchedule(plans, 0), CycleSchedule((plans[1],), 0)), goals=True)
    assert rows_within_capacity(RelabelScenario(spec, fill_steps=10, capacity=6)) == 3
