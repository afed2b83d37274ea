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
functions without Ray.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.config import match_ids
from filegram_ray.memory.consolidate import ConsolidateConfig, MemoryStore, cluster_episodes, consolidate
from filegram_ray.memory.embed import make_embedder, run_cache_dir
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
    embedder: str = Field("minilm", description="'minilm' (packaged all-MiniLM-L6-v2) or 'hashing' (lexical)")
    embed_batch_size: int = Field(64, description="texts per embedding batch")
    embed_actors: int = Field(1, description="embedding actor-pool size")
    embed_num_cpus: float = Field(0.5, description="Ray CPUs per embedding actor (≤ 0.5 on 2 CPUs)")
    encode_num_cpus: float = Field(0.25, description="Ray CPUs per Engram map task")
    upstream_quirks: bool = Field(False, description="reproduce upstream quirks (FILEGRAM_REFERENCE §13)")
    consolidate: dict[str, Any] = Field(default_factory=dict, description="ConsolidateConfig overrides")
    force: bool = Field(False, description="ignore completion records and redo everything")


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
        run.mark_done(STAGE_ENGRAM, tid, {"events": len(events), "skipped_events": len(problems)})
        row.update(n_events=eng.event_count, importance_score=eng.importance_score)
    except Exception as exc:  # noqa: BLE001 - one bad trajectory never sinks the batch
        row.update(status="error", error_type=type(exc).__name__, error=f"{tid}: {exc}"[:2000])
    return row


def load_engram(run, profile_id: str, task_id: str) -> Engram:
    """Read ``engrams/<profile_id>/<task_id>.json``."""
    return Engram.from_json(_as_run(run).read_bytes(f"engrams/{profile_id}/{task_id}.json"))


def load_store(run, profile_id: str) -> MemoryStore:
    """Read ``memory/<profile_id>/store.json`` of a run (a RunDir or a path/URI)."""
    return MemoryStore.from_json(_as_run(run).read_bytes(f"memory/{profile_id}/store.json"))


def _as_run(run):
    from filegram_ray.storage import RunDir

    return run if isinstance(run, RunDir) else RunDir(run)


# ------------------------------------------------------------------ Ray Data callables
class EmbedBatch:
    """Ray Data callable class: ``{"text": [...], ...}`` batch → same batch plus ``vector`` (float32, (B, 384))."""

    def __init__(self, kind: str = "minilm", batch_size: int = 64, cache_dir: str | None = None):
        self.embedder = make_embedder(kind, batch_size, cache_dir=cache_dir)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(batch)
        out["vector"] = self.embedder.encode([str(t) for t in batch["text"]])
        return out


def _consolidate_profile(run, profile_id: str, task_ids: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    try:
        engrams = [load_engram(run, profile_id, t) for t in sorted(task_ids)]
        store = consolidate(engrams, config=ConsolidateConfig.model_validate(cfg), profile_id=profile_id)
        return {"profile_id": profile_id, "status": "ok", "store": store.to_json(), "error": None}
    except Exception as exc:  # noqa: BLE001 - one bad profile never sinks the batch
        return {"profile_id": profile_id, "status": "error", "store": None, "error": f"{profile_id}: {exc}"}


def _embed_rows(rows: list[dict[str, Any]], cfg: EncodeConfig, serial: bool, cache_dir: str | None = None
                ) -> np.ndarray:
    """Vectors for ``rows`` (each with ``text``), in row order; ``cache_dir`` is the run's shared vector cache
    (so the evaluate stage's FileGramOS method finds these texts already embedded)."""
    if not rows:
        return np.zeros((0, 384), dtype=np.float32)
    if serial:
        fn = EmbedBatch(cfg.embedder, cfg.embed_batch_size, cache_dir)
        out = []
        for i in range(0, len(rows), cfg.embed_batch_size):
            out.append(fn({"text": np.asarray([r["text"] for r in rows[i:i + cfg.embed_batch_size]],
                                              dtype=object)})["vector"])
        return np.concatenate(out).astype(np.float32)
    import ray

    ds = ray.data.from_items([{"row": i, "text": r["text"]} for i, r in enumerate(rows)])
    ds = ds.map_batches(EmbedBatch, fn_constructor_kwargs={"kind": cfg.embedder, "batch_size": cfg.embed_batch_size,
                                                           "cache_dir": cache_dir},
                        batch_size=cfg.embed_batch_size, batch_format="numpy", num_cpus=cfg.embed_num_cpus,
                        compute=ray.data.ActorPoolStrategy(size=max(1, cfg.embed_actors)))
    got = ds.take_all()
    vecs = np.zeros((len(rows), len(got[0]["vector"])), dtype=np.float32)
    for r in got:
        vecs[int(r["row"])] = np.asarray(r["vector"], dtype=np.float32)
    return vecs


# ------------------------------------------------------------------ the stage
def run_encode(config, *, serial: bool = False, address: str | None = None) -> dict[str, Any]:
    """Run the encode stage over a run directory.

    Args:
        config: a :class:`~filegram_ray.config.PipelineConfig` (its ``encode:`` section is validated with
            :class:`EncodeConfig`).
        serial: same code, no Ray.
        address: Ray address (default: config.ray.address, RAY_ADDRESS, or a local Ray).

    Returns:
        Summary dict (counts, errors, seconds per step), also recorded in ``run.json`` under ``encode``.

    Raises:
        StorageError: ``trajectories/index.parquet`` is missing.
        ValueError: ``profiles`` / ``tasks`` of the config name an id the trajectory index lacks (short ids such as
            ``p1`` match ``p1_methodical``, as in the generate stage); the configured sets select no trajectory
            generated without error; or none of them has an Engram after the stage (0 of N: the summary is
            recorded in run.json and ``engrams/errors.parquet`` first).
    """
    from filegram_ray.runtime import init_ray
    from filegram_ray.schema.meta import record_stage

    t0 = time.perf_counter()
    cfg = EncodeConfig.model_validate(config.section("encode"))
    ccfg = ConsolidateConfig.model_validate({"upstream_quirks": cfg.upstream_quirks, **cfg.consolidate}).model_dump()
    run = config.run()
    index = run.read_table("trajectories/index.parquet")
    where = "trajectories/index.parquet"
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
        raise ValueError(f"encode: no trajectory to encode: {where} has {n_selected} trajectories for the configured "
                         f"profiles {config.profiles or 'all'} x tasks {config.tasks or 'all'}, none with status ok")
    if cfg.force:
        run.clear_done(STAGE_ENGRAM)
        run.clear_done(STAGE_PROFILE)
    todo = [r for r in rows if cfg.force or not run.is_done(STAGE_ENGRAM, f"{r['profile_id']}/{r['task_id']}")
            or not run.exists(f"engrams/{r['profile_id']}/{r['task_id']}.json")]  # record without its Engram: redo
    if not serial and (todo or rows):
        init_ray(address or config.ray.address, num_cpus=config.ray.num_cpus)

    # ---- Stage 1: Engrams in parallel
    t1 = time.perf_counter()
    if not todo:
        results = []
    elif serial:
        fn = _make_encode_fn(run, cfg.upstream_quirks)
        results = [fn(r) for r in todo]
    else:
        import ray

        results = ray.data.from_items(todo).map(_make_encode_fn(run, cfg.upstream_quirks),
                                                num_cpus=cfg.encode_num_cpus).take_all()
    errors = [r for r in results if r["status"] != "ok"]
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
        if run.is_done(STAGE_ENGRAM, f"{r['profile_id']}/{r['task_id']}"):
            by_profile.setdefault(r["profile_id"], []).append(r["task_id"])
    eng_index = [{"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t}
                 for p, ts in sorted(by_profile.items()) for t in sorted(ts)]
    run.write_table("engrams/index.parquet", pl.DataFrame(
        eng_index, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8}))
    pending = []
    for pid, tids in sorted(by_profile.items()):
        done = [d for d in run.done_records(STAGE_PROFILE) if d.get("unit") == pid] if run.is_done(
            STAGE_PROFILE, pid) else []
        if done and sorted(done[0].get("tasks", [])) == sorted(tids):
            continue
        pending.append({"profile_id": pid, "task_ids": sorted(tids)})
    if not pending:
        cons = []
    elif serial:
        fn2 = _make_consolidate_fn(run, ccfg)
        cons = [fn2(p) for p in pending]
    else:
        import ray

        cons = ray.data.from_items(pending).map(_make_consolidate_fn(run, ccfg),
                                                num_cpus=cfg.encode_num_cpus).take_all()
    profile_errors = [c for c in cons if c["status"] != "ok"]
    stores = {c["profile_id"]: MemoryStore.from_json(c["store"]) for c in cons if c["status"] == "ok"}
    t_cons = time.perf_counter() - t2

    # ---- embeddings on an actor pool → episode clusters, FAISS indices, store.json
    t3 = time.perf_counter()
    emb_rows: list[dict[str, Any]] = []
    spans: dict[str, dict[str, tuple[int, int]]] = {}
    for pid, store in stores.items():
        ct, _ = chunk_texts(store)
        et, _ = episode_texts(store)
        a = len(emb_rows)
        emb_rows.extend({"text": t} for t in ct)
        b = len(emb_rows)
        emb_rows.extend({"text": t} for t in et)
        spans[pid] = {"chunks": (a, b), "episodes": (b, len(emb_rows))}
    vecs = _embed_rows(emb_rows, cfg, serial, run_cache_dir(run))
    ident = make_embedder(cfg.embedder).identity()  # recorded beside every index (BR-11); no model load
    for pid, store in stores.items():
        (ca, cb), (ea, eb) = spans[pid]["chunks"], spans[pid]["episodes"]
        _, cm = chunk_texts(store)
        _, em = episode_texts(store)
        ev = vecs[ea:eb]
        store.episode_clusters = cluster_episodes(store.episodes(), ev if len(ev) else None,
                                                  ccfg["episode_cluster_threshold"])
        save_indices(run, pid, ProfileIndices(build_index(vecs[ca:cb], cm, ident), build_index(ev, em, ident)))
        run.write_text(f"memory/{pid}/store.json", store.to_json())
        run.mark_done(STAGE_PROFILE, pid, {"tasks": sorted(by_profile[pid]), "chunks": cb - ca,
                                           "episodes": eb - ea})
    t_embed = time.perf_counter() - t3

    summary = {
        "trajectories": len(rows), "encoded_now": len(results) - len(errors), "skipped_done": len(rows) - len(todo),
        "errors": len(errors), "error_ids": [e["trajectory_id"] for e in errors],
        "events_skipped": sum(int(r.get("skipped_events") or 0) for r in results),
        "skipped_event_examples": [m for r in results for m in (r.get("skipped") or [])][:MAX_REPORTED_SKIPS],
        "profiles": len(by_profile), "profiles_consolidated_now": len(stores),
        "profile_errors": [c["error"] for c in profile_errors], "texts_embedded": len(emb_rows),
        "embedder": cfg.embedder, "upstream_quirks": cfg.upstream_quirks, "serial": serial,
        "seconds": {"engrams": round(t_engram, 3), "consolidate": round(t_cons, 3), "embed_index": round(t_embed, 3),
                    "total": round(time.perf_counter() - t0, 3)},
    }
    record_stage(run, "encode", summary, config.model_dump(mode="json"))
    if not by_profile:  # 0 of N: a stage that leaves no Engram at all must not look like a success
        first = f"; first error: {errors[0]['error']}" if errors else ""
        raise ValueError(f"encode: 0 of {len(rows)} trajectories encoded (see engrams/errors.parquet){first}")
    return summary


def _make_encode_fn(run, q):
    def fn(row):
        return encode_trajectory(run, row["profile_id"], row["task_id"], upstream_quirks=q)
    return fn


def _make_consolidate_fn(run, ccfg):
    def fn(row):
        return _consolidate_profile(run, row["profile_id"], list(row["task_ids"]), ccfg)
    return fn


def format_summary(s: dict[str, Any]) -> str:
    """A one-screen summary of :func:`run_encode`'s result."""
    lines = [(f"encode: {s['trajectories']} trajectories ({s['encoded_now']} encoded now, {s['skipped_done']} "
             f"already done, {s['errors']} errors), {s['profiles']} profiles ({s['profiles_consolidated_now']} "
             f"consolidated now), {s['texts_embedded']} texts embedded with {s['embedder']}"),
             "seconds: " + ", ".join(f"{k}={v}" for k, v in s["seconds"].items())]
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
        raise ValueError("build_store_from_trajectory_dirs: no trajectory folders given")
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
