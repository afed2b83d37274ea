"""``filegram pipeline`` — the same as ``python jobs/pipeline.py``."""

from __future__ import annotations

import argparse

from filegram_ray.pipeline import STAGES


def register(sub: argparse._SubParsersAction) -> None:
    from filegram_ray.jobargs import add_common_options

    p = sub.add_parser("pipeline", help="run seed → generate → encode → render → record → caption → bench → evaluate")
    names = [s.name for s in STAGES]
    add_common_options(p)
    p.add_argument("--only", nargs="+", choices=names, help="run only these stages")
    p.add_argument("--skip", nargs="+", choices=names, help="skip these stages")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.pipeline import run_pipeline

    cfg = config_from_args(args)
    timings = run_pipeline(cfg, only=args.only, skip=args.skip, serial=args.serial)
    if "evaluate" in timings:  # only a pipeline that evaluated has a report of this run to point at
        print(f"\nReport: {cfg.run().url('results/report.md')}")
        from filegram_ray.view.build import view_after_pipeline

        view_after_pipeline(cfg.run())  # the last line: "open RUN/view/index.html"
    return 0
