"""FileGramBench construction on a small synthetic set (6 profiles × 10 tasks): counts, validity, determinism."""

from __future__ import annotations

from collections import Counter

import bench_synth as bs
import pytest
from bench_answerers import OracleAnswerer, RandomAnswerer, score_mcq

from filegram_ray.bench.bank import build_bank
from filegram_ray.bench.builders import BUILDERS
from filegram_ray.bench.common import hamming
from filegram_ray.bench.inputs import load_bench_inputs
from filegram_ray.bench.validate import validate_items
from filegram_ray.storage import RunDir

MCQ = ("AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    run = RunDir(tmp_path_factory.mktemp("run"))
    bs.write_run(run)
    return load_bench_inputs(run, profiles=bs.profiles(), tasks=bs.tasks())


@pytest.fixture(scope="module")
def bank(inputs):
    return build_bank(inputs, seed=7)


def test_inputs_drop_failed_and_read_perturbations(inputs):
    assert len(inputs.trajectories) == 59  # 60 minus the one error row
    assert sum(t.perturbed for t in inputs.trajectories) == 12
    assert all(t.fingerprint and len(t.fingerprint) == 17 for t in inputs.trajectories)


def test_every_registered_subtask_builds_items(bank):
    c = bank.counts()["sub_task"]
    for name in ("AttrRec", "BehavFP", "ProfRec", "BehavInf", "TraceDis", "AnomDet", "ShiftAna"):
        assert c[name] > 0, name
    assert c["ProfRec"] == 6 * 16  # one per profile × attribute
    assert c["AttrRec"] == 6 * 16  # 6 dimensions + role + language + 8 attributes
    assert bank.stats["FileGrd"]["built"] == 0 and "render" in bank.stats["FileGrd"]["note"]
    assert "VisGrd" in BUILDERS and "FileGrd" in BUILDERS
    assert bank.stats["VisGrd"]["built"] == 0 and "record" in bank.stats["VisGrd"]["note"]
    # every item's channel and track are set; T3 items are episodic
    assert {i.channel for i in bank.items} == {"procedural", "semantic", "episodic"}
    assert all(i.channel == "episodic" for i in bank.items if i.track == "T3_detection")


def test_choice_counts_follow_reference(bank):
    per = {}
    for it in bank.items:
        per.setdefault(it.sub_track, set()).add(len(it.choices))
    assert per["AttrRec"] == {3}
    assert per["BehavFP"] == {4}
    assert per["BehavInf"] == {4}
    assert per["TraceDis"] <= {2, 3, 4} and len(per["TraceDis"]) >= 2
    assert per["AnomDet"] <= {5, 6}
    assert per["ShiftAna"] <= {3, 4, 5, 6}
    assert per["ProfRec"] == {0}


def test_validity_checks_pass(bank):
    profs = bs.profiles()
    problems = validate_items(bank.items, bank.keys, [p["profile_id"] for p in profs], [p["name"] for p in profs])
    assert problems == []


def test_validity_check_catches_problems(bank):
    it = bank.items[0].model_copy(deep=True)
    key = bank.keys[0].model_copy(deep=True)
    bad = it.model_copy(update={"choices": [it.choices[0], it.choices[0], it.choices[2]]})
    codes = {p.code for p in validate_items([bad], [key])}
    assert "duplicate-choice" in codes
    leak = it.model_copy(update={"question": it.question + " (s1_anchor, tier L)"})
    found = validate_items([leak], [key], profile_ids=["s1_anchor"])
    assert {p.code for p in found} == {"leak"} and len(found) >= 2
    give = it.model_copy(update={"question": it.question + " " + key.correct_text})
    assert "give-away" in {p.code for p in validate_items([give], [key])}
    wrong = key.model_copy(update={"correct": "H"})
    assert "key" in {p.code for p in validate_items([it], [wrong])}


def test_oracle_scores_100_and_random_near_chance(bank):
    oracle = score_mcq(bank.items, bank.keys, OracleAnswerer(bank.keys))
    assert set(oracle) == set(MCQ)
    assert all(v["accuracy"] == 1.0 for v in oracle.values())
    rnd = score_mcq(bank.items, bank.keys, RandomAnswerer(seed=3))
    n = sum(v["n"] for v in rnd.values())
    acc = sum(v["accuracy"] * v["n"] for v in rnd.values()) / n
    chance = sum(v["chance"] * v["n"] for v in rnd.values()) / n
    assert n > 300
    assert abs(acc - chance) < 0.08  # ~3.5 standard errors at n ≈ 400
    # correct letters are spread over positions (choice order is shuffled)
    letters = Counter(k.correct for k, i in zip(bank.keys, bank.items) if len(i.choices) == 4)
    assert len(letters) == 4 and min(letters.values()) > 0.1 * sum(letters.values())


def test_distractor_profiles_share_three_dimensions(bank, inputs):
    by_id = {p.profile_id: p for p in inputs.profiles}
    keys = {k.question_id: k for k in bank.keys}
    checked = 0
    for it in bank.items:
        if it.sub_track in ("BehavFP", "AnomDet"):
            k = keys[it.question_id]
            target = by_id[k.facts.get("author") or it.profile_id]
            for pid in k.distractor_profiles:
                assert 1 <= hamming(target, by_id[pid]) <= 3
                checked += 1
    assert checked > 0
    # s6_opposite shares < 3 dimensions with everyone: no BehavFP item is about it
    assert all(keys[i.question_id].facts["author"] != "s6_opposite" for i in bank.items if i.sub_track == "BehavFP")


def test_public_view_hides_ground_truth(bank):
    for it in bank.items:
        pv = it.public_view()
        assert "profile_id" not in pv and "metadata" not in pv and "correct" not in pv
        assert "trajectories" not in pv["context"]
        blob = repr(pv)
        for tid in it.context.trajectories:
            assert tid not in blob
    row = bank.items[0].to_row()
    assert row["correct"] == ""


def test_shiftana_answer_is_the_meta_perturbation(bank):
    keys = {k.question_id: k for k in bank.keys}
    for it in bank.items:
        if it.sub_track != "ShiftAna":
            continue
        k = keys[it.question_id]
        assert it.context.kind == "baseline_plus_session"
        assert it.context.trajectories[-1] == k.facts["session"]
        assert k.facts["perturbation"]["dimension"] in it.sub_class


def test_anomdet_options_are_session_labels(bank):
    keys = {k.question_id: k for k in bank.keys}
    for it in bank.items:
        if it.sub_track != "AnomDet":
            continue
        assert sorted(it.choices) == sorted(it.context.labels)
        k = keys[it.question_id]
        imp = it.context.trajectories[it.context.labels.index(k.correct_text)]
        assert imp == k.facts["impostor"] and not imp.startswith(it.profile_id + "/")
        assert all(t.startswith(it.profile_id + "/") for t in it.context.trajectories if t != imp)


def test_deterministic_from_seed(inputs, bank):
    again = build_bank(inputs, seed=7)
    assert [i.to_row() for i in again.items] == [i.to_row() for i in bank.items]
    assert [k.to_row() for k in again.keys] == [k.to_row() for k in bank.keys]
    other = build_bank(inputs, seed=8)
    assert [i.to_row() for i in other.items] != [i.to_row() for i in bank.items]


def test_counts_override_and_unknown_subtask(inputs):
    small = build_bank(inputs, seed=7, sub_tasks=["AnomDet", "TraceDis"], counts={"AnomDet": 10, "TraceDis": 12})
    c = small.counts()["sub_task"]
    assert c == Counter({"AnomDet": 10, "TraceDis": 12})
    with pytest.raises(ValueError, match="unknown sub-task"):
        build_bank(inputs, seed=7, sub_tasks=["Nope"])


def test_paraphraser_is_used_and_guarded(inputs):
    calls = []

    def llm(prompt):
        calls.append(prompt)
        return "Reworded: " + prompt.rsplit("\n\n", 1)[-1]

    b = build_bank(inputs, seed=7, sub_tasks=["ShiftAna"], llm_fn=llm)
    assert calls and all(i.question.startswith("Reworded: ") for i in b.items)
    assert not any("→" in c for c in calls)  # options never reach the paraphraser
    leaky = build_bank(inputs, seed=7, sub_tasks=["ShiftAna"], llm_fn=lambda p: "Which tier shifted?")
    assert not any("tier" in i.question for i in leaky.items)
