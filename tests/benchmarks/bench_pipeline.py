"""Time every stage of the whole pipeline on the default configuration (or any config), into a fresh run dir.

Prints the per-stage table (wall seconds, CPU seconds of the stage's whole process tree, peak memory, units
planned / done / skipped / failed — the stage records of run.json), the load average at start and end, and the
total against the issue's goal (≤ 15 min on 2 cores for 20 profiles × 32 tasks). CPU seconds hardly move with the
load of a shared machine: ``cpu_s / cores`` is what the stage needs of an otherwise idle machine. Extra ``--set``
overrides go to the config, e.g. a smaller ``--set evaluate.sample_per_sub_task=10``.

An interrupted run (Ctrl-C, an error) still prints the records of the stages that finished, read back from the run
directory's ``run.json``; ``--table-only`` prints that table for an existing run directory without running anything.

**Before and after, in one run on one machine** (``--before REF``): the pipeline of git ref ``REF`` (exported with
``git archive`` into ``<run-dir>/src-before``) and of this tree run one after the other into ``<run-dir>/before``
and ``<run-dir>/after``, each in its own process with its own ``PYTHONPATH``; the table then shows, per stage, wall
and CPU seconds and units/s of both and the wall ratio. ``--from-run RUN`` copies an existing run (its stages up
to the first compared one) into both, so ``--only evaluate --from-run runs/default`` compares one stage on the same
inputs. ``--page FILE`` writes the table, the command, the load averages and the CPU flags (``lscpu``) to a
measurement page.

Usage:
    python tests/benchmarks/bench_pipeline.py [--run-dir /tmp/fg-bench-pipeline] [--set key=value ...]
    python tests/benchmarks/bench_pipeline.py --run-dir RUN --table-only
    python tests/benchmarks/bench_pipeline.py --before main --run-dir /tmp/fg-ba [--only evaluate --from-run RUN]
        [--set key=value ...] [--page docs/measurements/DATE-pipeline.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config  # noqa: E402
from filegram_ray.pipeline import STAGES, format_stage_table, run_pipeline  # noqa: E402


def recorded_timings(cfg) -> dict:
    """The stage records of ``run.json`` (stages that finished), in pipeline order, shaped like run_pipeline's
    result."""
    run = cfg.run()
    stages = (run.read_json("run.json").get("stages") or {}) if run.exists("run.json") else {}
    return {name: {"seconds": float(stages[name].get("seconds") or 0), "result": stages[name]}
            for name in [s.name for s in STAGES] if isinstance(stages.get(name), dict) and "seconds" in stages[name]}


def cpu_flags() -> str:
    """``lscpu``'s model name and the vector / matrix flags (avx*, amx*, *vnni, fma), for the page."""
    import subprocess

    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "lscpu unavailable"
    info = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    flags = [f for f in info.get("Flags", "").split() if f.startswith(("avx", "amx", "fma")) or "vnni" in f]
    return (f"{info.get('Model name', '?').strip()}, {info.get('CPU(s)', '?').strip()} CPUs; flags: "
            f"{' '.join(sorted(flags)) or 'none'}")


def _side(src: Path, run_dir: Path, only: list[str] | None, overrides: list[str]) -> dict:
    """Run the pipeline of the source tree ``src`` into ``run_dir`` in a subprocess; its stage records."""
    import json
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, str(src / "jobs" / "pipeline.py"), "--run-dir", str(run_dir)]
    if only:
        cmd += ["--only", *only]
    for o in overrides:
        cmd += ["--set", o]
    print("+ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=str(src), env=env, check=True)
    wall = time.perf_counter() - t0
    stages = json.loads((run_dir / "run.json").read_text()).get("stages") or {}
    names = only or [s.name for s in STAGES]
    return {"wall": wall, "stages": {n: stages[n] for n in names if isinstance(stages.get(n), dict)}}


def side_by_side(before: dict, after: dict) -> str:
    """The before/after table: per stage wall s, CPU s, units/s (units done / wall s) of both and after/before."""
    def cols(rec):
        if not rec:
            return ("–", "–", "–"), None
        u = rec.get("units") if isinstance(rec.get("units"), dict) else {}
        secs = float(rec.get("seconds") or 0)
        rate = f"{(u.get('done') or 0) / secs:.2f}" if secs else "–"
        return (f"{secs:.1f}", f"{float(rec.get('cpu_s') or 0):.1f}", rate), secs

    lines = ["| stage | before s | before CPU s | before units/s | after s | after CPU s | after units/s | after / "
             "before |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tb = ta = 0.0
    for name in dict.fromkeys([*before["stages"], *after["stages"]]):
        (b, bs), (a, as_) = cols(before["stages"].get(name)), cols(after["stages"].get(name))
        tb += bs or 0
        ta += as_ or 0
        ratio = f"{as_ / bs:.2f}" if bs and as_ is not None else "–"
        lines.append(f"| {name} | {' | '.join(b)} | {' | '.join(a)} | {ratio} |")
    lines.append(f"| **total** | **{tb:.1f}** | | | **{ta:.1f}** | | | **{ta / tb:.2f}** |" if tb else "")
    return "\n".join(lines)


def before_after(args) -> int:
    import shutil
    import subprocess

    here = Path(__file__).resolve().parents[2]
    root = Path(args.run_dir or tempfile.mkdtemp(prefix="fg-bench-before-after-")).resolve()
    src = root / "src-before"
    if not src.exists():
        src.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(here), "archive", args.before], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    ref = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", args.before], capture_output=True,
                         text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    load0 = os.getloadavg()
    out = {}
    for side, tree in (("before", src), ("after", here)):
        rd = root / side
        if args.from_run and not rd.exists():
            shutil.copytree(args.from_run, rd, symlinks=True,
                            ignore=shutil.ignore_patterns("results", "vectors", ".lock*") if args.only and
                            "evaluate" in args.only else None)
            if args.only:  # the compared stages run again from scratch on the copied inputs
                for name in args.only:
                    shutil.rmtree(rd / "_done" / name, ignore_errors=True)
        out[side] = _side(tree, rd, args.only, args.overrides)
    load1 = os.getloadavg()
    table = side_by_side(out["before"], out["after"])
    head_lines = [f"before: {args.before} ({ref}); after: this tree (HEAD {head}, with its uncommitted changes)",
                  f"CPU: {cpu_flags()}",
                  "load average (1/5/15 min): start {:.1f}/{:.1f}/{:.1f}, end {:.1f}/{:.1f}/{:.1f}".format(*load0, *load1),
                  f"stages: {' '.join(args.only) if args.only else 'all'}; --set {' '.join(args.overrides) or '(none)'}"
                  + (f"; inputs copied from {args.from_run}" if args.from_run else "")]
    print("\n".join(["", "bench_pipeline before/after", *head_lines, table]))
    if args.page:
        page = Path(args.page)
        page.parent.mkdir(parents=True, exist_ok=True)
        with page.open("a", encoding="utf-8") as fh:
            fh.write("\n```\n" + " ".join(["python", "tests/benchmarks/bench_pipeline.py", *sys.argv[1:]])
                     + "\n" + "\n".join(head_lines) + "\n```\n\n" + table + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None, help="fresh run directory (default: a new temp dir)")
    ap.add_argument("--only", nargs="+", default=None, help="only these stages (resume a partial run)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--table-only", action="store_true", help="print the stage table of --run-dir's run.json")
    ap.add_argument("--before", default=None, metavar="REF",
                    help="also run the pipeline of this git ref, then this tree, and print both side by side")
    ap.add_argument("--from-run", default=None, help="with --before: copy this run's outputs into both sides first")
    ap.add_argument("--page", default=None, help="with --before: append the table to this measurement page")
    args = ap.parse_args(argv)
    if args.before:
        return before_after(args)
    if args.table_only and not args.run_dir:
        ap.error("--table-only needs --run-dir")
    if args.table_only and "://" not in args.run_dir and not os.path.isfile(os.path.join(args.run_dir, "run.json")):
        print(f"bench_pipeline: {args.run_dir} has no run.json (not a run directory)", file=sys.stderr)
        return 2
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fg-bench-pipeline-")
    cfg = load_config(None, [f"run_dir={run_dir}", *args.overrides])
    if args.table_only:
        timings = recorded_timings(cfg)
        if not timings:
            print(f"bench_pipeline: {run_dir}/run.json records no finished stage yet", file=sys.stderr)
            return 1
        print(format_stage_table(timings))
        return 0
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    try:
        timings = run_pipeline(cfg, only=args.only)
    except BaseException:
        print(f"\nbench_pipeline: interrupted after {time.perf_counter() - t0:.1f} s; load average now "
              "{:.1f}/{:.1f}/{:.1f}; stages recorded in run.json:".format(*os.getloadavg()))
        print(format_stage_table(recorded_timings(cfg)))
        raise
    total = time.perf_counter() - t0
    load1 = os.getloadavg()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = sum(float((r.get("result") or {}).get("cpu_s") or 0) for r in timings.values()
              if isinstance(r.get("result"), dict))
    print("\nbench_pipeline")
    print(format_stage_table(timings))
    print(f"total wall {total:.1f} s (goal: ≤ 900 s on 2 cores); CPU {cpu:.1f} s = at least {cpu / cores:.0f} s "
          f"on {cores} idle cores")
    print(f"load average (1/5/15 min): start {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f}, "
          f"end {load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f}")
    print(f"run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
