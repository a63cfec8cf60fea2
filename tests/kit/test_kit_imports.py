"""The kit sits beside the protocol core: it imports the protocol core, the standard library,
numpy and torch, never the reference implementation, the conformance suite or an adapter."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import xpspec.kit

ALLOWED = {"xpspec.protocol", "xpspec.kit", "numpy", "torch"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_kit_imports_only_the_protocol_core_stdlib_numpy_and_torch() -> None:
    files = sorted(Path(xpspec.kit.__file__).parent.glob("*.py"))
    assert len(files) > 5
    bad = {}
    for path in files:
        outside = [
            name
            for name in _imports(path)
            if name.split(".")[0] not in sys.stdlib_module_names
            and not any(name == a or name.startswith(a + ".") for a in ALLOWED)
        ]
        if outside:
            bad[path.name] = sorted(outside)
    assert bad == {}, f"expected imports of {sorted(ALLOWED)} and the standard library, got {bad}"
