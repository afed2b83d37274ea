"""User mistakes are refused before any work starts and leave nothing behind: unknown ids never become a run's
recorded set, unknown names in any config section are refused when the config loads (whichever stage runs), and a
stage that reads a run refuses a run directory that does not exist instead of creating it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from filegram_ray.config import load_config
from filegram_ray.jobargs import common_parser, config_from_args, run_job

ROOT = Path(__file__).resolve().parents[1]


def _job(name: str):
    spec = importlib.util.spec_from_file_location(f"job_{name}", ROOT / "jobs" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_refused_profile_id_is_not_recorded_for_later_jobs(tmp_path, capsys):
    """`--profiles p99` on a new run is refused before run.json exists, so the next job on that directory does not
    inherit p99 from the config snapshot (it used to: every later job failed on the run's "recorded" p99)."""
    run = tmp_path / "run"
    gen = _job("generate")
    rc = run_job(gen.main, ["--run-dir", str(run), "--serial", "--profiles", "p99", "--tasks", "T-09"])
    err = capsys.readouterr().err
    assert rc == 2 and "profiles: unknown id 'p99'" in err
    assert not (run / "run.json").exists()
    cfg = config_from_args(common_parser("x").parse_args(["--run-dir", str(run)]))
    assert cfg.profiles is None
    assert "using the run's profiles" not in capsys.readouterr().err
    # the unknown task id of the seed stage, short or long form, is refused the same way
    rc = run_job(_job("seed").main, ["--run-dir", str(run), "--serial", "--set", "tasks=[T-99]"])
    assert rc == 2 and "tasks: unknown id 'T-99'" in capsys.readouterr().err
    assert not (run / "run.json").exists()


def test_pipeline_refuses_unknown_ids_before_the_first_stage(tmp_path):
    from filegram_ray.pipeline import run_pipeline

    run = tmp_path / "run"
    cfg = load_config(None, [f"run_dir={run}", "profiles=[p1, p99]"])
    with pytest.raises(ValueError, match="profiles: unknown id 'p99'"):
        run_pipeline(cfg, serial=True)
    assert not run.exists()  # seed did not start (nothing written, not even the directory)


@pytest.mark.parametrize("override, message", [
    ("encode.embedder=bogus", "encode.embedder: unknown embedder 'bogus'"),
    ("evaluate.methods=[no_context, bogus]", "evaluate.methods: unknown method(s) 'bogus'"),
    ("evaluate.method_options.nope.x=1", "options for unknown method(s) 'nope'"),
    ("evaluate.backbone=bogus", "unknown backbone kind 'bogus'"),
    ("evaluate.backbone={base_url: 'http://127.0.0.1:9/v1', modle: m}", "unknown settings ['modle']"),
    ("evaluate.judge=bogus", "unknown judge 'bogus'"),
    ("evaluate.settings=[text, bogus]", "unknown setting(s) 'bogus'"),
    ("evaluate.sub_tracks=[NoSuch]", "unknown sub-task(s) 'NoSuch'"),
    ("evaluate.multimodal_content=x", "evaluate.multimodal_content"),
    ("bench.counts.NoSuchSubTask=3", "bench.counts: unknown sub-task(s) 'NoSuchSubTask'"),
    ("bench.sub_tasks=[ProfRec, Nope]", "bench.sub_tasks: unknown sub-task(s) 'Nope'"),
    ("seed.num_actors=2", "the seed stage's options are under workspace"),
    # empty selections and negative counts (they used to pass and fail late, after rewriting the report)
    ("evaluate.methods=[]", "evaluate.methods: List should have at least 1 item"),
    ("evaluate.settings=[]", "evaluate.settings: List should have at least 1 item"),
    ("evaluate.sub_tracks=[]", "evaluate.sub_tracks: List should have at least 1 item"),
    ("evaluate.max_items=-5", "evaluate.max_items: Input should be greater than or equal to 0"),
    ("bench.sub_tasks=[]", "bench.sub_tasks: List should have at least 1 item"),
    ("bench.counts={AttrRec: -3}", "bench.counts.AttrRec: Input should be greater than or equal to 0"),
    ("workspace.num_actors=0", "workspace.num_actors: Input should be greater than or equal to 1"),
    ("ray.num_cpus=0", "ray.num_cpus: Input should be greater than or equal to 1"),
    ("render.limit=-1", "render.limit: Input should be greater than or equal to 0"),
])
def test_unknown_names_in_any_section_are_refused_when_the_config_loads(override, message):
    with pytest.raises(ValueError) as err:
        load_config(None, [override])
    assert message in str(err.value) and f"--set {override}" in str(err.value)
    assert "Value error," not in str(err.value)


def test_known_names_still_load():
    cfg = load_config(None, ["evaluate.backbone={kind: lexical, seed: 3}", "bench.counts.ProfRec=5",
                             "encode.embedder=auto", "evaluate.sub_tracks=[ProfRec]"])
    assert cfg.section("bench")["counts"] == {"ProfRec": 5}


def test_generate_num_actors_zero_is_refused_not_ignored(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        _job("generate").main(["--run-dir", str(tmp_path / "run"), "--num-actors", "0"])
    assert exit_.value.code == 2 and "--num-actors: expected a whole number ≥ 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("stage", ["encode", "render", "record", "caption", "bench", "evaluate"])
def test_a_stage_that_reads_a_run_refuses_a_missing_run_directory(tmp_path, capsys, stage):
    missing = tmp_path / "no-such-run"
    rc = run_job(_job(stage).main, ["--run-dir", str(missing), "--serial"])
    assert rc == 2 and f"run directory {missing} does not exist" in capsys.readouterr().err
    assert not missing.exists()  # no run.json, no lock file, no directory


def test_benchmark_scripts_refuse_a_missing_run_directory_without_creating_it(tmp_path):
    missing = tmp_path / "no-such-run"
    for cmd in (["tests/benchmarks/bench_methods.py", "--from-run", str(missing)],
                ["tests/benchmarks/bench_pipeline.py", "--table-only", "--run-dir", str(missing)]):
        out = subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr and str(missing) in out.stderr
        assert not missing.exists()


def test_bench_methods_refuses_sets_on_an_existing_run(tmp_path):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    import polars as pl

    pl.DataFrame({"trajectory_id": ["p1_methodical/T-01"], "status": ["ok"]}).write_parquet(
        run / "trajectories" / "index.parquet")
    (run / "run.json").write_text(json.dumps({"seed": 7}))
    out = subprocess.run([sys.executable, "tests/benchmarks/bench_methods.py", "--run-dir", str(run),
                          "--profiles", "p2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "already has trajectories" in out.stderr


def test_a_later_stage_refusing_an_id_does_not_poison_the_run(tmp_path, capsys):
    """Encode on a run whose first job it is (a hand-made run directory, no run.json yet) refuses `p9` against the
    run's trajectories; the snapshot it wrote must not make p9 the run's set for the next job."""
    import polars as pl

    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    pl.DataFrame({"trajectory_id": ["pa_reader/T-01"], "profile_id": ["pa_reader"], "task_id": ["T-01"],
                  "status": ["ok"]}).write_parquet(run / "trajectories" / "index.parquet")
    rc = run_job(_job("encode").main, ["--run-dir", str(run), "--serial", "--set", "profiles=[p9]",
                                       "--set", "encode.embedder=hashing"])
    assert rc == 2 and "unknown id 'p9'" in capsys.readouterr().err
    assert json.loads((run / "run.json").read_text())["config"]["profiles"] == ["p9"]  # what was asked, recorded
    cfg = config_from_args(common_parser("x").parse_args(["--run-dir", str(run)]))
    assert cfg.profiles is None


def test_evaluate_call_arguments_go_through_the_config_checks(tmp_path):
    """`jobs/evaluate.py --methods X` (run_evaluate's ``methods=``) is checked like `evaluate.methods` in the config:
    one line naming the field, before the run directory is read."""
    from filegram_ray.evaluate.stage import run_evaluate

    (tmp_path / "run").mkdir()
    cfg = load_config(None, [f"run_dir={tmp_path / 'run'}"])
    with pytest.raises(ValueError, match=r"^evaluate\.methods: unknown method\(s\) 'bogus'"):
        run_evaluate(cfg, methods=["bogus"])
