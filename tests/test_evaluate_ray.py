"""The evaluate stage on a local Ray actor pool (the path a cluster run takes)."""

from __future__ import annotations

import polars as pl
import pytest
from evaluate_fixtures import make_run

from filegram_ray.config import load_config
from filegram_ray.evaluate.stage import run_evaluate

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # ~40 s on a loaded 2-core machine


def test_evaluate_on_ray_actors_matches_serial(tmp_path, ray_local):
    ray_root, serial_root = tmp_path / "ray", tmp_path / "serial"
    for root in (ray_root, serial_root):
        make_run(root)
    section = {"methods": ["no_context", "full_context"], "num_actors": 2, "num_cpus_per_actor": 0.5,
               "plots": False, "sample_per_sub_task": None}
    info = run_evaluate(load_config(overrides={"run_dir": str(ray_root), "evaluate": section}))
    run_evaluate(load_config(overrides={"run_dir": str(serial_root), "evaluate": {**section, "executor": "serial"}}))
    assert info["n_failed_units"] == 0
    cols = ["method", "question_id", "choice", "score", "status"]
    a = pl.read_parquet(ray_root / "results/results.parquet").select(cols).sort(["method", "question_id"])
    b = pl.read_parquet(serial_root / "results/results.parquet").select(cols).sort(["method", "question_id"])
    assert a.equals(b)  # same seed, same answers, whether on actors or in-process
