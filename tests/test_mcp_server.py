"""`filegram mcp`: a watcher store's FileGramOS memory served over the Model Context Protocol, tested with the
official SDK's own client over stdio and over streamable HTTP (list, call every tool, read every resource, get the
prompt, validate every schema), malformed calls (MCP errors, never a crash), the privacy rules on a store recorded
by the real watcher from the secret corpus of tests/test_watch_redaction_corpus.py, the --forget rules, "no memory
yet", and the memory refreshed while the server answers.

Servers run with the ``hashing`` embedder except in the documented sequence (test_documented_sequence…), which uses
the torch-free ``minilm-int8`` that docs/mcp.md names for a ``.[watch,mcp]`` install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")
import anyio  # noqa: E402
import jsonschema  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_watch_redaction_corpus import _assignments, _leaked, _pem, _tokens  # noqa: E402
from watch_helpers import start  # noqa: E402

from filegram_ray.mcp.memory import MemoryService  # noqa: E402
from filegram_ray.mcp.server import RequestLog, build_server  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")

REPO = Path(__file__).resolve().parents[1]
PII = ["dave.lee@example.com", "415-555-0123", "0049 30 901820", "+44 20 7946 0958", "carol.jones@example.org"]
#: words only the forgotten diary file holds, and its two names (the memory shows names; the diary's text is too
#: short to be one of the content chunks)
DIARY_WORDS = ("zebra", "quartz", "lighthouse", "private.md", "private-old")
TOOL_CALLS = [("profile", {}), ("how_does_the_user", {"aspect": "organization"}),
              ("recall", {"query": "budget report table", "k": 5}), ("recent_sessions", {"n": 5})]


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _secrets() -> list[str]:
    return list(_tokens().values()) + [v for _, v in _assignments().values()] + [_pem()[1]]


# --------------------------------------------------------------------------------------------------- the store
def _record(tmp_path: Path) -> tuple[Path, Path]:
    """Three closed sessions recorded by the real watcher in ``redacted`` mode: a note holding the whole secret
    corpus (written, edited, read, renamed), files named after e-mail addresses, phone numbers and a token, a diary
    file (renamed in a later session), reports with tables and a CSV, a deletion."""
    tokens, assigns = _tokens(), _assignments()
    pem, _inner = _pem()
    body = "\n".join([f"{k}: {v}" for k, v in tokens.items()] + [line for line, _ in assigns.values()] + [pem])
    w, root = start(tmp_path, content="redacted")
    try:
        (root / "notes").mkdir()
        (root / "notes" / "plan.md").write_text("# Plan\nPhone: 0049 30 901820\n" + body + "\n")
        w.sync()
        text = (root / "notes" / "plan.md").read_text()
        (root / "notes" / "plan.md").write_text(text.replace("Phone:", "Phone (carol.jones@example.org, "
                                                                        "+44 20 7946 0958):"))
        (root / "dave.lee@example.com 415-555-0123.md").write_text("call about the budget\n")
        (root / f"{tokens['github-classic-pat']}.txt").write_text("ci token note\n")
        (root / "diary").mkdir()
        (root / "diary" / "private.md").write_text("# Diary\n\nzebra quartz lighthouse: what I did today.\n")
        w.sync()
    finally:
        w.stop()
    w, root = start(tmp_path, content="redacted")
    try:
        (root / "reports").mkdir()
        (root / "reports" / "q3-budget.md").write_text("# Q3 budget report\n\n| item | cost |\n|---|---|\n"
                                                       "| rent | 1200 |\n| travel | 300 |\n\nThe budget holds.\n")
        (root / "reports" / "costs.csv").write_text("item,cost\nrent,1200\ntravel,300\n")
        w.sync()
        (root / "notes" / "plan.md").read_text()
        with open(root / "reports" / "q3-budget.md", "a") as fh:
            fh.write("\n## Risks\n\nTravel may grow.\n")
        os.rename(root / "diary" / "private.md", root / "diary" / "private-old.md")
        (root / "diary" / "private-old.md").read_text()
        w.sync()
    finally:
        w.stop()
    w, root = start(tmp_path, content="redacted")
    try:
        (root / "reports" / "q4-budget.md").write_text("# Q4 budget report\n\nShort and plain this time.\n")
        (root / "reports" / "costs.csv").unlink()
        w.sync()
    finally:
        w.stop()
    return tmp_path / "store", root


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    store, root = _record(tmp)
    return store, root


def _copy(store: Path, dest: Path) -> Path:
    shutil.copytree(store, dest, ignore=shutil.ignore_patterns("lock", "mcp"))
    return dest


# --------------------------------------------------------------------------------------------------- helpers
def _texts(result) -> str:
    """Everything a client receives from one result, as text."""
    parts = []
    for c in getattr(result, "content", None) or getattr(result, "contents", None) or []:
        parts.append(getattr(c, "text", "") or "")
    if getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    for m in getattr(result, "messages", None) or []:
        parts.append(getattr(m.content, "text", "") or "")
    return "\n".join(parts)


async def _tour(c, *, wait_ready: bool = True) -> dict:
    """List and call everything a client can: tools (schemas checked), resources, templates, the prompt. Returns
    {"tools": {name: tool}, "results": {name: result}, "text": everything received}."""
    if wait_ready:
        for _ in range(240):
            r = await c.call_tool("profile", {})
            if r.structured_content["status"] == "ok":
                break
            await anyio.sleep(0.5)
        assert r.structured_content["status"] == "ok", r.structured_content
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {"how_does_the_user", "recall", "recent_sessions", "profile"}
    out, texts = {}, []
    for t in tools.values():
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        assert t.annotations.read_only_hint and not t.annotations.destructive_hint
    for name, args in TOOL_CALLS:
        r = await c.call_tool(name, args)
        assert not r.is_error, _texts(r)
        jsonschema.validate(r.structured_content, tools[name].output_schema)
        jsonschema.validate(args, tools[name].input_schema)
        out[name] = r
        texts.append(_texts(r))
    resources = {str(x.uri) for x in (await c.list_resources()).resources}
    assert resources == {"filegram://profile", "filegram://context", "filegram://sessions/recent"}
    templates = {x.uri_template for x in (await c.list_resource_templates()).resource_templates}
    assert templates == {"filegram://dimension/{aspect}", "filegram://recall/{query}"}
    for uri in sorted(resources) + ["filegram://dimension/curation", "filegram://recall/budget%20report"]:
        r = await c.read_resource(uri)
        out[uri] = r
        texts.append(_texts(r))
    prompts = {p.name: p for p in (await c.list_prompts()).prompts}
    assert list(prompts) == ["work_like_this_user"]
    r = await c.get_prompt("work_like_this_user", {"task": "write the Q1 budget report"})
    out["prompt"] = r
    texts.append(_texts(r))
    return {"tools": tools, "results": out, "text": "\n".join(texts)}


def _stdio(store: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "filegram_ray.cli", "mcp", "--store",
                                                               str(store), "--embedder", "hashing", *extra],
                                 env=_env())


def _assert_private(text: str, store: Path, root: Path) -> None:
    leaks = [s[:16] for s in _secrets() if _leaked(s, text)] + [x for x in PII if x in text]
    assert not leaks, leaks
    for real in (str(root), str(root.parent), str(store), str(Path.home())):
        assert real not in text, real


# --------------------------------------------------------------------------------------------------- stdio
def test_stdio_client_lists_and_calls_everything_and_nothing_private_leaves(corpus_store, tmp_path):
    """The SDK client over stdio: every tool, resource, template and the prompt answer with schema-valid results;
    each answer carries what the issue asks (tier, evidence, support; hits naming session and time); nothing of
    the secret corpus, no e-mail address or phone number, no real path reaches the client, whatever is asked."""
    store = _copy(corpus_store[0], tmp_path / "store")
    root = corpus_store[1]
    secrets = _secrets()

    async def main():
        async with Client(_stdio(store)) as c:
            tour = await _tour(c)
            texts = [tour["text"]]
            # questions aimed at the secrets themselves
            for q in ["token key secret password", "Phone carol dave", "github pat ci token", "private key",
                      "aws secret access key", secrets[0][:20], "plan", "budget"]:
                r = await c.call_tool("recall", {"query": q, "k": 50})
                texts.append(_texts(r))
            for aspect in ("consumption", "production", "organization", "iteration", "curation", "cross_modal"):
                texts.append(_texts(await c.call_tool("how_does_the_user", {"aspect": aspect})))
            texts.append(_texts(await c.call_tool("recent_sessions", {"n": 100})))
            return tour, "\n".join(texts)

    tour, text = anyio.run(main)
    prof = tour["results"]["profile"].structured_content
    assert prof["sessions"] == 3 and len(prof["dimensions"]) == 6
    for d in prof["dimensions"]:
        assert d["tier"] in "LMR" and d["confidence"] in ("HIGH", "MODERATE", "LOW")
        assert 0 <= d["sessions_supporting"] <= d["sessions_total"] == 3 and d["evidence"]
    dim = tour["results"]["how_does_the_user"].structured_content["dimension"]
    assert dim["aspect"] == "organization" and set(dim["evidence"]) >= {"dirs_created", "max_dir_depth"}
    hits = tour["results"]["recall"].structured_content["hits"]
    assert hits and all(re.match(r"S-\d{8}T\d{6}-[0-9a-f]{6}$", h["session"]) and h["time"] for h in hits)
    assert any("budget" in h["text"].lower() for h in hits)
    recent = tour["results"]["recent_sessions"].structured_content
    assert recent["total"] == 3 and recent["sessions"][0]["started"] >= recent["sessions"][-1]["started"]
    assert "work the way I do" in _texts(tour["results"]["prompt"])
    assert "[EMAIL" in text or "[KEY" in text  # the redacted snippets and names are what is served
    _assert_private(text, store, root)
    log_lines = [json.loads(x) for x in (store / "mcp" / "requests.jsonl").read_text().splitlines()]
    assert {x["transport"] for x in log_lines} == {"stdio"}
    assert sum(1 for x in log_lines if x["method"] == "tools/call") >= len(TOOL_CALLS) + 8 + 6 + 1
    raw = (store / "mcp" / "requests.jsonl").read_text()
    assert "budget" not in raw and "plan" not in raw and "Q1" not in raw  # names only, never the contents


MALFORMED = [
    ("recall", {}), ("recall", {"query": ""}), ("recall", {"query": "x", "k": 0}), ("recall", {"query": "x", "k": 51}),
    ("recall", {"query": "x", "k": "many"}), ("recall", {"query": "x", "k": 2.5}), ("recall", {"query": 123}),
    ("recall", {"query": "x" * 2001}), ("recall", {"query": None}), ("how_does_the_user", {}),
    ("how_does_the_user", {"aspect": "tiers"}), ("how_does_the_user", {"aspect": ["organization"]}),
    ("recent_sessions", {"n": -1}), ("recent_sessions", {"n": "ten"}), ("recent_sessions", {"n": 10**12}),
    ("no_such_tool", {}), ("profile; rm -rf /", {}),
]


def test_malformed_calls_are_mcp_errors_and_the_server_keeps_answering(corpus_store, tmp_path):
    store = _copy(corpus_store[0], tmp_path / "store")

    async def main():
        async with Client(_stdio(store)) as c:
            errors = []
            for name, args in MALFORMED:
                r = await c.call_tool(name, args)
                assert r.is_error, (name, args, _texts(r))
                errors.append(_texts(r))
            for uri in ("filegram://dimension/tiers", "file:///etc/passwd", "filegram://../../etc/passwd",
                        "filegram://recall/", "filegram://nothing"):
                with pytest.raises(MCPError):
                    await c.read_resource(uri)
            with pytest.raises(MCPError):
                await c.get_prompt("no_such_prompt", {})
            r = await c.call_tool("recent_sessions", {"n": 3})  # still alive and answering
            return errors, r

    errors, r = anyio.run(main)
    assert not r.is_error and r.structured_content["total"] == 3
    assert "k" in errors[2] and "greater than or equal to 1" in errors[2]
    assert "Unknown tool" in errors[-1]
    lines = [json.loads(x) for x in (store / "mcp" / "requests.jsonl").read_text().splitlines()]
    bad = [x for x in lines if x["method"] == "tools/call" and x["outcome"] == "tool_error"]
    assert len(bad) == len(MALFORMED)
    assert {x["name"] for x in bad} >= {"recall", "?"}  # an unknown name is never written as given


def test_garbage_on_stdin_never_stops_the_server(corpus_store, tmp_path):
    """Raw JSON-RPC over stdio: lines that are not JSON, and a request whose params are not an object, are dropped
    by the SDK's stdio transport (no reply: it cannot be read as a request); arguments of the wrong type and an
    unknown method get error replies with their ids; the next well-formed request is answered."""
    store = _copy(corpus_store[0], tmp_path / "store")
    cmd = [sys.executable, "-m", "filegram_ray.cli", "mcp", "--store", str(store), "--embedder", "hashing"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={**os.environ, **_env()}, text=True)
    msgs = ["this is not json", "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\"",
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            "\x00\xff garbage {{{",
            {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": "oops"},
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recall", "arguments": [1, 2]}},
            {"jsonrpc": "2.0", "id": 10, "method": "no/such/method", "params": {}},
            {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "recent_sessions",
                                                                              "arguments": {"n": 2}}}]
    try:
        for m in msgs:
            p.stdin.write((m if isinstance(m, str) else json.dumps(m)) + "\n")
        p.stdin.flush()
        replies: dict = {}
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and 11 not in replies:
            line = p.stdout.readline()
            if not line:
                break
            r = json.loads(line)
            replies[r.get("id")] = r
        assert "result" in replies[1], replies
        assert 8 not in replies and "error" in replies[10], replies
        assert "error" in replies[9] or replies[9]["result"].get("isError"), replies[9]
        assert replies[11]["result"]["structuredContent"]["total"] == 3, replies[11]
        assert p.poll() is None
    finally:
        p.kill()
        p.wait(10)


# --------------------------------------------------------------------------------------------------- HTTP
def _start_http(store: Path, *extra: str) -> tuple[subprocess.Popen, str, str, list[str]]:
    cmd = [sys.executable, "-m", "filegram_ray.cli", "mcp", "--store", str(store), "--embedder", "hashing",
           "--http", "--port", "0", *extra]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env={**os.environ, **_env()}, text=True)
    lines, url, token = [], None, None
    for line in p.stderr:
        lines.append(line)
        if m := re.search(r"streamable HTTP on (\S+)", line):
            url = m.group(1)
        if m := re.search(r"bearer token: (\S+)", line):
            token = m.group(1)
        if "Ctrl-C stops the server" in line:  # the last line of the ready message (client configuration before it)
            break
    assert url and token, "".join(lines)
    threading.Thread(target=lambda: [lines.append(x) for x in p.stderr], daemon=True).start()
    return p, url, token, lines


def _listening(port: int) -> list[str]:
    """Local addresses listening on ``port`` (IPv4 and IPv6, from /proc/net)."""
    out = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(f).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, p = cols[1].rsplit(":", 1)
            if int(p, 16) == port and cols[3] == "0A":
                out.append(addr)
    return out


def test_http_client_with_the_printed_token_and_everything_else_refused(corpus_store, tmp_path):
    """Streamable HTTP: bound to 127.0.0.1 only; without the bearer token, with a wrong one, or with a foreign
    Host header a request is refused (401 / 421) and logged; the SDK client with the printed token lists and calls
    everything; Ctrl-C stops the server."""
    import httpx
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    store = _copy(corpus_store[0], tmp_path / "store")
    p, url, token, lines = _start_http(store)
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert url.startswith("http://127.0.0.1:") and _listening(port) == ["0100007F"]
        assert "mcpServers" in "".join(lines) and f"Bearer {token}" in "".join(lines)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=ping, headers=accept, timeout=30).status_code == 401
        assert httpx.post(url, json=ping, headers={**accept, "Authorization": "Bearer wrong"},
                          timeout=30).status_code == 401
        assert httpx.post(url, json=ping, headers={**accept, "Authorization": f"Bearer {token}",
                                                   "Host": "evil.example.com"}, timeout=30).status_code == 421

        async def main():
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as hc:
                async with Client(streamable_http_client(url, http_client=hc)) as c:
                    return await _tour(c)

        tour = anyio.run(main)
        assert tour["results"]["profile"].structured_content["sessions"] == 3
        _assert_private(tour["text"], store, corpus_store[1])
        p.send_signal(signal.SIGINT)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    log_lines = [json.loads(x) for x in (store / "mcp" / "requests.jsonl").read_text().splitlines()]
    rejected = [x for x in log_lines if x["outcome"] == "rejected"]
    assert [x["code"] for x in rejected][:3] == [401, 401, 421]
    assert {x["transport"] for x in log_lines} == {"http"}
    assert sum(1 for x in log_lines if x["method"] == "tools/call" and x["outcome"] == "ok") >= len(TOOL_CALLS)
    assert token not in (store / "mcp" / "requests.jsonl").read_text()


# --------------------------------------------------------------------------------------------------- rules
def _service(store: Path, **kw) -> MemoryService:
    return MemoryService(store, embedder="hashing", **kw)


async def _in_process(service: MemoryService):
    async with Client(build_server(service, RequestLog(service.store.path, "test"))) as c:
        return await _tour(c, wait_ready=False)


def test_an_empty_store_says_no_memory_yet_plainly(tmp_path):
    from filegram_ray.watch.config import WatchConfig
    from filegram_ray.watch.store import WatchStore

    (tmp_path / "w").mkdir()
    WatchStore.open_or_create(tmp_path / "store", [str(tmp_path / "w")], WatchConfig(content="redacted"))
    svc = _service(tmp_path / "store").start(background=False)
    svc.refresh_once()

    async def main():
        async with Client(build_server(svc, RequestLog(tmp_path / "store", "test"))) as c:
            return [await c.call_tool(n, a) for n, a in TOOL_CALLS], await c.get_prompt("work_like_this_user", {})

    results, prompt = anyio.run(main)
    for r in results:
        assert not r.is_error and r.structured_content["status"] == "no_memory"
        assert r.structured_content["message"].startswith("No memory yet: nothing has been recorded")
    assert _texts(prompt).startswith("No memory yet")


def test_a_memory_that_cannot_be_built_is_said_plainly_without_real_paths(corpus_store, tmp_path, monkeypatch):
    """When no session can be encoded (``update_memory`` raises ValueError naming the failures), every answer
    says "no memory yet", that the memory is not built and the problem, with the store's path replaced."""
    import filegram_ray.memory.incremental as incremental

    store = _copy(corpus_store[0], tmp_path / "store")

    def fails(*a, **kw):
        raise ValueError(f"memory update: profile 'real_user' has no session that could be encoded "
                         f"(S-1: OSError: cannot read {store}/sessions/S-1/events.jsonl)\nsecond line")

    monkeypatch.setattr(incremental, "update_memory", fails)
    svc = _service(store).start(background=False)
    svc.refresh_once()
    msg = svc.recall("budget", 3)["message"]
    assert msg.startswith("No memory yet: 3 closed session(s) recorded; the memory is not built."), msg
    assert "Last problem: memory update:" in msg and "STORE/sessions/S-1/events.jsonl" in msg
    assert str(store) not in msg and "second line" not in msg
    assert svc.profile()["status"] == "no_memory"


def test_a_store_recorded_with_full_content_is_refused(tmp_path, capsys):
    from filegram_ray.cli import main
    from filegram_ray.watch.config import WatchConfig
    from filegram_ray.watch.store import WatchStore

    (tmp_path / "w").mkdir()
    WatchStore.open_or_create(tmp_path / "store", [str(tmp_path / "w")], WatchConfig(content="full"))
    assert main(["mcp", "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--content full" in err[0] and "only redacted stores" in err[0]
    assert main(["mcp", "--store", str(tmp_path / "nothing")]) == 2
    assert "not a filegram watch store" in capsys.readouterr().err


def test_forget_rules_leave_out_a_path_through_its_renames_and_the_sessions_before_a_date(corpus_store,
                                                                                          tmp_path):
    """``--forget PATH`` (the later name of a renamed file) leaves out its events under every name, in every
    session, by forget's rules, and ``--forget DATE`` the sessions started before it; the store is not changed."""
    from filegram_ray.watch.store import WatchStore

    store = _copy(corpus_store[0], tmp_path / "store")
    root = corpus_store[1]
    before = {p: p.read_bytes() for p in (store / "sessions").rglob("events.jsonl")}
    plain = _service(store).start(background=False)
    plain.refresh_once()
    control = json.dumps(plain.recall("zebra quartz lighthouse diary", 50)["hits"])
    assert "private.md" in control and "private-old.md" in control  # the diary is in the plain memory
    svc = _service(store, forget=[str(root / "diary" / "private-old.md")]).start(background=False)
    svc.refresh_once()
    tour = anyio.run(_in_process, svc)
    hits = svc.recall("zebra quartz lighthouse diary", 50)["hits"]
    text = tour["text"] + json.dumps(hits) + svc.context()
    assert [w for w in DIARY_WORDS if w in text.lower()] == []
    assert svc.served_id.startswith("real_user~mcp-") and svc.profile()["sessions"] == 3
    assert {p: p.read_bytes() for p in (store / "sessions").rglob("events.jsonl")} == before
    recs = WatchStore.open(store).sessions()
    second = recs[1]["started_ms"]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(second / 1000)) + f".{int(second % 1000):03d}"
    dated = _service(store, forget=[iso]).start(background=False)
    dated.refresh_once()
    assert dated.profile()["sessions"] == 2
    assert {s["session"] for s in dated.recent_sessions(10)["sessions"]} == {r["task_id"] for r in recs[1:]}
    from filegram_ray.errors import UserError

    with pytest.raises(UserError, match="not inside a watched folder"):
        _service(store, forget=["/etc/passwd"])
    with pytest.raises(UserError, match="not a valid date"):
        _service(store, forget=["2026-13-45"])


def test_watch_forget_while_serving_withdraws_the_memory_and_rebuilds_it_without_the_file(corpus_store, tmp_path):
    from filegram_ray.watch.forget import forget

    store = _copy(corpus_store[0], tmp_path / "store")
    svc = _service(store, poll_s=0.1, refresh_s=0.5).start()
    try:
        assert svc.wait_ready(120)
        assert any(w in json.dumps(svc.recall("zebra quartz lighthouse diary", 10)) for w in DIARY_WORDS)
        r = forget(store, str(corpus_store[1] / "diary"))
        assert r["events_removed"] > 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            ans = svc.recall("zebra quartz lighthouse diary", 10)
            assert not any(w in json.dumps(ans) for w in DIARY_WORDS) or time.monotonic() - t0 < 1.0, \
                "forgotten content served more than a poll period after the forget"
            if ans["status"] == "ok" and svc.updates >= 2:
                break
            time.sleep(0.1)
        assert ans["status"] == "ok" and svc.profile()["sessions"] == 3
    finally:
        svc.close()


def test_memory_is_refreshed_while_serving_and_a_slow_update_blocks_no_request(tmp_path, monkeypatch):
    """A new session recorded while the server runs enters the memory through the ``memory update`` path; while an
    update runs (made slow here: 3 s more), every request is answered from the previous memory at once."""
    import filegram_ray.memory.incremental as incremental

    def one_session(name: str, text: str) -> None:
        w, root = start(tmp_path, content="redacted")
        try:
            (root / name).write_text(text)
            w.sync()
        finally:
            w.stop()

    one_session("a.md", "# first note\n\nbudget plans\n")
    svc = _service(tmp_path / "store", poll_s=0.1, refresh_s=0.3).start()
    try:
        assert svc.wait_ready(120) and svc.profile()["sessions"] == 1
        real = incremental.update_memory
        in_update = threading.Event()

        def slow(*a, **kw):
            in_update.set()
            time.sleep(3.0)
            return real(*a, **kw)

        monkeypatch.setattr(incremental, "update_memory", slow)
        one_session("b.md", "# second note\n\nholiday plans\n")
        assert in_update.wait(60)
        worst = 0.0
        while svc.profile()["sessions"] < 2:
            t0 = time.perf_counter()
            ans = svc.recall("plans", 3)
            worst = max(worst, time.perf_counter() - t0)
            assert ans["status"] == "ok"
            time.sleep(0.05)
        assert worst < 1.0, worst
        assert {h["session"] for h in svc.recall("holiday plans", 5)["hits"]} >= {
            s["session"] for s in svc.recent_sessions(1)["sessions"]}
    finally:
        svc.close()


# --------------------------------------------------------------------------------------------------- docs
def documented_sequence(tmp_path: Path, filegram: list[str], env: dict[str, str]) -> None:
    """docs/mcp.md "Quick start" after the install, command by command, with the command ``filegram`` (argv prefix)
    run under ``env``: `filegram watch DIR --out STORE` records a session, `filegram memory update STORE --embedder
    minilm-int8` builds the memory, `filegram mcp --store STORE` serves it to the SDK client over stdio, which lists
    and calls everything (schemas checked) and recalls the recorded note by meaning."""
    notes, store = tmp_path / "notes", tmp_path / "store"
    notes.mkdir(parents=True)
    watcher = subprocess.Popen([*filegram, "watch", str(notes), "--out", str(store), "--duration", "900",
                                "--status-every", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    out = []
    try:
        for line in watcher.stdout:  # the first status line comes from the running watcher
            out.append(line)
            if line.startswith("watch:"):
                break
        (notes / "reading-list.md").write_text("# Reading list\n\n- a book on gardening\n- a paper on memory\n")
        (notes / "ideas").mkdir()
        (notes / "ideas" / "garden.md").write_text("# Garden\n\nPlant tomatoes in May.\n")
        deadline = time.monotonic() + 120  # recorded after the watcher's 2 s quiet period
        while time.monotonic() < deadline and not any(
                "garden.md" in p.read_text("utf-8") for p in (store / "sessions").glob("*/events.jsonl")):
            time.sleep(0.2)
        watcher.send_signal(signal.SIGINT)
        out.append(watcher.communicate(timeout=120)[0])
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode in (0, 130) and "1 session(s)" in "".join(out), "".join(out)  # 130: Ctrl-C
    up = subprocess.run([*filegram, "memory", "update", str(store), "--embedder", "minilm-int8"], env=env,
                        capture_output=True, text=True, timeout=600)
    assert up.returncode == 0 and "1 session(s) encoded now" in up.stdout, up.stdout + up.stderr

    async def main():
        params = StdioServerParameters(command=filegram[0], args=[*filegram[1:], "mcp", "--store", str(store)],
                                       env=env)
        async with Client(params) as c:
            tour = await _tour(c)
            return tour, (await c.call_tool("recall", {"query": "growing vegetables", "k": 3})).structured_content

    tour, rec = anyio.run(main)
    assert tour["results"]["profile"].structured_content["sessions"] == 1
    hits = rec["hits"]
    assert rec["status"] == "ok" and hits and "garden" in (hits[0]["text"] + (hits[0]["file"] or "")).lower(), hits


def test_documented_sequence_watch_update_serve(tmp_path):
    """docs/mcp.md "Quick start" in this environment (tests/test_mcp_install.py runs it in a venv holding only
    what `pip install -e '.[watch,mcp]'` brings)."""
    doc = (REPO / "docs" / "mcp.md").read_text("utf-8")
    assert "pip install -e '.[watch,mcp]'" in doc and "--embedder minilm-int8" in doc
    documented_sequence(tmp_path, [sys.executable, "-m", "filegram_ray.cli"], {**os.environ, **_env()})


# --------------------------------------------------------------------------------------------------- the agent
def test_the_llm_agent_calls_the_memory_tools_and_gets_the_prompt(corpus_store, tmp_path):
    """The project's LLM agent with the MCP server's tools and prompt (filegram_ray/mcp/bridge.py), against a
    scripted chat server: the system prompt is the assistant prompt carrying `work_like_this_user`, the request
    offers the 8 behavioural tools and the 4 memory tools, a memory call is answered by the server (its answer goes
    back to the model), a malformed one comes back as an error, and the trajectory still writes its file."""
    from scripted_chat_server import ScriptedChatServer, completion, native_call

    from filegram_ray.engine.agents.llm_agent import ChatEndpoint, LLMAgentConfig, run_llm_trajectory
    from filegram_ray.engine.agents.prompts import assistant_prompt
    from filegram_ray.mcp.bridge import agent_tools, prompt_text
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    store = _copy(corpus_store[0], tmp_path / "store")
    svc = _service(store).start(background=False)
    svc.refresh_once()
    profile = next(p for p in load_profiles(None) if p.profile_id.startswith("p3"))
    task = next(t for t in load_tasks(None) if t.task_id == "T-03")
    script = [completion(None, [native_call("how_does_the_user", {"aspect": "organization"}, "m1")]),
              completion(None, [native_call("recall", {"k": 999}, "m2")]),
              completion(None, [native_call("write", {"file_path": "summary.md", "content": "# Summary\n"}, "w1")]),
              completion("Done.")]

    async def main():
        async with Client(build_server(svc, RequestLog(store, "test"))) as c:
            memory = await prompt_text(c, "work_like_this_user")
            tools = await agent_tools(c)
            with ScriptedChatServer(lambda body, n: script[n - 1]) as srv:
                cfg = LLMAgentConfig(base_url=srv.base_url, max_nudges=0)
                ep = ChatEndpoint(srv.base_url, srv.model)
                try:
                    res = await run_llm_trajectory(profile, task, None, tmp_path / "w", seed=7, endpoint=ep,
                                                   cfg=cfg, system_text=assistant_prompt("en", memory),
                                                   extra_tools=tools)
                finally:
                    await ep.aclose()
                return memory, res, srv.requests

    memory, res, reqs = anyio.run(main)
    try:
        assert res.stop_reason == "finished" and res.session.output_files()
        assert [t["function"]["name"] for t in reqs[0]["tools"]][-4:] == ["how_does_the_user", "recall",
                                                                           "recent_sessions", "profile"]
        system = reqs[0]["messages"][0]["content"]
        assert "work the way I do" in system and memory in system and "Sam Taylor" not in system
        answer = reqs[1]["messages"][-1]["content"]
        assert '"aspect": "organization"' in answer and '"tier"' in answer
        refused = reqs[2]["messages"][-1]["content"]
        assert "could not be used" in refused and "less than or equal to 50" in refused
        names = [e["tool_name"] for e in res.session.events if e["event_type"] == "tool_call"]
        assert names == ["write"]  # memory calls touch no file and make no event
    finally:
        res.session.close()
