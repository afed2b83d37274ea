"""Scheduling of the seed and caption stages (issue #31 item 3): longest units first, deterministic order, and the
caption stage's units (one recording each, for an executor that keeps one unit in flight per actor)."""

from __future__ import annotations

from filegram_ray.tasks import load_tasks
from filegram_ray.workspace.stage import bundle_cost, longest_first


def _units():
    return [{"unit_id": t.task_id, "task": t.model_dump(mode="json")} for t in load_tasks(None)]


def test_seed_units_speech_heavy_bundles_first():
    """Every bundle with planned voice memos (mp3/wav) is submitted before every bundle without any."""
    order = longest_first(_units())
    speech = [("mp3" in u["task"]["workspace"]["inputs"] or "wav" in u["task"]["workspace"]["inputs"])
              for u in order]
    assert any(speech) and not all(speech)
    first_plain = speech.index(False)
    assert not any(speech[first_plain:]), [u["unit_id"] for u in order]
    costs = [bundle_cost(u["task"]) for u in order]
    assert costs == sorted(costs, reverse=True)


def test_seed_order_is_deterministic_and_independent_of_input_order():
    units = _units()
    a = [u["unit_id"] for u in longest_first(units)]
    b = [u["unit_id"] for u in longest_first(list(reversed(units)))]
    assert a == b
    assert sorted(a) == sorted(u["unit_id"] for u in units)


def test_bundle_cost_of_an_empty_workspace_is_zero():
    assert bundle_cost({"workspace": {"empty": True, "inputs": {}}}) == 0
    assert bundle_cost({"workspace": {"inputs": {"wav": 1}}}) > bundle_cost({"workspace": {"inputs": {"pdf": 20}}})


def test_caption_recordings_longest_first_ties_by_id():
    from video.caption_stage import longest_first as caption_order

    items = [{"recording_id": "p2/T-01", "duration_s": 30.0}, {"recording_id": "p1/T-02", "duration_s": 68.2},
             {"recording_id": "ext/clip-0a1b2c3d"}, {"recording_id": "p0/T-03", "duration_s": 30.0}]
    order = [it["recording_id"] for it in caption_order(items)]
    assert order == ["p1/T-02", "p0/T-03", "p2/T-01", "ext/clip-0a1b2c3d"]
    assert [it["recording_id"] for it in caption_order(list(reversed(items)))] == order


def test_caption_units_are_one_recording_each_longest_first(tmp_path):
    """The caption stage hands its executor one recording per task, longest first, and asks for
    ``caption.num_actors`` workers; the executors keep one task in flight per actor, so an idle actor takes the
    next recording instead of the first actor queueing most of them (issue #31 item 3). The record stage's error
    rows are not captioned and an MP4 named twice is one item."""
    import polars as pl

    from filegram_ray.config import load_config
    from filegram_ray.stages.runner import stage_options
    from video.caption_stage import CaptionStage, OcrCaptionWorker, recording_id_of

    run_dir = tmp_path / "run"
    (run_dir / "recordings").mkdir(parents=True)
    pl.DataFrame({"trajectory_id": ["p1/T-01", "p2/T-02", "p3/T-03"],
                  "path": ["recordings/p1/T-01.mp4", "recordings/p2/T-02.mp4", ""],
                  "status": ["ok", "ok", "error"], "duration_s": [30.0, 68.2, None],
                  "sha256": ["a", "b", None]}).write_parquet(run_dir / "recordings" / "index.parquet")
    clip = str(tmp_path / "clip.mp4")
    cfg = load_config(overrides={"run_dir": str(run_dir), "caption": {"num_actors": 3, "inputs": [clip, clip]}})
    stage = CaptionStage(cfg, stage_options(CaptionStage, cfg), cfg.run())
    stage.check()
    items = stage.items("recordings")
    assert [u["unit_id"] for u in items] == ["ocr/p2/T-02", "ocr/p1/T-01", f"ocr/{recording_id_of(clip)}"]
    assert [len(t) for t in stage.tasks("recordings", items)] == [1, 1, 1]
    spec = stage.worker("recordings")
    assert spec.cls is OcrCaptionWorker and spec.num_actors == 3
