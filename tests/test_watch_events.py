"""`filegram watch` on real folders with the real inotify observer: each file operation → the exact events and
diffs (issue 20, "Done when"). Every event read back is validated against the engine's schema."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from watch_helpers import Tail, all_events, file_events, media_text, start

from filegram_ray.engine.media import apply_diff, content_hash, unified_diff
from filegram_ray.schema.events import KEPT_TYPES

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")


@pytest.fixture
def watch(tmp_path):
    w, root = start(tmp_path)
    yield w, root, Tail(w)
    w.stop()


def test_create_is_one_write_with_its_snapshot_and_char_length(watch):
    w, root, tail = watch
    text = "héllo ✓\nsecond line\n"  # 20 characters, 24 UTF-8 bytes
    (root / "notes.md").write_text(text, encoding="utf-8")
    [ev] = tail.new()
    assert (ev["event_type"], ev["file_path"], ev["operation"]) == ("file_write", "/sandbox/w/notes.md", "create")
    assert ev["content_length"] == len(text) == 20  # characters, not bytes (reference §12 normalisation)
    assert ev["directory_depth"] == 0 and ev["file_type"] == "md"
    assert ev["after_hash"] == content_hash(text) and ev["before_hash"] is None
    assert media_text(w.store.path, ev["media_ref"]) == text
    assert ev["message_id"] is None and ev["model_provider"] is None and ev["profile_id"] == "real_user"


def test_edit_records_exact_unified_diff_and_both_snapshots(watch):
    w, root, tail = watch
    f = root / "plan.txt"
    before = "alpha\nbeta\ngamma\n"
    f.write_text(before)
    tail.new()
    after = "alpha\nBETA\ngamma\ndelta\n"
    with open(f, "w") as fh:  # an in-place rewrite, as most editors without atomic save do
        fh.write(after)
    [ev] = tail.new()
    assert ev["event_type"] == "file_edit" and ev["edit_tool"] == "external"
    assert (ev["lines_added"], ev["lines_deleted"], ev["lines_modified"]) == (2, 1, 1)  # engine's unique-line rule
    assert ev["diff_summary"] == "+2 -1"
    assert "media_ref_diff" in ev and "diff_media" not in ev  # reference §12 normalisation of the diff key
    assert media_text(w.store.path, ev["media_ref_diff"]) == unified_diff(before, after, "w/plan.txt")
    assert media_text(w.store.path, ev["media_ref_old"]) == before
    assert media_text(w.store.path, ev["media_ref_new"]) == after
    assert (ev["before_hash"], ev["after_hash"]) == (content_hash(before), content_hash(after))
    assert apply_diff(media_text(w.store.path, ev["media_ref_diff"]), before) == after  # exact: patch rebuilds it
    with open(f, "w") as fh:  # only the final newline goes: still an edit whose diff rebuilds the text exactly
        fh.write(after.rstrip("\n"))
    [ev] = tail.new()
    assert ev["event_type"] == "file_edit"
    assert apply_diff(media_text(w.store.path, ev["media_ref_diff"]), after) == after.rstrip("\n")


@pytest.mark.parametrize("tmp_name", [".report.md.swp-tmp", "report.md.tmp~", "report.md.part123"])
def test_atomic_save_is_one_edit_of_the_target_and_the_temp_never_appears(watch, tmp_name):
    w, root, tail = watch
    f = root / "report.md"
    f.write_text("# Report\n\nDraft.\n")
    tail.new()
    tmp = root / tmp_name
    tmp.write_text("# Report\n\nFinal text.\n")
    os.replace(tmp, f)
    evs = tail.new()
    assert [(e["event_type"], e["file_path"]) for e in evs] == [("file_edit", "/sandbox/w/report.md")]
    assert media_text(w.store.path, evs[0]["media_ref_diff"]) == unified_diff(
        "# Report\n\nDraft.\n", "# Report\n\nFinal text.\n", "w/report.md")
    assert not any(tmp_name in str(v) for e in all_events(w.store.path) for v in e.values())


def test_delete_then_recreate_is_an_edit(watch):
    w, root, tail = watch
    f = root / "a.txt"
    f.write_text("one\n")
    tail.new()
    f.unlink()
    f.write_text("one\ntwo\n")
    assert tail.brief() == [("file_edit", "w/a.txt", 1, 0)]


def test_rename_move_and_delete(watch):
    w, root, tail = watch
    (root / "my_notes.md").write_text("x\n")
    (root / "archive").mkdir()
    assert tail.brief() == [("file_write", "w/my_notes.md", "create", 2), ("dir_create", "w/archive", 1, 0)]
    os.rename(root / "my_notes.md", root / "my-notes.md")
    assert tail.brief() == [("file_rename", "w/my_notes.md", "w/my-notes.md", "snake_to_kebab")]
    os.rename(root / "my-notes.md", root / "archive" / "my-notes.md")
    assert tail.brief() == [("file_move", "w/my-notes.md", "w/archive/my-notes.md", 1)]
    (root / "archive" / "my-notes.md").unlink()
    [ev] = tail.new()
    assert (ev["event_type"], ev["file_path"], ev["was_temporary"]) == \
        ("file_delete", "/sandbox/w/archive/my-notes.md", False)
    assert ev["file_age_ms"] is not None and ev["file_age_ms"] >= 0  # created in this session


def test_moves_out_of_and_into_the_watched_tree(watch, tmp_path):
    w, root, tail = watch
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "leaving.txt").write_text("bye\n")
    tail.new()
    shutil.move(root / "leaving.txt", outside / "leaving.txt")
    assert tail.brief() == [("file_delete", "w/leaving.txt")]  # inotify cannot tell where it went
    (outside / "arriving.csv").write_text("a,b\n1,2\n")
    shutil.move(outside / "arriving.csv", root / "arriving.csv")
    [ev] = tail.new()
    assert (ev["event_type"], ev["file_path"], ev["operation"]) == ("file_write", "/sandbox/w/arriving.csv",
                                                                    "create")
    assert media_text(w.store.path, ev["media_ref"]) == "a,b\n1,2\n"


def test_copy_is_one_copy_event_and_backup_flag(watch):
    w, root, tail = watch
    (root / "data.json").write_text('{"a": 1}\n')
    tail.new()
    shutil.copy(root / "data.json", root / "data.json.bak")
    assert tail.brief() == [("file_copy", "w/data.json", "w/data.json.bak", True)]  # cp's read is part of it
    shutil.copy(root / "data.json", root / "copy.json")
    assert tail.brief() == [("file_copy", "w/data.json", "w/copy.json", False)]


def test_mkdir_nested_and_folder_moves_carry_children(watch, tmp_path):
    w, root, tail = watch
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    assert tail.brief() == [("dir_create", "w/a", 1, 0), ("dir_create", "w/a/b", 2, 0), ("dir_create", "w/c", 1, 1)]
    (root / "a" / "b" / "deep.md").write_text("deep\n")
    tail.new()
    os.rename(root / "a", root / "c" / "a2")  # a folder move: one event, the children follow
    assert tail.brief() == [("file_move", "w/a", "w/c/a2", 1)]
    (root / "c" / "a2" / "b" / "deep.md").write_text("deep\ndeeper\n")
    assert tail.brief() == [("file_edit", "w/c/a2/b/deep.md", 1, 0)]
    os.rename(root / "c", root / "c_renamed")
    assert tail.brief() == [("file_rename", "w/c", "w/c_renamed", "other")]
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(root / "c_renamed", outside / "gone")  # a folder leaves: its files and folders are deleted
    assert tail.brief() == [("file_delete", "w/c_renamed/a2/b/deep.md"), ("file_delete", "w/c_renamed/a2/b"),
                            ("file_delete", "w/c_renamed/a2"), ("file_delete", "w/c_renamed")]
    shutil.move(outside / "gone", root / "back")  # and comes back in: new folders and files
    got = tail.brief()
    assert got[0] == ("dir_create", "w/back", 1, 0)
    assert sorted(got[1:]) == [("dir_create", "w/back/a2", 2, 0), ("dir_create", "w/back/a2/b", 3, 0),
                               ("file_write", "w/back/a2/b/deep.md", "create", 12)]


def test_reads_view_counts_context_switches_and_cross_references(watch):
    w, root, tail = watch
    (root / "src.md").write_text("source\n")
    (root / "out.md").write_text("out\n")
    tail.new()
    (root / "src.md").read_text()
    (root / "out.md").read_text()
    (root / "src.md").read_text()
    with open(root / "out.md", "a") as fh:
        fh.write("more\n")
    got = tail.brief()
    assert got == [
        ("context_switch", None, "w/src.md"), ("file_read", "w/src.md", 1),
        ("context_switch", "w/src.md", "w/out.md"), ("cross_file_reference", "w/src.md", "w/out.md",
                                                     "sequential_access"), ("file_read", "w/out.md", 1),
        ("context_switch", "w/out.md", "w/src.md"), ("cross_file_reference", "w/out.md", "w/src.md",
                                                     "sequential_access"), ("file_read", "w/src.md", 2),
        ("cross_file_reference", "w/src.md", "w/out.md", "read_then_edit"), ("file_edit", "w/out.md", 1, 0)]


def test_binary_and_oversized_files_have_no_blob(tmp_path):
    w, root = start(tmp_path, max_blob_bytes=1000)
    tail = Tail(w)
    try:
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
        (root / "img.png").write_bytes(png)
        (root / "big.txt").write_text("x" * 5000)
        evs = tail.new()
        assert [(e["event_type"], e["file_path"], e["content_length"]) for e in evs] == [
            ("file_write", "/sandbox/w/img.png", len(png)), ("file_write", "/sandbox/w/big.txt", 5000)]
        assert all("media_ref" not in e and e["after_hash"] is None for e in evs)
        (root / "img.png").write_bytes(png + b"\x00more")
        [ev] = tail.new()
        assert (ev["event_type"], ev["operation"], ev["content_length"]) == ("file_write", "overwrite", len(png) + 5)
        assert "media_ref" not in ev
    finally:
        w.stop()
    assert not list((tmp_path / "store" / "media" / "blobs").glob("*.blob")) or all(
        b"PNG" not in b.read_bytes() for b in (tmp_path / "store" / "media" / "blobs").glob("*.blob"))


def test_files_deleted_before_they_are_read_leave_nothing(watch):
    w, root, tail = watch
    for i in range(20):
        f = root / f"flash{i}.txt"
        f.write_text("short-lived\n")
        f.unlink()
    assert tail.new() == []
    assert w.recorder.stats["temp_files_skipped"] == 20


def test_burst_of_2000_files(tmp_path):
    w, root = start(tmp_path)
    tail = Tail(w)
    try:
        for d in range(4):
            (root / f"batch{d}").mkdir()
        for i in range(2000):
            (root / f"batch{i % 4}" / f"f{i:04d}.txt").write_text(f"file {i}\n")
        w.sync(timeout=120)
        evs = tail.new()
    finally:
        w.stop()
    writes = [e for e in evs if e["event_type"] == "file_write"]
    assert [e["event_type"] for e in evs].count("dir_create") == 4
    assert len(writes) == 2000 and len(evs) == 2004
    assert {e["file_path"] for e in writes} == {f"/sandbox/w/batch{i % 4}/f{i:04d}.txt" for i in range(2000)}
    assert all(e["operation"] == "create" and e["content_length"] == len(f"file {int(e['file_path'][-8:-4])}\n")
               for e in writes)
    assert all(media_text(w.store.path, e["media_ref"]) == f"file {int(e['file_path'][-8:-4])}\n"
               for e in writes[::97])
    ts = [e["timestamp"] for e in all_events(w.store.path)]
    assert ts == sorted(ts)  # committed in timestamp order


def test_session_frame_and_only_kept_or_session_types(tmp_path):
    w, root = start(tmp_path)
    (root / "x.txt").write_text("x\n")
    w.sync()
    w.stop()
    evs = all_events(tmp_path / "store")
    types = [e["event_type"] for e in evs]
    assert types == ["session_start", "fs_snapshot", "file_write", "fs_snapshot", "session_end"]
    assert set(types) <= set(KEPT_TYPES) | {"session_start", "session_end", "fs_snapshot"}
    assert evs[1]["total_files"] == 0 and evs[3]["total_files"] == 1  # snapshot before / after the session
    # reference §12 normalisation: the engine's listing blob (sorted paths), not upstream's nested tree
    assert "directory_tree" not in evs[3] and json.loads(media_text(tmp_path / "store", evs[3]["media_ref"])) == \
        ["w", "w/x.txt"]
    # and the post-execution filter turns the virtual paths into folder-relative ones (not bare basenames)
    from filegram_ray.engine.filter import filter_events

    (root / "sub").mkdir()
    assert filter_events([{**evs[2], "file_path": "/sandbox/w/sub/x.txt"}])[0]["file_path"] == "sub/x.txt"
    assert len(file_events(tmp_path / "store")) == 1


def test_several_folders_each_its_own_virtual_root(tmp_path):
    from watch_helpers import config

    from filegram_ray.watch.observer import Watcher
    from filegram_ray.watch.store import StoreError

    a, b = tmp_path / "one" / "docs", tmp_path / "two" / "docs"  # same base name: labels docs, docs-2
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    with pytest.raises(StoreError, match="nested"):
        Watcher(tmp_path / "bad", [str(tmp_path / "one"), str(a)], config()).start()
    w = Watcher(tmp_path / "store", [str(a), str(b)], config(), status_every_s=0).start()
    tail = Tail(w)
    try:
        (a / "x.md").write_text("x\n")
        (b / "sub").mkdir()
        # (one watch per folder: the order between folders is the order of arrival)
        assert sorted(tail.brief()) == [("dir_create", "docs-2/sub", 1, 0), ("file_write", "docs/x.md", "create", 2)]
        os.rename(a / "x.md", b / "sub" / "x.md")  # the kernel reports a departure and an arrival: one move
        assert tail.brief() == [("file_move", "docs/x.md", "docs-2/sub/x.md", 1)]
    finally:
        w.stop()
    starts = [e["target_directory"] for e in all_events(tmp_path / "store") if e["event_type"] == "session_start"]
    assert starts == ["/sandbox/docs", "/sandbox/docs-2"]
