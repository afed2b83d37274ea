"""Embeddings and FAISS indices through a RunDir."""

from __future__ import annotations

import numpy as np
import pytest

from filegram_ray.memory.embed import Embedder, HashingEmbedder
from filegram_ray.memory.index import ProfileIndices, build_index, load_indices, save_indices
from filegram_ray.storage import RunDir


def test_index_round_trip_through_rundir():
    emb = HashingEmbedder()
    texts = ["river budget report", "travel costs rose", "boats and equipment"]
    v = emb.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32 and np.allclose(np.linalg.norm(v, axis=1), 1.0)
    meta = [{"text": t, "i": i} for i, t in enumerate(texts)]
    run = RunDir("memory://fg-test-index")
    save_indices(run, "p", ProfileIndices(build_index(v, meta), build_index(v[:0], [])))
    back = load_indices(run, "p")
    hits = back.chunks.search(emb.encode_query("travel costs"), 2)
    assert hits[0][1]["i"] == 1 and back.episodes.search(emb.encode_query("x"), 3) == []
    with pytest.raises(ValueError, match="2 vectors but 3 metadata"):
        build_index(v[:2], meta)


@pytest.mark.slow
def test_packaged_minilm_embedder_offline():
    emb = Embedder()
    v = emb.encode(["cat on mat", "kitten on rug", "stock prices"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert float(v[0] @ v[1]) > 0.5 > float(v[0] @ v[2])
