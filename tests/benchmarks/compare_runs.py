"""Compare two run directories file by file: what issue #29's port must keep byte-identical.

Usage:
    python tests/benchmarks/compare_runs.py BEFORE_RUN AFTER_RUN [--stage STAGE ...]

Every file under each run is hashed (sha256) except the bookkeeping that carries wall times or paths by design:
``run.json``, ``_done/``, ``view/``, ``.lock``, ``cache/`` and ``results/contexts/`` timings are not skipped. A
``--stage`` narrows the comparison to that stage's output folders (see ``OUTPUTS``). Prints the files that differ,
exist only on one side, and a one-line verdict; exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

#: output folders per stage (README "What it does")
OUTPUTS = {"seed": ["workspaces"], "generate": ["trajectories"], "encode": ["engrams", "memory", "indices"],
           "render": ["derivatives"], "record": ["recordings"], "caption": ["captions", "realworld"],
           "bench": ["bench"], "evaluate": ["results"]}
#: bookkeeping that holds wall times, pids or absolute paths by design
SKIP_TOP = {"run.json", "_done", "view", ".lock", "cache", "_lock.json"}


def manifest(root: str, tops: list[str] | None) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (within ``tops`` when given)."""
    out: dict[str, str] = {}
    for top in sorted(os.listdir(root)):
        if top in SKIP_TOP or (tops is not None and top not in tops):
            continue
        base = os.path.join(root, top)
        paths = [base] if os.path.isfile(base) else [os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs]
        for p in paths:
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--stage", nargs="+", choices=list(OUTPUTS), help="compare only these stages' outputs")
    args = ap.parse_args(argv)
    tops = sorted({t for s in args.stage for t in OUTPUTS[s]}) if args.stage else None
    a, b = manifest(args.before, tops), manifest(args.after, tops)
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    differ = sorted(p for p in set(a) & set(b) if a[p] != b[p])
    for p in only_a:
        print(f"only in before: {p}")
    for p in only_b:
        print(f"only in after:  {p}")
    for p in differ:
        print(f"differs:        {p}")
    same = len(set(a) & set(b)) - len(differ)
    print(f"{same} identical, {len(differ)} differ, {len(only_a)} only before, {len(only_b)} only after "
          f"({'IDENTICAL' if not (differ or only_a or only_b) else 'DIFFERENT'})")
    return 0 if not (differ or only_a or only_b) else 1


if __name__ == "__main__":
    sys.exit(main())
