"""Job-script options: a stage rerun on an existing run directory continues the run (its seed, its profile and
task sets) instead of silently growing it."""

from __future__ import annotations

import json
from pathlib import Path

from filegram_ray.jobargs import common_parser, config_from_args


def _args(*argv):
    p = common_parser("x")
    return p.parse_args(list(argv))


def test_rerun_without_sets_continues_the_runs_sets(tmp_path, capsys):
    """A stage given no --profiles/--tasks on an existing run takes the run's recorded sets (generate's record wins
    over the config snapshot); explicit sets and --set overrides are used as given."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "config": {"seed": 7, "profiles": ["p3", "p11"], "tasks": ["T-09"]},
        "stages": {"generate": {"profiles": ["p3_efficient_executor", "p11_x"], "tasks": ["T-09", "T-01"]}}}))
    cfg = config_from_args(_args("--run-dir", str(run)))
    assert cfg.profiles == ["p3_efficient_executor", "p11_x"] and cfg.tasks == ["T-09", "T-01"]
    assert "using the run's profiles" in capsys.readouterr().err
    cfg = config_from_args(_args("--run-dir", str(run)), {"profiles": ["p5"], "tasks": None})
    assert cfg.profiles == ["p5"] and cfg.tasks == ["T-09", "T-01"]
    cfg = config_from_args(_args("--run-dir", str(run), "--set", "tasks=[T-02]"))
    assert cfg.tasks == ["T-02"]
    # no generate record yet (after the seed stage): the config snapshot's sets
    (run / "run.json").write_text(json.dumps({"config": {"seed": 7, "profiles": None, "tasks": ["T-09"]},
                                              "stages": {"seed": {"seconds": 1.0}}}))
    cfg = config_from_args(_args("--run-dir", str(run)))
    assert cfg.profiles is None and cfg.tasks == ["T-09"]
    # no stage finished (a job refused its ids after writing the snapshot): the snapshot's sets are not the run's
    (run / "run.json").write_text(json.dumps({"config": {"seed": 7, "profiles": ["p99"], "tasks": ["T-09"]}}))
    cfg = config_from_args(_args("--run-dir", str(run)))
    assert cfg.profiles is None and cfg.tasks is None
    # a new run directory: the config's sets
    cfg = config_from_args(_args("--run-dir", str(tmp_path / "new")))
    assert cfg.profiles is None and cfg.tasks is None


def test_generate_rerun_same_command_does_not_grow_the_run(tmp_path, capsys):
    """The README's "interrupt it and run the same command again": generate without --profiles/--tasks on a run made
    with a subset plans that subset again (all skipped), and the record keeps the run's sets."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_job", Path(__file__).resolve().parents[1] / "jobs/generate.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    run = str(tmp_path / "run")
    common = ["--run-dir", run, "--serial", "--set", "workspace.tts=tone", "--set", "generate.perturb=false"]
    assert job.main([*common, "--profiles", "p3", "--tasks", "T-09"]) == 0
    assert job.main(common) == 0
    rec = json.loads(Path(run, "run.json").read_text())["stages"]["generate"]
    assert rec["units"]["planned"] == 1 and rec["units"]["skipped"] == 1
    assert rec["profiles"] == ["p3_efficient_executor"] and rec["tasks"] == ["T-09"]
    assert "using the run's profiles p3_efficient_executor" in capsys.readouterr().err
