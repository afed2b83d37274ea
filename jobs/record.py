"""Record stage: guidance videos (H.264 MP4) of a seeded sample of trajectories, on a Ray Data actor pool.

Usage:
    python jobs/record.py --run-dir runs/demo                                   # laptop, local Ray
    python jobs/record.py --run-dir runs/demo --set record.sample=null          # every trajectory
    python jobs/record.py --run-dir runs/demo --set 'record.trajectories=[p1_methodical/T-03]' --serial
    ray job submit --working-dir . -- python jobs/record.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("record", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
