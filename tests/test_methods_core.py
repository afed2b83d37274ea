"""Memory methods on hand-made trajectories: loader, narrative, each method's ingest/retrieve, leakage guards."""

from __future__ import annotations

import importlib.util
import pickle

import pytest
from evaluate_fixtures import META_MARKER, PROFILES, TASKS, make_run

from filegram_ray.methods import build_views, events_to_narrative, load_view, make_method, method_names
from filegram_ray.methods.baselines import FULL_CONTEXT_CAP_CHARS, extractive_summary
from filegram_ray.methods.trajectory import anonymize_path, strip_content_override, truncate_content
from filegram_ray.storage import RunDir

P1 = [f"{PROFILES[0]}/{t}" for t in TASKS]
P2 = [f"{PROFILES[1]}/{t}" for t in TASKS]


class TinyEmbedder:
    """Deterministic bag-of-words hashing embedder (keeps these tests free of the torch model load)."""

    dim = 64

    def encode(self, texts):
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("methods_run"))


def test_anonymize_and_truncate():
    assert anonymize_path("/sandbox/p1_methodical_T-01/reports/a.md") == "reports/a.md"
    assert anonymize_path("/sandbox/p1_methodical_T-01/") == "."
    assert anonymize_path("/home/x/secret/b.txt") == "b.txt"
    assert anonymize_path("docs/c.md") == "docs/c.md"
    assert truncate_content("abcdef", 3) == "abc... [truncated, 6 chars total]"
    assert truncate_content("abc", -1) == "abc"


def test_load_view_resolves_media_and_drops_leakage(run):
    v = load_view(run, P1[0], "Session T-01")
    assert v.task_id == "T-01" and v.label == "Session T-01"
    assert len(v.events) == 12
    write = next(e for e in v.events if e["event_type"] == "file_write")
    assert "| revenue | 12 |" in write["_resolved_content"]
    edit = next(e for e in v.events if e["event_type"] == "file_edit")
    assert edit["_resolved_diff"].startswith("--- a/reports")
    assert all("profile_id" not in e and "model_name" not in e for e in v.events)


def test_load_view_bad_input_names_file(tmp_path):
    run = RunDir(str(tmp_path))
    run.write_json("trajectories/p/T-09/events.json", {"not": "a list"})
    with pytest.raises(ValueError, match="T-09/events.json"):
        load_view(run, "p/T-09", "S")
    run.write_json("trajectories/p/T-08/events.json", [1])
    with pytest.raises(ValueError, match=r"event \[0\]"):
        load_view(run, "p/T-08", "S")


def test_narrative_lines(run):
    v = load_view(run, P1[0], "S")
    text = events_to_narrative(v.events)
    assert text.splitlines()[0] == "1. Read file: sources/a.csv (lines [1, 40], view #1, 900 chars)"
    assert "Create directory: reports/2024/q1 (depth=3)" in text
    assert "--- content ---" in text and "--- diff ---" in text
    assert "Copy: reports/2024/q1/review.md -> reports/2024/q1/review.md.bak (backup=True)" in text
    assert "--- content ---" not in events_to_narrative(v.events, max_content_chars=0)


def test_build_views_kinds(run):
    views = build_views(run, {"kind": "all_trajectories", "trajectories": P1, "labels": ["A", "B", "C"]})
    assert [v.label for v in views] == ["A", "B", "C"]
    held = build_views(run, {"kind": "held_out", "trajectories": P1, "labels": ["A", "B", "C"], "held_out": "T-03"})
    assert [v.task_id for v in held] == ["T-01", "T-02"]
    (pair,) = build_views(run, {"kind": "interleaved_pair", "trajectories": [P1[0], P2[0]],
                                "labels": ["User 1", "User 2"]})
    ts = [e["timestamp"] for e in pair.events]
    assert ts == sorted(ts) and {e["stream"] for e in pair.events} == {"User 1", "User 2"}
    assert "[User 2] Search (grep)" in events_to_narrative(pair.events)
    with pytest.raises(ValueError, match="exactly 2"):
        build_views(run, {"kind": "interleaved_pair", "trajectories": P1})
    with pytest.raises(ValueError, match="unknown kind"):
        build_views(run, {"kind": "bogus", "trajectories": P1})


def test_multimodal_override_strips_created_content(run):
    v = load_view(run, P1[0], "S", content_override=strip_content_override)
    assert all(not e.get("_resolved_content") and not e.get("_resolved_diff") for e in v.events)


def test_registry_lists_all_methods():
    names = method_names()
    for n in ("no_context", "full_context", "naive_rag", "eager_summarization", "filegramos",
              "filegramos_no_procedural", "filegramos_no_semantic", "filegramos_no_episodic"):
        assert n in names
    with pytest.raises(ValueError, match="unknown memory method"):
        make_method("nope")


def test_full_context_cap_truncates_last_block(run):
    views = build_views(run, {"kind": "all_trajectories", "trajectories": P1})
    m = make_method("full_context")
    state = m.ingest(views)
    full = m.retrieve(state, "q")
    assert full.text.count("=== Session ") == 3 and full.tokens_out == len(full.text) // 4
    assert full.tokens_in_memory >= full.tokens_out
    small = make_method("full_context", cap_chars=len(state["blocks"][0]) + 100)
    ctx = small.retrieve(state, "q")
    assert ctx.text.startswith(state["blocks"][0]) and "truncated" in ctx.text
    assert "Session 3" not in ctx.text
    assert FULL_CONTEXT_CAP_CHARS == 160_000


def test_naive_rag_ranks_matching_chunk_first(run):
    views = build_views(run, {"kind": "all_trajectories", "trajectories": [P1[0], P2[0]],
                              "labels": ["Session 1", "Session 2"]})
    m = make_method("naive_rag", embedder=TinyEmbedder(), top_k=1)
    state = pickle.loads(pickle.dumps(m.ingest(views)))
    assert len(state.chunks) == 2  # one chunk of ≤20 events per trajectory
    ctx = m.retrieve(state, "search grep revenue notes summary.txt delete scratch.tmp")
    assert ctx.text.startswith("[Session 2") and len(ctx.text) <= 500


def test_eager_summarization_extractive(run):
    (v,) = build_views(run, {"kind": "single_trajectory", "trajectories": [P1[0]], "labels": ["S"]})
    s = extractive_summary(v)
    assert "3 directories created (max depth 3)" in s and "tables in 1" in s and "1 backups" in s
    m = make_method("eager_summarization")
    st = m.ingest([v])
    assert st["mode"] == "extractive"
    assert m.retrieve(st, "anything").text.startswith("=== S | Task: T-01 ===")


def test_eager_summarization_uses_llm_fn_when_given(run):
    (v,) = build_views(run, {"kind": "single_trajectory", "trajectories": [P2[0]], "labels": ["S"]})
    calls = []

    def llm_fn(prompt, system_prompt=None, **kw):
        calls.append((prompt, kw))
        return "They search first and keep files flat."

    m = make_method("eager_summarization", llm_fn=llm_fn)
    ctx = m.retrieve(m.ingest([v]), "q")
    assert "search first" in ctx.text and len(calls) == 1
    assert "Search (grep)" in calls[0][0] and calls[0][1]["temperature"] == 0.3


def test_no_context_is_empty(run):
    m = make_method("no_context")
    assert m.retrieve(m.ingest([]), "q").text == ""


_HAS_FILEGRAMOS = all(importlib.util.find_spec(f"filegram_ray.memory.{mod}") is not None
                      for mod in ("engram", "consolidate", "retrieve"))


@pytest.mark.skipif(not _HAS_FILEGRAMOS, reason="filegram_ray.memory retrieve/consolidate not in this build yet")
@pytest.mark.parametrize("name", ["filegramos", "filegramos_no_procedural", "filegramos_no_semantic",
                                  "filegramos_no_episodic"])
def test_filegramos_variants(run, name):
    views = build_views(run, {"kind": "all_trajectories", "trajectories": P1})
    from filegram_ray.memory.embed import HashingEmbedder

    m = make_method(name, embedder=HashingEmbedder())
    state = pickle.loads(pickle.dumps(m.ingest(views)))
    ctx = m.retrieve(state, "How does this user organise folders?")
    assert ctx.text and ctx.tokens_out > 0
    assert PROFILES[0] not in ctx.text and META_MARKER not in ctx.text


def test_no_method_reads_ground_truth_files(run, monkeypatch):
    """Every file a method's loader opens is events.json or under media/; contexts carry no profile id."""
    opened = []
    orig = RunDir.read_bytes

    def spy(self, rel):
        opened.append(rel)
        return orig(self, rel)

    monkeypatch.setattr(RunDir, "read_bytes", spy)
    specs = [{"kind": "all_trajectories", "trajectories": P1},
             {"kind": "interleaved_pair", "trajectories": [P1[1], P2[1]], "labels": ["User 1", "User 2"]},
             {"kind": "sessions_with_impostor", "trajectories": [P1[0], P2[2]]}]
    names = [n for n in method_names() if (_HAS_FILEGRAMOS or not n.startswith("filegramos"))
             and (n != "mem0" or importlib.util.find_spec("mem0") is not None)]
    for spec in specs:
        views = build_views(run, spec)
        for name in names:
            m = make_method(name, embedder=TinyEmbedder())
            ctx = m.retrieve(m.ingest(views), "folders backups reports")
            for secret in (*PROFILES, META_MARKER, "generator-model"):
                assert secret not in ctx.text, (name, secret)
            assert secret not in repr(m.ingest(views))
    assert opened and all(r.endswith("/events.json") or "/media/" in r for r in opened), \
        sorted({r for r in opened if not (r.endswith("/events.json") or "/media/" in r)})
