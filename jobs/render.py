"""Render stage: agent text outputs → PDF, DOCX, Markdown, slides, spreadsheets, images and audio derivatives.

Usage:
    python jobs/render.py --run-dir runs/demo                          # laptop, local Ray
    python jobs/render.py --run-dir runs/demo --serial --set render.limit=20
    ray job submit --working-dir . -- python jobs/render.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("render", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
