"""Bring your own folder: import a folder as one task's workspace in a run, then run the pipeline on it.

``filegram workspace run DIR --task T-07 --profiles p3 p11 --run-dir RUN`` is the whole thing in one command:

1. :func:`~filegram_ray.workspace.bundle.import_bundle` copies ``DIR`` (documents extracted, media described) into a
   temporary folder, which :func:`publish_bundle` puts at ``RUN/workspaces/<task>/`` (any fsspec run dir) with a
   ``seed`` completion record marked ``source: imported`` — so the seed stage never replaces it with a generated
   bundle, and the generate stage, which fingerprints the bundle's content, regenerates trajectories made on an
   earlier import (case R2-generate-stale-trajectory-after-reimport).
2. :func:`~filegram_ray.pipeline.run_pipeline` runs generate → encode → render → bench → evaluate for that one task
   and the chosen profiles (the seed stage is skipped: the workspace is the imported one).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filegram_ray.errors import UserError

if TYPE_CHECKING:  # imported where used: `filegram workspace --help` reads BYOF_STAGES without numpy or pydantic
    from filegram_ray.config import PipelineConfig
    from filegram_ray.storage import RunDir
    from filegram_ray.workspace.bundle import BundleInfo

__all__ = ["publish_bundle", "run_folder"]

#: stages run on an imported folder, in order (the seed stage is the import itself)
BYOF_STAGES = ("generate", "encode", "render", "bench", "evaluate")


def publish_bundle(local_dir: Path | str, run: RunDir, task_id: str, info: BundleInfo, source: str) -> str:
    """Put an imported bundle (``files/``, ``extracted/``, ``bundle.json``) at ``workspaces/<task_id>/`` of ``run``,
    replacing what was there, and mark the seed unit of ``task_id`` done with ``source: imported``.
    ``bundle.json`` is written last, so a reader never sees a new bundle.json over old files. Returns the rel."""
    local = Path(local_dir)
    rel = f"workspaces/{task_id}"
    run.remove(rel)
    for sub in ("files", "extracted"):
        if (local / sub).is_dir():
            run.put_tree(local / sub, f"{rel}/{sub}")
    run.write_bytes(f"{rel}/bundle.json", (local / "bundle.json").read_bytes())
    run.mark_done("seed", task_id, {"task_id": task_id, "source": "imported", "folder": source,
                                    "n_files": info.n_files, "bytes": info.total_bytes, "by_kind": info.by_kind,
                                    "bundle_sha256": info.content_hash, "errors": len(info.errors)})
    return rel


def run_folder(src_dir: Path | str, task_id: str, cfg: PipelineConfig, *, describe: Any = None,
               stages: tuple[str, ...] | list[str] = BYOF_STAGES, progress=None,
               on_import=None, include_hidden: bool = False) -> dict[str, Any]:
    """Import ``src_dir`` as ``task_id``'s workspace of ``cfg``'s run and run ``stages`` on it.

    Args:
        src_dir: the folder to import.
        task_id: a task of the config's task set (its instructions are what the agent does on the folder).
        cfg: pipeline config; its ``tasks`` is set to ``[task_id]``; ``profiles`` / ``profiles_dir`` pick the
            profile set.
        describe: :class:`~filegram_ray.workspace.describe.DescribeOptions` (or dict) for the media.
        stages: pipeline stages to run after the import (default :data:`BYOF_STAGES`; empty = import only), each
            on its section's ``executor`` (``--serial``: all ``serial``, without Ray).
        progress / on_import: callbacks (a line per media file described; the :class:`BundleInfo` once imported).

    Returns: ``{"import": BundleInfo, "pipeline": run_pipeline's timings}``.
    Raises: FileNotFoundError (no such folder); ValueError (a task id not in the task set, an unknown stage).
    """
    from filegram_ray.config import PipelineConfig
    from filegram_ray.pipeline import STAGES, run_pipeline
    from filegram_ray.tasks import load_tasks

    src = Path(src_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: import source is not a directory")
    known = {t.task_id for t in load_tasks(cfg.tasks_dir)}
    if task_id not in known:
        raise UserError(f"--task {task_id!r}: not a task of {cfg.tasks_dir or 'conf/tasks'} "
                         f"(known: {', '.join(sorted(known))})")
    unknown = [s for s in stages if s not in {r.name for r in STAGES} or s == "seed"]
    if unknown:
        raise UserError(f"stages {unknown}: choose from {', '.join(BYOF_STAGES)}")
    cfg = PipelineConfig.model_validate({**cfg.model_dump(), "tasks": [task_id]})
    run = cfg.run()
    from filegram_ray.workspace.bundle import import_bundle

    with tempfile.TemporaryDirectory(prefix=f"byof_{task_id}_") as tmp:
        info = import_bundle(src, task_id, Path(tmp) / "bundle", describe=describe, progress=progress,
                             include_hidden=include_hidden)
        publish_bundle(Path(tmp) / "bundle", run, task_id, info, str(src.resolve()))
    info.out_dir = Path(run.url(f"workspaces/{task_id}"))
    if on_import:
        on_import(info)
    timings = run_pipeline(cfg, only=list(stages)) if stages else {}
    return {"import": info, "pipeline": timings}
