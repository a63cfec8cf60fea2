"""What is mutated: the semantic modules of the reference implementation."""

from __future__ import annotations

__all__ = ["MODULES"]

MODULES = (
    "xpspec/refimpl/accounting.py",
    "xpspec/refimpl/asynchronous.py",
    "xpspec/refimpl/checkpoint.py",
    "xpspec/refimpl/offline.py",
    "xpspec/refimpl/preprocess.py",
    "xpspec/refimpl/priority.py",
    "xpspec/refimpl/replay.py",
    "xpspec/refimpl/relabel.py",
    "xpspec/refimpl/recurrent.py",
    "xpspec/refimpl/stack.py",
    "xpspec/refimpl/trainer.py",
    "xpspec/refimpl/learner",
    "xpspec/protocol/preprocessors.py",
    "xpspec/protocol/sampling.py",
)
"""The semantic modules under mutation (a folder means every module in it): the reference
implementation's, and the validation of the preprocessing and sampling values it takes from
the protocol core (mutated in ``refimpl`` before those values moved there)."""
