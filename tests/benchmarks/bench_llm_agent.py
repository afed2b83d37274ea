"""Benchmark: the LLM agent on the CPU llama.cpp server next to the persona simulator, same (profile, task) pairs.

For each model (packaged Qwen2.5-Coder GGUFs, assembled from PyPI part packages, nothing downloaded) it starts
llama-cpp-python's server, runs the generate stage with ``generate.agent=llm`` on PROFILES × TASKS, runs the
simulator on the same pairs, and prints one markdown table: per trajectory whether it is valid (every raw event
passes the event schema, ``events.json`` is the filter of the raw events, the Engram encodes), its stop reason,
iterations, tool calls (ok / failed / malformed), seconds per trajectory, and the 17-D fingerprint (reference §7.3)
of the LLM trajectory beside the simulator's, with the load average at start and end. PRINTS figures (also
written to ``OUT/table.md``); asserts nothing; never part of the test suite.

Usage:
    python tests/benchmarks/bench_llm_agent.py [--models qwen2.5-coder-0.5b qwen2.5-coder-1.5b]
        [--profiles p3 p1] [--tasks T-03 T-04 T-09 T-05] [--max-iterations 10] [--max-tokens 384]
        [--chat-format jinja|chatml-function-calling] [--out /tmp/bench_llm_agent]

llama-cpp-python's server answers one request at a time, so the trajectories run one after another here
(``sessions_per_actor=1``); on a GPU, ``tests/benchmarks/gpu_llm_agent_vllm.py`` measures the batched throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SHORT = ("A.search", "A.browse", "A.revisit", "B.avg_len", "B.files", "B.chars", "C.dirs", "C.depth", "C.moved",
         "D.edits", "D.avg_lines", "D.small", "E.deletes", "E.del/create", "F.structured", "F.table_rows",
         "F.images")


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 or x == int(x) else f"{x:.2f}"


def check_trajectory(d: Path, tid: str, task: str) -> tuple[bool, list[float], str]:
    """(valid, fingerprint, problem) of one trajectory folder."""
    from filegram_ray.engine.filter import filter_events
    from filegram_ray.memory.engram import encode_engram
    from filegram_ray.schema.events import parse_event

    try:
        raw = json.loads((d / "events_raw.json").read_text(encoding="utf-8"))
        for i, e in enumerate(raw):
            parse_event(e, i)
        kept = json.loads((d / "events.json").read_text(encoding="utf-8"))
        if kept != filter_events(raw):
            return False, [], "events.json is not the filter of events_raw.json"
        eg = encode_engram(kept, tid, task, d / "media")
        return True, list(eg.fingerprint), ""
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return False, [], f"{type(exc).__name__}: {exc}"[:120]


def run_simulator(run_dir: Path, profiles, tasks, seed: int) -> None:
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate

    cfg = load_config(None, [f"run_dir={run_dir}", f"seed={seed}", f"profiles=[{','.join(profiles)}]",
                             f"tasks=[{','.join(tasks)}]", "generate.executor=serial", "generate.perturb=false",
                             "workspace.tts=tone"])
    run_generate(cfg)


def run_llm(run_dir: Path, base_url: str, profiles, tasks, seed: int, args) -> dict:
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate

    over = [f"run_dir={run_dir}", f"seed={seed}", f"profiles=[{','.join(profiles)}]", f"tasks=[{','.join(tasks)}]",
            "generate.executor=serial", "generate.perturb=false", "workspace.tts=tone", "generate.agent=llm",
            f"generate.llm.base_url={base_url}", f"generate.llm.temperature={args.temperature}",
            f"generate.llm.max_iterations={args.max_iterations}", f"generate.llm.max_tokens={args.max_tokens}",
            f"generate.llm.context_tokens={args.n_ctx}", "generate.llm.sessions_per_actor=1",
            "generate.llm.request_timeout_s=1800", f"generate.llm.tool_results_as={args.tool_results_as}"]
    return run_generate(load_config(None, over))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["qwen2.5-coder-0.5b"])
    ap.add_argument("--profiles", nargs="+", default=["p3", "p1"])
    ap.add_argument("--tasks", nargs="+", default=["T-03", "T-04", "T-09", "T-05"])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-iterations", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--chat-format", default="jinja",
                    help="jinja = the GGUF's own template (calls as JSON in the text), or a llama-cpp-python format")
    ap.add_argument("--out", default="/tmp/bench_llm_agent")
    args = ap.parse_args(argv)
    # llama-cpp-python's chatml-function-calling template drops tool messages: send results as user turns
    args.tool_results_as = "user" if args.chat_format == "chatml-function-calling" else "tool"

    from filegram_ray.llm.server import LlamaCppServer
    from filegram_ray.storage import RunDir

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load0 = "load average (1/5/15 min) at the start: " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(load0, flush=True)
    sim_dir = out / "simulator"
    run_simulator(sim_dir, args.profiles, args.tasks, args.seed)
    idx = RunDir(str(sim_dir)).read_table("trajectories/index.parquet")
    pairs = [tuple(t.split("/")) for t in idx["trajectory_id"].to_list()]
    header = ("| profile | task | agent | valid | stop | iters | calls ok/fail/malformed | s/traj | "
              + " | ".join(SHORT) + " |")
    lines = [header, "|" + "---|" * (8 + len(SHORT))]
    summary = []
    for model in args.models:
        llm_dir = out / f"llm-{model}"
        fmt = None if args.chat_format == "jinja" else args.chat_format
        t0 = time.perf_counter()
        with LlamaCppServer(model, n_ctx=args.n_ctx, chat_format=fmt, alias=model, startup_timeout=900) as srv:
            rec = run_llm(llm_dir, srv.base_url, args.profiles, args.tasks, args.seed, args)
        wall = time.perf_counter() - t0
        n_valid = n_calls = 0
        secs = []
        for pid, tid in pairs:
            sd, ld = sim_dir / "trajectories" / pid / tid, llm_dir / "trajectories" / pid / tid
            ok_s, fp_s, _ = check_trajectory(sd, f"{pid}/{tid}", tid)
            lines.append(f"| {pid.split('_')[0]} | {tid} | simulator | {'yes' if ok_s else 'NO'} | – | – | – | – | "
                         + " | ".join(_fmt(x) for x in fp_s) + " |")
            if not (ld / "transcript.json").exists():
                lines.append(f"| {pid.split('_')[0]} | {tid} | {model} | NO (not generated) |")
                continue
            tr = json.loads((ld / "transcript.json").read_text(encoding="utf-8"))
            ok_l, fp_l, why = check_trajectory(ld, f"{pid}/{tid}", tid)
            raw = json.loads((ld / "events_raw.json").read_text(encoding="utf-8"))
            calls = [e for e in raw if e["event_type"] == "tool_call"]
            good = sum(1 for c in calls if c["success"])
            n_valid += int(ok_l)
            n_calls += len(calls)
            secs.append(tr["wall_s"])
            lines.append(f"| {pid.split('_')[0]} | {tid} | {model} | {'yes' if ok_l else 'NO ' + why} | "
                         f"{tr['stop_reason']} | {tr['iterations']} | {good}/{len(calls) - good}/"
                         f"{tr['malformed_calls']} | {tr['wall_s']:.0f} | " + " | ".join(_fmt(x) for x in fp_l) + " |")
        summary.append(f"{model} (chat format {args.chat_format}, max {args.max_iterations} iterations × "
                       f"{args.max_tokens} tokens, temperature {args.temperature}): {n_valid}/{len(pairs)} valid trajectories that encode, "
                       f"{n_calls / max(1, len(secs)):.1f} tool calls per trajectory, "
                       f"{sum(secs) / max(1, len(secs)):.0f} s per trajectory (stage wall {wall:.0f} s, "
                       f"ok {rec['ok']}, error {rec['error']})")
    load = "load average (1/5/15 min) at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = "\n".join(lines) + "\n\n" + "\n".join(summary) + f"\n{load0}\n{load}\n"
    print(text)
    (out / "table.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
