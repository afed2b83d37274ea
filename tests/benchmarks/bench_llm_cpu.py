"""Real-LLM evaluation sample on CPU: the evaluate stage answering through ``ray.data.llm`` against a local
llama.cpp server (a packaged GGUF model, nothing downloaded). PRINTS the table with 95% confidence intervals, the
time per item, the load average before and after, and whether FileGramOS ranks where the paper puts it (reference
§8.4); asserts nothing. SIGTERM stops the server it started. Run it on an otherwise idle machine: the time per item
is only meaningful with the load average printed next to it.

Usage:
    python tests/benchmarks/bench_llm_cpu.py --run-dir RUN [--per-sub-task 3] [--model qwen2.5-coder-0.5b]
        [--base-url URL --alias NAME] [--max-context-chars 6000] [--methods M …] [--sub-tracks S …]
        [--ingest-llm] [--report-only]
    python tests/benchmarks/bench_llm_cpu.py --speed --run-dir RUN [--items 10 --contexts 2 --threads 2]

``--speed`` prints, on the same items, contexts, model and server, the reader's cost before (free-text reply, one
user message, contexts interleaved: no prefix reuse) and after issue #30 item 3 (one grammar-held letter, context
first, items of one context back to back: KV prefix reused): seconds and server CPU seconds per item, items per CPU
second, prefill tokens per second, the ratio, the llama.cpp ``system_info`` line and the load average.

RUN must hold ``bench/`` (``python jobs/pipeline.py --only seed generate encode bench``). Without ``--base-url`` the
script starts ``filegram llm serve``'s server on ``--model`` itself (on ``--port``, 8019) and stops it at the end.
The run is resumable: rerun with a larger ``--per-sub-task`` and only the new items are answered (the seeded sample
of N+k items contains the sample of N) — on the same endpoint URL and alias, which key the answers.
``--report-only`` prints the table of the results already in RUN. After the table it prints ``filegram findings
RUN`` (the reader's headroom and F1–F6 with their verdicts and the items each would need).

Confidence intervals: Wilson score interval (95%) for accuracies (multiple-choice cells and Avg); a seeded
bootstrap (2000 resamples) for the mean of the open-ended ProfRec scores. The ProfRec answers are also re-scored with
the rubric judge, as a cross-check of the LLM judge.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MAIN = ["no_context", "full_context", "naive_rag", "eager_summarization", "filegramos"]
PAPER_AVG = {"no_context": 25.4, "full_context": 48.0, "naive_rag": 40.5, "eager_summarization": 49.5,
             "filegramos": 59.6}  # reference §8.4, Table 3
MCQ = ["AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion, in percent."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (100 * (c - h), 100 * (c + h))


def bootstrap(xs: list[float], seed: int = 7, b: int = 2000) -> tuple[float, float]:
    if not xs:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(xs) for _ in xs) / len(xs) for _ in range(b))
    return (means[int(0.025 * b)], means[int(0.975 * b) - 1])


def cell(k: int, n: int) -> str:
    if n == 0:
        return "–"
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.0f} [{lo:.0f}–{hi:.0f}] (n={n})"


def print_table(run_dir: str, seed: int) -> None:
    import polars as pl

    from filegram_ray.evaluate.scoring import RubricJudge, likert_to_100
    from filegram_ray.evaluate.stage import load_answer_key, load_items
    from filegram_ray.storage import RunDir

    run = RunDir(run_dir)
    res = run.read_table("results/results.parquet")
    info = run.read_json("run.json").get("stages", {}).get("evaluate", {}) if run.exists("run.json") else {}
    present = list(dict.fromkeys(res["method"].to_list()))
    methods = [m for m in MAIN if m in present] + [m for m in present if m not in MAIN]  # validity rows last
    subs = [s for s in MCQ if s in set(res["sub_track"].to_list())]
    print("\n| Method | " + " | ".join(subs) + " | ProfRec (LLM judge) | ProfRec (rubric) | Avg (MCQ) | errors |")
    print("|---|" + "---|" * (len(subs) + 4))
    items = {it["question_id"]: it for it in load_items(run)}
    key = load_answer_key(run)
    rubric = RubricJudge()
    avgs = {}
    for m in methods:
        df = res.filter(pl.col("method") == m)
        cells = []
        for s in subs:
            d = df.filter((pl.col("sub_track") == s) & ~pl.col("is_open"))
            cells.append(cell(int((d["score"] == 100.0).sum()), d.height))
        pr = df.filter(pl.col("sub_track") == "ProfRec")
        llm = [x for x in pr["score"].to_list() if x is not None]
        lo, hi = bootstrap(llm, seed)
        llm_cell = f"{sum(llm) / len(llm):.0f} [{lo:.0f}–{hi:.0f}] (n={len(llm)})" if llm else "–"
        rub = []
        for r in pr.iter_rows(named=True):
            if r["status"] == "ok":
                k = key[r["question_id"]]
                rub.append(likert_to_100(rubric.judge(items[r["question_id"]], str(k.get("correct_text") or
                                                                                   k.get("correct")),
                                                      r["answer_text"])))
        rub = [x for x in rub if x is not None]
        rub_cell = f"{sum(rub) / len(rub):.0f} (n={len(rub)})" if rub else "–"
        mc = df.filter(~pl.col("is_open"))
        k_ok = int((mc["score"] == 100.0).sum())
        avgs[m] = 100 * k_ok / mc.height if mc.height else float("nan")
        n_err = df.filter(pl.col("status") != "ok").height
        print(f"| {m} | " + " | ".join(cells) + f" | {llm_cell} | {rub_cell} | {cell(k_ok, mc.height)} | {n_err} |")
    mc = res.filter((pl.col("method") == "random") & ~pl.col("is_open"))
    if mc.height:
        chance = float((100.0 / mc["n_choices"].cast(pl.Float64)).mean())
        print(f"\nchance level of these multiple-choice items: {chance:.1f}")
    ans = info.get("answering") or {}
    if ans.get("n_requests"):
        print(f"answering: {ans['n_requests']} prompts in {ans['answer_s']:.0f} s = "
              f"{ans['answer_s'] / ans['n_requests']:.1f} s per item this run (prompts built in "
              f"{ans['prompt_s']:.0f} s; {ans.get('n_context_cut', 0)} contexts cut); judging {info.get('judge_s')} s")
    for r in info.get("judge_validity") or []:
        print(f"judge validity {r['case']}: mean {r['mean']} over {r['n']} (ok={r['ok']})")
    from filegram_ray.evaluate.report import VALIDITY_METHODS

    avgs = {m: v for m, v in avgs.items() if m not in VALIDITY_METHODS}  # validity rows are never methods
    order = sorted(avgs, key=lambda m: -avgs[m])
    paper = sorted(PAPER_AVG, key=lambda m: -PAPER_AVG[m])
    print("rank by Avg here :", " > ".join(f"{m} {avgs[m]:.0f}" for m in order))
    print("rank in the paper:", " > ".join(f"{m} {PAPER_AVG[m]}" for m in paper))
    if "filegramos" in avgs:
        best_other = max((v for m, v in avgs.items() if m != "filegramos"), default=float("nan"))
        print(f"FileGramOS first here: {order[0] == 'filegramos'} (its Avg {avgs['filegramos']:.0f} vs best other "
              f"{best_other:.0f}; overlapping intervals mean the sample cannot rank them)")


def print_findings(run_dir: str) -> None:
    """The reader's headroom and the paper's findings F1–F6 on the run's results (``filegram findings``, run in
    this process)."""
    from filegram_ray.cli import main as filegram

    filegram(["findings", run_dir])


# ---------------------------------------------------------------------------------------------------------------
# --speed: the reader's cost before and after issue #30 item 3, on the same items, contexts, model and server
# ---------------------------------------------------------------------------------------------------------------

_PERF = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _speed_context(rng: random.Random, n_chars: int, who: int) -> str:
    """A seeded memory context of file-event lines (the shape of Full Context's text), ``n_chars`` long."""
    verbs = ["Read file", "Edit file", "Create file", "Rename", "Move", "Copy", "Create directory", "Delete"]
    exts = ["md", "docx", "xlsx", "csv", "pdf", "py", "txt", "pptx"]
    lines, i = [], 0
    while sum(len(x) + 1 for x in lines) < n_chars:
        i += 1
        d = rng.choice(["reports", "notes", "data", "drafts", "archive", "inbox"])
        f = f"{d}/{rng.choice(['plan', 'review', 'summary', 'budget', 'log', 'ideas'])}_{rng.randint(1, 40)}"
        lines.append(f"{i}. [user {who}] {rng.choice(verbs)}: {f}.{rng.choice(exts)} "
                     f"({rng.randint(1, 90)} lines, depth={f.count('/') + rng.randint(0, 2)})")
    return "\n".join(lines)[:n_chars]


def speed_compare(args) -> int:
    """Answer the same items twice on one llama.cpp server and print the two costs side by side.

    before = today's layout (until issue #30 item 3): one user message holding context + question, contexts
    interleaved in the order the items come (no prefix reuse), a free-text reply (``max_tokens`` 16) read by
    ``parse_choice``. after = context-first messages (:func:`~filegram_ray.evaluate.answer.context_first`),
    requests grouped by context (:func:`~filegram_ray.evaluate.answer.order_by_context`), one letter held by the
    llama.cpp grammar (``max_tokens`` 1). Cost = the server process's CPU seconds (``/proc``) and wall seconds;
    prompt tokens evaluated / prompt eval time from llama.cpp's own perf lines in the server log.
    """
    import httpx

    from filegram_ray.evaluate.answer import context_first, order_by_context
    from filegram_ray.evaluate.stage import load_items, public_view
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt
    from filegram_ray.llm.parsing import LETTERS, parse_choice
    from filegram_ray.llm.replies import constraint_fields
    from filegram_ray.llm.server import LlamaCppServer, system_info_features
    from filegram_ray.storage import RunDir

    rng = random.Random(args.seed)
    mcq = [it for it in load_items(RunDir(args.run_dir)) if it.get("choices") and it.get("setting") == "text"]
    if len(mcq) < args.items * args.contexts:
        raise SystemExit(f"{args.run_dir}: {len(mcq)} multiple-choice text items, need "
                         f"{args.items * args.contexts} (--items × --contexts)")
    picked = rng.sample(mcq, args.items * args.contexts)
    contexts = [_speed_context(rng, args.max_context_chars, c + 1) for c in range(args.contexts)]
    # item k of the sample goes with context k % contexts: the order items come in interleaves contexts
    items = [(public_view(it), contexts[k % args.contexts]) for k, it in enumerate(picked)]
    before = [{"key": it["question_id"], "n": len(it["choices"]), "choices": list(it["choices"].values()),
               "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user", "content": mcq_prompt(it, ctx)}], "extra": {}, "max_tokens": 16}
              for it, ctx in items]
    after = order_by_context([{"key": it["question_id"], "n": len(it["choices"]),
                               "choices": list(it["choices"].values()),
                               "messages": context_first(SYSTEM_PROMPT, mcq_prompt(it, ctx, letter_only=True)),
                               "extra": constraint_fields("grammar", LETTERS[:len(it["choices"])]),
                               "max_tokens": 1} for it, ctx in items])
    srv = LlamaCppServer(args.model, n_ctx=args.n_ctx, n_threads=args.threads, alias="local",
                         cache_dir=args.cache_dir, run_dir=args.run_dir, startup_timeout=600).start()
    out: dict[str, dict] = {}
    try:
        print(f"model {args.model}, {args.threads} threads, {len(items)} items = {args.items} × {args.contexts} "
              f"contexts of {args.max_context_chars} chars")
        print(f"llama.cpp system_info: {srv.system_info}")
        print(f"build features: {system_info_features(srv.system_info)}")
        with httpx.Client(timeout=3600) as client:
            for name, reqs in (("before", before), ("after", after)):
                client.post(srv.base_url + "/chat/completions", json={  # the same warm-up for both
                    "model": "local", "messages": [{"role": "user", "content": "Say A."}], "max_tokens": 1})
                log0 = Path(srv.log_path).stat().st_size
                cpu0, t0, load0 = _cpu_s(srv.proc.pid), time.perf_counter(), os.getloadavg()[0]
                answers, ptoks = {}, 0
                for r in reqs:
                    body = {"model": "local", "messages": r["messages"], "temperature": 0.0,
                            "max_tokens": r["max_tokens"], **r["extra"]}
                    js = client.post(srv.base_url + "/chat/completions", json=body).json()
                    text = js["choices"][0]["message"]["content"] or ""
                    ptoks += int(js["usage"]["prompt_tokens"])
                    letter = (text.strip() if r["extra"] else parse_choice(text, r["n"], r["choices"]))
                    answers[r["key"]] = letter if letter in LETTERS[:r["n"]] else None
                wall, cpu = time.perf_counter() - t0, _cpu_s(srv.proc.pid) - cpu0
                with open(srv.log_path, "rb") as f:
                    f.seek(log0)
                    perf = [(float(a), int(b)) for a, b in _PERF.findall(f.read().decode("utf-8", "replace"))]
                ev_ms, ev_tok = sum(a for a, _ in perf), sum(b for _, b in perf)
                out[name] = {"wall": wall, "cpu": cpu, "ptoks": ptoks, "ev_tok": ev_tok, "ev_s": ev_ms / 1000,
                             "answers": answers, "load": (load0, os.getloadavg()[0])}
    finally:
        srv.stop()
    n = len(items)
    print("\n| | before (free text, interleaved, no reuse) | after (letter, context first, grouped) | ratio |")
    print("|---|---|---|---|")
    b, a = out["before"], out["after"]
    rows = [("seconds per item (wall)", b["wall"] / n, a["wall"] / n, b["wall"] / a["wall"]),
            ("server CPU seconds per item", b["cpu"] / n, a["cpu"] / n, b["cpu"] / a["cpu"]),
            ("items per server CPU second", n / b["cpu"], n / a["cpu"], b["cpu"] / a["cpu"]),
            ("prompt tokens per item (counted)", b["ptoks"] / n, a["ptoks"] / n, b["ptoks"] / a["ptoks"]),
            ("prompt tokens evaluated per item", b["ev_tok"] / n, a["ev_tok"] / n,
             b["ev_tok"] / max(1, a["ev_tok"])),
            ("prefill tokens/s (evaluated / prompt eval time)", b["ev_tok"] / max(1e-9, b["ev_s"]),
             a["ev_tok"] / max(1e-9, a["ev_s"]), float("nan")),
            ("prefill tokens/s (counted / wall)", b["ptoks"] / b["wall"], a["ptoks"] / a["wall"],
             a["wall"] and (a["ptoks"] / a["wall"]) / (b["ptoks"] / b["wall"]))]
    for label, x, y, r in rows:
        print(f"| {label} | {x:.2f} | {y:.2f} | {r:.2f}× |")
    agree = sum(b["answers"][k] == a["answers"][k] for k in a["answers"])
    unparsed = sum(v is None for v in b["answers"].values())
    print(f"\nanswers: {agree}/{n} items the same letter before and after; before {unparsed} unparseable, after "
          f"{sum(v is None for v in a['answers'].values())} not a letter")
    print(f"load average (1 min) before/after each phase: before {b['load'][0]:.1f}/{b['load'][1]:.1f}, after "
          f"{a['load'][0]:.1f}/{a['load'][1]:.1f}; cores {os.cpu_count()}")
    print(f"speed-up (wall): {b['wall'] / a['wall']:.1f}×; today's published figure was 18.9 s per item "
          f"(docs/llm-evaluation.md), after here {a['wall'] / n:.2f} s per item = "
          f"{18.9 / (a['wall'] / n):.1f}× faster than 18.9 s")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--per-sub-task", type=int, default=3)
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="packaged model (filegram llm models)")
    p.add_argument("--base-url", default=None, help="use a running server instead of starting one")
    p.add_argument("--alias", default="local")
    p.add_argument("--port", type=int, default=8019,
                   help="the started server's port: answers are kept per endpoint URL (port included), so a rerun "
                        "resumes only on the same port")
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--max-context-chars", type=int, default=6000)
    p.add_argument("--methods", nargs="+", default=MAIN)
    p.add_argument("--sub-tracks", nargs="+", default=None,
                   help="only these sub-tasks (e.g. AnomDet TraceDis for findings F2 and F3); default all")
    p.add_argument("--ingest-llm", action="store_true",
                   help="let the methods call the model at ingest (summaries, fact extraction); default off")
    p.add_argument("--judge", default="auto", help="auto (the LLM) | llm | rubric")
    p.add_argument("--cache-dir", default=None, help="where the split model is assembled")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--speed", action="store_true",
                   help="print the reader's cost before/after issue #30 item 3 on the same items (no evaluate run)")
    p.add_argument("--items", type=int, default=10, help="--speed: items per context")
    p.add_argument("--contexts", type=int, default=2, help="--speed: distinct contexts")
    p.add_argument("--threads", type=int, default=2, help="--speed: llama.cpp threads")
    args = p.parse_args()
    if args.speed:
        return speed_compare(args)
    if not args.report_only:
        from filegram_ray.config import load_config
        from filegram_ray.evaluate.stage import run_evaluate
        from filegram_ray.llm.server import LlamaCppServer

        def _terminate(signum, frame):  # SIGTERM (kill, timeout): leave through `finally`, which stops the server
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _terminate)
        srv = None
        base_url = args.base_url
        if base_url is None:
            srv = LlamaCppServer(args.model, port=args.port, n_ctx=args.n_ctx, alias=args.alias,
                                 cache_dir=args.cache_dir, run_dir=args.run_dir, startup_timeout=600).start()
            base_url = srv.base_url
        try:
            cfg = load_config(overrides={"run_dir": args.run_dir, "seed": args.seed, "evaluate": {
                "methods": args.methods, "settings": ["text"], "sample_per_sub_task": args.per_sub_task,
                "sub_tracks": args.sub_tracks, "judge": args.judge, "ingest_llm": bool(args.ingest_llm),
                "max_context_chars": args.max_context_chars, "num_actors": 1, "plots": False,
                "backbone": {"kind": "openai", "base_url": base_url, "model": args.alias, "max_tokens": 16,
                             "max_tokens_open": 96, "batch_size": 4, "timeout": 3600, "max_retries": 1}}})
            load0 = os.getloadavg()
            info = run_evaluate(cfg)
            print(f"evaluate: {info['n_items']} items × {len(info['methods'])} methods, {info['seconds']} s; "
                  f"load average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in load0)} before, "
                  f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} after")
        finally:
            if srv is not None:
                srv.stop()
    print_table(args.run_dir, args.seed)
    print_findings(args.run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
