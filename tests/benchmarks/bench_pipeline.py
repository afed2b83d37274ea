"""Time every stage of the whole pipeline on the default configuration (or any config), into a fresh run dir.

Prints the per-stage table (wall seconds, CPU seconds of the stage's whole process tree, peak memory, units
planned / done / skipped / failed — the stage records of run.json), the load average at start and end, and the
total against the issue's goal (≤ 15 min on 2 cores for 20 profiles × 32 tasks). CPU seconds hardly move with the
load of a shared machine: ``cpu_s / cores`` is what the stage needs of an otherwise idle machine. Extra ``--set``
overrides go to the config, e.g. a smaller ``--set evaluate.sample_per_sub_task=10``.

Usage:
    python tests/benchmarks/bench_pipeline.py [--run-dir /tmp/fg-bench-pipeline] [--set key=value ...]
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
from filegram_ray.pipeline import format_stage_table, run_pipeline  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None, help="fresh run directory (default: a new temp dir)")
    ap.add_argument("--only", nargs="+", default=None, help="only these stages (resume a partial run)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fg-bench-pipeline-")
    cfg = load_config(None, [f"run_dir={run_dir}", *args.overrides])
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    timings = run_pipeline(cfg, only=args.only)
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
