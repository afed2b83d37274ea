"""Issue 31 items 1–2: whole texts (BR2-18), vectors independent of batch mates (BR2-16), the embedder dtype chosen
from the CPU (bf16 only with AMX) and recorded in every index."""

from __future__ import annotations

import numpy as np
import pytest

from filegram_ray.memory import constants as C
from filegram_ray.memory.consolidate import ConsolidateConfig, content_chunks
from filegram_ray.memory.embed import (
    DTYPE_ENV,
    Embedder,
    embed_dtype,
    make_embedder,
    minilm_tokenizer,
    split_by_tokens,
    token_spans,
)
from filegram_ray.memory.index import build_index

EN = ("Quarterly budget review for the Lisbon office. Travel costs rose while rent stayed flat. " * 20)[:760] + \
    " SECRET-FACT: the archive moved to Porto."
ZH = ("本季度里斯本办公室的预算审查显示差旅费用上升而租金持平。" * 40)[:770] + "关键事实：档案已经搬到波尔图。"
DIFF = ("@@ -1,4 +1,4 @@\n-| 2024-03-05 | 1,200.00 | EUR |\n+| 2024-03-05 | 1,250.00 | EUR |\n" * 12)[:760] + \
    "\n+ARCHIVE=/porto/2024"


def _ntok(text: str) -> int:
    return len(minilm_tokenizer().encode(text, add_special_tokens=True).ids)


@pytest.mark.parametrize("text", [EN, ZH, DIFF, "word " * 700, "x" * 3000, "短" * 1000 + " tail", ""])
def test_br2_18_token_spans_cover_the_text_and_fit_the_model(text):
    """BR2-18: spans are consecutive, cover every character, and each tokenises to ≤ 256 tokens incl. specials."""
    spans = token_spans(text, 256, minilm_tokenizer())
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a == b for (_, a), (b, _) in zip(spans, spans[1:]))
    assert all(_ntok(text[a:b]) <= 256 for a, b in spans)
    assert "".join(split_by_tokens(text, 256)) == text
    if _ntok(text) > 256:
        assert len(spans) > 1


def test_br2_18_the_tail_of_a_long_text_changes_its_vector():
    """BR2-18: an 800-char Chinese chunk (≈790 tokens) and a diff (≈460) are read whole: replacing their last
    quarter changes the vector (before: byte-identical, the tail was never embedded)."""
    emb = Embedder(cache_size=0)
    for chunk in (ZH[:800], DIFF[:800]):
        assert _ntok(chunk) > emb.identity()["max_length"]
        cut = int(len(chunk) * 0.75)
        altered = chunk[:cut] + "Z" * (len(chunk) - cut)
        a, b = emb.encode([chunk, altered])
        assert a.tobytes() != b.tobytes() and abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    assert emb.identity()["long_text"].startswith("token-weighted mean")


def _engram(text: str, diff: str):
    from types import SimpleNamespace

    return SimpleNamespace(trajectory_id="p/T-01", task_id="T-01", importance_score=1.0, semantic={
        "created_files": [{"file_type": "md", "full_content": text, "content_preview": text[:100],
                           "path": "report.md"}],
        "edit_chains": [{"full_diff": diff, "path": "ledger.md"}]})


def test_br2_18_content_chunks_are_cut_to_the_embedder_window_and_the_tail_fact_is_found():
    """BR2-18 on the FileGramOS path: content chunks over 256 tokens are cut by the tokenizer into pieces that fit
    (token counts recorded, pieces of one 800-char slice counted once against chunk_max), and the chunk holding
    a fact in the tail of a Chinese slice ranks first for a question about it (e5-small, the embedder `auto`
    picks for Chinese) — before the cut the 800-char chunk scored below an unrelated one."""
    cfg = ConsolidateConfig()
    assert cfg.chunk_tokens == C.CONTENT_CHUNK_TOKENS == 256
    chunks = content_chunks([_engram(ZH[:800] + EN[:800], DIFF[:800])], {}, cfg)
    assert all(c["tokens"] == _ntok(c["text"]) <= 256 for c in chunks)
    zh = [c for c in chunks if c["path"] == "report.md" and "piece" in c]  # the first 800-char slice, cut
    assert len(zh) >= 3 and [c["piece"] for c in zh] == list(range(1, len(zh) + 1))
    assert "".join(c["text"] for c in zh) == (ZH[:800] + EN[:800])[:800]  # every character kept
    assert any(c["chunk_type"] == "edit_diff" and c.get("pieces") == 2 for c in chunks)
    assert [c["chunk_id"] for c in chunks] == list(range(len(chunks)))
    one_slice = content_chunks([_engram(ZH[:800], DIFF[:800])], {}, cfg.model_copy(update={"chunk_max": 1}))
    assert {c["path"] for c in one_slice} == {"report.md"} and len(one_slice) >= 3
    whole = content_chunks([_engram(ZH[:800], DIFF[:800])], {}, cfg.model_copy(update={"chunk_tokens": 0}))
    assert whole[0]["text"] == ZH[:800] and whole[0]["tokens"] == 0

    e5 = make_embedder("e5-small")
    texts = [c["text"] for c in zh] + ["会议记录和日程安排"]
    idx = build_index(e5.encode(texts), [{"text": t} for t in texts], e5)
    best = idx.search(e5.encode_query("档案搬到哪里了？波尔图"), 1)[0][1]["text"]
    assert "波尔图" in best


def _same_length_mates(emb: Embedder, target: str, n: int) -> list[str]:
    length = emb.token_lengths([target])[0]
    words = sorted(w for w in emb.model.tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 3)
    mates = []
    for w in words:
        t = target.replace("weekly", w)
        if t != target and emb.token_lengths([t])[0] == length:
            mates.append(t)
            if len(mates) >= n:
                break
    return mates


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_br2_16_a_vector_does_not_depend_on_its_batch_mates(dtype):
    """BR2-16: one text alone and in calls with 1–40 texts of exactly its token length (batch sizes 64 and 8) gets
    the same bytes, in fp32 and in bf16 (forced here, whatever the CPU)."""
    emb = Embedder(cache_size=0, batch_size=64, dtype=dtype)
    target = "The user keeps weekly budget reports in a dated folder tree."
    mates = _same_length_mates(emb, target, 40)
    assert len(mates) == 40
    alone = emb.encode([target])[0].tobytes()
    for n in (1, 7, 40):
        assert emb.encode([target] + mates[:n])[0].tobytes() == alone
    small = Embedder(cache_size=0, batch_size=8, dtype=dtype)
    assert small.encode(mates[:20] + [target])[-1].tobytes() == alone
    # nor on a long text (read in windows, averaged) sharing the call
    assert emb.encode([ZH[:800], target, DIFF[:800]])[1].tobytes() == alone
    assert emb.encode([ZH[:800]]).tobytes() == emb.encode([target, ZH[:800]])[1].tobytes()


def test_embed_dtype_is_bf16_only_with_amx_and_can_be_forced(tmp_path, monkeypatch):
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    amx, avx = tmp_path / "amx", tmp_path / "avx"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n")
    avx.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16\n")
    on = embed_dtype(cpuinfo=str(amx))
    assert on["dtype"] == "bf16" and on["cpu"]["amx_bf16"] and on["source"] == "default"
    off = embed_dtype(cpuinfo=str(avx))
    assert off["dtype"] == "fp32" and "avx512_bf16 alone" in off["why"]
    assert embed_dtype(cpuinfo=str(tmp_path / "missing"))["dtype"] == "fp32"
    monkeypatch.setenv(DTYPE_ENV, "fp32")
    forced = embed_dtype(cpuinfo=str(amx))
    assert forced["dtype"] == "fp32" and forced["source"] == DTYPE_ENV
    monkeypatch.setenv(DTYPE_ENV, "half")
    with pytest.raises(ValueError, match=f"environment variable {DTYPE_ENV}: 'half' is not one of"):
        embed_dtype()


def test_bf16_vectors_are_close_to_fp32_stable_and_recorded_in_the_index(tmp_path):
    """bf16 (autocast) vectors: cosine to fp32 ≥ 0.999, the same bytes on a second run, their own cache folder,
    and the dtype with its detection in the index's embedder identity."""
    texts = ["cat on mat", "quarterly budget of the river project " * 10, DIFF[:800], ZH[:300]]
    fp32 = Embedder(cache_size=0, dtype="fp32")
    bf16 = Embedder(cache_size=0, dtype="bf16", cache_dir=tmp_path)
    a, b = fp32.encode(texts), bf16.encode(texts)
    assert float((a * b).sum(axis=1).min()) > 0.999
    assert Embedder(cache_size=0, dtype="bf16").encode(texts).tobytes() == b.tobytes()
    assert {p.name for p in tmp_path.iterdir()} == {f"{bf16.identity()['weights'][:8]}-bf16-whole"}
    ident = build_index(b, [{"text": t} for t in texts], bf16).embedder
    assert ident["dtype"] == "bf16" and ident["dtype_detection"]["source"] == "argument"
    assert build_index(a, [{"text": t} for t in texts], fp32).embedder["dtype"] == "fp32"


def test_encode_stage_records_the_embed_dtype_in_run_json(tmp_path, monkeypatch):
    """run.json's encode record says which dtype this machine's embedder uses and why (FILEGRAM_EMBED_DTYPE
    forces one), and each index's embedder.json carries the dtype its vectors were made in."""
    from test_memory_stage import make_run

    from filegram_ray.config import load_config
    from filegram_ray.memory.stage import run_encode
    from filegram_ray.storage import RunDir

    monkeypatch.setenv(DTYPE_ENV, "fp32")
    root = make_run(tmp_path / "run", bad=None)
    run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=minilm", "profiles=[pa_reader]",
                                  "tasks=[T-01]"]), executor="serial")
    run = RunDir(root)
    rec = run.read_json("run.json")["stages"]["encode"]["embed_dtype"]
    assert rec["dtype"] == "fp32" and rec["source"] == DTYPE_ENV and set(rec["cpu"]) >= {"amx_bf16", "avx512_bf16"}
    ident = run.read_json("indices/pa_reader/embedder.json")
    assert ident["dtype"] == "fp32" and ident["dtype_detection"]["source"] == DTYPE_ENV


def test_br2_18_a_long_text_is_indexed_by_its_windows():
    """BR2-18, the rest of it: the tail of a long text changed its vector (the mean of its windows) but weighed
    only its share of the mean, so a question about a fact in the tail scored the text low. A text longer than the
    embedder's window is indexed as one row per window (window_rows) and a search returns it once, by its best
    window: the tail fact's score rises above the mean's; a text that fits keeps its one row and its vector's
    bytes. (A Chinese chunk under MiniLM stays below an unrelated text even by its tail window — MiniLM is an
    English model; e5-small, the embedder `auto` picks for Chinese, reads the 800 characters whole and ranks it
    first: the test above.)"""
    from filegram_ray.memory.index import window_rows

    emb = Embedder(cache_size=0)
    long = ("Quarterly budget review for the Lisbon office. Travel costs rose while rent stayed flat. " * 40
            + "The paper archive moved to a warehouse in Porto last week.")
    texts, meta = [long, "Meeting notes and the weekly schedule."], [{"text": "long"}, {"text": "other"}]
    q = emb.encode(["Where did the paper archive move? Porto warehouse"])
    mean_score = float(emb.encode([long])[0] @ q[0])
    vecs, rows = window_rows(emb, texts, meta)
    assert len(rows) == len(emb.windows(long)) + 1 >= 4 and rows[-1] == {"text": "other"}
    assert vecs[-1].tobytes() == emb.encode([texts[1]])[0].tobytes()
    hits = build_index(vecs, rows, emb).search(q, 2)
    assert [h[1]["text"] for h in hits] == ["long", "other"] and "_of" not in hits[0][1]
    assert hits[0][0] > mean_score + 0.05, (hits[0][0], mean_score)  # measured: 0.469 vs 0.370
    short_vecs, short_rows = window_rows(emb, texts[1:], meta[1:])
    assert short_rows == meta[1:] and short_vecs.tobytes() == emb.encode(texts[1:]).tobytes()


def test_br2_18_naive_rag_finds_events_in_the_tail_of_a_long_chunk():
    """BR2-18 in a comparison method: Naive RAG embeds 20-event chunks (often longer than MiniLM's 256 tokens). The
    chunk whose last event creates the file the question is about lost to a short chunk of a related file name
    when read as the mean of its windows; ranked by its best window it is retrieved first."""
    from filegram_ray.methods.baselines import NaiveRAG, _RagState
    from filegram_ray.methods.trajectory import TrajectoryView

    filler = [{"event_type": "file_read", "file_path": f"/s/notes/budget_{i:02d}.md", "timestamp": 1000 + i,
               "content_length": 1200, "view_range": [1, 40]} for i in range(19)]
    fact = {"event_type": "file_write", "file_path": "/s/archive/moved_to_porto_warehouse.md", "timestamp": 2000,
            "operation": "create", "content_length": 10}
    views = [TrajectoryView(label="User 1", task_id="T-01", events=filler + [fact])]
    for j, name in enumerate(["meeting_schedule.ics", "archive_policy.md", "warehouse_inventory.csv",
                              "porto_trip_notes.md"]):
        views.append(TrajectoryView(label="User 1", task_id=f"T-0{j + 2}", events=[
            {"event_type": "file_read", "file_path": f"/s/x/{name}", "timestamp": 3000 + i, "content_length": 80,
             "view_range": [1, 5]} for i in range(3)]))
    rag = NaiveRAG(top_k=1, display_chars=100_000)
    state = rag.ingest(views)
    assert len(state.rows) > len(state.chunks)  # the long chunk is indexed by its windows
    question = "Which file about the Porto warehouse archive was created?"
    assert "moved_to_porto_warehouse" in rag.retrieve(state, question).text
    mean_only = _RagState(state.chunks, rag._embedder().encode(state.chunks), None)  # one averaged vector each
    assert "moved_to_porto_warehouse" not in rag.retrieve(mean_only, question).text


def test_br2_18_no_texts_make_an_empty_index_not_an_error():
    """A memory without content chunks (a store of a few short notes): no rows, an empty index of the embedder's
    width that answers every search with nothing (before: numpy could not reshape the empty batch, and `filegram
    memory update` on such a store stopped with a traceback)."""
    from filegram_ray.memory.index import window_rows

    emb = make_embedder("minilm-int8")
    for vectors in (np.zeros((0, 384), dtype=np.float32), None):
        rows, meta = window_rows(emb, [], [], vectors)
        assert rows.shape[0] == 0 and meta == []
        idx = build_index(rows, meta, emb)
        assert idx.index.d == 384 and idx.search(emb.encode_query("anything"), 5) == []
