"""skrl 2.1.1 with its non-default settings: ``RandomMemory(replacement=True)`` and
``PPO_CFG(time_limit_bootstrap=True)``. The adapter is :class:`xpspec.adapters.skrl.SkrlAdapter`
run in that configuration, registered under a name of its own so that it has its own column
in the matrix and its own expectations file (``skrl_tlb.expectations.toml``)."""

from __future__ import annotations

from xpspec.adapters.skrl import SkrlAdapter, SkrlConfig

__all__ = ["SkrlTlbAdapter"]


class SkrlTlbAdapter(SkrlAdapter):
    """skrl 2.1.1 with sampling with replacement and time-limit bootstrapping."""

    def __init__(self) -> None:
        super().__init__(SkrlConfig(replacement=True, time_limit_bootstrap=True), name="skrl_tlb")
