"""``filegram profiles ...``: list a profile set, build a new one, print the perturbation plan.

- ``filegram profiles list [--dir DIR]`` — id, name, role, language, tiers A..F (E = curation), rhythm.
- ``filegram profiles new --n 200 --seed 7 --out DIR`` — build a balanced profile set
  (:mod:`filegram_ray.profiles.generate`), one YAML per profile plus ``pairs.json``.
- ``filegram profiles perturbations [--dir DIR] [--seed N] [--scheme seeded|upstream]`` — the perturbation plan
  (:mod:`filegram_ray.profiles.perturbation`), one line per profile, then totals per task and per dimension.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from filegram_ray.errors import UserError
from filegram_ray.jobargs import at_least_one


def format_table(profiles) -> str:
    """Plain-text table of profiles (shape: str)."""
    from filegram_ray.schema.profile import DIMENSION_NAMES, DIMENSIONS

    wid = max([len(p.profile_id) for p in profiles] + [2])
    wname = max([len(p.name) for p in profiles] + [4])
    wrole = max([len(p.role) for p in profiles] + [4])
    head = (f"{'id':<{wid}}  {'name':<{wname}}  {'role':<{wrole}}  lang  " + " ".join(DIMENSIONS) + "  rhythm")
    lines = [head, "-" * len(head)]
    for p in profiles:
        lines.append(f"{p.profile_id:<{wid}}  {p.name:<{wname}}  {p.role:<{wrole}}  {p.lang:<4}  "
                     + " ".join(p.tiers[d] for d in DIMENSIONS) + f"  {p.rhythm}")
    lines.append(f"{len(profiles)} profiles; tiers L / M / R per dimension: "
                 + ", ".join(f"{d} {DIMENSION_NAMES[d]}" for d in DIMENSIONS)
                 + "; rhythm = ordering texture (upstream's E)")
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    from filegram_ray.profiles import load_profiles

    print(format_table(load_profiles(args.dir)))
    return 0


def _new(args: argparse.Namespace) -> int:
    from filegram_ray.profiles.generate import build_profile_set, write_profile_set
    from filegram_ray.profiles.pairs import fine_pairs, macro_pairs

    existing = sorted(Path(args.out).glob("*.yaml")) if Path(args.out).is_dir() else []
    if existing:
        raise UserError(f"{args.out} already holds a profile set ({len(existing)} YAML files); "
                         "write a new set into an empty directory")
    profiles = build_profile_set(args.n, args.seed)
    out = write_profile_set(profiles, args.out, args.seed)
    print(f"wrote {len(profiles)} profiles + pairs.json to {out} "
          f"({len(fine_pairs(profiles))} fine pairs, {len(macro_pairs(profiles))} macro pairs)")
    return 0


def format_plan(plan) -> str:
    """One line per profile (``task: dim from->to``), then totals per task and per dimension (shape: str)."""
    from collections import Counter

    per: dict[str, list[str]] = {}
    for (pid, tid), p in plan.items():
        per.setdefault(pid, []).append(f"{tid} {p.dimension} {p.from_}->{p.to}")
    wid = max([len(k) for k in per] + [7])
    lines = [f"{'profile':<{wid}}  perturbed trajectories (E = curation)"]
    lines += [f"{pid:<{wid}}  " + "; ".join(items) for pid, items in per.items()]
    by_task = Counter(tid for _, tid in plan)
    by_dim = Counter(p.dimension for p in plan.values())
    lines.append("per task: " + ", ".join(f"{k} {v}" for k, v in sorted(by_task.items())) + f" (={len(plan)})")
    lines.append("per dim:  " + ", ".join(f"{k} {v}" for k, v in sorted(by_dim.items())))
    jumps = [f"{pid} {tid} {p.dimension} {p.from_}->{p.to}" for (pid, tid), p in plan.items()
             if {p.from_, p.to} == {"L", "R"}]
    if jumps:  # the upstream scheme's E shifts are one tier on the rhythm scale (profiles/perturbation.py)
        lines.append(f"two-tier shifts: {'; '.join(jumps)} (upstream computes E shifts on the rhythm tier; one "
                     "rhythm tier reads as two on the curation scale, kept so ShiftAna agrees with upstream)")
    lines.append("the plan: the generate stage re-simulates each shift without it and moves one that changes "
                 "nothing to the task's next active dimension, or drops it (meta.json perturbation_check; "
                 "docs/validity.md)")
    return "\n".join(lines)


def _perturbations(args: argparse.Namespace) -> int:
    from filegram_ray.profiles import load_profiles
    from filegram_ray.profiles.perturbation import plan_perturbations

    print(format_plan(plan_perturbations(load_profiles(args.dir), seed=args.seed, scheme=args.scheme)))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("profiles", help="inspect or build profile sets")
    sub = p.add_subparsers(dest="profiles_command", metavar="ACTION")
    ls = sub.add_parser("list", help="list profiles with their tier vectors")
    ls.add_argument("--dir", default=None, help="profile directory or file, ours or upstream FileGram's format "
                    "(default conf/profiles)")
    ls.set_defaults(func=_list)
    new = sub.add_parser("new", help="build a balanced profile set of any size (Faker identities)")
    new.add_argument("--n", type=at_least_one, required=True, help="number of profiles (≥ 1)")
    new.add_argument("--seed", type=int, default=7, help="master seed (same seed, same bytes)")
    new.add_argument("--out", required=True, help="output directory")
    new.set_defaults(func=_new)
    pt = sub.add_parser("perturbations", help="print the behavioural perturbation plan (ref §5.7)")
    pt.add_argument("--dir", default=None, help="profile directory (default conf/profiles)")
    pt.add_argument("--seed", type=int, default=7, help="master seed for the 'seeded' scheme")
    pt.add_argument("--scheme", choices=["seeded", "upstream"], default=None,
                    help="default: upstream for p<N>_ ids, seeded otherwise")
    pt.set_defaults(func=_perturbations)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
