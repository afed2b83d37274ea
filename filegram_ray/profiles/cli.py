"""``filegram profiles ...``: list a profile set, build a new one, print the perturbation plan.

- ``filegram profiles list [--dir DIR]`` — id, name, role, language, tiers A..F (E = curation), rhythm.
"""

from __future__ import annotations

import argparse

from filegram_ray.profiles import load_profiles
from filegram_ray.schema.profile import DIMENSIONS


def format_table(profiles) -> str:
    """Plain-text table of profiles (shape: str)."""
    wid = max([len(p.profile_id) for p in profiles] + [2])
    wname = max([len(p.name) for p in profiles] + [4])
    wrole = max([len(p.role) for p in profiles] + [4])
    head = (f"{'id':<{wid}}  {'name':<{wname}}  {'role':<{wrole}}  lang  " + " ".join(DIMENSIONS) + "  rhythm")
    lines = [head, "-" * len(head)]
    for p in profiles:
        lines.append(f"{p.profile_id:<{wid}}  {p.name:<{wname}}  {p.role:<{wrole}}  {p.lang:<4}  "
                     + " ".join(p.tiers[d] for d in DIMENSIONS) + f"  {p.rhythm}")
    lines.append(f"{len(profiles)} profiles (E = curation tier; rhythm = ordering texture)")
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    print(format_table(load_profiles(args.dir)))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("profiles", help="inspect or build profile sets")
    sub = p.add_subparsers(dest="profiles_command", metavar="ACTION")
    ls = sub.add_parser("list", help="list profiles with their tier vectors")
    ls.add_argument("--dir", default=None, help="profile directory or file (default conf/profiles; upstream ok)")
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
