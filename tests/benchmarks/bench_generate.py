"""Benchmark the generate stage: trajectories/s, events/s and peak memory per actor.

Goal (issue #5): all 640 trajectories in ≤ 2 min on 2 cores, ≤ 1 GiB per actor. Workspaces are copied from an
existing run (``--workspaces-from``, e.g. a run where the seed stage ran) so only generation is timed.

Usage:
    python tests/benchmarks/bench_generate.py --workspaces-from /tmp/cal640 [--num-actors 2] [--serial]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config
from filegram_ray.engine.generate import run_generate
from filegram_ray.storage import RunDir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspaces-from", required=True, help="run dir holding workspaces/ (seed stage output)")
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--num-cpus-per-actor", type=float, default=0.5)
    ap.add_argument("--serial", action="store_true")
    ap.add_argument("--profiles", nargs="+")
    ap.add_argument("--tasks", nargs="+")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark run dir")
    args = ap.parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="fg-bench-gen-"))
    shutil.copytree(Path(args.workspaces_from) / "workspaces", run_dir / "workspaces")
    cfg = load_config(None, [f"run_dir={run_dir}"])
    data = cfg.model_dump()
    data.update(profiles=args.profiles, tasks=args.tasks,
                generate={"num_actors": args.num_actors, "num_cpus_per_actor": args.num_cpus_per_actor,
                          "executor": "serial" if args.serial else "actor-pool"})
    cfg = type(cfg).model_validate(data)
    t0 = time.perf_counter()
    rec = run_generate(cfg)
    wall = time.perf_counter() - t0
    per_pid = defaultdict(float)
    for r in RunDir(str(run_dir)).done_records("generate"):
        per_pid[r.get("pid")] = max(per_pid[r.get("pid")], float(r.get("peak_rss_mb", 0)))
    print("\nbench_generate")
    print(f"  trajectories      {rec['ok']} ok / {rec['error']} error in {wall:.1f} s "
          f"(incl. Ray start) → {rec['ok'] / wall:.2f} trajectories/s")
    print(f"  events            raw {rec['events_raw']} ({rec['events_raw'] / wall:.0f}/s), "
          f"kept {rec['events_kept']} ({rec['events_kept'] / wall:.0f}/s)")
    print(f"  actors            {len(per_pid)}; peak RSS per actor (MB): "
          + ", ".join(f"{v:.0f}" for v in sorted(per_pid.values())))
    print("  goal              640 in ≤ 120 s, ≤ 1024 MB per actor")
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        print(f"  run dir           {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
