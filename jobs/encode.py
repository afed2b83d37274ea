"""Encode stage: trajectories → Engrams → MemoryStores → FAISS indices (filegram_ray.memory.stage).

    python jobs/encode.py --config conf/default.yaml --run-dir runs/default [--set encode.embedder=hashing] [--serial]
    ray job submit --working-dir . -- python jobs/encode.py --address auto ...
"""

from __future__ import annotations

import argparse
import sys

from filegram_ray.config import load_config
from filegram_ray.memory.stage import format_summary, run_encode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="pipeline YAML (default conf/default.yaml)")
    ap.add_argument("--run-dir", default=None, help="run directory (overrides run_dir)")
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="config override, repeatable")
    ap.add_argument("--serial", action="store_true", help="run without Ray (same code)")
    ap.add_argument("--address", default=None, help="Ray address (default RAY_ADDRESS or a local Ray)")
    args = ap.parse_args(argv)
    overrides = list(args.set) + ([f"run_dir={args.run_dir}"] if args.run_dir else [])
    cfg = load_config(args.config, overrides)
    summary = run_encode(cfg, serial=args.serial, address=args.address)
    print(format_summary(summary))
    return 1 if summary["errors"] and summary["errors"] == summary["trajectories"] else 0


if __name__ == "__main__":
    sys.exit(main())
