"""``filegram bench build`` (the bench stage's door, :mod:`filegram_ray.stages.cli`) and ``filegram bench counts``."""

from __future__ import annotations

import argparse


def _counts(args: argparse.Namespace) -> int:
    from filegram_ray.bench.stage import counts_table
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.storage import refuse_missing_local_run

    if args.run and args.run_dir and args.run != args.run_dir:
        raise SystemExit(f"filegram bench counts: two run directories given ({args.run} and --run-dir "
                         f"{args.run_dir}); give one")
    args.run_dir = args.run_dir or args.run  # `bench counts RUN` like `view RUN`, `validity RUN`, `findings RUN`
    config = config_from_args(args)
    refuse_missing_local_run(config.run_dir, "filegram bench counts")
    run = config.run()
    print(counts_table(run.read_table("bench/items.parquet")))
    return 0


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="pipeline YAML (default: conf/default.yaml)")
    p.add_argument("--run-dir", default=None, help="run directory: local path or fsspec URI")
    p.add_argument("--seed", type=int, default=None, help="master seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set bench.counts.AnomDet=100 (repeatable)")
    p.set_defaults(address=None)


def register(subparsers) -> None:
    """Add the ``bench`` command group."""
    p = subparsers.add_parser("bench", help="build FileGramBench items (bench stage) and show their counts")
    sub = p.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    from filegram_ray.stages.cli import add_stage_door

    add_stage_door(sub, "build", "bench", help="build bench/items.parquet and bench/answers_key.parquet for a run")
    c = sub.add_parser("counts", help="print item counts per track, sub-task and channel of a built bank")
    c.add_argument("run", nargs="?", default=None, metavar="RUN", help="the run directory (same as --run-dir)")
    _add_common(c)
    c.set_defaults(func=_counts)
