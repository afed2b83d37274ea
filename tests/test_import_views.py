"""Views of imported files: headers and calendar values as written, one view for grep and read, and the
one-command "bring your own folder" run (issue 21)."""

from __future__ import annotations

import json

from import_helpers import folder_of, grep_hits, open_on_bundle, read_lines

from filegram_ray.workspace.bundle import import_bundle
from filegram_ray.workspace.extract import extract_text, header_as_written


def test_headers_are_shown_as_written():
    assert header_as_written("Sat, 26 Nov 0001 07:35:14 -0800 (PST)") == "Sat, 26 Nov 0001 07:35:14 -0800 (PST)"
    assert header_as_written("a@x.org, \r\n\tb@x.org,\n c@x.org") == "a@x.org, b@x.org, c@x.org"
    assert header_as_written("=?utf-8?q?Caf=C3=A9_menu?=") == "Café menu"
    assert header_as_written("=?bogus?q?x?=") == "=?bogus?q?x?="  # an unknown charset is shown as written


def test_calendar_keeps_parameters_and_recurrence(tmp_path):
    p = tmp_path / "c.ics"
    p.write_text("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;TZID=\"Europe/Berlin\":20240105T100000\n"
                 "SUMMARY:Review\\, part 2\nRRULE:FREQ=WEEKLY;COUNT=3\nBEGIN:VALARM\nDESCRIPTION:Reminder\n"
                 "END:VALARM\nATTENDEE;CN=\"Doe, J\":mailto:j@example.com\nEND:VEVENT\nEND:VCALENDAR\n")
    assert extract_text(p).splitlines() == [
        'dtstart: 20240105T100000 (TZID="Europe/Berlin")', "summary: Review, part 2", "rrule: FREQ=WEEKLY;COUNT=3",
        'attendee: mailto:j@example.com (CN="Doe, J")']


def test_grep_searches_only_what_read_shows(tmp_path):
    """An undescribed media file is not grepped as raw bytes (read shows nothing of it); a corrupt document is
    named as not searched; text files are searched as before."""
    from filegram_ray.engine import EngineSession

    files = tmp_path / "files"
    files.mkdir()
    (files / "noise.mp3").write_bytes(b"ID3" + b"budget " * 50)  # no NUL: raw grep used to match it
    (files / "broken.docx").write_bytes(b"PK\x03\x04not a zip")
    (files / "notes.md").write_text("budget line\n", encoding="utf-8")
    sess = EngineSession(files, tmp_path / "w", "p1_x", "T-07", seed=1, start_ms=1.7e12, annotations={})
    sess.start()
    try:
        with sess.iteration():
            res = sess.call("grep", pattern="budget", path=".")
        assert res.ok and res.output.splitlines()[:2] == ["Found 1 matching lines", "notes.md:1: budget line"]
        assert "[1 document(s) not searched: their text cannot be extracted]" in res.output
    finally:
        sess.finish()
        sess.close()


def test_annotated_media_read_honours_offset_and_grep_numbers(tmp_path):
    src = folder_of(tmp_path, ["t-rex-roar.mp3"])
    out = tmp_path / "b"
    import_bundle(src, "T-07", out, describe={"asr": False})
    sess = open_on_bundle(out, tmp_path / "w")
    try:
        (f, no, text), = grep_hits(sess, "44100 Hz")
        assert (f, no) == ("t-rex-roar.mp3", 1) and read_lines(sess, f, no, 1) == [(1, text)]
        with sess.iteration():  # one line (the properties; no other describer ran): offset 2 is past the end
            res = sess.call("read", file_path=f, offset=2)
        assert not res.ok and "offset 2 is past the end of the file (1 lines)" in res.output
    finally:
        sess.finish()
        sess.close()


def test_workspace_run_imports_into_the_run_and_generates(tmp_path):
    """``filegram workspace run`` (one command): the folder becomes workspaces/T-07 of the run, marked imported
    (the seed stage leaves it alone), and generate runs on it; a rerun skips what is done."""
    from filegram_ray.cli import main
    from filegram_ray.config import load_config
    from filegram_ray.workspace.stage import run_seed

    src = folder_of(tmp_path, ["007.eml", "050.eml"])
    run_dir = tmp_path / "run"
    argv = ["workspace", "run", str(src), "--task", "T-07", "--profiles", "p3", "--run-dir", str(run_dir),
            "--serial", "--stages", "generate", "--no-ocr", "--no-asr", "--set", "generate.perturb=false"]
    assert main(argv) == 0
    ws = run_dir / "workspaces" / "T-07"
    meta = json.loads((ws / "bundle.json").read_text())
    assert sorted(f["path"] for f in meta["files"]) == ["007.eml", "050.eml"] and meta["source"] == "imported"
    assert (ws / "extracted" / "050.eml.txt").exists()
    done = json.loads((run_dir / "_done" / "seed" / "T-07.json").read_text())
    assert done["source"] == "imported" and done["bundle_sha256"]
    assert (run_dir / "trajectories" / "p3_efficient_executor" / "T-07" / "events.json").exists()
    # the seed stage does not replace an imported workspace
    cfg = load_config(None, [f"run_dir={run_dir}", "seed=7", "tasks=[T-07]", "workspace.executor=serial"])
    assert run_seed(cfg)["built"] == 0
    assert json.loads((ws / "bundle.json").read_text())["source"] == "imported"
    # a rerun on the same folder: same bundle content, the trajectory is kept
    assert main(argv) == 0
    rec = json.loads((run_dir / "run.json").read_text())["stages"]["generate"]
    assert rec["skipped"] == 1 and rec["ok"] == 1


def test_a_slow_document_does_not_keep_the_others_unsearched(tmp_path):
    """grep extracts each document within the call's budget; one that overruns is named as not searched, and later
    greps in the process skip it at once so the documents after it are searched (read still tries it)."""
    import docx
    from test_engine_confinement import _dense_xlsx

    from filegram_ray.engine import EngineSession
    from filegram_ray.engine.sandbox import Limits

    files = tmp_path / "files"
    files.mkdir()
    _dense_xlsx(files / "a_wide.xlsx", 250, first=7)  # its own bytes: no other test has marked it slow in this process
    d = docx.Document()
    d.add_paragraph("budget of the small report")
    d.save(files / "b_small.docx")
    (files / "c.md").write_text("budget note\n", encoding="utf-8")
    sess = EngineSession(files, tmp_path / "w", "p1_x", "T-07", seed=1, start_ms=1.7e12, annotations={},
                         limits=Limits(max_call_s=1.0))
    sess.start()
    try:
        with sess.iteration():
            first = sess.call("grep", pattern="budget", path=".")
        assert first.ok, first.output
        assert "[1 document(s) not searched: text extraction ran past" in first.output
        assert "more file(s) not searched: the call's time ran out" in first.output
        outputs = []
        for _ in range(2):  # the slow spreadsheet is skipped from now on: the files after it are reached
            with sess.iteration():
                outputs.append(sess.call("grep", pattern="budget", path=".").output)
        last = outputs[-1]
        assert "b_small.docx:1: budget of the small report" in last and "c.md:1: budget note" in last, outputs
        assert "[1 document(s) not searched: text extraction ran past" in last
    finally:
        sess.finish()
        sess.close()


def test_a_legal_255_byte_name_gets_its_text_view(tmp_path):
    """Attack pass, tracebacks: a file with a legal 254/255-byte name was kept "without a text view" (the view's
    name, plus ``.txt`` and ``.tmp``, is longer than NAME_MAX: ENAMETOOLONG). The view gets the longest prefix
    that fits plus a hash of the whole name (two long names that share their start keep distinct views), and
    bundle.json names it in the file's ``view`` field; the file itself keeps its name."""
    src = tmp_path / "src"
    src.mkdir()
    names = ["a" * 251 + ".md", "a" * 250 + "b.md", "é" * 125 + ".md", "ok.md"]
    assert [len(n.encode()) for n in names] == [254, 254, 253, 5]
    for i, n in enumerate(names):
        (src / n).write_text(f"text of file {i}\n", encoding="utf-8")
    info = import_bundle(src, "T-07", tmp_path / "ws")
    meta = json.loads((tmp_path / "ws" / "bundle.json").read_text(encoding="utf-8"))
    assert not info.errors and not meta.get("errors"), meta.get("errors")
    rows = {f["path"]: f for f in meta["files"]}
    assert set(rows) == set(names) and "view" not in rows["ok.md"]
    views = {n: (tmp_path / "ws" / rows[n]["view"]) for n in names[:3]}
    assert len(set(views.values())) == 3
    for i, n in enumerate(names[:3]):
        assert views[n].read_text(encoding="utf-8") == f"text of file {i}\n"
        assert len(views[n].name.encode()) <= 255 and (tmp_path / "ws" / "files" / n).is_file()
    assert (tmp_path / "ws" / "extracted" / "ok.md.txt").read_text(encoding="utf-8") == "text of file 3\n"
    assert not list((tmp_path / "ws" / "extracted").glob(".view-*"))  # no temp file left


def test_an_imported_nfd_folder_keeps_its_names_and_the_engine_finds_it_in_nfc_BR3_13(tmp_path):
    """BR3-13, import: decided — ``workspace import`` keeps a file's name as the user's disk has it (NFD names from
    macOS stay NFD in files/ and bundle.json: the bytes on disk are the user's), and the engine's tool layer matches
    names and text in any normalisation form: on that bundle a model typing NFC globs, reads, greps and edits the
    file."""
    import unicodedata as ud

    src = tmp_path / "src"
    src.mkdir()
    name = ud.normalize("NFD", "Résumé_Zoë.md")
    (src / name).write_text(ud.normalize("NFD", "at the café\n"), encoding="utf-8")
    import_bundle(src, "T-07", tmp_path / "ws")
    meta = json.loads((tmp_path / "ws" / "bundle.json").read_text(encoding="utf-8"))
    assert [f["path"] for f in meta["files"]] == [name] and (tmp_path / "ws" / "files" / name).is_file()
    sess = open_on_bundle(tmp_path / "ws", tmp_path / "work")
    try:
        with sess.iteration():
            assert sess.call("glob", pattern="**/Résumé*").output.strip() == "Résumé_Zoë.md"
            assert "at the café" in ud.normalize("NFC", sess.call("read", file_path="Résumé_Zoë.md").output)
        assert grep_hits(sess, "café") == [("Résumé_Zoë.md", 1, ud.normalize("NFD", "at the café"))]
        with sess.iteration():
            assert sess.call("edit", file_path="Résumé_Zoë.md", old_string="the café", new_string="the bar").ok
    finally:
        sess.finish()
