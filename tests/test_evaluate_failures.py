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

#: the stub's window in characters of the messages (llama-server with a small --ctx-size): the hand-made run's No
#: Context prompts (at most 642 characters) fit, every Full Context prompt (1,001 and more) does not
WINDOW_CHARS = 980


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
        assert not [line for line in report.split("## Intervals")[0].splitlines()
                    if line.startswith("|") and "◆" in line]  # no marker in the table
        paired = run.read_table("results/paired.parquet")
        assert "full_context" not in paired["method"].to_list() + paired["baseline"].to_list()
        failed_part = report.split("## Failed items")[1]
        want = "exceeds the available context size" if mode == "ctx" else "empty reply"
        assert want in failed_part and "evaluate.max_context_chars" in failed_part
        hint = failure_summary(res)["methods"]["full_context"]["hint"]
        if mode == "ctx":  # the server said its window: the hint names a value, and that value makes it fit
            value = int(hint.split("max_context_chars=")[1].split("`")[0])
            assert 200 <= value < WINDOW_CHARS
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
    assert fix_hint("judge", ["judge reply without a 1-5 score"]) == ""


def test_suggested_context_cut_fits_the_stated_window():
    """The cut the hint suggests: 90 % of the window at the fewest characters per token the server's own counts
    show (Chinese text packs fewer characters into a token than English), less the rest of the longest prompt."""
    from filegram_ray.evaluate.failures import suggest_context_chars

    llama = "status reply: HTTP 400: request ({n} tokens) exceeds the available context size (4096 tokens), try again"
    rows = [{"error": llama.format(n=9000), "prompt_chars": 27000, "context_chars": 25000},  # 3 chars per token
            {"error": llama.format(n=6000), "prompt_chars": 9000, "context_chars": 8200}]  # Chinese: 1.5
    got = suggest_context_chars(rows)
    assert got == {"window": 4096, "limit": int(0.9 * 4096 * 1.5), "chars": int(0.9 * 4096 * 1.5) - 2000}
    vllm = ("status reply: HTTP 400: This model's maximum context length is 4096 tokens. However, you requested 5000 "
            "tokens (4900 in the messages, 100 in the completion).")
    assert suggest_context_chars([{"error": vllm, "prompt_chars": 14700, "context_chars": 14000}])["limit"] == \
        int(0.9 * 4096 * 3)
    assert suggest_context_chars([{"error": "malformed reply: empty reply", "prompt_chars": 900,
                                   "context_chars": 0}]) == {"window": None, "limit": None, "chars": None}
    hint = fix_hint("context_overflow", [llama.format(n=9000)], 20000, got)
    assert f"max_context_chars={got['chars']}`" in hint and "(now 20,000)" in hint and "4,096 tokens" in hint
