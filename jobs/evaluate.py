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

from filegram_ray.jobargs import common_parser, config_from_args, run_job


def main(argv=None) -> int:
    from filegram_ray.evaluate.stage import run_evaluate

    p = common_parser(__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=None, help="method names (default: evaluate.methods)")
    p.add_argument("--backbone", default=None, help="lexical | random | openai (default: evaluate.backbone)")
    p.add_argument("--backbone-url", default=None, help="OpenAI-compatible base URL (implies --backbone openai)")
    p.add_argument("--backbone-model", default=None, help="model name at --backbone-url")
    args = p.parse_args(argv)
    cfg = config_from_args(args)
    backbone = args.backbone
    if args.backbone_url:
        backbone = {"kind": "openai", "base_url": args.backbone_url, "model": args.backbone_model or "local"}
    info = run_evaluate(cfg, methods=args.methods, backbone=backbone, serial=True if args.serial else None)
    print(f"evaluate: {info['n_items']} items × {len(info['methods'])} methods, {info['n_error_rows']} error rows, "
          f"{info['seconds']} s")
    print(f"Report: {cfg.run().url('results/report.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(run_job(main))
