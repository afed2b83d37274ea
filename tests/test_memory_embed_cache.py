"""The Embedder's per-text vector cache: same vectors, each distinct text computed once, shared via a folder."""

from __future__ import annotations

import numpy as np

from filegram_ray.memory.embed import EMBED_DIM, Embedder


class CountingEmbedder(Embedder):
    """The real cache logic around a cheap deterministic stand-in for the model's forward pass."""

    calls: list[list[str]]

    def _encode_model(self, texts):
        self.__dict__.setdefault("calls", []).append(list(texts))
        out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            rng = np.random.default_rng(int.from_bytes(t.encode()[:8].ljust(8, b"\0"), "little"))
            v = rng.standard_normal(EMBED_DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def test_each_distinct_text_is_computed_once():
    e = CountingEmbedder()
    a = e.encode(["alpha", "beta", "alpha"])
    b = e.encode(["beta", "gamma"])
    assert e.calls == [["alpha", "beta"], ["gamma"]]
    assert np.array_equal(a[0], a[2]) and np.array_equal(a[1], b[0])
    assert (e.hits, e.misses) == (1, 3)  # a repeat inside one batch is computed once, not counted as a hit
    assert a.dtype == np.float32 and a.shape == (3, EMBED_DIM)


def test_cache_folder_is_shared_between_instances(tmp_path):
    first = CountingEmbedder(cache_dir=tmp_path)
    v1 = first.encode(["shared text"])
    second = CountingEmbedder(cache_dir=tmp_path)  # another process in real runs
    v2 = second.encode(["shared text"])
    assert getattr(second, "calls", []) == []  # read from the folder, not recomputed
    assert np.array_equal(v1, v2)
    # a torn file is recomputed, not trusted
    (f,) = list(tmp_path.rglob("*.npy"))
    f.write_bytes(b"garbage")
    third = CountingEmbedder(cache_dir=tmp_path)
    assert np.array_equal(third.encode(["shared text"]), v1)
    assert third.calls == [["shared text"]]


def test_memory_cache_is_bounded():
    e = CountingEmbedder(cache_size=2)
    e.encode(["a", "b", "c"])
    assert len(e._cache) == 2
