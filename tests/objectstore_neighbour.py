"""A noisy neighbour on a shared Ray cluster (a job of its own, for tests/test_multinode.py): one actor on every
alive node keeps that node's object store over its spilling threshold by holding ``--hold`` objects of ``--mib``
MiB each and replacing the oldest with a new one every ``--every`` seconds, until ``--seconds`` pass or the job is
stopped (``ray job stop``). Every replacement makes the node's raylet spill a primary copy to disk.

    ray job submit --no-wait --working-dir tests -- python objectstore_neighbour.py --mib 20 --hold 6
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
class Churn:
    def run(self, mib: int, hold: int, every: float, seconds: float) -> int:
        held, made, end = [], 0, time.monotonic() + seconds
        while time.monotonic() < end:
            held.append(ray.put(np.full(mib * 2 ** 20, made % 251, dtype=np.uint8)))
            made += 1
            del held[:-hold]
            time.sleep(every)
        return made


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=20)
    ap.add_argument("--hold", type=int, default=6)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=600.0)
    args = ap.parse_args()
    ray.init()
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    actors = [Churn.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
              for n in nodes]
    print(f"neighbour: churning {args.hold} x {args.mib} MiB on {len(nodes)} nodes", flush=True)
    made = ray.get([a.run.remote(args.mib, args.hold, args.every, args.seconds) for a in actors])
    print(f"neighbour: made {sum(made)} objects", flush=True)


if __name__ == "__main__":
    main()
