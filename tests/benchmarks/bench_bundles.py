"""Benchmark: generate all 32 task bundles serially; prints per-bundle and total time, files/s, bytes.

    python tests/benchmarks/bench_bundles.py [--seed 7] [--tts auto|tone] [--tasks T-01 T-22]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.tasks import load_tasks
from filegram_ray.workspace.bundle import build_bundle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tts", default="auto", choices=["auto", "tone"])
    ap.add_argument("--tasks", nargs="+")
    args = ap.parse_args()
    tasks = [t for t in load_tasks() if not args.tasks or t.task_id in args.tasks]
    n_files = n_bytes = 0
    kinds: dict[str, int] = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for t in tasks:
            t0 = time.perf_counter()
            info = build_bundle(t, args.seed, Path(tmp) / t.task_id, tts=args.tts)
            dt = time.perf_counter() - t0
            n_files += info.n_files
            n_bytes += info.total_bytes
            for k, v in info.by_kind.items():
                kinds[k] = kinds.get(k, 0) + v
            print(f"{t.task_id}  {info.n_files:>4} files  {info.total_bytes / 1e6:7.2f} MB  {dt:6.2f} s", flush=True)
    total = time.perf_counter() - t_all
    print(f"\n{len(tasks)} bundles, {n_files} files, {n_bytes / 1e6:.1f} MB in {total:.1f} s "
          f"= {n_files / total:.1f} files/s (tts={args.tts})")
    print("by kind: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
