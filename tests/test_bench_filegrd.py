"""FileGrd (T4, Multimodal setting): which trajectories count as rendered, the 550 count on 20 × 32, text twins."""

from __future__ import annotations

import json

import bench_synth as bs
import polars as pl

from filegram_ray.bench.inputs import rendered_trajectories
from filegram_ray.bench.stage import run_bench
from filegram_ray.config import load_config
from filegram_ray.storage import RunDir


def _outputs(rows):
    return pl.DataFrame([{"trajectory_id": t, "profile_id": t.split("/")[0], "task_id": t.split("/")[1],
                          "path": p, "file_type": p.rsplit(".", 1)[1], "bytes": 1, "sha256": "0"} for t, p in rows])


def test_rendered_trajectories_rule(tmp_path):
    run = RunDir(tmp_path / "r")
    ids = ["p1/T-01", "p1/T-02", "p1/T-03", "p1/T-04"]
    assert rendered_trajectories(run, ids) == frozenset()  # render stage not run
    run.write_table("trajectories/outputs.parquet", _outputs([
        ("p1/T-01", "a.md"), ("p1/T-01", "data.csv"),       # text output rendered, csv not a render input
        ("p1/T-02", "a.md"), ("p1/T-02", "b.md"),           # b.md never reached the render stage
        ("p1/T-03", "only.csv"),                            # nothing to render
        ("p1/T-04", "x.txt")]))                             # its one derivative failed: still handled
    run.write_table("derivatives/index.parquet", pl.DataFrame([
        {"trajectory_id": "p1/T-01", "source": "a.md", "status": "ok"},
        {"trajectory_id": "p1/T-01", "source": "a.md", "status": "skipped"},
        {"trajectory_id": "p1/T-02", "source": "a.md", "status": "ok"},
        {"trajectory_id": "p1/T-04", "source": "x.txt", "status": "error"}]))
    assert rendered_trajectories(run, ids) == {"p1/T-01", "p1/T-03", "p1/T-04"}
    # an index without a source column: the ids it lists
    run.write_table("derivatives/index.parquet", pl.DataFrame({"trajectory_id": ["p1/T-02"]}))
    assert rendered_trajectories(run, ids) == {"p1/T-02"}


def test_filegrd_550_on_full_set_with_twins(tmp_path):
    """20 × 32 rendered (one trajectory in 8 without any text output): the paper's 550 FileGrd items (§9.1), each
    re-issuing a text item of the bank that keeps the same question, options and context."""
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    run = RunDir(tmp_path / "full")
    ps, ts = load_profiles(), load_tasks()
    bs.write_full_run(run, ps, ts)
    tids = run.read_table("trajectories/index.parquet")["trajectory_id"].to_list()
    with_text = [t for i, t in enumerate(tids) if i % 8]
    run.write_table("trajectories/outputs.parquet", _outputs([(t, "report.md") for t in with_text]))
    run.write_table("derivatives/index.parquet", pl.DataFrame(
        [{"trajectory_id": t, "source": "report.md", "status": "ok"} for t in with_text]))
    info = run_bench(load_config(overrides={"run_dir": run.root, "seed": 7}))
    assert info["sub_tasks"]["FileGrd"] == {"target": 550, "built": 550, "note": ""}
    items = {r["question_id"]: r for r in run.read_table("bench/items.parquet").to_dicts()}
    fg = [r for r in items.values() if r["sub_track"] == "FileGrd"]
    assert len(fg) == 550 and {r["setting"] for r in fg} == {"multimodal"}
    sources = {}
    for r in fg:
        meta = json.loads(r["metadata"])
        twin = items[meta["text_twin"]]
        assert twin["setting"] == "text" and twin["sub_track"] == meta["source_sub_task"]
        assert twin["question"] == r["question"] and twin["context"] == r["context"]
        assert sorted(json.loads(twin["choices"])) == sorted(json.loads(r["choices"]))
        sources[meta["source_sub_task"]] = sources.get(meta["source_sub_task"], 0) + 1
    assert set(sources) == {"AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna"}
    assert max(sources.values()) - min(sources.values()) <= 1  # spread evenly (builders/filegrd.py)
