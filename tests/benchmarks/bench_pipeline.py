"""Time every stage of the whole pipeline on the default configuration (or any config), into a fresh run dir.

Prints the per-stage table (wall seconds, CPU seconds of the stage's whole process tree, peak memory, units
planned / done / skipped / failed — the stage records of run.json), the load average at start and end, and the
total against the issue's goal (≤ 15 min on 2 cores for 20 profiles × 32 tasks). CPU seconds hardly move with the
load of a shared machine: ``cpu_s / cores`` is what the stage needs of an otherwise idle machine. Extra ``--set``
overrides go to the config, e.g. a smaller ``--set evaluate.sample_per_sub_task=10``.

An interrupted run (Ctrl-C, an error) still prints the records of the stages that finished, read back from the run
directory's ``run.json``; ``--table-only`` prints that table for an existing run directory without running anything.

Usage:
    python tests/benchmarks/bench_pipeline.py [--run-dir /tmp/fg-bench-pipeline] [--set key=value ...]
    python tests/benchmarks/bench_pipeline.py --run-dir RUN --table-only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config  # noqa: E402
from filegram_ray.pipeline import STAGES, format_stage_table, run_pipeline  # noqa: E402


def recorded_timings(cfg) -> dict:
    """The stage records of ``run.json`` (stages that finished), in pipeline order, shaped like run_pipeline's
    result."""
    run = cfg.run()
    stages = (run.read_json("run.json").get("stages") or {}) if run.exists("run.json") else {}
    return {name: {"seconds": float(stages[name].get("seconds") or 0), "result": stages[name]}
            for name in [s.name for s in STAGES] if isinstance(stages.get(name), dict) and "seconds" in stages[name]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None, help="fresh run directory (default: a new temp dir)")
    ap.add_argument("--only", nargs="+", default=None, help="only these stages (resume a partial run)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--table-only", action="store_true", help="print the stage table of --run-dir's run.json")
    args = ap.parse_args(argv)
    if args.table_only and not args.run_dir:
        ap.error("--table-only needs --run-dir")
    if args.table_only and "://" not in args.run_dir and not os.path.isfile(os.path.join(args.run_dir, "run.json")):
        print(f"bench_pipeline: {args.run_dir} has no run.json (not a run directory)", file=sys.stderr)
        return 2
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fg-bench-pipeline-")
    cfg = load_config(None, [f"run_dir={run_dir}", *args.overrides])
    if args.table_only:
        timings = recorded_timings(cfg)
        if not timings:
            print(f"bench_pipeline: {run_dir}/run.json records no finished stage yet", file=sys.stderr)
            return 1
        print(format_stage_table(timings))
        return 0
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    try:
        timings = run_pipeline(cfg, only=args.only)
    except BaseException:
        print(f"\nbench_pipeline: interrupted after {time.perf_counter() - t0:.1f} s; load average now "
              "{:.1f}/{:.1f}/{:.1f}; stages recorded in run.json:".format(*os.getloadavg()))
        print(format_stage_table(recorded_timings(cfg)))
        raise
    total = time.perf_counter() - t0
    load1 = os.getloadavg()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = sum(float((r.get("result") or {}).get("cpu_s") or 0) for r in timings.values()
              if isinstance(r.get("result"), dict))
    print("\nbench_pipeline")
    print(format_stage_table(timings))
    print(f"total wall {total:.1f} s (goal: ≤ 900 s on 2 cores); CPU {cpu:.1f} s = at least {cpu / cores:.0f} s "
          f"on {cores} idle cores")
    print(f"load average (1/5/15 min): start {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f}, "
          f"end {load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f}")
    print(f"run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
