"""Render stage: agent text outputs → PDF, DOCX, Markdown, slides, spreadsheets, images and audio derivatives.

Usage:
    python jobs/render.py --run-dir runs/demo                          # laptop, local Ray
    python jobs/render.py --run-dir runs/demo --serial --set render.limit=20
    ray job submit --working-dir . -- python jobs/render.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job


def main(argv=None) -> int:
    p = common_parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    cfg = config_from_args(args, section="render")
    from rendering.stage import run_render

    rec = run_render(cfg)
    errors = sum(c.get("error", 0) for c in rec["counts"].values())
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(run_job(main))
