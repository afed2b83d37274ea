"""Candidate CPU embedders for the evaluate stage: texts/s on this machine and retrieval agreement with MiniLM on
every method's own queries.

Replays the evaluate stage's plan on a run (the same item sample and context specs; ``--specs N`` takes a seeded
sample of them), asks every embedding method for its texts and its queries' texts (``embedding_texts`` /
``query_embedding_texts``, what the embedding plan embeds) and then, for each embedder kind:

* **speed** — the time to load the model (``load s``; the static kind's first use distils it from MiniLM, once
  per machine), then the union of the texts embedded through the embedding plan's own path
  (:func:`filegram_ray.methods.embed_plan.embed_texts`: length-sorted batches, one process, ``--threads`` intra-op
  threads) into a scratch table: wall and CPU seconds, texts/s, and the model windows (256-token pieces) it read;
* **agreement** — for every (method, context spec, query) the method ranks by vectors: the top 5 of the spec's
  items by cosine under this kind vs under ``minilm`` (recall@5 of MiniLM's top 5), averaged per method and over
  all queries. FileGramOS is scored on its two indices (content chunks, episodes) apart; EverMemOS, which only
  clusters its episodes (cosine ≥ 0.7), by the share of episode pairs whose same-cluster relation agrees
  (Rand index of the two clusterings).

Prints one table and, with ``--page``, writes it to a dated page under docs/measurements/ with the CPU flags.
Nothing is asserted (figures, not a test).

Usage:
    python tests/benchmarks/bench_embedders.py --run-dir runs/default [--specs 40] [--kinds minilm minilm-int8
        minilm-static] [--threads 2] [--page docs/measurements/2026-12-05-embedders.md]
    python tests/benchmarks/bench_embedders.py --run-dir runs/default --count-only

A kind ``minilm-l<N>`` (e.g. ``minilm-l3``) is the packaged MiniLM cut to its first N layers
(:func:`register_truncated`), measured here only.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: methods that rank stored items by cosine to a query (their agreement is recall@5)
RANKING = ("naive_rag", "visrag", "mma", "mem0")


def register_truncated(kind: str) -> None:
    """Register ``minilm-l<N>`` (a candidate measured here, not a product setting): the packaged MiniLM with only
    its first N of 6 transformer layers (same tokenizer, mean pooling and normalisation), so about N/6 of its
    encoder FLOPs per token. Nothing is trained; the question is only how much of MiniLM's ranking survives."""
    from filegram_ray.memory.embed import EMBEDDERS, Embedder, register_embedder

    if kind in EMBEDDERS or not kind.startswith("minilm-l") or not kind[len("minilm-l"):].isdigit():
        return
    n_layers = int(kind[len("minilm-l"):])

    class Truncated(Embedder):
        label = f"MiniLM, first {n_layers} layers"

        @property
        def model(self):
            if self._model is None:
                import torch

                m = Embedder.model.fget(self)
                bert = m[0].auto_model
                bert.encoder.layer = torch.nn.ModuleList(list(bert.encoder.layer)[:n_layers])
                bert.config.num_hidden_layers = n_layers
            return self._model

        def identity(self) -> dict:
            return {**super().identity(), "kind": kind, "layers": n_layers}

    register_embedder(kind)(Truncated)


def cpu_flags() -> str:
    """The matrix-relevant CPU flags (``lscpu``'s avx2 / avx512* / amx* / vnni), or "?"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = next((ln.split(":", 1)[1].split() for ln in fh if ln.startswith("flags")), [])
    except OSError:
        return "?"
    keep = [f for f in flags if f.startswith(("avx", "amx", "fma")) or "vnni" in f]
    return " ".join(sorted(keep)) or "none"


def collect(run_dir: str, sample: int | None, n_specs: int | None, seed_pick: int):
    """``(specs, stats)``: per sampled context spec ``{"items": {method: texts}, "fgos": (episodes, chunks),
    "evermemos": texts, "queries": {method: [query texts]}}``."""
    from filegram_ray.config import load_config
    from filegram_ray.evaluate.items import load_items, retrieval_query, sample_items
    from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX, make_content_override
    from filegram_ray.evaluate.plan import plan_units, spec_units
    from filegram_ray.evaluate.worker import build_unit_views
    from filegram_ray.memory.consolidate import ConsolidateConfig, _deviations, content_chunks
    from filegram_ray.methods import make_method
    from filegram_ray.storage import RunDir

    run = RunDir(run_dir)
    ecfg = load_config(None).section("evaluate")
    sample = sample if sample is not None else ecfg.get("sample_per_sub_task")
    seed = run.recorded_seed() or 7
    items = [it for it in load_items(run) if it["setting"] in ecfg.get("settings", ["text"])]
    if sample:
        items = sample_items(items, int(sample), seed)
    mm = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
    names = [*RANKING, "filegramos", "evermemos"]
    plan = plan_units(items, names, mm)
    sus = spec_units(plan, {u["unit_id"] for us in plan.values() for u in us})
    if n_specs and n_specs < len(sus):
        sus = random.Random(seed_pick).sample(sus, n_specs)
    opts = ecfg.get("method_options") or {}
    methods = {m: make_method(m, **opts.get(m, {})) for m in names}
    override = make_content_override(run, mm, None)
    specs = []
    t0 = time.perf_counter()
    for su in sus:
        if su["setting"] == "real_world" and not run.exists("realworld"):
            continue
        views = build_unit_views(run, su, override)
        queries = list(dict.fromkeys(retrieval_query(it) for it in su["units"][0]["items"]))
        rec = {"items": {m: methods[m].embedding_texts(views) for m in RANKING}, "queries": {}}
        for m in RANKING:
            rec["queries"][m] = sorted({t for q in queries for t in methods[m].query_embedding_texts(q)})
        fg = methods["filegramos"]
        if views:
            engrams = sorted((fg._engram(v) for v in views), key=lambda e: e.trajectory_id)
            flags = _deviations(engrams, ConsolidateConfig())[4]
            rec["fgos"] = ([ep.get("content") or ep.get("summary") or "" for e in engrams for ep in e.episodes],
                           [c["text"] for c in content_chunks(engrams, flags, ConsolidateConfig())])
        else:
            rec["fgos"] = ([], [])
        rec["queries"]["filegramos"] = sorted(set(queries))
        rec["evermemos"] = methods["evermemos"].embedding_texts(views)
        specs.append(rec)
    return specs, {"items": len(items), "specs_total": len(spec_units(plan, {u["unit_id"] for us in plan.values()
                                                                            for u in us})),
                   "specs": len(specs), "collect_s": time.perf_counter() - t0, "sample": sample, "seed": seed}


def union_of(specs) -> list[str]:
    seen: dict[str, None] = {}
    for s in specs:
        for texts in s["items"].values():
            seen.update(dict.fromkeys(texts))
        for texts in s["queries"].values():
            seen.update(dict.fromkeys(texts))
        seen.update(dict.fromkeys(s["fgos"][0] + s["fgos"][1] + s["evermemos"]))
    return list(seen)


def embed_all(kind: str, texts: list[str], threads: int) -> tuple[dict[str, np.ndarray], dict]:
    """Vectors of ``texts`` through the embedding plan's path into a scratch table, and the timing."""
    from filegram_ray.memory.embed import text_key
    from filegram_ray.methods import embed_plan as EP
    from filegram_ray.storage import RunDir

    scratch = RunDir(tempfile.mkdtemp(prefix=f"fg-embedders-{kind}-"))
    from filegram_ray.memory.embed import make_embedder

    warm = make_embedder(kind, threads=threads)
    w = time.perf_counter()
    warm.encode(["warm up the model (and distil it, for the static kind, when not cached)"])
    load_s = time.perf_counter() - w
    _r0, c0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    stats = EP.embed_texts(scratch, texts, kind, use_ray=False, threads=threads)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    keys, vecs = EP.load_vectors(scratch, stats.tag, warm.dim)
    row = dict(zip(keys, range(len(keys))))
    out = {t: vecs[row[text_key(t)]] for t in texts}
    return out, {"wall": wall, "cpu": cpu, "texts": len(texts), "pieces": stats.pieces, "batches": stats.batches,
                 "load_s": load_s}


def _top(vec_of, pool: list[str], q: str, k: int = 5) -> list[int]:
    m = np.stack([vec_of[t] for t in pool])
    sims = m @ vec_of[q]
    return list(np.argsort(-sims, kind="stable")[:k])


def agreement(specs, ref: dict, cand: dict) -> dict[str, tuple[float, int]]:
    """``{method: (mean recall@5 of ref's top 5, queries)}`` (+ ``evermemos``: Rand index of the clusterings)."""
    from filegram_ray.methods.evermemos import cluster_episodes

    acc: dict[str, list[float]] = {}
    for s in specs:
        pools = {m: s["items"][m] for m in RANKING}
        pools["filegramos (chunks)"], pools["filegramos (episodes)"] = s["fgos"][1], s["fgos"][0]
        for name, pool in pools.items():
            if len(pool) <= 5:
                continue  # every item is in the top 5 under any embedder
            qm = name.split(" ")[0]
            for q in s["queries"][qm]:
                a, b = set(_top(ref, pool, q)), set(_top(cand, pool, q))
                acc.setdefault(name, []).append(len(a & b) / len(a))
        eps = s["evermemos"]
        if len(eps) > 1:
            ca = cluster_episodes(np.stack([ref[t] for t in eps]))
            cb = cluster_episodes(np.stack([cand[t] for t in eps]))
            same = [(ca[i] == ca[j]) == (cb[i] == cb[j]) for i in range(len(eps)) for j in range(i + 1, len(eps))]
            acc.setdefault("evermemos (Rand index)", []).append(float(np.mean(same)))
    out = {m: (float(np.mean(v)), len(v)) for m, v in acc.items()}
    recalls = [x for m, v in acc.items() if not m.startswith("evermemos") for x in v]
    out["all queries"] = (float(np.mean(recalls)) if recalls else float("nan"), len(recalls))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True, help="a run with bench/items.parquet (after the bench stage)")
    ap.add_argument("--sample", type=int, default=None, help="items per sub-task and setting (default: the config's)")
    ap.add_argument("--specs", type=int, default=None, help="a seeded sample of this many context specs (default all)")
    ap.add_argument("--kinds", nargs="+", default=["minilm", "minilm-int8", "minilm-static"])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--count-only", action="store_true", help="print the texts and windows; embed nothing")
    ap.add_argument("--page", default=None, help="also write the table to this markdown page")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(args.run_dir, "bench", "items.parquet")):
        print(f"bench_embedders: {args.run_dir} has no bench/items.parquet", file=sys.stderr)
        return 2
    specs, info = collect(args.run_dir, args.sample, args.specs, 1)
    texts = union_of(specs)
    from filegram_ray.memory.embed import make_embedder

    mini = make_embedder("minilm")
    pieces, _ = mini.pieces(texts)
    lines = [f"run {args.run_dir}: {info['items']} items (sample {info['sample']}, seed {info['seed']}), "
             f"{info['specs']} of {info['specs_total']} context specs; {len(texts):,} distinct texts "
             f"({len(pieces):,} MiniLM windows of ≤ 256 tokens); collected in {info['collect_s']:.0f} s",
             f"CPU flags: {cpu_flags()}; {args.threads} intra-op threads; load average at start "
             + "/".join(f"{x:.1f}" for x in os.getloadavg())]
    for m in RANKING:
        per = {t for s in specs for t in s["items"][m]}
        lines.append(f"  {m}: {len(per):,} distinct item texts")
    print("\n".join(lines), flush=True)
    if args.count_only:
        return 0
    vecs, timing = {}, {}
    for kind in args.kinds:
        register_truncated(kind)
        vecs[kind], timing[kind] = embed_all(kind, texts, args.threads)
        t = timing[kind]
        print(f"  {kind}: {t['wall']:.1f} s wall, {t['cpu']:.1f} CPU-s, {t['texts'] / t['wall']:.1f} texts/s", flush=True)
    ref = "minilm" if "minilm" in vecs else args.kinds[0]
    table = ["", "| embedder | load s | wall s | CPU s | texts/s (wall) | texts per CPU-s | windows | recall@5 vs MiniLM, "
             "all queries | per method |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for kind in args.kinds:
        t = timing[kind]
        agr = agreement(specs, vecs[ref], vecs[kind]) if kind != ref else {}
        per = "; ".join(f"{m} {v:.3f} ({n})" for m, (v, n) in agr.items() if m != "all queries")
        allq = f"{agr['all queries'][0]:.3f} ({agr['all queries'][1]})" if agr else "(reference)"
        table.append(f"| {kind} | {t['load_s']:.1f} | {t['wall']:.1f} | {t['cpu']:.1f} | {t['texts'] / t['wall']:.1f} | "
                     f"{t['texts'] / max(t['cpu'], 1e-9):.1f} | {t['pieces']:,} | {allq} | {per} |")
    print("\n".join(table))
    if args.page:
        Path(args.page).parent.mkdir(parents=True, exist_ok=True)
        with open(args.page, "a", encoding="utf-8") as fh:
            fh.write("\n```\n" + "\n".join(lines) + "\n```\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
