"""The encode stage's two workers (what one unit computes; :mod:`filegram_ray.memory.stage` plans the units and an
executor of :mod:`filegram_ray.stages.executors` runs them):

* :class:`EngramWorker` — one trajectory → ``engrams/<profile_id>/<task_id>.json`` (the stage's units);
* :class:`ProfileWorker` — one profile's Engrams → the consolidated store, the embeddings of its chunk and episode
  texts, its episode clusters, ``indices/<profile_id>/`` and ``memory/<profile_id>/store.json`` (the second round of
  units, :meth:`~filegram_ray.memory.stage.EncodeStage.finish`).

Workers read and write the run directory through :class:`~filegram_ray.storage.RunDir` (atomic writes) and return a
row; a failing unit raises (the executor turns it into an error row naming the exception). Completion records are
written by the driver from the rows. ``meta.json`` (ground truth) is never read.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from filegram_ray.memory.api import load_engram
from filegram_ray.memory.consolidate import ConsolidateConfig, MemoryStore, cluster_episodes, consolidate
from filegram_ray.memory.embed import EMBED_DIM, make_embedder, resolve_kind
from filegram_ray.memory.engram import check_events, encode_engram, parse_events
from filegram_ray.memory.index import (
    ProfileIndices,
    build_index,
    chunk_texts,
    episode_texts,
    save_indices,
    window_rows,
)

log = logging.getLogger(__name__)

__all__ = ["MAX_REPORTED_SKIPS", "EmbedBatch", "EngramWorker", "ProfileWorker", "local_embedder"]

#: skipped-event messages kept per trajectory and per run summary (the count is always complete)
MAX_REPORTED_SKIPS = 10


def _open_run(run_uri: str, storage_options: dict[str, Any] | None):
    from filegram_ray.storage import RunDir

    return RunDir(run_uri, storage_options or {})


class EngramWorker:
    """One unit ``{"unit_id": "<profile_id>/<task_id>", "profile_id", "task_id"}`` → its Engram.

    Args:
        run_uri / storage_options: the run directory. upstream_quirks: reproduce the original engine's event
            quirks (FILEGRAM_REFERENCE §13).
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None = None, upstream_quirks: bool = False):
        self.run = _open_run(run_uri, storage_options)
        self.upstream_quirks = bool(upstream_quirks)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """Validate ``trajectories/<p>/<t>/events.json`` with the event schema ``filegram engine filter`` uses
        (:func:`~filegram_ray.memory.engram.check_events`), encode it with its ``media/`` and write the Engram.

        Returns:
            ``{trajectory_id, profile_id, task_id, events, n_events, importance_score, skipped_events,
            skipped_examples, upstream_quirks}`` — ``events``: valid events kept; ``skipped_events``: invalid ones
            left out; ``skipped_examples``: the first :data:`MAX_REPORTED_SKIPS` messages (file, index, field).

        Raises:
            UserError: a malformed events.json, or one with no valid event (names the file). StorageError: a
                missing file.
        """
        run, pid, task = self.run, unit["profile_id"], unit["task_id"]
        tid = f"{pid}/{task}"
        base = f"trajectories/{pid}/{task}"
        src = run.url(f"{base}/events.json")
        events, problems = check_events(parse_events(run.read_bytes(f"{base}/events.json"), src), src)
        for msg in problems[:MAX_REPORTED_SKIPS]:
            log.warning("%s: event skipped", msg)
        with tempfile.TemporaryDirectory(prefix="fg-media-") as tmp:
            if run.is_local:
                media = Path(run.full(f"{base}/media"))
            else:
                media = Path(tmp)
                run.get_tree(f"{base}/media", media)
            eng = encode_engram(events, tid, task, media if media.exists() else None,
                                upstream_quirks=self.upstream_quirks, source=src)
        run.write_text(f"engrams/{pid}/{task}.json", eng.to_json())
        return {"trajectory_id": tid, "profile_id": pid, "task_id": task, "events": len(events),
                "n_events": eng.event_count, "importance_score": eng.importance_score,
                "skipped_events": len(problems), "skipped_examples": problems[:MAX_REPORTED_SKIPS],
                "upstream_quirks": self.upstream_quirks}


class EmbedBatch:
    """The embedding callable of the encode stage: a batch ``{"text": [...], "kind"?: [...]}`` → the same batch plus
    ``vector`` (float32, (B, 384)). Texts are embedded by the embedder of their row's ``kind`` (default ``kind``);
    a model-backed embedder runs one text per forward pass (a vector never depends on its batch mates) and keeps a
    per-text cache, so a text repeated anywhere in the process's input is computed once.

    Args:
        kind: embedder kind for rows without a ``kind`` column. batch_size: texts per forward pass (embedders
            that batch). cache_dir: the run's shared vector cache (local runs). threads: intra-op threads (None:
            :func:`~filegram_ray.memory.embed.default_threads` for ``actors`` processes on this node).
    """

    def __init__(self, kind: str = "minilm", batch_size: int = 64, cache_dir: str | None = None,
                 threads: int | None = None, actors: int = 1):
        from filegram_ray.memory.embed import default_threads

        self.kind, self.batch_size, self.cache_dir = kind, batch_size, cache_dir
        self.threads = threads or default_threads(actors)
        self.embedders: dict[str, Any] = {}
        self.embedder = self._get(kind)

    def _get(self, kind: str):
        if kind not in self.embedders:
            self.embedders[kind] = make_embedder(kind, self.batch_size, cache_dir=self.cache_dir,
                                                 threads=self.threads)
        return self.embedders[kind]

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = dict(batch)
        texts = [str(t) for t in batch["text"]]
        kinds = [str(k) for k in batch["kind"]] if "kind" in batch else [self.kind] * len(texts)
        vecs = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        for kind in sorted(set(kinds)):
            idx = [i for i, k in enumerate(kinds) if k == kind]
            vecs[idx] = self._get(kind).encode([texts[i] for i in idx])
        out["vector"] = vecs
        return out


def local_embedder(embedder: str = "minilm", batch_size: int = 64, cache_dir: str | None = None,
                   threads: int | None = None, actors: int = 1) -> EmbedBatch:
    """The embedding callable a :class:`ProfileWorker` builds: :class:`EmbedBatch` of ``embedder`` (``auto`` starts
    with ``minilm``; a profile's own kind is added on first use) with ``threads`` intra-op threads (default: this
    process's CPUs shared by ``actors`` processes). Also timed by tests/benchmarks/bench_embed.py."""
    return EmbedBatch(embedder if embedder != "auto" else "minilm", batch_size, cache_dir, threads, actors)


class ProfileWorker:
    """One unit ``{"unit_id": <profile_id>, "profile_id", "task_ids": [...]}`` → the profile's memory and indices.

    Args:
        run_uri / storage_options: the run directory. embedder: ``encode.embedder`` (a kind or ``auto``: resolved
            per profile from its own texts, :func:`~filegram_ray.memory.embed.resolve_kind`). consolidate: the
            :class:`~filegram_ray.memory.consolidate.ConsolidateConfig` as a dict. batch_size / threads / actors:
            of the embedder (:func:`local_embedder`). cache_dir: the run's shared vector cache (local runs).

    The model loads once per process (:meth:`setup`), not per unit.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None = None, embedder: str = "minilm",
                 consolidate: dict[str, Any] | None = None, batch_size: int = 64, cache_dir: str | None = None,
                 threads: int | None = None, actors: int = 1):
        self.run = _open_run(run_uri, storage_options)
        self.setting = embedder
        self.ccfg = dict(consolidate or {})
        self._embed_args = (embedder, batch_size, cache_dir, threads, actors)
        self.embed: EmbedBatch | None = None

    def setup(self) -> None:
        self.embed = local_embedder(*self._embed_args)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """Consolidate the profile's Engrams (in task order), embed its chunk and episode texts, cluster its
        episodes on those vectors, then write ``indices/<profile_id>/`` (with the embedder's identity, BR-11) and
        ``memory/<profile_id>/store.json``.

        Returns:
            ``{profile_id, kind, texts, chunks, episodes, tasks, embedder, embedder_setting, consolidate,
            seconds}`` — ``kind`` the embedder kind used, ``embedder`` its identity, ``seconds``
            ``{"consolidate", "embed_index"}`` of this unit.

        Raises:
            UserError / StorageError: a missing or invalid Engram (names the file).
        """
        if self.embed is None:
            self.setup()
        run, pid = self.run, unit["profile_id"]
        tasks = sorted(unit["task_ids"])
        t0 = time.perf_counter()
        engrams = [load_engram(run, pid, t) for t in tasks]
        store = consolidate(engrams, config=ConsolidateConfig.model_validate(self.ccfg), profile_id=pid)
        # indexed as every reader of store.json sees it (its JSON read back)
        store = MemoryStore.from_json(store.to_json())
        ct, cm = chunk_texts(store)
        et, em = episode_texts(store)
        kind = resolve_kind(self.setting, ct + et)
        t1 = time.perf_counter()
        vecs = self.embed({"text": ct + et, "kind": [kind] * (len(ct) + len(et))})["vector"]
        cv, ev = vecs[:len(ct)], vecs[len(ct):]
        ident = make_embedder(kind).identity()  # no model load
        store.episode_clusters = cluster_episodes(store.episodes(), ev if len(ev) else None,
                                                  self.ccfg["episode_cluster_threshold"])
        emb = self.embed._get(kind)  # a long text is indexed by its windows (window_rows, case BR2-18)
        save_indices(run, pid, ProfileIndices(build_index(*window_rows(emb, ct, cm, cv), ident),
                                              build_index(*window_rows(emb, et, em, ev), ident)))
        run.write_text(f"memory/{pid}/store.json", store.to_json())
        return {"profile_id": pid, "kind": kind, "texts": len(ct) + len(et), "chunks": len(cm),
                "episodes": len(em), "tasks": tasks, "embedder": ident, "embedder_setting": self.setting,
                "consolidate": self.ccfg,
                "seconds": {"consolidate": round(t1 - t0, 3), "embed_index": round(time.perf_counter() - t1, 3)}}
