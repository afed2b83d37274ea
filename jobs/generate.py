"""Generate stage: simulate one trajectory per (profile, task) on a pool of Ray actors.

Usage:
    python jobs/generate.py --run-dir runs/demo                         # laptop, local Ray
    python jobs/generate.py --run-dir runs/demo --profiles p1 p3 --tasks T-01 T-09 --serial
    ray job submit --working-dir . -- python jobs/generate.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("generate", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
