"""Run the whole FileGram pipeline: seed → generate → encode → render → record → caption → bench → evaluate.

Usage:
    python jobs/pipeline.py                                  # laptop: local Ray, conf/default.yaml
    python jobs/pipeline.py --only seed generate --serial    # debug two stages without Ray
    ray job submit --working-dir . -- python jobs/pipeline.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job
from filegram_ray.pipeline import STAGES, run_pipeline


def main(argv=None) -> int:
    p = common_parser(__doc__.splitlines()[0])
    names = [s.name for s in STAGES]
    p.add_argument("--only", nargs="+", choices=names, help="run only these stages")
    p.add_argument("--skip", nargs="+", choices=names, help="skip these stages")
    args = p.parse_args(argv)
    cfg = config_from_args(args)
    timings = run_pipeline(cfg, only=args.only, skip=args.skip, serial=args.serial)
    if "evaluate" in timings:  # only a pipeline that evaluated has a report of this run to point at
        print(f"\nReport: {cfg.run().url('results/report.md')}")
        from filegram_ray.view.build import view_after_pipeline

        view_after_pipeline(cfg.run())  # the last line: "open RUN/view/index.html"
    return 0


if __name__ == "__main__":
    sys.exit(run_job(main))
