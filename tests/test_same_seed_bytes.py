"""Same seed, same bytes, really (issue 13, deliverable 7; REL-report-timing-bytes-differ).

A tiny pipeline (seed → generate → encode → render → record → bench → evaluate) runs twice into two run directories — once on
Ray, once serially — and every file's SHA-256 is compared. Only the bookkeeping files named in ALLOWED may differ:
they hold wall-clock times, pids and Ray batch compositions by design. One guidance video is recorded (its MP4 bytes
are compared too); the caption stage is left out here for time (OCR of a recording costs ~100 CPU-s; its outputs'
determinism is the video tests' concern)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from filegram_ray.config import load_config
from filegram_ray.pipeline import run_pipeline

#: the only files allowed to differ between two same-seed runs, and why
ALLOWED = {
    r"run\.json": "stage records: wall times, package versions",
    r"_done/.*": "completion records: wall times, pids, peak memory, Ray batch names",
    r"results/timings\.json": "evaluate wall time",
    r"derivatives/timings\.parquet": "per-derivative render time",
    r"recordings/index\.parquet": "per-recording render_s / cpu_s (the MP4s themselves must be identical)",
    r"captions/index\.parquet": "per-recording caption seconds / cpu_s",
}


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_rel_report_timing_bytes_differ_pipeline_twice_same_bytes(ray_local, tmp_path):
    """REL-report-timing-bytes-differ: two same-seed runs of a tiny pipeline (Ray and serial) write byte-identical
    files — report.md, derivatives/index.parquet, FAISS indices, every data file — except the bookkeeping in ALLOWED."""
    trees = []
    for name, serial in (("ray", False), ("serial", True)):
        root = tmp_path / name
        cfg = load_config(overrides={
            "run_dir": str(root), "seed": 11, "profiles": ["p1_methodical"],
            "tasks": ["T-01", "T-24"], "workspace": {"tts": "tone"}, "encode": {"embedder": "hashing"},
            "render": {"formats": ["pdf", "docx", "md", "xlsx", "png_page"]},
            "record": {"sample": 1},
            "evaluate": {"methods": ["no_context", "full_context"], "sample_per_sub_task": 3}})
        run_pipeline(cfg, skip=["caption"], executor="serial" if serial else None)
        trees.append(_tree(root))
    a, b = trees
    allowed = re.compile("|".join(f"(?:{p})" for p in ALLOWED))
    data_a = {k: v for k, v in a.items() if not allowed.fullmatch(k)}
    data_b = {k: v for k, v in b.items() if not allowed.fullmatch(k)}
    assert sorted(data_a) == sorted(data_b)
    assert {k for k in data_a if data_a[k] != data_b[k]} == set()
    for must in ("results/report.md", "derivatives/index.parquet", "trajectories/index.parquet",
                 "bench/items.parquet", "results/results.parquet"):
        assert must in data_a, must
    assert any(k.startswith("indices/") and k.endswith(".faiss") for k in data_a)
    assert sum(k.startswith("recordings/") and k.endswith(".mp4") for k in data_a) == 1
    assert len(data_a) > 100
    report = (tmp_path / "ray" / "results" / "report.md").read_text(encoding="utf-8")
    assert not re.search(r"\d+\.\d+ s\b", report)  # no wall time in the report
