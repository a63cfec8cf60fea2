"""The type gate of a mutant: mypy, as the ``lint`` session runs it, over the mutated tree.

A mutant the project's own type check rejects (``int | Fraction``, ``float ^ int``, a
``None`` passed where a value is required) could never be merged: it is no behaviour the
reference implementation could ship, so it is *stillborn*, like a mutant whose module no
longer parses, and left out of the score. The check runs incrementally with its cache in the
work folder. mypy trusts a cached file whose size and whole-second modification time are
unchanged, so before each check every mutated module gets a modification time one second
past the last one given (kept in the cache folder): a cached result of an earlier mutant of
the same size is never reused, however quickly the checks follow each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["type_errors"]

TARGETS = ("xpspec", "mutation")
"""What the ``lint`` session type-checks (noxfile.py)."""


def type_errors(tree: Path, modules: Iterable[str], cache: Path) -> list[str]:
    """mypy's error lines for ``tree`` (empty when it passes); ``modules`` are the mutated
    modules or folders, relative to ``tree``."""
    cache.mkdir(parents=True, exist_ok=True)
    last = cache / "xpspec-stamp"
    stamp = max(int(time.time()), int(last.read_text()) + 1 if last.is_file() else 0)
    last.write_text(str(stamp))
    for module in modules:
        path = tree / module
        for source in [path] if path.is_file() else sorted(path.rglob("*.py")):
            os.utime(source, (stamp, stamp))
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *TARGETS],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode == 0:
        return []
    errors = [line for line in completed.stdout.splitlines() if ": error:" in line]
    return errors or [(completed.stdout + completed.stderr).strip().splitlines()[-1]]
