"""Bench stage: build FileGramBench (bench/items.parquet + bench/answers_key.parquet) from a run's trajectories.

Usage:
    python jobs/bench.py --run-dir runs/default
    python jobs/bench.py --seed 11 --set bench.sub_tasks='[AttrRec,AnomDet]'
    ray job submit --working-dir . -- python jobs/bench.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job


def main(argv=None) -> int:
    from filegram_ray.bench.stage import run_bench

    p = common_parser(__doc__.splitlines()[0])  # --serial accepted: this stage always runs in process
    args = p.parse_args(argv)
    run_bench(config_from_args(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_job(main))
