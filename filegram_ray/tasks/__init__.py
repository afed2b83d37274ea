"""Task sets: load the 32 FileGram tasks (ref §6) from ``conf/tasks/*.yaml`` or from upstream task JSON.

Public API:

- :func:`load_tasks(path=None) -> list[Task]` — every task in a directory (or one file), sorted by task number.
  Default directory: :func:`filegram_ray.paths.tasks_dir` (``conf/tasks``).
- :func:`load_task(file) -> Task` — one task file (YAML or JSON, our format or upstream's).

Two formats are accepted:

- ours (:class:`filegram_ray.schema.task.Task`, with ``modality`` and ``workspace``);
- upstream ``tasks/tNN.json`` (ref §6.1) and ``all_tasks.json`` (a JSON list of such objects). Upstream tasks lack
  ``modality`` and ``workspace``: modality comes from the ref §6.2 inferred multimodal set
  (:data:`~filegram_ray.schema.task.MULTIMODAL_TASKS`), and the workspace is a minimal :class:`WorkspaceSpec`
  (``empty`` when ``workspace_bundle == "empty"`` or the task is T-03/T-04/T-20 per ref §6.3, scenario = the bundle folder name). Upstream-only fields
  (``status``, ``workspace_bundle``, ``depends_on_note``) are dropped.

Errors: :class:`TaskError` (a ``ValueError``) naming the file, the field and the problem. In a directory, JSON/YAML
files that are neither a task nor a list of tasks (e.g. upstream ``coverage.json``: no ``task_id``/``prompt_en``)
are skipped; the same task id in two one-task files with different content is an error. A one-task file wins over an
aggregate list file (upstream ``all_tasks.json`` holds older T-09/T-10 text than ``t09.json``/``t10.json``; a
warning is logged).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json, load_yaml, read_utf8
from filegram_ray.schema.task import MULTIMODAL_TASKS, Task, WorkspaceSpec

log = logging.getLogger(__name__)

_UPSTREAM_ONLY = ("status", "workspace_bundle", "depends_on_note")
#: Tasks whose workspace starts empty (ref §6.3 "Workspace inputs" column: T-03, T-04, T-20).
EMPTY_WORKSPACE_TASKS = frozenset({"T-03", "T-04", "T-20"})
_SUFFIXES = (".yaml", ".yml", ".json")


class TaskError(UserError):
    """A task file that cannot be loaded; the message names file, field and problem."""


def _read(path: Path) -> Any:
    """The parsed content of a task file. Raises :class:`TaskError` naming the file when it cannot be read, is not
    UTF-8, is not valid YAML/JSON (duplicate keys and too deep nesting included), or is empty."""
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from exc
    except ValueError as exc:  # not UTF-8, too large (names the file)
        raise TaskError(str(exc)) from None
    try:
        data = load_json(text, str(path)) if path.suffix == ".json" else load_yaml(text, str(path))
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    if data is None:
        raise TaskError(f"{path}: empty file: expected a task (a mapping with task_id) or a list of tasks")
    return data


def _is_task_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and ("task_id" in obj or "prompt_en" in obj)


def _from_upstream(raw: dict[str, Any]) -> dict[str, Any]:
    """Map an upstream task object (ref §6.1) onto our :class:`Task` fields."""
    out = {k: v for k, v in raw.items() if k not in _UPSTREAM_ONLY}
    tid = str(raw.get("task_id", ""))
    out.setdefault("modality", "multimodal" if tid in MULTIMODAL_TASKS else "text")
    bundle = str(raw.get("workspace_bundle") or "")
    empty = bundle == "empty" or tid in EMPTY_WORKSPACE_TASKS
    scenario = "" if empty else re.sub(r"[^a-z0-9_]+", "_", Path(bundle).name.lower()).strip("_")
    out.setdefault("workspace", WorkspaceSpec(scenario=scenario, empty=empty).model_dump())
    return out


def _validate(raw: Any, source: str) -> Task:
    if not isinstance(raw, dict):
        raise TaskError(f"{source}: expected a mapping of task fields, got {type(raw).__name__}")
    data = raw if "modality" in raw and "workspace" in raw else _from_upstream(raw)
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc']) or '<root>'}': {e['msg']}" for e in exc.errors())
        raise TaskError(f"{source}: {problems}") from None


def _load_file(path: Path) -> list[Task]:
    raw = _read(path)
    if isinstance(raw, list):
        return [_validate(item, f"{path}[{i}]") for i, item in enumerate(raw)]
    return [_validate(raw, str(path))]


def load_task(file: str | Path) -> Task:
    """Load one task file (YAML or JSON; ours or upstream's). Raises :class:`TaskError` (also when the file holds a
    list rather than one task)."""
    path = Path(file)
    tasks = _load_file(path)
    if len(tasks) != 1:
        raise TaskError(f"{path}: holds {len(tasks)} tasks; use load_tasks() for a list file")
    return tasks[0]


def load_tasks(path: str | Path | None = None) -> list[Task]:
    """All tasks under ``path`` (a directory, or one file that may hold a list), sorted by task number.

    Default: ``conf/tasks``. Raises :class:`TaskError` on a malformed task, on a duplicate task id with differing
    content in two one-task files, and when the directory holds no task at all; ``FileNotFoundError`` when ``path`` does not exist."""
    from filegram_ray.paths import tasks_dir

    root = Path(path) if path is not None else tasks_dir()
    if not root.exists():
        raise FileNotFoundError(f"task path not found: {root}")
    found: dict[str, tuple[Task, str, bool]] = {}  # id -> (task, source, from a list file)
    files = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.suffix in _SUFFIXES)
    singles, lists = [], []
    for f in files:
        raw = _read(f)
        if isinstance(raw, list):
            lists.append(f)
        elif _is_task_dict(raw):
            singles.append(f)
        else:
            log.warning("skipping %s: not a task file (no task_id or prompt_en)", f)
    for f in singles + lists:  # one-task files win over aggregate list files (see module docstring)
        is_list = f in lists
        for task in _load_file(f):
            prev = found.get(task.task_id)
            if prev is None:
                found[task.task_id] = (task, str(f), is_list)
            elif prev[0] != task:
                if is_list and not prev[2]:
                    log.warning("%s: %s differs from %s; keeping the one-task file", f, task.task_id, prev[1])
                    continue
                raise TaskError(f"{f}: field 'task_id': duplicate id {task.task_id} (also in {prev[1]}) "
                                "with different content")
    if not found:
        raise TaskError(f"{root}: no task files (*.yaml, *.yml, *.json with task_id)")
    return sorted((t for t, _, _ in found.values()), key=lambda t: t.number)


__all__ = ["TaskError", "load_task", "load_tasks"]
