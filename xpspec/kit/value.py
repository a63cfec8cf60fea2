"""The toy value function of the learner scenarios: ``V(s) = value_scale * t(s)`` (see
:class:`xpspec.protocol.scenario.LearnerScenario`), read off the observation ``[env,
episode, t]`` so that the values a framework's learner used can be checked exactly."""

from __future__ import annotations

import torch

__all__ = ["ToyValue", "toy_value"]


def toy_value(observation: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * t`` of each observation ``[..., 3]``, as a column ``[..., 1]`` in the
    observation's dtype."""
    return scale * observation[..., 2:3]


class ToyValue(torch.nn.Module):
    """:func:`toy_value` as a module (a critic or value network): ``forward(observation)``
    is ``[..., 1]``. It has no parameters; an optimiser that needs one gets it from the
    framework's glue."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return toy_value(observation, self.scale)
