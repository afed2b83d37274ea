"""The stage contract: one list of stages, one runner, executors that never name a stage.

* a toy stage (tests/stage_toy.py) of items grouped into batches joins the pipeline with one line of ``STAGES``: its
  config section is validated, ``filegram run toy`` and ``run_pipeline(only=[toy])`` run it, the runner skips
  finished items, turns a failing item into an error row (``errors/toy.parquet``), writes ``run.json`` once and
  always closes the stage, and records a stage that raised as ``status: failed``;
* the three executors give the same rows for the same worker and tasks;
* the base class has at most eight hooks;
* ``config.py`` imports no stage module; every stage has its job script, and each calls the one door.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import stage_toy

from filegram_ray import pipeline, stage_list
from filegram_ray.config import load_config
from filegram_ray.stages.base import Row, Stage, WorkerSpec
from filegram_ray.stages.executors import ActorPoolExecutor, RayDataExecutor, SerialExecutor, tasks_of

REPO = Path(__file__).resolve().parents[1]
TOY = stage_list.StageRef("toy", "stage_toy:ToyStage", "toy", "squares of integers → toy/")


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(stage_list, "STAGES", [*stage_list.STAGES, TOY])
    stage_toy.CLOSED.clear()
    stage_toy.TASK_SIZES.clear()
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
    assert main(["run", "toy", "--run-dir", str(run), "--serial", "--n", "5"]) == 0
    assert stage_toy.TASK_SIZES == [2, 2, 1]  # items grouped into tasks of toy.batch
    assert sorted(p.name for p in (run / "toy").iterdir()) == ["0.txt", "1.txt", "2.txt", "3.txt", "4.txt",
                                                                "index.json"]
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"] == {"planned": 5, "done": 5, "skipped": 0, "failed": 0} and rec["status"] == "ok"
    assert rec["executor"] == "serial" and rec["squares"] == 5 and rec["seconds"] >= 0
    assert sorted(p.name for p in (run / "_done" / "toy").iterdir()) == [f"u{k}.json" for k in range(5)]
    assert json.loads((run / "_done" / "toy" / "u2.json").read_text())["square"] == 4
    assert stage_toy.CLOSED == [str(run)]

    # a rerun skips the finished items (their rows come from the completion records) and writes run.json once;
    # an item whose output is gone is done again
    (run / "toy" / "3.txt").unlink()
    stage_toy.TASK_SIZES.clear()
    writes = _writes_of_run_json(monkeypatch)
    assert main(["run", "toy", "--run-dir", str(run), "--serial", "--n", "6"]) == 0
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"] == {"planned": 6, "done": 2, "skipped": 4, "failed": 0} and rec["squares"] == 6
    assert rec["squared_now"] == 2  # finish reads the runner's counts (self.counts), it does not count rows
    assert stage_toy.TASK_SIZES == [2] and writes == ["run.json"]

    # a failing item is an error row: the job exits 1, the others finish, the error is printed with the item and
    # written to the stage's one error table, with its type and traceback
    capsys.readouterr()
    rc = main(["run", "toy", "--run-dir", str(run), "--serial", "--set", "toy.force=true", "--set", "toy.fail_on=1"])
    assert rc == 1
    assert "ERROR toy u1: ValueError: item 1 is the one that fails" in capsys.readouterr().out
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["units"]["failed"] == 1 and rec["n_errors"] == 1 and rec["units"]["done"] == 3
    from filegram_ray.storage import RunDir

    (err,) = RunDir(str(run)).error_rows("toy")
    assert err["unit"] == "u1" and err["stage"] == "toy" and err["error_type"] == "ValueError"
    assert "item 1 is the one that fails" in err["error"] and "Traceback" in err["traceback"]
    assert not (run / "_done" / "toy" / "u1.json").exists()  # force: a failure never passes as finished

    # the pipeline runs it from the same list, in this process with executor: serial; a rerun that finishes u1
    # clears its error row
    timings = pipeline.run_pipeline(load_config(None, {"run_dir": str(run), "toy": {"n": 2, "executor": "serial"}}),
                                    only=["toy"])
    assert timings["toy"]["result"]["units"] == {"planned": 2, "done": 1, "skipped": 1, "failed": 0}
    assert RunDir(str(run)).error_rows() == []
    assert len(stage_toy.CLOSED) == 4


def test_a_stage_that_raises_is_recorded_as_failed(with_toy, tmp_path, monkeypatch):
    from filegram_ray.stages.runner import run_stage

    run = tmp_path / "run"
    cfg = load_config(None, {"run_dir": str(run), "toy": {"n": 3, "executor": "serial"}})
    run_stage(stage_toy.ToyStage, cfg)

    def boom(self, rows):
        raise RuntimeError("finish broke")

    monkeypatch.setattr(stage_toy.ToyStage, "finish", boom)
    with pytest.raises(RuntimeError, match="finish broke"):
        run_stage(stage_toy.ToyStage, load_config(None, {"run_dir": str(run), "toy": {"n": 4, "executor": "serial"}}))
    rec = json.loads((run / "run.json").read_text())["stages"]["toy"]
    assert rec["status"] == "failed" and "finish broke" in rec["error"]
    assert rec["units"] == {"planned": 4, "done": 1, "skipped": 3, "failed": 0}  # what it finished is kept


def test_the_old_serial_key_is_refused_naming_the_new_one(with_toy, tmp_path):
    with pytest.raises(ValueError, match="toy: the key 'serial' is now 'executor': write executor: serial"):
        load_config(None, {"run_dir": str(tmp_path), "toy": {"serial": True}})


def test_an_unknown_stage_is_one_line_naming_the_stages(with_toy):
    from filegram_ray.errors import UserError

    with pytest.raises(UserError, match="unknown stage 'nope'; stages are seed, generate, .* toy"):
        stage_list.stage_ref("nope")


def _rows(ex, tmp_path, name):
    from filegram_ray.storage import RunDir

    run = RunDir(str(tmp_path / name))
    spec = WorkerSpec(stage_toy.ToyWorker, {"run_uri": run.uri, "fail_on": 2}, num_actors=2, num_cpus=0.5)
    items = [{"unit_id": f"u{k}", "k": k} for k in range(5)]
    rows = ex.map(spec, tasks_of([items[:3], items[3:]]), label="toy")
    assert all(isinstance(r, Row) for r in rows)
    return sorted((r.unit, r["status"], r.get("square"), r.get("error_type")) for r in rows)


def test_the_three_executors_give_the_same_rows(ray_local, tmp_path):
    want = [("u0", "ok", 0, None), ("u1", "ok", 1, None), ("u2", "error", None, "ValueError"),
            ("u3", "ok", 9, None), ("u4", "ok", 16, None)]
    assert _rows(SerialExecutor(progress=False), tmp_path, "serial") == want
    assert _rows(ActorPoolExecutor(progress=False), tmp_path, "pool") == want
    assert _rows(RayDataExecutor(progress=False), tmp_path, "data") == want


def test_the_base_class_has_at_most_eight_hooks():
    hooks = [n for n, v in vars(Stage).items() if callable(v) or isinstance(v, classmethod)]
    hooks = [n for n in hooks if not n.startswith("__")]
    assert len(hooks) <= 8, hooks


def test_config_imports_no_stage_module():
    tree = ast.parse((REPO / "filegram_ray" / "config.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    stage_modules = {s.target.partition(":")[0] for s in stage_list.STAGES}
    assert not imported & stage_modules, imported & stage_modules


def test_every_stage_has_one_job_script_through_the_one_door():
    jobs = {p.stem for p in (REPO / "jobs").glob("*.py")} - {"pipeline"}
    assert jobs == set(stage_list.stage_names())
    for name in jobs:
        text = (REPO / "jobs" / f"{name}.py").read_text(encoding="utf-8")
        assert "from filegram_ray.stages.cli import stage_main" in text and f'stage_main("{name}", argv)' in text


def test_every_stage_is_a_filegram_command_generated_from_stages(with_toy, capsys):
    """``filegram <stage>``: each stage of STAGES is a top-level command, or (bench, render: their names are area
    commands) that area's subcommand; a stage added to STAGES gets its door, with its own options."""
    import argparse

    from filegram_ray.cli import COMMANDS, main
    from filegram_ray.stages.cli import AREA_DOORS, register, top_level

    for name in stage_list.stage_names():
        if name == "toy":
            continue
        if name in AREA_DOORS:
            area, sub = AREA_DOORS[name].split()
            with pytest.raises(SystemExit) as exc:
                main([area, sub, "--help"])
        else:
            assert COMMANDS[name] == ("filegram_ray.stages.cli", top_level()[name])
            with pytest.raises(SystemExit) as exc:
                main([name, "--help"])
        assert exc.value.code == 0
        assert f"{name} stage: {stage_list.stage_ref(name).description}"[:30] in " ".join(
            capsys.readouterr().out.split())
    assert "toy" in top_level()
    p = argparse.ArgumentParser()
    register(p.add_subparsers(dest="command"), ["toy"])
    assert p.parse_args(["toy", "--n", "3"]).n == 3


def test_an_item_whose_input_changed_is_done_again(with_toy, tmp_path):
    """Stale outputs after an upstream rerun (found on a run whose trajectories were generated again by a newer
    simulator while encode kept the old Engrams): an item's ``inputs`` are part of its key."""
    from filegram_ray.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "upstream.txt").write_text("first\n")
    args = ["run", "toy", "--run-dir", str(run), "--serial", "--n", "3", "--set", "toy.input=upstream.txt"]

    def units():
        return json.loads((run / "run.json").read_text())["stages"]["toy"]["units"]

    assert main(args) == 0 and units()["done"] == 3
    assert main(args) == 0 and units() == {"planned": 3, "done": 0, "skipped": 3, "failed": 0}
    (run / "upstream.txt").write_text("second\n")  # rewritten with other content: every item is done again
    assert main(args) == 0 and units() == {"planned": 3, "done": 3, "skipped": 0, "failed": 0}
    (run / "upstream.txt").write_text("second\n")  # the same bytes written again: nothing to do
    assert main(args) == 0 and units()["skipped"] == 3
    (run / "upstream.txt").unlink()  # gone: counts as other content, not as an error
    assert main(args) == 0 and units()["done"] == 3


def test_input_digest_reads_each_file_once_and_names_paths(tmp_path):
    from filegram_ray.stages.runner import input_digest
    from filegram_ray.storage import RunDir

    run = RunDir(str(tmp_path))
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").write_text("x")
    memo: dict[str, str] = {}
    d_ab = input_digest(run, ["a", "b"], memo)
    assert set(memo) == {"a", "b"} and len(d_ab) == 16
    assert input_digest(run, ["b", "a", "a"], memo) == d_ab  # order and repeats do not matter
    assert input_digest(run, ["a"], memo) != input_digest(run, ["b"], memo)  # same bytes, another path
    (tmp_path / "a").write_text("y")
    assert input_digest(run, ["a", "b"], memo) == d_ab  # the memo holds for one step ...
    assert input_digest(run, ["a", "b"]) != d_ab  # ... a new step reads the files again
