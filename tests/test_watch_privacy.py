"""Privacy of `filegram watch`, on by default: only named folders; secrets and ignored paths never recorded;
per-folder opt-out; redaction; content off; `--forget PATH` removes events and blobs; nothing leaves the machine."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest
from watch_helpers import Tail, all_events, brief, file_events, start

from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.forget import forget
from filegram_ray.watch.observer import Watcher
from filegram_ray.watch.privacy import Redactor
from filegram_ray.watch.store import StoreBusyError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")


def _store_bytes(store: Path) -> bytes:
    """Every byte the store holds (logs, blobs, diffs, shadows, checkpoint, summaries)."""
    return b"\n".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and p.name != "lock")


def test_redactor_replaces_personal_data_and_keys():
    text = ("Mail jane.doe@example.org, call (415) 555-2671 or +44 20 7946 0958.\n"
            "Card 4111 1111 1111 1111; not a card: 4111 1111 1111 1112; date 2024-01-05; version 1.2.3.\n"
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\npassword = 'hunter2horse'\n"
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
            "The key insight of the meeting was about secret sauce.\n")
    out, counts = Redactor("US").redact(text)
    for raw in ("jane.doe@example.org", "555-2671", "7946 0958", "4111 1111 1111 1111", "AKIAIOSFODNN7EXAMPLE",
                "hunter2horse", "b3BlbnNzaC1rZXktdjEAAAAA"):
        assert raw not in out
    assert counts == {"email": 1, "phone": 2, "card": 1, "key": 2, "private_key": 1}
    assert "4111 1111 1111 1112" in out and "2024-01-05" in out and "version 1.2.3" in out  # Luhn-invalid, dates
    assert out.endswith("The key insight of the meeting was about secret sauce.\n")  # prose untouched


def test_secrets_ignored_paths_and_unnamed_folders_are_never_recorded(tmp_path):
    sibling = tmp_path / "not-named"
    sibling.mkdir()
    token = "TOPSECRET-4242"
    w, root = start(tmp_path)
    tail = Tail(w)
    try:
        (root / ".ssh").mkdir()
        (root / ".ssh" / "id_rsa").write_text(f"key {token}\n")
        (root / "keys").mkdir()
        (root / "keys" / "server.pem").write_text(f"pem {token}\n")
        shutil.copy(root / "keys" / "server.pem", root / "keys" / "server2.pem")
        (root / ".env").write_text(f"API={token}\n")
        (root / "credentials.json").write_text(f'{{"t": "{token}"}}\n')
        (root / "node_modules").mkdir()
        (root / "node_modules" / "x.js").write_text(f"// {token}\n")
        (root / "keys" / "server.pem").read_text()
        os.symlink(sibling / "outside.txt", root / "link.txt")  # a link out of the tree is not followed
        (sibling / "outside.txt").write_text(f"outside {token}\n")
        (root / "notes.md").write_text("just notes\n")
        got = tail.brief()
    finally:
        w.stop()
    assert got == [("dir_create", "w/keys", 1, 0), ("file_write", "w/notes.md", "create", 11)]
    blob = _store_bytes(tmp_path / "store")
    for needle in (token, "id_rsa", "server.pem", ".env", "credentials", "node_modules", "not-named", "link.txt"):
        assert needle.encode() not in blob, needle


def test_store_inside_the_watched_folder_is_not_recorded(tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    w = Watcher(root / "fg-store", [str(root)], WatchConfig(content="full", debounce_ms=200, close_settle_ms=50),
                status_every_s=0).start()
    try:
        (root / "a.txt").write_text("a\n")
        w.sync()
        (root / "b.txt").write_text("b\n")
        w.sync()
    finally:
        w.stop()
    assert [brief(e) for e in file_events(root / "fg-store")] == [("file_write", "w/a.txt", "create", 2),
                                                                   ("file_write", "w/b.txt", "create", 2)]


def test_opt_out_marker_is_honoured(tmp_path):
    root = tmp_path / "w"
    (root / "private").mkdir(parents=True)
    (root / "private" / ".nofilegram").write_text("")
    (root / "private" / "diary.md").write_text("dear diary\n")
    w, root = start(tmp_path)
    tail = Tail(w)
    try:
        (root / "private" / "more.md").write_text("more diary\n")
        (root / "private" / "diary.md").read_text()
        (root / "team").mkdir()
        (root / "team" / "plan.md").write_text("plan v1\n")
        assert tail.brief() == [("dir_create", "w/team", 1, 0), ("file_write", "w/team/plan.md", "create", 8)]
        (root / "team" / ".nofilegram").write_text("")  # opting out while watching
        (root / "team" / "plan.md").write_text("plan v2\n")
        (root / "team" / "other.md").write_text("other\n")
        assert tail.brief() == []
        (root / "private" / ".nofilegram").unlink()  # opting back in: from when the watcher has seen it
        tail.new()
        (root / "private" / "diary.md").write_text("dear diary\nsecond entry\n")
        [ev] = tail.new()
        assert (ev["event_type"], ev["file_path"], ev["operation"]) == ("file_write", "/sandbox/w/private/diary.md",
                                                                        "overwrite")
        (root / "private" / "diary.md").write_text("dear diary\nsecond entry\nthird\n")
        assert tail.brief() == [("file_edit", "w/private/diary.md", 1, 0)]
    finally:
        w.stop()
    assert b"more diary" not in _store_bytes(tmp_path / "store")


def test_redacted_content_mode_applies_to_blobs_diffs_and_shadows(tmp_path):
    w, root = start(tmp_path, content="redacted")
    tail = Tail(w)
    try:
        (root / "contacts.md").write_text("Ann: ann@corp.example, +1 415 555 2671\n")
        tail.new()
        (root / "contacts.md").write_text("Ann: ann@corp.example, +1 415 555 2671\nCard 5555 5555 5555 4444\n"
                                          "token = ghp_abcdefghijklmnopqrstuvwxyz0123456789\n")
        [ev] = tail.new()
    finally:
        w.stop()
    store = tmp_path / "store"
    diff = (store / "media" / ev["media_ref_diff"]["path"]).read_text()
    assert "+Card [CARD]\n" in diff and "+token = [KEY]\n" in diff
    assert (store / "media" / ev["media_ref_old"]["path"]).read_text() == "Ann: [EMAIL], [PHONE]\n"
    assert (ev["lines_added"], ev["lines_deleted"]) == (2, 0)
    blob = _store_bytes(store)
    for raw in (b"ann@corp.example", b"555 2671", b"5555 5555 5555 4444", b"ghp_abcdefghijklmnop"):
        assert raw not in blob


def test_content_off_stores_no_text_but_keeps_the_behaviour(tmp_path):
    w, root = start(tmp_path, content="off")
    tail = Tail(w)
    try:
        (root / "a.md").write_text("# private heading\nline\n")
        tail.new()
        (root / "a.md").write_text("# private heading\nline\nanother line\n")
        evs = tail.new()
    finally:
        w.stop()
    assert [brief(e) for e in evs] == [("file_edit", "w/a.md", 1, 0)]
    assert not any(k.startswith("media_ref") for e in all_events(tmp_path / "store") for k in e)
    assert not list((tmp_path / "store" / "media").rglob("*.blob")) and not list(
        (tmp_path / "store" / "media").rglob("*.diff"))
    assert b"private heading" not in _store_bytes(tmp_path / "store")


def test_forget_removes_events_and_blobs_of_a_path(tmp_path):
    w, root = start(tmp_path)
    try:
        (root / "keep.md").write_text("KEEP-CONTENT\n")
        (root / "drop").mkdir()
        (root / "drop" / "plan.md").write_text("PLAN-XYZ first\n")
        w.sync()
        (root / "drop" / "plan.md").write_text("PLAN-XYZ first\nPLAN-XYZ second\n")
        w.sync()
        os.rename(root / "drop" / "plan.md", root / "drop" / "plan2.md")
        (root / "drop" / "plan2.md").read_text()
        (root / "keep.md").read_text()
        w.sync()
        with pytest.raises(StoreBusyError):
            forget(tmp_path / "store", str(root / "drop"))
    finally:
        w.stop()
    store = tmp_path / "store"
    assert b"PLAN-XYZ" in _store_bytes(store)
    r = forget(store, str(root / "drop"))
    assert r["events_removed"] >= 6 and r["media_removed"] >= 3 and r["still_exists"]
    left = [brief(e) for e in file_events(store)]
    # the context switch from drop/plan2.md to keep.md named the forgotten path: gone too
    assert left == [("file_write", "w/keep.md", "create", 13), ("file_read", "w/keep.md", 1)]
    assert b"PLAN-XYZ" not in _store_bytes(store)
    for sub in ("sessions", "media", "shadow"):  # the name stays only in the index: the file still exists
        assert b"drop/" not in _store_bytes(store / sub), sub
    # the store still works after forgetting: a restart records new changes, not the forgotten file again
    w = Watcher(store, status_every_s=0).start()
    try:
        w.sync()
        (root / "keep.md").write_text("KEEP-CONTENT\nmore\n")
        w.sync()
    finally:
        w.stop()
    assert [brief(e) for e in file_events(store)][2:] == [("file_edit", "w/keep.md", 1, 0)]


def test_nothing_leaves_the_machine(tmp_path, monkeypatch):
    """The watcher and an incremental memory update run with every socket refused."""
    from filegram_ray.memory.incremental import update_memory
    from filegram_ray.storage import RunDir
    from filegram_ray.watch.export import watch_units
    from filegram_ray.watch.store import WatchStore

    class NoSocket(socket.socket):
        def __init__(self, *a, **k):
            raise AssertionError("network use")

    monkeypatch.setattr(socket, "socket", NoSocket)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("network use")))
    w, root = start(tmp_path)
    try:
        (root / "a.md").write_text("# A\n\nSome text about the plan.\n")
        w.sync()
    finally:
        w.stop()
    st = WatchStore.open(tmp_path / "store")
    units, _ = watch_units(st)
    r = update_memory(RunDir(st.path), "real_user", units, embedder="hashing")
    assert r["encoded_now"] == 1
