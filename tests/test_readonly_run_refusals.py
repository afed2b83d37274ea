"""Commands that only read a run refuse a local run directory that does not exist, in one line (exit 2), and
create nothing (a fresh-eyes finding: `filegram validity runs/smal` left an empty `runs/smal/` behind)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [
    ["validity", "{run}"],
    ["memory", "show", "{run}", "p1"],
    ["bench", "counts", "--run-dir", "{run}"],
])
def test_a_typod_run_directory_is_refused_and_not_created(tmp_path, argv):
    run = tmp_path / "runs" / "smal"
    args = [a.format(run=run) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "filegram_ray.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "no such run directory" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_a_file_given_as_the_run_directory_is_named_as_a_file(tmp_path):
    """`filegram validity results.md` says the path is a file, not that no run directory exists there (a
    fresh-eyes finding), in one line, exit 2, and the file is left as it was."""
    f = tmp_path / "report.md"
    f.write_text("# a report\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "filegram_ray.cli", "validity", str(f)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"{f}: a file, not a run directory" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f.read_text(encoding="utf-8") == "# a report\n"


def test_an_unknown_profile_id_is_refused_before_the_seed_stage_starts(tmp_path):
    """`pipeline --only seed --set profiles=[p99]` is refused in one line before Ray starts or anything is created
    (the seed stage records the run's sets, so the profile ids are checked with the task ids)."""
    run = tmp_path / "runs" / "odd"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "pipeline.py"), "--run-dir", str(run), "--set",
                           "profiles=[p99]", "--only", "seed"], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "unknown id 'p99'" in proc.stderr and "=== stage" not in proc.stdout + proc.stderr
    assert not (tmp_path / "runs").exists()
