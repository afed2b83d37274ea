"""Bench stage: build FileGramBench (bench/items.parquet + bench/answers_key.parquet) from a run's trajectories.

Usage:
    python jobs/bench.py --run-dir runs/default
    python jobs/bench.py --seed 11 --set bench.sub_tasks='[AttrRec,AnomDet]'
    ray job submit --working-dir . -- python jobs/bench.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("bench", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
