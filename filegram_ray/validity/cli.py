"""``filegram validity RUN [--cross RUN2]``: the behaviour-validity check of a generated run."""

from __future__ import annotations

import argparse
import sys


def _validity(args: argparse.Namespace) -> int:
    from filegram_ray.storage import refuse_missing_local_run
    from filegram_ray.validity.core import TARGETS
    from filegram_ray.validity.report import run_validity

    for run in filter(None, (args.run_dir, args.train_run)):
        refuse_missing_local_run(run, "filegram validity")
    res = run_validity(args.run_dir, profiles_dir=args.profiles_dir, train_run=args.train_run,
                       train_profiles_dir=args.train_profiles_dir, tasks_dir=args.tasks_dir)
    lpo, pe = res["lpo"], res["perturbations"]
    store, dimf, task = (res["tau"][k] for k in ("store", "per_dimension", "per_dimension_task"))

    def f(x):
        return "  – " if x is None else f"{x:.2f}"

    def fp(x):  # a profile-level figure, ✗ when under its bound
        return f(x) + ("✗" if x is not None and x < TARGETS["profile"] else " ")

    def pr(x):  # a τ-flag precision / recall pair, ✗ when either is under its target
        low = any(v is not None and v < TARGETS[k] for v, k in ((x["precision"], "flag_precision"),
                                                                (x["recall"], "flag_recall")))
        return f(x["precision"]) + "/" + f(x["recall"]) + ("✗" if low else " ")

    print(f"validity of {args.run_dir}: {res['n_sessions']} sessions, {res['n_profiles']} profiles")
    for key, whose in (("skipped", args.run_dir), ("train_skipped", f"the --cross run {args.train_run}")):
        if res.get(key):
            print(f"  left out of {whose}: {len(res[key])} trajectories with an unreadable or malformed file "
                  f"(first: {res[key][0]['error']})")
    head = (f"  {'dim':<4}{'session':>8}{'profile':>9}{'rule':>6}{'no-op':>6}{'effect':>7}  τ-flags P/R: "
            f"{'store':>12}{'per-dim':>12}{'task-std':>12}")
    if res.get("cross"):
        head += f"{'xs-sess':>8}{'xs-prof':>9}"
    print(head)
    for d in "ABCDEF":
        r = lpo[d]
        sess, prof = ("n/a", "n/a ") if "na" in r else (f(r.get("session")), fp(r.get("profile")))
        line = (f"  {d:<4}{sess:>8}{prof:>9}{f(res['rule'][d]['profile']):>6}"
                f"{pe['dimensions'][d]['no_op']:>6}{f(pe['dimensions'][d]['effect_mean']):>7}{'':14}"
                + "".join(f"{pr(x[d]):>12}" for x in (store, dimf, task)))
        if res.get("cross"):
            line += f"{f(res['cross'][d]['session']):>8}{fp(res['cross'][d]['profile']):>9}"
        print(line)
    na = sorted({r["na"] for r in lpo.values() if "na" in r})
    if na:
        print(f"  session/profile (leave-profiles-out recovery): n/a ({'; '.join(na)})"
              + ("" if res.get("cross") else "; for a recovery figure train on another run: --train-run OTHER"))
    c = res["counts"]["per_traj"]
    print("  counts per trajectory (ours/paper): " + ", ".join(
        f"{k} {v['ours']:.1f}/{v['paper']:.1f}" for k, v in c.items()))
    print("  columns: session / profile = tier recovery of one session / of all of a profile's sessions "
          "(leave-profiles-out; xs- = trained on --cross); rule = the memory store's rule classifier (profile); "
          "no-op / effect = perturbations without effect / mean effect in per-task SDs; τ-flags = the memory's "
          "deviation flags (store, per dimension, per dimension task-standardised)")
    print(f"  ✗ = under its target: profile ≥ {TARGETS['profile']}, flag P/R ≥ {TARGETS['flag_precision']}/"
          f"{TARGETS['flag_recall']}; session recovery is information (a single session shows its tier only as a "
          f"tendency; its bound is single-session separability ≤ 0.8 below); no-op perturbations: {pe['no_op']} "
          f"of {pe['n']}")
    from filegram_ray.validity.realism import check_lines

    print("  behaviour-validity checks (value, bound, PASS / FAIL):")
    for line in check_lines(res["realism"]):
        print(line)
    print(f"  wrote {args.run_dir}/results/validity.md and validity.json")
    failed = [c["name"] for c in res["realism"]["checks"] if c["pass"] is False]
    if failed and args.strict:
        print(f"validity: {len(failed)} check(s) FAIL (--strict): {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("validity", help="does the behaviour carry the profile, like a person? (tier "
                              "recovery, single-session separability, η², perturbations, a count-rule answerer, "
                              "motivation, τ-flags, aggregate counts; each bounded figure PASS/FAIL) → "
                              "RUN/results/validity.md")
    p.add_argument("run_dir", help="a run directory after the generate stage")
    p.add_argument("--profiles-dir", default=None, help="the run's profile set (default: recorded in run.json)")
    p.add_argument("--train-run", "--cross", dest="train_run", default=None, metavar="RUN2",
                   help="a second, independently generated run: recovery and single-session separability are "
                        "fitted on RUN2 and scored on RUN (cross-set columns and checks)")
    p.add_argument("--train-profiles-dir", default=None, help="profile set of --train-run (default: its run.json)")
    p.add_argument("--tasks-dir", default=None, help="task set (default: recorded in run.json, else conf/tasks)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a bounded check FAILs (default: a report, exit 0 whatever it finds)")
    p.set_defaults(func=_validity)
