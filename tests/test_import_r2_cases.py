"""The four R2 import cases (issue 21), each with the value the case expects."""

from __future__ import annotations

import json

from import_helpers import bundle_meta, folder_of, grep_hits, open_on_bundle, read_lines

from filegram_ray.workspace.bundle import import_bundle
from filegram_ray.workspace.extract import extract_text, normalise_mail_date


def test_R2_eml_date_year_0001_rewritten(tmp_path):
    """R2-eml-date-year-0001-rewritten: the Date header reaches the agent as written,
    ``Date: Sat, 26 Nov 0001 07:35:14 -0800 (PST)`` (not ``Mon, 26 Nov 2001 ...``), in extracted/ and in the
    engine's read; the normalised date goes beside it in bundle.json, with the written year and a note."""
    src = folder_of(tmp_path, ["050.eml", "007.eml", "033.eml", "037.eml"])
    out = tmp_path / "c1"
    import_bundle(src, "T-07", out, describe={"ocr": False, "asr": False})
    expected = "Date: Sat, 26 Nov 0001 07:35:14 -0800 (PST)"
    raw_date = [ln for ln in (src / "050.eml").read_text().splitlines() if ln.startswith("Date:")][0]
    assert raw_date == expected
    view = (out / "extracted" / "050.eml.txt").read_text(encoding="utf-8")
    assert expected in view.splitlines() and "2001" not in view.splitlines()[2]
    sess = open_on_bundle(out, tmp_path / "w")
    try:
        assert read_lines(sess, "050.eml", 3, 1) == [(3, expected)]
    finally:
        sess.finish()
        sess.close()
    # every message keeps its zone comment: the header is copied, not re-formatted
    for name in ("007.eml", "033.eml", "037.eml"):
        written = [ln for ln in (src / name).read_text().splitlines() if ln.startswith("Date:")][0]
        assert written in (out / "extracted" / f"{name}.txt").read_text().splitlines()
        assert written.endswith(("(PST)", "(PDT)"))
    # normalisation beside the original, never instead of it
    row = {f["path"]: f for f in bundle_meta(out)["files"]}["050.eml"]
    assert row["date"]["written"] == "Sat, 26 Nov 0001 07:35:14 -0800 (PST)"
    assert row["date"]["iso"] == "0001-11-26T07:35:14-08:00"
    assert "year 0001 as written" in row["date"]["note"] and "weekday Sat" in row["date"]["note"]
    assert normalise_mail_date("Mon, 29 Oct 2001 10:07:14 -0800 (PST)") == {
        "written": "Mon, 29 Oct 2001 10:07:14 -0800 (PST)", "iso": "2001-10-29T10:07:14-08:00", "note": None}


def test_R2_eml_grep_line_numbers_differ_from_read(tmp_path):
    """R2-eml-grep-line-numbers-differ-from-read: grep "Here" on 007.eml reports line 7 (it used to report 23,
    a raw-byte line), and read at offset 7 shows that very line; the recorded view_range is [7, 14]."""
    src = folder_of(tmp_path, ["007.eml"])
    out = tmp_path / "c2"
    import_bundle(src, "T-07", out, describe={"ocr": False, "asr": False})
    sess = open_on_bundle(out, tmp_path / "w")
    try:
        hits = grep_hits(sess, "Here")
        assert hits == [("007.eml", 7, 'Here is another matrix of TW "Current Shipper" rates & surcharges.')]
        rows = read_lines(sess, "007.eml", offset=7, limit=40)
        assert rows[0] == (7, hits[0][2]) and rows[-1][0] == 14
        # lines of headers read does not show are not found by grep either (one view)
        assert grep_hits(sess, "X-Folder") == []
        # a header grep finds is the line read shows at that number
        (f, no, text), = grep_hits(sess, "^Date:")
        assert read_lines(sess, f, no, 1) == [(no, text)] and text == "Date: Mon, 29 Oct 2001 10:07:14 -0800 (PST)"
        sess.finish()
        reads = [e for e in sess.events if e["event_type"] == "file_read"]
        assert reads[0]["view_range"] == [7, 14]
    finally:
        sess.close()
    # the view grep and read share is the one written at import
    assert (out / "extracted" / "007.eml.txt").read_text(encoding="utf-8") == extract_text(src / "007.eml")


def test_R2_import_media_unannotated_invisible(tmp_path):
    """R2-import-media-unannotated-invisible: imported media get an annotation (properties always, OCR, speech),
    read returns it and records a file_read event; the import summary says what was described and how.
    Expected: surfer-240-200.jpg → "Image file surfer-240-200.jpg: JPEG, 240×200 pixels"; t-rex-roar.mp3 →
    "Audio file t-rex-roar.mp3: mp3, 2.1 s, 44100 Hz, stereo" and no invented words (no speech in a roar)."""
    import io

    from filegram_ray.workspace.cli import print_import_summary

    src = folder_of(tmp_path, ["surfer-240-200.jpg", "t-rex-roar.mp3"])
    out = tmp_path / "c3"
    info = import_bundle(src, "T-07", out)
    meta = bundle_meta(out)
    ann = {f["path"]: f["annotation"] for f in meta["files"]}
    assert ann["surfer-240-200.jpg"]["modality"] == "image" and ann["t-rex-roar.mp3"]["modality"] == "audio"
    assert ann["surfer-240-200.jpg"]["content"].startswith("Image file surfer-240-200.jpg: JPEG, 240×200 pixels")
    assert ann["surfer-240-200.jpg"]["properties"]["width"] == 240
    assert ann["t-rex-roar.mp3"]["content"].startswith("Audio file t-rex-roar.mp3: mp3, 2.1 s, 44100 Hz, stereo")
    assert "no speech detected" in ann["t-rex-roar.mp3"]["content"]
    assert abs(ann["t-rex-roar.mp3"]["properties"]["duration_s"] - 2.07) < 0.05
    by = {d["path"]: d["described_by"] for d in info.described}
    assert by["surfer-240-200.jpg"][0] == "properties" and any(m.startswith("ocr:rapidocr") for m in
                                                                by["surfer-240-200.jpg"])
    assert by["t-rex-roar.mp3"] == ["properties", "asr:whisper-tiny.en"]
    buf = io.StringIO()
    print_import_summary(info, file=buf)
    summary = buf.getvalue()
    assert "media described for the agent (2" in summary
    assert "audio t-rex-roar.mp3: properties, asr:whisper-tiny.en" in summary
    # the agent reads them: an annotation, and a file_read event each
    sess = open_on_bundle(out, tmp_path / "w")
    try:
        for name in ("surfer-240-200.jpg", "t-rex-roar.mp3"):
            rows = read_lines(sess, name)
            assert rows and rows[0][1] == ann[name]["content"].splitlines()[0]
        sess.finish()
        assert [e["file_path"].rsplit("/", 1)[-1] for e in sess.events if e["event_type"] == "file_read"] == [
            "surfer-240-200.jpg", "t-rex-roar.mp3"]
    finally:
        sess.close()
    assert (out / "extracted" / "t-rex-roar.mp3.txt").read_text(encoding="utf-8") == ann["t-rex-roar.mp3"]["content"]


def test_R2_generate_stale_trajectory_after_reimport(tmp_path):
    """R2-generate-stale-trajectory-after-reimport: after a different folder is imported into the same
    workspaces/T-07, generate regenerates the unit without force (skipped as done: 0) and the new trajectory reads
    only files of the new bundle; an unchanged bundle is still skipped (skipped as done: 1)."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate

    run_dir = tmp_path / "run"
    cfg = load_config(None, [f"run_dir={run_dir}", "seed=7"])
    data = cfg.model_dump()
    data.update(profiles=["p3"], tasks=["T-07"], generate={"executor": "serial", "perturb": False})
    cfg = type(cfg).model_validate(data)
    ws = run_dir / "workspaces" / "T-07"
    first = folder_of(tmp_path, ["007.eml", "033.eml", "037.eml", "050.eml"], "first")
    import_bundle(first, "T-07", ws, describe={"ocr": False, "asr": False})
    rec1 = run_generate(cfg)
    assert rec1["ok"] == 1 and rec1["skipped"] == 0
    second = folder_of(tmp_path, ["033.eml", "050.eml"], "second")
    (second / "note.md").write_text("# Note\n\nThe matrix moved to the shared drive.\n", encoding="utf-8")
    import_bundle(second, "T-07", ws, describe={"ocr": False, "asr": False})
    rec2 = run_generate(cfg)
    assert rec2["ok"] == 1 and rec2["skipped"] == 0, rec2
    bundle = {f["path"] for f in bundle_meta(ws)["files"]}
    assert bundle == {"033.eml", "050.eml", "note.md"}
    events = json.loads((run_dir / "trajectories" / "p3_efficient_executor" / "T-07" / "events.json").read_text())
    root = "/sandbox/p3_efficient_executor_T-07/"
    read = {e["file_path"].removeprefix(root) for e in events if e["event_type"] == "file_read"}
    assert read & bundle, read  # the new trajectory reads the new files ...
    assert not read & {"007.eml", "037.eml"}  # ... and none of the old bundle's (case: it read inbox/007.eml)
    assert all(p in bundle for p in read if p.endswith(".eml")), read
    done = json.loads((run_dir / "_done" / "generate").joinpath(
        next(p.name for p in (run_dir / "_done" / "generate").iterdir())).read_text())
    from filegram_ray.workspace.bundle import bundle_content_hash

    assert done["bundle_sha256"] == bundle_content_hash(bundle_meta(ws))
    rec3 = run_generate(cfg)
    assert rec3["skipped"] == 1
