"""Which release of its framework an adapter drives.

An adapter is written against one release of its framework, and its expectations file
describes that release's behaviours: :func:`check_release` (called from ``smoke()``) stops a
run on any other release, so that no matrix column is built from a framework the adapter was
not written for without saying so. A version sweep (``nox -s sweep``) runs an adapter across
releases on purpose: it sets :data:`ANY_RELEASE` to ``1``, the run records the release it drove
(``info().framework_version``), and a release the adapter cannot drive fails where it breaks
(an import, a missing API) instead of at this check.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Final

__all__ = ["ANY_RELEASE", "check_release", "producer"]

ANY_RELEASE: Final = "XPSPEC_ANY_FRAMEWORK_VERSION"
"""The environment variable that lets an adapter drive a release it was not written for."""


def check_release(framework: str, installed: str, written_for: str) -> None:
    """Raise ``RuntimeError`` when ``installed`` is not ``written_for``, unless the environment
    sets :data:`ANY_RELEASE` to ``1``."""
    if installed == written_for or os.environ.get(ANY_RELEASE) == "1":
        return
    raise RuntimeError(
        f"{framework}: expected {written_for} (the release this adapter and its expectations "
        f"were written for), got {installed}; {ANY_RELEASE}=1 runs it anyway, as a version "
        "sweep (nox -s sweep) does"
    )


def producer(distribution: str) -> str:
    """A trace header's ``producer``: the distribution and the release installed, which a
    sweep changes (not the release the adapter was written for)."""
    return f"{distribution} {metadata.version(distribution)}"
