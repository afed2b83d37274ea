"""``filegram findings RUN``: the paper's findings (F1–F6) decided on an evaluated run, with the reader's headroom."""

from __future__ import annotations

import argparse
import json
import os

from filegram_ray.errors import UserError

#: columns of ``results/results.parquet`` the findings read
NEEDED_COLUMNS = ("method", "question_id", "score", "is_open", "sub_track", "channel")


def findings_of_run(run_dir: str) -> dict:
    """Recompute the report's statistics (:func:`filegram_ray.evaluate.report.report_statistics`) from
    ``RUN/results/results.parquet`` with the run's seed (``run.json``, else 0), write ``results/findings.json`` and
    return ``{"run", "stats", "seed"}``.

    Raises:
        FileNotFoundError: ``run_dir`` is a local path that is not a directory.
        UserError: ``results/results.parquet`` is missing (names it and the command that writes it).
        StorageError: ``results/results.parquet`` is unreadable (names the file).
        ValueError: the table lacks a needed column (names the file and the column).
    """
    from filegram_ray.evaluate.report import report_statistics, write_statistics
    from filegram_ray.storage import RunDir

    if "://" not in run_dir and not os.path.isdir(run_dir):
        raise FileNotFoundError(f"run directory {run_dir} does not exist (filegram findings reads an evaluated run)")
    run = RunDir(run_dir)
    if not run.exists("results/results.parquet"):
        raise UserError(f"{run.uri}: findings need an evaluated run (results/results.parquet is missing): run "
                        f"`filegram evaluate --run-dir {run.uri}` first")
    results = run.read_table("results/results.parquet")
    missing = [c for c in NEEDED_COLUMNS if c not in results.columns]
    if missing:
        raise UserError(f"{run.url('results/results.parquet')}: missing column(s) {', '.join(missing)} "
                         "(rerun the evaluate stage)")
    seed = 0
    if run.exists("run.json"):
        try:
            from filegram_ray.schema.meta import read_manifest

            seed = int(read_manifest(run).get("seed", 0) or 0)
        except (ValueError, TypeError, AttributeError):
            seed = 0
    stats = report_statistics(results, seed)
    write_statistics(run, stats)
    return {"run": run, "stats": stats, "seed": seed, "has_profile": "profile" in results.columns}


def _findings(args: argparse.Namespace) -> int:
    from filegram_ray.evaluate.report import headroom_lines
    from filegram_ray.evaluate.stage import stale_results_note

    out = findings_of_run(args.run_dir)
    stats = out["stats"]
    if args.json:
        print(json.dumps({"findings": stats["findings"], "reader": stats["reader"]}, indent=1, default=str))
        return 0
    print(f"findings of {args.run_dir} ({len(stats['methods'])} methods; seed {out['seed']})")
    stale = stale_results_note(out["run"])
    if stale:
        print(f"  note: {stale}")
    if not out["has_profile"]:
        print("  note: results.parquet has no profile column (evaluated by an older version): items are resampled "
              "one by one, so the intervals are too narrow; rerun evaluate for profile-level intervals")
    print("  " + headroom_lines(stats["reader"])[0].replace("**", ""))
    for f in stats["findings"]:
        items = f" — about {f['items']:,} items would decide it ({f['toward']})" if f["items"] else ""
        print(f"  {f['id']} {f['verdict'].upper():9s} {f['statement']}{items}")
        if f.get("not_tested"):
            print(f"       not tested: {f['not_tested']}")
        if f["missing"]:
            print(f"       not evaluated: {', '.join(f['missing'])}")
        for c in f["claims"]:
            print(f"       {c['claim']}: {c['verdict']} ({c['why']})")
    print(f"  wrote {out['run'].url('results/findings.json')}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("findings", help="the paper's findings F1–F6 decided on an evaluated run (paired "
                              "tests, intervals; holds / fails / undecided with the items to decide)")
    p.add_argument("run_dir", help="a run directory after the evaluate stage")
    p.add_argument("--json", action="store_true", help="print the findings and the reader checks as JSON")
    p.set_defaults(func=_findings)
