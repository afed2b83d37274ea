"""The encode stage: trajectories → Engrams → per-profile MemoryStores → embeddings and FAISS indices.

Reads ``trajectories/index.parquet`` (ids and status only), each trajectory's ``events.json`` and ``media/`` —
never ``meta.json`` (ground truth). Writes, through :class:`~filegram_ray.storage.RunDir`:

* ``engrams/<profile_id>/<task_id>.json`` — one Engram per trajectory (Ray Data ``map``, small ``num_cpus`` so it
  never deadlocks on 2 CPUs, ENVIRONMENT_FACTS §1); ``engrams/errors.parquet`` — one row per trajectory that failed
  (malformed or truncated events.json …), naming it; ``engrams/index.parquet``;
* ``memory/<profile_id>/store.json`` — the consolidated MemoryStore;
* ``indices/<profile_id>/{chunks,episodes}.{faiss,json}`` — vectors from an actor pool (``map_batches`` with a
  callable class, ``num_cpus=0.5``).

Resumable: completion records ``_done/encode.engram/<trajectory>`` and ``_done/encode.profile/<profile>`` (the
latter holds the trajectory set; a profile is redone when its set changes). ``serial=True`` runs the same
functions without Ray; ``execution: auto`` (default) runs them in the driver when the Ray cluster is one node, and
as the Ray Data pipeline above on a multi-node cluster (:class:`EncodeConfig`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from filegram_ray.config import match_ids
from filegram_ray.errors import UserError
from filegram_ray.memory.consolidate import ConsolidateConfig, MemoryStore, cluster_episodes, consolidate
from filegram_ray.memory.embed import embed_dtype, make_embedder, omp_env, run_cache_dir
from filegram_ray.memory.engram import Engram, check_events, encode_engram, load_events, parse_events
from filegram_ray.memory.index import (
    ProfileIndices,
    build_index,
    chunk_texts,
    episode_texts,
    load_indices,
    save_indices,
)
from filegram_ray.memory.retrieve import RetrievedContext, retrieve
from filegram_ray.runtime import exclusive_stage, unit_counts

log = logging.getLogger(__name__)

__all__ = ["EncodeConfig", "FileGramMemory", "build_store_from_trajectory_dirs", "encode_trajectory",
           "load_engram", "load_store", "run_encode"]

STAGE_ENGRAM = "encode.engram"
#: skipped-event messages kept per trajectory and per run summary (the count is always complete)
MAX_REPORTED_SKIPS = 10
STAGE_PROFILE = "encode.profile"


class EncodeConfig(BaseModel):
    """The ``encode:`` section of the pipeline config (defaults here; the lead owns conf/default.yaml)."""

    model_config = ConfigDict(extra="forbid")
    embedder: str = Field("minilm", description="an embedder kind (filegram_ray.memory.embed.EMBEDDERS: 'minilm', "
                          "'minilm-int8', 'e5-small', 'hashing') or 'auto' (per profile: e5-small for mostly-CJK "
                          "texts, else minilm)")
    embed_batch_size: int = Field(64, ge=1, description="texts per forward pass (within one token length)")
    embed_actors: int = Field(1, ge=1, description="embedding actor-pool size")
    embed_num_cpus: float = Field(0.5, description="Ray CPUs per embedding actor (≤ 0.5 on 2 CPUs)")
    embed_threads: int | None = Field(None, ge=1, description="intra-op threads per embedding actor; None = the "
                                      "node's CPUs / embed_actors (filegram_ray.memory.embed.default_threads)")
    encode_num_cpus: float = Field(0.25, description="Ray CPUs per Engram map task")
    upstream_quirks: bool = Field(False, description="reproduce upstream quirks (FILEGRAM_REFERENCE §13)")
    consolidate: dict[str, Any] = Field(default_factory=dict, description="ConsolidateConfig overrides")
    force: bool = Field(False, description="ignore completion records and redo everything")
    serial: bool = Field(False, description="run in this process without Ray (same functions)")
    execution: Literal["auto", "driver", "ray"] = Field(
        "auto", description="where the stage's work runs once Ray is up: 'ray' = Ray Data tasks and the embedding "
        "actor pool; 'driver' = this process, the same functions as serial; 'auto' = 'driver' when the Ray cluster "
        "is one node (nothing to spread the work over: a local run pays worker start-up, imports and two shuffles "
        "for no parallel gain, README 'Speed and scale'), 'ray' on a multi-node cluster or a Ray Client connection")

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        from filegram_ray.memory.embed import EMBEDDERS

        if v != "auto" and v not in EMBEDDERS:
            raise UserError(f"unknown embedder {v!r} (one of {', '.join(sorted(EMBEDDERS))}, or auto)")
        return v


# ------------------------------------------------------------------ Stage 1 unit
def encode_trajectory(run, profile_id: str, task_id: str, *, upstream_quirks: bool = False) -> dict[str, Any]:
    """Encode one trajectory of a run directory and write its Engram; returns a status row (never raises).

    Row: ``{trajectory_id, profile_id, task_id, status ("ok"|"error"), error_type, error, n_events,
    importance_score, skipped_events, skipped}``; an error names the trajectory's events.json. Events that fail
    the event schema (:func:`~filegram_ray.memory.engram.check_events`, as ``filegram engine filter`` checks them)
    are left out and counted in ``skipped_events``; ``skipped`` holds the first messages (file, index, field).
    """
    tid = f"{profile_id}/{task_id}"
    base = f"trajectories/{profile_id}/{task_id}"
    row: dict[str, Any] = {"trajectory_id": tid, "profile_id": profile_id, "task_id": task_id, "status": "ok",
                           "error_type": None, "error": None, "n_events": 0, "importance_score": 0.0,
                           "skipped_events": 0, "skipped": []}
    try:
        src = run.url(f"{base}/events.json")
        events, problems = check_events(parse_events(run.read_bytes(f"{base}/events.json"), src), src)
        row.update(skipped_events=len(problems), skipped=problems[:MAX_REPORTED_SKIPS])
        for msg in problems[:MAX_REPORTED_SKIPS]:
            log.warning("%s: event skipped", msg)
        with tempfile.TemporaryDirectory(prefix="fg-media-") as tmp:
            if run.is_local:
                media = Path(run.full(f"{base}/media"))
            else:
                media = Path(tmp)
                run.get_tree(f"{base}/media", media)
            eng = encode_engram(events, tid, task_id, media if media.exists() else None,
                                upstream_quirks=upstream_quirks, source=src)
        run.write_text(f"engrams/{profile_id}/{task_id}.json", eng.to_json())
        run.mark_done(STAGE_ENGRAM, tid, {"events": len(events), "skipped_events": len(problems),
                                          "upstream_quirks": bool(upstream_quirks)})
        row.update(n_events=eng.event_count, importance_score=eng.importance_score)
    except Exception as exc:  # noqa: BLE001 - one bad trajectory never sinks the batch
        row.update(status="error", error_type=type(exc).__name__, error=f"{tid}: {exc}"[:2000])
    return row


def load_engram(run, profile_id: str, task_id: str) -> Engram:
    """Read ``engrams/<profile_id>/<task_id>.json``. Raises StorageError when it is missing, ValueError naming the
    file and the field when it is not a valid Engram."""
    return _read_model(_as_run(run), f"engrams/{profile_id}/{task_id}.json", Engram)


def load_store(run, profile_id: str) -> MemoryStore:
    """Read ``memory/<profile_id>/store.json`` of a run (a RunDir or a path/URI). Raises StorageError when it is
    missing, ValueError naming the file and the field when it is not a valid store."""
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


# ------------------------------------------------------------------ Ray Data callables
class EmbedBatch:
    """Ray Data callable class (one per embedding actor): a batch ``{"text": [...], "kind"?: [...], ...}`` → the same
    batch plus ``vector`` (float32, (B, 384)). Texts are embedded by the embedder of their row's ``kind`` (default
    ``kind``); each embedder groups its texts by exact token length (no padding, so a vector never depends on its
    batch mates) and keeps a per-text cache, so a text repeated anywhere in the actor's input is computed once.

    Args:
        kind: embedder kind for rows without a ``kind`` column. batch_size: texts per forward pass.
        cache_dir: the run's shared vector cache (local runs). threads: intra-op threads (None:
            :func:`~filegram_ray.memory.embed.default_threads` for ``actors`` actors on this node).
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

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(batch)
        texts = [str(t) for t in batch["text"]]
        kinds = [str(k) for k in batch["kind"]] if "kind" in batch else [self.kind] * len(texts)
        vecs = np.zeros((len(texts), 384), dtype=np.float32)
        for kind in sorted(set(kinds)):
            idx = [i for i, k in enumerate(kinds) if k == kind]
            vecs[idx] = self._get(kind).encode([texts[i] for i in idx])
        out["vector"] = vecs
        return out


def _consolidate_profile(run, profile_id: str, task_ids: list[str], cfg: dict[str, Any], kind: str
                         ) -> dict[str, Any]:
    """Consolidate one profile's Engrams and write ``memory/<profile>/store.json`` (its episode clusters come with
    the vectors, :func:`_index_profile`); returns a small status row (never the store: the driver holds no
    stores) with the embedder kind resolved from the profile's own texts (``auto``)."""
    from filegram_ray.memory.embed import resolve_kind

    try:
        engrams = [load_engram(run, profile_id, t) for t in sorted(task_ids)]
        store = consolidate(engrams, config=ConsolidateConfig.model_validate(cfg), profile_id=profile_id)
        run.write_text(f"memory/{profile_id}/store.json", store.to_json())
        ct, _ = chunk_texts(store)
        et, _ = episode_texts(store)
        return {"profile_id": profile_id, "status": "ok", "error": None, "kind": resolve_kind(kind, ct + et),
                "texts": len(ct) + len(et)}
    except Exception as exc:  # noqa: BLE001 - one bad profile never sinks the batch
        return _profile_error(profile_id, None, exc)


def _profile_texts(run, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The texts of one consolidated profile to embed: ``{profile_id, kind, part, pos, text, chars}`` per chunk and
    episode (``part`` ``chunks`` | ``episodes``, ``pos`` the record's position in its index)."""
    store = load_store(run, row["profile_id"])
    out = []
    for part, (texts, _) in (("chunks", chunk_texts(store)), ("episodes", episode_texts(store))):
        out += [{"profile_id": row["profile_id"], "kind": row["kind"], "part": part, "pos": i, "text": t,
                 "chars": len(t)} for i, t in enumerate(texts)]
    return out


def _index_profile(run, profile_id: str, kind: str, vectors: dict[str, np.ndarray], ccfg: dict[str, Any],
                   tasks: list[str], setting: str | None = None) -> dict[str, Any]:
    """Episode clusters, FAISS indices (with the embedder's identity, BR-11) and the final store of one profile,
    then its completion record; ``vectors``: ``{"chunks": (n, 384), "episodes": (m, 384)}`` in index order."""
    store = load_store(run, profile_id)
    _, cm = chunk_texts(store)
    _, em = episode_texts(store)
    ident = make_embedder(kind).identity()  # no model load
    ev = vectors["episodes"]
    store.episode_clusters = cluster_episodes(store.episodes(), ev if len(ev) else None,
                                              ccfg["episode_cluster_threshold"])
    save_indices(run, profile_id, ProfileIndices(build_index(vectors["chunks"], cm, ident),
                                                 build_index(ev, em, ident)))
    run.write_text(f"memory/{profile_id}/store.json", store.to_json())
    settings = json.loads(json.dumps({"embedder": ident, "embedder_setting": setting or kind, "consolidate": ccfg},
                                     sort_keys=True))  # as stored
    run.mark_done(STAGE_PROFILE, profile_id, {**settings, "tasks": sorted(tasks), "chunks": len(cm),
                                              "episodes": len(em), "kind": kind})
    return {"profile_id": profile_id, "status": "ok", "error": None, "kind": kind, "texts": len(cm) + len(em)}


def _vectors_by_part(rows: dict[str, Any], n_chunks: int | None = None) -> dict[str, np.ndarray]:
    """``{"chunks", "episodes"}`` → (n, 384) in ``pos`` order, from columns part / pos / vector."""
    out: dict[str, np.ndarray] = {}
    parts = np.asarray(rows["part"]).astype(str) if len(rows["part"]) else np.zeros(0, dtype=str)
    pos = np.asarray(rows["pos"], dtype=np.int64)
    vec = np.asarray(list(rows["vector"]), dtype=np.float32).reshape(len(pos), -1) if len(pos) else \
        np.zeros((0, 384), dtype=np.float32)
    for part in ("chunks", "episodes"):
        sel = np.flatnonzero(parts == part)
        v = np.zeros((len(sel), vec.shape[1] if vec.ndim == 2 else 384), dtype=np.float32)
        if len(sel):
            v[pos[sel]] = vec[sel]
        out[part] = v
    return out


def _profile_error(profile_id: str, kind: str | None, exc: BaseException) -> dict[str, Any]:
    """The status row of a profile whose consolidation or indexing failed (one bad profile never sinks the batch)."""
    return {"profile_id": profile_id, "status": "error", "error": f"{profile_id}: {exc}", "kind": kind, "texts": 0}


def _index_group(group: dict[str, np.ndarray], *, run, ccfg: dict[str, Any], tasks: dict[str, list[str]],
                 setting: str) -> dict[str, np.ndarray]:
    """``map_groups`` function: all embedded rows of one profile → its indices and store (one status row)."""
    pid = str(group["profile_id"][0])
    kind = str(group["kind"][0])
    try:
        row = _index_profile(run, pid, kind, _vectors_by_part(group), ccfg, tasks[pid], setting)
    except Exception as exc:  # noqa: BLE001 - one bad profile never sinks the batch
        row = _profile_error(pid, kind, exc)
    return {k: np.asarray([v], dtype=object) for k, v in row.items()}


def _embed_and_index(run, profiles: list[dict[str, Any]], cfg: EncodeConfig, ccfg: dict[str, Any],
                     tasks: dict[str, list[str]], serial: bool) -> list[dict[str, Any]]:
    """Embed every consolidated profile's chunk and episode texts and build its indices; one status row per
    profile.

    On Ray, one Ray Data pipeline and no texts or vectors in the driver: ``flat_map`` (texts of a profile) →
    ``sort`` by text length (so each batch of the actor pool holds texts of nearly one token length: little
    padding to avoid, big forward passes) → ``map_batches`` on the embedding actor pool (:class:`EmbedBatch`) →
    ``groupby(profile_id).map_groups`` (indices, clusters, store, completion record). ``serial`` (also
    ``execution: driver``): the same functions in this process (:func:`_embed_and_index_here`).
    """
    from filegram_ray.runtime import pool_capacity

    if not profiles:
        return []
    cache_dir = run_cache_dir(run)
    if serial:
        return _embed_and_index_here(run, profiles, cfg, ccfg, tasks, cache_dir)
    import ray

    n_texts = sum(int(p.get("texts") or 0) for p in profiles)
    # a profile without texts has no row to reach map_groups: its (empty) indices are written here
    empty = [p for p in profiles if not p.get("texts")]
    out = [_index_profile(run, p["profile_id"], p["kind"], {"chunks": np.zeros((0, 384), np.float32),
                                                           "episodes": np.zeros((0, 384), np.float32)},
                          ccfg, tasks[p["profile_id"]], cfg.embedder) for p in empty]
    full = [p for p in profiles if p.get("texts")]
    if not full:
        return out
    texts = ray.data.from_items(full).flat_map(_TextsOf(run), num_cpus=cfg.encode_num_cpus)
    vectors = embed_dataset(texts, cfg, cache_dir, sort=n_texts > cfg.embed_batch_size)
    # a few hash partitions (Ray's default is 200 reduce tasks: seconds of overhead on a laptop for 20 profiles)
    parts = max(1, min(len(full), pool_capacity(cfg.encode_num_cpus)))
    done = vectors.groupby("profile_id", num_partitions=parts).map_groups(partial(_index_group, run=run, ccfg=ccfg, tasks=tasks,
                                                            setting=cfg.embedder), batch_format="numpy",
                                                    num_cpus=cfg.encode_num_cpus)
    return out + [dict(r) for r in done.take_all()]


#: texts gathered before one in-process embedding call: enough for full batches of one token length (a text's
#: vector does not depend on its batch, so the block size never changes the indices' bytes), few enough that the
#: driver never holds a large profile set's texts at once
LOCAL_BLOCK_TEXTS = 2048


def local_embedder(cfg: EncodeConfig, cache_dir: str | None = None) -> EmbedBatch:
    """The embedding callable of the in-process paths (``serial`` / ``execution: driver``): :class:`EmbedBatch` with
    ``cfg.embed_threads`` threads (default every CPU this process may run on). Used by the stage and by
    tests/benchmarks/bench_embed.py (so the benchmark times exactly this)."""
    from filegram_ray.memory.embed import default_threads

    return EmbedBatch(cfg.embedder if cfg.embedder != "auto" else "minilm", cfg.embed_batch_size, cache_dir,
                      cfg.embed_threads or default_threads(1))


def _embed_and_index_here(run, profiles: list[dict[str, Any]], cfg: EncodeConfig, ccfg: dict[str, Any],
                          tasks: dict[str, list[str]], cache_dir: str | None) -> list[dict[str, Any]]:
    """In-process embedding and indexing: profiles in blocks of about :data:`LOCAL_BLOCK_TEXTS` texts, each block's
    texts embedded in one call (de-duplicated, grouped by token length), then each profile's indices and store."""
    fn = local_embedder(cfg, cache_dir)
    out: list[dict[str, Any]] = []
    block: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    def flush():
        rows = [r for _, rs in block for r in rs]
        vecs = fn({"text": [r["text"] for r in rows], "kind": [r["kind"] for r in rows]})["vector"] if rows \
            else np.zeros((0, 384), dtype=np.float32)
        at = 0
        for p, rs in block:
            grp = {"part": [r["part"] for r in rs], "pos": [r["pos"] for r in rs], "vector": list(vecs[at:at + len(rs)])}
            at += len(rs)
            try:
                out.append(_index_profile(run, p["profile_id"], p["kind"], _vectors_by_part(grp), ccfg,
                                          tasks[p["profile_id"]], cfg.embedder))
            except Exception as exc:  # noqa: BLE001 - one bad profile never sinks the batch
                out.append(_profile_error(p["profile_id"], p["kind"], exc))
        block.clear()

    n = 0
    for p in profiles:
        try:
            rows = _profile_texts(run, p)
        except Exception as exc:  # noqa: BLE001 - one bad profile never sinks the batch
            out.append(_profile_error(p["profile_id"], p["kind"], exc))
            continue
        block.append((p, rows))
        n += len(rows)
        if n >= LOCAL_BLOCK_TEXTS:
            flush()
            n = 0
    flush()
    return out


def embed_dataset(texts, cfg: EncodeConfig, cache_dir: str | None = None, *, sort: bool = True):
    """The encode stage's embedding step on a Ray Dataset with columns ``text`` (and optionally ``kind``, ``chars``):
    sorted by ``chars`` (text length; so a batch holds texts of nearly one token length), then ``map_batches`` on an
    actor pool of :class:`EmbedBatch` (``cfg.embed_actors`` actors asking ``cfg.embed_num_cpus`` CPUs each, each
    running ``cfg.embed_threads`` intra-op threads) → the same rows plus ``vector``. Used by the stage and by
    tests/benchmarks/bench_embed.py (so the benchmark times exactly this)."""
    import warnings

    import ray

    from filegram_ray.runtime import pool_capacity

    if sort:
        texts = texts.sort("chars")
    first = cfg.embedder if cfg.embedder != "auto" else "minilm"
    size = max(1, min(cfg.embed_actors, pool_capacity(cfg.embed_num_cpus)))  # every actor can be placed (BR-08)
    with warnings.catch_warnings():  # Ray 2.60 takes actor retry limits only through the deprecated remote args
        warnings.simplefilter("ignore", DeprecationWarning)
        return texts.map_batches(
            EmbedBatch, fn_constructor_kwargs={"kind": first, "batch_size": cfg.embed_batch_size,
                                               "cache_dir": cache_dir, "threads": cfg.embed_threads, "actors": size},
            batch_size=max(cfg.embed_batch_size, 256), batch_format="numpy", num_cpus=cfg.embed_num_cpus,
            compute=ray.data.ActorPoolStrategy(size=size), runtime_env={"env_vars": omp_env()},
            max_restarts=3, max_task_retries=2)  # bounded: a dying embedder fails the stage


class _TextsOf:
    """``flat_map`` callable: a consolidated profile's row → its texts (:func:`_profile_texts`)."""

    def __init__(self, run):
        self.run = run

    def __call__(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return _profile_texts(self.run, row)


# ------------------------------------------------------------------ the stage
@exclusive_stage("encode")
def run_encode(config, *, serial: bool | None = None, address: str | None = None) -> dict[str, Any]:
    """Run the encode stage over a run directory.

    Args:
        config: a :class:`~filegram_ray.config.PipelineConfig` (its ``encode:`` section is validated with
            :class:`EncodeConfig`).
        serial / address: overrides of ``encode.serial`` (same code, no Ray) and ``ray.address`` for callers that
            predate the one stage contract; the pipeline and the job scripts set them in the config.

    Returns:
        Summary dict (counts, errors, seconds per step, ``units``), also recorded in ``run.json`` under ``encode``.

    Raises:
        StorageError: ``trajectories/index.parquet`` is missing or unreadable.
        ValueError: the index lacks a column; ``profiles`` / ``tasks`` of the config name an id the trajectory index lacks (short ids such as
            ``p1`` match ``p1_methodical``, as in the generate stage); the configured sets select no trajectory
            generated without error; or none of them has an Engram after the stage (0 of N: the summary is
            recorded in run.json and ``engrams/errors.parquet`` first).
    """
    from filegram_ray.runtime import init_ray
    from filegram_ray.schema.meta import record_stage

    t0 = time.perf_counter()
    cfg = EncodeConfig.model_validate(config.section("encode"))
    serial = cfg.serial if serial is None else bool(serial)
    ccfg = ConsolidateConfig.model_validate({"upstream_quirks": cfg.upstream_quirks, **cfg.consolidate}).model_dump()
    run = config.run()
    index = run.read_table("trajectories/index.parquet")
    where = "trajectories/index.parquet"
    missing = [c for c in ("profile_id", "task_id") if c not in index.columns]
    if missing:
        raise UserError(f"{run.url(where)}: column(s) {', '.join(missing)} missing")
    # the configured sets are resolved against every trajectory of the index (short ids as in generate) ...
    keep_p = set(match_ids(config.profiles, sorted(set(index["profile_id"].to_list())), "profiles", where))
    keep_t = set(match_ids(config.tasks, sorted(set(index["task_id"].to_list())), "tasks", where))
    n_selected = sum(1 for p, t in zip(index["profile_id"].to_list(), index["task_id"].to_list())
                     if p in keep_p and t in keep_t)
    # ... and only the ones generated without error are encoded
    if "status" in index.columns:
        index = index.filter(index["status"] == "ok")
    rows = [{"profile_id": r["profile_id"], "task_id": r["task_id"]}
            for r in index.select(["profile_id", "task_id"]).sort(["profile_id", "task_id"]).to_dicts()
            if r["profile_id"] in keep_p and r["task_id"] in keep_t]
    if not rows:  # 0 of N: nothing to encode is a failure, not an empty success
        raise UserError(f"encode: no trajectory to encode: {where} has {n_selected} trajectories for the configured "
                         f"profiles {config.profiles or 'all'} x tasks {config.tasks or 'all'}, none with status ok")
    if cfg.force:
        run.clear_done(STAGE_ENGRAM)
        run.clear_done(STAGE_PROFILE)
    # redo: no record, a record without its Engram, or an Engram made with other settings (never mix two plans)
    todo = [r for r in rows if cfg.force or not _engram_current(run, f"{r['profile_id']}/{r['task_id']}", cfg)
            or not run.exists(f"engrams/{r['profile_id']}/{r['task_id']}.json")]
    import ray

    addr = address or config.ray.address or os.environ.get("RAY_ADDRESS")
    if serial:
        execution = "serial"
    elif cfg.execution != "ray" and not addr and not ray.is_initialized():
        execution = "driver"  # a new local Ray would be one node: no need to start one
    else:
        from filegram_ray.runtime import check_cpu_request

        init_ray(address or config.ray.address, num_cpus=config.ray.num_cpus)
        check_cpu_request(cfg.encode_num_cpus, "encode.encode_num_cpus")  # fail fast, never wait forever (BR-08)
        check_cpu_request(cfg.embed_num_cpus, "encode.embed_num_cpus")
        execution = _resolve_execution(cfg.execution)
    local = execution != "ray"  # serial, or the driver of a one-node cluster: the same functions in this process

    # ---- Stage 1: Engrams in parallel
    t1 = time.perf_counter()
    if not todo:
        results = []
    elif local:
        fn = _make_encode_fn(run, cfg.upstream_quirks)
        results = [fn(r) for r in todo]
    else:
        import ray

        results = ray.data.from_items(todo).map(_make_encode_fn(run, cfg.upstream_quirks),
                                                num_cpus=cfg.encode_num_cpus).take_all()
    errors = [r for r in results if r["status"] != "ok"]
    redone_engrams = {r["trajectory_id"] for r in results if r["status"] == "ok"}
    import polars as pl

    err_schema = {"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8, "error_type": pl.Utf8,
                  "error": pl.Utf8}
    run.write_table("engrams/errors.parquet", pl.DataFrame(
        [{k: e.get(k) for k in err_schema} for e in errors], schema=err_schema))
    t_engram = time.perf_counter() - t1

    # ---- Stage 2: consolidation per profile
    t2 = time.perf_counter()
    by_profile: dict[str, list[str]] = {}
    for r in rows:
        if _engram_current(run, f"{r['profile_id']}/{r['task_id']}", cfg):
            by_profile.setdefault(r["profile_id"], []).append(r["task_id"])
    eng_index = [{"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t}
                 for p, ts in sorted(by_profile.items()) for t in sorted(ts)]
    run.write_table("engrams/index.parquet", pl.DataFrame(
        eng_index, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8}))
    pending = []
    # what a finished profile must have been made with: the embedder setting (its identity, for a fixed kind) and
    # the consolidation config, as its completion record stores them
    want = json.loads(json.dumps({"embedder_setting": cfg.embedder, "consolidate": ccfg}, sort_keys=True))
    if cfg.embedder != "auto":
        want["embedder"] = json.loads(json.dumps(make_embedder(cfg.embedder).identity(), sort_keys=True))
    for pid, tids in sorted(by_profile.items()):
        done = _done_record(run, STAGE_PROFILE, pid)  # one file per profile (never all records per profile)
        if done and sorted(done.get("tasks", [])) == sorted(tids) and not redone_engrams & set(
                f"{pid}/{t}" for t in tids) and all(done.get(k, "minilm" if k == "embedder_setting" else None) == v
                                                    for k, v in want.items()):
            continue  # same trajectories, same Engrams, same embedder and consolidation settings
        pending.append({"profile_id": pid, "task_ids": sorted(tids)})
    if not pending:
        cons = []
    elif local:
        fn2 = _make_consolidate_fn(run, ccfg, cfg.embedder)
        cons = [fn2(p) for p in pending]
    else:
        import ray

        cons = ray.data.from_items(pending).map(_make_consolidate_fn(run, ccfg, cfg.embedder),
                                                num_cpus=cfg.encode_num_cpus).take_all()
    profile_errors = [c for c in cons if c["status"] != "ok"]
    consolidated = [c for c in cons if c["status"] == "ok"]
    t_cons = time.perf_counter() - t2

    # ---- embeddings on an actor pool → episode clusters, FAISS indices, store.json
    t3 = time.perf_counter()
    indexed = _embed_and_index(run, consolidated, cfg, ccfg, {p: sorted(t) for p, t in by_profile.items()}, local)
    profile_errors += [c for c in indexed if c["status"] != "ok"]
    n_texts = sum(int(c.get("texts") or 0) for c in consolidated)
    kinds: dict[str, int] = {}
    for c in indexed:
        if c["status"] == "ok":
            kinds[str(c["kind"])] = kinds.get(str(c["kind"]), 0) + 1
    t_embed = time.perf_counter() - t3

    summary = {
        "trajectories": len(rows), "encoded_now": len(results) - len(errors), "skipped_done": len(rows) - len(todo),
        "errors": len(errors), "error_ids": [e["trajectory_id"] for e in errors],
        "events_skipped": sum(int(r.get("skipped_events") or 0) for r in results),
        "skipped_event_examples": [m for r in results for m in (r.get("skipped") or [])][:MAX_REPORTED_SKIPS],
        "profiles": len(by_profile), "profiles_consolidated_now": len(consolidated),
        "profile_errors": [c["error"] for c in profile_errors], "texts_embedded": n_texts,
        "embedder": cfg.embedder, "embedder_by_profile": kinds, "upstream_quirks": cfg.upstream_quirks, "serial": serial,
        "embed_dtype": embed_dtype(),  # the torch embedder's dtype on this machine and why (issue 31)
        "execution": execution,
        "step_seconds": {"engrams": round(t_engram, 3), "consolidate": round(t_cons, 3),
                         "embed_index": round(t_embed, 3), "total": round(time.perf_counter() - t0, 3)},
        "units": unit_counts(planned=len(rows), done=len(results) - len(errors), skipped=len(rows) - len(todo),
                             failed=len(errors)),
    }
    record_stage(run, "encode", summary, config.model_dump(mode="json"))
    if not by_profile:  # 0 of N: a stage that leaves no Engram at all must not look like a success
        first = f"; first error: {errors[0]['error']}" if errors else ""
        raise UserError(f"encode: 0 of {len(rows)} trajectories encoded (see engrams/errors.parquet){first}")
    print(format_summary(summary), flush=True)  # every stage ends with its summary, in a job or the pipeline
    return summary


def _resolve_execution(setting: str) -> str:
    """``auto`` → ``driver`` when this process is the driver of a one-node Ray cluster (not a Ray Client
    connection), else ``ray``; ``driver`` / ``ray`` as given. Call after Ray is initialised."""
    if setting != "auto":
        return setting
    import ray

    try:
        from ray.util.client import ray as client

        if client.is_connected():  # a Ray Client driver is not on the cluster: its work belongs on the cluster
            return "ray"
    except ImportError:  # pragma: no cover - Ray without the client module
        pass
    alive = [n for n in ray.nodes() if n.get("Alive")]
    return "driver" if len(alive) <= 1 else "ray"


def _done_record(run, stage: str, unit: str) -> dict[str, Any] | None:
    from filegram_ray.storage import safe_unit_name

    rel = f"_done/{stage}/{safe_unit_name(unit)}.json"
    return run.read_json(rel) if run.exists(rel) else None


def _engram_current(run, tid: str, cfg: EncodeConfig) -> bool:
    """A finished Engram made with this run's settings (records written before settings were recorded count as the
    default settings)."""
    rec = _done_record(run, STAGE_ENGRAM, tid)
    return rec is not None and bool(rec.get("upstream_quirks", False)) == cfg.upstream_quirks


def _make_encode_fn(run, q):
    def fn(row):
        return encode_trajectory(run, row["profile_id"], row["task_id"], upstream_quirks=q)
    return fn


def _make_consolidate_fn(run, ccfg, kind):
    def fn(row):
        return _consolidate_profile(run, row["profile_id"], list(row["task_ids"]), ccfg, kind)
    return fn


def format_summary(s: dict[str, Any]) -> str:
    """A one-screen summary of :func:`run_encode`'s result."""
    lines = [(f"encode: {s['trajectories']} trajectories ({s['encoded_now']} encoded now, {s['skipped_done']} "
             f"already done, {s['errors']} errors), {s['profiles']} profiles ({s['profiles_consolidated_now']} "
             f"consolidated now), {s['texts_embedded']} texts embedded with {s['embedder']}"),
             f"seconds ({s.get('execution', 'ray')}): " + ", ".join(f"{k}={v}" for k, v in s["step_seconds"].items())]
    if s.get("events_skipped"):
        lines.append(f"events skipped (invalid, left out of their Engram): {s['events_skipped']}")
        lines += [f"  skipped: {m}" for m in s.get("skipped_event_examples", [])]
    lines += [f"  error: {e}" for e in s["error_ids"][:10]]
    lines += [f"  profile error: {e}" for e in s["profile_errors"][:10]]
    return "\n".join(lines)


# ------------------------------------------------------------------ API for memory methods
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
        indices = ProfileIndices(build_index(embedder.encode(ct), cm, embedder),
                                 build_index(embedder.encode(et), em, embedder))
    return FileGramMemory(store, indices, embedder)


def load_memory(run, profile_id: str, embedder=None) -> FileGramMemory:
    """Store and indices of one profile of an encoded run."""
    run = _as_run(run)
    return FileGramMemory(load_store(run, profile_id), load_indices(run, profile_id, embedder), embedder)


# -- transitional (issue #29 port in progress): the stage's class for the registry; run_stage calls the legacy
# function until the stage is ported onto plan/worker/finish
from filegram_ray.stages.base import Stage as _Stage  # noqa: E402


class EncodeStage(_Stage):
    name = 'encode'
    Config = EncodeConfig
    legacy = staticmethod(run_encode)
