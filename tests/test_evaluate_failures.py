"""Failed items are not results (issue 52 item 2): a server that refuses or drops every long prompt leaves a method
with error rows, never with a score of 0, a ◆ or a paired test; the report names the cause and the setting that
fixes it. Replays BR3-04 against a real local Ray and an OpenAI-compatible server on loopback whose context window
is a few thousand characters (llama-server's 400 ``exceed_context_size_error``, LM Studio's 200 with empty content).
"""

from __future__ import annotations

import polars as pl
import pytest
from evaluate_fixtures import make_run
from scripted_chat_server import ScriptedChatServer, completion

from filegram_ray.config import load_config
from filegram_ray.evaluate.failures import error_cause, failure_summary, fix_hint
from filegram_ray.evaluate.stage import run_evaluate

#: the stub's window in characters of the messages (llama-server with a small --ctx-size); No Context's prompts
#: fit, Full Context's do not
WINDOW_CHARS = 2400


def _window_server(mode: str):
    def script(body, n):
        chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        if chars <= WINDOW_CHARS:
            return completion("Answer: A", prompt_tokens=chars // 3, completion_tokens=3)
        if mode == "ctx":
            return 400, {"error": {"code": 400, "type": "exceed_context_size_error",
                                   "message": f"request ({chars // 3} tokens) exceeds the available context size "
                                              f"({WINDOW_CHARS // 3} tokens), try increasing it"}}
        return completion("", prompt_tokens=chars // 3, completion_tokens=0)  # LM Studio's GGUF path

    return ScriptedChatServer(script, model="local")


def _cfg(root, url, **section):
    base = {"methods": ["no_context", "full_context"], "settings": ["text"], "sample_per_sub_task": None,
            "plots": False, "ingest_llm": False, "num_actors": 1, "validity": False, "judge": "rubric",
            "backbone": {"kind": "openai", "base_url": url, "model": "local", "batch_size": 4, "max_retries": 0}}
    base.update(section)
    return load_config(overrides={"run_dir": str(root), "evaluate": base})


@pytest.mark.parametrize("mode", ["ctx", "empty"])
def test_br3_04_a_method_that_never_got_an_answer_is_reported_failed_not_scored(mode, ray_local, tmp_path):
    """BR3-04: every Full Context prompt exceeds the server's window. Its items are error rows without a score,
    the report's row says failed with no number, no ◆, no paired test; the section Failed items names the cause,
    the server's own text and `evaluate.max_context_chars`; No Context (which fits) is scored as usual. Cutting
    the contexts to the suggested value makes Full Context answer."""
    run = make_run(tmp_path / "run")
    with _window_server(mode) as srv:
        info = run_evaluate(_cfg(tmp_path / "run", srv.base_url))
        res = run.read_table("results/results.parquet")
        fc, nc = (res.filter(pl.col("method") == m) for m in ("full_context", "no_context"))
        assert fc.height and set(fc["status"].to_list()) == {"error"}
        assert fc["score"].null_count() == fc.height and fc["is_correct"].null_count() == fc.height
        assert nc.filter(pl.col("status") == "ok").height == nc.height
        assert info["failed_methods"] == ["full_context"]
        summary = run.read_table("results/summary.parquet").filter(pl.col("method") == "full_context").to_dicts()[0]
        assert summary["failed"] and summary["avg"] is None and summary["n_scored"] == 0
        report = run.read_text("results/report.md")
        row = next(line for line in report.splitlines() if line.startswith("| Full Context"))
        assert "failed" in row and "no result" in row and "◆" not in row and "0.0" not in row
        assert "◆" not in report.split("## Intervals")[0]
        paired = run.read_table("results/paired.parquet")
        assert "full_context" not in paired["method"].to_list() + paired["baseline"].to_list()
        failed_part = report.split("## Failed items")[1]
        want = "exceeds the available context size" if mode == "ctx" else "empty reply"
        assert want in failed_part and "evaluate.max_context_chars" in failed_part
        hint = failure_summary(res)["methods"]["full_context"]["hint"]
        if mode == "ctx":  # the server said its window: the hint names a value, and that value makes it fit
            value = int(hint.split("max_context_chars=")[1].split("`")[0])
            assert value == max(1000, 3 * (WINDOW_CHARS // 3 - 500))
            fixed = make_run(tmp_path / "fixed")
            run_evaluate(_cfg(tmp_path / "fixed", srv.base_url, max_context_chars=value))
            again = fixed.read_table("results/results.parquet").filter(pl.col("method") == "full_context")
            assert again.filter(pl.col("status") == "ok").height == again.height


def test_error_causes_and_hints():
    assert error_cause("status reply: HTTP 400: request (9057 tokens) exceeds the available context size (2000 "
                       "tokens), try increasing it") == "context_overflow"
    assert error_cause("status reply: HTTP 400: This model's maximum context length is 4096 tokens") == \
        "context_overflow"
    assert error_cause("malformed reply: empty reply (finish_reason stop) (after 3 attempts)") == "empty_reply"
    assert error_cause("reply states no single option (states no option letter): 'hmm'") == "no_option"
    assert error_cause("judge reply without a 1-5 score") == "judge"
    assert error_cause("transport reply: ConnectError: refused") == "transport"
    assert error_cause("ingest failed: ValueError: bad") == "method"
    assert "max_context_chars=10788" in fix_hint("context_overflow", [
        "status reply: HTTP 400: This model's maximum context length is 4096 tokens"], 20000)
    assert "(now 20,000)" in fix_hint("context_overflow", ["context size (4096 tokens)"], 20000)
    assert fix_hint("judge", ["judge reply without a 1-5 score"]) == ""
