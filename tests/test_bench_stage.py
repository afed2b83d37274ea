"""The bench stage end to end: parquet outputs, determinism, counts on the 20 × 32 FileGram set, CLI."""

from __future__ import annotations

import json

import bench_synth as bs
import polars as pl
import pytest
from bench_answerers import OracleAnswerer, score_mcq

from filegram_ray.bench.schema import AnswerKey, Item
from filegram_ray.bench.stage import run_bench
from filegram_ray.bench.validate import validate_items
from filegram_ray.config import load_config
from filegram_ray.storage import RunDir


@pytest.fixture()
def synth_run(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    bs.write_run(run)
    # the stage loads profiles/tasks through the project loaders; point them at the synthetic set
    from filegram_ray.bench import stage

    real = stage.load_bench_inputs
    monkeypatch.setattr(stage, "load_bench_inputs",
                        lambda r, **kw: real(r, profiles=bs.profiles(), tasks=bs.tasks(),
                                             profile_ids=kw.get("profile_ids")))
    return run


def _cfg(run, seed=7, **bench):
    return load_config(overrides={"run_dir": run.root, "seed": seed, "bench": bench})


def test_stage_writes_items_and_key_apart(synth_run, capsys):
    info = run_bench(_cfg(synth_run))
    out = capsys.readouterr().out
    assert "sub-task" in out and "AnomDet" in out and "episodic" in out
    items = synth_run.read_table("bench/items.parquet")
    key = synth_run.read_table("bench/answers_key.parquet")
    assert items.height == key.height == info["n_items"] > 300
    assert set(items["correct"].to_list()) == {""}
    assert set(items["question_id"].to_list()) == set(key["question_id"].to_list())
    its = [Item.from_row(r) for r in items.to_dicts()]
    ks = [AnswerKey.from_row(r) for r in key.to_dicts()]
    assert validate_items(its, ks, [p["profile_id"] for p in bs.profiles()]) == []
    assert all(v["accuracy"] == 1.0 for v in score_mcq(its, ks, OracleAnswerer(ks)).values())
    ctx = json.loads(items.filter(pl.col("sub_track") == "BehavInf")["context"][0])
    assert ctx["kind"] == "held_out" and ctx["held_out"] and ctx["held_out"] not in [
        t.split("/")[1] for t in ctx["trajectories"]]
    stats = synth_run.read_json("bench/stats.json")
    assert stats["counts"]["sub_task"]["ProfRec"] == 96
    assert "bench" in synth_run.read_json("run.json")["stages"]


def test_stage_same_seed_same_bytes(synth_run):
    run_bench(_cfg(synth_run))
    a = (synth_run.read_bytes("bench/items.parquet"), synth_run.read_bytes("bench/answers_key.parquet"))
    run_bench(_cfg(synth_run))
    b = (synth_run.read_bytes("bench/items.parquet"), synth_run.read_bytes("bench/answers_key.parquet"))
    assert a == b
    # another bank of the same run: the bench's own seed (the master seed belongs to the run directory)
    run_bench(load_config(overrides={"run_dir": synth_run.root, "bench": {"seed": 99}}))
    assert synth_run.read_bytes("bench/items.parquet") != a[0]
    with pytest.raises(ValueError, match="made with seed 7"):
        run_bench(_cfg(synth_run, seed=99))


def test_stage_options_and_bad_section(synth_run):
    info = run_bench(_cfg(synth_run, sub_tasks=["AttrRec", "ShiftAna"], counts={"AttrRec": 20}))
    assert info["counts"]["sub_task"] == {"AttrRec": 20, "ShiftAna": info["sub_tasks"]["ShiftAna"]["built"]}
    with pytest.raises(ValueError, match="bench"):
        run_bench(_cfg(synth_run, no_such_option=1))


def test_filegrd_uses_rendered_trajectories(synth_run):
    rendered = [f"{p}/{t}" for p in bs.VECTORS for t, *_ in bs.TASKS]
    synth_run.write_table("derivatives/index.parquet", pl.DataFrame({"trajectory_id": rendered}))
    info = run_bench(_cfg(synth_run, sub_tasks=["FileGrd"], counts={"FileGrd": 40}))
    items = synth_run.read_table("bench/items.parquet")
    assert info["sub_tasks"]["FileGrd"]["built"] == 40 == items.height
    assert set(items["setting"].to_list()) == {"multimodal"}
    assert set(items["track"].to_list()) == {"T4_multimodal"}
    srcs = {json.loads(m)["source_sub_task"] for m in items["metadata"].to_list()}
    assert len(srcs) >= 4


def test_full_filegram_set_counts(tmp_path):
    """20 profiles × 32 tasks with 5 perturbed sessions each: the paper's §9.1 counts (or the documented gaps)."""
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    run = RunDir(tmp_path / "full")
    ps, ts = load_profiles(), load_tasks()
    assert bs.write_full_run(run, ps, ts) == 100
    info = run_bench(load_config(overrides={"run_dir": run.root, "seed": 7}))
    c = info["counts"]["sub_task"]
    assert c["ProfRec"] == 320 and c["BehavInf"] == 560 and c["TraceDis"] == 1134
    assert c["AnomDet"] == 815 and c["ShiftAna"] == 288
    assert c["AttrRec"] == 320  # paper 326: COUNTS note in builders/attrrec.py
    assert c["BehavFP"] == 540  # paper 560: 27 unperturbed sessions per profile, builders/behavfp.py
    items = [Item.from_row(r) for r in run.read_table("bench/items.parquet").to_dicts()]
    keys = [AnswerKey.from_row(r) for r in run.read_table("bench/answers_key.parquet").to_dicts()]
    assert validate_items(items, keys, [p.profile_id for p in ps], [p.name for p in ps]) == []


def test_cli_build_and_counts(synth_run, capsys):
    from filegram_ray.cli import main

    assert main(["bench", "build", "--run-dir", synth_run.root, "--set", "bench.sub_tasks=[AnomDet]"]) == 0
    capsys.readouterr()
    assert main(["bench", "counts", "--run-dir", synth_run.root]) == 0
    out = capsys.readouterr().out
    assert "AnomDet" in out and "total" in out
    # the run as a positional argument, like `view RUN` and `validity RUN` (a fresh-eyes finding)
    assert main(["bench", "counts", synth_run.root]) == 0 and capsys.readouterr().out == out


def _generated(run, **record):
    from filegram_ray.schema.meta import record_stage

    record_stage(run, "generate", record)


def test_targets_scale_to_the_generated_set(synth_run, capsys):
    """A run generated for 2 profiles × 2 tasks: the bench says so and scales the §9.1 targets to 2 × 2 (not to the
    whole profile/task set), while distractor profiles still come from the whole set."""
    from filegram_ray.bench.common import scaled_count

    keep = {"s1_anchor", "s3_visual"}, {"T-01", "T-04"}
    idx = synth_run.read_table("trajectories/index.parquet")
    synth_run.write_table("trajectories/index.parquet", idx.filter(
        pl.col("profile_id").is_in(list(keep[0])) & pl.col("task_id").is_in(list(keep[1]))))
    _generated(synth_run, profiles=sorted(keep[0]), tasks=sorted(keep[1]))
    info = run_bench(_cfg(synth_run))
    out = capsys.readouterr().out
    assert "from 2 profiles × 2 tasks (4 usable trajectories)" in out
    assert "distractor profiles drawn from all 6" in out
    st = info["sub_tasks"]
    assert st["TraceDis"]["target"] == scaled_count("TraceDis", 2, 2) == 7
    assert st["AttrRec"]["target"] == scaled_count("AttrRec", 2, 2, by_tasks=False) == 33
    assert st["ProfRec"]["target"] == sum(len(p["attributes"]) for p in bs.profiles()
                                          if p["profile_id"] in keep[0])
    stats = synth_run.read_json("bench/stats.json")
    assert (stats["n_profiles"], stats["n_tasks"], stats["n_trajectories"]) == (2, 2, 4)
    # a run whose generate record predates the id lists: the ids of its trajectory index
    _generated(synth_run, ok=4)
    assert run_bench(_cfg(synth_run))["sub_tasks"]["TraceDis"]["target"] == 7


def test_filegrd_note_says_what_render_did(synth_run):
    """FileGrd's note names what is true: render not run / limited by render.limit / run without covering the
    selected trajectories — never "not run" when derivatives exist."""
    cfg = _cfg(synth_run, sub_tasks=["AttrRec", "FileGrd"])
    assert run_bench(cfg)["sub_tasks"]["FileGrd"]["note"] == "no rendered derivatives (render stage not run)"
    tids = synth_run.read_table("trajectories/index.parquet")["trajectory_id"].to_list()
    synth_run.write_table("trajectories/outputs.parquet", pl.DataFrame({"trajectory_id": tids, "path": "a.md"}))
    synth_run.write_table("derivatives/index.parquet",
                          pl.DataFrame({"trajectory_id": ["s6_opposite/T-07"], "source": ["a.md"]}))
    note = run_bench(cfg)["sub_tasks"]["FileGrd"]["note"]
    assert note.startswith("no usable derivatives for the selected trajectories (") and "not run" not in note
    from filegram_ray.schema.meta import record_stage

    record_stage(synth_run, "render", {"options": {"limit": 1}})
    note = run_bench(cfg)["sub_tasks"]["FileGrd"]["note"]
    assert note.startswith("render limited (render.limit=1): ") and "selected trajectories" in note
