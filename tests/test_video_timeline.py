"""GUI operation sequences (reference §11 event → gesture table), the status-line grammar and its parser, the
recovery score, and events rebuilt from (synthetic) caption rows. Pure Python: no video, no OCR."""

from __future__ import annotations

import json

import pytest
from video_helpers import T0, trajectory_events

from video.reconstruct import parse_status, reconstruct, score_recovery
from video.timeline import GESTURE_OF, TimingParams, build_timeline, group_events, status_text


@pytest.fixture
def events(tmp_path):
    return trajectory_events(tmp_path / "media")


def _media(tmp_path):
    def read(ref):
        if not isinstance(ref, dict):
            return None
        p = tmp_path / "media" / ref["path"]
        return p.read_text(encoding="utf-8") if p.exists() else None
    return read


def test_every_kept_event_type_gets_the_gesture_of_the_reference_table(events, tmp_path):
    tl = build_timeline(events, initial_files=["notes/meeting_notes.md", "data/sales_q3.csv", "readme.txt"],
                        media_of=_media(tmp_path))
    kinds = [g.kind for g in tl.gestures]
    # context_switch / cross_file_reference fold into the read they precede (same timestamp, same file)
    assert kinds == ["browse", "search", "read", "read", "dir_create", "write", "copy", "edit", "write", "delete",
                     "move", "write", "rename"]
    covered = {events[i]["event_type"] for g in tl.gestures for i in g.events}
    assert covered == set(GESTURE_OF)  # all 12 kept types are shown
    assert all(g.actions[0] == "click" for g in tl.gestures)  # every gesture starts with a visible click
    acts = {g.kind: g.actions[1:] for g in tl.gestures}
    assert tl.gestures[3].actions[1:] == ["tab_switch", "side_by_side"]
    assert acts["move"][:2] == ["context_menu:Cut", "context_menu:Paste"]
    assert acts["delete"][:2] == ["context_menu:Delete", "dialog:Delete"]
    assert acts["rename"][:2] == ["context_menu:Rename", "dialog:Rename"]
    assert acts["dir_create"][:2] == ["context_menu:New Folder", "dialog:New Folder"]
    assert acts["write"][-1] == "save" and "type" in acts["write"]
    side = next(s.screen for s in tl.steps if s.screen.right is not None)
    assert side.body.title == "notes/meeting_notes.md" and side.right.title.startswith("data/sales_q3.csv")
    # the final screen of the edit shows the diff lines of the media store
    edit_screen = next(s.screen for s in tl.steps if s.screen.body.kind == "diff")
    assert any(line.startswith("+Revenue grew by 26%") for line in edit_screen.body.lines)
    # the tree follows the file system: the moved report sits under output/, the deleted scratch file is gone
    last = tl.steps[-1].screen
    paths = {r.path for r in last.tree}
    assert "output/report.md" in paths and "report.md" not in paths and "scratch.tmp" not in paths
    assert "output/会议纪要_final.md" in paths


def test_timing_follows_timestamps_clamped_and_scaled_by_speed(events):
    fps = 15
    slow = build_timeline(events, fps=fps, timing=TimingParams(speed=1.0, min_gesture_s=1.0, max_gesture_s=20.0))
    fast = build_timeline(events, fps=fps, timing=TimingParams(speed=4.0, min_gesture_s=1.0, max_gesture_s=20.0))
    # the read at T0+11 s is followed 7 s later by the next read: 7 s at speed 1, 1.75 s at speed 4
    assert slow.gestures[2].duration_s == pytest.approx(7.0, abs=1 / fps)
    assert fast.gestures[2].duration_s == pytest.approx(1.75, abs=1 / fps)
    clamped = build_timeline(events, fps=fps, timing=TimingParams(speed=1.0, min_gesture_s=2.0, max_gesture_s=3.0))
    for g in clamped.gestures:
        assert 2.0 - 1 / fps <= g.duration_s <= 3.0 + 1 / fps
    # the video clock shows each gesture's session time
    assert slow.gestures[0].timestamp_ms == T0
    assert slow.frames == sum(s.frames for s in slow.steps)
    starts = [g.start_s for g in slow.gestures]
    assert starts == sorted(starts)


def test_same_events_same_timeline_and_no_repeated_screens(events):
    a, b = build_timeline(events), build_timeline(events)
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)
    assert [s.screen for s in a.steps] == [s.screen for s in b.steps]
    assert all(x.screen != y.screen for x, y in zip(a.steps, a.steps[1:]))  # identical screens merged


def test_group_events_keeps_orphans_as_their_own_gestures():
    evs = [{"event_type": "context_switch", "timestamp": 1.0, "to_file": "a.md"},
           {"event_type": "file_write", "timestamp": 2.0, "file_path": "b.md"},
           {"event_type": "cross_file_reference", "timestamp": 3.0, "source_file": "a.md", "target_file": "c.md"},
           {"event_type": "file_read", "timestamp": 3.0, "file_path": "c.md"},
           {"event_type": "tool_call", "timestamp": 4.0}]
    assert group_events(evs) == [[0], [1], [2, 3]]
    tl = build_timeline(evs)
    assert [g.kind for g in tl.gestures] == ["tab_switch", "write", "read"]


@pytest.mark.parametrize("kind,event", [
    ("read", {"file_path": "notes/a b.md", "view_range": [3, 40], "view_count": 2}),
    ("write", {"file_path": "个人知识库/报告.md", "content_length": 2363, "operation": "create"}),
    ("write", {"file_path": "r.md", "content_length": 12, "operation": "overwrite"}),
    ("edit", {"file_path": "r.md", "lines_added": 3, "lines_deleted": 1}),
    ("search", {"query": "*.csv", "files_matched": 4, "search_type": "glob"}),
    ("browse", {"directory_path": "data", "files_listed": 7}),
    ("dir_create", {"dir_path": "out/2024"}),
    ("move", {"old_path": "photo_todo.md", "new_path": "archive/photo_todo.md"}),
    ("rename", {"old_path": "a/draft.md", "new_path": "a/final.md"}),
    ("copy", {"source_path": "r.md", "dest_path": "r.md.bak"}),
    ("delete", {"file_path": "tmp/x.tmp"}),
])
def test_status_line_grammar_round_trips(kind, event):
    op = parse_status(status_text(kind, event))
    assert op is not None
    assert op["kind"] == ("overwrite" if event.get("operation") == "overwrite" else kind)
    if kind in ("move", "rename", "copy"):
        assert (op["old"], op["new"]) == (event.get("old_path") or event["source_path"],
                                          event.get("new_path") or event["dest_path"])
    elif kind == "search":
        assert op["q"] == "*.csv" and op["n"] == "4" and op["t"] == "glob"
    elif kind == "read":
        assert (op["path"], op["a"], op["b"], op["v"]) == ("notes/a b.md", "3", "40", "2")
    else:
        assert op.get("path") == (event.get("file_path") or event.get("directory_path") or event.get("dir_path"))


def test_status_parser_tolerates_what_ocr_drops():
    """OCR drops the spaces between CJK and Latin text and around commas (seen on our own recordings)."""
    op = parse_status("Moved01_个人知识库搭建_完整分析报告.mdto个人知识库搭/分析/报告/01_个人知识库搭建_完整分析报告.md")
    assert op == {"kind": "move", "old": "01_个人知识库搭建_完整分析报告.md",
                  "new": "个人知识库搭/分析/报告/01_个人知识库搭建_完整分析报告.md"}
    op = parse_status("Saved new file个人知识库搭/参考/02_明细.md,2363 chars")
    assert op["kind"] == "write" and op["path"] == "个人知识库搭/参考/02_明细.md" and op["n"] == "2363"
    op = parse_status("Saved 01_报告.md,+1-1 lines")
    assert op["kind"] == "edit" and op["a"] == "1" and op["d"] == "1"
    op = parse_status("Opened个人/分析/01_报告.md,lines1-218")
    assert op["kind"] == "read" and op["path"] == "个人/分析/01_报告.md" and op["b"] == "218"
    assert parse_status("Ready") is None and parse_status("Selected report.md") is None


def test_score_recovery_matches_in_order_and_forgives_ocr_slips():
    true = [{"event_type": "file_read", "file_path": "slides_final_v3.pptx"},
            {"event_type": "file_read", "file_path": "notes.md"},
            {"event_type": "file_delete", "file_path": "x.tmp"}]
    rec = [{"event_type": "file_read", "file_path": "slides final_v3.pptx"},   # a lost underscore
           {"event_type": "file_read", "file_path": "other.md"},
           {"event_type": "file_delete", "file_path": "x.tmp"},
           {"event_type": "file_delete", "file_path": "y.tmp"}]
    s = score_recovery(true, rec)
    assert s["file_read"] == {"true": 2, "recovered": 2, "matched": 1, "precision": 0.5, "recall": 0.5}
    assert s["file_delete"]["precision"] == 0.5 and s["file_delete"]["recall"] == 1.0
    assert s["all"]["matched"] == 2 and s["all"]["true"] == 3 and s["all"]["recovered"] == 4


def _rows(tl, width=1280, height=720):
    """Caption rows as a perfect OCR would give them: the status band, the clock and the main pane."""
    from video.frames import layout

    L = layout(width, height)
    rows, t = [], 0
    for s in tl.steps:
        sc = s.screen
        lines = [{"text": sc.clock, "box": [1100, 8, 1260, 26], "score": 1.0},
                 {"text": sc.status, "box": [14, L.body_bottom + 8, 900, L.body_bottom + 24], "score": 1.0}]
        y = L.body_top + 4
        for ln in sc.body.lines:
            lines.append({"text": ln, "box": [L.tree_w + 20, y, 1200, y + 16], "score": 1.0})
            y += L.line_h
        rows.append({"t_s": t / tl.fps, "width": width, "height": height, "lines": lines})
        t += s.frames
    return rows


def test_reconstruct_rebuilds_events_and_derived_fields(events, tmp_path):
    tl = build_timeline(events, media_of=_media(tmp_path))
    rec = reconstruct(_rows(tl), "p1_methodical/T-03")
    s = score_recovery(events, rec.events)
    assert s["all"]["precision"] == 1.0 and s["all"]["recall"] == 1.0
    by = {e["event_type"]: e for e in rec.events}
    assert by["file_read"]["view_range"] == [1, 3]
    assert by["cross_file_reference"]["source_file"] == "notes/meeting_notes.md"
    assert by["file_copy"]["is_backup"] is True and by["file_delete"]["was_temporary"] is True
    assert by["file_move"]["destination_directory_depth"] == 1
    assert all(e["profile_id"] == "real_user" for e in rec.events)
    # the clock gives the session timestamps back (second resolution)
    assert abs(rec.events[0]["timestamp"] - events[0]["timestamp"]) < 1000
    # written content seen on screen is stored as a blob
    w = next(e for e in rec.events if e["event_type"] == "file_write")
    assert "Quarterly summary" in rec.blobs[w["media_ref"]["path"]]
    assert len(rec.video_t_s) == len(rec.events) and rec.video_t_s == sorted(rec.video_t_s)
    # same captions, same events (ids derive from the recording id)
    assert reconstruct(_rows(tl), "p1_methodical/T-03").events == rec.events
