"""Time every stage of the whole pipeline on the default configuration (or any config), into a fresh run dir.

Prints the per-stage table that ``jobs/pipeline.py`` prints, plus the total against the issue's goal (≤ 15 min
on 2 cores for 20 profiles × 32 tasks). Extra ``--set`` overrides go to the config, e.g. a smaller
``--set evaluate.sample_per_sub_task=10``.

Usage:
    python tests/benchmarks/bench_pipeline.py [--run-dir /tmp/fg-bench-pipeline] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config  # noqa: E402
from filegram_ray.pipeline import run_pipeline  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None, help="fresh run directory (default: a new temp dir)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fg-bench-pipeline-")
    cfg = load_config(None, [f"run_dir={run_dir}", *args.overrides])
    t0 = time.perf_counter()
    timings = run_pipeline(cfg)
    total = time.perf_counter() - t0
    print("\nbench_pipeline")
    for name, rec in timings.items():
        print(f"  {name:<10} {rec['seconds']:>8.1f} s")
    print(f"  {'total':<10} {total:>8.1f} s   (goal: ≤ 900 s on 2 cores)")
    print(f"  run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
