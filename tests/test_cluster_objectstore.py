"""Generate and encode end to end on a run directory that is not a local path.

The run directory is ``s3://…`` on a real S3-compatible server (moto's standalone server on loopback) reached
through s3fs — the same code path as a cluster's object store. fsspec's memory filesystem would not do here:
it lives inside one process, and Ray actors are other processes.
"""

from __future__ import annotations

import uuid

import pytest

from filegram_ray.config import load_config

pytestmark = [pytest.mark.ray]


def test_generate_and_encode_on_s3(s3_endpoint, ray_local):
    from filegram_ray.engine.generate import run_generate
    from filegram_ray.memory.stage import run_encode

    uri = f"s3://filegram/run-{uuid.uuid4().hex[:8]}"
    cfg = load_config(overrides={"run_dir": uri, "storage_options": s3_endpoint,
                                 "profiles": ["p3_efficient_executor", "p18_decisive_scanner"],
                                 "tasks": ["T-03", "T-20"],
                                 "generate": {"num_actors": 2, "num_cpus_per_actor": 0.5},
                                 "encode": {"embedder": "hashing"}})
    rec = run_generate(cfg)
    run = cfg.run()
    index = run.read_table("trajectories/index.parquet")
    assert index["status"].to_list() == ["ok"] * 4, index
    for tid in index["trajectory_id"]:
        assert run.exists(f"trajectories/{tid}/events.json")
        assert run.exists(f"trajectories/{tid}/meta.json")
    assert rec is not None
    summary = run_encode(cfg)
    assert run.exists("memory/p3_efficient_executor/store.json")
    assert run.exists("memory/p18_decisive_scanner/store.json")
    engrams = run.walk_files("engrams")
    assert "engrams/p3_efficient_executor/T-03.json" in engrams
    assert summary is not None
    # resumable on the object store too: a second run skips every finished unit
    rec2 = run_generate(cfg)
    assert run.read_table("trajectories/index.parquet")["status"].to_list() == ["ok"] * 4
    assert rec2 is not None
