"""Wall time of one pipeline slice on a 1-node and a 3-node Ray cluster, and what losing a node mid-stage costs.

Each cluster is real (:mod:`netcluster`: every node ``ray start``-ed in its own network namespace, 1 CPU and a
200 MiB object store each, Ray's default health checks); the slice is submitted with ``ray job submit`` onto a
shared POSIX run directory, ``--repeat`` times (2) in each configuration:

1. ``1 node``  — the head alone;
2. ``3 nodes`` — head + 2 workers;
3. ``3 nodes, 1 lost in STAGE`` — as 2 on a fresh cluster, with one worker's raylet SIGKILLed while it runs a unit
   of STAGE (each of ``--kill-stage``: render, a Ray Data stage, and evaluate, an actor-pool stage); the node is not
   started again: the job finishes on 2 nodes.

Prints the job's wall seconds (submit to exit) and each stage's seconds from ``run.json``, checks every run's outputs
byte-identical to the first (``compare_runs.compare``), and — for the lost node — the seconds from the kill until
the GCS reported the node dead, and the stage's extra seconds over the clean 3-node run. ``--write`` puts the table
into ``docs/measurements/<date>-multinode.md``. Needs root and ``ip``. On a shared 2-core machine the figures are
ratios within one invocation; the CPU model, flags and load average are printed with them.

    python tests/benchmarks/bench_multinode.py [--write] [--repeat N] [--kill-stage STAGE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(REPO)]

from compare_runs import compare  # noqa: E402
from netcluster import JOB_EXCLUDES, PIPELINE_SLICE, NetCluster, unavailable  # noqa: E402
from raycluster import ray_cli  # noqa: E402

from filegram_ray.storage import RunDir  # noqa: E402

SLICE, EXCLUDES = PIPELINE_SLICE, JOB_EXCLUDES
STAGES = ["seed", "generate", "encode", "render", "bench", "evaluate"]


def run_slice(cluster: NetCluster, run_dir: Path, kill_stage: str | None = None) -> dict:
    """Submit the slice; optionally kill a worker raylet mid-``kill_stage``. Returns wall s, stage s, kill info."""
    sid = f"bench-{int(time.time() * 1000) % 10**9}"
    log = Path(cluster.head.temp_dir) / "session_latest" / "logs" / f"job-driver-{sid}.log"
    cmd = [*ray_cli(), "job", "submit", "--address", cluster.dashboard, "--submission-id", sid, "--working-dir",
           str(REPO), "--runtime-env-json", json.dumps(EXCLUDES), "--", "python", "jobs/pipeline.py", "--run-dir",
           str(run_dir), *SLICE]
    kill: dict = {}

    def killer() -> None:
        text = lambda: log.read_text(errors="replace") if log.exists() else ""  # noqa: E731
        while f"=== stage {kill_stage} ===" not in text():
            time.sleep(0.2)
        while True:
            if (node := cluster.busy_worker()) is not None:
                ended = f"=== stage {kill_stage} done" in text()
                t_kill = time.time()
                cluster.kill_raylet(node)
                kill.update(node=node.name, ip=node.ip, at=t_kill, missed=ended)
                while node.ip in cluster.alive_nodes() and time.time() - t_kill < 300:
                    time.sleep(0.5)
                kill["dead_after_s"] = round(time.time() - t_kill, 1)
                return
            if f"=== stage {kill_stage} done" in text():
                kill["missed"] = True
                return
            time.sleep(0.02)

    t = threading.Thread(target=killer, daemon=True) if kill_stage else None
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=cluster.env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if t:
        t.start()
    out, _ = proc.communicate(timeout=3600)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the job failed ({proc.returncode}):\n{out[-5000:]}")
    if t:
        t.join(timeout=600)
    stages = RunDir(str(run_dir)).read_json("run.json")["stages"]
    driver = log.read_text(errors="replace") if log.exists() else ""
    return {"wall_s": round(wall, 1), "stages": {s: stages[s]["seconds"] for s in STAGES if s in stages},
            "records": stages, "kill": kill,
            "resubmitted": driver.count("resubmitting") + driver.count("goes to another actor")}


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write docs/measurements/<date>-multinode.md")
    ap.add_argument("--kill-stage", nargs="+", default=["render", "evaluate"],
                    help="stages during which a worker node is lost, one lossy run each (default: render evaluate)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each configuration (medians are reported)")
    args = ap.parse_args(argv)
    if (why := unavailable()) is not None:
        print(f"cannot build a namespaced cluster: {why}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-multinode-"))
    runs: list[tuple[str, Path, dict]] = []  # (configuration, run dir, result)
    load = [os.getloadavg()[0]]
    try:
        with NetCluster(workers=0, num_cpus=1, object_store_mb=200) as one:
            for r in range(args.repeat):
                runs.append(("1 node", root / f"one{r}", run_slice(one, root / f"one{r}")))
        with NetCluster(workers=2, num_cpus=1, object_store_mb=200) as three:
            for r in range(args.repeat):
                runs.append(("3 nodes", root / f"three{r}", run_slice(three, root / f"three{r}")))
        for ks in args.kill_stage:
            for r in range(args.repeat):  # a fresh cluster each time: the lost node is not started again
                with NetCluster(workers=2, num_cpus=1, object_store_mb=200) as lossy:
                    d = root / f"lost-{ks}{r}"
                    runs.append((f"3 nodes, 1 lost in {ks}", d, run_slice(lossy, d, kill_stage=ks)))
        load.append(os.getloadavg()[0])
        first = RunDir(str(runs[0][1]))
        same = {str(d.name): not any(v for k, v in compare(first, RunDir(str(d))).items()
                                     if k in ("differ", "only_before", "only_after"))
                for _, d, _ in runs[1:]}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = [f"{'run':<28} {'wall s':>7} " + " ".join(f"{s:>9}" for s in STAGES) + "  nodes used (units)"]
    for name, d, r in runs:
        used: dict[str, int] = {}
        for rec in r["records"].values():
            for v in (rec.get("nodes") or {}).values():
                used[v["ip"].rsplit(".", 1)[-1]] = used.get(v["ip"].rsplit(".", 1)[-1], 0) + v["units"]
        lines.append(f"{name:<28} {r['wall_s']:>7.1f} " + " ".join(f"{r['stages'].get(s, 0):>9.1f}" for s in STAGES)
                     + "  " + ", ".join(f".{ip} {n}" for ip, n in sorted(used.items())))
    by: dict[str, list[dict]] = {}
    for name, _, r in runs:
        by.setdefault(name, []).append(r)
    clean = by["3 nodes"]
    summary = [f"medians of {args.repeat} run(s) each",
               f"speed-up 1 → 3 nodes: {_median([r['wall_s'] for r in by['1 node']]) / _median([r['wall_s'] for r in clean]):.2f}× (job wall)"]
    for ks in args.kill_stage:
        lost = by[f"3 nodes, 1 lost in {ks}"]
        missed = sum(1 for r in lost if r["kill"].get("missed"))
        summary.append(
            f"lost in {ks}: a worker's raylet SIGKILLed while it ran a unit of {ks} ({missed} of {len(lost)} kills "
            f"came after the stage's end); the GCS reported the node dead after "
            f"{_median([r['kill'].get('dead_after_s', float('nan')) for r in lost]):.1f} s; units sent to another "
            f"actor (actor-pool stages): {[r['resubmitted'] for r in lost]}; {ks} "
            f"{_median([r['stages'].get(ks, 0) for r in lost]) - _median([r['stages'].get(ks, 0) for r in clean]):+.1f} s, "
            f"job {_median([r['wall_s'] for r in lost]) - _median([r['wall_s'] for r in clean]):+.1f} s against the "
            "clean 3-node runs")
    summary.append(f"outputs byte-identical to the first 1-node run: {same}")
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in cpu.splitlines() if ln.startswith("Flags")), [])
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile") if f in flags]
    env_line = (f"CPU: {model}, {os.cpu_count()} cores, flags {' '.join(wanted)}; load average (1 min) before/after: "
                f"{load[0]:.1f} / {load[-1]:.1f}; {platform.platform()}")
    text = "\n".join(lines + [""] + summary + ["", env_line])
    print(text)
    if args.write:
        day = time.strftime("%Y-%m-%d")
        out = REPO / "docs" / "measurements" / f"{day}-multinode.md"
        out.write_text(f"# Multi-node: one slice on 1 and 3 Ray nodes, and a lost node ({day})\n\n"
                       "Written by `python tests/benchmarks/bench_multinode.py --write` (its docstring says what runs)."
                       " Every node is `ray start` in its own network namespace on one machine, 1 CPU and a 200 MiB "
                       "object store each, Ray's default health checks; the slice is profiles p1, p3, p18 × tasks "
                       "T-01, T-03, every stage but record and caption, submitted with `ray job submit` onto a "
                       "shared POSIX run directory. Seconds are wall seconds on a machine shared with other work: "
                       "read them as ratios within this one invocation. A lossy run's node is not started again: "
                       "the job finishes on 2 nodes. Nodes are named by the last byte of their address (.2 is the "
                       "head).\n\n```\n" + text + "\n```\n", encoding="utf-8")
        print(f"wrote {out.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
