"""Cross-check of the encoder reader with a language model: the same items, the same contexts, two readers.

On a stratified sample of multiple-choice items (``--per-sub-task`` per sub-task, text setting) × the contexts of
No Context, Naive RAG and FileGramOS (read back from an evaluate run's ``results/contexts/``) plus gold evidence,
every context cut to one budget (``--budget-chars``, 6,000 characters ≈ 1,500 tokens by the project's ``len // 4``
rule), it asks

* the language model — Qwen2.5-Coder-1.5B-Instruct Q4_K_M (``requirements/models-llm-1.5b.txt``) on a llama.cpp
  server this script starts, the reply held to one option letter by a grammar (``constrain: grammar``), the
  evaluate stage's own prompt (:func:`~filegram_ray.llm.backbones.mcq_prompt`, system prompt, context first);
* the encoder reader (``evaluate.backbone: encoder``, with ``--head`` if given), on the same cut contexts;

and PRINTS (and with ``--write`` writes to ``docs/measurements/<date>-reader-crosscheck.md``): per-item agreement of the two
readers per context (the share, Cohen's κ, and every item's letters), each reader's accuracy per context with 95 % intervals (bootstrap over profiles),
each reader's gold-evidence headroom on these items, and each reader's difference to No Context (Naive RAG,
FileGramOS) with its paired 95 % interval. Asserts nothing.

Resumable: every answer is appended to ``--cache`` (JSON lines keyed by reader, item, context and the prompt's
sha256) as soon as it comes; a rerun asks only what is missing. The cheap contexts (No Context, gold) go first,
then the long ones item by item, the sub-tasks taking turns (a stopped run leaves every sub-task partly done). About 1.5 h of two cores for 84 items.

Usage:
    python tests/benchmarks/bench_reader_crosscheck.py --run-dir RUN [--contexts-tag TAG] [--per-sub-task 12]
        [--budget-chars 6000] [--head PATH] [--cache FILE] [--report-only] [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_reader_candidates import MCQ, load_contexts  # noqa: E402

METHODS = ["no_context", "naive_rag", "filegramos"]
CONTEXTS = ["no_context", "gold", "naive_rag", "filegramos"]
NAMES = {"no_context": "No Context", "gold": "Gold evidence", "naive_rag": "Naive RAG", "filegramos": "FileGramOS"}


def cut(text: str, budget: int) -> str:
    """The evaluate stage's cut (:class:`~filegram_ray.evaluate.answer.PromptBuilder`): first ``budget`` characters
    and a marker."""
    return text[:budget] + "\n[… context cut to fit the model]" if len(text) > budget else text


def _by_sub(items: list[dict]) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for it in items:
        by.setdefault(it["sub_track"], []).append(it)
    return by


def sample(items: list[dict], per_sub: int, seed: int) -> list[dict]:
    by = _by_sub(items)
    out = []
    for sub in MCQ:
        grp = sorted(by.get(sub, []), key=lambda x: x["question_id"])
        out += random.Random(f"{seed}:crosscheck:{sub}").sample(grp, min(per_sub, len(grp)))
    return out


def boot(values: list[float], profiles: list[str], seed: int = 7, b: int = 2000) -> tuple[float, float, float]:
    """Mean and 95 % percentile interval of a bootstrap over profiles (points)."""
    from filegram_ray.stats import bootstrap_ci

    return bootstrap_ci(values, profiles, n_boot=b, seed=seed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--contexts-tag", default="lexical")
    ap.add_argument("--per-sub-task", type=int, default=12)
    ap.add_argument("--budget-chars", type=int, default=6000)
    ap.add_argument("--head", default=None)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--port", type=int, default=8023)
    ap.add_argument("--cache", default=None, help="answers (JSON lines); default RUN/crosscheck_answers.jsonl")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--write", action="store_true", help="write docs/measurements/<date>-reader-crosscheck.md")
    a = ap.parse_args(argv)

    from filegram_ray.evaluate.items import load_answer_key, load_items, public_view
    from filegram_ray.evaluate.reader_validity import gold_evidence
    from filegram_ray.llm.encoder_reader import EncoderBackbone
    from filegram_ray.storage import RunDir

    run = RunDir(a.run_dir)
    key = load_answer_key(run)
    ctxs = load_contexts(run, a.contexts_tag)
    missing = [m for m in METHODS if m not in ctxs]
    if missing:
        raise SystemExit(f"{a.run_dir}: results/contexts/{a.contexts_tag}/ lacks {missing}; evaluate those first")
    have = set.intersection(*(set(ctxs[m]) for m in METHODS))
    items = [it for it in load_items(run) if it["choices"] and it["sub_track"] in MCQ
             and it.get("setting", "text") == "text" and it["question_id"] in have]
    items = sample(items, a.per_sub_task, a.seed)
    text = {}
    for it in items:
        q = it["question_id"]
        text[(q, "gold")] = gold_evidence(it, key[q])
        for m in METHODS:
            text[(q, m)] = cut(ctxs[m][q], a.budget_chars)
    cache = Path(a.cache or Path(a.run_dir) / "crosscheck_answers.jsonl")
    done: dict[tuple[str, str, str], dict] = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            r = json.loads(line)
            done[(r["reader"], r["qid"], r["context"])] = r
    enc = EncoderBackbone(seed=a.seed, head=a.head)
    enc_name = "encoder" + ("+head" if a.head else "")
    print(f"{len(items)} items × {len(CONTEXTS)} contexts, budget {a.budget_chars} chars "
          f"(≈{a.budget_chars // 4} tokens); cache {cache}; load average {os.getloadavg()[0]:.1f}", flush=True)

    def record(r: dict) -> None:
        done[(r["reader"], r["qid"], r["context"])] = r
        with cache.open("a") as fh:
            fh.write(json.dumps(r) + "\n")

    def sha(pv, c) -> str:
        from filegram_ray.evaluate.worker import prompt_sha

        return prompt_sha(pv, c)

    # the long contexts item by item, the sub-tasks taking turns: a run stopped half-way leaves a stratified half
    rank = {it["question_id"]: i for grp in _by_sub(items).values() for i, it in enumerate(grp)}
    turns = sorted(items, key=lambda it: (rank[it["question_id"]], MCQ.index(it["sub_track"])))
    order = [(it, c) for c in ("no_context", "gold") for it in items] + \
        [(it, c) for it in turns for c in ("filegramos", "naive_rag")]
    for it, c in order:  # the encoder first: seconds for all
        pv = public_view(it)
        k = (enc_name, it["question_id"], c)
        if k not in done or done[k]["sha"] != sha(pv, text[(it["question_id"], c)]):
            t0 = time.perf_counter()
            ans = enc.answer(pv, text[(it["question_id"], c)])
            record({"reader": enc_name, "qid": it["question_id"], "context": c, "choice": ans.choice or "",
                    "sha": sha(pv, text[(it["question_id"], c)]), "s": round(time.perf_counter() - t0, 4)})
    if not a.report_only:
        from filegram_ray.llm.backbones import OpenAIBackbone
        from filegram_ray.llm.server import LlamaCppServer

        def _terminate(signum, frame):
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _terminate)
        todo = [(it, c) for it, c in order if ("llm", it["question_id"], c) not in done]
        print(f"language model: {len(todo)} answers to ask", flush=True)
        if todo:
            srv = LlamaCppServer(a.model, port=a.port, n_ctx=4096, alias="reader", run_dir=a.run_dir,
                                 startup_timeout=900).start()
            try:
                llm = OpenAIBackbone(srv.base_url, "reader", timeout=3600, retries=1, max_tokens=2,
                                     constrain="grammar")
                for i, (it, c) in enumerate(todo):
                    pv = public_view(it)
                    t0 = time.perf_counter()
                    try:
                        ans = llm.answer(pv, text[(it["question_id"], c)])
                        choice, err = ans.choice or "", ""
                    except RuntimeError as exc:
                        choice, err = "", str(exc)[:300]
                    record({"reader": "llm", "qid": it["question_id"], "context": c, "choice": choice,
                            "error": err, "sha": sha(pv, text[(it["question_id"], c)]),
                            "s": round(time.perf_counter() - t0, 2)})
                    print(f"[llm] {i + 1}/{len(todo)} {it['question_id']} {c}: {choice or err[:60]} "
                          f"({time.perf_counter() - t0:.1f} s, load {os.getloadavg()[0]:.1f})", flush=True)
            finally:
                srv.stop()
    report = make_report(items, key, done, enc_name, a)
    print(report)
    if a.write:
        out = Path(__file__).resolve().parents[2] / "docs" / "measurements" / \
            f"{dt.date.today().isoformat()}-reader-crosscheck.md"
        out.write_text(report)
        print(f"wrote {out}")
    return 0


def make_report(items, key, done, enc_name: str, a) -> str:
    from sklearn.metrics import cohen_kappa_score

    from filegram_ray.evaluate.items import item_profile

    readers = [("llm", f"Qwen2.5-Coder-1.5B ({a.model}, grammar-held letter)"), (enc_name, f"encoder reader ({enc_name})")]
    correct = {it["question_id"]: str(key[it["question_id"]]["correct"]).strip().upper() for it in items}
    prof = {it["question_id"]: item_profile(it) for it in items}
    lines = [f"# Encoder reader vs language model on the same contexts ({dt.date.today().isoformat()})", "",
             f"Run `RUN` (the `--run-dir`; contexts of `results/contexts/{a.contexts_tag}/`), {len(items)} multiple-choice "
             f"text items ({a.per_sub_task} per sub-task, seeded), each context cut to {a.budget_chars:,} characters "
             f"(≈{a.budget_chars // 4:,} tokens by `len // 4`) for both readers. Written by "
             "`tests/benchmarks/bench_reader_crosscheck.py`.", ""]
    # completeness
    n_llm = sum(1 for it in items for c in CONTEXTS if ("llm", it["question_id"], c) in done)
    lines += [f"Language-model answers in: {n_llm} of {len(items) * len(CONTEXTS)}.", ""]
    lines += ["## Accuracy (%, 95 % interval, bootstrap over profiles)", "",
              "| context | " + " | ".join(n for _, n in readers) + " | agreement (same letter) | Cohen's κ | items |",
              "|---|---|---|---|---|---|"]
    acc: dict[tuple[str, str], dict[str, int]] = {}
    for c in CONTEXTS:
        qs = [it["question_id"] for it in items if all((r, it["question_id"], c) in done for r, _ in readers)]
        cells = []
        for r, _ in readers:
            v = {q: int(done[(r, q, c)]["choice"] == correct[q]) for q in qs}
            acc[(r, c)] = v
            if qs:
                m, lo, hi = boot([100.0 * v[q] for q in qs], [prof[q] for q in qs], seed=a.seed)
                cells.append(f"{m:.1f} [{lo:.1f}, {hi:.1f}]")
            else:
                cells.append("–")
        agree = sum(done[("llm", q, c)]["choice"] == done[(enc_name, q, c)]["choice"] for q in qs)
        kappa = (cohen_kappa_score([done[("llm", q, c)]["choice"] for q in qs],
                                   [done[(enc_name, q, c)]["choice"] for q in qs]) if len(qs) > 1 else float("nan"))
        lines.append(f"| {NAMES[c]} | " + " | ".join(cells) + f" | {100 * agree / max(1, len(qs)):.1f} % | "
                     f"{kappa:+.2f} | {len(qs)} |")
    lines += ["", "## Gold-evidence headroom and differences to No Context (points, paired, 95 % interval)", "",
              "| reader | gold − No Context | Naive RAG − No Context | FileGramOS − No Context |", "|---|---|---|---|"]
    for r, name in readers:
        cells = []
        for c in ("gold", "naive_rag", "filegramos"):
            qs = sorted(set(acc.get((r, c), {})) & set(acc.get((r, "no_context"), {})))
            if not qs:
                cells.append("–")
                continue
            d = [100.0 * (acc[(r, c)][q] - acc[(r, "no_context")][q]) for q in qs]
            m, lo, hi = boot(d, [prof[q] for q in qs], seed=a.seed)
            cells.append(f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}] (n={len(qs)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Per sub-task accuracy (language model / encoder reader)", "",
              "| sub-task | " + " | ".join(NAMES[c] for c in CONTEXTS) + " |", "|---|" + "---|" * len(CONTEXTS)]
    for sub in MCQ:
        qs = [it["question_id"] for it in items if it["sub_track"] == sub]
        if not qs:
            continue
        cells = []
        for c in CONTEXTS:
            parts = []
            for r, _ in readers:
                v = [acc.get((r, c), {}).get(q) for q in qs]
                v = [x for x in v if x is not None]
                parts.append(f"{100 * sum(v) / len(v):.0f}" if v else "–")
            cells.append(" / ".join(parts))
        lines.append(f"| {sub} (n={len(qs)}) | " + " | ".join(cells) + " |")
    lines += ["", "## Per item (the key; each context's letter from the language model / the encoder reader)", "",
              "`=` marks a context where the two readers picked the same letter, `–` an answer not in yet.", "",
              "| item | sub-task | key | " + " | ".join(NAMES[c] for c in CONTEXTS) + " |",
              "|---|---|---|" + "---|" * len(CONTEXTS)]
    for it in sorted(items, key=lambda it: (MCQ.index(it["sub_track"]) if it["sub_track"] in MCQ else 99,
                                            it["question_id"])):
        q, cells = it["question_id"], []
        for c in CONTEXTS:
            lm, en = (done.get((r, q, c), {}).get("choice") or "–" for r in ("llm", enc_name))
            cells.append(f"{lm} / {en}" + (" =" if lm == en != "–" else ""))
        lines.append(f"| {q} | {it['sub_track']} | {correct[q]} | " + " | ".join(cells) + " |")
    secs = [done[k]["s"] for k in done if k[0] == "llm" and "s" in done[k]]
    esecs = [done[k]["s"] for k in done if k[0] == enc_name and "s" in done[k]]
    lines += ["", f"Seconds per answer: language model {sum(secs) / max(1, len(secs)):.1f} (n={len(secs)}), encoder "
              f"reader {sum(esecs) / max(1, len(esecs)):.3f} (n={len(esecs)}); the machine was shared "
              f"(load average {os.getloadavg()[0]:.1f} when this was written). CPU: "
              f"{_cpu()}.", ""]
    return "\n".join(lines)


def _cpu() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
        model = next(ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name"))
        flags = next(ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags"))
        return f"{model}, {os.cpu_count()} cores, " + ", ".join(f for f in ("avx2", "avx512f", "amx_tile") if f in flags)
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
