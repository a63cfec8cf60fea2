"""The reward transform of a scenario as a framework's reward hook takes it (clause
``preprocess.transform``): frameworks whose one write-side hook maps each stored reward
(skrl's ``rewards_shaper``, d3rlpy's writer preprocess) express a ``RewardTransform`` and
nothing else."""

from __future__ import annotations

from xpspec.protocol.preprocessors import Identity, PreprocessorSpec, RewardTransform

__all__ = ["affine_reward"]


def affine_reward(preprocess: PreprocessorSpec) -> tuple[float, float] | None:
    """``(scale, shift)`` of a ``RewardTransform``, ``None`` for ``Identity``; any other
    preprocessing raises ``TypeError`` naming it (``preprocessing EpisodeDelayed``), for the
    adapter to refuse with its framework's reason."""
    if isinstance(preprocess, Identity):
        return None
    if isinstance(preprocess, RewardTransform):
        return (float(preprocess.scale), float(preprocess.shift))
    raise TypeError(f"preprocessing {type(preprocess).__name__}")
