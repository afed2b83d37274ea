"""Helpers shared by the comparison methods (reference §8.2): embedding, LLM JSON calls, word overlap, slicing.

Everything here is mechanism-neutral plumbing; each method module documents its own constants.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from filegram_ray.methods.trajectory import TrajectoryView, event_line

__all__ = [
    "LlmCounter",
    "cosine_matrix",
    "embed_texts",
    "event_text",
    "llm_json",
    "narrative_slices",
    "overlap_ratio",
    "words",
]

_WORD = re.compile(r"[\w\-]+", re.UNICODE)


def words(text: str) -> set[str]:
    """Lower-cased word set of ``text`` (letters, digits, ``_`` and ``-``; any script)."""
    return {w.lower() for w in _WORD.findall(text or "")}


def overlap_ratio(a: str | set[str], b: str | set[str]) -> float:
    """Word overlap = |A ∩ B| / min(|A|, |B|) (the "shared/min size" rule of reference §8.2, MemOS/EverMemOS/
    SimpleMem rows); 0.0 when either side has no words."""
    wa = a if isinstance(a, set) else words(a)
    wb = b if isinstance(b, set) else words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


def event_text(ev: dict[str, Any], max_content_chars: int = 200) -> str:
    """One event as one narrative string (reference §8.1 serialisation, content cut to ``max_content_chars``)."""
    return "\n".join(event_line(ev, max_content_chars))


def narrative_slices(views: Sequence[TrajectoryView], slice_chars: int, max_content_chars: int = 200
                     ) -> list[tuple[str, str]]:
    """Cut each trajectory's narrative into slices of at most ``slice_chars`` characters at event boundaries.

    Returns:
        ``[(task_id, slice_text), …]`` in trajectory order; an event longer than a slice is its own slice.
    """
    out: list[tuple[str, str]] = []
    for v in views:
        cur: list[str] = []
        size = 0
        for n, ev in enumerate(v.events, start=1):
            line = f"{n}. {event_text(ev, max_content_chars)}"
            if cur and size + len(line) + 1 > slice_chars:
                out.append((v.task_id, "\n".join(cur)))
                cur, size = [], 0
            cur.append(line)
            size += len(line) + 1
        if cur:
            out.append((v.task_id, "\n".join(cur)))
    return out


def embed_texts(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """``embedder.encode(texts)`` as a C-contiguous float32 array of shape (n, dim), rows L2-normalised.

    An empty list gives (0, dim) when the embedder exposes ``dim``, else (0, 0).
    """
    if not texts:
        return np.zeros((0, int(getattr(embedder, "dim", 0) or 0)), dtype=np.float32)
    vecs = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.ascontiguousarray(vecs / np.where(norms == 0, 1.0, norms), dtype=np.float32)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarities of unit rows: (n, d) × (m, d) → (n, m)."""
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    return a @ b.T


class LlmCounter:
    """Wraps an ``llm_fn`` and counts calls and prompt tokens per phase (reference §8.1 ``llm_calls_ingest``,
    ``tokens_ingest``: ``len(prompt)//4``)."""

    def __init__(self, llm_fn: Callable[..., str] | None):
        self.llm_fn = llm_fn
        self.calls = 0
        self.tokens = 0

    def __bool__(self) -> bool:
        return self.llm_fn is not None

    def __call__(self, prompt: str, system_prompt: str | None = None, **kw: Any) -> str:
        if self.llm_fn is None:
            raise RuntimeError("no LLM backbone configured")
        self.calls += 1
        self.tokens += len(prompt) // 4
        return self.llm_fn(prompt, system_prompt, **kw)


def llm_json(llm: Callable[..., str], prompt: str, system_prompt: str | None = None, *, key: str | None = None,
             temperature: float = 0.0, max_tokens: int = 1024) -> Any:
    """Call the LLM and parse the first JSON object of its reply (fences and trailing commas tolerated).

    Args:
        key: return ``obj[key]`` (``None`` when missing).

    Returns:
        the parsed object (or the value under ``key``); ``None`` when the reply holds no JSON object. LLM errors
        propagate (the caller decides whether the rule fallback takes over).
    """
    from filegram_ray.llm.parsing import parse_json_object

    obj = parse_json_object(llm(prompt, system_prompt, temperature=temperature, max_tokens=max_tokens) or "")
    if obj is None:
        return None
    return obj.get(key) if key is not None else obj
