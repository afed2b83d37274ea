"""The stage contract (issue #29): one list of stages, one runner, executors that never name a stage.

* a toy stage (tests/stage_toy.py) joins the pipeline with one line of ``STAGES``: its config section is validated,
  ``filegram run toy`` and ``run_pipeline(only=[toy])`` run it, the runner skips finished units, turns a failing
  unit into an error row, writes ``run.json`` once and always closes the stage;
* the three executors give the same rows for the same worker and units;
* ``config.py`` imports no stage module.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import stage_toy

from filegram_ray import pipeline
from filegram_ray.config import load_config
from filegram_ray.stages import registry
from filegram_ray.stages.base import Row, WorkerSpec
from filegram_ray.stages.executors import ActorPoolExecutor, RayDataExecutor, SerialExecutor

REPO = Path(__file__).resolve().parents[1]
TOY = registry.StageRef("toy", "stage_toy:ToyStage", "toy", "squares of integers → toy/")


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(registry, "STAGES", [*registry.STAGES, TOY])
    stage_toy.CLOSED.clear()
    return TOY


def _writes_of_run_json(monkeypatch) -> list[str]:
    from filegram_ray.storage import RunDir

    seen: list[str] = []
    orig = RunDir.write_json

    def counting(self, rel, data):
        if rel == "run.json":
            seen.append(rel)
        return orig(self, rel, data)

    monkeypatch.setattr(RunDir, "write_json", counting)
    return seen


def test_a_stage_is_one_line_of_stages_and_the_runner_owns_the_rest(with_toy, tmp_path, monkeypatch, capsys):
    from filegram_ray.cli import main

    run = tmp_path / "run"
    # the section is validated like every stage's (unknown key named, with the allowed ones)
    with pytest.raises(ValueError, match="toy.no_such_key: unknown key"):
        load_config(None, {"run_dir": str(run), "toy": {"no_such_key": 1}})
    assert main(["run", "toy", "--run-dir", str(run), "--serial", "--n", "3"]) == 0
    assert sorted(p.name for p in (run / "toy").iterdir()) == ["0.txt", "1.txt", "2.txt", "index.json"]
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"] == {"planned": 3, "done": 3, "skipped": 0, "failed": 0}
    assert rec["executor"] == "serial" and rec["squares"] == 3 and rec["seconds"] >= 0
    assert sorted(p.name for p in (run / "_done" / "toy").iterdir()) == ["u0.json", "u1.json", "u2.json"]
    assert json.loads((run / "_done" / "toy" / "u2.json").read_text())["square"] == 4
    assert stage_toy.CLOSED == [str(run)]

    # a rerun skips the finished units (their rows come from the completion records) and writes run.json once
    writes = _writes_of_run_json(monkeypatch)
    assert main(["run", "toy", "--run-dir", str(run), "--serial", "--n", "4"]) == 0
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"] == {"planned": 4, "done": 1, "skipped": 3, "failed": 0} and rec["squares"] == 4
    assert writes == ["run.json"]

    # a failing unit is an error row: the job exits 1, the others finish, the error is printed with the unit
    capsys.readouterr()
    rc = main(["run", "toy", "--run-dir", str(run), "--serial", "--set", "toy.force=true", "--set", "toy.fail_on=1"])
    assert rc == 1
    assert "ERROR toy u1: ValueError: unit 1 is the one that fails" in capsys.readouterr().out
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"]["failed"] == 1 and rec["n_errors"] == 1 and rec["units"]["done"] == 3

    # the pipeline runs it from the same list, in this process with --serial
    timings = pipeline.run_pipeline(load_config(None, {"run_dir": str(run), "toy": {"n": 2}}), only=["toy"],
                                    serial=True)
    assert timings["toy"]["result"]["units"]["skipped"] == 2
    assert len(stage_toy.CLOSED) == 4


def test_an_unknown_stage_is_one_line_naming_the_stages(with_toy):
    from filegram_ray.errors import UserError

    with pytest.raises(UserError, match="unknown stage 'nope'; stages are seed, generate, .* toy"):
        pipeline.stage_ref("nope")


def _rows(ex, tmp_path, name):
    from filegram_ray.storage import RunDir

    run = RunDir(str(tmp_path / name))
    spec = WorkerSpec(stage_toy.ToyWorker, {"run_uri": run.uri, "fail_on": 2}, num_actors=2, num_cpus=0.5)
    rows = ex.map(spec, [{"unit_id": f"u{k}", "k": k} for k in range(5)], label="toy")
    assert all(isinstance(r, Row) for r in rows)
    return sorted((r.unit, r["status"], r.get("square"), r.get("error_type")) for r in rows)


def test_the_three_executors_give_the_same_rows(ray_local, tmp_path):
    want = [("u0", "ok", 0, None), ("u1", "ok", 1, None), ("u2", "error", None, "ValueError"),
            ("u3", "ok", 9, None), ("u4", "ok", 16, None)]
    assert _rows(SerialExecutor(progress=False), tmp_path, "serial") == want
    assert _rows(ActorPoolExecutor(progress=False), tmp_path, "pool") == want
    assert _rows(RayDataExecutor(progress=False), tmp_path, "data") == want


def test_config_imports_no_stage_module():
    tree = ast.parse((REPO / "filegram_ray" / "config.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    stage_modules = {s.target.partition(":")[0] for s in registry.STAGES}
    assert not imported & stage_modules, imported & stage_modules
