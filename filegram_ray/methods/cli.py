"""``filegram methods`` (list the registered memory methods) and ``filegram evaluate`` (the evaluate stage)."""

from __future__ import annotations

import argparse


def _list(args: argparse.Namespace) -> int:
    from filegram_ray.methods import make_method, method_names

    for name in method_names():
        m = make_method(name)
        doc = (type(m).__doc__ or "").strip().splitlines()[0] if type(m).__doc__ else ""
        print(f"{name:<28} {m.display:<26} {doc}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from filegram_ray.evaluate.stage import run_evaluate
    from filegram_ray.jobargs import config_from_args

    cfg = config_from_args(args)
    backbone = args.backbone
    if args.backbone_url:
        backbone = {"kind": "openai", "base_url": args.backbone_url, "model": args.backbone_model or "local"}
    info = run_evaluate(cfg, methods=args.methods, backbone=backbone, serial=True if args.serial else None)
    print(f"evaluate: {info['n_items']} items × {len(info['methods'])} methods, {info['n_error_rows']} error rows, "
          f"{info['seconds']} s; report: {cfg.run().url('results/report.md')}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("methods", help="list the registered memory methods")
    p.set_defaults(func=_list)
    e = sub.add_parser("evaluate", help="answer FileGramBench items with memory methods; write results/")
    e.add_argument("--config", default=None)
    e.add_argument("--run-dir", default=None)
    e.add_argument("--seed", type=int, default=None)
    e.add_argument("--address", default=None)
    e.add_argument("--serial", action="store_true")
    e.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    e.add_argument("--methods", nargs="+", default=None)
    e.add_argument("--backbone", default=None, help="lexical | random | openai")
    e.add_argument("--backbone-url", default=None)
    e.add_argument("--backbone-model", default=None)
    e.set_defaults(func=_evaluate)
