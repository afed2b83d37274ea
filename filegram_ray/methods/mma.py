"""MMA — multimodal memory with confidence-weighted retrieval (reference §8.2, MMA row).

Mechanism (follows reference §8.2 exactly; no LLM):

* **Items.** Each trajectory is cut into chunks of :data:`CHUNK_EVENTS` (20) events rendered as narrative, plus
  one statistics item per trajectory (tag ``summary``). Each item carries a source tag and its credibility
  ``s`` (:data:`CREDIBILITY`): file_operation 0.95, content_detail 0.85 (the chunk holds a write or edit with
  content), search_pattern 0.80, structural 0.75, summary 0.60, default 0.60.
* **Time.** ``t = 0.5 ** (age / 200)`` with ``age`` = number of items stored after it (:data:`HALF_LIFE_ITEMS`).
* **Consensus.** Neighbours = the top-5 items by cosine with similarity > 0.3 (:data:`NEIGHBOURS`,
  :data:`NEIGHBOUR_MIN_SIM`); ``c = Σ w·conf_n·sim / Σ w`` with ``w = max(0, sim)``, clipped to [−1, 1]
  (0 without neighbours).
* **Confidence.** ``conf = 0.4·s + 0.3·t + 0.3·c`` clipped to [0, 1]; two passes starting from 0.5 for every item.
* **Query.** The 3×top_k items by cosine are reranked by ``0.6·sim + 0.4·conf``; the top 8 (:data:`TOP_K`) are
  shown with their confidence as 500-character excerpts (:data:`DISPLAY_CHARS`).

What differs: the paper embeds with Cohere ``embed-v4.0``; we use the packaged all-MiniLM-L6-v2 (384-D). The
tag of a chunk is not published; ours is chosen by rule (:func:`source_tag`). Upstream's ``summary`` items come
from ``summary.json``, which is generator output and hidden here, so ours are statistics computed from the events
(:func:`~filegram_ray.methods.baselines.extractive_summary`). The paper counts MMA among the methods with native
non-text ingestion (‡); the released adapter and ours ingest text only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import cosine_matrix, embed_texts
from filegram_ray.methods.trajectory import TrajectoryView, events_to_narrative

__all__ = ["CREDIBILITY", "MMA", "mma_confidences", "source_tag"]

#: Events per chunk, items returned, excerpt length (reference §8.2 MMA: ``chunk_size`` 20, ``top_k`` 8, 500 chars).
CHUNK_EVENTS = 20
TOP_K = 8
DISPLAY_CHARS = 500
#: Source tag → credibility ``s`` (reference §8.2 MMA).
CREDIBILITY = {"file_operation": 0.95, "content_detail": 0.85, "search_pattern": 0.80, "structural": 0.75,
               "summary": 0.60, "default": 0.60}
#: Time half-life in items, neighbour count and minimum neighbour similarity (reference §8.2 MMA).
HALF_LIFE_ITEMS = 200.0
NEIGHBOURS = 5
NEIGHBOUR_MIN_SIM = 0.3
#: Confidence weights (credibility, time, consensus), passes, start value (reference §8.2 MMA).
W_CRED, W_TIME, W_CONS = 0.4, 0.3, 0.3
PASSES = 2
START_CONF = 0.5
#: Query-time rerank: candidates = 3 × top_k; score = 0.6·sim + 0.4·conf (reference §8.2 MMA).
CANDIDATE_FACTOR = 3
W_SIM, W_CONF = 0.6, 0.4

_STRUCTURAL = {"dir_create", "file_move", "file_rename"}
_SEARCH = {"file_search", "file_browse"}


def source_tag(events: Sequence[dict[str, Any]]) -> str:
    """Source tag of a chunk (ours; the rule is not published): ``content_detail`` when it holds a write or an
    edit with resolved content; else ``search_pattern`` when searches/listings are at least half of it, else
    ``structural`` when directory creation / moves / renames are; else ``file_operation`` (reads, copies,
    deletions, context switches); ``default`` for an empty chunk."""
    if not events:
        return "default"
    types = Counter(e.get("event_type") for e in events)
    if any(e.get("event_type") in ("file_write", "file_edit") and (
            e.get("_resolved_content") or e.get("_resolved_diff") or e.get("_resolved_content_new"))
           for e in events):
        return "content_detail"
    n = len(events)
    if sum(types[t] for t in _SEARCH) * 2 >= n:
        return "search_pattern"
    if sum(types[t] for t in _STRUCTURAL) * 2 >= n:
        return "structural"
    return "file_operation"


def mma_confidences(tags: Sequence[str], vectors: np.ndarray, passes: int = PASSES) -> np.ndarray:
    """Confidence of each item (reference §8.2 MMA), in storage order.

    Args:
        tags: source tag per item (keys of :data:`CREDIBILITY`; unknown → ``default``).
        vectors: (n, d) unit rows, one per item.
        passes: refinement passes, each from the previous pass's confidences (start 0.5).

    Returns:
        float64 array of shape (n,), values in [0, 1].
    """
    n = len(tags)
    if n == 0:
        return np.zeros(0)
    s = np.array([CREDIBILITY.get(t, CREDIBILITY["default"]) for t in tags], dtype=np.float64)
    age = np.arange(n - 1, -1, -1, dtype=np.float64)  # items stored after each one
    t = 0.5 ** (age / HALF_LIFE_ITEMS)
    sims = cosine_matrix(vectors, vectors).astype(np.float64)
    np.fill_diagonal(sims, -np.inf)
    k = min(NEIGHBOURS, n - 1)
    neigh = np.argsort(-sims, axis=1, kind="stable")[:, :k] if k > 0 else np.zeros((n, 0), dtype=int)
    conf = np.full(n, START_CONF)
    for _ in range(passes):
        c = np.zeros(n)
        for i in range(n):
            ids = [j for j in neigh[i] if sims[i, j] > NEIGHBOUR_MIN_SIM]
            if not ids:
                continue
            sim = sims[i, ids]
            w = np.maximum(0.0, sim)
            c[i] = float(np.clip((w * conf[ids] * sim).sum() / w.sum(), -1.0, 1.0)) if w.sum() > 0 else 0.0
        conf = np.clip(W_CRED * s + W_TIME * t + W_CONS * c, 0.0, 1.0)
    return conf


@dataclass
class _MMAState:
    texts: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None
    conf: np.ndarray | None = None


@register("mma")
class MMA(MemoryMethod):
    """Chunks of 20 events + per-session statistics, each with a credibility/time/consensus confidence; queries
    rerank 3×top_k cosine candidates by 0.6·sim + 0.4·conf and show the top 8 (reference §8.2, no LLM).

    Options:
        chunk_events, top_k, display_chars: override the reference constants.
    """

    name, display = "mma", "MMA"
    options_schema = {"chunk_events": int, "top_k": int, "display_chars": int}

    def mode(self, llm: bool) -> str:  # noqa: ARG002 - the same with and without an LLM
        return f"own code of §8.2 (no LLM); {self.embedder_label()} embeddings; text only"

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def _items(self, trajectories: Sequence[TrajectoryView]) -> tuple[list[str], list[str]]:
        """``(texts, source tags)`` of the stored items: each trajectory's chunks, then its summary item."""
        from filegram_ray.methods.baselines import extractive_summary

        size = int(self.options.get("chunk_events", CHUNK_EVENTS))
        texts, tags = [], []
        for v in trajectories:
            for k, start in enumerate(range(0, len(v.events), size)):
                evs = v.events[start:start + size]
                tags.append(source_tag(evs))
                texts.append(f"[{v.label} | Task {v.task_id} | chunk {k + 1}]\n"
                             f"{events_to_narrative(evs, start=start + 1)}")
            tags.append("summary")
            texts.append(f"[{v.label} | Task {v.task_id} | summary]\n{extractive_summary(v)}")
        return texts, tags

    def embedding_texts(self, trajectories: Sequence[TrajectoryView]) -> list[str]:
        return self._items(trajectories)[0]

    def query_embedding_texts(self, query: str) -> list[str]:
        return [query or ""]

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        texts, tags = self._items(trajectories)
        vecs = embed_texts(self._embedder(), texts)
        return _MMAState(texts, tags, vecs, mma_confidences(tags, vecs))

    def retrieve(self, state: Any, query: str) -> Context:
        stored = sum(approx_tokens(t) for t in state.texts)
        if not state.texts:
            return Context("", stored, 0)
        top_k = int(self.options.get("top_k", TOP_K))
        show = int(self.options.get("display_chars", DISPLAY_CHARS))
        q = embed_texts(self._embedder(), [query or ""])
        sims = cosine_matrix(q, state.vectors)[0].astype(np.float64)
        cand = np.argsort(-sims, kind="stable")[:CANDIDATE_FACTOR * top_k]
        score = W_SIM * sims[cand] + W_CONF * state.conf[cand]
        best = cand[np.argsort(-score, kind="stable")[:top_k]]
        parts = [f"(confidence {state.conf[i]:.2f}, {state.tags[i]}) {state.texts[i][:show]}" for i in best]
        text = "\n\n".join(parts)
        return Context(text, stored, approx_tokens(text))
