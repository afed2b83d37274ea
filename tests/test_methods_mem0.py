"""Mem0 through the real mem0ai library (FAISS store, packaged-model embedder slot, backbone LLM slot): a planted
preference is stored and retrieved, in raw-message mode (infer=False) and in LLM mode (infer=True)."""

from __future__ import annotations

import importlib.util
import json
import pickle

import pytest
from test_methods_core import TinyEmbedder

from filegram_ray.methods import TrajectoryView, make_method

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mem0") is None,
                                reason="mem0ai not installed (pip install -e '.[methods]')")

PLANTED = "I always present every comparison as a markdown table with a totals row"


def _views():
    evs = [{"event_type": "file_read", "timestamp": float(i), "file_path": f"src/doc{i}.txt", "view_count": 1,
            "content_length": 500} for i in range(45)]
    evs.insert(23, {"event_type": "file_write", "timestamp": 23.5, "file_path": "out/summary.md", "operation": "create",
                    "content_length": len(PLANTED), "_resolved_content": PLANTED})
    return [TrajectoryView("Session 1", "T-02", evs)]


def test_mem0_raw_mode_stores_and_retrieves_planted_preference():
    m = make_method("mem0", embedder=TinyEmbedder())
    st = pickle.loads(pickle.dumps(m.ingest(_views())))
    assert st["mode"] == "raw" and st["n_memories"] == 46 == st["n_messages"]  # raw messages, one memory each
    ctx = m.retrieve(st, "comparison markdown table totals row")
    assert ctx.text.splitlines()[0].startswith("- [Task T-02] Create file: out/summary.md")
    assert PLANTED in ctx.text and ctx.tokens_in_memory == st["memory_tokens"]
    assert len(ctx.text.splitlines()) <= 100 + 10  # ≤100 memories in raw mode (content lines may wrap)


def test_mem0_llm_mode_extracts_through_the_backbone():
    prompts = []

    def llm_fn(prompt, system_prompt=None, **kw):
        prompts.append(prompt)
        hit = "markdown table" in prompt
        return json.dumps({"memory": [{"text": "Prefers markdown tables with totals for comparisons"}] if hit else []})

    m = make_method("mem0", llm_fn=llm_fn, embedder=TinyEmbedder())
    st = m.ingest(_views())
    assert st["mode"] == "llm" and len(prompts) == 3  # 46 messages in batches of 20
    assert st["n_memories"] == 1
    ctx = m.retrieve(st, "does this user use tables?")
    assert ctx.text == "- Prefers markdown tables with totals for comparisons"
