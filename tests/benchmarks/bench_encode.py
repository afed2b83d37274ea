"""Encode-stage throughput. Prints figures; asserts nothing.

    python tests/benchmarks/bench_encode.py [--n 300] [--texts 512] [--no-embed]

1. Stage 1: Engrams per second on one core (goal ≥ 100 trajectories/s per core) over synthetic ~120-event
   trajectories with created content and diffs.
2. Embedding: our embedding path (EmbedBatch, the callable the stage's profile workers embed with) vs bare
   sentence-transformers ``encode`` on the same texts in the same process; overhead goal ≤ 10 %.
"""

from __future__ import annotations

import argparse
import random
import time


def synthetic_events(seed: int) -> list[dict]:
    r = random.Random(seed)
    ev = []
    for i in range(r.randint(60, 100)):
        kind = r.random()
        if kind < 0.6:
            ev.append({"event_type": "file_read", "file_path": f"in/doc{r.randint(0, 30)}.md", "file_type": "md",
                       "view_count": r.randint(1, 3), "content_length": r.randint(200, 5000)})
        elif kind < 0.75:
            ev.append({"event_type": "context_switch", "from_file": "a", "to_file": "b"})
        elif kind < 0.85:
            ev.append({"event_type": "file_search", "search_type": "grep", "query": "q", "files_matched": 3})
        else:
            ev.append({"event_type": "file_browse", "directory_path": "in", "files_listed": 9, "depth": 1})
    for j in range(r.randint(1, 4)):
        body = ("# Title\n\n## Part\n\n| a | b |\n|---|---|\n- item one\nA sentence of prose that is long. " * 40)
        ev.append({"event_type": "file_write", "file_path": f"out/r{j}.md", "file_type": "md", "operation": "create",
                   "content_length": len(body), "_resolved_content": body})
    for _ in range(r.randint(0, 10)):
        ev.append({"event_type": "file_edit", "file_path": "out/r0.md", "lines_added": r.randint(0, 20),
                   "lines_deleted": r.randint(0, 20), "_resolved_diff": "@@ -1 +1 @@\n-old line\n+new line\n" * 5})
    ev += [{"event_type": "dir_create", "dir_path": "out", "depth": 1}, {"event_type": "file_delete",
                                                                         "file_path": "x.tmp"}]
    return ev


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--no-embed", action="store_true")
    args = ap.parse_args(argv)

    from filegram_ray.memory.consolidate import consolidate
    from filegram_ray.memory.engram import encode_engram

    trajs = [synthetic_events(i) for i in range(args.n)]
    n_events = sum(len(t) for t in trajs)
    t0 = time.perf_counter()
    engs = [encode_engram(t, f"T-{i}", f"T-{i}") for i, t in enumerate(trajs)]
    dt = time.perf_counter() - t0
    print(f"Stage 1: {args.n} trajectories ({n_events / args.n:.0f} events avg) in {dt:.2f}s = "
          f"{args.n / dt:.0f} trajectories/s on one core (goal ≥ 100)")
    t0 = time.perf_counter()
    consolidate(engs[:32])
    print(f"Stage 2: consolidate 32 engrams in {time.perf_counter() - t0:.2f}s")
    if args.no_embed:
        return 0

    import numpy as np

    from filegram_ray.memory.embed import Embedder
    from filegram_ray.memory.encode_worker import EmbedBatch

    r = random.Random(0)
    words = ["river", "budget", "report", "travel", "costs", "boats", "equipment", "field", "survey", "quarterly", "growth", "notes"]
    texts = [" ".join(r.choice(words) for _ in range(r.randint(30, 150))) for _ in range(args.texts)]
    ours = EmbedBatch("minilm", 64)
    bare = Embedder().model  # the same SentenceTransformer, called directly
    bare.encode(texts[:64], batch_size=64)  # warm-up
    t0 = time.perf_counter()
    bare.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    t_bare = time.perf_counter() - t0
    ours({"text": np.asarray(texts[:64], dtype=object)})  # warm-up (loads its own model)
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        ours({"text": np.asarray(texts[i:i + 64], dtype=object)})
    t_ours = time.perf_counter() - t0
    print(f"Embedding {len(texts)} texts: bare sentence-transformers {len(texts) / t_bare:.0f} texts/s, "
          f"EmbedBatch {len(texts) / t_ours:.0f} texts/s; ratio ours/bare time = {t_ours / t_bare:.3f} "
          f"(overhead {100 * (t_ours / t_bare - 1):+.1f} %, goal ≤ 10 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
