"""Wall time of one pipeline slice on a 1-node and a 3-node Ray cluster, and what losing a node mid-stage costs.

Each cluster is real (:mod:`netcluster`: every node ``ray start``-ed in its own network namespace, 1 CPU and a
200 MiB object store each, Ray's default health checks); the slice is submitted with ``ray job submit`` onto a
shared POSIX run directory, three times:

1. ``1 node``  — the head alone;
2. ``3 nodes`` — head + 2 workers;
3. ``3 nodes, 1 lost`` — as 2, with one worker's raylet SIGKILLed while render runs a unit on it (the node is not
   started again: the job finishes on 2 nodes).

Prints the job's wall seconds (submit to exit) and each stage's seconds from ``run.json``, checks every run's outputs
byte-identical to the first (``compare_runs.compare``), and — for the lost node — the seconds from the kill until
the GCS reported the node dead, and the stage's extra seconds over the clean 3-node run. ``--write`` puts the table
into ``docs/measurements/<date>-multinode.md``. Needs root and ``ip``. On a shared 2-core machine the figures are
ratios within one invocation; the CPU model, flags and load average are printed with them.

    python tests/benchmarks/bench_multinode.py [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
            "records": stages, "kill": kill, "resubmitted": driver.count("resubmitting")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write docs/measurements/<date>-multinode.md")
    ap.add_argument("--kill-stage", default="render", help="stage during which a worker node is lost")
    args = ap.parse_args(argv)
    if (why := unavailable()) is not None:
        print(f"cannot build a namespaced cluster: {why}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-multinode-"))
    results: dict[str, dict] = {}
    with NetCluster(workers=0, num_cpus=1, object_store_mb=200) as one:
        results["1 node"] = run_slice(one, root / "one")
    with NetCluster(workers=2, num_cpus=1, object_store_mb=200) as three:
        results["3 nodes"] = run_slice(three, root / "three")
    with NetCluster(workers=2, num_cpus=1, object_store_mb=200) as lossy:
        results["3 nodes, 1 lost"] = run_slice(lossy, root / "lost", kill_stage=args.kill_stage)
    same = {name: not any(v for k, v in compare(RunDir(str(root / "one")), RunDir(str(root / d))).items()
                          if k in ("differ", "only_before", "only_after"))
            for name, d in (("3 nodes", "three"), ("3 nodes, 1 lost", "lost"))}
    lines = [f"{'run':<18} {'wall s':>7} " + " ".join(f"{s:>9}" for s in STAGES) + "  nodes used (units)"]
    for name, r in results.items():
        used = {}
        for rec in r["records"].values():
            for v in (rec.get("nodes") or {}).values():
                used[v["ip"]] = used.get(v["ip"], 0) + v["units"]
        lines.append(f"{name:<18} {r['wall_s']:>7.1f} " + " ".join(f"{r['stages'].get(s, 0):>9.1f}" for s in STAGES)
                     + "  " + ", ".join(f"{ip} {n}" for ip, n in sorted(used.items())))
    lost, clean = results["3 nodes, 1 lost"], results["3 nodes"]
    k = lost["kill"]
    ks = args.kill_stage
    summary = [
        f"speed-up 1 → 3 nodes: {results['1 node']['wall_s'] / clean['wall_s']:.2f}× (job wall)",
        f"lost node: {k.get('node')} ({k.get('ip')}) raylet SIGKILLed during {ks}"
        + (" — missed: the stage ended first" if k.get("missed") else "")
        + f"; the GCS reported it dead {k.get('dead_after_s')} s later; units resubmitted: {lost['resubmitted']}",
        f"cost of the lost node: {ks} {lost['stages'].get(ks, 0) - clean['stages'].get(ks, 0):+.1f} s, job "
        f"{lost['wall_s'] - clean['wall_s']:+.1f} s against the clean 3-node run; outputs identical to 1 node: "
        f"{same}",
    ]
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in cpu.splitlines() if ln.startswith("Flags")), [])
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile") if f in flags]
    env_line = (f"CPU: {model}, {os.cpu_count()} cores, flags {' '.join(wanted)}; load average before/after: "
                f"{os.getloadavg()[0]:.1f}; {platform.platform()}")
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
                       "read them as ratios within this one invocation.\n\n```\n" + text + "\n```\n",
                       encoding="utf-8")
        print(f"wrote {out.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
