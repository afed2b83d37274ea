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

from filegram_ray.jobargs import common_parser, config_from_args, run_job


def main(argv=None) -> int:
    p = common_parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    cfg = config_from_args(args, section="record")
    from video.record_stage import run_record

    rec = run_record(cfg)
    return 0 if rec["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(run_job(main))
