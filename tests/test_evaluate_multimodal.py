"""The Multimodal setting end to end: real render stage → derivatives → what every method ingests and retrieves.

A unique marker is planted only in the source Markdown of user p1's created report (its media blob and its
final output file), in two places the renderers drop — a link target and an HTML comment — so no rendered
derivative (PDF, DOCX, PPTX, XLSX, PNG) carries it, while the ``md`` derivative (the section's source Markdown)
does. The text setting must show it to the methods that keep created content; the multimodal setting must show it
to none of them, through ingest state or retrieved context.
"""

from __future__ import annotations

import hashlib
import json
import pickle

import polars as pl
import pytest
from evaluate_fixtures import PROFILES, TASKS, make_run

from filegram_ray.config import load_config
from filegram_ray.evaluate.multimodal import SHOWN_FORMATS, DerivativeText, text_twins
from filegram_ray.evaluate.report import text_vs_multimodal
from filegram_ray.evaluate.stage import load_items, public_view, retrieval_query, run_evaluate
from filegram_ray.methods import make_method
from filegram_ray.methods.trajectory import build_views
from filegram_ray.storage import RunDir
from rendering.recover import recover_bytes
from rendering.stage import INDEX_PATH, run_render

MARKER = "SRCMD7Q2X9LEAK"
METHODS = ["no_context", "full_context", "naive_rag", "eager_summarization", "filegramos"]
#: methods whose text-setting state keeps created-file content (No Context keeps nothing by design)
KEEPS_CONTENT = ["full_context", "naive_rag", "eager_summarization", "filegramos"]
RENDER_FORMATS = ["pdf", "docx", "md", "pptx", "xlsx", "png_page", "png_chart"]  # wav: ~1 s each, covered elsewhere


def _doc(task: str) -> str:
    return (f"# Quarterly review {task}\n\nThis report summarises the sources in detail. Every figure was checked "
            f"against [the original ledger](https://ledger.example/{MARKER}/q1) before inclusion.\n\n"
            f"<!-- reviewer note {MARKER} -->\n\n| metric | value |\n|---|---|\n| revenue | 12 |\n| cost | 7 |\n\n"
            "## Method\nSources were read in order, section by section, and every table was cross-checked.\n")


def _plant(run: RunDir) -> None:
    """Replace p1's created report (blob + final output) by the marked document; write outputs.parquet."""
    rows = []
    for p in PROFILES:
        for task in TASKS:
            base = f"trajectories/{p}/{task}"
            events = run.read_json(f"{base}/events.json")
            for ev in events:
                if ev["event_type"] == "file_write":
                    path = ev["file_path"]
                    blob = f"{base}/media/{ev['media_ref']['path']}"
                    text = _doc(task) if p == PROFILES[0] else run.read_text(blob)
                    run.write_text(blob, text)
                    run.write_text(f"{base}/outputs/{path}", text)
                    data = text.encode("utf-8")
                    rows.append({"trajectory_id": f"{p}/{task}", "profile_id": p, "task_id": task, "path": path,
                                 "file_type": path.rsplit(".", 1)[1], "bytes": len(data),
                                 "sha256": hashlib.sha256(data).hexdigest()})
    run.write_table("trajectories/outputs.parquet", pl.DataFrame(rows).unique(["trajectory_id", "path"]))


@pytest.fixture(scope="module")
def mm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("mm_run")
    run = make_run(root)
    _plant(run)
    rec = run_render(load_config(overrides={"run_dir": str(root), "render": {"formats": RENDER_FORMATS}}),
                     executor="serial")
    assert rec["counts"] and run.exists(INDEX_PATH)
    return run


def _contexts(run: RunDir, method: str, setting: str) -> tuple[str, str]:
    """(repr of the ingested state, every retrieved context) of ``method`` on p1's all-sessions context."""
    items = [it for it in load_items(run) if it["setting"] == setting and it["context"]["trajectories"][0]
             .startswith(PROFILES[0]) and it["context"]["kind"] == "all_trajectories"]
    assert items, setting
    override = DerivativeText(run) if setting == "multimodal" else None
    m = make_method(method)
    state = m.ingest(build_views(run, items[0]["context"], content_override=override))
    queries = [retrieval_query(it) for it in items] + [f"ledger reviewer note {MARKER}", "quarterly review"]
    ctx = "\n".join(m.retrieve(state, q).text for q in queries)
    return repr(pickle.loads(pickle.dumps(state))), ctx


def test_marker_only_in_source_markdown_and_md_derivative(mm_run):
    idx = mm_run.read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    p1 = idx.filter(pl.col("profile_id") == PROFILES[0])
    assert set(p1["format"].to_list()) >= {"pdf", "md"}, p1["format"].to_list()
    for r in p1.iter_rows(named=True):
        ext = r["path"].rsplit(".", 1)[1]
        text = recover_bytes(mm_run.read_bytes(r["path"]), ext, r["path"], r["caption"] or None,
                             r["transcript"] or None)
        raw = mm_run.read_bytes(r["path"])
        if r["format"] == "md":
            continue  # the section's own Markdown: it may carry the marker (checked below)
        assert MARKER not in text and MARKER.encode() not in raw, (r["format"], r["path"])
    md_with_marker = [r["path"] for r in p1.filter(pl.col("format") == "md").iter_rows(named=True)
                      if MARKER in mm_run.read_text(r["path"])]
    # the test is sensitive: the md derivatives of the first section hold the marker, so a view that showed them
    # would leak it (see test_multimodal_content_is_exactly_the_recovered_derivatives)
    assert md_with_marker


@pytest.mark.parametrize("method", METHODS)
def test_marker_absent_from_multimodal_present_in_text(mm_run, method):
    text_state, _ = _contexts(mm_run, method, "text")
    mm_state, mm_ctx = _contexts(mm_run, method, "multimodal")
    assert MARKER not in mm_state and MARKER not in mm_ctx, method
    if method in KEEPS_CONTENT:
        assert MARKER in text_state, method
    # the multimodal view does carry the rendered content (so the absence above is not an empty view)
    if method in ("full_context", "naive_rag"):
        assert "[rendered " in mm_state and "revenue" in mm_state, method


def test_multimodal_content_is_exactly_the_recovered_derivatives(mm_run):
    """Per created file: the multimodal content equals the text read back from its shown derivatives, in order."""
    dt = DerivativeText(mm_run)
    idx = mm_run.read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    for tid in (f"{PROFILES[0]}/{t}" for t in TASKS):
        rows = idx.filter((pl.col("trajectory_id") == tid) & pl.col("format").is_in(list(SHOWN_FORMATS)))
        expected = "\n\n".join(
            f"[rendered {r['format']}]\n" + recover_bytes(mm_run.read_bytes(r["path"]), r["path"].rsplit(".", 1)[1],
                                                          r["path"], r["caption"] or None,
                                                          r["transcript"] or None).strip()
            for r in sorted(rows.iter_rows(named=True), key=lambda r: (r["section_index"], r["format"])))
        got = dt(tid, {"event_type": "file_write", "file_path": "reports/2024/q1/review.md"})
        assert got == expected and got, tid
        assert "[rendered md]" not in got
    shown_md = DerivativeText(mm_run, formats=[*SHOWN_FORMATS, "md"])
    both = "".join(shown_md(f"{PROFILES[0]}/{t}", {"event_type": "file_write",
                                                    "file_path": "reports/2024/q1/review.md"}) for t in TASKS)
    md_rows = idx.filter((pl.col("profile_id") == PROFILES[0]) & (pl.col("format") == "md"))
    assert ("[rendered md]" in both) == (md_rows.height > 0)
    assert MARKER in both  # showing the md derivatives would leak the source Markdown: why they are hidden


def test_evaluate_stage_multimodal_caches_hold_no_marker(mm_run):
    """The stage path (FileGrd item, ``multimodal-derivatives`` caches) for every method, FileGramOS included."""
    run_evaluate(load_config(overrides={"run_dir": str(mm_run.root), "evaluate": {"sample_per_sub_task": None,
        "methods": METHODS, "executor": "serial", "plots": False, "validity": False,
        "sub_tracks": ["AttrRec", "FileGrd"]}}))
    caches = mm_run.walk_files("results/cache")
    mm = [c for c in caches if "/multimodal-derivatives__" in c]
    txt = [c for c in caches if "/text__" in c]
    assert {c.split("/")[2] for c in mm} >= {"full_context", "naive_rag", "filegramos"}, mm
    for c in mm:
        assert MARKER not in repr(pickle.loads(mm_run.read_bytes(c))), c
    assert any(MARKER in repr(pickle.loads(mm_run.read_bytes(c))) for c in txt)


# ------------------------------------------------------------------------------------------- twins and report
def _results(rows):
    base = {"status": "ok", "is_open": False, "sub_track": "AttrRec", "setting": "text", "text_twin": "",
            "channel": "procedural", "n_choices": 3}
    return pl.DataFrame([{**base, **r} for r in rows])


def test_text_vs_multimodal_pairs_same_questions():
    res = _results([
        {"method": "full_context", "question_id": "AttrRec-00001", "score": 100.0},
        {"method": "full_context", "question_id": "AttrRec-00002", "score": 100.0},
        {"method": "full_context", "question_id": "AttrRec-00003", "score": 0.0},   # no twin: not counted
        {"method": "full_context", "question_id": "FileGrd-00001", "score": 0.0, "setting": "multimodal",
         "sub_track": "FileGrd", "text_twin": "AttrRec-00001"},
        {"method": "full_context", "question_id": "FileGrd-00002", "score": 100.0, "setting": "multimodal",
         "sub_track": "FileGrd", "text_twin": "AttrRec-00002"},
        {"method": "no_context", "question_id": "AttrRec-00001", "score": 0.0},
        {"method": "no_context", "question_id": "FileGrd-00001", "score": 0.0, "setting": "multimodal",
         "sub_track": "FileGrd", "text_twin": "AttrRec-00001"},
    ])
    t = {r["method"]: r for r in text_vs_multimodal(res).to_dicts()}
    assert t["full_context"] == {"method": "full_context", "n_pairs": 2, "text": 100.0, "multimodal": 50.0,
                                 "delta": -50.0}
    assert t["no_context"]["n_pairs"] == 1 and t["no_context"]["delta"] == 0.0
    assert text_vs_multimodal(res.drop("text_twin")).height == 0


def test_text_twins_from_metadata_or_signature():
    ctx = {"kind": "all_trajectories", "trajectories": ["p/T-01"], "labels": ["Session T-01"], "held_out": None}
    items = [
        {"question_id": "AttrRec-00001", "setting": "text", "sub_track": "AttrRec", "question": "Q?",
         "choices": ["a", "b"], "context": ctx, "metadata": {}},
        {"question_id": "FileGrd-00001", "setting": "multimodal", "sub_track": "FileGrd", "question": "Q?",
         "choices": ["b", "a"], "context": ctx, "metadata": {"source_sub_task": "AttrRec"}},
        {"question_id": "FileGrd-00002", "setting": "multimodal", "sub_track": "FileGrd", "question": "other",
         "choices": ["a", "b"], "context": ctx, "metadata": {"text_twin": "AttrRec-00001"}},
        {"question_id": "FileGrd-00003", "setting": "multimodal", "sub_track": "FileGrd", "question": "Q?",
         "choices": ["a", "c"], "context": ctx, "metadata": {"source_sub_task": "AttrRec"}},
    ]
    assert text_twins(items) == {"FileGrd-00001": "AttrRec-00001", "FileGrd-00002": "AttrRec-00001"}


def test_report_has_multimodal_column_and_twin_table(tmp_path):
    """FileGrd twin of AttrRec-00001 (same question/choices/context) → Multimodal column, Text vs Multimodal table
    and plot, all computed from results.parquet."""
    run = make_run(tmp_path)
    items = run.read_table("bench/items.parquet").to_dicts()
    key = run.read_table("bench/answers_key.parquet").to_dicts()
    src = next(it for it in items if it["question_id"] == "AttrRec-00001")
    items.append({**src, "question_id": "FileGrd-00002", "sub_track": "FileGrd", "sub_class": "AttrRec/dim:C",
                  "setting": "multimodal", "metadata": json.dumps({"text_twin": "AttrRec-00001"})})
    key.append({**next(k for k in key if k["question_id"] == "AttrRec-00001"), "question_id": "FileGrd-00002"})
    run.write_table("bench/items.parquet", pl.DataFrame(items))
    run.write_table("bench/answers_key.parquet", pl.DataFrame(key))
    run_evaluate(load_config(overrides={"run_dir": str(tmp_path), "evaluate": {"sample_per_sub_task": None,
        "methods": ["no_context", "full_context"], "executor": "serial", "multimodal_content": "strip"}}))
    res = run.read_table("results/results.parquet")
    assert res.filter(pl.col("question_id") == "FileGrd-00002")["text_twin"].unique().to_list() == ["AttrRec-00001"]
    md = run.read_text("results/report.md")
    assert "| Avg | Multimodal | n | errors |" in md
    assert "## Text vs Multimodal" in md and "| Method | Text | Multimodal | Δ | pairs |" in md
    twins = {r["method"]: r for r in text_vs_multimodal(res).to_dicts()}
    fc = res.filter(pl.col("method") == "full_context")
    t_score = fc.filter(pl.col("question_id") == "AttrRec-00001")["score"][0]
    m_score = fc.filter(pl.col("question_id") == "FileGrd-00002")["score"][0]
    assert twins["full_context"]["text"] == t_score and twins["full_context"]["multimodal"] == m_score
    assert f"| Full Context | {t_score:.1f} | {m_score:.1f} | {m_score - t_score:+.1f} | 1 |" in md
    mm_all = fc.filter(pl.col("setting") == "multimodal")["score"].mean()
    summary = run.read_table("results/summary.parquet")
    assert summary.filter(pl.col("method") == "full_context")["multimodal"][0] == pytest.approx(mm_all)
    assert run.read_bytes("results/text_vs_multimodal.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert all("text_twin" not in repr(public_view(it)) for it in load_items(run))


def test_moved_output_found_under_final_path(tmp_path):
    """An output written, then moved and renamed, is rendered under its final path; the write event still gets the
    recovered text, while a file moved away before a second write at the old path does not borrow it."""
    from rendering.renderers import build
    from rendering.sections import split_sections

    run = RunDir(tmp_path)
    tid = "p9/T-01"
    run.write_json(f"trajectories/{tid}/events.json", [
        {"event_type": "file_write", "timestamp": 1.0, "file_path": "draft.md"},
        {"event_type": "file_move", "timestamp": 2.0, "old_path": "draft.md", "new_path": "reports/draft.md"},
        {"event_type": "file_rename", "timestamp": 3.0, "old_path": "reports/draft.md",
         "new_path": "reports/final.md"},
        {"event_type": "file_write", "timestamp": 4.0, "file_path": "draft.md"}])
    sec = split_sections("# Final plan\n\nThe budget closes in March.\n").sections[0]
    path = "derivatives/p9/T-01/reports__final/s00.pdf"
    run.write_bytes(path, build("pdf", sec).data)
    run.write_table("derivatives/index.parquet", pl.DataFrame([
        {"trajectory_id": tid, "source": "reports/final.md", "section_index": 0, "format": "pdf", "path": path,
         "status": "ok", "caption": "", "transcript": ""}]))
    dt = DerivativeText(run)
    assert dt.final_path(tid, "draft.md", 1.0) == "reports/final.md"
    got = dt(tid, {"event_type": "file_write", "timestamp": 1.0, "file_path": "draft.md"})
    assert got.startswith("[rendered pdf]") and "budget closes in March" in got
    assert dt(tid, {"event_type": "file_write", "timestamp": 4.0, "file_path": "draft.md"}) == ""


def test_visrag_row_named_by_the_page_text_that_ran(monkeypatch, capsys):
    """The report's VisRAG row says which page text ranked the pages: OCR, or the drawn text when OCR is off
    (the default, ``method_options.visrag.ocr: false``) — the row must not claim OCR that did not run. The name
    comes from the method instance made with the run's options (``row_name``), recorded by the evaluate stage as
    ``method_rows``, and ``filegram methods`` shows the same name for the config's options."""
    from filegram_ray.cli import main as cli_main
    from filegram_ray.evaluate.report import markdown_table
    from filegram_ray.methods import make_method, visrag

    summary = pl.DataFrame([{"method": "visrag", "n": 1, "n_errors": 0, "avg": 50.0, "tokens_in": 10,
                             "tokens_out": 5}])
    off = make_method("visrag", ocr=False)
    assert off.row_name() == "VisRAG (drawn page text)"
    assert "| VisRAG (drawn page text) |" in markdown_table(summary, {"visrag": off.row_name()})
    monkeypatch.setattr(visrag, "ocr_available", lambda: True)
    assert make_method("visrag").row_name() == "VisRAG (OCR)"
    assert "| VisRAG (OCR) |" in markdown_table(summary, {"visrag": make_method("visrag").row_name()})
    monkeypatch.setattr(visrag, "ocr_available", lambda: False)  # OCR asked for but rapidocr missing
    assert make_method("visrag", ocr=True).row_name() == "VisRAG (drawn page text)"
    # without recorded row names (a plugin, an old run) the registered display name stands
    assert "| VisRAG |" in markdown_table(summary)
    assert cli_main(["methods"]) == 0  # conf/default.yaml: visrag.ocr false
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("visrag "))
    assert "VisRAG (drawn page text)" in line
