"""Item schema, row round trip and input errors of the bench."""

from __future__ import annotations

import polars as pl
import pytest

from filegram_ray.bench.inputs import load_bench_inputs, profile_record
from filegram_ray.bench.schema import AnswerKey, ContextSpec, Item
from filegram_ray.storage import RunDir


def _item(**kw):
    base = {"question_id": "AnomDet-00001", "track": "T3_detection", "sub_track": "AnomDet", "channel": "episodic",
                "profile_id": "p1_x", "question": "Which session is the odd one out?",
                "choices": ["Session T-01", "Session T-02"],
                "context": ContextSpec(kind="sessions_with_impostor", trajectories=["p1_x/T-01", "p2_y/T-02"],
                                    labels=["Session T-01", "Session T-02"]),
                "metadata": {"n_choices": 2}}
    base.update(kw)
    return Item(**base)


def test_row_round_trip_and_public_view():
    it = _item()
    row = it.to_row()
    assert row["correct"] == "" and row["input_trajectories"] == '["p1_x/T-01", "p2_y/T-02"]'
    assert Item.from_row(row) == it
    pv = it.public_view()
    assert pv["choices"] == {"A": "Session T-01", "B": "Session T-02"}
    assert pv["context"] == {"kind": "sessions_with_impostor", "labels": ["Session T-01", "Session T-02"],
                             "held_out": None}
    assert "p1_x" not in repr(pv)
    k = AnswerKey(question_id=it.question_id, correct="B", correct_text="Session T-02",
                  facts={"impostor": "p2_y/T-02"}, distractor_profiles=["p2_y"])
    assert AnswerKey.from_row(k.to_row()) == k


def test_context_spec_errors():
    with pytest.raises(ValueError, match="labels"):
        ContextSpec(kind="held_out", trajectories=["a/T-01"], labels=[])
    with pytest.raises(ValueError, match="duplicate"):
        ContextSpec(kind="all_trajectories", trajectories=["a/T-01", "a/T-02"], labels=["S", "S"])
    with pytest.raises(ValueError):
        ContextSpec(kind="nope", trajectories=[], labels=[])
    row = _item().to_row()
    row["context"] = "{not json"
    with pytest.raises(ValueError, match="AnomDet-00001"):
        Item.from_row(row)


def test_profile_record_errors_name_the_field():
    good = {"profile_id": "p1", "tiers": dict(zip("ABCDEF", "LLLLLL")), "attributes": {}}
    assert profile_record(good).vector() == tuple("LLLLLL")
    with pytest.raises(ValueError, match=r"x\.yaml: field 'tiers\.C'"):
        profile_record({**good, "tiers": {**good["tiers"], "C": "Q"}}, source="x.yaml")
    with pytest.raises(ValueError, match="profile_id"):
        profile_record({"tiers": good["tiers"]})


def test_missing_meta_of_perturbed_trajectory_is_named(tmp_path):
    """A perturbed trajectory without meta.json, or with a field missing, is left out and named (file and field);
    it no longer stops the whole bench (issue #13: one bad unit never sinks a batch)."""
    run = RunDir(tmp_path)
    run.write_table("trajectories/index.parquet", pl.DataFrame([
        {"trajectory_id": "p1/T-01", "profile_id": "p1", "task_id": "T-01", "status": "ok", "perturbed": True}]))
    run.write_text("trajectories/p1/T-01/events.json", "[]")
    prof = {"profile_id": "p1", "tiers": dict(zip("ABCDEF", "LLLLLL")), "attributes": {}}
    got = load_bench_inputs(run, profiles=[prof], tasks=[{"task_id": "T-01"}])
    assert got.trajectories == [] and [s["file"] for s in got.skipped] == ["trajectories/p1/T-01/meta.json"]
    assert got.skipped[0]["error"].endswith("trajectories/p1/T-01/meta.json: missing, but the index marks p1/T-01 "
                                            "as perturbed")
    run.write_json("trajectories/p1/T-01/meta.json", {"perturbation": {"dimension": "C", "from": "L"}})
    got = load_bench_inputs(run, profiles=[prof], tasks=[{"task_id": "T-01"}])
    assert "field 'perturbation.to' is missing" in got.skipped[0]["error"]
