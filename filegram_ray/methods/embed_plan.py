"""One embedding plan per evaluation: every text the methods will embed, embedded in one pass before any method
ingests; the methods then read vectors.

A method's ingest embeds its memory texts (chunks, messages, pages, episodes) and its retrieval embeds queries. Left
to themselves, the methods of one evaluation each call the model for their own texts, one context spec at a time.
The plan instead takes the texts every method declares for every context spec of the run
(:meth:`~filegram_ray.methods.base.MemoryMethod.embedding_texts`, :meth:`~filegram_ray.methods.base.MemoryMethod
.query_embedding_texts`), keeps each distinct text once (keyed by :func:`~filegram_ray.memory.embed.text_key`),
drops those the run's vector table already holds, and embeds the rest on the stage contract's actor-pool executor
(:func:`embed_texts`). The vectors go into the run's vector table (:func:`load_vectors`);
the evaluate workers preload it into their embedder (:func:`planned_embedder`), so a method's ``encode`` finds every
vector there. A text a method did not declare is still embedded when it asks (one model call more, same answers).

Same seed, same bytes: the batches are a function of the planned set of texts alone (:func:`batch_plan`: the model's
windows of every planned text, sorted by token count and key, packed in order) — never of the cluster, the
number of workers, or which batches a resumed run still had to do. A batch runs when one of its texts lacks a
vector, and runs whole, so a text gets the bytes of its batch in a fresh and in a resumed run alike. Batched
vectors differ from one-text-at-a-time vectors by rounding only (≈1e-7, case BR2-16: cosine ≥ 1 − 1e-6); the
static embedder's vectors do not depend on batches at all.

The table: ``cache/vectors/<embedder tag>/part-<digest>.parquet`` in the run directory (``key``, ``vector``; rows
sorted by key), one part per group of finished texts, written under a temporary name and renamed — an interrupted
pass keeps what it finished, and a rerun embeds only the rest.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from filegram_ray.memory.embed import text_key

log = logging.getLogger(__name__)

__all__ = ["PlanStats", "TABLE_DIR", "batch_plan", "embed_texts", "embedder_tag", "load_vectors",
           "planned_embedder", "table_keys"]

#: the run directory's vector tables, one folder per embedder (:func:`embedder_tag`)
TABLE_DIR = "cache/vectors"
#: a batch holds at most this many pieces and this many padded tokens (rows × longest piece): 64 windows of
#: MiniLM's 256 tokens, the batch sentence-transformers uses by default
BATCH_ROWS, BATCH_TOKENS = 64, 64 * 256
#: texts per table part (a part is written when this many planned texts have their vectors, and at the end)
PART_TEXTS = 20_000


def embedder_tag(embedder: Any) -> str:
    """``<kind>-<weights digest, 8 hex>-<dtype>`` of an embedder's identity: the table folder of its vectors
    (vectors of two models, or of one model in two dtypes, never mix)."""
    ident = embedder.identity()
    return f"{ident.get('kind') or 'model'}-{str(ident.get('weights') or 'none')[:8]}-{ident.get('dtype') or 'fp32'}"


@dataclass
class PlanStats:
    """What one plan did: ``planned`` distinct texts, ``cached`` already in the table, ``embedded`` now,
    ``pieces`` model windows of the texts embedded now, ``batches`` run of ``batches_planned``, ``seconds``."""

    planned: int = 0
    cached: int = 0
    embedded: int = 0
    pieces: int = 0
    batches: int = 0
    batches_planned: int = 0
    seconds: float = 0.0
    tag: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"planned": self.planned, "cached": self.cached, "embedded": self.embedded, "pieces": self.pieces,
                "batches": self.batches, "batches_planned": self.batches_planned, "seconds": round(self.seconds, 2),
                "table": self.tag, **self.extra}


def batch_plan(lengths: Sequence[int], keys: Sequence[str], max_rows: int = BATCH_ROWS,
               max_tokens: int = BATCH_TOKENS) -> list[list[int]]:
    """Pack pieces into batches: sorted by (token count, key), cut in order whenever a batch would exceed
    ``max_rows`` pieces or ``max_tokens`` padded tokens (its size × its longest piece). The result depends on the
    set of (length, key) pairs only — not on their order, the cluster or the workers.

    Args:
        lengths: token count of each piece. keys: a key per piece (ties of length are broken by it; equal
            pairs are allowed).

    Returns:
        batches of piece indices (into ``lengths``), each non-empty.
    """
    order = sorted(range(len(lengths)), key=lambda j: (int(lengths[j]), keys[j], j))
    batches: list[list[int]] = []
    cur: list[int] = []
    for j in order:
        n = max(1, int(lengths[j]))
        if cur and (len(cur) + 1 > max_rows or (len(cur) + 1) * n > max_tokens):
            batches.append(cur)
            cur = []
        cur.append(j)
    if cur:
        batches.append(cur)
    return batches


# ------------------------------------------------------------------------------------------------ the table


def _part_paths(run, tag: str) -> list[str]:
    """The table's parts (temporary names of unfinished writes left out), in name order."""
    return [f"{TABLE_DIR}/{tag}/{n}" for n in run.listdir(f"{TABLE_DIR}/{tag}")
            if n.startswith("part-") and n.endswith(".parquet")]


def table_keys(run, tag: str) -> set[str]:
    """The keys the run's vector table of ``tag`` holds."""
    keys: set[str] = set()
    for p in _part_paths(run, tag):
        keys.update(run.read_table(p)["key"].to_list())
    return keys


def load_vectors(run, tag: str, dim: int) -> tuple[list[str], np.ndarray]:
    """``(keys, vectors)`` of the run's vector table of ``tag`` (parts in name order; a key in two parts keeps
    the first); ``([], (0, dim))`` without one."""
    keys: list[str] = []
    mats: list[np.ndarray] = []
    seen: set[str] = set()
    for p in _part_paths(run, tag):
        t = run.read_table(p)
        ks = t["key"].to_list()
        vecs = np.frombuffer(b"".join(t["vector"].to_list()), dtype=np.float32).reshape(len(ks), dim)
        keep = [i for i, k in enumerate(ks) if k not in seen]
        seen.update(ks)
        keys.extend(ks[i] for i in keep)
        mats.append(vecs[keep])
    return keys, (np.concatenate(mats) if mats else np.zeros((0, dim), dtype=np.float32))


def _write_part(run, tag: str, keys: list[str], vecs: np.ndarray) -> str:
    """One table part: rows sorted by key (same vectors, same bytes); named by the digest of its keys."""
    import polars as pl

    order = sorted(range(len(keys)), key=lambda i: keys[i])
    ks = [keys[i] for i in order]
    digest = hashlib.sha256("\n".join(ks).encode()).hexdigest()[:16]
    frame = pl.DataFrame({"key": ks, "vector": [np.ascontiguousarray(vecs[i], dtype=np.float32).tobytes()
                                                 for i in order]}, schema={"key": pl.Utf8, "vector": pl.Binary})
    return run.write_table(f"{TABLE_DIR}/{tag}/part-{digest}.parquet", frame)


# -------------------------------------------------------------------------------------------- embedding


class _EmbedBatches:
    """The plan's worker: an embedder per actor; one planned batch (``pieces``: texts that each fit the model's
    window) in, its ``vectors`` (float32 bytes, one forward pass) out."""

    def __init__(self, kind: str, threads: int | None, model_args: dict[str, Any] | None = None):
        from filegram_ray.memory.embed import make_embedder

        self.embedder = make_embedder(kind, threads=threads, **(model_args or {}))

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        return {"batch": int(unit["batch"]), "vectors": self.embedder.forward_batch(list(unit["pieces"])).tobytes()}


def _run_batches(kind: str, todo: list[tuple[int, list[str]]], num_actors: int, num_cpus: float,
                 use_ray: bool, threads: int | None, on_batch: Callable[[int, bytes], None]) -> None:
    """``on_batch(batch id, vectors bytes)`` per batch of ``todo`` as each finishes, in any order, on the stage
    contract's executors (:func:`~filegram_ray.stages.executors.map_units`: an actor pool of ``num_actors``
    embedders, or this process). A batch whose worker failed is left out (its texts stay missing from the table:
    the methods embed them themselves)."""
    from filegram_ray.stages.executors import map_units

    if not todo:
        return

    def on_row(row: dict[str, Any]) -> None:
        if row.get("status") != "ok":
            log.warning("embedding plan: %s failed, its texts are left to the methods: %s", row.get("unit"),
                        row.get("error"))
            return
        on_batch(int(row["batch"]), bytes(row["vectors"]))

    map_units(_EmbedBatches, [{"unit_id": f"batch-{b:06d}", "batch": b, "pieces": list(pieces)} for b, pieces in todo],
              init_kwargs={"kind": kind, "threads": threads}, num_actors=max(1, num_actors),
              num_cpus_per_actor=num_cpus, executor="actor-pool" if use_ray else "serial", stage="embedding plan",
              progress=False, on_result=on_row)


def embed_texts(run, texts: Iterable[str], kind: str, *, num_actors: int = 2, num_cpus: float = 0.5,
                use_ray: bool = True, threads: int | None = None,
                progress: Callable[[str], None] | None = None) -> PlanStats:
    """Embed every text of ``texts`` that the run's vector table for ``kind`` lacks, in one pass, into that table.

    The texts' model windows (:meth:`~filegram_ray.memory.embed.CachedEmbedder.pieces`) are packed by
    :func:`batch_plan` over the whole planned set; each batch with a text still missing runs whole as one forward
    pass (``forward_batch``), on an actor pool of ``num_actors`` embedders (the stage contract's actor-pool executor) (``num_cpus`` each, ``threads``
    intra-op threads: default the node's cores shared among the actors) or in this process (``use_ray=False``);
    each text's vector is the token-weighted mean of its windows' (:meth:`~filegram_ray.memory.embed.CachedEmbedder
    .combine`). Finished texts are written to the table as parts of :data:`PART_TEXTS`.

    Returns:
        :class:`PlanStats` (``tag``: the table folder).

    Raises:
        ValueError: an unknown embedder kind.
    """
    from filegram_ray.memory.embed import default_threads, make_embedder

    t0 = time.perf_counter()
    emb = make_embedder(kind)
    tag = embedder_tag(emb)
    by_key: dict[str, str] = {}
    for t in texts:
        t = t if isinstance(t, str) else str(t)
        by_key.setdefault(text_key(t), t)
    have = table_keys(run, tag)
    missing = {k for k in by_key if k not in have}
    stats = PlanStats(planned=len(by_key), cached=len(by_key) - len(missing), tag=tag)
    if not missing:
        stats.seconds = time.perf_counter() - t0
        return stats
    keys = sorted(by_key)
    pieces, owner = emb.pieces([by_key[k] for k in keys])
    lengths = emb.token_lengths(pieces) if hasattr(emb, "token_lengths") else [len(p) for p in pieces]
    piece_keys = [text_key(p) for p in pieces]
    batches = batch_plan(lengths, piece_keys)
    stats.batches_planned = len(batches)
    # a batch runs whole when it holds a piece of a missing text; its other texts' vectors are not rewritten
    todo = [(b, [pieces[j] for j in part]) for b, part in enumerate(batches)
            if any(keys[owner[j][0]] in missing for j in part)]
    stats.batches = len(todo)
    piece_of = {b: part for b, part in enumerate(batches)}
    pending = {}  # text index → pieces still to come, for missing texts
    for j, (i, _) in enumerate(owner):
        if keys[i] in missing:
            pending[i] = pending.get(i, 0) + 1
    stats.pieces = sum(pending.values())
    pieces_of_text: dict[int, list[int]] = {}
    for j, (i, _) in enumerate(owner):
        if i in pending:
            pieces_of_text.setdefault(i, []).append(j)
    vecs = np.zeros((len(pieces), emb.dim), dtype=np.float32)
    ready: list[int] = []
    n_threads = threads or default_threads(max(1, num_actors) if use_ray else 1)
    done_batches = 0

    def flush(final: bool = False) -> None:
        nonlocal ready
        while ready and (final or len(ready) >= PART_TEXTS):
            part, ready = sorted(ready[:PART_TEXTS]), ready[PART_TEXTS:]
            out = np.zeros((len(part), emb.dim), dtype=np.float32)
            for r, i in enumerate(part):
                js = pieces_of_text[i]
                out[r] = emb.combine(1, vecs[js], [(0, owner[j][1]) for j in js])[0]
            _write_part(run, tag, [keys[i] for i in part], out)
            stats.embedded += len(part)

    def on_batch(b: int, raw: bytes) -> None:
        nonlocal done_batches
        part = piece_of[b]
        vecs[part] = np.frombuffer(raw, dtype=np.float32).reshape(len(part), emb.dim)
        for j in part:
            i = owner[j][0]
            if i in pending:
                pending[i] -= 1
                if pending[i] == 0:
                    ready.append(i)
        done_batches += 1
        flush()
        if progress is not None and (done_batches % 50 == 0 or done_batches == len(todo)):
            progress(f"embedding plan: {done_batches}/{len(todo)} batches, {stats.embedded + len(ready):,}/"
                     f"{len(missing):,} texts, {time.perf_counter() - t0:.0f} s")

    _run_batches(kind, todo, num_actors, num_cpus, use_ray, n_threads, on_batch)
    flush(final=True)
    stats.seconds = time.perf_counter() - t0
    return stats


# ------------------------------------------------------------------------------------------- the workers

_PLANNED: dict[tuple, Any] = {}


def planned_embedder(run, kind: str, cache_dir: str | None = None) -> Any:
    """The embedder of ``kind`` for an evaluate worker, with the run's vector table preloaded
    (:meth:`~filegram_ray.memory.embed.CachedEmbedder.preload`): one per process, run, kind and table state (a
    table that grew since is loaded again). ``cache_dir``: the local per-text cache for texts not in the table.
    A kind with nothing to plan (its class's ``planned`` is False: the static model, ``hashing``) comes without
    the table and without a per-text file cache (a look-up costs less than a file)."""
    from filegram_ray.memory.embed import make_embedder

    if not getattr(make_embedder(kind), "planned", False):
        # nothing planned: a static model (a vector is a look-up; files per text would cost more) or ``hashing``
        return make_embedder(kind)
    emb = make_embedder(kind, cache_dir=cache_dir)
    tag = embedder_tag(emb)
    parts = tuple(_part_paths(run, tag))
    memo_key = (run.uri, kind, cache_dir, parts)
    if memo_key not in _PLANNED:
        _PLANNED.clear()  # one table in memory per process
        keys, vecs = load_vectors(run, tag, emb.dim)
        emb.preload(keys, vecs)
        _PLANNED[memo_key] = emb
    return _PLANNED[memo_key]
