"""Speed of the encoder reader: seconds per item × method on the contexts an evaluate run showed its reader.

Reads every context of ``RUN/results/contexts/<tag>/`` (all methods, all settings; the contexts do not depend on
the reader) and answers each with the encoder reader (``evaluate.backbone: encoder``) in this process, on the
threads torch is given (``--threads``, default 2). Also answers the reader-validity rows' contexts — gold evidence
of every item, FileGramOS's context again with the options rotated, and masked — and PRINTS: contexts answered,
seconds per item × method (mean, median, 95th percentile, the longest context's), the total, the total projected
for the run's items × methods + validity rows, the encoder's passage count, the load average before and after and
the CPU flags, the instruction set torch dispatches to, the share of the time MiniLM's forward passes took (and
milliseconds per passage they encoded), and the answers the default sample of this run's bank would ask (40 per
sub-task and setting × 16 methods + 4 validity rows) at the measured mean. ``--isa avx2`` caps torch, oneDNN and MKL
at AVX2 (``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``, set before torch loads): an
AVX-512 machine then runs the kernels an AVX2-only CPU runs. Asserts nothing; the bound it is read against (≤ 0.2 s per item × method, ≤ 5 minutes for the
default sample) is the issue's, not a test's.

Usage:
    python tests/benchmarks/bench_reader_speed.py --run-dir RUN [--contexts-tag lexical] [--threads 2]
        [--limit N] [--head PATH] [--isa native|avx2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_reader_candidates import load_contexts  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--contexts-tag", default="lexical")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="answer at most N contexts per method")
    ap.add_argument("--head", default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: run torch's AVX2 kernels even where the CPU has AVX-512 (set before torch loads)")
    a = ap.parse_args(argv)
    if a.isa == "avx2":
        if "torch" in sys.modules:
            raise SystemExit("--isa avx2 must be set before torch is imported")
        os.environ.update(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2")
    import torch

    torch.set_num_threads(a.threads)
    from filegram_ray.evaluate.items import load_answer_key, load_items, public_view, sample_items
    from filegram_ray.evaluate.reader_validity import _rotated, gold_evidence, mask_tier_words, rotation
    from filegram_ray.llm.encoder_reader import EncoderBackbone, passages
    from filegram_ray.storage import RunDir

    run = RunDir(a.run_dir)
    items = {it["question_id"]: it for it in load_items(run)}
    key = load_answer_key(run)
    ctxs = load_contexts(run, a.contexts_tag)
    if not ctxs:
        raise SystemExit(f"{a.run_dir}: no results/contexts/{a.contexts_tag}/ (run evaluate first)")
    jobs = []
    for m, by_q in sorted(ctxs.items()):
        for q, c in list(by_q.items())[:a.limit]:
            if q in items:
                jobs.append((m, items[q], public_view(items[q]), c))
    n_methods_rows = len(jobs)
    for q in sorted({j[1]["question_id"] for j in jobs}):
        it = items[q]
        pv = public_view(it)
        jobs.append(("gold", it, pv, gold_evidence(it, key.get(q, {}))))
        if "filegramos" in ctxs and q in ctxs["filegramos"] and pv["choices"]:
            c = ctxs["filegramos"][q]
            jobs.append(("order", it, _rotated(pv, rotation(len(pv["choices"]), a.seed, q)), c))
            jobs.append(("masked", it, pv, mask_tier_words(c)))
    reader = EncoderBackbone(seed=a.seed, head=a.head)
    reader.answer(jobs[0][2], "warm up the encoder")  # the model load is not a per-item cost
    enc = reader.embedder
    forward = {"s": 0.0, "passages": 0}
    inner = enc._encode_model

    def timed(texts):  # the MiniLM forward passes alone (tokenising included), cache misses only
        t = time.perf_counter()
        try:
            return inner(texts)
        finally:
            forward["s"] += time.perf_counter() - t
            forward["passages"] += len(texts)

    enc._encode_model = timed
    load0 = os.getloadavg()
    times, sizes = [], []
    t_all = time.perf_counter()
    for m, it, pv, c in jobs:
        t0 = time.perf_counter()
        reader.answer(pv, c)
        times.append(time.perf_counter() - t0)
        sizes.append(len(c))
    total = time.perf_counter() - t_all
    load1 = os.getloadavg()
    n_p = [len(passages(c, reader.max_passages)) for _, _, _, c in jobs]
    q95 = sorted(times)[int(0.95 * (len(times) - 1))]
    longest = max(range(len(jobs)), key=lambda i: sizes[i])
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), [])
    print(f"run {a.run_dir}: {n_methods_rows} item × method contexts of {len(ctxs)} methods + "
          f"{len(jobs) - n_methods_rows} validity-row contexts; torch threads {a.threads}")
    print(f"seconds per item × context: mean {statistics.mean(times):.3f}, median {statistics.median(times):.3f}, "
          f"95th percentile {q95:.3f}; the longest context ({sizes[longest]:,} chars, {n_p[longest]} passages): "
          f"{times[longest]:.3f}")
    print(f"passages per context: mean {statistics.mean(n_p):.1f}, max {max(n_p)} (cap {reader.max_passages})")
    print(f"total {total:.1f} s for {len(jobs)} answers ({total / 60:.2f} min); encoder cache hits "
          f"{reader.embedder.hits}, misses {reader.embedder.misses}")
    fwd_ms = 1000 * forward["s"] / max(forward["passages"], 1)
    print(f"MiniLM forward passes: {forward['s']:.1f} s of {total:.1f} ({100 * forward['s'] / total:.0f} %), "
          f"{forward['passages']} passages, {fwd_ms:.1f} ms per passage; torch kernels "
          f"{torch.backends.cpu.get_cpu_capability()} (--isa {a.isa})")
    default_sample = sample_items(list(items.values()), 40, a.seed)
    n_def = len(default_sample)
    n_mc = sum(1 for it in default_sample if it.get("choices"))
    n_ans = n_def * 16 + 2 * n_def + 2 * n_mc  # 16 methods; gold and wrong user; rotated and masked (MC only)
    mean = statistics.mean(times)
    print(f"default sample of this bank: {n_def} items ({n_mc} multiple-choice) → {n_ans} answers "
          f"(16 methods + validity rows); at {mean:.3f} s each {n_ans * mean / 60:.1f} min")
    print(f"load average (1/5/15 min) before {'/'.join(f'{x:.1f}' for x in load0)}, after "
          f"{'/'.join(f'{x:.1f}' for x in load1)}; CPU {os.cpu_count()} cores, avx2 {'avx2' in flags}, "
          f"avx512f {'avx512f' in flags}, amx {'amx_tile' in flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
