"""Reading an encoded run's memory, and FileGramOS memory built from trajectory folders (no run directory): what
the memory methods, the CLI and the encode stage's workers call.

* :func:`load_engram` / :func:`load_store` / :func:`load_memory` — ``engrams/<profile>/<task>.json``,
  ``memory/<profile>/store.json`` and ``indices/<profile>/`` of a run the encode stage wrote;
* :func:`build_store_from_trajectory_dirs` — the same pipeline in this process over arbitrary folders.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filegram_ray.errors import UserError
from filegram_ray.memory.consolidate import ConsolidateConfig, MemoryStore, consolidate
from filegram_ray.memory.engram import Engram, check_events, encode_engram, load_events
from filegram_ray.memory.index import (
    ProfileIndices,
    build_index,
    chunk_texts,
    episode_texts,
    load_indices,
    window_rows,
)
from filegram_ray.memory.retrieve import RetrievedContext, retrieve

log = logging.getLogger(__name__)

__all__ = ["FileGramMemory", "build_store_from_trajectory_dirs", "load_engram", "load_memory", "load_store"]


def load_engram(run, profile_id: str, task_id: str) -> Engram:
    """Read ``engrams/<profile_id>/<task_id>.json`` of a run (a RunDir or a path/URI).

    Raises:
        StorageError: the file is missing. UserError: not a valid Engram (names the file and the field)."""
    return _read_model(_as_run(run), f"engrams/{profile_id}/{task_id}.json", Engram)


def load_store(run, profile_id: str) -> MemoryStore:
    """Read ``memory/<profile_id>/store.json`` of a run (a RunDir or a path/URI).

    Raises:
        StorageError: the file is missing. UserError: not a valid store (names the file and the field)."""
    return _read_model(_as_run(run), f"memory/{profile_id}/store.json", MemoryStore)


def _read_model(run, rel: str, model):
    from pydantic import ValidationError

    data = run.read_bytes(rel)
    try:
        return model.from_json(data)
    except ValidationError as exc:
        errs = "; ".join((f"field '{'.'.join(str(p) for p in e['loc'])}': " if e["loc"] else "") + e["msg"]
                         for e in exc.errors()[:3])
        raise UserError(f"{run.url(rel)}: not a valid {model.__name__}: {errs}") from None


def _as_run(run):
    from filegram_ray.storage import RunDir

    return run if isinstance(run, RunDir) else RunDir(run)


@dataclass
class FileGramMemory:
    """FileGramOS state built from arbitrary trajectories: the store, its indices, the embedder."""

    store: MemoryStore
    indices: ProfileIndices | None
    embedder: Any = None

    def retrieve(self, query: str | None = None, *, channels=("procedural", "semantic", "episodic")
                 ) -> RetrievedContext:
        return retrieve(self.store, query, channels=channels, indices=self.indices, embedder=self.embedder)


def build_store_from_trajectory_dirs(dirs: list[str | Path], embedder=None, *, llm_fn=None,
                                     config: ConsolidateConfig | dict[str, Any] | None = None,
                                     upstream_quirks: bool = False) -> FileGramMemory:
    """Ingest trajectory folders (each with events.json and optionally media/) into FileGramOS memory.

    The trajectory id and task id of each Engram are the folder name (no profile id). meta.json is never read.

    Args:
        dirs: trajectory folders. embedder: Embedder-like (``encode(texts)``); None → no indices (query sections
            off) and TF-IDF episode clustering. llm_fn: optional LLM callable. config: ConsolidateConfig overrides.

    Raises:
        ValueError: no folders, or a malformed events.json (names the file); invalid events are skipped with a
            warning naming the file, index and field (:func:`~filegram_ray.memory.engram.check_events`).
        FileNotFoundError: a folder lacks events.json.
    """
    if not dirs:
        raise UserError("build_store_from_trajectory_dirs: no trajectory folders given")
    engrams = []
    for d in dirs:
        d = Path(d)
        media = d / "media"
        events, problems = check_events(load_events(d / "events.json"), str(d / "events.json"))
        for msg in problems:
            log.warning("%s: event skipped", msg)
        engrams.append(encode_engram(events, d.name, d.name,
                                     media if media.exists() else None, upstream_quirks=upstream_quirks,
                                     llm_fn=llm_fn, source=str(d / "events.json")))
    cfg = config if isinstance(config, ConsolidateConfig) else ConsolidateConfig.model_validate(
        {"upstream_quirks": upstream_quirks, **(config or {})})
    store = consolidate(engrams, embedder=embedder, llm_fn=llm_fn, config=cfg)
    indices = None
    if embedder is not None:
        ct, cm = chunk_texts(store)
        et, em = episode_texts(store)
        indices = ProfileIndices(build_index(*window_rows(embedder, ct, cm), embedder),
                                 build_index(*window_rows(embedder, et, em), embedder))
    return FileGramMemory(store, indices, embedder)


def load_memory(run, profile_id: str, embedder=None) -> FileGramMemory:
    """Store and indices of one profile of an encoded run (a RunDir or a path/URI)."""
    run = _as_run(run)
    return FileGramMemory(load_store(run, profile_id), load_indices(run, profile_id, embedder), embedder)
