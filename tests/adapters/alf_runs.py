"""An ALF run in a new interpreter after a patch of ALF: the perturbation tests of the ALF rows
change ALF's own code, which must not leak into the other tests of the session (ALF's modules
and its gin-style configuration are process-wide)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

from xpspec.protocol.scenario import Scenario, scenario_to_json
from xpspec.protocol.trace import Trace

__all__ = ["run_patched"]


def run_patched(tmp_path: Path, patch: str, operation: str, scenario: Scenario) -> Trace:
    """The trace of ``ALFAdapter().<operation>(scenario)`` run in a new interpreter after the
    statements ``patch`` (run once ``torch`` is imported, before the adapter is prepared)."""
    out = tmp_path / "trace.pickle"
    script = "\n".join(
        [
            "import pickle",
            "import torch",
            "from xpspec.adapters.alf import ALFAdapter",
            "from xpspec.protocol.scenario import scenario_from_json",
            textwrap.dedent(patch).strip(),
            "adapter = ALFAdapter()",
            "adapter.prepare()",
            f"scenario = scenario_from_json({scenario_to_json(scenario)!r})",
            f"trace = adapter.{operation}(scenario)",
            f"with open({str(out)!r}, 'wb') as f:",
            "    pickle.dump(trace, f)",
        ]
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    with open(out, "rb") as f:
        trace = pickle.load(f)
    assert isinstance(trace, Trace)
    return trace
