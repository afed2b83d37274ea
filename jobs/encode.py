"""Encode stage: trajectories → Engrams → per-profile memory stores → FAISS indices (filegram_ray.memory.stage).

Usage:
    python jobs/encode.py --run-dir runs/default [--set encode.embedder=hashing] [--serial]
    ray job submit --working-dir . -- python jobs/encode.py --run-dir s3://bucket/run
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("encode", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
