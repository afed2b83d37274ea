"""Compare two run directories file by file: what issue #29's port must keep byte-identical.

Usage:
    python tests/benchmarks/compare_runs.py BEFORE_RUN AFTER_RUN [--stage STAGE ...] [--storage-options JSON]

A run is a local path or any run-directory URI (``s3://bucket/run``; ``--storage-options`` are the fsspec options
of a URI, e.g. ``{"endpoint_url": "http://…"}``), read through :class:`filegram_ray.storage.RunDir`.

Every file under each run is hashed (sha256) except the bookkeeping that carries wall times or paths by design
(``run.json``, ``_done/``, ``view/``, ``.lock``, the run's ``cache/``). A ``--stage`` narrows the comparison to that
stage's output folders (see ``OUTPUTS``). Files whose bytes differ are then compared by content where the
difference is by design — and differs between two runs of the same code (:data:`BY_DESIGN`): the tables' wall- and
CPU-second columns are dropped, ``results/timings.json`` is skipped, and FileGramOS's pickled method states are
unpickled and compared as values (a set pickles in hash order). Prints the files that differ, exist only on one
side, those equal only by content (and why), and a one-line verdict; exits 1 when anything differs.
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
OUTPUTS = {"seed": ["workspaces"], "generate": ["trajectories"], "encode": ["engrams", "memory", "indices"],
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
    return {"identical": sorted(p for p in set(a) & set(b) if a[p] == b[p]),
            "equal_by_content": [f"{p}  ({w})" for p, w in sorted(content_equal.items())],
            "differ": [p for p in differ if p not in content_equal],
            "only_before": sorted(set(a) - set(b)), "only_after": sorted(set(b) - set(a))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--stage", nargs="+", choices=list(OUTPUTS), help="compare only these stages' outputs")
    ap.add_argument("--storage-options", type=json.loads, default=None,
                    help="fsspec options (JSON) of a run given as a URI, e.g. an S3 endpoint")
    args = ap.parse_args(argv)
    before, after = _run(args.before, args.storage_options), _run(args.after, args.storage_options)
    c = compare(before, after, args.stage)
    only_a, only_b, differ = c["only_before"], c["only_after"], c["differ"]
    content_equal = dict(e.split("  (", 1) for e in c["equal_by_content"])
    differ = [p for p in differ if p not in content_equal]
    for p, why in sorted(content_equal.items()):
        print(f"equal by content: {p}  ({why}")
    for p in only_a:
        print(f"only in before: {p}")
    for p in only_b:
        print(f"only in after:  {p}")
    for p in differ:
        print(f"differs:        {p}")
    same = len(c["identical"])
    print(f"{same} identical, {len(content_equal)} equal by content, {len(differ)} differ, {len(only_a)} only "
          f"before, {len(only_b)} only after "
          f"({'IDENTICAL' if not (differ or only_a or only_b) else 'DIFFERENT'})")
    return 0 if not (differ or only_a or only_b) else 1


if __name__ == "__main__":
    sys.exit(main())
