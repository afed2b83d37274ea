"""Compare two run directories file by file: what a port of the stages must keep byte-identical.

Usage:
    python tests/benchmarks/compare_runs.py BEFORE_RUN AFTER_RUN [--stage STAGE ...] [--storage-options JSON]
        [--out PAGE --title TITLE --note TEXT]

A run is a local path or any run-directory URI (``s3://bucket/run``; ``--storage-options`` are the fsspec options
of a URI, e.g. ``{"endpoint_url": "http://…"}``), read through :class:`filegram_ray.storage.RunDir`.

Every file under each run is hashed (sha256) except the bookkeeping that carries wall times or paths by design
(``run.json``, ``_done/``, ``view/``, ``.lock``, the run's ``cache/``). A ``--stage`` narrows the comparison to that
stage's output folders (see ``OUTPUTS``). Files whose bytes differ are then compared by content where the
difference is by design — and differs between two runs of the same code (:data:`BY_DESIGN`): the tables' wall- and
CPU-second columns are dropped, ``results/timings.json`` is skipped, and FileGramOS's pickled method states are
unpickled and compared as values (a set pickles in hash order). A table a later version writes elsewhere
(:data:`MOVED`) is compared by the error units it names. Prints the files that differ, exist only on one side, those
equal only by content (and why), and a one-line verdict; exits 1 when anything differs. ``--out`` also writes what
is printed as a page (a dated page under ``docs/measurements/``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import posixpath
import sys

from filegram_ray.storage import RunDir

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


def _run(run: str | RunDir, storage_options: dict | None = None) -> RunDir:
    return run if isinstance(run, RunDir) else RunDir(run, storage_options)


def by_design(rel: str, before: str | RunDir, after: str | RunDir) -> str | None:
    """Why ``rel`` is equal by content though its bytes differ, or None when its content differs too."""
    why, rule = BY_DESIGN.get(rel) or next((v for k, v in BY_DESIGN_PREFIX.items() if rel.startswith(k)),
                                           (None, None))
    if rule is None:
        return None
    ba, bb = _run(before).read_bytes(rel), _run(after).read_bytes(rel)
    if rule == "skip":
        return why
    if rule == "pickle":
        import pickle

        return why if _same(pickle.loads(ba), pickle.loads(bb)) else None
    import polars as pl

    cols = rule.split(":", 1)[1].split(",")
    ta, tb = pl.read_parquet(io.BytesIO(ba)), pl.read_parquet(io.BytesIO(bb))
    ta, tb = ta.drop([c for c in cols if c in ta.columns]), tb.drop([c for c in cols if c in tb.columns])
    return why if ta.equals(tb) else None


def _error_units(run: RunDir, rel: str, column: str) -> list[str]:
    """The sorted units an error table names (none when it does not exist)."""
    if not run.exists(rel):
        return []
    import polars as pl

    return sorted(pl.read_parquet(io.BytesIO(run.read_bytes(rel)))[column].to_list())


def manifest(root: str | RunDir, tops: list[str] | None) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (a path, URI or RunDir; within ``tops`` when
    given)."""
    run = _run(root)
    out: dict[str, str] = {}
    for rel in run.walk_files():
        top = rel.split("/", 1)[0]
        if top in SKIP_TOP or posixpath.basename(rel).startswith("_lock.") or (tops is not None and top not in tops):
            continue
        out[rel] = hashlib.sha256(run.read_bytes(rel)).hexdigest()
    return out


def compare(before: str | RunDir, after: str | RunDir, stages: list[str] | None = None) -> dict[str, list[str]]:
    """The comparison as data: ``identical``, ``equal_by_content`` (path and why), ``differ``, ``only_before``,
    ``only_after`` (sorted relative paths)."""
    tops = sorted({t for s in stages for t in OUTPUTS[s]}) if stages else None
    a, b = manifest(before, tops), manifest(after, tops)
    differ = sorted(p for p in set(a) & set(b) if a[p] != b[p])
    content_equal = {p: w for p in differ if (w := by_design(p, before, after))}
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    for old in [p for p in only_a if p in MOVED]:
        new, col = MOVED[old]
        if _error_units(_run(before), old, col) == _error_units(_run(after), new, "unit"):
            content_equal[old] = f"moved to {new}, the same error units"
            only_a.remove(old)
            if new in only_b:
                only_b.remove(new)
    return {"identical": sorted(p for p in set(a) & set(b) if a[p] == b[p]),
            "equal_by_content": [f"{p}  ({w})" for p, w in sorted(content_equal.items())],
            "differ": [p for p in differ if p not in content_equal],
            "only_before": only_a, "only_after": only_b}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--stage", nargs="+", choices=list(OUTPUTS), help="compare only these stages' outputs")
    ap.add_argument("--storage-options", type=json.loads, default=None,
                    help="fsspec options (JSON) of a run given as a URI, e.g. an S3 endpoint")
    ap.add_argument("--out", default=None, help="also write what is printed to this file (a dated page under "
                    "docs/measurements/), after --title and --note lines")
    ap.add_argument("--title", default="Outputs before and after", help="the page's heading (with --out)")
    ap.add_argument("--note", action="append", default=[], help="a paragraph above the figures (with --out; "
                    "repeatable): what was run, on which commits")
    args = ap.parse_args(argv)
    lines: list[str] = []
    out = lines.append
    before, after = _run(args.before, args.storage_options), _run(args.after, args.storage_options)
    c = compare(before, after, args.stage)
    only_a, only_b, differ = c["only_before"], c["only_after"], c["differ"]
    content_equal = dict(e.split("  (", 1) for e in c["equal_by_content"])
    for p, why in sorted(content_equal.items()):
        out(f"equal by content: {p}  ({why}")
    for p in only_a:
        out(f"only in before: {p}")
    for p in only_b:
        out(f"only in after:  {p}")
    for p in differ:
        out(f"differs:        {p}")
    same = len(c["identical"])
    out(f"{same} identical, {len(content_equal)} equal by content, {len(differ)} differ, {len(only_a)} only "
          f"before, {len(only_b)} only after "
          f"({'IDENTICAL' if not (differ or only_a or only_b) else 'DIFFERENT'})")
    print("\n".join(lines))
    if args.out:
        stage = " --stage " + " ".join(args.stage) if args.stage else ""
        page = [f"# {args.title}", "", *[para + "\n" for para in args.note],
                f"`python tests/benchmarks/compare_runs.py BEFORE AFTER{stage}` (this page written by it):", "", "```",
                *lines, "```", ""]
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(page))
    return 0 if not (differ or only_a or only_b) else 1


if __name__ == "__main__":
    sys.exit(main())
