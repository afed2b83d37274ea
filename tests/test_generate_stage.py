"""Generate stage: serial run, resume, error rows, determinism, and an actor killed mid-run (Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from filegram_ray.config import load_config
from filegram_ray.engine.generate import GenerateWorker, plan_units, run_generate
from filegram_ray.stages.executors import map_units
from filegram_ray.storage import RunDir

# Empty-workspace tasks (T-03, T-04) keep the bundle cost near zero (revision tasks: test_simulator_policy).
PROFILES = ["p3", "p17"]
TASKS = ["T-03", "T-04"]


def cfg_for(run_dir: Path, **gen):
    overrides = [f"run_dir={run_dir}", "seed=7"]
    cfg = load_config(None, overrides)
    data = cfg.model_dump()
    data.update(profiles=PROFILES, tasks=TASKS, generate={"num_actors": 2, "num_cpus_per_actor": 0.5, **gen})
    return type(cfg).model_validate(data)


def test_serial_generate_resume_and_determinism(tmp_path):
    cfg = cfg_for(tmp_path / "run1", executor="serial")
    rec = run_generate(cfg)
    assert rec["ok"] == 4 and rec["error"] == 0
    run = RunDir(str(tmp_path / "run1"))
    idx = run.read_table("trajectories/index.parquet")
    assert sorted(idx["trajectory_id"].to_list()) == sorted(f"{p}/{t}" for p in
                                                            ("p3_efficient_executor", "p17_creative_archivist")
                                                            for t in TASKS)
    assert set(idx["status"].to_list()) == {"ok"}
    outs = run.read_table("trajectories/outputs.parquet")
    assert outs.height >= 4 and set(outs.columns) == {"trajectory_id", "profile_id", "task_id", "path",
                                                      "file_type", "bytes", "sha256"}
    tdir = tmp_path / "run1" / "trajectories" / "p17_creative_archivist" / "T-03"
    for name in ("events_raw.json", "events.json", "summary.json", "meta.json", "media/manifest.json"):
        assert (tdir / name).exists(), name
    meta = json.loads((tdir / "meta.json").read_text())
    assert meta["trajectory_id"] == "p17_creative_archivist/T-03" and meta["agent_kind"] == "persona-simulator"
    gen = run.read_json("run.json")["stages"]["generate"]  # the ids the run holds: the bench scales to them
    assert gen["profiles"] == ["p17_creative_archivist", "p3_efficient_executor"] and gen["tasks"] == TASKS
    # resume: everything is skipped
    rec2 = run_generate(cfg)
    assert rec2["skipped"] == 4 and rec2["ok"] == 4
    # same seed, another run dir → identical bytes
    run_generate(cfg_for(tmp_path / "run2", executor="serial"))
    for p in (tmp_path / "run1" / "trajectories").rglob("*"):
        if p.is_file() and p.suffix != ".parquet":
            q = tmp_path / "run2" / p.relative_to(tmp_path / "run1")
            assert q.read_bytes() == p.read_bytes(), p


def test_bad_unit_becomes_error_row(tmp_path):
    cfg = cfg_for(tmp_path / "run", executor="serial")
    units = plan_units(cfg, __import__("filegram_ray.engine.generate", fromlist=["x"]).GenerateConfig())[:2]
    bad = dict(units[0], unit_id="pX_bad/T-03", profile={**units[0]["profile"], "tiers": {"A": "Q"}})
    rows = map_units(GenerateWorker, [bad, *units], init_kwargs={"run_uri": str(tmp_path / "run")}, executor="serial",
                     stage="generate", progress=False)
    st = {r["unit"]: r["status"] for r in rows}
    assert st["pX_bad/T-03"] == "error" and sum(v == "ok" for v in st.values()) == 2
    err = next(r for r in rows if r["status"] == "error")
    assert "tiers" in err["error"]


def test_unknown_profile_id_is_a_clear_error(tmp_path):
    cfg = cfg_for(tmp_path / "run", executor="serial")
    data = cfg.model_dump()
    data["profiles"] = ["p999"]
    with pytest.raises(ValueError, match="p999"):
        run_generate(type(cfg).model_validate(data))


def test_actor_killed_mid_run_every_trajectory_once(tmp_path, ray_local):
    marker = tmp_path / "crashed.marker"
    cfg = cfg_for(tmp_path / "run", crash_on_unit="p3_efficient_executor/T-04", crash_marker=str(marker))
    first = run_generate(cfg)
    assert marker.exists(), "the chosen unit never crashed its actor"
    # Ray restarts the dead actor and the unit is resubmitted: the first run already finishes everything.
    assert first["ok"] == 4 and first["error"] == 0, first
    # The rerun skips all of it and adds nothing twice.
    rec = run_generate(cfg)
    assert rec["ok"] == 4 and rec["error"] == 0
    assert rec["skipped"] == 4
    run = RunDir(str(tmp_path / "run"))
    idx = run.read_table("trajectories/index.parquet")
    assert idx.height == 4 and idx["trajectory_id"].n_unique() == 4
    assert idx.filter(pl.col("status") == "ok").height == 4
    done = run.done_records("generate")
    assert sorted(r["unit"] for r in done) == sorted(idx["trajectory_id"].to_list())


def test_rerun_with_other_settings_regenerates(tmp_path):
    cfg = cfg_for(tmp_path / "run", executor="serial")
    first = run_generate(cfg)
    assert first["ok"] == 4 and first["skipped"] == 0
    again = run_generate(cfg)
    assert again["skipped"] == 4  # same settings: nothing redone
    data = cfg.model_dump()
    data["generate"] = {**data["generate"], "upstream_quirks": True}
    changed = run_generate(type(cfg).model_validate(data))
    assert changed["ok"] == 4 and changed["skipped"] == 0  # other settings: regenerated, not reused


def test_generate_writes_missing_bundles_as_the_seed_stage_would(tmp_path, capsys):
    """Generate without a seed stage: its door runs the seed stage first (``needs``), so the bundles it needs land in
    RUN/workspaces/<task>/ (README layout; the video record default), byte-identical to what jobs/seed.py writes,
    and a later generate of another task keeps the first task's rows of workspaces/index.parquet."""
    from filegram_ray.workspace.stage import run_seed

    def cfg(run_dir, tasks, **extra):
        c = load_config(None, [f"run_dir={run_dir}", "seed=7", "workspace.tts=tone"])
        data = c.model_dump()
        data.update(profiles=["p3"], tasks=tasks, generate={"executor": "serial"}, **extra)
        return type(c).model_validate(data)

    rec = run_generate(cfg(tmp_path / "gen", ["T-11"]))
    assert rec["ok"] == 1
    assert "generate needs the seed stage: running it first" in capsys.readouterr().out
    run_seed(cfg(tmp_path / "seeded", ["T-11"], workspace={"tts": "tone", "executor": "serial"}))
    gen_ws, seed_ws = tmp_path / "gen" / "workspaces", tmp_path / "seeded" / "workspaces"
    files = sorted(p.relative_to(seed_ws) for p in seed_ws.rglob("*") if p.is_file())
    assert any(str(f).startswith("T-11/files/") for f in files)
    assert files == sorted(p.relative_to(gen_ws) for p in gen_ws.rglob("*") if p.is_file())
    for f in files:
        assert (gen_ws / f).read_bytes() == (seed_ws / f).read_bytes(), f
    again = run_generate(cfg(tmp_path / "gen", ["T-11"]))
    assert again["skipped"] == 1  # the written bundle is the one the trajectory was made from: nothing redone
    run_generate(cfg(tmp_path / "gen", ["T-03"]))
    idx = RunDir(str(tmp_path / "gen")).read_table("workspaces/index.parquet")
    assert "T-11" in set(idx["task_id"].to_list())
