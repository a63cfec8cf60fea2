"""``python -m mutation``: make the mutants, run the suite against each, write the table.

Every run works in a copy of the tree under ``--workdir`` (never the tree itself): cosmic-ray
writes each mutant into the copy's file, runs the probe (``mutation.probe``) there and puts
the file back. The session (cosmic-ray's sqlite work db) stays in the workdir, so
``--resume`` goes on where a stopped run ended. By default a seeded random sample of the
mutants runs, in the sample's random order (a partial run is still a random sample);
``--all`` runs every one. After each mutant (or with ``--export-only``) the executed mutants are
exported to ``mutation/results.jsonl``; at the end (or with ``--table-only``)
``docs/mutation.md`` is written from it and from
``mutation/equivalent.toml`` and ``mutation/survivors.toml``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mutation.verdict import parse_verdict

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
MODULES = (
    "xpspec/refimpl/accounting.py",
    "xpspec/refimpl/preprocess.py",
    "xpspec/refimpl/replay.py",
    "xpspec/refimpl/relabel.py",
    "xpspec/refimpl/recurrent.py",
    "xpspec/refimpl/trainer.py",
    "xpspec/refimpl/learner",
    "xpspec/protocol/preprocessors.py",
    "xpspec/protocol/sampling.py",
)
"""The semantic modules under mutation (a folder means every module in it): the reference
implementation's, and the validation of the preprocessing and sampling values it takes from
the protocol core (mutated in ``refimpl`` before those values moved there)."""
PACKAGES = ("xpspec", "mutation")
"""What the copy of the tree holds: the suite, the implementation and the probe."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("--sample", type=int, default=150, help="mutants to run (default 150)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample and its order")
    parser.add_argument("--all", action="store_true", help="run every mutant")
    parser.add_argument("--resume", action="store_true", help="go on with the session's work")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".mutation")
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--table-only", action="store_true", help="rewrite the docs table only")
    parser.add_argument(
        "--export-only",
        action="store_true",
        help="re-export results.jsonl from the session (after a change of the classifier)",
    )
    args = parser.parse_args(argv)
    if args.export_only:
        reexport(args.workdir.resolve())
    elif not args.table_only:
        run(args)
    from mutation.table import write_docs

    write_docs()
    return 0


def run(args: argparse.Namespace) -> None:
    from cosmic_ray.commands import init
    from cosmic_ray.modules import find_modules
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    work: Path = args.workdir.resolve()
    tree = work / "tree"
    session = work / "session.sqlite"
    work.mkdir(parents=True, exist_ok=True)
    copy_tree(tree)
    os.chdir(tree)
    os.environ["PYTHONPATH"] = str(tree)
    probe = f"{sys.executable} -m mutation.probe --report {work / 'probe.jsonl'}"

    start = time.perf_counter()
    baseline = subprocess.run(probe.split(), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    verdict = parse_verdict(baseline.stdout)
    if verdict is None or verdict.run_class != "survived":
        sys.exit(f"the unmutated tree must pass the suite; got {baseline.stdout}{baseline.stderr}")
    timeout = max(10.0, args.timeout_factor * seconds)
    log(f"baseline: suite passes in {seconds:.1f} s; per-mutant timeout {timeout:.0f} s")

    if not (args.resume and session.is_file()):
        session.unlink(missing_ok=True)
        with use_db(str(session)) as db:
            init(find_modules([Path(m) for m in MODULES]), db, {})
            items = sorted(db.work_items, key=lambda item: mutant_id(item.mutations[0]))
            order = [item.job_id for item in items]
            chosen = (
                set(order)
                if args.all
                else set(random.Random(args.seed).sample(order, min(args.sample, len(order))))
            )
            skipped = [job_id for job_id in order if job_id not in chosen]
            db.set_multiple_results(
                skipped,
                WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not in the sample"),
            )
        meta = {
            "tool": f"cosmic-ray {tool_version()}",
            "seed": args.seed,
            "sample": "all" if args.all else args.sample,
            "mutants": len(order),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (work / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    meta.update(baseline_seconds=round(seconds, 1), timeout=round(timeout))

    with use_db(str(session), mode=WorkDB.Mode.open) as db:
        pending = list(db.pending_work_items)
        rank = {j: i for i, j in enumerate(shuffled([w.job_id for w in db.work_items], args.seed))}
        pending.sort(key=lambda item: rank[item.job_id])
        done = db.num_results - len(
            [r for _, r in db.results if r.worker_outcome == WorkerOutcome.SKIPPED]
        )
        total = done + len(pending)
        for item in pending:
            began = time.perf_counter()
            result = mutate_and_test(item.mutations, probe, timeout)
            db.set_result(item.job_id, result)
            done += 1
            log(
                f"[{done}/{total}] {mutant_id(item.mutations[0])} "
                f"-> {describe(result)} ({time.perf_counter() - began:.1f} s)"
            )
            export(db, meta, HERE / "results.jsonl")  # after each: a stopped run keeps its work
        export(db, meta, HERE / "results.jsonl")


def reexport(work: Path) -> None:
    """Export the session's results again, with the header the last export wrote."""
    from cosmic_ray.work_db import WorkDB, use_db

    results = HERE / "results.jsonl"
    header = json.loads(results.read_text(encoding="utf-8").splitlines()[0])
    meta = {k: v for k, v in header.items() if k not in ("type", "executed", "pending", "ended")}
    ended = header.get("ended")
    with use_db(str(work / "session.sqlite"), mode=WorkDB.Mode.open) as db:
        export(db, meta, results, ended=ended)


def copy_tree(tree: Path) -> None:
    """A fresh copy of the packages the suite needs (a stopped run may have left a mutant)."""
    if tree.exists():
        shutil.rmtree(tree)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def mutant_id(mutation: Any) -> str:
    """A stable id: module path, operator and occurrence (``xpspec/refimpl/replay.py:Op:3``)."""
    module = Path(str(mutation.module_path)).as_posix()
    operator = str(mutation.operator_name).removeprefix("core/")
    return f"{module}:{operator}:{mutation.occurrence}"


def shuffled(job_ids: list[str], seed: int) -> list[str]:
    ordered = sorted(job_ids)
    random.Random(seed).shuffle(ordered)
    return ordered


def describe(result: Any) -> str:
    from mutation.results import classify_result

    run_class, detail = classify_result(
        str(result.worker_outcome.value),
        getattr(result.test_outcome, "value", None),
        result.output or "",
    )
    return f"{run_class}: {detail}" if detail else run_class


def export(db: Any, meta: dict[str, object], path: Path, ended: str | None = None) -> None:
    """Every executed mutant of the session, one JSON line each, after a header line."""
    from mutation.results import record

    items = {w.job_id: w for w in db.work_items}
    rows = []
    pending = len(list(db.pending_work_items))
    for job_id, result in db.results:
        if result.worker_outcome.value == "skipped":
            continue
        mutation = items[job_id].mutations[0]
        rows.append(
            record(
                mutant_id(mutation),
                Path(str(mutation.module_path)).as_posix(),
                mutation.start_pos[0],
                str(result.worker_outcome.value),
                getattr(result.test_outcome, "value", None),
                result.output or "",
                result.diff or "",
            )
        )
    rows.sort(key=lambda r: (r["module"], r["line"], r["id"]))
    header = {**meta, "type": "header", "executed": len(rows), "pending": pending}
    header["ended"] = ended or datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = [json.dumps(header, sort_keys=True), *(json.dumps(r, sort_keys=True) for r in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tool_version() -> str:
    from importlib.metadata import version

    return version("cosmic-ray")


def log(message: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
