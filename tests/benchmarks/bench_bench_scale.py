"""Bench-stage scale benchmark: build a FileGramBench bank for N random profiles × 32 tasks and PRINT the timings.

Usage: python tests/benchmarks/bench_bench_scale.py [N ...]   (default 20 100 400)
Profiles get random tier vectors; 5 sessions per profile are perturbed; no run directory I/O (builders only).
"""

from __future__ import annotations

import random
import sys
import time

from filegram_ray.bench.bank import build_bank
from filegram_ray.bench.inputs import BenchInputs, ProfileRec, TaskRec, TrajRec
from filegram_ray.bench.validate import validate_items

DIMS = "ABCDEF"


def make_inputs(n: int, n_tasks: int = 32, seed: int = 1) -> BenchInputs:
    r = random.Random(seed)
    profiles = [ProfileRec(profile_id=f"q{i}", name="", role=f"Role {i % 9}", language=r.choice(["English", "Chinese"]),
                           tiers={d: r.choice("LMR") for d in DIMS},
                           attributes={"tone": r.choice(["professional", "friendly", "casual"])}) for i in range(n)]
    tasks = [TaskRec(task_id=f"T-{j + 1:02d}", type="understand", dimensions=tuple(r.sample(DIMS, 3)),
                     title=f"Task {j + 1}") for j in range(n_tasks)]
    trajs = []
    for p in profiles:
        pert = set(r.sample([t.task_id for t in tasks], 5))
        for t in tasks:
            pt = None
            if t.task_id in pert:
                dim = r.choice(t.dimensions)
                frm = p.tiers[dim]
                pt = {"dimension": dim, "from": frm, "to": "M" if frm != "M" else r.choice("LR")}
            trajs.append(TrajRec(f"{p.profile_id}/{t.task_id}", p.profile_id, t.task_id, pt))
    return BenchInputs(profiles=profiles, tasks=tasks, trajectories=trajs)


def main(ns: list[int]) -> None:
    print(f"{'profiles':>8} {'trajectories':>12} {'items':>7} {'build s':>8} {'validate s':>10} {'problems':>8}")
    for n in ns:
        inputs = make_inputs(n)
        t0 = time.perf_counter()
        bank = build_bank(inputs, seed=7)
        t1 = time.perf_counter()
        problems = validate_items(bank.items, bank.keys, [p.profile_id for p in inputs.profiles])
        t2 = time.perf_counter()
        print(f"{n:>8} {len(inputs.trajectories):>12} {len(bank.items):>7} {t1 - t0:>8.2f} {t2 - t1:>10.2f} "
              f"{len(problems):>8}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [20, 100, 400])
