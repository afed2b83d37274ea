"""`filegram watch --forget PATH` follows a file through its renames and moves (fresh-user report: forgetting
``sub/a.md`` after ``mv a.md sub/a.md`` left ``a.md``'s write, read, context switch and blob in the store)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from watch_helpers import all_events, brief, file_events, start

from filegram_ray.watch.forget import forget

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")

SECRET = "Mail PRIV-MARK jane.doe@example.org, call (415) 555-2671.\n"


def _store_bytes(store: Path, *subs: str) -> bytes:
    dirs = [store / s for s in subs] if subs else [store]
    return b"\n".join(p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file() and p.name != "lock")


def _names(store: Path) -> set[str]:
    out = set()
    for e in all_events(store):
        for v in e.values():
            if isinstance(v, str) and v.startswith("/sandbox/"):
                out.add(v[len("/sandbox/"):])
    return out


def _moved_file_store(tmp_path):
    """keep.md; a.md (personal data) written, read, moved to sub/a.md, appended to; then b.md read (so a context
    switch leaves the moved file)."""
    w, root = start(tmp_path)
    try:
        (root / "keep.md").write_text("KEEP-CONTENT\n")
        (root / "sub").mkdir()
        w.sync()
        (root / "a.md").write_text(SECRET)
        w.sync()
        (root / "a.md").read_text()
        (root / "keep.md").read_text()
        w.sync()
        os.rename(root / "a.md", root / "sub" / "a.md")
        w.sync()
        with open(root / "sub" / "a.md", "a") as fh:
            fh.write("PRIV-MARK appended line\n")
        w.sync()
        (root / "sub" / "a.md").read_text()
        (root / "keep.md").read_text()
        w.sync()
    finally:
        w.stop()
    return tmp_path / "store", root


@pytest.mark.parametrize("by", ["new_name", "old_name", "event_path"])
def test_forget_follows_a_moved_file_back_and_forward(tmp_path, by):
    store, root = _moved_file_store(tmp_path)
    before = _names(store)
    assert {"w/a.md", "w/sub/a.md", "w/keep.md"} <= before
    assert b"PRIV-MARK" in _store_bytes(store, "media")
    target = {"new_name": str(root / "sub" / "a.md"), "old_name": str(root / "a.md"),
              "event_path": "/sandbox/w/a.md"}[by]
    r = forget(store, target)
    assert r["still_exists"]  # sub/a.md is on disk: known to the watcher, without content
    names = _names(store)
    assert "w/a.md" not in names and "w/sub/a.md" not in names, names
    assert "w/keep.md" in names and "w/sub" in names  # other files and the folder stay
    for sub in ("sessions", "media", "shadow"):
        data = _store_bytes(store, sub)
        assert b"PRIV-MARK" not in data and b"a.md" not in data, sub
    assert not any(e["event_type"] == "context_switch" and "a.md" in (e["from_file"] or "") + e["to_file"]
                   for e in all_events(store))
    left = [brief(e) for e in file_events(store)]
    assert ("file_write", "w/keep.md", "create", 13) in left
    # every blob/diff left is still referred to by an event
    refs = {e[f]["path"] for e in all_events(store) for f in e if f.startswith("media_ref") and e[f]}
    on_disk = {str(p.relative_to(store / "media")) for p in (store / "media").rglob("*") if p.is_file()}
    assert on_disk == refs
    assert r["lineage"] == ["w/a.md", "w/sub/a.md"]


def test_forget_a_folder_takes_files_moved_into_and_out_of_it(tmp_path):
    w, root = start(tmp_path)
    try:
        (root / "proj").mkdir()
        (root / "in.md").write_text("PRIV-IN before the move\n")
        (root / "proj" / "out.md").write_text("PRIV-OUT inside the folder\n")
        (root / "other.md").write_text("OTHER stays\n")
        w.sync()
        os.rename(root / "in.md", root / "proj" / "in.md")
        os.rename(root / "proj" / "out.md", root / "out.md")
        w.sync()
        with open(root / "out.md", "a") as fh:
            fh.write("PRIV-OUT after the move\n")
        w.sync()
        os.rename(root / "proj", root / "proj2")  # the folder itself renamed
        w.sync()
    finally:
        w.stop()
    store = tmp_path / "store"
    r = forget(store, str(root / "proj2"))
    names = _names(store)
    assert not names & {"w/in.md", "w/proj/in.md", "w/proj2/in.md", "w/proj/out.md", "w/out.md", "w/proj",
                        "w/proj2"}, names
    assert "w/other.md" in names
    assert b"PRIV-" not in _store_bytes(store, "sessions", "media", "shadow")
    assert set(r["lineage"]) >= {"w/proj", "w/proj2", "w/in.md", "w/out.md"}


def test_forget_an_old_name_does_not_take_a_later_unrelated_file_of_another_name(tmp_path):
    """Only the moved file's own names go: a file that was never at the forgotten path stays."""
    w, root = start(tmp_path)
    try:
        (root / "a.md").write_text("PRIV-A\n")
        w.sync()
        os.rename(root / "a.md", root / "b.md")
        w.sync()
        (root / "c.md").write_text("C stays\n")
        w.sync()
    finally:
        w.stop()
    store = tmp_path / "store"
    forget(store, "w/a.md")
    names = _names(store)
    assert "w/b.md" not in names and "w/a.md" not in names and "w/c.md" in names
    assert b"PRIV-A" not in _store_bytes(store, "sessions", "media", "shadow")
    idx = json.loads((store / "state" / "checkpoint.json").read_text())["index"]
    assert "w/b.md" in idx and not idx["w/b.md"].get("sh")  # still exists: known, without content


def test_forget_invalidates_only_the_memory_of_the_changed_sessions(tmp_path):
    """After a forget, `watch --update-memory` re-encodes only the rewritten sessions, and the memory equals a
    from-scratch consolidation of the remaining logs (no Engram, vector or memory text of the file survives)."""
    from test_watch_memory import _scratch, _session

    from filegram_ray.memory.embed import HashingEmbedder
    from filegram_ray.memory.incremental import load_state, update_memory
    from filegram_ray.storage import RunDir
    from filegram_ray.watch.export import watch_units
    from filegram_ray.watch.store import WatchStore

    for i in range(3):
        _session(tmp_path, i)
    store = tmp_path / "store"
    run = RunDir(store)
    st = WatchStore.open(store)
    units, _ = watch_units(st)
    assert update_memory(run, "real_user", units, embedder="hashing")["encoded_now"] == 3
    before = {p.name: p.stat().st_mtime_ns for p in (store / "engrams" / "real_user").glob("*.json")}
    assert b"notes_1" in _store_bytes(store, "engrams", "memory")
    r = forget(store, str(tmp_path / "w" / "proj1"))
    assert r["memory_cleared"] and len(r["sessions_to_reencode"]) >= 1
    assert b"notes_1" not in _store_bytes(store, "engrams", "memory", "sessions", "media")
    assert not (store / "cache").exists() and not (store / "memory" / "real_user" / "store.json").exists()
    state = load_state(run, "real_user")
    assert len(state["encoded"]) == 3 - len(r["sessions_to_reencode"])
    # `watch --show-memory` between the forget and the update names the command to run (a fresh-eyes finding: it said
    # "missing file 'memory/real_user/store.json'")
    from filegram_ray.cli import main

    with pytest.raises(SystemExit, match="no consolidated memory .*run `filegram watch --out .* --update-memory"):
        main(["watch", "--out", str(store), "--show-memory"])
    units, _ = watch_units(WatchStore.open(store))
    up = update_memory(run, "real_user", units, embedder="hashing")
    # proj1's session held nothing else: it has no file event left and is no memory unit any more
    again = set(r["sessions_to_reencode"]) & set(units)
    assert len(units) == 2 and up["encoded_now"] == len(again) == 1 and up["sessions"] == 2, up
    kept = {n: t for n, t in before.items() if n[:-5] not in r["sessions_to_reencode"]}
    assert {p.name: p.stat().st_mtime_ns for p in (store / "engrams" / "real_user").glob("*.json")
            if p.name in kept} == kept
    assert (store / "memory" / "real_user" / "store.json").read_text() == _scratch(WatchStore.open(store),
                                                                                  HashingEmbedder())
    assert b"notes_1" not in _store_bytes(store, "engrams", "memory")
