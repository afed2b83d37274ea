"""The comparison methods of reference §8.2 (MMA, SimpleMem, MemOS, EverMemOS, MemU, Zep's networkx engine,
VisRAG): each test checks a property of the method's mechanism on small hand-built trajectories or items."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from evaluate_fixtures import PROFILES, TASKS, make_run
from test_methods_core import TinyEmbedder

from filegram_ray.methods import TrajectoryView, build_views, make_method

P1 = [f"{PROFILES[0]}/{t}" for t in TASKS]
P2 = [f"{PROFILES[1]}/{t}" for t in TASKS]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("comparison_run"))


def _reads(n: int, start: int = 0, prefix: str = "src") -> list[dict]:
    return [{"event_type": "file_read", "timestamp": 1000.0 + i, "file_path": f"{prefix}/f{i}.md", "view_count": 1,
             "content_length": 100} for i in range(start, start + n)]


# ------------------------------------------------------------------------------------------------ MMA


def test_mma_confidence_ordering_on_hand_built_chunks():
    from filegram_ray.methods.mma import mma_confidences

    # three isolated items (orthogonal vectors: no neighbours, consensus 0): credibility decides
    tags = ["search_pattern", "content_detail", "file_operation"]
    conf = mma_confidences(tags, np.eye(3, 8, dtype=np.float32))
    assert conf[2] > conf[1] > conf[0]
    assert conf[2] == pytest.approx(0.4 * 0.95 + 0.3 * 1.0)  # newest item: age 0 → t = 1
    assert conf[0] == pytest.approx(0.4 * 0.80 + 0.3 * 0.5 ** (2 / 200))
    # consensus: two near-identical structural items support each other; an isolated one does not
    v = np.array([[1, 0, 0], [0.99, 0.141, 0], [0, 0, 1]], dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    conf2 = mma_confidences(["structural"] * 3, v)
    assert conf2[0] > conf2[2] and conf2[1] > conf2[2]
    one_pass = mma_confidences(["structural"] * 3, v, passes=1)
    assert conf2[0] > one_pass[0]  # the second pass uses the first pass's (higher) neighbour confidence


def test_mma_rerank_prefers_confident_items_among_candidates(run):
    from filegram_ray.methods.mma import CANDIDATE_FACTOR, W_CONF, W_SIM

    views = build_views(run, {"kind": "all_trajectories", "trajectories": P1 + P2})
    m = make_method("mma", embedder=TinyEmbedder(), top_k=2)
    st = pickle.loads(pickle.dumps(m.ingest(views)))
    assert {"content_detail", "summary"} <= set(st.tags) and len(st.texts) == len(st.conf)
    ctx = m.retrieve(st, "search grep revenue notes summary.txt")
    assert ctx.text.count("(confidence ") == 2 and ctx.tokens_out == len(ctx.text) // 4
    q = TinyEmbedder().encode(["search grep revenue notes summary.txt"])[0]
    sims = st.vectors @ q
    cand = np.argsort(-sims, kind="stable")[:CANDIDATE_FACTOR * 2]
    best = cand[np.argmax(W_SIM * sims[cand] + W_CONF * st.conf[cand])]
    assert ctx.text.startswith(f"(confidence {st.conf[best]:.2f}, {st.tags[best]}) {st.texts[best][:40]}")


# ------------------------------------------------------------------------------------------- SimpleMem


def _entry(text, kw=("k",), conf=0.5):
    from filegram_ray.methods.simplemem import _entry as mk

    return mk(text, "writing", list(kw), ["a.md"], conf, "T-01")


def test_simplemem_merges_near_duplicates():
    from filegram_ray.methods.simplemem import dedup_entries

    distinct = [_entry(w) for w in ("searches by grep first", "nests folders deeply", "keeps backup copies",
                                    "deletes scratch files", "edits in small steps", "reads sources in order",
                                    "names files by date", "switches often between files", "uses slides sometimes")]
    a = _entry("Writes long reports with markdown tables", kw=("tables",), conf=0.6)
    b = _entry("Writes long reports with tables in markdown", kw=("reports",), conf=0.4)
    out = dedup_entries([a, *distinct, b])
    assert len(out) == 10  # 11 entries, b merged into a
    merged = out[0]
    assert merged["restatement"] == a["restatement"] and merged["observation_count"] == 2
    assert merged["confidence"] == pytest.approx(0.7) and set(merged["keywords"]) == {"tables", "reports"}
    assert dedup_entries([a, b]) == [a, b]  # ≤ 10 entries: no dedup (reference §8.2)


def test_simplemem_ingest_collapses_repeated_habits(run):
    views = build_views(run, {"kind": "all_trajectories", "trajectories": P1 + P2})
    m = make_method("simplemem")
    st = m.ingest(views)
    assert st["mode"] == "rules" and st["n_raw"] > len(st["entries"])
    nested = [e for e in st["entries"] if "deeply nested folders" in e["restatement"]]
    assert len(nested) == 1 and nested[0]["observation_count"] == 3  # one per p1 session, merged
    assert sorted(nested[0]["task_ids"]) == list(TASKS)
    ctx = m.retrieve(st, "q")
    assert ctx.text.startswith(f"Memory entries: {len(st['entries'])}")


def test_simplemem_llm_windows_and_overlap():
    from filegram_ray.methods.simplemem import WINDOW_STEP

    calls = []

    def llm_fn(prompt, system_prompt=None, **kw):
        calls.append(prompt)
        return json.dumps({"entries": [{"restatement": f"Reads sources in window {len(calls)}",
                                        "keywords": ["read"], "topic": "reading", "entities": [],
                                        "confidence": 0.8}]})

    v = TrajectoryView("S", "T-01", _reads(60))
    st = make_method("simplemem", llm_fn=llm_fn).ingest([v])
    assert len(calls) == 3 and st["llm_calls"] == 3  # windows start at 0, 27, 54
    assert "f29.md" in calls[0] and "f30.md" not in calls[0]  # window 1: events 0-29
    assert f"f{WINDOW_STEP}.md" in calls[1] and "f29.md" in calls[1] and "f26.md" not in calls[1]  # overlap 3
    assert "Reads sources in window 1" in calls[1]  # recent entries are shown to avoid duplicates


# ------------------------------------------------------------------------------------------------ MemOS


def test_memos_consolidates_same_type_overlapping_cells():
    from filegram_ray.methods.memos import _cell, consolidate_cells

    cells = [_cell("preference", "prefers markdown tables in reports", 0.5, "T-01"),
             _cell("preference", "prefers markdown tables in long reports", 0.9, "T-02"),
             _cell("fact", "prefers markdown tables in reports", 0.7, "T-03")]
    out = consolidate_cells(cells)
    assert len(out) == 2  # the fact keeps its own cell (other type)
    pref = next(c for c in out if c["type"] == "preference")
    assert pref["content"] == "prefers markdown tables in long reports" and pref["confidence"] == 0.9
    assert pref["consolidated_from"] == ["prefers markdown tables in reports"]


def test_memos_one_llm_call_per_slice_and_grouped_context():
    from filegram_ray.methods.memos import SLICE_CHARS

    calls = []

    def llm_fn(prompt, system_prompt=None, **kw):
        calls.append(prompt)
        return json.dumps({"cells": [{"type": "behavioral_pattern", "content": f"pattern {len(calls)} reads notes",
                                      "confidence": 0.5 + 0.1 * len(calls)},
                                     {"type": "preference", "content": "likes tables", "confidence": 0.4}]})

    v = TrajectoryView("S", "T-01", _reads(400))
    st = make_method("memos", llm_fn=llm_fn).ingest([v])
    assert all(len(p) < SLICE_CHARS + 2000 for p in calls) and len(calls) == st["llm_calls"] > 1
    ctx = make_method("memos").retrieve(st, "q")
    assert "## behavioral_pattern" in ctx.text and "## preference (1 cells" in ctx.text


# -------------------------------------------------------------------------------------------- EverMemOS


def test_evermemos_splits_at_forced_boundary_and_context_switch():
    from filegram_ray.methods.evermemos import split_memcells

    assert [len(c) for c in split_memcells(_reads(70))] == [30, 30, 10]  # forced split at 30 events
    evs = _reads(20)
    evs[12] = {"event_type": "context_switch", "timestamp": 1012.0, "from_file": "a", "to_file": "b"}
    assert [len(c) for c in split_memcells(evs)] == [10, 10]  # the window holding the switch starts a cell
    seen = []

    def boundary(history, window):
        seen.append(len(history))
        return len(history) == 10

    assert [len(c) for c in split_memcells(_reads(20), boundary)] == [10, 10]
    assert seen == [5, 10, 5]


def test_evermemos_llm_calls_clusters_and_contradictions():
    from filegram_ray.methods.evermemos import cluster_episodes, consolidate_patterns

    calls = {"boundary": 0, "episode": 0, "trait": 0}

    def llm_fn(prompt, system_prompt=None, **kw):
        if "start a new episode" in prompt:
            calls["boundary"] += 1
            return '{"should_end": true, "confidence": 0.5}'  # below 0.6: never splits
        if "title" in prompt:
            calls["episode"] += 1
            return '{"title": "Reading", "content": "read files", "summary": "reads"}'
        calls["trait"] += 1
        return '{"traits": [{"dimension": "consumption", "pattern": "reads everything", "evidence": "reads"}]}'

    st = make_method("evermemos", llm_fn=llm_fn, embedder=TinyEmbedder()).ingest(
        [TrajectoryView("S", "T-01", _reads(35))])
    assert st["cell_sizes"] == [30, 5] and calls == {"boundary": 5, "episode": 2, "trait": 4}
    assert st["llm_calls"] == 11  # boundary checks + 3 per MemCell
    a, b = np.array([1.0, 0.0]), np.array([0.8, 0.6])
    assert cluster_episodes(np.stack([a, a, b])) == [0, 0, 0]  # cos(a, b) = 0.8 ≥ 0.7
    assert cluster_episodes(np.stack([a, np.array([0.0, 1.0])])) == [0, 1]
    pats = [{"dimension": "organisation", "pattern": "deeply nested folders", "evidence": f"e{i}"} for i in range(3)]
    pats.append({"dimension": "organisation", "pattern": "flat layout everything in root", "evidence": "x"})
    cons, contra = consolidate_patterns(pats)
    assert cons[0]["pattern"] == "deeply nested folders" and cons[0]["confidence"] == "high"
    assert contra == [{"dimension": "organisation", "pattern": "flat layout everything in root", "n_evidence": 1}]


# ------------------------------------------------------------------------------------------------- MemU


def test_memu_importance_and_llm_call_count():
    from filegram_ray.methods.memu import importance

    assert importance({"event_type": "file_read", "view_count": 9}) == pytest.approx(0.8)
    assert importance({"event_type": "file_read"}) == pytest.approx(0.4)
    assert importance({"event_type": "file_write"}) == 0.7 and importance({"event_type": "file_browse"}) == 0.3
    n_calls = []

    def llm_fn(prompt, system_prompt=None, **kw):
        n_calls.append(1)
        if "Group them" in prompt:
            return '{"categories": [{"name": "reading_behavior", "confidence": 0.9, "summary": "reads a lot"}]}'
        return '{"items": [{"type": "habit", "content": "reads markdown sources", "importance": 0.6, "sources": [0]}]}'

    st = make_method("memu", llm_fn=llm_fn).ingest([TrajectoryView("S", "T-01", _reads(120))])
    assert len(n_calls) == math.ceil(120 / 50) + 1 == st["llm_calls"]
    ctx = make_method("memu").retrieve(st, "q")
    assert "reading_behavior (confidence 0.90): reads a lot" in ctx.text and "120 resources" in ctx.text


def test_memu_rule_categories_cover_the_event_types(run):
    st = make_method("memu").ingest(build_views(run, {"kind": "all_trajectories", "trajectories": P1}))
    names = [c["name"] for c in st["categories"]]
    assert names[:3] == ["reading_behavior", "writing_style", "organization_habits"]
    assert sum(c["confidence"] for c in st["categories"]) == pytest.approx(1.0, abs=0.02)


# -------------------------------------------------------------------------------------------------- Zep


def test_zep_rule_graph_merges_repeated_facts(run):
    m = make_method("zep", engine="networkx")
    st = m.ingest(build_views(run, {"kind": "all_trajectories", "trajectories": P1}))
    assert st["engine"] == "networkx"
    backup = [f for f in st["facts"] if f["relation"] == "backed_up_as"]
    assert len(backup) == 1 and backup[0]["count"] == 3 and backup[0]["tasks"] == list(TASKS)
    ctx = m.retrieve(st, "q")
    assert "-[backed_up_as]-> (reports/2024/q1/review.md.bak)" in ctx.text and "Most connected: user" in ctx.text


def test_zep_llm_triples_into_networkx_and_interleaved_subjects(run):
    def llm_fn(prompt, system_prompt=None, **kw):
        return json.dumps({"triples": [{"subject": "user", "relation": "prefers", "object": "tables",
                                        "properties": {"pattern": "tables in every report"}}]})

    m = make_method("zep", llm_fn=llm_fn, engine="networkx")
    st = m.ingest(build_views(run, {"kind": "all_trajectories", "trajectories": P1}))
    assert st["llm_calls"] == 3  # one slice per (short) trajectory
    assert "(user) -[prefers]-> (tables) [task:T-01] {pattern: tables in every report}" in m.retrieve(st, "").text
    pair = build_views(run, {"kind": "interleaved_pair", "trajectories": [P1[0], P2[0]],
                             "labels": ["User 1", "User 2"]})
    facts = make_method("zep", engine="networkx").ingest(pair)["facts"]
    assert {f["subject"] for f in facts if f["relation"] == "read"} == {"User 1", "User 2"}


# ----------------------------------------------------------------------------------------------- VisRAG


def test_visrag_page_layout():
    from filegram_ray.methods.visrag import MAX_LINES, PAGE_WIDTH, WRAP_CHARS, page_lines, render_page

    lines = page_lines("x" * 250 + "\n" + "\n".join(f"line {i}" for i in range(200)))
    assert lines[:3] == ["x" * WRAP_CHARS, "x" * WRAP_CHARS, "x" * 40] and len(lines) == MAX_LINES
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(render_page("hello\nworld")))
    assert img.width == PAGE_WIDTH and render_page("hello\nworld") == render_page("hello\nworld")


def _planted_views():
    filler = [{"event_type": "file_write", "timestamp": 1.0 + i, "file_path": f"notes/n{i}.md", "operation": "create",
               "content_length": 300, "_resolved_content": f"Meeting notes {i}: we discussed the schedule, the "
               f"budget and staffing for week {i}. Action items were assigned to the team."} for i in range(4)]
    planted = {"event_type": "file_write", "timestamp": 9.0, "file_path": "/sandbox/p7_secretive_T-05/out/zebra.md",
               "operation": "create", "content_length": 200,
               "_resolved_content": "ZEBRA MIGRATION REPORT\nThe zebra herd crossed the river in March. Zebra counts "
               "rose by a third along the migration corridor."}
    return [TrajectoryView("Session 1", "T-05", [*filler[:2], planted, *filler[2:]])]


def test_visrag_ranks_the_planted_page_first_and_hides_raw_paths():
    from filegram_ray.methods.visrag import ocr_available

    m = make_method("visrag", embedder=TinyEmbedder(), top_k=2)
    st = pickle.loads(pickle.dumps(m.ingest(_planted_views())))
    assert st.kinds.count("page") == 5 and st.kinds.count("text") == 1
    ctx = m.retrieve(st, "zebra migration report river zebra counts")
    first = ctx.text.split("\n\n")[0]
    assert first.startswith("[Session 1 | Task T-05 | page (") and "zebra.md]" in first
    assert "ZEBRA" in first.upper()
    assert "p7_secretive" not in ctx.text and "/sandbox/" not in ctx.text  # upstream leak fixed
    assert st.page_source == ("ocr" if ocr_available() else "drawn")
