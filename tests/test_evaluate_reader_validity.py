"""Reader validity rows (issue #30 item 2): gold evidence, wrong user, option order — on their own and through a
language-model backbone (a real local HTTP server that reads its prompt like a perfect reader)."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from evaluate_fixtures import make_run
from scripted_chat_server import ScriptedChatServer, completion

from filegram_ray.config import load_config
from filegram_ray.evaluate.reader_validity import (
    _rotated,
    _unrotate,
    gold_evidence,
    memory_method,
    order_stats,
    rotation,
)
from filegram_ray.evaluate.stage import load_answer_key, load_items, public_view, run_evaluate


def test_gold_evidence_states_the_truth_per_sub_task(tmp_path):
    run = make_run(tmp_path)
    items, key = load_items(run), load_answer_key(run)
    for it in items:
        gold = gold_evidence(it, key[it["question_id"]])
        k = key[it["question_id"]]
        truth = it["choices"]["ABCD".index(k["correct"])] if it["choices"] else k["correct_text"]
        # the answer in words, never a bare letter (open-ended: the value, then its plain-words description)
        assert gold.endswith(": " + truth) or ": " + truth + " — " in gold, (it["sub_track"], gold)
        assert f"({it['sub_track'] if it['sub_track'] != 'FileGrd' else 'AttrRec'})" in gold
    prof = next(it for it in items if it["sub_track"] == "ProfRec")
    from filegram_ray.bench.vocab import ATTRIBUTE_TOPIC, VALUE_BEHAVIOUR

    text = gold_evidence(prof, key[prof["question_id"]])  # open-ended: the attribute in the question's words
    assert ATTRIBUTE_TOPIC["output_detail"] in text and VALUE_BEHAVIOUR["output_detail"]["detailed"] in text
    from filegram_ray.evaluate.scoring import RubricJudge, likert_to_100
    from filegram_ray.llm import make_backbone

    answer = make_backbone("lexical").answer(public_view(prof), text).text  # the CPU reader finds it
    assert likert_to_100(RubricJudge().judge(prof, "detailed", answer)) >= 75
    assert gold_evidence(items[0], {}) == ""


def test_rotation_round_trips_every_letter():
    pv = {"question_id": "q", "choices": {"A": "one", "B": "two", "C": "three", "D": "four"}}
    for shift in (1, 2, 3):
        shown = _rotated(pv, shift)["choices"]
        for letter, text in pv["choices"].items():
            shown_letter = next(k for k, v in shown.items() if v == text)
            assert _unrotate(shown_letter, shift, 4) == letter
    assert all(1 <= rotation(n, 7, f"q{i}") < n for n in (2, 3, 4) for i in range(20))
    assert rotation(3, 7, "q1") == rotation(3, 7, "q1") and rotation(1, 7, "q1") == 0
    assert _unrotate("", 1, 3) == "" and _unrotate("E", 1, 3) == ""


def test_memory_method_prefers_filegramos():
    assert memory_method(["no_context", "full_context", "filegramos"]) == "filegramos"
    assert memory_method(["no_context", "full_context"]) == "full_context"
    assert memory_method(["no_context"]) is None


def test_order_stats_counts_consistency_and_position_bias():
    res = pl.DataFrame([
        {"method": "m", "question_id": "q1", "choice": "A", "status": "ok", "correct": "A", "n_choices": 2,
         "shift": None, "shown_choice": None},
        {"method": "m", "question_id": "q2", "choice": "B", "status": "ok", "correct": "A", "n_choices": 2,
         "shift": None, "shown_choice": None},
        {"method": "order", "question_id": "q1", "choice": "A", "status": "ok", "correct": "A", "n_choices": 2,
         "shift": 1, "shown_choice": "B"},
        {"method": "order", "question_id": "q2", "choice": "A", "status": "ok", "correct": "A", "n_choices": 2,
         "shift": 1, "shown_choice": "B"}])
    st = order_stats(res, "m")
    assert st["n"] == 2 and st["consistency"] == 50.0
    assert st["bias"] == [{"letter": "A", "answers": 0.0, "keys": 0.0}, {"letter": "B", "answers": 100.0,
                                                                       "keys": 100.0}]
    # the method's own answers in the original order: A once, B once; keys both A
    assert st["bias_original"] == [{"letter": "A", "answers": 50.0, "keys": 100.0},
                                   {"letter": "B", "answers": 50.0, "keys": 0.0}]


def _perfect_reader(req, n):
    """Reads its prompt and ignores option positions: the option whose text occurs in the memory context, else the
    one with most words in it (ties: the alphabetically first text)."""
    user = "\n\n".join(m["content"] for m in req["messages"])  # the context is in the system message
    if "## Options" not in user:
        return completion("The memory does not say.")
    ctx = user.split("## Memory context", 1)[1].split("## Question", 1)[0].lower()
    words = set(re.findall(r"\w+", ctx))
    opts = re.findall(r"^([A-H])\. (.*)$", user.split("## Options", 1)[1].split("\n\n")[0], re.M)
    pick = min(opts, key=lambda o: (o[1].strip().lower() not in ctx,
                                    -len(set(re.findall(r"\w+", o[1].lower())) & words), o[1]))[0]
    return completion(pick if "grammar" in req else f"Answer: {pick}")


@pytest.mark.slow
def test_validity_rows_through_a_language_model_backbone(ray_local, tmp_path):
    """Through the ray.data.llm path: gold evidence lifts a reader that uses its memory to 100 on multiple choice,
    the rotated asking maps letters back (a perfect reader is order-consistent), a rerun asks nothing again."""
    run = make_run(tmp_path)
    with ScriptedChatServer(_perfect_reader) as srv:
        backbone = {"kind": "openai", "base_url": srv.base_url, "model": "m", "batch_size": 8, "max_retries": 0}
        cfg = load_config(overrides={"run_dir": str(tmp_path), "evaluate": {
            "methods": ["no_context", "full_context"], "settings": ["text"], "sample_per_sub_task": None,
            "plots": False, "backbone": backbone, "ingest_llm": False, "num_actors": 1, "judge": "rubric"}})
        run_evaluate(cfg)
        n_first = len(srv.requests)
        res = run.read_table("results/results.parquet")
        gold = res.filter((pl.col("method") == "gold") & ~pl.col("is_open"))
        assert gold.height and gold["status"].to_list() == ["ok"] * gold.height
        assert gold["score"].mean() == 100.0
        order = res.filter(pl.col("method") == "order")
        fc = dict(res.filter(pl.col("method") == "full_context").select("question_id", "choice").iter_rows())
        assert order.height and all(c == fc[q] for q, c in order.select("question_id", "choice").iter_rows())
        assert (order["shift"] > 0).all() and (order["shown_choice"] != order["choice"]).any()
        reader = json.loads(run.read_text("results/findings.json"))["reader"]
        assert reader["order"]["consistency"] == 100.0 and reader["headroom"] > 0
        # no ground truth in any prompt but the gold row's: the gold lead appears only in the gold requests
        gold_prompts = [r for r in srv.requests if "Memory of this user (" in r["messages"][0]["content"]]
        assert len(gold_prompts) == res.filter(pl.col("method") == "gold").height
        checks = run.read_json("run.json")["stages"]["evaluate"]["steps"]["reader checks"]
        assert checks["planned"] == checks["done"] > 0  # the validity requests are the stage's items
        run_evaluate(cfg)  # resumable: each answer is in its item's completion record (backbone, row, prompt hash)
        again = [r for r in srv.requests[n_first:] if "## Question" in r["messages"][-1]["content"]]
        assert again == []  # only the start-up probe was sent
        checks2 = run.read_json("run.json")["stages"]["evaluate"]["steps"]["reader checks"]
        assert checks2["skipped"] == checks["planned"] and checks2["done"] == 0
    items = [it for it in load_items(run) if it["setting"] == "text"]
    assert {public_view(it)["question_id"] for it in items} == set(gold["question_id"].to_list()) | {
        it["question_id"] for it in items if not it["choices"]}


def test_headroom_sentence_tells_methods_above_no_context_from_those_below():
    """Fresh-eyes report (2026-12-03): a method whose interval lies *below* No Context's was counted as proof that
    the reader tells memory from none. Above and below are now counted apart, and the sentence names both."""
    from filegram_ray.evaluate.report import headroom_lines, reader_summary

    iv = pl.DataFrame({"method": ["no_context", "gold", "naive_rag", "filegramos", "mem0"], "cell": ["avg"] * 5,
                       "mean": [26.7, 70.0, 17.8, 40.0, 28.0], "lo": [23.0, 65.0, 14.0, 33.0, 24.0],
                       "hi": [30.0, 75.0, 22.0, 47.0, 32.0]})
    res = pl.DataFrame({"method": iv["method"].to_list()})
    r = reader_summary(res, iv, pl.DataFrame(), ["no_context", "naive_rag", "filegramos", "mem0"])
    assert r["clear"] == ["filegramos"] and r["below"] == ["naive_rag"]
    assert r["can_rank"] is False  # no wrong-user, option-order or per-sub-task gold rows: the gate cannot pass
    r = {**r, "can_rank": True}  # the sentences of a reader that passes its gate
    text = headroom_lines(r, {"naive_rag": "Naive RAG", "filegramos": "FileGramOS"})[0]
    assert "1 method(s) lie above No Context's interval (FileGramOS)" in text
    assert "1 lie below it, worse than no memory (Naive RAG)" in text
    only_below = reader_summary(res.filter(pl.col("method") != "filegramos"),
                                iv.filter(pl.col("method") != "filegramos"), pl.DataFrame(),
                                ["no_context", "naive_rag", "mem0"])
    assert only_below["clear"] == []
    text = headroom_lines({**only_below, "can_rank": True}, {"naive_rag": "Naive RAG"})[0]  # nothing above: no
    # claim that memory helps
    assert "can tell memory from none" not in text
    assert "On the multiple-choice Avg no method lies above No Context's interval; 1 lie below it, worse than no " \
           "memory (Naive RAG)" in text


def test_a_method_counts_as_told_apart_only_when_its_paired_test_agrees_and_enough_profiles():
    """Fresh-eyes report (2026-12-03, second pass): on a 2-profile slice the report said Naive RAG lies below No
    Context ("worse than no memory") while its own paired test gave Holm p 0.775 (not distinguishable); the interval
    looked tight because a bootstrap over 2 profiles has 3 distinct resamples. A method now counts only when its
    paired test against the floor is distinguishable too, and intervals over fewer than MIN_INTERVAL_PROFILES
    profiles do not rank at all."""
    from filegram_ray.evaluate.report import MIN_INTERVAL_PROFILES, headroom_lines, reader_summary

    iv = pl.DataFrame({"method": ["no_context", "gold", "naive_rag", "filegramos"], "cell": ["avg"] * 4,
                       "mean": [26.7, 70.0, 17.8, 40.0], "lo": [23.0, 65.0, 14.0, 33.0],
                       "hi": [30.0, 75.0, 22.0, 47.0], "n_profiles": [12] * 4})
    res = pl.DataFrame({"method": iv["method"].to_list()})
    paired = pl.DataFrame({"scope": ["avg", "avg", "avg"], "baseline": ["no_context", "no_context", "filegramos"],
                           "method": ["naive_rag", "filegramos", "naive_rag"],
                           "distinguishable": [False, True, True]})
    r = reader_summary(res, iv, paired, ["no_context", "naive_rag", "filegramos"])
    assert r["clear"] == ["filegramos"] and r["below"] == [] and r["interval_only"] == ["naive_rag"]
    assert "worse than no memory" not in headroom_lines({**r, "can_rank": True})[0]
    r = reader_summary(res, iv, paired.with_columns(distinguishable=pl.lit(False)),
                       ["no_context", "naive_rag", "filegramos"])
    assert r["clear"] == r["below"] == []
    assert "On the multiple-choice Avg no method is told apart from No Context" in \
        headroom_lines({**r, "can_rank": True})[0]
    few = reader_summary(res, iv.with_columns(n_profiles=pl.lit(MIN_INTERVAL_PROFILES - 3)), paired,
                         ["no_context", "naive_rag", "filegramos"])
    assert few["can_rank"] is False and f"over {MIN_INTERVAL_PROFILES - 3} profile(s)" in few["why"]
    assert "**This reader cannot rank the memory methods**" in headroom_lines(few)[0]
    assert "not tested" in headroom_lines(few)[0]


def test_report_gives_headroom_per_sub_task_and_the_masked_format_row():
    """The masked-format row (FileGramOS's context with its procedural tier words masked) is compared with
    FileGramOS on the same items and with the floor; the opening paragraph gives gold − floor per sub-task."""
    from filegram_ray.evaluate.report import headroom_lines, reader_lines, reader_summary

    rows = []
    for i in range(40):
        sub = "AttrRec" if i < 20 else "TraceDis"
        for m, s in (("no_context", i % 3 == 0), ("gold", sub == "AttrRec" or i % 2 == 0),
                     ("filegramos", i % 2 == 0), ("masked", i % 4 == 0)):
            rows.append({"method": m, "question_id": f"q{i}", "score": 100.0 * s, "is_open": False,
                         "sub_track": sub, "profile": f"p{i % 8}"})
    res = pl.DataFrame(rows)
    iv = pl.DataFrame([{"method": m, "cell": c, "n": 20, "n_profiles": 8, "mean": mean, "lo": mean - 5,
                        "hi": mean + 5}
                       for m, c, mean in (("no_context", "avg", 35.0), ("gold", "avg", 75.0),
                                          ("filegramos", "avg", 50.0), ("masked", "avg", 25.0),
                                          ("no_context", "AttrRec", 35.0), ("gold", "AttrRec", 100.0),
                                          ("no_context", "TraceDis", 35.0), ("gold", "TraceDis", 50.0))])
    r = reader_summary(res, iv, pl.DataFrame(), ["no_context", "filegramos"])
    assert [(s["sub_task"], s["headroom"]) for s in r["sub_tasks"]] == [("AttrRec", 65.0), ("TraceDis", 15.0)]
    assert r["masked"]["method"] == "filegramos" and r["masked"]["vs_method"]["n"] == 40
    assert r["masked"]["vs_method"]["diff"] == pytest.approx(-25.0)
    opening = headroom_lines(r)[0]
    assert "Per multiple-choice sub-task (gold − No Context): AttrRec +65.0, TraceDis +15.0; the smallest is " \
           "TraceDis's." in opening
    text = "\n".join(reader_lines(r, {"filegramos": "FileGramOS"}))
    assert "- Masked format (FileGramOS's context with the tier words of its procedural channel masked" in text
    assert "against FileGramOS on the same 40 items Δ -25.0" in text and "against the floor Δ" in text


def test_the_opening_says_which_methods_the_open_ended_tests_tell_apart():
    """The default run of 2026-12-07 opened with "No method is told apart from No Context" while its paired table
    marked FileGramOS ◆ against No Context on the open-ended scores (+7.5 [3.4, 11.9]): the sentence was about the
    multiple-choice Avg only. It now says so, and names the open-ended differences beside it."""
    from filegram_ray.evaluate.report import headroom_lines, reader_summary

    iv = pl.DataFrame({"method": ["no_context", "gold", "filegramos", "mem0"], "cell": ["avg"] * 4,
                       "mean": [26.7, 70.0, 28.0, 27.0], "lo": [23.0, 65.0, 24.0, 23.0],
                       "hi": [30.0, 75.0, 32.0, 31.0], "n_profiles": [20] * 4})
    paired = pl.DataFrame({"scope": ["avg", "open", "open", "open"],
                           "baseline": ["no_context", "no_context", "no_context", "filegramos"],
                           "method": ["filegramos", "filegramos", "mem0", "mem0"],
                           "diff": [1.3, 7.5, 0.6, -6.9], "lo": [-2.0, 3.4, -1.0, -11.8], "hi": [4.0, 11.9, 2.0, -2.1],
                           "distinguishable": [False, True, False, True]})
    r = reader_summary(pl.DataFrame({"method": iv["method"].to_list()}), iv, paired,
                       ["no_context", "filegramos", "mem0"])
    assert r["clear"] == [] and [a["method"] for a in r["open_apart"]] == ["filegramos"]
    text = headroom_lines({**r, "can_rank": True}, {"filegramos": "FileGramOS", "mem0": "Mem0"})[0]
    assert "On the multiple-choice Avg no method is told apart from No Context" in text
    assert "On the open-ended scores (ProfRec, VisGrd) the paired tests tell FileGramOS (+7.5 [3.4, 11.9]) apart " \
           "from No Context" in text
    assert "Mem0 (" not in text  # its only distinguishable test is against FileGramOS, not the floor
