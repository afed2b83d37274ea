"""Ray stages end, always (issue 13, deliverable 5): CPU requests no node can meet fail fast (BR-08), a unit that
kills its worker becomes an error row (BR-23), Ctrl-C ends a stage (BR-23), one job per run directory
(REL-concurrent-generate-index-corruption), one plan per run directory
(REL-render-rerun-without-seed-mixes-derivatives)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from raycluster import _pids_with
from synthetic_run import write_synthetic_run

from filegram_ray.config import load_config
from filegram_ray.jobargs import common_parser, config_from_args
from filegram_ray.runtime import ResourceRequestError, check_cpu_request, pool_capacity
from filegram_ray.stages.executors import map_units
from filegram_ray.storage import LOCK_RECORD, RunDir, RunDirLockedError
from rendering.stage import INDEX_PATH, run_render

REPO = Path(__file__).resolve().parent.parent


class Doubler:
    def __init__(self, crash_on: str | None = None):
        self.crash_on = crash_on

    def process(self, unit):
        if unit["unit_id"] == self.crash_on:
            os._exit(1)  # a native crash / OOM kill, every time
        return {"value": unit["x"] * 2}


# ---------------------------------------------------------------------------------------------------- BR-08
def test_br08_cpu_request_above_largest_node_fails_fast(ray_local):
    """BR-08: an actor asking for more CPUs than any node has fails at once, naming the request and the cluster."""
    t0 = time.perf_counter()
    with pytest.raises(ResourceRequestError, match=r"generate\.num_cpus_per_actor=3 .* largest node .* 2 CPUs"):
        map_units(Doubler, [{"unit_id": "a", "x": 1}], num_cpus_per_actor=3, stage="generate", progress=False)
    with pytest.raises(ResourceRequestError, match="encode.embed_num_cpus"):
        check_cpu_request(2.5, "encode.embed_num_cpus")
    assert time.perf_counter() - t0 < 30


def test_br08_encode_stage_refuses_unmet_embed_request(ray_local, tmp_path):
    """BR-08 (encode variant): encode.embed_num_cpus above the cluster's CPUs is refused before any work."""
    from test_memory_stage import make_run

    from filegram_ray.memory.stage import run_encode

    root = make_run(tmp_path / "run", bad=None)
    with pytest.raises(ResourceRequestError, match="encode.embed_num_cpus=3"):
        run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing", "encode.embed_num_cpus=3"]))


def test_br08_pool_larger_than_cluster_is_shrunk_and_finishes(ray_local):
    """BR-08: 3 actors × 1.5 CPUs on 2 CPUs: only one can be placed; the pool shrinks instead of leaving units on
    actors that never start."""
    assert pool_capacity(1.5) == 1 and pool_capacity(0.5) == 4
    rows = map_units(Doubler, [{"unit_id": str(i), "x": i} for i in range(4)], num_actors=3, num_cpus_per_actor=1.5,
                     stage="t", progress=False)
    assert sorted(r["value"] for r in rows) == [0, 2, 4, 6]


def test_br08_job_exits_2_with_one_line(tmp_path):
    """BR-08 (job form): the generate job with num_cpus_per_actor above the local Ray's CPUs exits 2 in seconds."""
    env = _job_env(tmp_path)
    proc = subprocess.run([sys.executable, "jobs/generate.py", "--run-dir", str(tmp_path / "run"), "--profiles", "p1",
                           "--tasks", "T-01", "--set", "ray.num_cpus=2", "--set", "generate.num_cpus_per_actor=3",
                           "--set", "workspace.tts=tone"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error: generate.num_cpus_per_actor=3 asks for 3 CPUs" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------------- BR-23
def test_br23_map_units_unit_that_kills_its_worker_becomes_error_row(ray_local):
    """BR-23 (map_units): the unit is retried max_restarts times, then an error row naming it; the rest finish."""
    rows = map_units(Doubler, [{"unit_id": str(i), "x": i} for i in range(5)], init_kwargs={"crash_on": "2"},
                     num_actors=2, num_cpus_per_actor=0.5, max_restarts=1, stage="t", progress=False)
    by = {r["unit"]: r for r in rows}
    assert by["2"]["status"] == "error" and "died 2 times while processing 2" in by["2"]["error"]
    assert sorted(r["value"] for u, r in by.items() if u != "2") == [0, 2, 6, 8]


def _poisoned_run(uri: str) -> RunDir:
    run = RunDir(uri)
    rows = write_synthetic_run(run, 4, seed=5)
    first = sorted(rows, key=lambda r: (r["trajectory_id"], r["path"]))[0]
    rel = f"trajectories/{first['trajectory_id']}/outputs/{first['path']}"
    text = run.read_text(rel)
    run.write_text(rel, text.replace("\n", "\nPOISON_UNIT marker line.\n", 1))
    return run


def test_br23_render_unit_that_kills_its_worker_becomes_error_row(ray_local, tmp_path):
    """BR-23: a section whose rendering kills the worker process every time ends as one error row naming the unit
    after a bounded number of attempts; every other unit is rendered and the stage ends with an index."""
    uri = str(tmp_path / "run")
    run = _poisoned_run(uri)
    cfg = load_config(overrides=[f"run_dir={uri}", "render.formats=[md]", "render.pools.documents.size=1",
                                 "render.batch_size=4", "render.max_attempts=2", "render.crash_on_text=POISON_UNIT"])
    t0 = time.perf_counter()
    rec = run_render(cfg)
    assert time.perf_counter() - t0 < 400
    idx = run.read_table(INDEX_PATH)
    bad = idx.filter(pl.col("status") == "error")
    assert bad.height == 1, bad
    assert "died 2 times" in bad["error"][0]
    poisoned = run.read_text(f"trajectories/{bad['trajectory_id'][0]}/outputs/{bad['source'][0]}")
    assert "POISON_UNIT" in poisoned
    ok = idx.filter(pl.col("status") == "ok")
    assert ok.height == rec["units"]["planned"] - 1 and ok.height >= 4 and rec["units"]["failed"] == 1
    for path in ok["path"]:
        assert run.exists(path)


def _job_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({"PYTHONPATH": str(REPO), "RAY_TMPDIR": tempfile.mkdtemp(prefix="fgi-", dir="/tmp"),
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"})
    return env


def test_br23_ctrl_c_ends_a_stage_whose_worker_keeps_dying(tmp_path):
    """BR-23 (Ctrl-C): SIGINT while the render stage retries a crashing unit ends the job (exit 130) within seconds
    and leaves no process of its Ray behind."""
    uri = str(tmp_path / "run")
    _poisoned_run(uri)
    env = _job_env(tmp_path)
    err_path = tmp_path / "render.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "jobs/render.py", "--run-dir", uri, "--set", "render.formats=[md]",
                                 "--set", "render.max_attempts=10", "--set", "render.crash_on_text=POISON_UNIT",
                                 "--set", "render.batch_size=1", "--set", "ray.num_cpus=2"],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if "died" in err_path.read_text(errors="replace").lower():  # "actor died on …; resubmitting"
                break
            time.sleep(1.0)
        assert proc.poll() is None, err_path.read_text()[-3000:]
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, err_path.read_text()[-3000:]
    assert "interrupted" in err_path.read_text()
    time.sleep(5)
    assert _pids_with(env["RAY_TMPDIR"]) == []


# ---------------------------------------------------------------------------- REL-concurrent-generate-index-corruption
_HOLDER = textwrap.dedent("""
    import sys, time
    from filegram_ray.storage import RunDir
    with RunDir(sys.argv[1]).lock("generate"):
        print("locked", flush=True)
        time.sleep(600)
""")


def test_rel_concurrent_generate_index_corruption_second_job_refused(tmp_path):
    """REL-concurrent-generate-index-corruption: while one process works on a run directory, a second generate job
    on it is refused at once (exit 2, naming the holder); after the holder dies (even by SIGKILL) the lock is free."""
    run_dir = tmp_path / "run"
    env = _job_env(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = subprocess.run([sys.executable, "jobs/generate.py", "--run-dir", str(run_dir), "--profiles", "p1",
                               "--tasks", "T-01", "--serial", "--set", "workspace.tts=tone"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=240)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert f"is in use by pid {holder.pid}" in proc.stderr and "stage generate" in proc.stderr
        assert not (run_dir / "trajectories").exists()
    finally:
        holder.kill()
        holder.wait()
    with RunDir(run_dir).lock("generate"):  # the kernel released the dead holder's lock
        pass
    assert (run_dir / ".lock").read_bytes() == b""  # released: an empty file, same bytes every run


def test_rel_concurrent_generate_index_corruption_lock_in_process(tmp_path):
    """REL-concurrent-generate-index-corruption: every stage takes the lock (here: generate while another RunDir
    handle holds it in this process is allowed — re-entrant — but a stale-free object-store lock of another owner is
    refused, and a stale one is taken over)."""
    from filegram_ray.engine.generate import run_generate

    cfg = load_config(overrides=[f"run_dir={tmp_path / 'run'}", "profiles=[p1]", "tasks=[T-01]",
                                 "workspace.tts=tone"])
    with cfg.run().lock("pipeline"):  # re-entrant: the pipeline holds it across its stages
        rec = run_generate(cfg, executor="serial")
    assert rec["ok"] == 1
    run = RunDir("memory://lock-test")
    run.write_json(LOCK_RECORD, {"host": "other", "pid": 1, "stage": "encode", "since": "x", "token": "t",
                                 "beat": time.time()})
    with pytest.raises(RunDirLockedError, match="pid 1 on other"):
        with run.lock("render"):
            pass
    run.write_json(LOCK_RECORD, {"host": "other", "pid": 1, "stage": "encode", "since": "x", "token": "t",
                                 "beat": time.time() - 3600})
    with run.lock("render"):
        assert run.read_json(LOCK_RECORD)["stage"] == "render"
    assert not run.exists(LOCK_RECORD)


# ---------------------------------------------------------------------- REL-render-rerun-without-seed-mixes-derivatives
def test_rel_render_rerun_without_seed_mixes_derivatives_seed(tmp_path):
    """REL-render-rerun-without-seed-mixes-derivatives: a job without --seed continues with the run's recorded seed;
    an explicit other seed is refused by every stage instead of adding a second plan's units."""
    uri = str(tmp_path / "run")
    run = RunDir(uri)
    write_synthetic_run(run, 3, seed=5)
    opts = ["render.formats=[pdf,md]"]
    run_render(load_config(overrides=[f"run_dir={uri}", "seed=11", *opts]), executor="serial")
    assert run.read_json("run.json")["config"]["seed"] == 11
    args = common_parser("x").parse_args(["--run-dir", uri, *sum((["--set", o] for o in opts), [])])
    cfg = config_from_args(args)
    assert cfg.seed == 11
    rec = run_render(cfg, executor="serial")
    assert rec["units"]["skipped"] == rec["units"]["planned"] and rec["rows_of_other_plans_removed"] == 0
    with pytest.raises(ValueError, match="made with seed 11 .* asks for seed 7"):
        run_render(load_config(overrides=[f"run_dir={uri}", "seed=7", *opts]), executor="serial")
    args = common_parser("x").parse_args(["--run-dir", uri, "--seed", "7"])
    assert config_from_args(args).seed == 7  # explicit: kept, and then refused by the stage (above)


def test_rel_render_rerun_without_seed_mixes_derivatives_settings(tmp_path):
    """REL-render-rerun-without-seed-mixes-derivatives (other settings): a rerun with other render settings replaces
    the earlier plan's rows and files instead of adding to them; the index equals a fresh render's."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for uri in (a, b):
        write_synthetic_run(RunDir(uri), 3, seed=5)
    first = ["render.formats=[pdf,md,docx]", "render.min_per_output=4"]
    second = ["render.formats=[md,docx]", "render.min_per_output=2"]
    run_render(load_config(overrides=[f"run_dir={a}", *first]), executor="serial")
    before = {p.relative_to(a).as_posix() for p in Path(a, "derivatives").rglob("*.pdf")}
    assert before
    rec = run_render(load_config(overrides=[f"run_dir={a}", *second]), executor="serial")
    assert rec["rows_of_other_plans_removed"] > 0
    run_render(load_config(overrides=[f"run_dir={b}", *second]), executor="serial")
    ia, ib = (RunDir(u).read_table(INDEX_PATH) for u in (a, b))
    assert ia.height == ib.height and ia["plan"].n_unique() == 1
    assert ia.drop("plan").sort("unit_id").equals(ib.drop("plan").sort("unit_id"))
    files = lambda u: sorted(p.relative_to(u).as_posix() for p in Path(u, "derivatives").rglob("*")  # noqa: E731
                             if p.is_file() and p.name not in ("index.parquet", "timings.parquet"))
    assert files(a) == files(b)
    assert not any(Path(a, p).exists() for p in before)
    again = run_render(load_config(overrides=[f"run_dir={a}", *second]), executor="serial")
    u = again["units"]
    assert u["skipped"] == u["planned"] and again["rows_of_other_plans_removed"] == 0  # stable, no churn
    recs = [json.loads(p.read_text()) for p in Path(a, "_done", "render").glob("*.json")]
    # a record's key is its plan and its section's content (an output written again renders again)
    assert recs and all(rec["item_key"].split(":")[0] == rec["row"]["plan"] == ia["plan"][0] for rec in recs)


def test_stage_meter_reads_memory_sparsely_but_always_at_first_and_last_sample():
    """Issue 17: PSS (smaps_rollup) is read every ``mem_every``-th sample only, yet a stage's record always has
    its memory (first and last sample) and its CPU seconds (every sample)."""
    import time

    from filegram_ray.stages.meter import StageMeter

    with StageMeter(interval=0.05, mem_every=10_000) as meter:
        t_end = time.process_time() + 0.3
        while time.process_time() < t_end:  # burn ~0.3 CPU-s in this process
            sum(i * i for i in range(1000))
    rec = meter.record()
    assert rec["peak_memory_mb"] > 10 and rec["driver_peak_memory_mb"] > 10
    assert rec["cpu_s"] >= 0.2
    assert meter._n_samples >= 3  # the loop sampled CPU in between


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_a_lock_file_that_is_not_its_own_regular_file_is_refused_untouched(tmp_path, capsys, kind):
    """Attack pass, data loss: RUN/.lock as a symbolic link to a file outside the run was truncated by any stage
    (opened with O_CREAT|O_RDWR, then ftruncate). The lock is opened without following links (O_NOFOLLOW) and must
    be a regular file with no other hard link: a link (soft or hard) or a FIFO is refused in one line naming it
    (exit 2), and the outside file keeps its bytes."""
    from filegram_ray.cli import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"do not truncate me\n")
    lock = run_dir / ".lock"
    if kind == "symlink":
        lock.symlink_to(outside)
    elif kind == "hardlink":
        os.link(outside, lock)
    else:
        os.mkfifo(lock)
    with pytest.raises(ValueError, match=r"\.lock: (is a symbolic link|has other hard links|is not a regular file)"):
        with RunDir(str(run_dir)).lock("generate"):
            pass
    rc = main(["run", "bench", "--run-dir", str(run_dir), "--serial"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err and ".lock" in err, err
    assert outside.read_bytes() == b"do not truncate me\n"
