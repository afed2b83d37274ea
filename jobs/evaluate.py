"""Evaluate memory methods on FileGramBench: answers, scores, results/report.md and plots.

Usage:
    python jobs/evaluate.py --run-dir runs/default                          # all default methods, lexical backbone
    python jobs/evaluate.py --methods full_context filegramos --serial
    python jobs/evaluate.py --backbone-url http://127.0.0.1:8011/v1 --backbone-model local
    ray job submit --working-dir . -- python jobs/evaluate.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("evaluate", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
