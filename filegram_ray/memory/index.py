"""FAISS indices per profile (inner product over normalised vectors = cosine): content chunks and episode
narratives, stored in the run directory as ``indices/<profile_id>/{chunks,episodes}.faiss`` (``faiss.serialize_index``
bytes) with ``{chunks,episodes}.json`` metadata (one record per vector, same order)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ProfileIndices",
    "VectorIndex",
    "build_index",
    "chunk_texts",
    "episode_texts",
    "load_indices",
    "save_indices",
]


@dataclass
class VectorIndex:
    """A FAISS ``IndexFlatIP`` and the metadata record of each vector."""

    index: Any
    meta: list[dict[str, Any]] = field(default_factory=list)

    def search(self, q: np.ndarray, k: int) -> list[tuple[float, dict[str, Any]]]:
        """Top-``k`` (similarity, metadata) for a (1, d) query, best first."""
        if self.index is None or self.index.ntotal == 0 or k <= 0:
            return []
        sims, ids = self.index.search(np.ascontiguousarray(q, dtype=np.float32).reshape(1, -1),
                                      min(k, self.index.ntotal))
        return [(float(s), self.meta[int(i)]) for s, i in zip(sims[0], ids[0], strict=True) if i >= 0]


@dataclass
class ProfileIndices:
    chunks: VectorIndex
    episodes: VectorIndex


def build_index(vectors: np.ndarray, meta: list[dict[str, Any]]) -> VectorIndex:
    """IndexFlatIP over float32 (N, d) ``vectors``.

    Raises:
        ValueError: rows and metadata records differ in number.
    """
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(vectors) != len(meta):
        raise ValueError(f"build_index: {len(vectors)} vectors but {len(meta)} metadata records")
    dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[1] else 384
    idx = faiss.IndexFlatIP(dim)
    if len(vectors):
        idx.add(vectors)
    return VectorIndex(idx, list(meta))


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
    """Write both indices and their metadata under ``indices/<profile_id>/`` via a RunDir; returns the paths."""
    import faiss

    out = []
    for name, vi in (("chunks", indices.chunks), ("episodes", indices.episodes)):
        base = f"indices/{profile_id}/{name}"
        out.append(run.write_bytes(f"{base}.faiss", faiss.serialize_index(vi.index).tobytes()))
        out.append(run.write_json(f"{base}.json", vi.meta))
    return out


def load_indices(run, profile_id: str) -> ProfileIndices:
    """Read the indices written by :func:`save_indices`.

    Raises:
        StorageError: a file is missing.
    """
    import faiss

    parts = {}
    for name in ("chunks", "episodes"):
        base = f"indices/{profile_id}/{name}"
        idx = faiss.deserialize_index(np.frombuffer(run.read_bytes(f"{base}.faiss"), dtype=np.uint8))
        parts[name] = VectorIndex(idx, run.read_json(f"{base}.json"))
    return ProfileIndices(**parts)
