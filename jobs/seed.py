"""Seed stage: build every task's input workspace bundle into <run_dir>/workspaces/.

Usage:
    python jobs/seed.py --run-dir runs/demo --tasks T-01 T-07 --serial
    ray job submit --working-dir . -- python jobs/seed.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job
from filegram_ray.workspace.stage import run_seed


def main(argv=None) -> int:
    p = common_parser(__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=None, help="task ids (default: the run's set (run.json), else config 'tasks', else all)")
    args = p.parse_args(argv)
    cfg = config_from_args(args, extra={"tasks": args.tasks}, section="workspace")
    summary = run_seed(cfg)
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
