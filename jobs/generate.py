"""Generate stage: simulate one trajectory per (profile, task) on a pool of Ray actors.

Usage:
    python jobs/generate.py --run-dir runs/demo                         # laptop, local Ray
    python jobs/generate.py --run-dir runs/demo --profiles p1 p3 --tasks T-01 T-09 --serial
    ray job submit --working-dir . -- python jobs/generate.py --config conf/cluster.yaml
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import common_parser, config_from_args, run_job


def _at_least_one(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {n}")
    return n


def main(argv=None) -> int:
    p = common_parser(__doc__.splitlines()[0])
    p.add_argument("--profiles", nargs="+", default=None, help="profile ids (p1 or p1_methodical); default: the run's set (run.json), else config 'profiles', else all")
    p.add_argument("--tasks", nargs="+", default=None, help="task ids (T-01 …); default: the run's set (run.json), else config 'tasks', else all")
    p.add_argument("--profiles-dir", default=None, help="a profile set directory (new profile sets)")
    p.add_argument("--num-actors", type=_at_least_one, default=None,
                   help="actor pool size (same as --set generate.num_actors=N; ≥ 1)")
    args = p.parse_args(argv)
    if args.num_actors is not None:
        args.overrides = [*args.overrides, f"generate.num_actors={args.num_actors}"]
    cfg = config_from_args(args, {"profiles": args.profiles, "tasks": args.tasks,
                                  "profiles_dir": args.profiles_dir}, section="generate")
    from filegram_ray.engine.generate import run_generate

    rec = run_generate(cfg)
    return 0 if rec["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(run_job(main))
