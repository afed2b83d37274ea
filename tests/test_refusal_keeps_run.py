"""A job refused for a mistake in what the user asked leaves the run as it was.

Found by a new user's walkthrough: after a finished seed + generate on p1 / T-01, `filegram generate --profiles
p1_methodcal` (a typo) ran the seed stage first, then refused the id — and ``run.json`` then held the typo as the
run's profiles and generate as failed, so the next `filegram bench build` refused the user's own run for a mistake
made one command earlier. Ids are checked before any stage runs, and a request a stage's check refuses writes no
record."""

from __future__ import annotations

import pytest

from filegram_ray.cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusal") / "run"
    rc = main(["pipeline", "--serial", "--run-dir", str(root), "--only", "seed", "generate",
               "--set", "profiles=[p1]", "--set", "tasks=[T-01]"])
    assert rc == 0
    return root


@pytest.mark.parametrize("argv, field", [
    (["generate", "--profiles", "p1_methodcal"], "profiles"),
    (["generate", "--tasks", "T-99"], "tasks"),
    (["seed", "--tasks", "T-99"], "tasks"),
])
def test_a_refused_id_leaves_run_json_byte_identical(run_dir, capsys, argv, field):
    before = (run_dir / "run.json").read_bytes()
    listing = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    assert main([argv[0], "--run-dir", str(run_dir), "--serial", *argv[1:]]) == 2
    out, err = capsys.readouterr()
    assert f"config field {field}: unknown id" in err and "Traceback" not in err, err
    assert "running it first" not in out and "seed:" not in out, out  # nothing ran before the refusal
    assert (run_dir / "run.json").read_bytes() == before
    assert sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()) == listing
    # and the run still answers with its own sets: the next stage is not refused for the earlier typo
    assert main(["generate", "--run-dir", str(run_dir), "--serial"]) == 0
