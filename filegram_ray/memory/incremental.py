"""Incremental FileGramOS memory: add new sessions to a profile's memory without re-encoding the old ones.

The costly part of FileGramOS is Stage 1 — encoding each trajectory into an :class:`~filegram_ray.memory.engram.Engram`
(one to several LLM calls per trajectory when an LLM is configured, reference §7.13) — and embedding texts. An
update therefore:

1. encodes only the sessions not encoded before, writing ``engrams/<profile>/<task>.json``;
2. adds their fingerprints to the profile's running :class:`~filegram_ray.memory.consolidate.FingerprintStats`
   (exact sums: the z-score statistics of §7.4 are never recomputed from the old fingerprints);
3. re-consolidates the channels (§7.4–§7.10) from the stored Engrams — deviation flags, the 2:1 weighting,
   aggregates, samples, chunks and clusters all depend on every session, and are a few milliseconds per hundred
   sessions — with episode and chunk vectors from the embedder's vector cache (only new texts are embedded);
4. rebuilds the FAISS indices and writes ``memory/<profile>/store.json`` and the update state.

The result equals a from-scratch consolidation of the same Engrams bit for bit (tested): the running statistics
are exact and order-independent, and everything else is a function of the Engram set. The layout is the encode
stage's run layout (``engrams/``, ``memory/``, ``indices/``, ``cache/``), so ``filegram watch --show-memory`` reads it.

State, ``memory/<profile>/incremental.json``: ``{version, profile_id, embedder, config, engram_version,
encoded: [task ids], fingerprint_stats}``. A change of embedder, consolidation config or Engram version makes
the next update re-encode everything (reported as ``rebuilt``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from filegram_ray.memory.consolidate import ConsolidateConfig, FingerprintStats, MemoryStore, consolidate
from filegram_ray.memory.embed import make_embedder, run_cache_dir
from filegram_ray.memory.engram import ENGRAM_VERSION, Engram, encode_engram
from filegram_ray.memory.index import (
    ProfileIndices,
    build_index,
    chunk_texts,
    episode_texts,
    save_indices,
    window_rows,
)

log = logging.getLogger(__name__)

__all__ = ["STATE_VERSION", "UnitLoader", "load_state", "update_memory"]

STATE_VERSION = 1
#: ``loader() -> (filtered events, media folder or None)`` for one session/trajectory
UnitLoader = Callable[[], tuple[list[dict[str, Any]], Path | None]]


def _state_path(pid: str) -> str:
    return f"memory/{pid}/incremental.json"


def load_state(run, profile_id: str) -> dict[str, Any] | None:
    """The update state of a profile, or None if it was never updated."""
    rel = _state_path(profile_id)
    return run.read_json(rel) if run.exists(rel) else None


def update_memory(run, profile_id: str, units: dict[str, UnitLoader], *, embedder: str = "minilm",
                  config: ConsolidateConfig | dict[str, Any] | None = None, llm_fn=None,
                  rebuild: bool = False) -> dict[str, Any]:
    """Encode the new units of a profile and update its consolidated memory.

    Args:
        run: a :class:`~filegram_ray.storage.RunDir` (a watcher store is one).
        profile_id: the profile the units belong to.
        units: task id → loader of the unit's filtered events and media folder; ids already encoded are not
            loaded.
        embedder: ``minilm`` (packaged all-MiniLM-L6-v2, vectors cached in ``cache/embeddings``) or ``hashing``.
        config: :class:`ConsolidateConfig` overrides. llm_fn: optional LLM for the encoder and consolidation.
        rebuild: re-encode everything.

    Returns:
        Summary: ``encoded_now``, ``reused``, ``errors`` (messages naming the unit), ``sessions``, ``rebuilt``
        (why, or None), ``up_to_date``, ``seconds``.

    Raises:
        ValueError: no unit could be encoded and no earlier memory exists.
    """
    t0 = time.perf_counter()
    cfg = config if isinstance(config, ConsolidateConfig) else ConsolidateConfig.model_validate(config or {})
    settings = {"embedder": embedder, "config": cfg.model_dump(), "engram_version": ENGRAM_VERSION}
    state = None if rebuild else load_state(run, profile_id)
    why = "requested" if rebuild else None
    if state is not None and any(state.get(k) != v for k, v in settings.items()):
        why = "settings changed: " + ", ".join(k for k, v in settings.items() if state.get(k) != v)
        state = None
    if state is None:
        state = {"version": STATE_VERSION, "profile_id": profile_id, **settings, "encoded": [],
                 "fingerprint_stats": FingerprintStats().model_dump()}
        if why is None and run.exists(f"memory/{profile_id}/store.json"):
            why = "no update state"
    stats = FingerprintStats.model_validate(state["fingerprint_stats"])
    done = set(state["encoded"])
    new_ids = sorted(t for t in units if t not in done)
    errors: list[str] = []
    t1 = time.perf_counter()
    for tid in new_ids:
        try:
            events, media = units[tid]()
            eng = encode_engram(events, f"{profile_id}/{tid}", tid, media, upstream_quirks=cfg.upstream_quirks,
                                llm_fn=llm_fn, source=f"{profile_id}/{tid}")
        except Exception as exc:  # noqa: BLE001 - one bad session never sinks the update
            errors.append(f"{tid}: {type(exc).__name__}: {exc}"[:500])
            continue
        run.write_text(f"engrams/{profile_id}/{tid}.json", eng.to_json())
        stats.add_many(np.asarray([eng.fingerprint]))
        state["encoded"].append(tid)
    t_enc = time.perf_counter() - t1
    encoded_now = len(new_ids) - len(errors)
    if not state["encoded"]:
        raise ValueError(f"memory update: profile {profile_id!r} has no session that could be encoded"
                         + (f" ({'; '.join(errors[:3])})" if errors else ""))
    up_to_date = encoded_now == 0 and why is None and run.exists(f"memory/{profile_id}/store.json")
    t_cons = t_emb = 0.0
    if not up_to_date:
        t2 = time.perf_counter()
        engrams = sorted((Engram.from_json(run.read_bytes(f"engrams/{profile_id}/{t}.json"))
                          for t in state["encoded"]), key=lambda e: e.trajectory_id)
        emb = make_embedder(embedder, cache_dir=run_cache_dir(run))
        ep_texts = [ep.get("content") or ep.get("summary") or "" for e in engrams for ep in e.episodes]
        ep_vecs = emb.encode(ep_texts) if ep_texts else None
        store = consolidate(engrams, llm_fn=llm_fn, config=cfg, profile_id=profile_id, episode_vectors=ep_vecs,
                            fingerprint_stats=stats)
        t_cons = time.perf_counter() - t2
        t3 = time.perf_counter()
        ct, cm = chunk_texts(store)
        et, em = episode_texts(store)
        cvecs = emb.encode(ct) if ct else np.zeros((0, 384), dtype=np.float32)
        evecs = ep_vecs if ep_vecs is not None else np.zeros((0, 384), dtype=np.float32)
        assert len(et) == len(evecs)
        save_indices(run, profile_id, ProfileIndices(build_index(*window_rows(emb, ct, cm, cvecs), emb),
                                                     build_index(*window_rows(emb, et, em, evecs), emb)))
        run.write_text(f"memory/{profile_id}/store.json", store.to_json())
        t_emb = time.perf_counter() - t3
    state["fingerprint_stats"] = stats.model_dump()
    run.write_json(_state_path(profile_id), state)
    return {"profile_id": profile_id, "encoded_now": encoded_now, "reused": len(done & set(state["encoded"])),
            "errors": errors, "sessions": len(state["encoded"]), "rebuilt": why, "up_to_date": up_to_date,
            "embedder": embedder,
            "seconds": {"encode": round(t_enc, 3), "consolidate": round(t_cons, 3), "index": round(t_emb, 3),
                        "total": round(time.perf_counter() - t0, 3)}}


def load_memory_store(run, profile_id: str) -> MemoryStore:
    """``memory/<profile>/store.json`` of a run or a watcher store (what ``filegram mcp`` serves).

    Raises:
        StorageError: no such file (names it)."""
    return MemoryStore.from_json(run.read_bytes(f"memory/{profile_id}/store.json"))
