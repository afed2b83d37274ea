"""Backbones: answer parsing, the lexical CPU default, validity references, the factory."""

from __future__ import annotations

import pickle

import pytest

from filegram_ray.llm import (
    LexicalBackbone,
    OpenAIBackbone,
    OracleBackbone,
    RandomBackbone,
    make_backbone,
    parse_choice,
    parse_json_object,
)
from filegram_ray.llm.backbones import mcq_prompt

ITEM = {"question_id": "AttrRec-00007", "question": "How does this user organise folders?",
        "choices": {"A": "deeply nested folders", "B": "flat root folder only", "C": "adaptive by type"}}


@pytest.mark.parametrize("reply,expected", [
    ("C", "C"), ("(B)", "B"), ("**A**", "A"), ("Answer: C", "C"), ("The answer is (B).", "B"),
    ('{"answer": "A", "why": "x"}', "A"), ('```json\n{"answer": "c",}\n```', "C"),
    ("B) flat root folder only, because no dirs", "B"), ("I think flat root folder only fits.", "B"),
    ("Final answer: A", "A"), ("F", None), ("", None), ("no idea", None),
    ("A or B, hard to say", None), ("Answer: c", "C"), ("answer: the user is a flat one", None),
])
def test_parse_choice(reply, expected):
    assert parse_choice(reply, 3, list(ITEM["choices"].values())) == expected


def test_parse_json_object_tolerates_fences_and_trailing_commas():
    assert parse_json_object('noise ```json\n{"score": 4, "x": [1,2,],}\n``` tail') == {"score": 4, "x": [1, 2]}
    assert parse_json_object("no json here") is None


def test_lexical_picks_the_choice_the_context_mentions_and_is_deterministic():
    bb = LexicalBackbone(seed=1)
    ctx = "Create directory: reports/2024/q1 (depth=3)\nthe folders are deeply nested"
    assert bb.answer(ITEM, ctx).choice == "A"
    empty = [bb.answer({**ITEM, "question_id": f"q{i}"}, "").choice for i in range(40)]
    assert set(empty) <= {"A", "B", "C"} and len(set(empty)) > 1  # ties → seeded pick, not always A
    assert empty == [LexicalBackbone(seed=1).answer({**ITEM, "question_id": f"q{i}"}, "").choice
                     for i in range(40)]


def test_lexical_open_ended_returns_best_matching_line():
    bb = LexicalBackbone()
    item = {"question_id": "ProfRec-1", "question": "What is this user's output detail?", "choices": []}
    ans = bb.answer(item, "reads 4 files\noutput detail: long reports of 3000 chars\nno search")
    assert ans.choice is None and ans.text == "output detail: long reports of 3000 chars"


def test_validity_backbones():
    assert OracleBackbone({"AttrRec-00007": "B"}).answer(ITEM, "").choice == "B"
    with pytest.raises(KeyError):
        OracleBackbone({}).answer(ITEM, "")
    picks = [RandomBackbone(3).answer({**ITEM, "question_id": str(i)}, "").choice for i in range(300)]
    assert {p: picks.count(p) for p in "ABC"}.keys() == {"A", "B", "C"}
    assert all(60 < picks.count(p) < 140 for p in "ABC")


def test_prompt_has_no_hidden_fields():
    p = mcq_prompt({**ITEM, "profile_id": "p1_methodical"}, "ctx")
    assert "p1_methodical" not in p and "A. deeply nested folders" in p and "Answer: <letter>" in p


def test_make_backbone_and_errors():
    assert isinstance(make_backbone(None), LexicalBackbone)
    assert isinstance(make_backbone("random"), RandomBackbone)
    with pytest.raises(ValueError, match="answer key"):
        make_backbone("oracle")
    with pytest.raises(ValueError, match="unknown settings"):
        make_backbone({"kind": "openai", "base_url": "http://x/v1", "model": "m", "temprature": 0})
    with pytest.raises(ValueError, match="unknown backbone"):
        make_backbone("gpt")
    bb = make_backbone({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "retries": 0,
                        "timeout": 2})
    assert isinstance(bb, OpenAIBackbone) and bb.is_llm
    clone = pickle.loads(pickle.dumps(bb))  # Ray actors receive it pickled
    assert clone.base_url == bb.base_url and clone.model == "m"
    with pytest.raises(RuntimeError, match=r"127\.0\.0\.1:9.*no usable reply: transport reply: Connect"):
        bb.answer(ITEM, "ctx")  # nothing listens on port 9


#: BR3-01: replies a chat model gives to a 4-option item, with the letter a person reads in them (None: none stated
#: or ambiguous). The first 17 are the case's; the rest widen the kind.
BR3_01_REPLIES = [
    ("The answer is (B).", "B"), ("B)", "B"), ("**B**", "B"), ("ANSWER: **B**", "B"), ("ANSWER: $B$", "B"),
    ("Answer: b", "B"), ("\\boxed{B}", "B"), ("Option A is tempting, but the answer is (C).", "C"),
    ("Choice A looks plausible; however the final answer is C.", "C"),
    ("Answer: A\n\nWait, re-reading the sessions, the user stays flat.\n\nFinal answer: B", "B"),
    ("The answer is B. Note that A is a common distractor.", "B"), ("Answer seems to be A.\n\nAnswer: C", "C"),
    ("I would pick C — a safe choice.", "C"), ("Between A and B, I cannot decide.", None), ("A or B", None),
    ("Antwort: C", "C"), ("答案：C", "C"),
    ("答案是D", "D"), ("Réponse : B", "B"), ("**Answer:** D", "D"), ("The correct answer is option (D).", "D"),
    ("$\\boxed{C}$", "C"), ("Final answer: A or B", None), ("Answer: **A** or **B**", None),
    ("Final answer: E", None),  # a letter that is not an option: no answer, not the earlier cue
    ("the answer is a flat layout", None),  # the article, not option A
    ("A) fits the sessions. I'd choose B though.", None), ("I would not pick A; I'd pick D", "D"),
    ('{"answer": "(B)"}', "B"),
]


@pytest.mark.parametrize("reply,meant", BR3_01_REPLIES)
def test_br3_01_the_stated_final_answer_wins(reply, meant):
    """BR3-01: the reply is read as a person reads it — the final, explicit answer wins, a rejected option named
    first is not the answer, and an ambiguous reply gives no letter (never a guess)."""
    from filegram_ray.llm.parsing import read_choice

    choices = ["deeply nested folders", "flat, everything in the root", "adaptive, one or two levels",
               "no folders at all"]
    got = read_choice(reply, 4, choices)
    assert got.letter == meant, (reply, got)
    if meant is None:
        assert got.why  # says why no letter was read


def test_br3_01_an_ambiguous_reply_is_an_error_row_with_the_raw_reply():
    """BR3-01 on the evaluate stage's language-model path: a free-text reply that states no single option becomes
    an error row (no score, the reply kept), never a letter."""
    import json

    from filegram_ray.evaluate.answer import _answer_row

    prompt = {"method": "m", "question_id": "q1", "cache_key": "k", "status": "ok", "error": "",
              "messages": [{"role": "user", "content": "question"}], "choices_json": json.dumps(["x", "y", "z"]),
              "tokens_in_memory": 0, "tokens_out": 0}
    row = _answer_row(prompt, {"reply": "Answer: A or B", "prompt_tokens": 10, "reply_tokens": 4}, "openai:m")
    assert row["status"] == "error" and row["choice"] == "" and row["answer_text"] == "Answer: A or B"
    assert row["error"].startswith("reply states no single option") and "more than one option" in row["error"]
    ok = _answer_row(prompt, {"reply": "Option A is tempting, but the answer is (C).", "prompt_tokens": 10,
                              "reply_tokens": 9}, "openai:m")
    assert ok["status"] == "ok" and ok["choice"] == "C"
