"""Task models and loaders: the 32 bundled tasks, upstream JSON, malformed input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from filegram_ray.schema.task import MULTIMODAL_TASKS, Task, WorkspaceSpec
from filegram_ray.tasks import TaskError, load_task, load_tasks

UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream-data" / "tasks"
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(),
                                    reason=f"upstream task files not present at {UPSTREAM}")

# ref §6.1 type counts, §6.3 rows used as spot checks
TYPE_COUNTS = {"understand": 6, "create": 6, "organize": 6, "synthesize": 5, "iterate": 6, "maintain": 3}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks()


def test_bundled_set_matches_reference(tasks):
    assert [t.task_id for t in tasks] == [f"T-{n:02d}" for n in range(1, 33)]
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.type] = counts.get(t.type, 0) + 1
    assert counts == TYPE_COUNTS
    assert {t.task_id for t in tasks if t.modality == "multimodal"} == MULTIMODAL_TASKS
    byid = {t.task_id: t for t in tasks}
    assert byid["T-16"].dimensions == ["A", "E", "B", "F"] and byid["T-16"].expected_file_ops == 10
    assert byid["T-29"].dimensions == ["C", "D", "A"] and byid["T-29"].expected_file_ops == 28


def test_workspace_specs(tasks):
    total = sum(t.workspace.total_files for t in tasks)
    assert abs(total - 615) <= 61, total  # ref: ~615 bundled input files, within 10 %
    empty = {t.task_id for t in tasks if t.workspace.empty}
    assert empty == {"T-03", "T-04", "T-20"}
    byid = {t.task_id: t for t in tasks}
    assert "knowledge_base" in byid["T-10"].workspace.plants
    assert byid["T-12"].workspace.subdirs == ["meeting_notes", "personal", "work", "reference"]
    for t in tasks:
        has_media = any(k in {"mp3", "wav", "mp4", "gif", "jpg", "png"} for k in t.workspace.inputs)
        if t.modality == "multimodal":
            assert has_media, t.task_id
        assert t.prompt_en and t.prompt_zh and t.behavioral_freedom and t.observable_attributes


def test_task_roundtrip_json_and_yaml(tasks, tmp_path):
    for t in tasks:
        assert Task.model_validate_json(t.model_dump_json()) == t
        f = tmp_path / f"{t.key}.yaml"
        f.write_text(yaml.safe_dump(t.model_dump(mode="json"), allow_unicode=True), encoding="utf-8")
        assert load_task(f) == t


@needs_upstream
def test_upstream_tasks_load():
    tasks = load_tasks(UPSTREAM)
    assert len(tasks) == 32
    assert {t.task_id for t in tasks if t.modality == "multimodal"} == MULTIMODAL_TASKS
    assert tasks[19].workspace.empty and tasks[2].workspace.empty
    for f in sorted(UPSTREAM.glob("t[0-9][0-9].json")):
        assert load_task(f).task_id == f"T-{f.stem[1:]}"
    listed = load_tasks(UPSTREAM / "all_tasks.json")
    assert [t.task_id for t in listed] == [f"T-{n:02d}" for n in range(1, 11)]


def _good() -> dict:
    return load_tasks()[0].model_dump(mode="json")


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(type="explore"), "type"),
    (lambda d: d.update(dimensions=["Z"]), "dimensions"),
    (lambda d: d.pop("prompt_en"), "prompt_en"),
    (lambda d: d["workspace"]["inputs"].update(exe=3), "workspace.inputs"),
    (lambda d: d.update(task_id="task1"), "task_id"),
])
def test_malformed_task_names_file_and_field(tmp_path, mutate, field):
    d = _good()
    mutate(d)
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(d), encoding="utf-8")
    with pytest.raises(TaskError) as ei:
        load_task(f)
    assert str(f) in str(ei.value) and field in str(ei.value)


def test_duplicate_task_id_rejected(tmp_path):
    a, b = _good(), _good()
    b["name_en"] = "something else"
    (tmp_path / "a.json").write_text(json.dumps(a), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps(b), encoding="utf-8")
    with pytest.raises(TaskError, match="duplicate id T-01"):
        load_tasks(tmp_path)


def test_empty_workspace_cannot_list_inputs():
    with pytest.raises(ValueError, match="empty workspace"):
        WorkspaceSpec(empty=True, inputs={"md": 1})


def test_cli_tasks_list(capsys):
    from filegram_ray.cli import main

    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^T-16\s+understand\s+multimodal\s+A,E,B,F\s+10\s+22\s", out, re.MULTILINE)
    assert "32 tasks (16 multimodal, 16 text)" in out


@needs_upstream
def test_cli_tasks_list_upstream(capsys):
    from filegram_ray.cli import main

    assert main(["tasks", "list", "--dir", str(UPSTREAM)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^T-20\s+create\s+text\s+B,C,E\s+10\s+empty\s", out, re.MULTILINE)
