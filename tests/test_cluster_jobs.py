"""`ray job submit` against a real local Ray head (``ray start --head`` on loopback).

Submits ``jobs/generate.py`` on a small subset with the Ray Jobs CLI exactly as a cluster user would
(working directory = this repository, run directory given as a path the job — not this process — resolves),
waits for success, checks the outputs and the job logs, and stops the head.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import pytest
from raycluster import local_head, ray_cli, submit_job

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.ray]


def test_generate_job_submission(tmp_path):
    run_dir = tmp_path / f"run-{uuid.uuid4().hex[:6]}"
    runtime_env = json.dumps({"excludes": ["runs/", ".git/", "**/__pycache__/", ".pytest_cache/",
                                           "*.egg-info/"]})
    with local_head(num_cpus=2) as (url, env):
        # workspace.tts=tone: Piper speech for T-16's voice memo costs ~11 s (test_workspace_bundles covers it)
        proc = submit_job(url, env, str(REPO), [
            sys.executable, "jobs/generate.py", "--run-dir", str(run_dir), "--profiles", "p3", "p18",
            "--tasks", "T-03", "T-16", "--num-actors", "1", "--set", "workspace.tts=tone"],
            runtime_env_json=runtime_env, timeout_s=900)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert "succeeded" in out
        # The job's own log, fetched back through the Jobs API, carries the stage summary.
        job_id = next(tok for tok in out.split() if tok.startswith("'raysubmit_")).strip("'")
        logs = subprocess.run([*ray_cli(), "job", "logs", "--address", url, job_id], env=env,
                              capture_output=True, text=True, timeout=120)
        assert logs.returncode == 0
        assert "Generate summary" in logs.stdout
        assert "trajectories   ok 4" in logs.stdout
    index = pl.read_parquet(run_dir / "trajectories" / "index.parquet")
    assert sorted(index["trajectory_id"].to_list()) == [
        "p18_decisive_scanner/T-03", "p18_decisive_scanner/T-16",
        "p3_efficient_executor/T-03", "p3_efficient_executor/T-16"]
    assert index["status"].to_list() == ["ok"] * 4
    for tid in index["trajectory_id"]:
        folder = run_dir / "trajectories" / tid
        for name in ("events.json", "events_raw.json", "meta.json", "summary.json"):
            assert (folder / name).is_file(), f"{tid}: {name} missing"
        assert json.loads((folder / "events.json").read_text())  # a non-empty event list


def test_ray_cli_found_without_path(tmp_path):
    """Deliverable 9 of issue 13: the ``ray`` CLI is found next to ``sys.executable`` even when the interpreter's
    ``bin/`` is not on ``PATH`` (a venv's python running pytest without the venv activated)."""
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(tmp_path)  # nothing there: a bare "ray" would raise FileNotFoundError
    proc = subprocess.run([*ray_cli(), "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "version" in proc.stdout.lower()
