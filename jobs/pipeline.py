"""Run the whole FileGram pipeline: seed → generate → encode → render → record → caption → bench → evaluate.

Usage:
    python jobs/pipeline.py                                  # laptop: local Ray, conf/default.yaml
    python jobs/pipeline.py --only seed generate --serial    # debug two stages without Ray
    ray job submit --working-dir . -- python jobs/pipeline.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.pipeline import pipeline_main


def main(argv=None) -> int:
    return pipeline_main(argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
