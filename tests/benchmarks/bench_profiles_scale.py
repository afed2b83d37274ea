"""Growth of every stage with the profile set: reads the stage records of two or more runs and prints the figures.

Each run is one profile set through generate → encode → bench → evaluate with the same task list and settings (made
with ``bench_pipeline.py``, which writes the records); this script reads their ``run.json`` (``stages.<stage>``:
``seconds``, ``cpu_s``, ``peak_memory_mb``, ``driver_peak_memory_mb``, ``units``) and prints

1. the per-stage table of every run, with CPU seconds per unit (a unit = a trajectory for generate and encode, a
   trajectory read for bench, a work unit — one method × context spec — for evaluate);
2. the growth from the smallest run to each larger one: the ratio of profiles, trajectories, wall seconds, CPU seconds
   and memory per stage, and the exponent ``k`` of ``cpu_s ∝ trajectories^k`` (1 = linear);
3. a projection for N nodes of ``--cores`` cores from the largest run's CPU seconds per unit:
   ``t ≈ units · cpu_s_per_unit / (N · cores · efficiency)`` for ``--project-profiles`` × ``--project-tasks``.

How the figures in cluster/README.md#scale were made (one 2-core machine, every run under ``flock /tmp/fg-cpu.lock``):
the 200-profile run is written out there (20 and 200 profiles × all 32 tasks); the earlier 20/60-profile × 2-task
runs were::

    filegram profiles new --n 60 --seed 7 --out /tmp/scale/profiles-60
    S=(--set 'tasks=[T-01,T-17]' --set workspace.tts=tone
       --set evaluate.sample_per_sub_task=10 --set 'evaluate.methods=[naive_rag,filegramos,full_context]'
       --set 'evaluate.settings=[text]')
    python tests/benchmarks/bench_pipeline.py --run-dir /tmp/scale/p20 --only seed generate encode bench evaluate "${S[@]}"
    python tests/benchmarks/bench_pipeline.py --run-dir /tmp/scale/p60 --only seed generate encode bench evaluate \
        "${S[@]}" --set profiles_dir=/tmp/scale/profiles-60
    python tests/benchmarks/bench_profiles_scale.py /tmp/scale/p20 /tmp/scale/p60 --project-from DEFAULT_RUN

(``DEFAULT_RUN``: a run of the default 20 × 32 pipeline, for the CPU seconds per trajectory at 32 tasks a profile.)

Usage:
    python tests/benchmarks/bench_profiles_scale.py RUN_DIR RUN_DIR [...] [--cores 16] [--efficiency 0.8]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

STAGES = ("seed", "generate", "encode", "bench", "evaluate")


def load(run_dir: str) -> dict:
    """``{name, profiles, trajectories, stages}`` of one run, from its run.json and trajectories/index.parquet."""
    p = Path(run_dir) / "run.json"
    if not p.exists():
        raise SystemExit(f"{p}: no run.json (run bench_pipeline.py into {run_dir} first)")
    data = json.loads(p.read_text())
    stages = data.get("stages") or {}
    idx = Path(run_dir) / "trajectories" / "index.parquet"
    n_traj = n_prof = 0
    if idx.exists():
        import pyarrow.parquet as pq

        t = pq.read_table(idx, columns=["profile_id", "status"]).to_pydict()
        ok = [pid for pid, s in zip(t["profile_id"], t["status"]) if s == "ok"]
        n_traj, n_prof = len(ok), len(set(ok))
    return {"name": Path(run_dir).name, "profiles": n_prof, "trajectories": n_traj, "stages": stages}


def units_of(rec: dict) -> int:
    u = rec.get("units") or {}
    return int(u.get("done") or 0) + int(u.get("skipped") or 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories, smallest profile set first")
    ap.add_argument("--cores", type=int, default=16, help="cores per node in the projection")
    ap.add_argument("--efficiency", type=float, default=0.8, help="share of the cores a stage keeps busy")
    ap.add_argument("--project-profiles", type=int, default=200)
    ap.add_argument("--project-tasks", type=int, default=32)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--project-from", default=None, help="run whose CPU s per trajectory the projection uses (default "
                    "the last run; give a run with the projected task count per profile: texts per trajectory fall "
                    "as a profile's trajectories grow)")
    args = ap.parse_args(argv)
    runs = [load(r) for r in args.runs]
    for r in runs:
        print(f"\n{r['name']}: {r['profiles']} profiles, {r['trajectories']} trajectories")
        print(f"{'stage':<10} {'seconds':>8} {'cpu s':>8} {'peak MiB':>9} {'driver MiB':>10} {'units':>6} "
              f"{'cpu s/unit':>10}")
        for s in STAGES:
            rec = r["stages"].get(s)
            if not isinstance(rec, dict) or not isinstance(rec.get("seconds"), (int, float)):
                continue  # not run, or a record from before the one stage record
            u = units_of(rec)
            print(f"{s:<10} {float(rec['seconds']):>8.1f} {float(rec.get('cpu_s') or 0):>8.1f} "
                  f"{float(rec.get('peak_memory_mb') or 0):>9.0f} {float(rec.get('driver_peak_memory_mb') or 0):>10.0f} "
                  f"{u:>6} {float(rec.get('cpu_s') or 0) / u if u else float('nan'):>10.3f}")
    base = runs[0]
    for big in runs[1:]:
        tr = big["trajectories"] / max(1, base["trajectories"])
        print(f"\ngrowth {base['name']} → {big['name']}: profiles ×{big['profiles'] / max(1, base['profiles']):.1f}, "
              f"trajectories ×{tr:.1f}")
        print(f"{'stage':<10} {'units ×':>8} {'wall ×':>7} {'cpu ×':>7} {'k (cpu∝traj^k)':>15} {'peak ×':>7} "
              f"{'driver ×':>9}")
        for s in STAGES:
            a, b = base["stages"].get(s), big["stages"].get(s)
            if not (isinstance(a, dict) and isinstance(b, dict) and a.get("cpu_s") and b.get("cpu_s")
                    and isinstance(a.get("seconds"), (int, float)) and isinstance(b.get("seconds"), (int, float))):
                continue
            cpu = float(b["cpu_s"]) / float(a["cpu_s"])
            k = math.log(cpu) / math.log(tr) if tr > 1 else float("nan")
            ua, ub = units_of(a), units_of(b)
            print(f"{s:<10} {ub / ua if ua else float('nan'):>8.1f} {float(b['seconds']) / float(a['seconds']):>7.1f} "
                  f"{cpu:>7.1f} {k:>15.2f} "
                  f"{float(b.get('peak_memory_mb') or 0) / max(1.0, float(a.get('peak_memory_mb') or 0)):>7.2f} "
                  f"{float(b.get('driver_peak_memory_mb') or 0) / max(1.0, float(a.get('driver_peak_memory_mb') or 0)):>9.2f}")

    big = load(args.project_from) if args.project_from else runs[-1]
    n_traj = args.project_profiles * args.project_tasks
    scale = n_traj / max(1, big["trajectories"])
    # generate, encode, bench: linear in trajectories (one unit per trajectory; bench reads one record each);
    # evaluate: its work is the sample (methods × sampled items' context specs), taken as measured.
    # generate, encode and evaluate run on actor pools (all cores); bench builds its bank in the driver (one core).
    proj = {}
    for s, linear, parallel in (("generate", True, True), ("encode", True, True), ("bench", True, False),
                                ("evaluate", False, True)):
        rec = big["stages"].get(s)
        if isinstance(rec, dict) and rec.get("cpu_s") is not None:
            proj[s] = (float(rec["cpu_s"]) * (scale if linear else 1.0), parallel)
    print(f"\nprojection: {args.project_profiles} profiles × {args.project_tasks} tasks = {n_traj} trajectories "
          f"(×{scale:.1f} the trajectories of {big['name']}); CPU s: generate, encode, bench × trajectories, "
          f"evaluate as measured (fixed sample); nodes of {args.cores} cores, efficiency {args.efficiency}; "
          "bench on one core (in the driver)")
    print(f"{'nodes':>6} " + " ".join(f"{s + ' s':>12}" for s in proj) + f" {'total min':>10}")
    print(f"{'cpu s':>6} " + " ".join(f"{c:>12.0f}" for c, _ in proj.values()))
    for n in args.nodes:
        cap = n * args.cores * args.efficiency
        cols = [c / (cap if par else 1.0) for c, par in proj.values()]
        print(f"{n:>6} " + " ".join(f"{c:>12.0f}" for c in cols) + f" {sum(cols) / 60:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
