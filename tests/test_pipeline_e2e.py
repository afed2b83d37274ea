"""The whole pipeline (seed → generate → encode → render → bench → evaluate) on a tiny config, in one process.

Checks that every stage hands the next one what it needs and that the report's numbers are computed from the
answers: the oracle row is 100, the random row sits near chance, and the table's figures equal a recount from
``results/results.parquet``.
"""

from __future__ import annotations

import polars as pl
import pytest

from filegram_ray.config import load_config
from filegram_ray.pipeline import run_pipeline


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    cfg = load_config(overrides={
        "run_dir": str(root),
        "profiles": ["p1_methodical", "p3_efficient_executor", "p18_decisive_scanner"],
        "tasks": ["T-01", "T-03", "T-16", "T-24"],  # T-16/T-24: perturbation candidates; T-24 multimodal
        "workspace": {"tts": "tone"},               # fast synthetic audio for the bundles
        "encode": {"embedder": "hashing"},          # lexical embedder: no model load in this test
        "render": {"formats": ["pdf", "docx", "md", "pptx", "xlsx", "png_page"]},  # no TTS: keeps it fast
        # one short guidance video at 640 x 360: OCR time goes with the pixels and the keyframes (on 2 AVX2 cores
        # p3/T-16, 35 events, took 69 s; p3/T-03, 13 events, 20 s); what OCR reads back at full size is
        # tests/test_video_caption.py's floor
        "record": {"trajectories": ["p3_efficient_executor/T-03"], "width": 640, "height": 360},
        # 2 items per sub-task: FileGramOS's MiniLM ingest costs ~2.7 s per unit (51 s at 4 items per sub-task)
        "evaluate": {"methods": ["no_context", "full_context", "filegramos"], "sample_per_sub_task": 2,
                     "method_options": {"filegramos": {}}},
    })
    timings = run_pipeline(cfg, executor="serial")
    return cfg.run(), timings


def test_every_stage_ran_and_wrote_its_outputs(tiny_run):
    run, timings = tiny_run
    assert list(timings) == ["seed", "generate", "encode", "render", "record", "caption", "bench", "evaluate"]
    for rel in ("workspaces/index.parquet", "trajectories/index.parquet", "trajectories/outputs.parquet",
                "memory/p1_methodical/store.json", "derivatives/index.parquet", "bench/items.parquet",
                "bench/answers_key.parquet", "results/results.parquet", "results/report.md", "run.json",
                "recordings/index.parquet", "captions/index.parquet", "realworld/index.parquet"):
        assert run.exists(rel), rel
    idx = run.read_table("trajectories/index.parquet")
    assert idx.height == 12 and set(idx["status"]) == {"ok"}
    assert set(run.read_json("run.json")["stages"]) >= {"seed", "generate", "encode", "render", "record", "caption",
                                                         "bench", "evaluate"}


def test_report_numbers_come_from_answers(tiny_run):
    run, _ = tiny_run
    res = run.read_table("results/results.parquet")
    summary = run.read_table("results/summary.parquet")
    mcq = res.filter(~pl.col("is_open"))
    oracle = mcq.filter(pl.col("method") == "oracle")
    assert oracle.height and oracle["score"].mean() == 100.0
    rnd = mcq.filter(pl.col("method") == "random")
    chance = (1.0 / rnd["n_choices"].cast(pl.Float64)).mean() * 100
    assert abs(rnd["score"].mean() - chance) < 25  # a handful of items: near chance, never near 100
    for method in ("no_context", "full_context", "filegramos"):
        recount = mcq.filter(pl.col("method") == method)["score"].mean()
        row = summary.filter(pl.col("method") == method)
        assert row.height == 1 and abs(row["avg"][0] - recount) < 1e-6
    report = run.read_text("results/report.md")
    assert "FileGramOS" in report and "Oracle" in report
    # the default reader says how it reads (conf/default.yaml: encoder, passages pre-selected)
    assert "backbone: `encoder` (8 passages per option clause pre-selected)" in report.splitlines()[2]


def test_stage_table_names_its_unit_columns():
    """Fresh-eyes finding: the pipeline table's "skipped" (units an earlier run finished) was read against a stage's
    own "skipped" (e.g. an audio format that does not apply, which the record counts as done). The column is
    "earlier" and a line under the table says what each unit column counts."""
    from filegram_ray.pipeline import format_stage_table

    table = format_stage_table({"render": {"seconds": 2.0, "result": {
        "cpu_s": 1.5, "peak_memory_mb": 100, "driver_peak_memory_mb": 90,
        "units": {"planned": 7, "done": 5, "skipped": 2, "failed": 0}}}})
    head, row = table.splitlines()[:2]
    assert head.split()[-4:] == ["planned", "done", "earlier", "failed"] and row.split()[-4:] == ["7", "5", "2", "0"]
    assert "earlier = finished by an earlier run and left alone" in table.splitlines()[-1]


def test_stage_table_shows_each_step_of_a_stage_of_several():
    """A stage of several steps (evaluate: method × context units, reader checks, verdicts) counts their sum in its
    row; each step's counts stand on a line under it, so the sum is never read as one kind of unit."""
    from filegram_ray.pipeline import format_stage_table

    steps = {"method × context units": {"planned": 12, "done": 12, "skipped": 0, "failed": 0},
             "reader checks": {"planned": 30, "done": 28, "skipped": 0, "failed": 2},
             "verdicts": {"planned": 0, "done": 0, "skipped": 0, "failed": 0}}
    table = format_stage_table({"evaluate": {"seconds": 9.0, "result": {
        "units": {"planned": 42, "done": 40, "skipped": 0, "failed": 2}, "steps": steps}}})
    lines = table.splitlines()
    assert lines[1].split()[-4:] == ["42", "40", "0", "2"]
    assert lines[2:5] == ["  · method × context units: planned 12, done 12, earlier 0, failed 0",
                          "  · reader checks: planned 30, done 28, earlier 0, failed 2",
                          "  · verdicts: planned 0, done 0, earlier 0, failed 0"]
