"""The evaluate stage's seeded per-sub-task sample keeps FileGrd items paired with their text twins."""

from __future__ import annotations

from collections import Counter

from filegram_ray.evaluate.stage import sample_items


def _bank():
    items = []
    for sub in ("AttrRec", "AnomDet"):
        for i in range(30):
            items.append({"question_id": f"{sub}-{i:05d}", "sub_track": sub, "setting": "text", "metadata": {}})
    for i in range(30):
        items.append({"question_id": f"FileGrd-{i:05d}", "sub_track": "FileGrd", "setting": "multimodal",
                      "metadata": {"text_twin": f"AttrRec-{i:05d}"}})
    return items


def test_sample_is_capped_seeded_and_paired():
    bank = _bank()
    a = sample_items(bank, 5, seed=7)
    assert [it["question_id"] for it in a] == [it["question_id"] for it in sample_items(bank, 5, seed=7)]
    assert [it["question_id"] for it in a] != [it["question_id"] for it in sample_items(bank, 5, seed=8)]
    counts = Counter(it["sub_track"] for it in a)
    assert counts["FileGrd"] == 5 and counts["AnomDet"] == 5
    ids = {it["question_id"] for it in a}
    twins = {it["metadata"]["text_twin"] for it in a if it["sub_track"] == "FileGrd"}
    assert twins <= ids  # every sampled FileGrd item has its text twin evaluated too
    assert 5 <= counts["AttrRec"] <= 10
    assert a == sorted(a, key=lambda it: bank.index(it))  # bank order kept
    assert sample_items(bank, 1000, seed=7) == bank
