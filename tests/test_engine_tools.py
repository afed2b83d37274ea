"""Table-driven checks: every tool × emitted event, every derived field against reference §3.4."""

from __future__ import annotations

import json

import pytest
from engine_helpers import ROOT, open_session, v

from filegram_ray.engine.collector import naming_pattern_change, unique_line_delta
from filegram_ray.engine.media import content_hash
from filegram_ray.schema.events import SIMULATION_TYPES, parse_event

FILES = {
    "notes/a.md": "# A\nalpha\nbeta\ngamma\n",
    "notes/b.md": "one\ntwo\n",
    "readme.txt": "hello\n",
    "data/deep/x.csv": "k,v\n1,2\n",
    "scratch.tmp": "tmp\n",
    "My_Notes.md": "x\n",
    "img/chart.png": b"\x89PNG\r\n\x1a\n\x00\x00fake",
    "img/photo.jpg": b"\xff\xd8\xff\x00fake",
}
ANN = {"img/chart.png": {"modality": "image", "content": "A bar chart.\nQ1 up 10%.\nQ2 flat."}}


def _read(s, rel, **kw):
    return s.call("read", file_path=rel, **kw)


# (case id, steps(sess) -> None, expected behavioural events [(event_type, exact field subset)])
CASES = [
    ("read_first", lambda s: _read(s, "notes/a.md"), [
        ("context_switch", {"from_file": None, "to_file": v("notes/a.md"), "trigger": "file_read", "switch_count": 1}),
        ("file_read", {"file_path": v("notes/a.md"), "file_type": "md", "directory_depth": 1, "view_count": 1,
                       "view_range": [1, 4], "revisit_interval_ms": None}),
    ]),
    ("read_window_root_file", lambda s: _read(s, "notes/a.md", offset=2, limit=2), [
        ("context_switch", {"switch_count": 1}),
        ("file_read", {"view_range": [2, 3], "directory_depth": 1}),
    ]),
    ("read_virtual_abs_path_depth0", lambda s: _read(s, f"{ROOT}/readme.txt"), [
        ("context_switch", {"to_file": v("readme.txt")}),
        ("file_read", {"file_path": v("readme.txt"), "file_type": "txt", "directory_depth": 0}),
    ]),
    ("read_deep_csv", lambda s: _read(s, "data/deep/x.csv"), [
        ("context_switch", {}), ("file_read", {"file_type": "csv", "directory_depth": 2, "view_range": [1, 2]}),
    ]),
    ("reread_same_file_no_switch", lambda s: (_read(s, "notes/a.md"), s.advance(1000), _read(s, "notes/a.md")), [
        ("context_switch", {"switch_count": 1}), ("file_read", {"view_count": 1}),
        ("file_read", {"view_count": 2}),  # no context_switch, no cross_file_reference (same file)
    ]),
    ("two_files_sequential_access", lambda s: (_read(s, "notes/a.md"), s.advance(500), _read(s, "notes/b.md")), [
        ("context_switch", {}), ("file_read", {}),
        ("context_switch", {"from_file": v("notes/a.md"), "to_file": v("notes/b.md"), "switch_count": 2}),
        ("cross_file_reference", {"source_file": v("notes/a.md"), "target_file": v("notes/b.md"),
                                  "reference_type": "sequential_access"}),
        ("file_read", {"file_path": v("notes/b.md"), "view_count": 1}),
    ]),
    ("cross_ref_window_expired", lambda s: (_read(s, "notes/a.md"), s.advance(30_001), _read(s, "notes/b.md")), [
        ("context_switch", {}), ("file_read", {}), ("context_switch", {"switch_count": 2}), ("file_read", {}),
    ]),
    ("read_annotated_media", lambda s: _read(s, "img/chart.png"), [
        ("context_switch", {}), ("file_read", {"file_type": "png", "view_range": [1, 3], "directory_depth": 1}),
    ]),
    ("read_unannotated_media_skipped", lambda s: _read(s, "img/photo.jpg"), []),
    ("read_missing_file_no_event", lambda s: _read(s, "nope.md"), []),
    ("write_create", lambda s: s.call("write", file_path="out/r.md", content="# R\nbody\n"), [
        ("file_write", {"file_path": v("out/r.md"), "file_type": "md", "directory_depth": 1, "operation": "create",
                        "content_length": 9, "before_hash": None, "after_hash": content_hash("# R\nbody\n")}),
    ]),
    ("write_overwrite", lambda s: s.call("write", file_path="readme.txt", content="new\n"), [
        ("file_write", {"operation": "overwrite", "content_length": 4, "before_hash": content_hash("hello\n"),
                        "after_hash": content_hash("new\n")}),
    ]),
    ("write_empty_file", lambda s: s.call("write", file_path="e.md", content=""), [
        ("file_write", {"operation": "create", "content_length": 0, "after_hash": None}),
    ]),
    ("edit_read_then_edit", lambda s: (_read(s, "notes/b.md"), s.advance(200),
                                       s.call("edit", file_path="notes/a.md", old_string="beta", new_string="BETA\nb2")), [
        ("context_switch", {}), ("file_read", {}),
        ("cross_file_reference", {"source_file": v("notes/b.md"), "target_file": v("notes/a.md"),
                                  "reference_type": "read_then_edit"}),
        ("file_edit", {"file_path": v("notes/a.md"), "file_type": "md", "edit_tool": "edit", "lines_added": 2,
                       "lines_deleted": 1, "lines_modified": 1, "diff_summary": "+2 -1",
                       "before_hash": content_hash(FILES["notes/a.md"]),
                       "after_hash": content_hash("# A\nalpha\nBETA\nb2\ngamma\n")}),
    ]),
    ("edit_replace_all", lambda s: s.call("write", file_path="w.md", content="x\nx\ny\n") and
        s.call("edit", file_path="w.md", old_string="x", new_string="z", replace_all=True), [
        ("file_write", {}),
        ("file_edit", {"lines_added": 1, "lines_deleted": 1, "lines_modified": 1, "diff_summary": "+1 -1"}),
    ]),
    ("edit_after_edit_sequential", lambda s: (
        s.call("edit", file_path="notes/a.md", old_string="alpha", new_string="A1"), s.advance(100),
        s.call("edit", file_path="notes/b.md", old_string="one", new_string="1")), [
        ("file_edit", {}),
        ("cross_file_reference", {"reference_type": "sequential_access", "source_file": v("notes/a.md")}),
        ("file_edit", {"file_path": v("notes/b.md")}),
    ]),
    ("edit_empty_old_creates_file", lambda s: s.call("edit", file_path="new.md", old_string="", new_string="hi\n"), [
        ("file_write", {"operation": "create", "content_length": 3, "file_path": v("new.md")}),
    ]),
    ("edit_not_found_no_event", lambda s: s.call("edit", file_path="notes/a.md", old_string="zzz", new_string="q"), []),
    ("multiedit", lambda s: s.call("multiedit", file_path="notes/a.md", edits=[
        {"old_string": "alpha", "new_string": "ALPHA"}, {"old_string": "gamma", "new_string": "g1\ng2\ng3"}]), [
        ("file_edit", {"edit_tool": "multiedit", "lines_added": 4 + 2, "lines_deleted": 2,
                       "lines_modified": 2, "diff_summary": "2 edits, +6 -2"}),
    ]),
    ("grep_counts_lines", lambda s: s.call("grep", pattern="^(one|two|alpha)$"), [
        ("file_search", {"search_type": "grep", "query": "^(one|two|alpha)$", "files_matched": 3,
                         "files_opened_after": []}),
    ]),
    ("grep_include_filter", lambda s: s.call("grep", pattern="o", path="notes", include="*.{md,txt}"), [
        ("file_search", {"files_matched": 2}),
    ]),
    ("grep_cap_100", lambda s: s.call("write", file_path="big.txt", content="hit\n" * 150) and
        s.call("grep", pattern="hit"), [("file_write", {}), ("file_search", {"files_matched": 100})]),
    ("glob", lambda s: s.call("glob", pattern="**/*.md"), [
        ("file_search", {"search_type": "glob", "query": "**/*.md", "files_matched": 3}),
    ]),
    ("list_emits_browse", lambda s: s.call("list", path="notes"), [
        ("file_browse", {"directory_path": v("notes"), "files_listed": 2, "depth": 1}),
    ]),
    ("bash_ls_root", lambda s: s.call("bash", command="ls"), [
        ("file_browse", {"directory_path": ROOT, "files_listed": 6, "depth": 0}),
    ]),
    ("bash_ls_subdir_hidden", lambda s: s.call("bash", command="ls -la data/deep"), [
        ("file_browse", {"directory_path": v("data/deep"), "files_listed": 1, "depth": 2}),
    ]),
    ("bash_mkdir_p_one_event", lambda s: s.call("bash", command="mkdir -p a/b/c"), [
        ("dir_create", {"dir_path": v("a/b/c"), "depth": 3, "sibling_count": 0}),
    ]),
    ("bash_mkdir_siblings", lambda s: s.call("bash", command="mkdir x y && mkdir notes/sub"), [
        # parent dirs right after each creation: data, img, notes, x → 3; then + y → 4
        ("dir_create", {"dir_path": v("x"), "depth": 1, "sibling_count": 3}),
        ("dir_create", {"dir_path": v("y"), "depth": 1, "sibling_count": 4}),
        ("dir_create", {"dir_path": v("notes/sub"), "depth": 2, "sibling_count": 0}),
    ]),
    ("bash_mv_rename_snake_to_kebab", lambda s: s.call("bash", command="mv My_Notes.md my-notes.md"), [
        ("file_rename", {"old_path": v("My_Notes.md"), "new_path": v("my-notes.md"),
                         "naming_pattern_change": "snake_to_kebab"}),
    ]),
    ("bash_mv_move_full_dest", lambda s: s.call("bash", command="mkdir -p arch/2025 && mv readme.txt arch/2025/readme.txt"), [
        ("dir_create", {"depth": 2}),
        ("file_move", {"old_path": v("readme.txt"), "new_path": v("arch/2025/readme.txt"),
                       "destination_directory_depth": 2}),
    ]),
    ("bash_mv_into_dir_is_move", lambda s: s.call("bash", command="mv readme.txt notes/"), [
        ("file_move", {"old_path": v("readme.txt"), "new_path": v("notes/readme.txt"),
                       "destination_directory_depth": 1}),
    ]),
    ("bash_cp_backup", lambda s: s.call("bash", command="cp notes/a.md notes/a.md.bak; cp readme.txt r2.txt"), [
        ("file_copy", {"source_path": v("notes/a.md"), "dest_path": v("notes/a.md.bak"), "is_backup": True}),
        ("file_copy", {"source_path": v("readme.txt"), "dest_path": v("r2.txt"), "is_backup": False}),
    ]),
    ("bash_rm_bundle_file_and_temp", lambda s: s.call("bash", command="rm readme.txt scratch.tmp"), [
        ("file_delete", {"file_path": v("readme.txt"), "file_age_ms": None, "was_temporary": False}),
        ("file_delete", {"file_path": v("scratch.tmp"), "file_age_ms": None, "was_temporary": True}),
    ]),
    ("bash_rm_created_file_age", lambda s: (s.call("write", file_path="t.log", content="x"), s.advance(5000),
                                            s.call("bash", command="rm t.log")), [
        ("file_write", {}), ("file_delete", {"file_path": v("t.log"), "was_temporary": True}),
    ]),
    ("bash_rm_rf_dir_one_event", lambda s: s.call("bash", command="rm -rf data"), [
        ("file_delete", {"file_path": v("data"), "was_temporary": False}),
    ]),
    ("bash_touch_creates", lambda s: s.call("bash", command="touch notes/empty.md"), [
        ("file_write", {"operation": "create", "content_length": 0, "after_hash": None}),
    ]),
    ("bash_and_chain_stops", lambda s: s.call("bash", command="mkdir notes && mkdir never"), []),
    ("bash_semicolon_continues", lambda s: s.call("bash", command="mkdir notes ; mkdir later"), [
        ("dir_create", {"dir_path": v("later")}),
    ]),
]


@pytest.mark.parametrize("case_id, steps, expected", CASES, ids=[c[0] for c in CASES])
def test_tool_events_and_derived_fields(tmp_path, case_id, steps, expected):
    s = open_session(tmp_path, FILES, annotations=ANN)
    n0 = len(s.events)
    steps(s)
    got = [e for e in s.events[n0:] if e["event_type"] not in SIMULATION_TYPES]
    assert [e["event_type"] for e in got] == [t for t, _ in expected], json.dumps(got, indent=1)[:3000]
    for ev, (_t, fields) in zip(got, expected):
        for k, val in fields.items():
            assert ev[k] == val, (case_id, ev["event_type"], k, ev[k], val)
        parse_event(ev)  # every emitted event validates against the schema


def test_read_content_length_is_formatted_output_length(tmp_path):
    s = open_session(tmp_path, FILES)
    res = s.call("read", file_path="notes/a.md", offset=1, limit=2)
    ev = s.events[-2]
    assert ev["event_type"] == "file_read" and ev["content_length"] == len(res.output)
    assert ev["view_range"] == [1, 2] and "continue with offset=3" in res.output
    assert res.content == "# A\nalpha"


def test_revisit_interval_and_view_count(tmp_path):
    s = open_session(tmp_path, FILES)
    s.call("read", file_path="notes/a.md")
    s.advance(1234)
    s.call("read", file_path="notes/b.md")
    t_b = s.clock_ms
    s.advance(766)
    s.call("read", file_path="notes/a.md")
    reads = [e for e in s.events if e["event_type"] == "file_read"]
    assert [r["view_count"] for r in reads] == [1, 1, 2]
    assert reads[2]["revisit_interval_ms"] == round(reads[2]["timestamp"] - reads[0]["timestamp"])
    assert reads[2]["revisit_interval_ms"] > 2000
    xref = [e for e in s.events if e["event_type"] == "cross_file_reference"]
    assert xref[-1]["interval_ms"] == round(reads[2]["timestamp"] - t_b)


def test_file_age_ms_since_creation(tmp_path):
    s = open_session(tmp_path, FILES)
    s.call("write", file_path="t.log", content="x")
    t_create = s.events[-2]["timestamp"]
    s.advance(5000)
    s.call("bash", command="mv t.log logs.log")  # a move keeps the creation time
    s.call("bash", command="rm logs.log")
    d = next(e for e in s.events if e["event_type"] == "file_delete")
    assert d["file_age_ms"] == round(d["timestamp"] - t_create) and d["file_age_ms"] > 5000


def test_line_cap_and_output_cap(tmp_path):
    long_line = "x" * 2500
    many = "".join(f"line {i} " + "y" * 80 + "\n" for i in range(1000))
    s = open_session(tmp_path, {"long.txt": long_line + "\n", "many.txt": many})
    r = s.call("read", file_path="long.txt")
    assert "x" * 2000 + " [line cut]" in r.output and "x" * 2001 not in r.output
    r = s.call("read", file_path="many.txt")
    ev = s.events[-2]
    assert len(r.output) <= 30_000 + 100 and ev["view_range"][1] < 1000
    assert f"offset={ev['view_range'][1] + 1}" in r.output


def test_media_store_contents_for_write_and_edit(tmp_path):
    s = open_session(tmp_path, FILES)
    s.call("write", file_path="r.md", content="a\nb\n")
    w = s.events[-2]
    assert s.media.read(w["media_ref"]["path"]).decode() == "a\nb\n"
    assert w["media_ref"]["hash"] == w["after_hash"]
    s.call("edit", file_path="r.md", old_string="b", new_string="c")
    e = s.events[-2]
    assert s.media.read(e["media_ref_old"]["path"]).decode() == "a\nb\n"
    assert s.media.read(e["media_ref_new"]["path"]).decode() == "a\nc\n"
    diff = s.media.read(e["media_ref_diff"]["path"]).decode()
    assert diff.startswith("--- a/r.md\n+++ b/r.md\n") and "-b\n+c\n" in diff
    # the old blob of the edit equals the write's blob: deduplicated
    assert s.media.entries[w["after_hash"]]["references"] == 2
    assert s.media.stats["deduplicated_saves"] == 1


def test_fs_snapshot_fields(tmp_path):
    s = open_session(tmp_path, FILES)
    snap = s.events[1]
    assert snap["event_type"] == "fs_snapshot"
    assert snap["total_files"] == len(FILES)
    assert snap["file_count_by_type"] == {"csv": 1, "jpg": 1, "md": 3, "png": 1, "tmp": 1, "txt": 1}
    assert snap["max_depth"] == 3  # data/deep/x.csv
    listing = json.loads(s.media.read(snap["media_ref"]["path"]))
    assert listing == sorted(listing) and "data/deep/x.csv" in listing and "data" in listing


def test_error_encounter_and_response(tmp_path):
    s = open_session(tmp_path, FILES)
    s.call("read", file_path="missing.md")
    s.call("read", file_path="notes/a.md")
    types = [e["event_type"] for e in s.events[2:]]
    assert types == ["tool_call", "error_encounter", "context_switch", "file_read", "tool_call", "error_response"]
    tc, enc, resp = s.events[2], s.events[3], s.events[-1]
    assert tc["success"] is False and tc["error_type"] == "tool_error" and len(tc["error_message"]) <= 200
    assert enc["file_path"] == v("missing.md") and enc["severity"] == "medium" and enc["tool_name"] == "read"
    assert resp["strategy"] == "retry" and resp["error_event_id"] == enc["event_id"]
    assert resp["latency_ms"] == round(resp["timestamp"] - enc["timestamp"])
    s.call("grep", pattern="(")  # invalid regex → error
    s.call("glob", pattern="*.md")
    assert s.events[-1]["event_type"] == "error_response" and s.events[-1]["strategy"] == "rethink"


def test_iteration_frame(tmp_path):
    s = open_session(tmp_path, FILES)
    with s.iteration(input_tokens=100, output_tokens=10):
        s.call("read", file_path="notes/a.md")
        s.call("read", file_path="nope")
    types = [e["event_type"] for e in s.events[2:]]
    assert types[:2] == ["iteration_start", "llm_response"] and types[-1] == "iteration_end"
    end = s.events[-1]
    assert end["tools_called"] == 2 and end["has_tool_error"] is True
    assert end["duration_ms"] == round(end["timestamp"] - s.events[2]["timestamp"])


@pytest.mark.parametrize("old, new, want", [
    ("my_notes.md", "my-notes.md", "snake_to_kebab"),
    ("my-notes.md", "my_notes.md", "kebab_to_snake"),
    ("My_Notes.md", "MyNotes.md", "mixed_to_other"),
    ("mynotes.md", "MyNotes.md", "case_change"),
    ("MyNotes.md", "mynotes.md", "case_change"),
    ("a_b.md", "ab.md", "case_change"),
    ("report.md", "summary.md", "other"),
])
def test_naming_pattern_change(old, new, want):
    assert naming_pattern_change(old, new) == want


def test_unique_line_delta():
    assert unique_line_delta("a\nb\nc\n", "a\nB\nc\nd\n") == (2, 1)
    assert unique_line_delta("a\na\n", "a\n") == (0, 0)


def test_text_in_another_unicode_form_is_found_and_edited_keeping_the_file_bytes_BR3_13(tmp_path):
    """BR3-13: a file whose name and text are in decomposed Unicode (NFD, as macOS writes them) and a request typed
    in composed form (NFC, as keyboards and models type it): read showed 'café' but grep missed it and edit said
    'old_string not found'. The kind: matching is blind to the normalisation form — grep (pattern and include),
    edit, multiedit and replace_all find what read shows; grep shows the line as read shows it; an edit replaces
    the matched stretch only, every other byte of the file stays as it was (NFD stays NFD); the query recorded is
    what was typed. Korean jamo (NFD Hangul, composing across characters of class 0) and text that is NFC already
    behave the same."""
    import unicodedata as ud

    nfd = lambda s: ud.normalize("NFD", s)  # noqa: E731
    name = nfd("Résumé_Zoë.md")
    body = nfd("Meeting at the café on Friday.\nThe café closes at 5; café au lait.\n한국어 메모: 회의록\n")
    s = open_session(tmp_path, {name: body, "other.md": "Lunch at the café.\n"})
    try:
        g = s.call("grep", pattern="café", path=".")
        assert g.ok and "Found 3 matching lines" in g.output, g.output
        assert "Résumé_Zoë.md:1: Meeting at the café on Friday." in ud.normalize("NFC", g.output)
        assert s.call("grep", pattern="caf.\\b", path=".", include="Résumé*").output.startswith(
            "Found 2 matching lines")  # '.' is one character: é, as typed
        assert "Found 1 matching lines" in s.call("grep", pattern="회의록", path=".").output
        search = [e for e in s.events if e["event_type"] == "file_search"][-1]
        assert search["query"] == "회의록"
        before = s.call("read", file_path="Résumé_Zoë.md").output
        e = s.call("edit", file_path="Résumé_Zoë.md", old_string="the café on", new_string="the bistro on")
        assert e.ok, e.output
        disk = next(p for p in (tmp_path / "work").rglob("*.md") if ud.normalize("NFC", p.name) == "Résumé_Zoë.md")
        text = disk.read_text(encoding="utf-8")
        assert text == body.replace(nfd("the café on"), "the bistro on")  # the rest keeps its NFD bytes
        assert ud.normalize("NFC", before) != ud.normalize("NFC", s.call("read", file_path="Résumé_Zoë.md").output)
        many = s.call("edit", file_path="Résumé_Zoë.md", old_string="café", new_string="tea")
        assert not many.ok and "occurs 2 times" in many.output
        assert s.call("edit", file_path="Résumé_Zoë.md", old_string="café", new_string="tea", replace_all=True).ok
        assert s.call("multiedit", file_path="Résumé_Zoë.md",
                      edits=[{"old_string": "회의록", "new_string": "notes"}]).ok
        text = disk.read_text(encoding="utf-8")
        assert "café" not in ud.normalize("NFC", text) and "notes" in text and nfd("한국어 메모") in text
        assert not s.call("edit", file_path="Résumé_Zoë.md", old_string="é", new_string="e").ok  # no é is left
    finally:
        s.finish()


def test_nfc_spans_never_match_half_a_composed_character():
    """BR3-13's matcher: a match begins and ends where NFC does not join characters."""
    import unicodedata as ud

    from filegram_ray.engine.lines import nfc_spans

    text = ud.normalize("NFD", "résumé, e, é")
    assert [text[a:b] for a, b in nfc_spans(text, "é")] == [ud.normalize("NFD", "é")] * 3
    assert [text[a:b] for a, b in nfc_spans(text, "e")] == ["e"]  # the bare e, not the base of an é
    hangul = ud.normalize("NFD", "각 가")  # L V T, L V: jamo of class 0 that compose
    assert [hangul[a:b] for a, b in nfc_spans(hangul, "가")] == [ud.normalize("NFD", "가")]
    assert nfc_spans("plain ascii", "ascii") == [(6, 11)] and nfc_spans("x", "") == []
