"""`filegram mcp` on a store of 10,000 sessions: how fast does `recall` answer (prints figures; not a test).

1. Store: distinct persona-simulator trajectories (BASE_PROFILES × BASE_TASKS, seed 7) laid out as watcher
   sessions (tests/benchmarks/mcp_stores.py), repeated to SESSIONS sessions four hours apart, the text of every
   copy rewritten by a per-session word substitution so no two sessions hold the same text. Built once under
   --store and reused (delete it to rebuild).
2. Memory: `update_memory` over the closed sessions (the `filegram memory update` path) with --embedder.
3. `recall` latency, QUERIES calls cycling over 40 plain-words queries, k = 5 and k = 20:
   a. in process (MemoryService.recall: embed the query, search both FAISS indices, name sessions and times);
   b. the SDK client over stdio to `filegram mcp --store STORE --no-update` (round trip as the client sees it);
   c. the SDK client over streamable HTTP (127.0.0.1, bearer token).
   Also: the server's load time (start until the first `ok` answer), its resident memory, the index sizes.

Figures go to docs/measurements/<today>-mcp-recall.md (written by this script) and stdout.

Run: nice python tests/benchmarks/bench_mcp_recall.py [--sessions 10000] [--store /tmp/mcp-bench/store]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

QUERIES = [
    "budget report", "meeting notes from last week", "quarterly revenue table", "travel expenses", "project plan",
    "literature review on memory", "customer complaints summary", "data cleaning script", "chart of sales",
    "hiring decisions", "research questions", "draft of the proposal", "market analysis", "risk assessment",
    "weekly status update", "contract terms", "user interview findings", "product roadmap", "bug triage list",
    "financial statements", "reading list", "slides for the review", "comparison of suppliers", "lessons learned",
    "timeline of events", "inventory spreadsheet", "email to the team", "course syllabus", "experiment results",
    "summary of the paper", "policy changes", "marketing campaign", "annual report excerpt", "survey responses",
    "onboarding checklist", "meeting agenda", "cost breakdown", "interview transcript", "design decisions",
    "archive of old drafts",
]


#: calls made before each path is timed (the first queries of a fresh process pay one-time allocations)
WARMUP = 10


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _row(name: str, ms: list[float]) -> str:
    return (f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {_pct(ms, 0.95):.1f} | {_pct(ms, 0.99):.1f} | "
            f"{max(ms):.1f} | {statistics.fmean(ms):.1f} |")


def build(store: Path, n: int, n_profiles: int, n_tasks: int, work: Path) -> dict:
    from mcp_stores import bundles_for, simulate, write_store

    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    t0 = time.perf_counter()
    profiles = load_profiles(None)[:n_profiles]
    tasks = load_tasks(None)[:n_tasks]
    bundles = bundles_for(tasks, work / "bundles")
    base = simulate(work / "traj", profiles, tasks, [7], bundles)
    t_sim = time.perf_counter() - t0
    start = time.time() * 1000.0 - n * 4 * 3600_000.0
    plan = [(base[i % len(base)][3], start + i * 4 * 3600_000.0, i) for i in range(n)]
    write_store(store, plan, seed=7)
    return {"distinct trajectories": len(base), "simulate s": round(t_sim, 1),
            "write s": round(time.perf_counter() - t0 - t_sim, 1)}


def build_memory(store: Path, embedder: str) -> dict:
    from filegram_ray.memory.incremental import update_memory
    from filegram_ray.storage import RunDir
    from filegram_ray.watch.export import watch_units
    from filegram_ray.watch.store import WatchStore

    units, _ = watch_units(WatchStore.open(store))
    r = update_memory(RunDir(store), "real_user", units, embedder=embedder)
    return {"sessions": r["sessions"], "encoded now": r["encoded_now"], "seconds": r["seconds"]}


def in_process(store: Path, n_queries: int) -> tuple[dict, dict[int, list[float]]]:
    from filegram_ray.mcp.memory import MemoryService

    t0 = time.perf_counter()
    svc = MemoryService(store, update=False).start(background=False)
    load = time.perf_counter() - t0
    snap = svc.snapshot
    info = {"load s": round(load, 1), "sessions": snap.n_sessions, "episodes": snap.indices.episodes.index.ntotal,
            "chunks": snap.indices.chunks.index.ntotal, "embedder": snap.kind}
    out = {}
    for i in range(WARMUP):
        svc.recall(QUERIES[-1 - i], 5)
    for k in (5, 20):
        ms = []
        for i in range(n_queries):
            t = time.perf_counter()
            r = svc.recall(QUERIES[i % len(QUERIES)], k)
            ms.append((time.perf_counter() - t) * 1000.0)
            assert r["status"] == "ok" and len(r["hits"]) == k, r
        out[k] = ms
    svc.close()
    return info, out


def _rss_of(pattern: str, pid: int | None = None) -> float | None:
    for p in [Path(f"/proc/{pid}")] if pid else Path("/proc").glob("[0-9]*"):
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if pattern in cmd and "filegram_ray.cli mcp" in cmd and (pid or "--http" not in cmd):
                for line in (p / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            continue
    return None


async def _measure(client, n_queries: int) -> tuple[float, dict[int, list[float]], list[float]]:
    t0 = time.perf_counter()
    while True:
        r = await client.call_tool("profile", {})
        if r.structured_content["status"] == "ok":
            break
        import anyio

        await anyio.sleep(0.2)
    ready = time.perf_counter() - t0
    for i in range(WARMUP):
        await client.call_tool("recall", {"query": QUERIES[-1 - i], "k": 5})
    out, server_ms = {}, []
    for k in (5, 20):
        ms = []
        for i in range(n_queries):
            t = time.perf_counter()
            r = await client.call_tool("recall", {"query": QUERIES[i % len(QUERIES)], "k": k})
            ms.append((time.perf_counter() - t) * 1000.0)
            assert not r.is_error and len(r.structured_content["hits"]) == k
            server_ms.append(r.structured_content["query_ms"])
        out[k] = ms
    return ready, out, server_ms


def over_stdio(store: Path, n_queries: int) -> tuple[dict, dict[int, list[float]], list[float]]:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "filegram_ray.cli", "mcp", "--store",
                                                                     str(store), "--no-update"],
                                       env={"PYTHONPATH": str(REPO)})
        t0 = time.perf_counter()
        async with Client(params) as c:
            connected = time.perf_counter() - t0
            ready, out, server_ms = await _measure(c, n_queries)
            rss = _rss_of(str(store))
        return {"connect s": round(connected, 1), "first ok answer s": round(connected + ready, 1),
                "server RSS MiB": round(rss or 0)}, out, server_ms

    return anyio.run(main)


def over_http(store: Path, n_queries: int) -> tuple[dict, dict[int, list[float]], list[float]]:
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "filegram_ray.cli", "mcp", "--store", str(store), "--no-update",
                          "--http", "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    url = token = None
    for line in p.stderr:
        if m := re.search(r"streamable HTTP on (\S+)", line):
            url = m.group(1)
        if m := re.search(r"bearer token: (\S+)", line):
            token = m.group(1)
            break
    err: list[str] = []
    threading.Thread(target=lambda: [err.append(x) for x in p.stderr], daemon=True).start()

    async def main():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as hc:
            async with Client(streamable_http_client(url, http_client=hc)) as c:
                connected = time.perf_counter() - t0
                ready, out, server_ms = await _measure(c, n_queries)
                return connected + ready, out, server_ms

    try:
        ready, out, server_ms = anyio.run(main)
        rss = _rss_of(str(store), p.pid)
    except BaseException:
        print(f"HTTP server exit code {p.poll()}; its last lines:\n" + "".join(err[-20:]), file=sys.stderr)
        raise
    finally:
        p.terminate()
        p.wait(30)
    return {"first ok answer s": round(ready, 1), "server RSS MiB": round(rss or 0)}, out, server_ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--store", default="/tmp/mcp-bench/store")
    ap.add_argument("--base-profiles", type=int, default=8)
    ap.add_argument("--base-tasks", type=int, default=5)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "minilm-int8", "hashing"])
    ap.add_argument("--doc", default=None, help="measurement page (default docs/measurements/<today>-mcp-recall.md)")
    args = ap.parse_args(argv)
    store = Path(args.store)
    load0 = os.getloadavg()
    built = {}
    if not (store / "memory" / "real_user" / "store.json").exists():
        if not (store / "sessions" / "index.json").exists():
            print(f"building a store of {args.sessions} sessions in {store} …", flush=True)
            built = build(store, args.sessions, args.base_profiles, args.base_tasks, store.parent / "work")
            print(built, flush=True)
        print("building its memory (the memory update path) …", flush=True)
        built["memory"] = build_memory(store, args.embedder)
        print(built["memory"], flush=True)
        (store.parent / "build.json").write_text(json.dumps(built))
    elif (store.parent / "build.json").exists():  # the figures of the run that built the store
        built = json.loads((store.parent / "build.json").read_text())
    info, inproc = in_process(store, args.queries)
    import gc

    gc.collect()  # the in-process memory (≈ 1.4 GB at 10,000 sessions) is not held while the servers run
    print(info, flush=True)
    s_info, s_ms, s_server = over_stdio(store, args.queries)
    print(s_info, flush=True)
    h_info, h_ms, h_server = over_http(store, args.queries)
    print(h_info, flush=True)
    load1 = os.getloadavg()
    flags = ""
    try:
        flags = next(x for x in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                     if x.startswith("Model name")).split(":", 1)[1].strip()
    except Exception:  # noqa: BLE001 - lscpu missing
        pass
    size = (store / "memory" / "real_user" / "store.json").stat().st_size / 2**20
    day = time.strftime("%Y-%m-%d")
    store_line = (f"**Store.** {info['sessions']:,} closed watcher sessions made from "
                  f"{built['distinct trajectories']} distinct persona-simulator trajectories, each copy's text "
                  f"rewritten by a per-session word substitution (tests/benchmarks/mcp_stores.py); simulating took "
                  f"{built['simulate s']} s, writing {built['write s']:,.0f} s (both under the load below)."
                  if built.get("distinct trajectories") else
                  f"**Store.** {info['sessions']:,} closed watcher sessions (built by an earlier run of this script).")
    lines = [
        f"# `filegram mcp`: `recall` on a store of {info['sessions']:,} sessions ({day})",
        "",
        f"Written by `tests/benchmarks/bench_mcp_recall.py --sessions {args.sessions}` (embedder "
        f"`{info['embedder']}`). Machine: {os.cpu_count()} cores, {flags or 'CPU model unknown'}; shared with other "
        f"work (load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end).",
        "",
        store_line,
        f"Memory: {info['episodes']:,} episodes and {info['chunks']:,} content chunks in the FAISS indices "
        f"(IndexFlatIP, 384-D), `memory/real_user/store.json` {size:,.0f} MiB"
        + (f"; built by `update_memory` in {built['memory']['seconds']['total']:,.0f} s (encode "
           f"{built['memory']['seconds']['encode']:,.0f} s, consolidate {built['memory']['seconds']['consolidate']:,.0f}"
           f" s, embed + index {built['memory']['seconds']['index']:,.0f} s)." if built.get("memory") else "."),
        "",
        f"**`recall` latency** in milliseconds, {args.queries} calls per row cycling over {len(QUERIES)} queries, "
        f"after {WARMUP} warm-up calls per path:",
        "",
        "| path | calls | p50 | p95 | p99 | max | mean |",
        "|---|---:|---:|---:|---:|---:|---:|",
        _row("in process, k = 5", inproc[5]), _row("in process, k = 20", inproc[20]),
        _row("SDK client over stdio, k = 5", s_ms[5]), _row("SDK client over stdio, k = 20", s_ms[20]),
        _row("SDK client over HTTP, k = 5", h_ms[5]), _row("SDK client over HTTP, k = 20", h_ms[20]),
        _row("server-side query time (stdio and HTTP calls)", s_server + h_server),
        "",
        f"Goal (issue): < 200 ms. Worst p95 over the client paths: "
        f"{max(_pct(v, 0.95) for d in (s_ms, h_ms) for v in d.values()):.1f} ms.",
        "",
        f"**Start-up.** Loading the memory into the server (in process): {info['load s']} s. stdio: the client was "
        f"connected after {s_info['connect s']} s and had its first `ok` answer after {s_info['first ok answer s']} s "
        f"(until then answers say `loading`); HTTP: {h_info['first ok answer s']} s. Server resident memory: "
        f"{s_info['server RSS MiB']} MiB (stdio), {h_info['server RSS MiB']} MiB (HTTP).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    doc = Path(args.doc) if args.doc else REPO / "docs" / "measurements" / f"{day}-mcp-recall.md"
    doc.write_text(text, encoding="utf-8")
    (store.parent / "bench_mcp_recall.json").write_text(json.dumps(
        {"info": info, "built": built, "in_process": inproc, "stdio": s_ms, "http": h_ms}, default=str))
    print(f"written: {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
