"""The reward transform of a scenario as a framework's reward hook takes it (clause
``preprocess.transform``): a write-side hook that maps each stored reward (skrl's
``rewards_shaper``, d3rlpy's writer preprocess) expresses a ``RewardTransform`` and nothing
else; any other preprocessing is the adapter's to drive another way or refuse."""

from __future__ import annotations

from xpspec.protocol.preprocessors import Identity, PreprocessorSpec, RewardTransform

__all__ = ["affine_reward"]


def affine_reward(preprocess: PreprocessorSpec) -> tuple[float, float] | None:
    """``(scale, shift)`` of a ``RewardTransform``, ``None`` for ``Identity``; any other
    preprocessing raises ``TypeError`` naming it (``preprocessing EpisodeDelayed``), for the
    adapter to drive another way or refuse with its framework's reason."""
    if isinstance(preprocess, Identity):
        return None
    if isinstance(preprocess, RewardTransform):
        return (float(preprocess.scale), float(preprocess.shift))
    raise TypeError(f"preprocessing {type(preprocess).__name__}")
