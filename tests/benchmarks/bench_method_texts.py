"""What the evaluate stage has to embed: the distinct texts and tokens of each embedding method over a run's plan.

The evaluate stage's CPU time on the lexical backbone is mostly sentence embeddings of the methods' memory texts
(chunks, messages, pages, episodes). Every vector goes through one shared cache keyed by the text, so what costs is
the number of *distinct* texts and their tokens, not the number of ingests. This script replays the stage's plan
(the same item sample and context specs, ``filegram_ray.evaluate.stage``) and lets each method ingest every spec
with a recording embedder that returns seeded stand-in vectors (no model runs), then prints per method: texts
handed to the embedder, distinct texts, their tokens (as the embedder counts them: its tokenizer, cut at its
``max_seq_length``), and the union over all methods — texts shared by two methods (Naive RAG, MMA and VisRAG chunks
are the same strings) count once, as in the cache. With ``--measure N`` it times the real model on N of the
distinct texts (one process, this machine's threads) and turns the union's tokens into CPU seconds: the floor of
the stage's embedding work at that throughput; ``--kinds`` times several embedders on the same texts, one after the
other in one process (default: fp32 MiniLM and its int8 ONNX twin, with the int8 vectors' cosine to fp32 and the
recall@5 of each text's nearest neighbours). Nothing is asserted.

Usage:
    python tests/benchmarks/bench_method_texts.py --run-dir runs/default [--methods naive_rag mem0 …]
        [--sample 40] [--measure 128]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: the methods of the default plan that embed text (the others store or summarise without vectors)
EMBEDDING_METHODS = ("naive_rag", "visrag", "mma", "mem0", "filegramos", "evermemos")


class RecordingEmbedder:
    """``encode(texts)`` → seeded stand-in unit vectors (one per text, from the text's SHA-1); keeps every text."""

    dim = 384

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts):
        import numpy as np

        texts = [str(t) for t in texts]
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int(hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)
            out[i] = np.random.default_rng(seed).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def encode_query(self, text):
        return self.encode([text])[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True, help="a run with bench/items.parquet (after the bench stage)")
    ap.add_argument("--methods", nargs="+", default=list(EMBEDDING_METHODS))
    ap.add_argument("--sample", type=int, default=None,
                    help="items per sub-task and setting (default: evaluate.sample_per_sub_task of conf/default.yaml)")
    ap.add_argument("--measure", type=int, default=128, help="time the real model on this many distinct texts (0: no)")
    ap.add_argument("--kinds", nargs="+", default=["minilm", "minilm-int8"],
                    help="embedder kinds to time on the same texts (filegram_ray.memory.embed.EMBEDDERS)")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads of the timed model (default 1: what each of the evaluate stage's two "
                    "actors gets on 2 cores, filegram_ray.memory.embed.default_threads)")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(args.run_dir, "bench", "items.parquet")):
        print(f"bench_method_texts: {args.run_dir} has no bench/items.parquet (run the pipeline through bench first)",
              file=sys.stderr)
        return 2

    from filegram_ray.config import load_config
    from filegram_ray.evaluate.items import load_items, sample_items
    from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX, make_content_override
    from filegram_ray.evaluate.plan import plan_units
    from filegram_ray.evaluate.worker import build_unit_views
    from filegram_ray.methods import make_method
    from filegram_ray.storage import RunDir

    run = RunDir(args.run_dir)
    ecfg = load_config(None).section("evaluate")
    sample = args.sample if args.sample is not None else ecfg.get("sample_per_sub_task")
    seed = run.recorded_seed() or 7
    items = [it for it in load_items(run) if it["setting"] in ecfg.get("settings", ["text"])]
    if sample:
        items = sample_items(items, int(sample), seed)
    mm = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
    units = plan_units(items, [args.methods[0]], mm)[args.methods[0]]
    override = make_content_override(run, mm, None)
    options = ecfg.get("method_options") or {}
    recs = {m: RecordingEmbedder() for m in args.methods}
    objs = {m: make_method(m, embedder=recs[m], **options.get(m, {})) for m in args.methods}
    t0 = time.perf_counter()
    for unit in units:
        views = build_unit_views(run, unit, override)
        for m in args.methods:
            objs[m].ingest(views)
    print(f"bench_method_texts: {len(items)} items, {len(units)} context specs (seed {seed}, sample {sample}); "
          f"ingest with stand-in vectors {time.perf_counter() - t0:.0f} s")

    from filegram_ray.memory.embed import Embedder

    emb = Embedder(cache_size=0, threads=args.threads)
    lengths: dict[str, int] = {}

    def tokens(texts: set[str]) -> int:
        new = [t for t in texts if t not in lengths]
        for t, n in zip(new, emb.token_lengths(new) if new else []):
            lengths[t] = int(n)
        return sum(lengths[t] for t in texts)

    union: set[str] = set()
    print(f"\n{'method':<14}{'texts':>10}{'distinct':>10}{'tokens':>12}{'tok/text':>10}")
    for m in args.methods:
        d = set(recs[m].texts)
        union |= d
        n = tokens(d)
        print(f"{m:<14}{len(recs[m].texts):>10,}{len(d):>10,}{n:>12,}{n / max(1, len(d)):>10.0f}")
    total = tokens(union)
    print(f"{'union':<14}{'':>10}{len(union):>10,}{total:>12,}{total / max(1, len(union)):>10.0f}")
    if args.measure:
        import random

        import numpy as np

        from filegram_ray.memory.embed import make_embedder

        pick = random.Random(seed).sample(sorted(union), min(args.measure, len(union)))
        n_tok = tokens(set(pick))
        vecs = {}
        print(f"\nmodel, {args.threads} thread(s), the same {len(pick)} distinct texts ({n_tok:,} tokens), one after the "
              "other in this process:")
        for kind in args.kinds:
            model = emb if kind == "minilm" else make_embedder(kind, threads=args.threads)
            model.cache_size = 0
            model.encode(pick[:8])  # load and warm the model
            c0, w0 = time.process_time(), time.perf_counter()
            vecs[kind] = np.asarray(model.encode(pick), dtype=np.float32)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            rate = n_tok / cpu
            line = (f"  {kind:<12} {wall:6.1f} s wall {cpu:6.1f} CPU-s  {rate:7,.0f} tokens per CPU-s  → the union: "
                    f"{total / rate:7,.0f} CPU-s")
            if kind != args.kinds[0] and vecs[kind].shape == vecs[args.kinds[0]].shape:
                ref = vecs[args.kinds[0]]
                cos = np.sum(ref * vecs[kind], axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(vecs[kind], axis=1))
                k = min(5, len(pick) - 1)
                top = lambda v: np.argsort(-(v @ v.T), axis=1)[:, 1:k + 1]  # noqa: E731 - neighbours of each text
                a, b = top(ref), top(vecs[kind])
                recall = np.mean([len(set(x) & set(y)) / k for x, y in zip(a, b)])
                line += f"; vs {args.kinds[0]}: cosine min {cos.min():.4f} mean {cos.mean():.4f}, recall@{k} {recall:.3f}"
            print(line)
        print(f"(the evaluate stage's embedding floor for the union's {total:,} tokens, before the encode stage's "
              "shared cache; recall@k: each text's k nearest texts, fp32 vs the other model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
