"""The LLM agent (issue 15) without a model: tool-call parsing, prompts that never carry ground truth, and the
think → act → observe loop against a scripted OpenAI-compatible HTTP server (tests/scripted_chat_server.py):
malformed calls become tool errors the model sees, confirmation/continue turns, limits, compaction, retries with
back-off, a dead server failing fast with its URL, many sessions in flight per actor, and the generate stage end to
end (events.json passes the filter and encodes, transcript beside the raw events, perturbation in meta.json only).
The real-model run is tests/test_llm_agent_e2e.py."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from filegram_ray.config import load_config
from filegram_ray.engine.agents.llm_agent import (
    ChatEndpoint,
    LLMAgentConfig,
    LLMServerUnavailable,
    probe_endpoint,
    run_llm_trajectory,
)
from filegram_ray.engine.agents.prompts import leaked_terms, system_prompt, task_prompt
from filegram_ray.engine.agents.toolcalls import parse_tool_calls
from filegram_ray.engine.filter import filter_events
from filegram_ray.llm.server import free_port
from filegram_ray.memory.engram import encode_engram
from filegram_ray.profiles import load_profiles
from filegram_ray.schema.events import LEAKAGE_FIELDS, parse_event
from filegram_ray.tasks import load_tasks
from tests.scripted_chat_server import ScriptedChatServer, completion, native_call

PROFILES = {p.profile_id.split("_")[0]: p for p in load_profiles(None)}
TASKS = {t.task_id: t for t in load_tasks(None)}


# --- tool-call parsing ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, name, args", [
    ('```json\n{"name": "list", "arguments": {"path": "."}}\n```', "list", {"path": "."}),
    ('Let me read.\n<tool_call>\n{"name": "read", "arguments": {"file_path": "a.md"}}\n</tool_call>', "read",
     {"file_path": "a.md"}),
    ('{"name": "write", "arguments": {"file_path": "a.md", "content": "# T\nline {x}"}}', "write",
     {"file_path": "a.md", "content": "# T\nline {x}"}),                      # raw newline and braces in a string
    ('{"name": "glob", "arguments": "{\\"pattern\\": \\"*.md\\"}"}', "glob", {"pattern": "*.md"}),  # args as text
    ('{"function": {"name": "list", "arguments": {}}}', "list", {}),
    ('functions.read:\n{"file_path": "x.md",}', "read", {"file_path": "x.md"}),  # chatml-function-calling, comma
    ('{"tool": "grep", "parameters": {"pattern": "Q3"}}', "grep", {"pattern": "Q3"}),
])
def test_tool_calls_in_content(content, name, args):
    calls, _rest = parse_tool_calls({"content": content})
    assert len(calls) == 1 and calls[0].ok and calls[0].source == "content"
    assert calls[0].name == name and calls[0].arguments == args


def test_tool_calls_native_and_several_and_none():
    calls, rest = parse_tool_calls({"content": "", "tool_calls": [
        native_call("read", {"file_path": "a"}, "c1"), native_call("list", "", "c2")]})
    assert [(c.id, c.name, c.arguments, c.source) for c in calls] == [
        ("c1", "read", {"file_path": "a"}, "native"), ("c2", "list", {}, "native")]
    calls, _ = parse_tool_calls({"content": '[{"name": "list", "arguments": {}}, {"name": "read", "arguments": '
                                            '{"file_path": "b"}}]'})
    assert [c.name for c in calls] == ["list", "read"] and all(c.ok for c in calls)
    calls, rest = parse_tool_calls({"content": "All done: summary.md is written."})
    assert calls == [] and rest == "All done: summary.md is written."
    # JSON that is not a call is text: no tool named, or a "name" that is no tool and no arguments
    calls, _ = parse_tool_calls({"content": 'The file holds {"a": 1}.'})
    assert calls == []
    calls, _ = parse_tool_calls({"content": '```json\n{"name": "Investment Analysis Framework", "sections": []}\n```'})
    assert calls == []
    calls, _ = parse_tool_calls({"content": '{"name": "read_file", "arguments": {"file_path": "a"}}'})
    assert [(c.name, c.ok) for c in calls] == [("read_file", True)]  # runs; the session answers "unknown tool"


@pytest.mark.parametrize("message, needle", [
    ({"tool_calls": [native_call("read", "{bad json")]}, "not valid JSON"),
    ({"tool_calls": [native_call("read", "[1, 2]")]}, "must be a JSON object"),
    ({"tool_calls": [{"id": "x", "type": "function", "function": {"name": 7, "arguments": "{}"}}]}, "name"),
    ({"content": '{"name": "write", "arguments": {"file_path": "a.md", "content": "cut off'}, "not valid JSON"),
    ({"content": "functions.read:"}, "no arguments"),
    ({"content": '{"name": ["read"], "arguments": {}}'}, "name must be a string"),
])
def test_malformed_calls_are_errors_not_crashes(message, needle):
    calls, _ = parse_tool_calls(message)
    assert len(calls) == 1 and not calls[0].ok and needle in calls[0].error


# --- prompts ----------------------------------------------------------------------------------------------------

def test_prompts_carry_no_tier_letter_or_dimension_name():
    for p in PROFILES.values():
        perts = [None] + [{"dimension": d, "from": p.tiers[d], "to": "M" if p.tiers[d] != "M" else "R"}
                          for d in "ABCDEF"]
        for pert in perts:
            sp = system_prompt(p, pert)
            assert p.name in sp and leaked_terms(sp) == [], (p.profile_id, pert, leaked_terms(sp))
            for t in TASKS.values():
                assert leaked_terms(task_prompt(t, p, pert)) == [], (p.profile_id, t.task_id, pert)
    # the checker itself finds what it must
    assert set(leaked_terms("C:L, B-R, M→L, organization, cross_modal, deeply_nested, tier")) >= {
        "C:L", "B-R", "M→L", "organization", "cross_modal", "deeply_nested", "tier"}


def test_prompt_language_and_perturbation_shift():
    p1, p3 = PROFILES["p1"], PROFILES["p3"]
    assert p1.language == "Chinese" and "你是" in system_prompt(p1) and TASKS["T-12"].prompt_zh in \
        task_prompt(TASKS["T-12"], p1)
    assert p3.language == "English" and TASKS["T-03"].prompt_en in task_prompt(TASKS["T-03"], p3)
    # p3 writes B-R (short, flat lists); shifted to M the prompt asks for the balanced document instead
    base, shifted = system_prompt(p3), system_prompt(p3, {"dimension": "B", "from": "R", "to": "M"})
    assert "One short file of at most 60 lines, flat bullet points" in base
    assert "One short file of at most 60 lines" not in shifted and "about 80-150 lines" in shifted
    tp = task_prompt(TASKS["T-12"], p3, {"dimension": "B", "from": "R", "to": "M"})
    assert tp.startswith(TASKS["T-12"].prompt_en) and "Behavioural adjustment" in tp and "80-150 lines" in tp
    assert "Behavioural adjustment" not in task_prompt(TASKS["T-12"], p3)


# --- the loop against a scripted server -------------------------------------------------------------------------

def _bundle(tmp_path: Path) -> Path:
    files = tmp_path / "bundle" / "files"
    (files / "notes").mkdir(parents=True)
    (files / "notes" / "a.md").write_text("# Notes A\nRevenue grew 12% in Q3.\n", encoding="utf-8")
    (files / "notes" / "b.md").write_text("# Notes B\nCosts were flat.\n", encoding="utf-8")
    return tmp_path / "bundle"


def _run(srv, tmp_path, cfg=None, profile="p3", task="T-03", perturbation=None, bundle=True):
    cfg = cfg or LLMAgentConfig(base_url=srv.base_url, backoff_s=0.01, retries=1)

    async def go():
        ep = ChatEndpoint(srv.base_url, srv.model, retries=cfg.retries, backoff_s=cfg.backoff_s, timeout_s=30)
        try:
            return await run_llm_trajectory(PROFILES[profile], TASKS[task], _bundle(tmp_path) if bundle else None,
                                            tmp_path / "work", seed=7, endpoint=ep, cfg=cfg,
                                            perturbation=perturbation, provider="scripted-provider")
        finally:
            await ep.aclose()

    return asyncio.run(go())


def test_loop_tool_errors_turns_and_events(tmp_path):
    """Native and text calls run through the sandbox; a malformed call and an unknown tool come back as errors the
    model sees; a confirmation question gets "Yes, proceed."; a plain reply after a write ends the trajectory."""
    script = [
        completion(None, [native_call("list", {"path": "."})]),
        completion('```json\n{"name": "read", "arguments": {"file_path": "notes/a.md"}}\n```'),
        completion(None, [native_call("write", "{not json", "bad1")]),
        completion('{"name": "read_file", "arguments": {"file_path": "notes/b.md"}}'),
        completion(None, [native_call("write", {"file_path": "summary.md", "content": "# Summary\n- Q3 +12%\n"}),
                          native_call("bash", {"command": "mkdir -p archive && cp summary.md archive/s.md"}, "c2")]),
        completion("I wrote summary.md. Shall I also add a chart?"),
        completion("Done: summary.md holds the summary."),
    ]
    with ScriptedChatServer(lambda body, n: script[n - 1]) as srv:
        res = _run(srv, tmp_path)
        reqs = srv.requests
    assert res.stop_reason == "finished" and res.iterations == 7
    assert res.tool_calls == 5 and res.malformed_calls == 1  # list, read, read_file (unknown: runs, fails), write, bash
    # every request carries the 8 tools and the persona prompt; no ground truth anywhere
    for body in reqs:
        assert [t["function"]["name"] for t in body["tools"]] == ["read", "write", "edit", "multiedit", "grep",
                                                                  "glob", "list", "bash"]
        assert body["messages"][0]["role"] == "system" and "Sam Taylor" in body["messages"][0]["content"]
        for m in body["messages"]:
            if m["role"] in ("system", "user"):
                assert leaked_terms(m["content"]) == []
            assert m.get("content") is not None  # never None (llama-cpp-python rejects it)
    # tool results come back as tool messages tied to the call ids
    tool_msgs = [m for m in reqs[1]["messages"] if m["role"] == "tool"]
    assert tool_msgs and "notes" in tool_msgs[0]["content"]
    assert "Revenue grew 12%" in reqs[2]["messages"][-1]["content"]
    bad = reqs[3]["messages"][-1]
    assert bad["role"] == "tool" and bad["tool_call_id"] == "bad1" and "not valid JSON" in bad["content"]
    assert "unknown tool" in reqs[4]["messages"][-1]["content"]
    assert reqs[6]["messages"][-1] == {"role": "user", "content": "Yes, proceed."}
    sess = res.session
    try:
        raw = sess.events
        for i, e in enumerate(raw):
            parse_event(e, i)  # the simulator's event schema
            assert e["model_provider"] == "scripted-provider" and e["model_name"] == "scripted"
        types = [e["event_type"] for e in raw]
        assert types[0] == "session_start" and types[-1] == "session_end"
        assert types.count("iteration_start") == 7 and types.count("llm_response") == 7
        calls = [e for e in raw if e["event_type"] == "tool_call"]
        assert [c["tool_name"] for c in calls] == ["list", "read", "read_file", "write", "bash"]
        assert [c["success"] for c in calls] == [True, True, False, True, True]
        ids = {e["message_id"] for e in raw if e["event_type"] == "llm_response"}
        assert len(ids) == 2  # a new user turn (the injected "proceed") gets a new message id
        kept = filter_events(raw)
        assert {e["event_type"] for e in kept} >= {"file_browse", "file_read", "file_write", "dir_create",
                                                    "file_copy"}
        assert not any(f in e for e in kept for f in LEAKAGE_FIELDS)
        engram = encode_engram(kept, "p3/T-03", "T-03")
        assert engram.procedural["output_detail"]["files_created"] >= 1 and len(engram.fingerprint) == 17
        tr = res.transcript
        assert tr["stop_reason"] == "finished" and len(tr["turns"]) == 7 and tr["messages"][0]["role"] == "system"
        assert tr["turns"][2]["calls"][0]["error"].startswith("arguments are not valid JSON")
    finally:
        sess.close()


def test_continue_turn_and_limits(tmp_path):
    # stops before writing anything → "continue" turns (at most max_nudges), then the nudge limit
    with ScriptedChatServer(lambda body, n: completion("I think this is fine.")) as srv:
        res = _run(srv, tmp_path / "a", LLMAgentConfig(base_url=srv.base_url, max_nudges=2))
        assert res.stop_reason == "nudge_limit" and res.iterations == 3
        assert "Continue and carry out the task" in srv.requests[1]["messages"][-1]["content"]
        res.session.close()
    # never stops calling tools → the iteration limit, a complete session
    with ScriptedChatServer(lambda body, n: completion(None, [native_call("list", {})])) as srv:
        res = _run(srv, tmp_path / "b", LLMAgentConfig(base_url=srv.base_url, max_iterations=3))
        assert res.stop_reason == "iteration_limit" and res.iterations == 3 and res.tool_calls == 3
        assert res.session.events[-1]["event_type"] == "session_end"
        # the sandbox's real-time budget covers the model's time (the simulator's 600 s would cut a slow model off)
        assert res.session.limits.max_wall_s >= 1800 + 600
        res.session.close()
        res = _run(srv, tmp_path / "c", LLMAgentConfig(base_url=srv.base_url, max_total_tokens=250))
        assert res.stop_reason == "token_limit" and res.iterations == 3  # 120 tokens per scripted reply
        res.session.close()


def test_compaction_prunes_old_tool_outputs(tmp_path):
    big = "x" * 3000 + "\n"
    bundle_files = tmp_path / "bundle" / "files"

    def script(body, n):
        if n <= 4:
            return completion(None, [native_call("read", {"file_path": f"big{n}.txt"})])
        return completion("Done.")

    with ScriptedChatServer(script) as srv:
        cfg = LLMAgentConfig(base_url=srv.base_url, context_tokens=2048, max_tokens=256, max_nudges=0)
        bundle_files.mkdir(parents=True)
        for i in range(1, 5):
            (bundle_files / f"big{i}.txt").write_text(big)

        async def go():
            ep = ChatEndpoint(srv.base_url, srv.model)
            try:
                return await run_llm_trajectory(PROFILES["p3"], TASKS["T-03"], tmp_path / "bundle", tmp_path / "w",
                                                seed=1, endpoint=ep, cfg=cfg)
            finally:
                await ep.aclose()

        res = asyncio.run(go())
        last = srv.requests[-1]["messages"]
    try:
        assert any("older tool output removed" in str(m.get("content")) for m in last)
        types = [e["event_type"] for e in res.session.events]
        k = types.index("compaction_triggered")
        assert types[k - 1] == "iteration_start" and types[k + 1] == "llm_response"  # reference §3.3 frame
        ev = res.session.events[k]
        assert ev["tokens_saved"] > 0 and ev["messages_after"] < ev["messages_before"]
    finally:
        res.session.close()


def test_retries_back_off_and_rejected_request(tmp_path):
    def flaky(body, n):
        return (503, {"error": {"message": "busy"}}) if n <= 2 else completion("Nothing to do.")

    with ScriptedChatServer(flaky) as srv:
        res = _run(srv, tmp_path / "a", LLMAgentConfig(base_url=srv.base_url, retries=3, backoff_s=0.01,
                                                       max_nudges=0))
        assert res.transcript["turns"][0]["attempts"] == 3 and res.stop_reason == "nudge_limit"
        res.session.close()
    # a 400 (e.g. a prompt over the context) is not retried: the trajectory ends incomplete, no session_end
    with ScriptedChatServer(lambda b, n: (400, {"error": {"message": "context length exceeded"}})) as srv:
        res = _run(srv, tmp_path / "b", LLMAgentConfig(base_url=srv.base_url, retries=3))
        assert res.stop_reason == "llm_error" and "context length exceeded" in res.transcript["error"]
        assert len(srv.requests) == 1 and not res.session.completed
        assert res.session.events[-1]["event_type"] == "fs_snapshot"
        res.session.close()


def test_dead_server_fails_fast_with_its_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMServerUnavailable, match=url.replace(".", r"\.")):
        probe_endpoint(url, timeout_s=1.0)
    from filegram_ray.engine.generate import run_generate

    cfg = load_config(None, [f"run_dir={tmp_path / 'run'}", "profiles=[p3]", "tasks=[T-03]", "generate.executor=serial",
                             "generate.agent=llm", f"generate.llm.base_url={url}", "generate.llm.probe_timeout_s=1"])
    with pytest.raises(ConnectionError, match="not reachable"):
        run_generate(cfg)
    # a server that dies mid-run: sessions stop at once, error rows name the URL (no per-session retry storm)
    with ScriptedChatServer(lambda b, n: (502, {"error": {"message": "bad gateway"}})) as srv:
        ep_cfg = LLMAgentConfig(base_url=srv.base_url, retries=2, backoff_s=0.01)
        with pytest.raises(LLMServerUnavailable, match=srv.base_url):
            _run(srv, tmp_path / "c", ep_cfg)
        assert len(srv.requests) == 3


def test_config_errors_name_the_field():
    from pydantic import ValidationError

    from filegram_ray.engine.generate import GenerateConfig

    with pytest.raises(ValidationError, match="generate.llm.base_url"):
        GenerateConfig.model_validate({"agent": "llm"})
    with pytest.raises(ValidationError, match="must start with http"):
        GenerateConfig.model_validate({"agent": "llm", "llm": {"base_url": "localhost:8000"}})
    with pytest.raises(ValidationError, match="extra"):
        GenerateConfig.model_validate({"agent": "llm", "llm": {"base_url": "http://x/v1", "temprature": 1}})



def test_vllm_replica_command_tensor_parallel_from_num_gpus():
    """``serve.num_gpus`` ≥ 2 shards the model over the replica's GPUs; ``args`` wins; one GPU or a fraction adds
    nothing (vLLM's default 1). The command is only built here: no GPU or vLLM needed."""
    from filegram_ray.engine.agents.llm_agent import ServeConfig
    from filegram_ray.engine.agents.serve import vllm_command

    def cmd(**kw):
        return vllm_command(ServeConfig(kind="vllm", model="/models/m", **kw), "0.0.0.0", 8000)

    c = cmd(num_gpus=4)
    assert c[c.index("--tensor-parallel-size") + 1] == "4"
    assert c[c.index("--tool-call-parser") + 1] == "hermes" and "--enable-auto-tool-choice" in c
    assert "--tensor-parallel-size" not in cmd(num_gpus=1) and "--tensor-parallel-size" not in cmd(num_gpus=0.5)
    c = cmd(num_gpus=2, args=["--tensor-parallel-size", "1", "--pipeline-parallel-size", "2"])
    assert c.count("--tensor-parallel-size") == 1 and c[c.index("--tensor-parallel-size") + 1] == "1"

# --- the generate stage -----------------------------------------------------------------------------------------

class _Concurrency:
    def __init__(self):
        self.now = self.peak = 0
        self.lock = threading.Lock()


def test_generate_stage_llm_agent(tmp_path):
    """The stage with ``generate.agent=llm``: shards of trajectories, many in flight at once in one worker,
    simulator-format files + transcript, perturbation only in meta.json, resume."""
    from filegram_ray.engine.generate import run_generate
    from filegram_ray.profiles.perturbation import plan_perturbations

    plan = plan_perturbations(list(PROFILES.values()), 7)
    pert_task = next(t for (p, t) in plan if p == "p3_efficient_executor")
    tasks = ["T-03", "T-04", pert_task]
    conc = _Concurrency()

    def script(body, n):
        with conc.lock:
            conc.now += 1
            conc.peak = max(conc.peak, conc.now)
        try:
            import time

            time.sleep(0.2)
            msgs = body["messages"]
            if msgs[-1]["role"] == "user" and len(msgs) == 2:
                return completion(None, [native_call("write", {"file_path": "notes.md", "content": "# Notes\n"})])
            return completion("Done.")
        finally:
            with conc.lock:
                conc.now -= 1

    with ScriptedChatServer(script) as srv:
        over = [f"run_dir={tmp_path / 'run'}", "seed=7", "profiles=[p3]", f"tasks=[{','.join(tasks)}]",
                "generate.executor=serial", "generate.agent=llm", f"generate.llm.base_url={srv.base_url}",
                "generate.llm.sessions_per_actor=3", "workspace.tts=tone"]
        rec = run_generate(load_config(None, over))
        assert rec["ok"] == 3 and rec["error"] == 0 and conc.peak >= 2  # sessions overlap on one worker
        rec2 = run_generate(load_config(None, over))
        assert rec2["skipped"] == 3 and len(srv.requests) == 6  # resumed: no new request
    root = tmp_path / "run" / "trajectories" / "p3_efficient_executor"
    for t in tasks:
        d = root / t
        for name in ("events_raw.json", "events.json", "summary.json", "meta.json", "transcript.json",
                     "media/manifest.json", "outputs/notes.md"):
            assert (d / name).exists(), (t, name)
        events = json.loads((d / "events.json").read_text())
        raw = json.loads((d / "events_raw.json").read_text())
        assert events == filter_events(raw) and not any(f in e for e in events for f in LEAKAGE_FIELDS)
        assert {e["model_name"] for e in raw} == {"scripted"}
        encode_engram(events, f"p3_efficient_executor/{t}", t, d / "media")
        meta = json.loads((d / "meta.json").read_text())
        assert meta["agent_kind"] == "llm-agent" and meta["completed"] is True
        pert = meta["perturbation"]
        assert (pert is not None) == (t == pert_task)
        tr = json.loads((d / "transcript.json").read_text())
        assert tr["stop_reason"] == "finished" and tr["model"] == "scripted"
        blob = (d / "events.json").read_text() + (d / "summary.json").read_text()
        assert "perturb" not in blob.lower()


def test_stage_server_dies_mid_run_error_rows_name_url(tmp_path):
    """The probe answers, then every completion fails: the shard stops at once (one session's retries, not one
    per trajectory) and each trajectory becomes an error row naming the URL."""
    from filegram_ray.engine.generate import run_generate

    with ScriptedChatServer(lambda b, n: (503, {"error": {"message": "overloaded"}})) as srv:
        over = [f"run_dir={tmp_path / 'run'}", "profiles=[p3]", "tasks=[T-03,T-04]", "generate.executor=serial",
                "generate.agent=llm", f"generate.llm.base_url={srv.base_url}", "generate.llm.retries=2",
                "generate.llm.backoff_s=0.01", "generate.llm.sessions_per_actor=1"]
        rec = run_generate(load_config(None, over))
        assert rec["ok"] == 0 and rec["error"] == 2 and len(srv.requests) == 3
    from filegram_ray.storage import RunDir

    idx = RunDir(str(tmp_path / "run")).read_table("trajectories/index.parquet")
    assert all(srv.base_url in e for e in idx["error"].to_list())


def test_stage_llm_agent_on_ray_actors(tmp_path, ray_local):
    """The same stage on Ray actors: shards travel to 2 actors, each runs its sessions, rows come back per
    trajectory."""
    from filegram_ray.engine.generate import run_generate

    def script(body, n):
        if len(body["messages"]) == 2:
            return completion(None, [native_call("write", {"file_path": "a.md", "content": "# A\n"})])
        return completion("Done.")

    with ScriptedChatServer(script) as srv:
        over = [f"run_dir={tmp_path / 'run'}", "profiles=[p3,p17]", "tasks=[T-03,T-04]", "generate.agent=llm",
                "generate.num_actors=2", "generate.num_cpus_per_actor=0.5", f"generate.llm.base_url={srv.base_url}",
                "generate.llm.shard_size=2", "generate.llm.sessions_per_actor=2"]
        rec = run_generate(load_config(None, over))
    assert rec["ok"] == 4 and rec["error"] == 0 and len(srv.requests) == 8
    for p in ("p3_efficient_executor", "p17_creative_archivist"):
        for t in ("T-03", "T-04"):
            d = tmp_path / "run" / "trajectories" / p / t
            assert (d / "transcript.json").exists() and (d / "outputs" / "a.md").read_text() == "# A\n"


def test_cli_prints_the_prompts(capsys):
    from filegram_ray.cli import main

    assert main(["engine", "prompt", "p3", "T-12", "--perturb", "B:M"]) == 0
    out = capsys.readouterr().out
    assert "===== system =====" in out and "Sam Taylor" in out and "Behavioural adjustment" in out
    assert leaked_terms(out) == []


def _documented_generate_commands(readme: str) -> list[list[str]]:
    """argv (``python jobs/generate.py …``) of every ``ray job submit`` in ``readme``'s bash blocks that runs the LLM
    agent (continuation lines joined; a quoted value may span lines)."""
    import shlex

    cmds = []
    for block in readme.split("```bash")[1:]:
        logical, buf = [], ""
        for ln in block.split("```")[0].replace("\\\n", " ").split("\n"):
            buf = f"{buf}\n{ln}" if buf else ln
            if buf.count("'") % 2 == 0:
                logical.append(buf)
                buf = ""
        for line in logical:
            argv = shlex.split(line, comments=True)
            if argv[:3] == ["ray", "job", "submit"]:
                argv = argv[argv.index("--") + 1:]
                if argv[:2] == ["python", "jobs/generate.py"] and "generate.agent=llm" in argv:
                    cmds.append(argv)
    return cmds


def test_cluster_readme_llm_agent_commands_parse(tmp_path):
    """cluster/README.md's ``ray job submit … jobs/generate.py --set generate.agent=llm`` commands (the stage starts
    vLLM on the GPU group; a base_url such as the Serve app of ``cluster/serve-llm-agent.yaml``) parse into the
    stage's config (the s3:// run directory is swapped for a local one: parsing reads no bucket), and that manifest
    serves, on a GPU of a type Ray knows, the model name and port the README's base_url uses, with tool calls parsed."""
    import ray.util.accelerators as accel
    import yaml

    from filegram_ray.engine.generate import GenerateConfig
    from filegram_ray.jobargs import common_parser, config_from_args

    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "cluster" / "README.md").read_text(encoding="utf-8")
    cmds = _documented_generate_commands(readme)
    kinds = set()
    for argv in cmds:
        argv = [a.replace("conf/cluster.yaml", str(repo / "conf" / "cluster.yaml")) for a in argv[2:]]
        args = common_parser("generate").parse_args([*argv, "--run-dir", str(tmp_path / "run")])
        g = GenerateConfig.model_validate(config_from_args(args, sections=["generate"]).section("generate"))
        assert g.agent == "llm" and g.llm.sessions_per_actor == 32 and g.num_actors == 8
        if g.llm.serve is not None:
            assert g.llm.serve.kind == "vllm" and g.llm.serve.model.startswith("/models/") and g.llm.serve.num_gpus
            kinds.add("serve")
        else:
            assert g.llm.urls() == ["http://HEAD:8000/v1"]
            kinds.add("base_url")
    assert kinds == {"serve", "base_url"}, cmds

    doc = yaml.safe_load((repo / "cluster" / "serve-llm-agent.yaml").read_text(encoding="utf-8"))
    assert doc["http_options"]["port"] == 8000
    (app,) = doc["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    (llm,) = app["args"]["llm_configs"]
    assert llm["model_loading_config"]["model_id"] == "agent"
    assert llm["model_loading_config"]["model_source"].startswith("/models/")
    known = {v for k, v in vars(accel).items() if k.isupper() and isinstance(v, str)}
    assert llm["accelerator_type"] in known
    assert llm["engine_kwargs"]["enable_auto_tool_choice"] is True
    assert llm["engine_kwargs"]["tool_call_parser"] == "hermes"
    ray_cluster = yaml.safe_load((repo / "cluster" / "kuberay-raycluster.yaml").read_text(encoding="utf-8"))
    assert ray_cluster["spec"]["enableInTreeAutoscaling"] is True
    gpu = next(g for g in ray_cluster["spec"]["workerGroupSpecs"] if g["groupName"] == "gpu")
    assert gpu["maxReplicas"] >= 1 and gpu["rayStartParams"]["num-gpus"] == "1"
