"""The offline scenario the offline rows' unit tests share (Flashbax, TorchRL): two online envs
of fixed three-step episodes, five dataset items at env indices 2 and 3 past them, three updates
of five items mixed 2:1, so each framework's rounding of the shares shows in a test's
hand-derived counts."""

from __future__ import annotations

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.schedule import FixedSchedule

__all__ = ["SCENARIO"]

SCENARIO = OfflineScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    offline=((2, 0, 0), (2, 0, 1), (2, 0, 2), (3, 0, 0), (3, 0, 1)),
    updates=3,
    steps_per_update=2,
    batch_size=5,
    offline_weight=2,
    online_weight=1,
    capacity=3,
)
