"""GPU benchmark: LLM-agent trajectories generated against a vLLM server; prints trajectories/s and tool calls/s.

Needs one or more CUDA GPUs, ``pip install vllm`` (its CUDA torch replaces the CPU one: use a separate environment
or the cluster's GPU image) and a chat model with tool calling in Hugging Face layout on local disk or a mounted
volume (nothing is downloaded: ``HF_HUB_OFFLINE=1``). PRINTS figures; asserts nothing; never part of the test suite.

Usage:
    python tests/benchmarks/gpu_llm_agent_vllm.py --model /models/Qwen2.5-7B-Instruct \\
        [--profiles p1 p3 p8 p17] [--tasks T-03 T-04 T-05 T-09] [--sessions 64] [--actors 1] \\
        [--max-iterations 30] [--max-tokens 1024] [--max-model-len 32768] [--tp 1] [--out /tmp/gpu_llm_agent]
    python tests/benchmarks/gpu_llm_agent_vllm.py --base-url http://gpu-node:8000/v1 ...   # an existing server

What it runs:

1. unless ``--base-url``: ``python -m vllm.entrypoints.openai.api_server --model M --served-model-name agent
   --enable-auto-tool-choice --tool-call-parser hermes --max-model-len L --tensor-parallel-size TP`` as a child
   process (:class:`filegram_ray.engine.agents.serve.ManagedServer`), waiting until it lists its model;
2. the generate stage with ``generate.agent=llm`` on PROFILES × TASKS (no perturbation), ``--actors`` generate
   actors (``--actors 1`` = serial, in this process, no Ray) with ``--sessions`` trajectories in flight each, so the
   server's continuous batching sees up to actors × sessions concurrent requests;
3. prints: trajectories, wall seconds of the stage (server start-up excluded), trajectories/s, tool calls/s,
   prompt and completion tokens/s, iterations per trajectory, stop reasons, and the share of trajectories that are
   valid (events pass the schema, events.json is the filter of events_raw.json, the Engram encodes).

Workspace bundles are built on the fly with the fast synthetic speech (``workspace.tts=tone``); run the seed stage
into ``--out`` first to time generation only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="local model directory served by vLLM")
    ap.add_argument("--base-url", help="use a running OpenAI-compatible server instead of starting vLLM")
    ap.add_argument("--served-name", default="agent")
    ap.add_argument("--profiles", nargs="+", default=["p1", "p3", "p8", "p17"])
    ap.add_argument("--tasks", nargs="+", default=["T-03", "T-04", "T-05", "T-09"])
    ap.add_argument("--sessions", type=int, default=64, help="trajectories in flight per generate actor")
    ap.add_argument("--actors", type=int, default=1, help="generate actors (1 = serial, no Ray)")
    ap.add_argument("--max-iterations", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    ap.add_argument("--tool-parser", default="hermes", help="vLLM --tool-call-parser (hermes fits Qwen2.5)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="/tmp/gpu_llm_agent")
    args = ap.parse_args(argv)
    if not args.model and not args.base_url:
        ap.error("give --model (a local model directory) or --base-url")

    from filegram_ray.config import load_config
    from filegram_ray.engine.agents.llm_agent import ServeConfig
    from filegram_ray.engine.agents.serve import ManagedServer
    from filegram_ray.engine.filter import filter_events
    from filegram_ray.engine.generate import run_generate
    from filegram_ray.memory.engram import encode_engram
    from filegram_ray.schema.events import parse_event

    server = None
    base_url, served = args.base_url, args.served_name
    if not base_url:
        spec = ServeConfig(kind="vllm", model=args.model, served_model_name=served, tool_parser=args.tool_parser,
                           args=["--max-model-len", str(args.max_model_len), "--tensor-parallel-size",
                                 str(args.tp)])
        t0 = time.perf_counter()
        server = ManagedServer(spec, local=True)
        base_url = server.start()
        print(f"vLLM server up in {time.perf_counter() - t0:.0f}s at {base_url}", flush=True)
    run_dir = Path(args.out)
    try:
        over = [f"run_dir={run_dir}", f"seed={args.seed}", f"profiles=[{','.join(args.profiles)}]",
                f"tasks=[{','.join(args.tasks)}]", "generate.perturb=false", "generate.force=true",
                "workspace.tts=tone", "generate.agent=llm", f"generate.llm.base_url={base_url}",
                f"generate.llm.model={served}" if not args.base_url else "generate.llm.model=null",
                f"generate.llm.sessions_per_actor={args.sessions}",
                f"generate.llm.max_iterations={args.max_iterations}", f"generate.llm.max_tokens={args.max_tokens}",
                f"generate.llm.temperature={args.temperature}",
                f"generate.llm.context_tokens={args.max_model_len}", f"generate.num_actors={args.actors}",
                "generate.num_cpus_per_actor=1"]
        if args.actors <= 1:
            over.append("generate.executor=serial")
        t0 = time.perf_counter()
        rec = run_generate(load_config(None, over))
        wall = time.perf_counter() - t0
    finally:
        if server is not None:
            server.stop()
    trs, n_valid, n_calls = [], 0, 0
    for d in sorted((run_dir / "trajectories").glob("*/*")):
        if not (d / "transcript.json").exists():
            continue
        tr = json.loads((d / "transcript.json").read_text(encoding="utf-8"))
        trs.append(tr)
        raw = json.loads((d / "events_raw.json").read_text(encoding="utf-8"))
        n_calls += sum(1 for e in raw if e["event_type"] == "tool_call")
        try:
            for i, e in enumerate(raw):
                parse_event(e, i)
            kept = json.loads((d / "events.json").read_text(encoding="utf-8"))
            assert kept == filter_events(raw)
            encode_engram(kept, tr["trajectory_id"], d.name, d / "media")
            n_valid += 1
        except Exception as exc:  # noqa: BLE001 - counted, reported
            print(f"invalid {d}: {exc}")
    n = len(trs)
    tin = sum(t["prompt_tokens"] for t in trs)
    tout = sum(t["completion_tokens"] for t in trs)
    print(f"\ntrajectories          {n} (ok {rec['ok']}, error {rec['error']}), valid {n_valid}")
    print(f"wall (stage)          {wall:.1f} s with {args.actors} actor(s) x {args.sessions} sessions in flight")
    print(f"trajectories/s        {n / wall:.3f}")
    print(f"tool calls/s          {n_calls / wall:.2f}   ({n_calls / max(1, n):.1f} per trajectory)")
    print(f"prompt tokens/s       {tin / wall:.0f}")
    print(f"completion tokens/s   {tout / wall:.0f}")
    print(f"iterations/trajectory {sum(t['iterations'] for t in trs) / max(1, n):.1f}")
    print(f"stop reasons          {dict(Counter(t['stop_reason'] for t in trs))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
