"""Does memory served over MCP change what an LLM agent does for a person? (prints figures; not a test)

For each simulated user (a profile of the project's set; its tiers are used only to score, never shown):

1. History: the persona simulator does HISTORY_TASKS as that user; the sessions are laid out as a watcher store
   (tests/benchmarks/mcp_stores.py) and its FileGramOS memory is built (`update_memory`, the `memory update` path).
2. `filegram mcp --store STORE` is started and reached with the official SDK client over stdio.
3. The project's LLM agent (filegram_ray/engine/agents/llm_agent.py) on a packaged Qwen2.5-Coder GGUF served by
   llama-cpp-python does TASKS twice, as an assistant working *for* the user (no persona in its prompt), with the
   same sampling seed:
   - **without memory**: the assistant prompt and the 8 behavioural tools;
   - **with memory**: the same, plus the server's prompt `work_like_this_user` in the system prompt and its 4 tools
     (`profile`, `how_does_the_user`, `recall`, `recent_sessions`) callable during the task.
4. Scoring, per (user, task): the 17-D fingerprint of the agent's trajectory (reference §7.3) and its distance to
   the user's *reference* — the mean fingerprint of REF_SEEDS simulator sessions of that user on the same task
   (what the user does there) — after z-scoring every feature over all simulator sessions of the run. Also the
   distance to the other users' references (is the move toward *this* user?), and the six tiers the §7.6 rules
   read from the agent's sessions of a user, compared with the user's tiers.

Figures go to docs/measurements/<today>-mcp-agent.md (written by this script, whatever they show) and stdout.

Run (CPU-heavy: one user, 6 trajectories, took 53 min on 2 cores shared at load 16; the defaults are 3 users):
    nice python tests/benchmarks/bench_mcp_agent.py [--users p3 p11 p18] [--tasks T-03 T-09 T-20]
        [--max-minutes 60]
        [--model qwen2.5-coder-1.5b] [--max-iterations 6] [--max-tokens 384] [--out /tmp/mcp-agent]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

HISTORY_TASKS = ["T-01", "T-02", "T-08", "T-10", "T-12", "T-16"]
DIMS = "ABCDEF"
ATTR = {"A": "reading_strategy", "B": "output_detail", "C": "directory_style", "D": "edit_strategy",
        "E": "working_style", "F": "cross_modal_behavior"}


def fingerprint_of(traj: Path, tid: str):
    from filegram_ray.engine.filter import filter_events
    from filegram_ray.memory.engram import encode_engram

    raw = json.loads((traj / "events_raw.json").read_text("utf-8"))
    return encode_engram(filter_events(raw), tid, tid, traj / "media")


def tiers_of(engrams) -> dict[str, str]:
    from filegram_ray.memory.classify import classify_rules
    from filegram_ray.memory.consolidate import aggregate

    cls = {c["attribute"]: c["tier"] for c in classify_rules(aggregate([e.procedural for e in engrams],
                                                                       len(engrams)))}
    return {d: cls[ATTR[d]] for d in DIMS}


async def run_user(user, tasks, bundles, store: Path, base_url: str, model: str, args, out: Path) -> dict:
    """Both arms for one user, every task, through one `filegram mcp` server over stdio (a user is complete before
    the next one starts, so a stopped run keeps whole users; finished trajectories are reused on a rerun).
    Returns {"served": tiers, "memory_prompt": text, "runs": {task id: {arm: facts}}}."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from filegram_ray.engine.agents.llm_agent import ChatEndpoint, LLMAgentConfig, run_llm_trajectory
    from filegram_ray.engine.agents.prompts import assistant_prompt
    from filegram_ray.mcp.bridge import agent_tools, prompt_text

    cfg = LLMAgentConfig(base_url=base_url, model=model, temperature=args.temperature,
                         max_iterations=args.max_iterations, max_tokens=args.max_tokens,
                         context_tokens=args.n_ctx, tool_results_as=args.tool_results_as, max_nudges=2,
                         request_timeout_s=1800, max_wall_s=3600)
    ep = ChatEndpoint(base_url, model, timeout_s=1800)
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "filegram_ray.cli", "mcp", "--store", str(store), "--no-update"], env={"PYTHONPATH": str(REPO)})
    try:
        async with Client(params) as client:
            for _ in range(600):
                r = await client.call_tool("profile", {})
                if r.structured_content["status"] == "ok":
                    break
                await anyio.sleep(0.5)
            served = {d["dimension"]: d["tier"] for d in r.structured_content["dimensions"]}
            memory = await prompt_text(client, "work_like_this_user")
            mem_tools = await agent_tools(client)
            res = {"served": served, "memory_prompt": memory, "runs": {t.task_id: {} for t in tasks}}
            for arm in ("none", "memory"):  # one arm's trajectories back to back: llama.cpp reuses the prefix
                tools = mem_tools if arm == "memory" else []
                for task in tasks:
                    dest = out / "agent" / user.profile_id / task.task_id / arm
                    if (dest / "facts.json").exists():  # resumable
                        res["runs"][task.task_id][arm] = json.loads((dest / "facts.json").read_text())
                        print(f"  {user.profile_id} {task.task_id} {arm}: reused", flush=True)
                        continue
                    t0 = time.perf_counter()
                    a = await run_llm_trajectory(
                        user, task, bundles[task.task_id], out / "work" / user.profile_id / task.task_id / arm,
                        seed=args.seed, endpoint=ep, cfg=cfg, provider="llama.cpp",
                        system_text=assistant_prompt("en", memory if arm == "memory" else None),
                        extra_tools=tools or None)
                    try:
                        a.session.write_trajectory(dest)
                        n_files = len(a.session.output_files())
                    finally:
                        a.session.close()
                    (dest / "transcript.json").write_text(json.dumps(a.transcript, ensure_ascii=False, indent=1))
                    mem_calls = [c["name"] for t in a.transcript["turns"] for c in t.get("calls", [])
                                 if c["name"] in {x.name for x in tools}]
                    e = fingerprint_of(dest, task.task_id)
                    facts = {"fingerprint": list(e.fingerprint), "procedural": e.procedural,
                             "stop": a.stop_reason, "iterations": a.iterations, "tool_calls": a.tool_calls,
                             "memory_calls": mem_calls, "seconds": round(time.perf_counter() - t0, 1),
                             "files": n_files}
                    (dest / "facts.json").write_text(json.dumps(facts))
                    res["runs"][task.task_id][arm] = facts
                    print(f"  {user.profile_id} {task.task_id} {arm}: {a.stop_reason}, {a.iterations} iterations, "
                          f"{a.tool_calls} tool calls, {n_files} files, memory calls {mem_calls}, "
                          f"{facts['seconds']} s", flush=True)
    finally:
        await ep.aclose()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", nargs="+", default=["p3", "p11", "p18"])
    ap.add_argument("--tasks", nargs="+", default=["T-03", "T-09", "T-20"])
    ap.add_argument("--history", nargs="+", default=HISTORY_TASKS)
    ap.add_argument("--ref-seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--max-iterations", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--chat-format", default="jinja", help="jinja = the GGUF's own template (calls as JSON in the "
                    "text, parsed by the agent); or a llama-cpp-python format such as chatml-function-calling")
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--out", default="/tmp/mcp-agent")
    ap.add_argument("--max-minutes", type=float, default=0, help="start no further user after this many minutes "
                    "(0 = no limit); the page then scores the users done and names the others")
    ap.add_argument("--note", default="", help="a sentence for the page (e.g. where reused trajectories came from)")
    ap.add_argument("--doc", default=None, help="measurement page (default docs/measurements/<today>-mcp-agent.md)")
    args = ap.parse_args(argv)
    # llama-cpp-python's chatml-function-calling template drops tool messages: results go back as user turns
    args.tool_results_as = "user" if args.chat_format == "chatml-function-calling" else "tool"

    import anyio
    from mcp_stores import bundles_for, simulate, write_store

    from filegram_ray.llm.server import LlamaCppServer
    from filegram_ray.memory.incremental import update_memory
    from filegram_ray.profiles import load_profiles
    from filegram_ray.storage import RunDir
    from filegram_ray.tasks import load_tasks
    from filegram_ray.watch.export import watch_units
    from filegram_ray.watch.store import WatchStore

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    load0 = os.getloadavg()
    profiles = {p.profile_id.split("_")[0]: p for p in load_profiles(None)}
    users = [profiles[u] for u in args.users]
    all_tasks = {t.task_id: t for t in load_tasks(None)}
    tasks = [all_tasks[t] for t in args.tasks]
    history = [all_tasks[t] for t in args.history]
    bundles = bundles_for(tasks + history, out / "bundles")
    # 1. history → store → memory; references
    stores = {}
    for u in users:
        hist = simulate(out / "sim", [u], history, [args.seed], bundles)
        store = out / "stores" / u.profile_id
        if not (store / "memory" / "real_user" / "store.json").exists():
            start = time.time() * 1000.0 - len(hist) * 86_400_000.0
            write_store(store, [(d, start + i * 86_400_000.0, None) for i, (_p, _t, _s, d) in enumerate(hist)],
                        seed=args.seed)
            units, _ = watch_units(WatchStore.open(store))
            update_memory(RunDir(store), "real_user", units, embedder=args.embedder)
        stores[u.profile_id] = store
    refs = {}
    sim_fps = []
    for u in users:
        for _p, t, _s, d in simulate(out / "sim", [u], tasks, args.ref_seeds, bundles):
            fp = fingerprint_of(d, t.task_id).fingerprint
            refs.setdefault((u.profile_id, t.task_id), []).append(fp)
            sim_fps.append(fp)
        for _p, t, _s, d in simulate(out / "sim", [u], history, [args.seed], bundles):
            sim_fps.append(fingerprint_of(d, t.task_id).fingerprint)
    F = np.asarray(sim_fps, dtype=float)
    mu, sd = F.mean(axis=0), F.std(axis=0)
    sd[sd == 0] = 1.0
    ref = {k: (np.mean(v, axis=0) - mu) / sd for k, v in refs.items()}
    print(f"history, memory and references ready after {time.perf_counter() - t_start:.0f} s", flush=True)
    # 2-3. the agent, both arms
    fmt = None if args.chat_format == "jinja" else args.chat_format
    with LlamaCppServer(args.model, n_ctx=args.n_ctx, chat_format=fmt, alias="agent", startup_timeout=900) as srv:
        results, skipped = {}, []
        for u in users:
            if args.max_minutes and time.perf_counter() - t_start > args.max_minutes * 60:
                skipped.append(u)  # out of time: the page scores the users done so far and names the rest
                continue
            results[u.profile_id] = anyio.run(run_user, u, tasks, bundles, stores[u.profile_id], srv.base_url,
                                              "agent", args, out)
        system_info = getattr(srv, "system_info", "")
    # 4. scoring
    rows, own = [], {"none": [], "memory": []}
    others = {"none": [], "memory": []}
    tier_hits = {"none": 0, "memory": 0}
    served_hits = {"none": 0, "memory": 0}
    tier_lines = []
    mem_calls = 0
    done = [u for u in users if u.profile_id in results]
    for u in done:
        pid = u.profile_id
        r = results[pid]
        for t in tasks:
            line = [pid.split("_")[0], t.task_id]
            for arm in ("none", "memory"):
                f = r["runs"][t.task_id][arm]
                z = (np.asarray(f["fingerprint"]) - mu) / sd
                d_own = float(np.linalg.norm(z - ref[(pid, t.task_id)]))
                d_oth = float(np.mean([np.linalg.norm(z - ref[(o.profile_id, t.task_id)]) for o in users
                                       if o.profile_id != pid]))
                own[arm].append(d_own)
                others[arm].append(d_oth)
                if arm == "memory":
                    mem_calls += len(f["memory_calls"])
                line += [f"{d_own:.2f}", f"{d_oth:.2f}", f"{f['stop']}/{f['iterations']}/{f.get('files')}"]
            line.append(", ".join(r["runs"][t.task_id]["memory"]["memory_calls"]) or "–")
            rows.append("| " + " | ".join(line) + " |")

        class _E:  # what tiers_of reads
            def __init__(self, procedural):
                self.procedural = procedural

        truth = {d: u.tiers[d] for d in DIMS}
        got = {}
        for arm in ("none", "memory"):
            got[arm] = tiers_of([_E(r["runs"][t.task_id][arm]["procedural"]) for t in tasks])
            tier_hits[arm] += sum(got[arm][d] == truth[d] for d in DIMS)
            served_hits[arm] += sum(got[arm][d] == r["served"].get(d) for d in DIMS)
        tier_lines.append(f"| {pid.split('_')[0]} | {''.join(truth[d] for d in DIMS)} | "
                          f"{''.join(r['served'].get(d, '?') for d in DIMS)} | {''.join(got['none'][d] for d in DIMS)} "
                          f"| {''.join(got['memory'][d] for d in DIMS)} |")
    n = len(own["none"])
    closer = sum(1 for a, b in zip(own["memory"], own["none"], strict=True) if a < b)
    diff = [a - b for a, b in zip(own["memory"], own["none"], strict=True)]
    spec = {arm: statistics.fmean(o - x for o, x in zip(own[arm], others[arm], strict=True)) for arm in own}
    day = time.strftime("%Y-%m-%d")
    load1 = os.getloadavg()
    wall = time.perf_counter() - t_start
    text = "\n".join([
        f"# Does memory served over MCP change what an LLM agent does for a person? ({day})",
        "",
        f"Written by `tests/benchmarks/bench_mcp_agent.py --users {' '.join(args.users)} --tasks "
        f"{' '.join(args.tasks)} --model {args.model} --max-iterations {args.max_iterations} --max-tokens "
        f"{args.max_tokens}{' --max-minutes ' + format(args.max_minutes, 'g') if args.max_minutes else ''}` "
        f"({wall / 60:.0f} min). Machine: {os.cpu_count()} cores (llama.cpp `system_info`: "
        f"{system_info or 'n/a'}); shared with other work (load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} at the end).",
        "",
        *([args.note, ""] if args.note else []),
        f"**Set-up.** {len(done)} simulated user(s)"
        f"{' (not run, out of the time budget: ' + ', '.join(u.profile_id for u in skipped) + ')' if skipped else ''}"
        f"; each one's memory was built from {len(history)} persona-simulator "
        f"sessions ({', '.join(args.history)}) laid out as a watcher store, and served by `filegram mcp` over stdio "
        f"to the SDK client. The project's LLM agent ({args.model}, llama-cpp-python, chat format "
        f"{args.chat_format}, temperature {args.temperature}, seed {args.seed} in both arms) did "
        f"{len(tasks)} tasks ({', '.join(args.tasks)}) for each user as an assistant without persona: once without "
        f"memory, once with the server's `work_like_this_user` prompt in its system prompt and the 4 memory tools "
        f"callable. Reference of a (user, task): the mean fingerprint of {len(args.ref_seeds)} simulator sessions "
        f"of that user on that task. Distances: Euclidean over the 17 fingerprint features (reference §7.3), each "
        f"z-scored over the run's {len(sim_fps)} simulator sessions.",
        "",
        "| user | task | d own, no memory | d others, no memory | stop/iters/files | d own, memory | d others, memory "
        "| stop/iters/files | memory tools called |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
        *rows,
        "",
        f"**Distance to the user's own reference**, mean over {n} (user, task) pairs: without memory "
        f"{statistics.fmean(own['none']):.2f}, with memory {statistics.fmean(own['memory']):.2f} (difference "
        f"{statistics.fmean(diff):+.2f}, median {statistics.median(diff):+.2f}); closer with memory in {closer} of "
        f"{n} pairs. Own minus other users' references (negative = nearer this user than the others): without "
        f"memory {spec['none']:+.2f}, with memory {spec['memory']:+.2f}. Memory tool calls made by the agent: "
        f"{mem_calls} in {n} trajectories.",
        "",
        "**Tiers** (A–F) the §7.6 rules read from the agent's sessions of each user, against the user's tiers "
        "(ground truth, used only here) and the tiers the memory served:",
        "",
        "| user | user's tiers | served by the memory | agent, no memory | agent, memory |",
        "|---|---|---|---|---|",
        *tier_lines,
        "",
        f"Tiers matching the user's: {tier_hits['none']} / {6 * len(done)} without memory, {tier_hits['memory']} / "
        f"{6 * len(done)} with memory; matching what the memory served: {served_hits['none']} and "
        f"{served_hits['memory']}.",
        "",
        "Reading: the sample is small (a few users × tasks, one sampling seed, a 1.5B model on CPU with a short "
        "iteration budget); a difference here is an observation on these runs, not an estimate with an interval.",
        "",
    ])
    print(text)
    doc = Path(args.doc) if args.doc else REPO / "docs" / "measurements" / f"{day}-mcp-agent.md"
    doc.write_text(text, encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, default=str))
    print(f"written: {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
