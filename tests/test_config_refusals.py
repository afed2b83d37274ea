"""User mistakes are refused before any work starts and leave nothing behind: unknown ids never become a run's
recorded set, unknown names in a config section are refused when the config loads (every section when no stage is
named, else the sections of the stages the job runs), and a
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
        run_pipeline(cfg, executor="serial")
    assert not run.exists()  # seed did not start (nothing written, not even the directory)


@pytest.mark.parametrize("override, message", [
    ("encode.embedder=bogus", "encode.embedder: unknown embedder 'bogus'"),
    ("evaluate.methods=[no_context, bogus]", "evaluate.methods: unknown method(s) 'bogus'"),
    ("evaluate.method_options.nope.x=1", "options for unknown method(s) 'nope'"),
    ("evaluate.backbone=bogus", "unknown backbone kind 'bogus'"),
    ("evaluate.backbone={base_url: 'http://127.0.0.1:9/v1', modle: m}", "unknown settings ['modle']"),
    ("evaluate.judge=bogus", "unknown judge 'bogus'"),
    ("evaluate.backbone=oracle", "the oracle answers from the key: it is the report's validity row"),
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
    # options a method does not read, or of another type (`ocr=maybe` ran OCR; `foo` was recorded and ignored)
    ("evaluate.method_options.visrag.bogus=1", "visrag has no option 'bogus' (its options: ocr,"),
    ("evaluate.method_options.visrag.ocr=maybe", "visrag.ocr: expected bool, got 'maybe'"),
    ("evaluate.method_options.no_context.foo=1", "no_context has no option 'foo' (it takes no options)"),
    ("evaluate.method_options.full_context.cap_chars=true", "full_context.cap_chars: expected int, got True"),
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


@pytest.mark.parametrize("stage", ["encode", "render", "bench", "evaluate"])
def test_a_stage_refused_on_a_folder_that_is_not_a_run_leaves_it_as_it_was(tmp_path, capsys, stage):
    """A stage given a folder that holds no run (a fresh-eyes finding: a `.lock` was left there) refuses it in one
    line and leaves exactly the files that were there; a run's own lock file stays (test_runtime_integrity)."""
    folder = tmp_path / "Documents"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n", encoding="utf-8")
    rc = run_job(_job(stage).main, ["--run-dir", str(folder), "--serial"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{folder}: " in err and "Traceback" not in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    rc = run_job(_job("pipeline").main, ["--run-dir", str(folder), "--serial", "--only", stage])
    assert rc == 2 and f"{folder}: " in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_a_bare_rerun_keeps_the_profile_set_the_run_was_generated_from(tmp_path, capsys):
    """Fresh-eyes finding: `jobs/generate.py --run-dir R` after a first generate with `--profiles-dir D` took the
    bundled profiles instead and regenerated the trajectory from them (run.json then said profiles_dir None). A
    bare rerun now continues with D, says so, and finds the trajectory done; an explicit set directory still wins."""
    import shutil

    pdir = tmp_path / "my-profiles"
    pdir.mkdir()
    shutil.copy(ROOT / "conf" / "profiles" / "p3_efficient_executor.yaml", pdir)
    run = tmp_path / "run"
    gen = _job("generate")
    common = ["--run-dir", str(run), "--serial", "--set", "workspace.tts=tone"]
    assert run_job(gen.main, [*common, "--profiles-dir", str(pdir), "--tasks", "T-03"]) == 0
    capsys.readouterr()
    assert run_job(gen.main, common) == 0
    out = capsys.readouterr()
    assert f"using the run's profiles_dir {pdir} (run.json)" in out.err
    assert "skipped as done: 1" in out.out
    rec = json.loads((run / "run.json").read_text(encoding="utf-8"))["stages"]["generate"]
    assert rec["profiles_dir"] == str(pdir)
    other = tmp_path / "other-profiles"
    shutil.copytree(pdir, other)
    assert run_job(gen.main, [*common, "--profiles-dir", str(other)]) == 0
    assert "using the run's profiles_dir" not in capsys.readouterr().err
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["stages"]["generate"]["profiles_dir"] == \
        str(other)


def test_a_misspelt_task_scenario_is_named_before_its_bundle_is_built(tmp_path, capsys):
    """Fresh-eyes finding: `scenario: investment_analyst_folderx` in a task file built a generic business bundle
    without a word. The seed stage now warns, naming the task, the field and the scenario it is close to; a task
    set whose scenarios are all known prints no such warning."""
    import shutil

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    text = (ROOT / "conf" / "tasks" / "t01.yaml").read_text(encoding="utf-8")
    assert "scenario: investment_analyst_folder\n" in text
    (tasks / "t01.yaml").write_text(text.replace("scenario: investment_analyst_folder\n",
                                                 "scenario: investment_analyst_folderx\n"), encoding="utf-8")
    argv = ["--run-dir", str(tmp_path / "run"), "--serial", "--set", f"tasks_dir={tasks}", "--set", "tasks=[T-01]",
            "--set", "workspace.tts=tone"]
    assert run_job(_job("seed").main, argv) == 0
    err = capsys.readouterr().err
    assert ("warning: task T-01: field 'workspace.scenario': unknown scenario 'investment_analyst_folderx' (did "
            "you mean 'investment_analyst_folder'?); its bundle is built from the generic business domain") in err
    shutil.copy(ROOT / "conf" / "tasks" / "t01.yaml", tasks / "t01.yaml")
    assert run_job(_job("seed").main, argv) == 0
    assert "unknown scenario" not in capsys.readouterr().err


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
    assert not (run / "run.json").exists()  # nothing done: the failed start's snapshot is removed again
    (run / "run.json").write_text(json.dumps({"config": {"seed": 7, "profiles": ["p9"]}}))  # an older run's leftover
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


def test_a_failed_start_leaves_no_run_json_pinning_the_seed(tmp_path, capsys):
    """A job that starts a run and fails before any unit is done (here: a malformed profile file) leaves no
    run.json: a corrected command with another seed starts the directory afresh (it used to be refused: "made with
    seed 7"). The directory this job created is removed again."""
    import shutil

    from filegram_ray.paths import profiles_dir

    bad = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), bad)
    (bad / "p3_efficient_executor.yaml").write_text("A: [M\n", encoding="utf-8")
    run = tmp_path / "run"
    gen = _job("generate")
    rc = run_job(gen.main, ["--run-dir", str(run), "--serial", "--profiles-dir", str(bad), "--tasks", "T-01"])
    assert rc == 2 and "p3_efficient_executor.yaml" in capsys.readouterr().err
    assert not run.exists()
    # the same through the pipeline, and on a directory that already existed (kept, but without run.json)
    run.mkdir()
    rc = run_job(_job("pipeline").main, ["--run-dir", str(run), "--serial", "--only", "generate",
                                         "--set", f"profiles_dir={bad}", "--set", "tasks=[T-01]"])
    assert rc == 2 and run.is_dir() and not (run / "run.json").exists()
    capsys.readouterr()


def test_a_file_as_run_dir_is_named(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("x", encoding="utf-8")
    for job in ("seed", "bench"):
        rc = run_job(_job(job).main, ["--run-dir", str(f), "--serial"])
        assert rc == 2 and f"--run-dir {f} is a file, not a run directory" in capsys.readouterr().err


def test_an_object_store_without_credentials_is_one_line(monkeypatch, capsys):
    """`--run-dir s3://…` with no credentials: the store client's refusal is one line and exit 2, not a traceback."""
    pytest.importorskip("s3fs")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probe
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    rc = run_job(_job("bench").main, ["--run-dir", "s3://filegram-no-such-bucket-xyz/run"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_output_piped_into_head_is_not_an_error():
    """`filegram … | head`: the reader closing the pipe early ends the command quietly (exit 0), not with
    "error: [Errno 32] Broken pipe" (exit 2) or Python's "Exception ignored … BrokenPipeError"."""
    p = subprocess.Popen([sys.executable, "-m", "filegram_ray.cli", "profiles", "perturbations"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first line is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert "Broken pipe" not in err and "BrokenPipeError" not in err


def test_caption_before_record_is_an_error(tmp_path, capsys):
    """Caption of the run's recordings on a run whose record stage never ran: exit 2 naming the missing index (it
    exited 0 with "nothing to caption" printed twice and recorded a caption stage)."""
    run = tmp_path / "run"
    run.mkdir()
    rc = run_job(_job("caption").main, ["--run-dir", str(run), "--serial"])
    err = capsys.readouterr().err
    assert rc == 2 and "recordings/index.parquet does not exist — run the record stage first" in err
    assert not (run / "run.json").exists()  # nothing done, nothing recorded


@pytest.mark.parametrize("job, argv", [("seed", []), ("pipeline", ["--only", "seed"])])
def test_an_unreachable_ray_address_is_one_line_and_leaves_nothing(tmp_path, capsys, job, argv):
    """`--address 127.0.0.1:1` (nothing listening): one line naming the address, exit 2, at once — ray.init retried
    for minutes — and the seed stage uses the address at all (it started a local Ray instead)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = tmp_path / "run"
    # a fresh process, as a user's job is (this test process may already hold a Ray connection)
    out = subprocess.run([sys.executable, f"jobs/{job}.py", "--run-dir", str(run), "--address", f"127.0.0.1:{port}",
                          *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and f"Ray address 127.0.0.1:{port}: nothing answers" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not run.exists()


def test_an_unknown_id_lists_the_known_ones_in_number_order():
    from filegram_ray.config import match_ids
    from filegram_ray.engine.generate import GenerateConfig, plan_units

    with pytest.raises(ValueError, match=r"unknown id 'p99' \(conf has: p1_a, p2_b, p3, p10_x\)"):
        match_ids(["p99"], ["p10_x", "p1_a", "p2_b", "p3"], "profiles", "conf")
    # generate on an existing run (no new-run check) names the profile set and its ids too
    cfg = load_config(None, ["profiles=[nobody]"])
    with pytest.raises(ValueError, match=r"profiles: unknown id 'nobody' \(.*conf/profiles has: p1_methodical, "
                                         r"p2_"):
        plan_units(cfg, GenerateConfig())
