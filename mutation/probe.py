"""The test command of each mutant: run the suite against refimpl in this process's working
directory (the mutated copy of the tree), print the verdict line, exit 1 unless it survived.

``python -m mutation.probe --report PATH [--typecheck-cache DIR]``. With a cache folder the
mutated tree is first type-checked as the ``lint`` session does; a mutant the type checker
rejects is ``stillborn`` and the suite does not run (:mod:`mutation.typecheck`). It refuses
(``other-red``) to judge a refimpl imported from anywhere but the working directory, so a
mutant can never survive because the suite ran the unmutated tree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from mutation.scope import MODULES
from mutation.typecheck import type_errors
from mutation.verdict import Verdict, classify_run

__all__ = ["main"]

SUITE = ("-m", "xpspec.conformance", "run", "--adapter", "refimpl", "--isolation", "inline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation.probe")
    parser.add_argument("--report", required=True, type=Path)
    parser.add_argument("--typecheck-cache", type=Path, default=None)
    args = parser.parse_args(argv)
    here = Path.cwd().resolve()
    spec = importlib.util.find_spec("xpspec.refimpl")
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is None or here not in origin.parents:
        verdict = Verdict("other-red", 2, reason=f"refimpl imported from {origin}, not {here}")
        print(verdict.to_line())
        return 1
    if args.typecheck_cache is not None:
        errors = type_errors(here, MODULES, args.typecheck_cache)
        if errors:
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            print(Verdict("stillborn", 1, reason=(errors[0] + more)[:300]).to_line())
            return 1
    args.report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(here), "PYTHONDONTWRITEBYTECODE": "1"}
    completed = subprocess.run(
        [sys.executable, *SUITE, "--report", str(args.report)],
        cwd=here,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    report = None
    if args.report.is_file():
        lines = args.report.read_text(encoding="utf-8").splitlines()
        report = [json.loads(line) for line in lines if line.strip()]
    verdict = classify_run(completed.returncode, report)
    if verdict.run_class == "other-red" and completed.stderr:
        tail = completed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        verdict = Verdict(
            verdict.run_class,
            verdict.exit_code,
            verdict.failed,
            verdict.broken,
            f"{verdict.reason}; {tail[0] if tail else ''}"[:300],
            verdict.counts,
        )
    print(verdict.to_line())
    return 0 if verdict.run_class == "survived" else 1


if __name__ == "__main__":
    sys.exit(main())
