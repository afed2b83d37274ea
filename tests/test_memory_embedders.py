"""The embedder registry (issue 17): every backend gives a text the same vector alone or in any batch (batching by
exact token length, REL-faiss-episodes-index-nondeterministic), records its own identity (BR-11), and ``auto``
picks the multilingual model for Chinese profiles from their texts alone."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from test_memory_stage import _blob, complete, make_run

from filegram_ray.config import load_config
from filegram_ray.memory.embed import (
    EMBEDDERS,
    Embedder,
    cjk_share,
    kind_of_identity,
    make_embedder,
    resolve_kind,
)
from filegram_ray.memory.index import EmbedderMismatchError, load_indices
from filegram_ray.memory.stage import run_encode
from filegram_ray.storage import RunDir

TEXTS = ["short note", "a much longer paragraph about the quarterly budget of the river project " * 6,
         "mid-length text on travel costs and equipment", "another mid-length text on travel costs and boats",
         "季度预算报告显示旅行费用增加，第三季度的差旅支出比预期高出百分之十二。" * 2, "x" * 10]


@pytest.mark.parametrize("kind", ["minilm", "minilm-int8", "e5-small"])
def test_rel_faiss_episodes_index_nondeterministic_every_backend_batch_invariant(kind):
    """REL-faiss-episodes-index-nondeterministic, for each backend: a text's vector is bit-for-bit the same alone, in
    one call with all texts, and in batches of 2 (texts grouped by exact token length, never padded)."""
    e = make_embedder(kind, threads=1)
    e.cache_size = 0
    alone = np.concatenate([e.encode([t]) for t in TEXTS])
    together = e.encode(TEXTS)
    e.batch_size = 2
    assert together.tobytes() == alone.tobytes() == e.encode(TEXTS).tobytes()
    assert together.shape == (len(TEXTS), 384) and np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    ident = e.identity()
    assert ident["kind"] == kind and kind_of_identity(ident) == kind and ident["dim"] == 384


@pytest.mark.parametrize("kind", ["minilm-int8", "e5-small"])
def test_onnx_and_e5_vectors_do_not_depend_on_threads(kind):
    one = make_embedder(kind, threads=1)
    two = make_embedder(kind, threads=2)
    assert one.encode(TEXTS).tobytes() == two.encode(TEXTS).tobytes()


def test_int8_is_close_to_fp32_but_a_different_identity():
    fp32, int8 = Embedder(cache_size=0), make_embedder("minilm-int8")
    cos = (fp32.encode(TEXTS[:4]) * int8.encode(TEXTS[:4])).sum(axis=1)
    assert cos.min() > 0.99
    assert fp32.identity()["weights"] != int8.identity()["weights"]


def test_e5_reads_chinese():
    """The multilingual model ranks the Chinese paraphrase first; the English MiniLM is the reason it exists."""
    e = make_embedder("e5-small")
    docs = e.encode(["猫坐在垫子上。", "今天股票价格上涨了。", "季度预算报告显示旅行费用增加。"])
    assert int(np.argmax(docs @ e.encode_query("旅行开支预算").reshape(-1))) == 2
    assert int(np.argmax(docs @ e.encode_query("小猫在地毯上").reshape(-1))) == 0


def test_auto_kind_comes_from_the_texts():
    assert cjk_share(["abc", "季度预算"]) == pytest.approx(4 / 7)
    assert resolve_kind("auto", ["季度预算报告显示旅行费用增加", "OK"]) == "e5-small"
    assert resolve_kind("auto", ["quarterly budget report", "预算"]) == "minilm"
    assert resolve_kind("minilm-int8", ["季度预算"]) == "minilm-int8"
    assert {"minilm", "minilm-int8", "e5-small", "hashing"} <= set(EMBEDDERS)
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("nope")


def test_encode_auto_records_each_profiles_embedder_and_refuses_the_other(tmp_path):
    """encode.embedder=auto: a profile whose texts are Chinese gets e5-small, the others MiniLM; each index records
    its embedder, a query with the other one is refused, and changing the setting redoes the profiles."""
    root = make_run(tmp_path / "run", bad=None)
    for k, folder in enumerate(sorted((root / "trajectories" / "pb_writer").iterdir())):
        media = folder / "media"
        shutil.rmtree(media)
        media.mkdir()
        body = f"# 预算复核 {k}\n\n## 结论\n\n青河项目第三季度的差旅报销总额为四万七千三百元，比预算超出百分之十二。" * 3
        ev = [{"event_type": "file_read", "file_path": "inputs/说明.md", "file_type": "md", "view_count": 1,
               "content_length": 400},
              {"event_type": "file_write", "file_path": f"报告_{k}.md", "file_type": "md", "operation": "create",
               "content_length": len(body), "media_ref": _blob(media, body)}]
        (folder / "events.json").write_text(json.dumps(complete(ev, "pb_writer"), ensure_ascii=False),
                                            encoding="utf-8")
    cfg = load_config(None, [f"run_dir={root}", "encode.embedder=auto", "profiles=[pa_reader,pb_writer]"])
    s = run_encode(cfg, executor="serial")
    assert s["embedder_by_profile"] == {"e5-small": 1, "minilm": 1}
    run = RunDir(root)
    assert run.read_json("indices/pb_writer/embedder.json")["kind"] == "e5-small"
    assert run.read_json("indices/pa_reader/embedder.json")["kind"] == "minilm"
    load_indices(run, "pb_writer", make_embedder("e5-small"))
    with pytest.raises(EmbedderMismatchError):
        load_indices(run, "pb_writer", make_embedder("minilm"))
    again = run_encode(cfg, executor="serial")
    assert again["profiles_consolidated_now"] == 0
    redo = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing",
                                          "profiles=[pa_reader,pb_writer]"]), executor="serial")
    assert redo["profiles_consolidated_now"] == 2
    shutil.rmtree(root)
