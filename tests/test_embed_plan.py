"""The evaluate stage's embedding plan: every text the methods embed is declared, embedded once in batches that
depend on the set of texts alone, and read back by the methods without a model call; the static MiniLM."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from evaluate_fixtures import make_run

from filegram_ray.evaluate.items import load_items, retrieval_query
from filegram_ray.evaluate.plan import plan_units, spec_units
from filegram_ray.evaluate.worker import build_unit_views
from filegram_ray.memory.embed import Embedder, make_embedder, text_key
from filegram_ray.methods import embed_plan as EP
from filegram_ray.methods import make_method

EMBEDDING_METHODS = ["naive_rag", "visrag", "mma", "mem0", "evermemos", "filegramos", "filegramos_no_semantic"]


class Recorder:
    """``encode`` → seeded stand-in unit vectors; keeps every text it was handed."""

    dim = 384
    label = "recorder"

    def __init__(self):
        self.texts: list[str] = []

    def encode(self, texts):
        texts = [str(t) for t in texts]
        self.texts.extend(texts)
        out = np.stack([np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16))
                        .standard_normal(self.dim) for t in texts]) if texts else np.zeros((0, self.dim))
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def encode_query(self, text):
        return self.encode([text])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("plan_run"))


def _specs(run, methods):
    items = load_items(run)
    plan = plan_units(items, methods, "strip")
    return spec_units(plan, {u["unit_id"] for us in plan.values() for u in us})


@pytest.mark.parametrize("name", EMBEDDING_METHODS)
def test_every_text_a_method_embeds_is_declared(run, name):
    """Ingest and retrieval hand the embedder only texts the method declared for the plan (embedding_texts,
    query_embedding_texts), for every context kind of the fixture bank."""
    for su in _specs(run, [name]):
        views = build_unit_views(run, su)
        declared = set(make_method(name, embedder=Recorder()).embedding_texts(views))  # same embedder kind: same windows
        rec = Recorder()
        method = make_method(name, embedder=rec)
        state = method.ingest(views)
        for u in su["units"]:
            for it in u["items"]:
                q = retrieval_query(it)
                declared |= set(method.query_embedding_texts(q))
                method.retrieve(state, q)
        assert set(rec.texts) <= declared, (name, sorted(set(rec.texts) - declared)[:3])
        if name != "filegramos_no_semantic" and views:
            assert rec.texts, name  # the method does embed: the check above is not vacuous


def test_batch_plan_depends_on_the_set_alone():
    rng = random.Random(5)
    lengths = [rng.randint(1, 256) for _ in range(700)]
    keys = [f"k{rng.randint(0, 10**9)}" for _ in lengths]
    pairs = list(zip(lengths, keys))
    a = EP.batch_plan(lengths, keys)
    rng.shuffle(pairs)
    b = EP.batch_plan([p[0] for p in pairs], [p[1] for p in pairs])
    as_set = lambda bs, ls, ks: [[(ls[j], ks[j]) for j in x] for x in bs]  # noqa: E731
    assert as_set(a, lengths, keys) == as_set(b, [p[0] for p in pairs], [p[1] for p in pairs])
    assert sorted(j for x in a for j in x) == list(range(700))
    assert all(len(x) <= EP.BATCH_ROWS and len(x) * max(lengths[j] for j in x) <= EP.BATCH_TOKENS for x in a)


TEXTS = [f"The user keeps {w} reports in a dated folder tree, revising them {n} times." for w, n in
         zip(["weekly", "monthly", "budget", "travel", "audit", "draft", "final", "spare"], range(8))] + \
        ["A much longer narrative of file events. " * 60, "短文本", "Read file: notes/plan.md (lines [1, 40])"]


def test_plan_vectors_match_alone_vectors_and_any_batching_gives_the_same_neighbours(tmp_path, monkeypatch):
    """BR2-16 within the plan: batched vectors are within cosine 1e-6 of one-text-at-a-time vectors, two batchings
    rank every query's neighbours alike, and a second plan embeds nothing."""
    from filegram_ray.storage import RunDir

    alone = Embedder(cache_size=0).encode(TEXTS)
    run = RunDir(str(tmp_path / "a"))
    stats = EP.embed_texts(run, TEXTS, "minilm", use_ray=False)
    assert (stats.planned, stats.embedded, stats.cached) == (len(TEXTS), len(TEXTS), 0)
    keys, vecs = EP.load_vectors(run, stats.tag, 384)
    got = vecs[[keys.index(text_key(t)) for t in TEXTS]]
    assert float((got * alone).sum(axis=1).min()) > 1 - 1e-6
    monkeypatch.setattr(EP, "BATCH_ROWS", 2)
    other = RunDir(str(tmp_path / "b"))
    EP.embed_texts(other, list(reversed(TEXTS)), "minilm", use_ray=False)
    k2, v2 = EP.load_vectors(other, stats.tag, 384)
    got2 = v2[[k2.index(text_key(t)) for t in TEXTS]]
    top = lambda m: np.argsort(-(m @ m.T), axis=1, kind="stable")[:, :5]  # noqa: E731
    assert (top(got) == top(got2)).all()
    again = EP.embed_texts(run, TEXTS, "minilm", use_ray=False)
    assert (again.embedded, again.cached, again.batches) == (0, len(TEXTS), 0)


def test_an_interrupted_plan_resumes_to_the_same_bytes(tmp_path, monkeypatch):
    """Same set of texts, same bytes: a pass cut after its first part and resumed writes what a whole pass
    writes."""
    from filegram_ray.storage import RunDir

    monkeypatch.setattr(EP, "BATCH_ROWS", 3)
    whole = RunDir(str(tmp_path / "whole"))
    tag = EP.embed_texts(whole, TEXTS, "minilm", use_ray=False).tag
    monkeypatch.setattr(EP, "PART_TEXTS", 4)
    cut = RunDir(str(tmp_path / "cut"))
    real = EP._write_part
    calls = []

    def first_part_then_stop(*a, **k):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(EP, "_write_part", first_part_then_stop)
    with pytest.raises(KeyboardInterrupt):
        EP.embed_texts(cut, TEXTS, "minilm", use_ray=False)
    monkeypatch.setattr(EP, "_write_part", real)
    resumed = EP.embed_texts(cut, TEXTS, "minilm", use_ray=False)
    assert 0 < resumed.cached < len(TEXTS) and resumed.embedded == len(TEXTS) - resumed.cached
    a = dict(zip(*EP.load_vectors(whole, tag, 384)))
    b = dict(zip(*EP.load_vectors(cut, tag, 384)))
    assert a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)


def test_planned_embedder_reads_vectors_without_calling_the_model(tmp_path):
    from filegram_ray.storage import RunDir

    run = RunDir(str(tmp_path))
    EP.embed_texts(run, TEXTS, "minilm", use_ray=False)
    emb = EP.planned_embedder(run, "minilm")
    emb.encode(TEXTS)
    assert emb.model_calls == 0 and emb.misses == 0 and emb._model is None  # never loaded
    emb.encode(["a text the plan did not hold"])  # still answered, by the model
    assert emb.misses == 1 and emb.model_calls == 1


def test_static_minilm_vectors_are_independent_of_batch_mates_and_read_long_texts_whole():
    emb = make_embedder("minilm-static")
    alone = [emb.encode([t])[0].tobytes() for t in TEXTS]
    emb2 = make_embedder("minilm-static")
    together = emb2.forward_batch(TEXTS)
    assert [v.tobytes() for v in together] == alone
    long = TEXTS[8] + " SECRET tail about Porto archives."
    assert emb.encode([long])[0].tobytes() != emb.encode([TEXTS[8]])[0].tobytes()
    assert abs(float(np.linalg.norm(together, axis=1).min()) - 1) < 1e-5
    ident = emb.identity()
    assert ident["kind"] == "minilm-static" and ident["max_length"] is None and emb.label.startswith("static")


def test_evaluate_plans_the_vectors_and_answers_as_without_a_plan(tmp_path, monkeypatch):
    """The evaluate stage embeds the methods' texts in one planned pass (run.json records it) and every method
    shows the same contexts and answers as when each embeds its own texts one at a time."""
    from filegram_ray.config import load_config
    from filegram_ray.evaluate import embedding
    from filegram_ray.evaluate.stage import run_evaluate

    def evaluate(root):
        make_run(root)
        cfg = load_config(overrides={"run_dir": str(root), "evaluate": {
            "methods": ["naive_rag", "mma", "visrag"], "executor": "serial", "plots": False, "validity": False,
            "sample_per_sub_task": None, "embedder": "minilm"}})
        info = run_evaluate(cfg)
        import polars as pl

        res = pl.read_parquet(root / "results" / "results.parquet").sort(["method", "question_id"])
        return info, res.select("method", "question_id", "choice", "answer_text")

    planned, with_plan = evaluate(tmp_path / "planned")
    assert planned["embed_plan"]["planned"] > 0 and planned["embed_plan"]["embedded"] > 0
    assert planned["embedder"]["kind"] == "minilm" and "MiniLM" in planned["method_modes"]["naive_rag"]
    monkeypatch.setattr(embedding, "prepare_vectors", lambda *a, **k: {"planned": 0})
    alone, without = evaluate(tmp_path / "alone")
    assert alone["embed_plan"] == {"planned": 0}
    assert with_plan.to_dicts() == without.to_dicts()
