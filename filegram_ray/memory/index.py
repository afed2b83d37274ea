"""FAISS indices per profile (inner product over normalised vectors = cosine): content chunks and episode
narratives, stored in the run directory as ``indices/<profile_id>/{chunks,episodes}.faiss`` (``faiss.serialize_index``
bytes) with ``{chunks,episodes}.json`` metadata (one record per vector, same order) and ``embedder.json`` — the
identity of the embedder that made the vectors (:func:`filegram_ray.memory.embed.embedder_identity`: model, weights
digest, dimension, pooling, max length, normalisation, how long texts are read, and the dtype — ``fp32``/``bf16``
with its detection, :func:`filegram_ray.memory.embed.embed_dtype`). The dtype is recorded, not compared: a bf16
query against an fp32 index (cosine ≥ 0.999 between the two) is accepted.

A query from another embedder is refused before any search (:func:`check_embedder`, BR-11): vectors of two models
share no space, and a same-width foreign query would otherwise return arbitrary neighbours without a warning.

A text longer than the embedder's window is indexed as one row per window (:func:`window_rows`, case BR2-18): the
mean of its windows' vectors changes when its tail changes but still ranks a fact in the tail below an unrelated
short text; each window as its own row lets the tail be found, and a search returns the text once, scored by its
best window (rows of one text share ``_of``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "EmbedderMismatchError",
    "ProfileIndices",
    "VectorIndex",
    "build_index",
    "check_embedder",
    "chunk_texts",
    "episode_texts",
    "load_indices",
    "save_indices",
    "window_rows",
]

#: identity fields that must agree between an index and a query embedder (``weights`` stands in for ``model``
#: when both sides have it: the same weights under two folder names are the same model)
_IDENTITY_FIELDS = ("model", "dim", "pooling", "max_length", "normalize")


class EmbedderMismatchError(UserError):
    """A query embedder differs from the one an index was built with; the message names both."""


def _describe(ident: dict[str, Any] | None) -> str:
    if not ident:
        return "unknown embedder"
    return (f"{ident.get('model')} (dim {ident.get('dim')}, pooling {ident.get('pooling')}, "
            f"max length {ident.get('max_length')}, normalise {ident.get('normalize')})")


def check_embedder(index_identity: dict[str, Any] | None, embedder: Any, *, where: str = "index") -> None:
    """Refuse ``embedder`` for an index built by ``index_identity``.

    An index without a recorded identity (built in memory from bare vectors, or written before identities were
    recorded — :func:`load_indices` warns about those) is checked on its width only, at search time.

    Raises:
        EmbedderMismatchError: a field of :data:`_IDENTITY_FIELDS` differs (``model`` is compared through the
            weights digest when both sides have one).
    """
    from filegram_ray.memory.embed import embedder_identity

    if embedder is None or not index_identity:
        return
    query = embedder_identity(embedder)
    diffs = []
    for f in _IDENTITY_FIELDS:
        a, b = index_identity.get(f), query.get(f)
        if f == "model" and index_identity.get("weights") and query.get("weights"):
            a, b = index_identity["weights"], query["weights"]
            f = "weights"
        if f in ("pooling", "max_length", "normalize") and (a is None or b is None):
            continue  # a foreign encoder that does not say: its model name already differs
        if a != b:
            diffs.append(f"{f} {a!r} vs {b!r}")
    if diffs:
        raise EmbedderMismatchError(
            f"{where} was built with {_describe(index_identity)} but the query embedder is {_describe(query)} "
            f"({'; '.join(diffs)}); query with the embedder the index was built with, or re-encode the run")


@dataclass
class VectorIndex:
    """A FAISS ``IndexFlatIP``, the metadata record of each vector and the identity of the embedder behind them."""

    index: Any
    meta: list[dict[str, Any]] = field(default_factory=list)
    embedder: dict[str, Any] | None = None

    @property
    def dim(self) -> int:
        return int(self.index.d) if self.index is not None else 0

    def search(self, q: np.ndarray, k: int, *, distinct: str | None = None) -> list[tuple[float, dict[str, Any]]]:
        """Top-``k`` (similarity, metadata) for a (1, d) query, best first.

        Args:
            q: query vector, shape (d,) or (1, d).
            k: number of hits.
            distinct: a metadata field (e.g. ``"text"``); hits whose field is the same text (compared with
                whitespace collapsed and case folded) are collapsed into the best-ranked one, whose record gets
                ``copies`` (how many vectors carried that text) — so duplicates never fill several slots (BR-30).

        Raises:
            ValueError: the query's width differs from the index's.
        """
        if self.index is None or self.index.ntotal == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(q, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.index.d:
            raise EmbedderMismatchError(f"query vector has {q.shape[1]} dimensions but the index holds "
                                        f"{self.index.d}-dimensional vectors ({_describe(self.embedder)})")
        windowed = any("_of" in m for m in self.meta)
        if distinct is None and not windowed:
            sims, ids = self.index.search(q, min(k, self.index.ntotal))
            return [(float(s), self.meta[int(i)]) for s, i in zip(sims[0], ids[0], strict=True) if i >= 0]
        n = self.index.ntotal
        want = min(n, max(4 * k, k + 8))
        while True:
            sims, ids = self.index.search(q, want)
            hits: list[tuple[float, dict[str, Any]]] = []
            slot: dict[str, int] = {}
            texts_seen: set[int] = set()  # windows of one long text: its best window stands for it
            for s, i in zip(sims[0], ids[0], strict=True):
                if i < 0:
                    continue
                rec = self.meta[int(i)]
                if "_of" in rec:
                    if rec["_of"] in texts_seen:
                        continue
                    texts_seen.add(rec["_of"])
                    rec = {key: v for key, v in rec.items() if key != "_of"}
                if distinct is None:
                    hits.append((float(s), rec))
                    continue
                key = _text_key(rec.get(distinct))
                if key in slot:
                    hits[slot[key]][1]["copies"] += 1
                    continue
                slot[key] = len(hits)
                hits.append((float(s), {**rec, "copies": 1}))
            if len(hits) >= k or want >= n:
                return hits[:k]
            want = min(n, want * 4)


def _text_key(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value or "")).strip().casefold()


@dataclass
class ProfileIndices:
    chunks: VectorIndex
    episodes: VectorIndex

    def check_embedder(self, embedder: Any, where: str = "index") -> None:
        """:func:`check_embedder` against both indices (they are built by one embedder)."""
        for name, vi in (("chunks", self.chunks), ("episodes", self.episodes)):
            check_embedder(vi.embedder, embedder, where=f"{where} ({name})")


def build_index(vectors: np.ndarray, meta: list[dict[str, Any]], embedder: Any = None) -> VectorIndex:
    """IndexFlatIP over float32 (N, d) ``vectors``.

    Args:
        vectors: (N, d) float32, rows L2-normalised.
        meta: one record per row.
        embedder: the embedder that made the vectors (its identity is recorded), or an identity dict.

    Raises:
        ValueError: rows and metadata records differ in number.
    """
    import faiss

    from filegram_ray.memory.embed import embedder_identity

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(vectors) != len(meta):
        raise ValueError(f"build_index: {len(vectors)} vectors but {len(meta)} metadata records")
    ident = None
    if embedder is not None:
        ident = dict(embedder) if isinstance(embedder, dict) else embedder_identity(embedder)
    dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[1] else int((ident or {}).get("dim") or 384)
    idx = faiss.IndexFlatIP(dim)
    if len(vectors):
        idx.add(vectors)
    return VectorIndex(idx, list(meta), ident)


def window_rows(embedder: Any, texts: list[str], meta: list[dict[str, Any]],
                vectors: np.ndarray | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """``(vectors, records)`` for :func:`build_index` with one row per window of a text longer than the embedder's
    window (its records carry ``_of``: the text's position; :meth:`VectorIndex.search` returns the text once, by
    its best window) and one row, the text's own vector, per text that fits (``vectors`` when given, else
    encoded). An embedder without windows (the hashing stand-in) gives one row per text.

    Raises:
        ValueError: ``texts`` and ``meta`` differ in number.
    """
    if len(texts) != len(meta):
        raise ValueError(f"window_rows: {len(texts)} texts but {len(meta)} metadata records")
    windows = getattr(embedder, "windows", None)
    split = [windows(t) if windows is not None else [(t, 1)] for t in texts]
    if all(len(w) == 1 for w in split):
        vecs = embedder.encode(list(texts)) if vectors is None else vectors
        return np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(texts), -1), [dict(m) for m in meta]
    pieces: list[str] = []
    rows: list[dict[str, Any]] = []
    for i, (w, m) in enumerate(zip(split, meta)):
        for piece, _tokens in w:
            pieces.append(piece)
            rows.append({**m, "_of": i} if len(w) > 1 else dict(m))
    return np.ascontiguousarray(embedder.encode(pieces), dtype=np.float32), rows


def chunk_texts(store) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts and metadata of a store's content chunks (in store order)."""
    return [c["text"] for c in store.content_chunks], [dict(c) for c in store.content_chunks]


def episode_texts(store) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts (content, fallback summary — §7.10) and metadata of a store's episodes (in store order)."""
    eps = store.episodes()
    meta = [{k: ep.get(k) for k in ("episode_id", "trajectory_id", "task_id", "start_idx", "end_idx", "event_count",
                                    "title", "summary", "content")} for ep in eps]
    return [ep.get("content") or ep.get("summary") or "" for ep in eps], meta


def save_indices(run, profile_id: str, indices: ProfileIndices) -> list[str]:
    """Write both indices, their metadata and ``embedder.json`` under ``indices/<profile_id>/`` via a RunDir;
    returns the paths. The bytes depend only on the vectors and records (same inputs, same bytes)."""
    import faiss

    out = []
    ident = indices.chunks.embedder or indices.episodes.embedder
    for name, vi in (("chunks", indices.chunks), ("episodes", indices.episodes)):
        base = f"indices/{profile_id}/{name}"
        out.append(run.write_bytes(f"{base}.faiss", faiss.serialize_index(vi.index).tobytes()))
        out.append(run.write_json(f"{base}.json", vi.meta))
    if ident is not None:
        out.append(run.write_json(f"indices/{profile_id}/embedder.json", ident))
    return out


def load_indices(run, profile_id: str, embedder: Any = None) -> ProfileIndices:
    """Read the indices written by :func:`save_indices`.

    Args:
        embedder: when given, checked against the recorded identity before anything is searched.

    Raises:
        StorageError: a file is missing. EmbedderMismatchError: ``embedder`` is not the one the index was built with.
    """
    import faiss

    rel = f"indices/{profile_id}/embedder.json"
    ident = run.read_json(rel) if run.exists(rel) else None
    if ident is None:
        log.warning("%s: indices/%s records no embedder (written before identities were recorded): only the vector "
                    "width of a query is checked; re-encode the run to record it", run.uri, profile_id)
    parts = {}
    for name in ("chunks", "episodes"):
        base = f"indices/{profile_id}/{name}"
        idx = faiss.deserialize_index(np.frombuffer(run.read_bytes(f"{base}.faiss"), dtype=np.uint8))
        parts[name] = VectorIndex(idx, run.read_json(f"{base}.json"), ident)
    out = ProfileIndices(**parts)
    if embedder is not None:
        out.check_embedder(embedder, where=f"{run.uri}: indices/{profile_id}")
    return out
