"""The record and caption stages on a real local Ray (Ray Data actor pools), resumability and error rows, then what
they feed: Visual Grounding items (bench) and the Real-World column (evaluate)."""

from __future__ import annotations

import json

import pytest
from video_helpers import TRAJECTORY_ID, write_trajectory

from filegram_ray.config import load_config
from video.encode import probe

BROKEN = "p3_efficient_executor/T-01"


@pytest.fixture(scope="module")
def captioned_run(tmp_path_factory, ray_local):
    root = tmp_path_factory.mktemp("videorun")
    write_trajectory(root)
    bad = write_trajectory(root, BROKEN)
    (bad / "events.json").write_text("[{\"event_type\": ", encoding="utf-8")  # truncated JSON
    cfg = load_config(overrides={"run_dir": str(root), "record": {"sample": None},
                                 "caption": {"num_actors": 1}})
    from video.caption_stage import run_caption
    from video.record_stage import run_record

    rec = run_record(cfg)
    cap = run_caption(cfg)
    return cfg, rec, cap


def test_record_stage_writes_videos_index_and_error_rows(captioned_run):
    cfg, rec, _ = captioned_run
    run = cfg.run()
    assert rec["recorded"] == 1 and rec["errors"] == 1 and sorted(rec["chosen"]) == sorted([BROKEN, TRAJECTORY_ID])
    idx = {r["trajectory_id"]: r for r in run.read_table("recordings/index.parquet").to_dicts()}
    ok, bad = idx[TRAJECTORY_ID], idx[BROKEN]
    assert bad["status"] == "error" and "events.json" in bad["error"]
    assert ok["status"] == "ok" and ok["path"] == f"recordings/{TRAJECTORY_ID}.mp4"
    info = probe(run.full(ok["path"]))
    assert (info.width, info.height, info.frames) == (ok["width"], ok["height"], ok["frames"]) == (1280, 720,
                                                                                                   ok["frames"])
    assert info.duration_s == pytest.approx(ok["duration_s"], abs=1 / 15)
    import hashlib

    data = run.read_bytes(ok["path"])
    assert ok["bytes"] == len(data) and ok["sha256"] == hashlib.sha256(data).hexdigest()
    assert run.exists(f"recordings/{TRAJECTORY_ID}.timeline.json")


def test_record_stage_resumes(captioned_run):
    cfg, _, _ = captioned_run
    from video.record_stage import run_record

    again = run_record(cfg, executor="serial")
    assert again["already_done"] == 1 and again["recorded"] == 0 and again["errors"] == 1
    # the skipped recording keeps its status: a resumed pipeline found 6 recordings with status null and captioned
    # none of them (2026-12-07)
    idx = {r["trajectory_id"]: r for r in cfg.run().read_table("recordings/index.parquet").to_dicts()}
    assert idx[TRAJECTORY_ID]["status"] == "ok" and idx[BROKEN]["status"] == "error"
    from video.caption_stage import run_caption

    cap = run_caption(cfg)
    assert cap["units"] == {"planned": 1, "done": 0, "skipped": 1, "failed": 0}
    assert [r["status"] for r in cfg.run().read_table("captions/index.parquet").to_dicts()] == ["ok"]


def test_caption_stage_reads_events_back_and_scores_them(captioned_run):
    cfg, _, cap = captioned_run
    run = cfg.run()
    assert cap["captioned"] == 1 and cap["errors"] == 0 and cap["keyframes"] >= 13
    caps = run.read_table(f"captions/ocr/{TRAJECTORY_ID}.parquet")
    assert caps.height == cap["keyframes"] and set(caps["captioner"]) == {"ocr"}
    assert json.loads(caps["lines"][0])[0]["box"]
    events = run.read_json(f"realworld/{TRAJECTORY_ID}/events.json")
    assert {e["event_type"] for e in events} >= {"file_read", "file_write", "file_edit", "file_move"}
    rw = run.read_table("realworld/index.parquet").to_dicts()
    assert [r["status"] for r in rw] == ["ok"]
    assert cap["recovery"]["all"]["recall"] >= 0.9 and cap["recovery"]["all"]["precision"] >= 0.9
    rec = run.read_table("realworld/recovery.parquet")
    assert set(rec["event_type"]) >= {"all", "file_read", "file_write"}


def test_real_world_views_hold_the_first_half_only(captioned_run):
    cfg, _, _ = captioned_run
    from video.realworld import build_recording_views

    run = cfg.run()
    full = build_recording_views(run, {"kind": "recording", "trajectories": [TRAJECTORY_ID],
                                       "labels": ["Recording 1"]})
    half = build_recording_views(run, {"kind": "recording", "trajectories": [TRAJECTORY_ID],
                                       "labels": ["Recording 1"], "held_out": "second half"})
    assert 0 < len(half[0].events) < len(full[0].events)
    assert all("profile_id" not in e for e in full[0].events)  # leakage fields are dropped, as for trajectories
    assert half[0].label == "Recording 1" and half[0].task_id == "T-03"


def test_visgrd_items_are_built_counted_and_evaluated_in_the_real_world_setting(captioned_run):
    cfg, _, _ = captioned_run
    from filegram_ray.bench.stage import counts_table, run_bench
    from filegram_ray.evaluate.stage import run_evaluate

    data = cfg.model_dump()
    data["bench"] = {"sub_tasks": ["VisGrd"]}
    data["evaluate"] = {"methods": ["no_context", "full_context"], "settings": ["real_world"], "executor": "serial",
                        "sample_per_sub_task": None}
    c2 = type(cfg).model_validate(data)
    out = run_bench(c2)
    run = c2.run()
    items = run.read_table("bench/items.parquet").to_dicts()
    assert out["sub_tasks"]["VisGrd"]["built"] == len(items) == 17  # next operations + the 16 attributes of p1
    assert {i["setting"] for i in items} == {"real_world"} and {i["sub_track"] for i in items} == {"VisGrd"}
    ctx = json.loads(items[0]["context"])
    assert ctx == {"kind": "recording", "trajectories": [TRAJECTORY_ID], "labels": ["Recording 1"],
                   "held_out": "second half"}
    key = {r["question_id"]: r for r in run.read_table("bench/answers_key.parquet").to_dicts()}
    nxt = next(i for i in items if i["sub_class"] == "next_operations")
    assert "files" in key[nxt["question_id"]]["correct_text"]
    assert "VisGrd" in counts_table(run.read_table("bench/items.parquet"))
    from filegram_ray.bench.bank import build_bank
    from filegram_ray.bench.inputs import load_bench_inputs
    from filegram_ray.bench.validate import validate_items
    from filegram_ray.profiles import load_profiles

    bank = build_bank(load_bench_inputs(run), c2.seed, sub_tasks=["VisGrd"])
    profs = [p.model_dump() if hasattr(p, "model_dump") else p for p in load_profiles()]
    assert validate_items(bank.items, bank.keys, [p["profile_id"] for p in profs],
                          [p["name"] for p in profs]) == []  # no profile, dimension or value words leak
    info = run_evaluate(c2)
    assert info["n_items"] == 17 and info["n_error_rows"] == 0
    report = run.read_text("results/report.md")
    header = next(line for line in report.splitlines() if line.startswith("| Method"))
    assert "VisGrd" in header and "Real-World" in header
    assert "events read back from recordings" in report
    summary = run.read_table("results/summary.parquet")
    assert summary.filter(summary["method"] == "full_context")["real_world"][0] is not None


def test_the_record_sample_is_seeded_and_spreads_over_profiles():
    from video.record_stage import sample_trajectories

    ids = [f"p{p}/T-{t:02d}" for p in range(1, 21) for t in range(1, 33)]
    a = sample_trajectories(ids, 6, seed=7)
    assert a == sample_trajectories(list(reversed(ids)), 6, seed=7)  # same seed, same sample
    assert len(a) == 6 and len({t.split("/")[0] for t in a}) == 6  # one trajectory per profile
    assert a != sample_trajectories(ids, 6, seed=8)
    big = sample_trajectories(ids, 25, seed=7)
    assert len(big) == 25 and len({t.split("/")[0] for t in big}) == 20  # every profile before any second one
    assert sample_trajectories(ids, None, seed=7) == sorted(ids)


def test_record_selection_takes_short_profile_ids_REL_short_profile_ids_empty_encode_bench(tmp_path):
    """A run made with ``profiles=[p1,p3]`` (short ids) records its trajectories: the record stage planned 0
    units because it compared 'p1' with 'p1_methodical' (the rule of config.names_id, case
    REL-short-profile-ids-empty-encode-bench)."""
    import polars as pl

    from filegram_ray.config import load_config, names_id
    from video.record_stage import run_record

    assert names_id("p1", "p1_methodical") and names_id("p1_methodical", "p1_methodical")
    assert not names_id("p1", "p10_x") and not names_id("T-3", "T-03")
    run_dir = tmp_path / "run"
    (run_dir / "trajectories").mkdir(parents=True)
    pl.DataFrame({"trajectory_id": ["p1_methodical/T-03", "p2_pragmatic/T-03"], "status": ["ok", "ok"]}).write_parquet(
        run_dir / "trajectories" / "index.parquet")
    cfg = load_config(None, [f"run_dir={run_dir}", "profiles=[p1]", "tasks=[T-03]", "record.executor=serial"])
    rec = run_record(cfg)
    assert rec["chosen"] == ["p1_methodical/T-03"]
    assert rec["units"]["planned"] == 1 and rec["units"]["failed"] == 1  # no events.json here: one error row
