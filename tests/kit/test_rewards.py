"""The reward transform as a framework's reward hook takes it (xpspec/kit/rewards.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from xpspec.kit.rewards import affine_reward
from xpspec.protocol.preprocessors import EpisodeDelayed, Identity, RewardTransform


def test_identity_needs_no_hook_and_a_transform_is_its_scale_and_shift() -> None:
    assert affine_reward(Identity()) is None
    transform = RewardTransform(scale=Fraction(1, 2), shift=Fraction(-3))
    assert affine_reward(transform) == (0.5, -3.0)


def test_any_other_preprocessing_is_named_for_the_adapter_to_refuse() -> None:
    with pytest.raises(TypeError, match=r"^preprocessing EpisodeDelayed$"):
        affine_reward(EpisodeDelayed())
