"""``filegram pipeline`` — the same as ``python jobs/pipeline.py``."""

from __future__ import annotations

import argparse

from filegram_ray.pipeline import STAGES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pipeline", help="run seed → generate → encode → render → bench → evaluate")
    names = [n for n, _ in STAGES]
    p.add_argument("--config", default=None, help="pipeline YAML (default conf/default.yaml)")
    p.add_argument("--run-dir", default=None, help="run directory (local path or URI)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--address", default=None, help="Ray address")
    p.add_argument("--serial", action="store_true", help="no Ray: run every stage in this process")
    p.add_argument("--only", nargs="+", choices=names)
    p.add_argument("--skip", nargs="+", choices=names)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.pipeline import run_pipeline

    cfg = config_from_args(args)
    run_pipeline(cfg, only=args.only, skip=args.skip, serial=args.serial)
    print(f"\nReport: {cfg.run().url('results/report.md')}")
    return 0
