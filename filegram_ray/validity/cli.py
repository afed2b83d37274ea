"""``filegram validity RUN [--train-run OTHER]``: the behaviour-validity check of a generated run."""

from __future__ import annotations

import argparse


def _validity(args: argparse.Namespace) -> int:
    from filegram_ray.validity.core import TARGETS, run_validity

    res = run_validity(args.run_dir, profiles_dir=args.profiles_dir, train_run=args.train_run,
                       train_profiles_dir=args.train_profiles_dir, tasks_dir=args.tasks_dir)
    lpo, tau, pe = res["lpo"], res["tau"]["per_dimension"], res["perturbations"]

    def f(x):
        return "  – " if x is None else f"{x:.2f}"

    print(f"validity of {args.run_dir}: {res['n_sessions']} sessions, {res['n_profiles']} profiles")
    head = f"  {'dim':<4}{'session':>8}{'profile':>8}{'rule':>6}{'no-op':>6}{'effect':>7}{'flagP':>7}{'flagR':>7}"
    if res.get("cross"):
        head += f"{'xs-sess':>8}{'xs-prof':>8}"
    print(head)
    for d in "ABCDEF":
        r = lpo[d]
        line = (f"  {d:<4}{f(r.get('session')):>8}{f(r.get('profile')):>8}{f(res['rule'][d]['profile']):>6}"
                f"{pe['dimensions'][d]['no_op']:>6}{f(pe['dimensions'][d]['effect_mean']):>7}"
                f"{f(tau[d]['precision']):>7}{f(tau[d]['recall']):>7}")
        if res.get("cross"):
            line += f"{f(res['cross'][d]['session']):>8}{f(res['cross'][d]['profile']):>8}"
        print(line)
    c = res["counts"]["per_traj"]
    print("  counts per trajectory (ours/paper): " + ", ".join(
        f"{k} {v['ours']:.1f}/{v['paper']:.1f}" for k, v in c.items()))
    print(f"  targets: profile ≥ {TARGETS['profile']}, session ≥ {TARGETS['session']}, flag P/R ≥ "
          f"{TARGETS['flag_precision']}/{TARGETS['flag_recall']}; no-op perturbations: {pe['no_op']} of {pe['n']}")
    print(f"  wrote {args.run_dir}/results/validity.md and validity.json")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("validity", help="does the behaviour carry the profile? (tier recovery, "
                              "perturbation effects, τ-flags, aggregate counts) → RUN/results/validity.md")
    p.add_argument("run_dir", help="a run directory after the generate stage")
    p.add_argument("--profiles-dir", default=None, help="the run's profile set (default: recorded in run.json)")
    p.add_argument("--train-run", default=None, help="cross-set recovery: train on this run, test on RUN")
    p.add_argument("--train-profiles-dir", default=None, help="profile set of --train-run (default: its run.json)")
    p.add_argument("--tasks-dir", default=None, help="task set (default: recorded in run.json, else conf/tasks)")
    p.set_defaults(func=_validity)
