"""Encode stage: trajectories → Engrams → per-profile memory stores → FAISS indices (filegram_ray.memory.stage).

Usage:
    python jobs/encode.py --run-dir runs/default [--set encode.embedder=hashing] [--serial]
    ray job submit --working-dir . -- python jobs/encode.py --run-dir s3://bucket/run
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job
from filegram_ray.memory.stage import run_encode


def main(argv: list[str] | None = None) -> int:
    args = common_parser(__doc__.splitlines()[0]).parse_args(argv)
    cfg = config_from_args(args, section="encode")
    summary = run_encode(cfg)
    return 1 if summary["errors"] and summary["errors"] == summary["trajectories"] else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
