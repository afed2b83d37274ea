"""Seed stage: build every task's input workspace bundle into <run_dir>/workspaces/.

Usage:
    python jobs/seed.py --run-dir runs/demo --tasks T-01 T-07 --serial
    ray job submit --working-dir . -- python jobs/seed.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("seed", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
