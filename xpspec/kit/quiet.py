"""The context an adapter's operation runs in: warnings and the framework's loggers silenced
(the suite prints nothing of its own), and the global generators the framework draws from
seeded with the scenario's seed (clause ``trace.deterministic``); all restored afterwards."""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Literal

import numpy as np
import torch

__all__ = ["Generator", "quiet", "seeded", "seeded_quiet"]

Generator = Literal["torch", "numpy", "random"]
"""A process-wide generator: torch's CPU generator, numpy's legacy global state or Python's
``random``."""

_GENERATORS = ("torch", "numpy", "random")


@contextmanager
def quiet(loggers: Sequence[str] = ()) -> Iterator[None]:
    """Warnings ignored and the named loggers at ``ERROR`` while the block runs."""
    handles = [logging.getLogger(name) for name in loggers]
    levels = [handle.level for handle in handles]
    for handle in handles:
        handle.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for handle, level in zip(handles, levels):
            handle.setLevel(level)


@contextmanager
def seeded(seed: int, generators: Sequence[Generator]) -> Iterator[None]:
    """The named global generators seeded with ``seed`` while the block runs, each restored
    to its state before it afterwards."""
    unknown = [g for g in generators if g not in _GENERATORS]
    if unknown:
        raise ValueError(f"generators: expected names among {_GENERATORS}, got {unknown}")
    with ExitStack() as stack:
        if "torch" in generators:
            stack.enter_context(torch.random.fork_rng(devices=[]))
            torch.manual_seed(seed)
        if "numpy" in generators:
            state = np.random.get_state()
            stack.callback(np.random.set_state, state)
            np.random.seed(seed)
        if "random" in generators:
            stack.callback(random.setstate, random.getstate())
            random.seed(seed)
        yield


@contextmanager
def seeded_quiet(
    seed: int, generators: Sequence[Generator], loggers: Sequence[str] = ()
) -> Iterator[None]:
    """:func:`quiet` and :func:`seeded` together."""
    with quiet(loggers), seeded(seed, generators):
        yield
