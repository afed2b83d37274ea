"""Compare two run directories file by file: what a port of the stages must keep byte-identical.

Usage:
    python tests/benchmarks/compare_runs.py BEFORE_RUN AFTER_RUN [--stage STAGE ...]

Every file under each run is hashed (sha256) except the bookkeeping that carries wall times or paths by design
(``run.json``, ``_done/``, ``view/``, ``.lock``, the run's ``cache/``). A ``--stage`` narrows the comparison to that
stage's output folders (see ``OUTPUTS``). Files whose bytes differ are then compared by content where the
difference is by design — and differs between two runs of the same code (:data:`BY_DESIGN`): the tables' wall- and
CPU-second columns are dropped, ``results/timings.json`` is skipped, and FileGramOS's pickled method states are
unpickled and compared as values (a set pickles in hash order). A table a later version writes elsewhere
(:data:`MOVED`) is compared by the error units it names. Prints the files that differ, exist only on one side, those
equal only by content (and why), and a one-line verdict; exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

#: output folders per stage (README "What it does")
OUTPUTS = {"seed": ["workspaces"], "generate": ["trajectories"], "encode": ["engrams", "memory", "indices", "errors"],
           "render": ["derivatives"], "record": ["recordings"], "caption": ["captions", "realworld"],
           "bench": ["bench"], "evaluate": ["results"]}
#: bookkeeping that holds wall times, pids or absolute paths by design
SKIP_TOP = {"run.json", "_done", "view", ".lock", "cache", "_lock.json"}


#: path → (why it may differ in bytes, how its content is compared): "columns:<a,b>" drops those columns of a
#: parquet table, "skip" leaves the file out, "pickle" compares the unpickled values
BY_DESIGN: dict[str, tuple[str, str]] = {
    "derivatives/timings.parquet": ("per-unit wall seconds", "skip"),
    "results/timings.json": ("the stage's wall seconds", "skip"),
    "recordings/index.parquet": ("the workers' wall and CPU seconds", "columns:render_s,cpu_s"),
    "captions/index.parquet": ("the workers' wall and CPU seconds", "columns:seconds,cpu_s"),
}
#: a table of the before run → where the after run keeps what it held (the runner's one error table per stage): equal
#: when both name the same failed units (an empty table and no table name none)
MOVED: dict[str, tuple[str, str]] = {
    "engrams/errors.parquet": ("errors/encode.parquet", "trajectory_id"),
}
#: prefix → rule, for whole folders
BY_DESIGN_PREFIX: dict[str, tuple[str, str]] = {
    "results/cache/": ("pickled method states hold sets (pickled in hash order)", "pickle"),
}


def _same(a, b) -> bool:
    """Value equality through dicts, lists, tuples, sets, numpy arrays and plain objects' ``__dict__``."""
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and bool(
            np.array_equal(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)):
        return a == b
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return _same(vars(a), vars(b))
    return bool(a == b)


def by_design(rel: str, before: str, after: str) -> str | None:
    """Why ``rel`` is equal by content though its bytes differ, or None when its content differs too."""
    why, rule = BY_DESIGN.get(rel) or next((v for k, v in BY_DESIGN_PREFIX.items() if rel.startswith(k)),
                                           (None, None))
    if rule is None:
        return None
    pa, pb = os.path.join(before, rel), os.path.join(after, rel)
    if rule == "skip":
        return why
    if rule == "pickle":
        import pickle

        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            return why if _same(pickle.load(fa), pickle.load(fb)) else None
    import polars as pl

    cols = rule.split(":", 1)[1].split(",")
    ta, tb = pl.read_parquet(pa), pl.read_parquet(pb)
    ta, tb = ta.drop([c for c in cols if c in ta.columns]), tb.drop([c for c in cols if c in tb.columns])
    return why if ta.equals(tb) else None


def _error_units(path: str, column: str) -> list[str]:
    """The sorted units an error table names (none when it does not exist)."""
    if not os.path.exists(path):
        return []
    import polars as pl

    return sorted(pl.read_parquet(path)[column].to_list())


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
    ap.add_argument("--out", default=None, help="also write what is printed to this file (a dated page under "
                    "docs/measurements/), after --title and --note lines")
    ap.add_argument("--title", default="Outputs before and after", help="the page's heading (with --out)")
    ap.add_argument("--note", action="append", default=[], help="a paragraph above the figures (with --out; "
                    "repeatable): what was run, on which commits")
    args = ap.parse_args(argv)
    lines: list[str] = []
    out = lines.append
    tops = sorted({t for s in args.stage for t in OUTPUTS[s]}) if args.stage else None
    a, b = manifest(args.before, tops), manifest(args.after, tops)
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    differ = sorted(p for p in set(a) & set(b) if a[p] != b[p])
    content_equal = {p: w for p in differ if (w := by_design(p, args.before, args.after))}
    differ = [p for p in differ if p not in content_equal]
    for old in [p for p in only_a if p in MOVED]:
        new, col = MOVED[old]
        if _error_units(os.path.join(args.before, old), col) == _error_units(os.path.join(args.after, new), "unit"):
            content_equal[old] = f"moved to {new}, the same error units"
            only_a.remove(old)
            if new in only_b:
                only_b.remove(new)
    for p, why in sorted(content_equal.items()):
        out(f"equal by content: {p}  ({why})")
    for p in only_a:
        out(f"only in before: {p}")
    for p in only_b:
        out(f"only in after:  {p}")
    for p in differ:
        out(f"differs:        {p}")
    same = len(set(a) & set(b)) - len(differ) - len(content_equal)
    out(f"{same} identical, {len(content_equal)} equal by content, {len(differ)} differ, {len(only_a)} only "
          f"before, {len(only_b)} only after "
          f"({'IDENTICAL' if not (differ or only_a or only_b) else 'DIFFERENT'})")
    print("\n".join(lines))
    if args.out:
        page = [f"# {args.title}", "", *[para + "\n" for para in args.note],
                f"`python tests/benchmarks/compare_runs.py BEFORE AFTER{' --stage ' + ' '.join(args.stage) if args.stage else ''}`"
                " (this page written by it):", "", "```", *lines, "```", ""]
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(page))
    return 0 if not (differ or only_a or only_b) else 1


if __name__ == "__main__":
    sys.exit(main())
