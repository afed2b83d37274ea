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
    ("A or B, hard to say", None),
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
