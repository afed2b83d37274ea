"""Scaling figures for the generate stage: a plain loop vs Ray with 1 and 2 actors, side by side in one run.

Prints trajectories/s for each executor and the Ray overhead per trajectory, i.e.
(wall with 1 Ray actor − wall of the plain in-process loop) / trajectories. All executors generate the same
work units from the same workspaces into fresh run directories (so nothing is skipped as already done).

Usage:
    python tests/benchmarks/bench_scaling.py --workspaces-from RUN_WITH_SEEDED_WORKSPACES \
        [--profiles p1 p3 p12 p18] [--tasks T-01 T-03 T-16 T-21]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config  # noqa: E402
from filegram_ray.engine.generate import GenerateConfig, GenerateWorker, plan_units  # noqa: E402
from filegram_ray.runtime import init_ray  # noqa: E402
from filegram_ray.stages.executors import map_units  # noqa: E402


def _fresh_run(src: Path) -> Path:
    run_dir = Path(tempfile.mkdtemp(prefix="fg-scaling-"))
    shutil.copytree(src / "workspaces", run_dir / "workspaces")
    return run_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspaces-from", required=True, help="run dir holding workspaces/ (seed stage output)")
    ap.add_argument("--profiles", nargs="+", default=["p1", "p3", "p12", "p18"])
    ap.add_argument("--tasks", nargs="+", default=["T-01", "T-03", "T-16", "T-21"])
    args = ap.parse_args(argv)
    src = Path(args.workspaces_from)
    results = []
    init_ray(num_cpus=2)  # started once, outside the timed sections
    for label, serial, actors in [("plain loop (no Ray)", True, 1), ("Ray, 1 actor", False, 1),
                                  ("Ray, 2 actors", False, 2)]:
        run_dir = _fresh_run(src)
        cfg = load_config(overrides={"run_dir": str(run_dir), "profiles": args.profiles, "tasks": args.tasks})
        gcfg = GenerateConfig.model_validate({"num_actors": actors, "num_cpus_per_actor": 1.0})
        units = plan_units(cfg, gcfg)
        kwargs = {"run_uri": str(run_dir), "storage_options": {}}
        t0 = time.perf_counter()
        if serial:
            worker = GenerateWorker(**kwargs)
            rows = [worker.process(u) for u in units]
        else:
            rows = map_units(GenerateWorker, units, init_kwargs=kwargs, num_actors=actors,
                             num_cpus_per_actor=1.0, stage=label, progress=False)
        wall = time.perf_counter() - t0
        ok = sum(1 for r in rows if r.get("status", "ok") == "ok")
        results.append((label, len(units), ok, wall))
        shutil.rmtree(run_dir, ignore_errors=True)
    print("\nbench_scaling (generate stage, same units each time)")
    print(f"{'executor':<22} {'units':>5} {'ok':>4} {'wall s':>8} {'traj/s':>8}")
    for label, n, ok, wall in results:
        print(f"{label:<22} {n:>5} {ok:>4} {wall:>8.2f} {ok / wall:>8.2f}")
    plain, one, two = results
    print(f"Ray overhead per trajectory (1 actor vs plain loop): {(one[3] - plain[3]) / one[1] * 1000:.0f} ms")
    print(f"speed-up 2 actors vs 1 actor: {one[3] / two[3]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
