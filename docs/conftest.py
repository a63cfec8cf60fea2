"""Run the worked examples of the documentation pages (the same runner as the spec pages)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_RUNNER = Path(__file__).resolve().parents[1] / "spec" / "conftest.py"
_spec = importlib.util.spec_from_file_location("xpspec_markdown_examples", _RUNNER)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

pytest_collect_file = _module.markdown_sybil(Path(__file__).parent).pytest()
