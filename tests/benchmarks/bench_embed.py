"""Embedding throughput and quality, side by side in one run. Prints figures; asserts nothing.

    python tests/benchmarks/bench_embed.py --run-dir RUN [--n 256] [--threads 2] [--repeats 3]
    python tests/benchmarks/bench_embed.py --run-dir RUN --dtypes [--write docs/measurements/FILE.md]

RUN is an encoded run (its ``memory/*/store.json`` give the texts: the chunk and episode texts the encode stage
embeds; ``bench/items.parquet``, when present, gives the queries). All rows embed the same texts, with the same
``max_seq_length`` (the model folder's, 256) and the same intra-op threads, in rotating order, ``--repeats`` times
(median reported), so a shared machine's load hits every row alike:

1. **bare** — ``SentenceTransformer.encode(texts, batch_size=64)`` on the packaged model, in this process;
2. **Embedder** — :class:`filegram_ray.memory.embed.Embedder` in this process (one text per forward pass, long
   texts read whole in windows, cache off);
3. **stage (in process)** — the encode stage's embedding step as its profile worker runs it under the serial
   executor (:func:`filegram_ray.memory.encode_worker.local_embedder`, the callable the worker builds), built afresh
   for every run as the stage builds it once per run;
4. **stage (Ray actor)** — the same callable in one Ray actor started with the environment the stage gives its
   profile workers (:func:`~filegram_ray.memory.embed.omp_env`), as the actor-pool executor runs it, timed from the
   actor's start to the collected vectors;
5. **stage as before** — that actor with the settings the stage had before issue 17 (the single thread a 0.5-CPU
   Ray worker gets);
6. **int8 ONNX** and **e5-small** (multilingual, 4-bit) in this process.

Every row runs with ``OMP_WAIT_POLICY=PASSIVE`` (:func:`filegram_ray.memory.embed.omp_env`, what the stage gives its
embedding processes; set before torch loads). In-process embedders are built once, before the timings (the model
load is not timed). The stage rows build their embedder (and pipeline and actor) on every run, as the stage does
once per run: that fixed cost (measured on a one-text input) is printed, and each stage row is also given net of it.

``--dtypes`` runs instead the **bf16 against fp32** comparison of issue 31 (:func:`compare_dtypes`): the same texts
embedded by :class:`~filegram_ray.memory.embed.Embedder` in fp32 and in bf16 (``torch.autocast``, forced whatever
the CPU), in rotating order, one process: tokens per CPU second (``time.process_time``, all threads) of each, the
cosine min/mean between the two vectors of each text, recall@5 of fp32's neighbours on the run's queries, and the
answer agreement: the share of the run's bench items whose FileGramOS context (``memory.retrieve.retrieve`` with
the item's query, built with each dtype) is identical — a deterministic backbone (temperature 0) then gives the
identical answer, so it is a lower bound on identical method answers. ``--write FILE`` also writes the figures as
Markdown.

Then quality: **recall@5 of int8 against fp32** (for each query, the share of fp32's top 5 texts that int8 also
ranks in its top 5) on the run's own queries, and the **Chinese planted-chunk test**: hand-written facts are
planted inside held-out Chinese chunks of the run, and each fact's paraphrased Chinese question is searched over
all Chinese chunks; the planted chunk's rank is reported per embedder (an English control set likewise).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: (fact sentence, paraphrased question): Chinese facts planted inside held-out Chinese chunks of the run
ZH_FACTS = [
    ("青河项目第三季度的差旅报销总额为四万七千三百元，比预算超出百分之十二。", "青河项目三季度出差一共花了多少钱？"),
    ("实验室的离心机已于十一月五日送往供应商维修，预计两周后返还。", "离心机什么时候拿去修的，多久能回来？"),
    ("小猫咪咪每天早晚各喂一次干粮，周末加一罐湿粮。", "猫一天喂几次，周末吃什么？"),
    ("年度读书会定在三月的第二个周六下午，地点改到图书馆三楼的小会议室。", "读书会在哪天开，在什么地方？"),
    ("客户反馈显示新版应用的登录失败率从百分之三下降到了百分之零点五。", "新版本上线后登录出错的比例降了多少？"),
    ("搬家公司报价为每小时三百八十元，最少按四小时计费。", "请搬家工人一小时多少钱，最少付几个小时？"),
    ("我们决定把周报的截止时间从周五中午改为周四晚上八点。", "每周的报告现在几点之前要交？"),
    ("旧服务器上的照片备份共有一万二千张，已全部迁移到新的网络硬盘。", "以前机器上的相片有多少，挪到哪里去了？"),
    ("夏令营的报名费为每人两千一百元，包含住宿和三餐。", "参加夏令营要交多少钱，包不包吃住？"),
    ("董事会批准了在成都设立第二个研发中心的提案。", "公司打算在哪个城市开新的研究机构？"),
    ("体检报告提示胆固醇偏高，医生建议三个月后复查。", "医生说血脂的问题多久以后再去检查？"),
    ("这批咖啡豆来自云南保山，烘焙程度为中深烘。", "这些咖啡豆产地是哪里，烤到什么程度？"),
]

#: English control pairs, planted inside held-out English chunks
EN_FACTS = [
    ("Travel reimbursements for the Green River project came to 47,300 in the third quarter, 12 percent over "
     "budget.", "How much did the Green River project spend on trips in Q3?"),
    ("The lab centrifuge was shipped to the vendor for repair on November 5 and should be back in two weeks.",
     "When was the spinning machine sent off to be fixed, and when will it return?"),
    ("The cat is fed dry food every morning and evening, plus one can of wet food at weekends.",
     "How often is the kitten given meals, and what does it eat on Saturdays?"),
    ("The annual book club meets on the second Saturday of March in the small room on the library's third floor.",
     "Where and when does the reading group get together?"),
    ("Customer feedback shows the login failure rate of the new app dropped from 3 percent to 0.5 percent.",
     "By how much did sign-in errors fall after the release?"),
    ("The movers quoted 380 per hour with a four-hour minimum.", "What do the removal workers charge hourly?"),
    ("We moved the weekly report deadline from Friday noon to Thursday at 8 pm.", "When is the weekly update due now?"),
    ("The old server held 12,000 backed-up photos, all migrated to the new network drive.",
     "How many pictures were on the previous machine and where did they go?"),
]


def run_texts(run_dir: str) -> tuple[list[str], list[str]]:
    """Chunk + episode texts of every profile of an encoded run (store order), and the profiles' ids per text."""
    from filegram_ray.memory.consolidate import MemoryStore
    from filegram_ray.memory.index import chunk_texts, episode_texts

    texts, owners = [], []
    for path in sorted(glob.glob(os.path.join(run_dir, "memory", "*", "store.json"))):
        store = MemoryStore.from_json(Path(path).read_bytes())
        ct, _ = chunk_texts(store)
        et, _ = episode_texts(store)
        texts += ct + et
        owners += [Path(path).parent.name] * (len(ct) + len(et))
    if not texts:
        raise SystemExit(f"{run_dir}: no memory/*/store.json (run the encode stage first)")
    return texts, owners


def run_queries(run_dir: str, n: int, rng: random.Random) -> list[str]:
    """The run's own retrieval queries (bench items: question + options, as the evaluate stage queries)."""
    path = os.path.join(run_dir, "bench", "items.parquet")
    if not os.path.exists(path):
        return []
    import polars as pl

    from filegram_ray.evaluate.stage import retrieval_query

    rows = pl.read_parquet(path).select(["question", "choices"]).to_dicts()
    qs = sorted({retrieval_query({"question": r["question"], "choices": json.loads(r["choices"] or "[]")})
                 for r in rows})
    return rng.sample(qs, min(n, len(qs)))


def timed(fn, texts) -> float:
    t0 = time.perf_counter()
    fn(texts)
    return time.perf_counter() - t0


def stage_fn(kind: str, threads: int, batch_size: int, *, before: bool = False):
    """The stage's embedding step in one Ray actor (as the actor-pool executor runs a profile worker), started
    afresh per call, as a function of a list of texts."""
    import ray

    from filegram_ray.memory.embed import omp_env
    from filegram_ray.memory.encode_worker import local_embedder

    @ray.remote(num_cpus=0.5, runtime_env={"env_vars": omp_env()})
    class _Embed:
        def __init__(self):
            self.fn = local_embedder(kind, batch_size, None, 1 if before else threads)

        def embed(self, texts):
            return self.fn({"text": texts})["vector"]

    def fn(texts):
        actor = _Embed.remote()
        try:
            return ray.get(actor.embed.remote(texts))
        finally:
            ray.kill(actor)
    return fn


def driver_fn(kind: str, threads: int, batch_size: int):
    """The stage's in-process embedding step (local_embedder, built per run as the stage's profile worker builds
    it) as a function of a list of texts."""
    from filegram_ray.memory.encode_worker import local_embedder

    def fn(texts):
        return local_embedder(kind, batch_size, None, threads)({"text": texts})["vector"]
    return fn


def planted_ranks(embedders: dict, corpus: list[str], held: list[str], facts: list[tuple[str, str]]
                  ) -> dict[str, list[int]]:
    """Rank (1 = first) of each planted chunk among corpus + planted chunks for its question, per embedder."""
    planted = []
    for (fact, _), host in zip(facts, held):
        cut = len(host) // 2
        planted.append(host[:cut] + fact + host[cut:])
    docs = corpus + planted
    out = {}
    for name, e in embedders.items():
        D = e.encode(docs)
        ranks = []
        for j, (_, q) in enumerate(facts):
            s = D @ np.asarray(e.encode_query(q), dtype=np.float32).reshape(-1)
            target = s[len(corpus) + j]
            ranks.append(1 + int((s > target).sum()))
        out[name] = ranks
    return out


def _whole_tokens(emb, texts: list[str]) -> int:
    """Tokens the model runs for ``texts`` read whole (every window, special tokens included)."""
    from filegram_ray.memory.embed import minilm_tokenizer

    tok = minilm_tokenizer()
    return sum(len(tok.encode(piece).ids) if n == 1 else n for t in texts for piece, n in emb.windows(t))


def _items(run_dir: str, n: int, rng: random.Random) -> list[dict]:
    """A seeded sample of the run's bench items that name one profile (question, choices, profile_id)."""
    path = os.path.join(run_dir, "bench", "items.parquet")
    if not os.path.exists(path):
        return []
    import polars as pl

    rows = [r for r in pl.read_parquet(path).select(["question_id", "profile_id", "question", "choices"]).to_dicts()
            if r["profile_id"]]
    rows.sort(key=lambda r: r["question_id"])
    return rng.sample(rows, min(n, len(rows)))


#: the similarity figures FileGramOS prints beside each hit (``sim=0.532``, `` (0.53)``)
_SCORES = re.compile(r"sim=-?\d\.\d+| \(-?\d\.\d+\)")


def compare_dtypes(args) -> list[str]:
    """bf16 vs fp32 on one run's texts (see the module docstring); returns the printed lines."""
    import torch

    from filegram_ray.memory.consolidate import MemoryStore
    from filegram_ray.memory.embed import Embedder, embed_dtype
    from filegram_ray.memory.index import ProfileIndices, build_index, chunk_texts, episode_texts
    from filegram_ray.memory.retrieve import retrieve

    rng = random.Random(17)
    texts_all, owners = run_texts(args.run_dir)
    uniq = sorted(set(texts_all))
    sample = rng.sample(uniq, min(args.n, len(uniq)))
    torch.set_num_threads(args.threads)
    det = embed_dtype()
    emb = {d: Embedder(cache_size=0, threads=args.threads, dtype=d) for d in ("fp32", "bf16")}
    ntok = _whole_tokens(emb["fp32"], sample)
    out = [f"run {args.run_dir}: {len(uniq)} distinct texts from {len(set(owners))} profiles; sample {len(sample)} "
           f"texts, {ntok} tokens read whole; {args.threads} threads; torch {torch.__version__}; this CPU: "
           f"{det['why']} (auto → {det['dtype']}); load average {os.getloadavg()[0]:.1f} at start"]
    for e in emb.values():
        e.encode(sample[:8])  # model load and first-call allocations, outside the timings
    cpu: dict[str, list[float]] = {d: [] for d in emb}
    wall: dict[str, list[float]] = {d: [] for d in emb}
    names = list(emb)
    for r in range(args.repeats):
        for d in names[r % 2:] + names[:r % 2]:
            c0, w0 = time.process_time(), time.perf_counter()
            emb[d].encode(sample)
            cpu[d].append(time.process_time() - c0)
            wall[d].append(time.perf_counter() - w0)
    out.append(f"{'dtype':6s} {'tokens/CPU-s':>13s} {'CPU s':>7s} {'wall s':>7s}   (median of {args.repeats})")
    for d in names:
        c, w = statistics.median(cpu[d]), statistics.median(wall[d])
        out.append(f"{d:6s} {ntok / c:13.0f} {c:7.2f} {w:7.2f}")
    out.append(f"bf16 / fp32 tokens per CPU second: {statistics.median(cpu['fp32']) / statistics.median(cpu['bf16']):.2f}×")

    corpus = sorted(rng.sample(uniq, min(args.corpus, len(uniq)))) if args.corpus else uniq
    D = {d: e.encode(corpus) for d, e in emb.items()}
    again = Embedder(cache_size=0, threads=args.threads, dtype="bf16").encode(corpus[:64])
    cos = (D["fp32"] * D["bf16"]).sum(axis=1)
    queries = run_queries(args.run_dir, args.queries, rng) or \
        [t.split(".")[0][:200] for t in rng.sample(uniq, min(args.queries, len(uniq)))]
    Q = {d: e.encode(queries) for d, e in emb.items()}
    top = lambda M, q: set(np.argsort(-(M @ q), kind="stable")[:5].tolist())  # noqa: E731
    rec = [len(top(D["fp32"], a) & top(D["bf16"], b)) / 5 for a, b in zip(Q["fp32"], Q["bf16"])]
    out.append(f"over {len(corpus)} texts and {len(queries)} queries: cosine bf16-fp32 min {cos.min():.5f} mean "
               f"{cos.mean():.5f}; recall@5 of fp32's neighbours {np.mean(rec):.3f} (min {min(rec):.1f}); bf16 "
               f"bytes the same on a second embedder: {again.tobytes() == D['bf16'][:64].tobytes()}")

    items = _items(args.run_dir, args.items, rng)
    if items:
        from filegram_ray.llm.readers import make_backbone

        backbone = make_backbone("lexical")  # conf/default.yaml's evaluate.backbone
        stores: dict[str, tuple] = {}
        same = same_hits = same_answer = 0
        for it in items:
            pid = it["profile_id"]
            if pid not in stores:  # the store and its indices in each dtype, built once per profile
                store = MemoryStore.from_json(Path(args.run_dir, "memory", pid, "store.json").read_bytes())
                ct, cm = chunk_texts(store)
                et, em = episode_texts(store)
                stores[pid] = (store, {d: ProfileIndices(build_index(e.encode(ct), cm, e),
                                                         build_index(e.encode(et), em, e)) for d, e in emb.items()})
            store, idx = stores[pid]
            item = {**it, "choices": json.loads(it["choices"] or "[]")}
            q = " ".join([it["question"], *item["choices"]])
            ctx = [retrieve(store, q, indices=idx[d], embedder=emb[d]).text for d in names]
            same += ctx[0] == ctx[1]
            same_hits += _SCORES.sub("", ctx[0]) == _SCORES.sub("", ctx[1])
            ans = [backbone.answer(item, c) for c in ctx]
            same_answer += (ans[0].choice, ans[0].text) == (ans[1].choice, ans[1].text)
        n = len(items)
        out.append(f"answer agreement (FileGramOS, default lexical backbone): {same_answer} of {n} bench items "
                   f"({100 * same_answer / n:.1f} %) answered identically from the bf16 and the fp32 context; "
                   f"contexts identical but for the printed similarity digits: {same_hits} "
                   f"({100 * same_hits / n:.1f} %); byte-identical contexts: {same} ({100 * same / n:.1f} %)")
    else:
        out.append("answer agreement: no bench/items.parquet in the run (run the bench stage)")
    out.append(f"load average {os.getloadavg()[0]:.1f} at end")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True, help="an encoded run directory")
    ap.add_argument("--n", type=int, default=256, help="texts in the throughput sample")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads for every row")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200, help="queries for recall@5")
    ap.add_argument("--corpus", type=int, default=None, help="texts searched for recall@5 and the planted-chunk "
                    "test (a seeded sample of the run's distinct texts; default all)")
    ap.add_argument("--skip", nargs="*", default=[], help="rows to leave out: before driver e5 int8 stage quality")
    ap.add_argument("--dtypes", action="store_true", help="only the bf16 vs fp32 comparison (issue 31)")
    ap.add_argument("--items", type=int, default=300, help="bench items for the answer agreement (--dtypes)")
    ap.add_argument("--write", default=None, help="with --dtypes: also write the figures to this Markdown file")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from filegram_ray.memory.embed import omp_env

    for k, v in omp_env().items():  # before torch loads (OpenMP reads it then), for every row alike
        os.environ.setdefault(k, v)
    if args.dtypes:
        lines = compare_dtypes(args)
        print("\n".join(lines))
        if args.write:
            from filegram_ray.storage import atomic_write_local

            body = "# bf16 vs fp32 embedding (tests/benchmarks/bench_embed.py --dtypes)\n\n```\n" + \
                "\n".join(lines) + "\n```\n"
            atomic_write_local(Path(args.write), body.encode("utf-8"))
        return 0
    import torch

    from filegram_ray.memory.embed import E5Embedder, Embedder, OnnxInt8Embedder, cjk_share
    from filegram_ray.runtime import init_ray

    rng = random.Random(17)
    texts_all, owners = run_texts(args.run_dir)
    uniq = sorted(set(texts_all))
    sample = rng.sample(uniq, min(args.n, len(uniq)))
    torch.set_num_threads(args.threads)
    fp32 = Embedder(cache_size=0, threads=args.threads)
    bare = fp32.model
    toks = fp32.token_lengths(sample)
    print(f"run {args.run_dir}: {len(texts_all)} texts ({len(uniq)} distinct) from {len(set(owners))} profiles; "
          f"sample {len(sample)} texts, {statistics.mean(len(t) for t in sample):.0f} chars and "
          f"{statistics.mean(toks):.0f} tokens on average ({sum(t >= bare.max_seq_length for t in toks)} cut at "
          f"max_seq_length {bare.max_seq_length}); {args.threads} threads; load average "
          f"{os.getloadavg()[0]:.1f} at start")

    # in-process embedders are built once (model loaded in the warm-up, outside the timings), cache off
    own = Embedder(cache_size=0, threads=args.threads, batch_size=args.batch_size)
    rows = {"bare SentenceTransformer.encode": lambda t: bare.encode(t, batch_size=args.batch_size,
                                                                       normalize_embeddings=True,
                                                                       show_progress_bar=False),
            "Embedder (one text per pass)": own.encode}
    if "stage" not in args.skip or "before" not in args.skip:
        init_ray(num_cpus=max(2, args.threads))
    if "driver" not in args.skip:
        rows["stage (in process)"] = driver_fn("minilm", args.threads, args.batch_size)
    if "stage" not in args.skip:
        rows["stage (Ray actor)"] = stage_fn("minilm", args.threads, args.batch_size)
    if "before" not in args.skip:
        rows["stage as before (1 text/pass, 1 thread)"] = stage_fn("minilm", args.threads, args.batch_size,
                                                                    before=True)
    if "int8" not in args.skip:
        rows["int8 ONNX MiniLM"] = OnnxInt8Embedder(cache_size=0, threads=args.threads,
                                                    batch_size=args.batch_size).encode
    if "e5" not in args.skip:
        rows["e5-small multilingual (4-bit)"] = E5Embedder(cache_size=0, threads=args.threads,
                                                           batch_size=args.batch_size).encode
    for fn in rows.values():  # warm-up: model loads, actor start, first-call allocations
        fn(sample[:16])
    times: dict[str, list[float]] = {k: [] for k in rows}
    names = list(rows)
    for r in range(args.repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(timed(rows[k], sample))
    # the stage rows pay a fixed cost per run (actor start, model load) that a real encode stage
    # pays once for thousands of texts: measured on one text, and reported net beside the gross figure
    fixed = {k: statistics.median(timed(rows[k], sample[:1]) for _ in range(args.repeats))
             for k in names if k.startswith("stage")}
    base = statistics.median(times[names[0]])
    print(f"\n{'row':44s} {'texts/s':>8s} {'vs bare':>8s}   (median of {args.repeats}; each run: "
          f"{len(sample)} texts)")
    for k in names:
        t = statistics.median(times[k])
        print(f"{k:44s} {len(sample) / t:8.1f} {100 * base / t:7.0f} %")
        if k in fixed and t > fixed[k]:
            net = t - fixed[k]
            print(f"{'  … net of its fixed ' + format(fixed[k], '.1f') + ' s per run':44s} {len(sample) / net:8.1f} "
                  f"{100 * base / net:7.0f} %")
    print(f"load average {os.getloadavg()[0]:.1f} at end")

    if "quality" in args.skip:
        return 0
    # ---- recall@5 of int8 (and e5) against fp32 on the run's own queries
    queries = run_queries(args.run_dir, args.queries, rng)
    if not queries:
        queries = [t.split(".")[0][:200] for t in rng.sample(uniq, min(args.queries, len(uniq)))]
        print("\n(no bench/items.parquet: queries are the first sentence of sampled texts)")
    corpus = sorted(rng.sample(uniq, min(args.corpus, len(uniq)))) if args.corpus else uniq
    ref = Embedder(threads=args.threads)
    int8 = OnnxInt8Embedder(threads=args.threads)
    D32, D8 = ref.encode(corpus), int8.encode(corpus)
    Q32, Q8 = ref.encode(queries), int8.encode(queries)
    top = lambda D, q: set(np.argsort(-(D @ q), kind="stable")[:5].tolist())  # noqa: E731
    rec = [len(top(D32, a) & top(D8, b)) / 5 for a, b in zip(Q32, Q8)]
    cos = (D32 * D8).sum(axis=1)
    print(f"\nint8 vs fp32 over the run's {len(corpus)} distinct texts and {len(queries)} of its queries: "
          f"recall@5 {np.mean(rec):.3f} (min {min(rec):.1f}), text-vector cosine min {cos.min():.4f} "
          f"mean {cos.mean():.4f}")

    # ---- Chinese: planted chunks
    zh = [t for t in corpus if cjk_share([t]) > 0.5 and len(t) > 200]
    en = [t for t in corpus if cjk_share([t]) == 0 and len(t) > 200]
    embedders = {"minilm (fp32)": ref, "minilm-int8": int8, "e5-small": E5Embedder(threads=args.threads)}
    for label, pool, facts in (("Chinese", zh, ZH_FACTS), ("English control", en, EN_FACTS)):
        if len(pool) < len(facts) + 10:
            print(f"\n{label}: only {len(pool)} chunks in the run; skipped")
            continue
        pool = sorted(pool)
        rng.shuffle(pool)
        held, corpus_l = pool[:len(facts)], pool[len(facts):]
        ranks = planted_ranks(embedders, corpus_l, held, facts)
        print(f"\n{label} planted-chunk test: {len(facts)} facts planted in held-out chunks, searched among "
              f"{len(corpus_l) + len(facts)} chunks")
        print(f"{'embedder':16s} {'hit@1':>6s} {'hit@5':>6s} {'MRR':>6s} {'median rank':>12s}  ranks")
        for name, rk in ranks.items():
            print(f"{name:16s} {sum(r == 1 for r in rk) / len(rk):6.2f} {sum(r <= 5 for r in rk) / len(rk):6.2f} "
                  f"{np.mean([1 / r for r in rk]):6.3f} {statistics.median(rk):12.1f}  {rk}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
