"""Sessions of `filegram watch`: crash-safe append-only log (torn last line tolerated and reported), restart
without losing or duplicating events (a real SIGKILL of a real watcher process), idle rotation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from watch_helpers import brief, config, file_events, start, wait_until

from filegram_ray.watch.journal import SessionLog, read_log
from filegram_ray.watch.observer import Watcher
from filegram_ray.watch.store import WatchStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")
REPO = Path(__file__).resolve().parent.parent


def test_log_tolerates_and_reports_a_torn_last_line(tmp_path):
    log = tmp_path / "events.jsonl"
    lg = SessionLog.open(log)
    lg.append([{"event_type": "a", "n": 1}, {"event_type": "b", "n": 2}])
    lg.close()
    with open(log, "ab") as fh:
        fh.write(b'{"event_type": "c", "n"')  # a crash in the middle of a write
    objs, rep = read_log(log)
    assert [o["n"] for o in objs] == [1, 2] and rep.torn_bytes == 23 and "torn last line" in rep.message()
    lg = SessionLog.open(log)  # reopening moves the torn bytes aside and truncates before appending
    assert lg.recovered.torn_bytes == 23
    lg.append([{"event_type": "d", "n": 4}])
    lg.close()
    objs, rep = read_log(log)
    assert [o["n"] for o in objs] == [1, 2, 4] and rep.message() == ""
    assert (tmp_path / "events.jsonl.torn").read_bytes() == b'{"event_type": "c", "n"\n'


def _spawn(root: Path, store: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-m", "filegram_ray.cli", "watch", str(root), "--out", str(store),
                             "--content", "full", "--debounce-ms", "200", "--quiet"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_restart_after_a_crash_loses_and_duplicates_nothing(tmp_path):
    root, store = tmp_path / "w", tmp_path / "store"
    root.mkdir()
    (root / "a.txt").write_text("a1\n")
    (root / "b.txt").write_text("b1\n")
    proc = _spawn(root, store)
    try:
        wait_until(lambda: (store / "state" / "checkpoint.json").exists() or proc.poll() is not None,
                   60, "the watcher's baseline")
        assert proc.poll() is None, proc.stdout.read().decode()
        (root / "new.txt").write_text("n1\n")
        with open(root / "a.txt", "a") as fh:
            fh.write("a2\n")
        (root / "b.txt").read_text()
        wait_until(lambda: len(file_events(store)) >= 5, 60, "events before the crash")
    finally:
        proc.send_signal(signal.SIGKILL)  # no clean shutdown: the session stays open
        proc.wait()
    before = [brief(e) for e in file_events(store)]
    assert before == [("file_write", "w/new.txt", "create", 3), ("file_edit", "w/a.txt", 1, 0),
                      ("context_switch", None, "w/b.txt"),
                      ("cross_file_reference", "w/a.txt", "w/b.txt", "sequential_access"), ("file_read", "w/b.txt", 1)]
    st = WatchStore.open(store)
    [rec] = st.sessions()
    assert not rec["closed"]
    with open(st.log_path(rec["session_id"]), "ab") as fh:
        fh.write(b'{"event_id": "torn", "event_ty')  # as if the kill had hit a write
    # while the watcher is down
    (root / "b.txt").unlink()
    (root / "c.txt").write_text("c1\n")
    with open(root / "a.txt", "a") as fh:
        fh.write("a3\n")
    os.rename(root / "new.txt", root / "renamed.txt")

    w = Watcher(store).start()  # no folders named: the stored ones
    try:
        assert any("torn last line" in n for n in w.notes) and any("resumed session" in n for n in w.notes)
        w.sync()
        (root / "b2.txt").write_text("x\n")
        (root / "c.txt").read_text()
        w.sync()
    finally:
        w.stop()
    after = [brief(e) for e in file_events(store)]
    assert after[:5] == before  # nothing lost, nothing rewritten
    primary = [x for x in after[5:] if x[0] not in ("context_switch", "cross_file_reference")]
    # the changes made while it was down, recorded once at restart (the rename found by equal content)
    assert sorted(primary[:4]) == sorted([("file_edit", "w/a.txt", 1, 0), ("file_delete", "w/b.txt"),
                                          ("file_write", "w/c.txt", "create", 3),
                                          ("file_rename", "w/new.txt", "w/renamed.txt", "other")])
    assert primary[4:] == [("file_write", "w/b2.txt", "create", 2), ("file_read", "w/c.txt", 1)]
    # the resumed session continues the derived state: the last read before the crash was b.txt
    assert ("context_switch", "w/b.txt", "w/c.txt") in after[5:]
    # one session, resumed; the torn bytes were moved aside; every line parses
    [rec] = WatchStore.open(store).sessions()
    assert rec["closed"]
    torn = st.log_path(rec["session_id"]).with_name("events.jsonl.torn")
    assert torn.read_bytes().startswith(b'{"event_id": "torn"')
    assert read_log(st.log_path(rec["session_id"]))[1].message() == ""

    # a clean restart without changes records nothing new
    w = Watcher(store).start()
    w.sync()
    w.stop()
    assert [brief(e) for e in file_events(store)] == after


def test_idle_time_rotates_sessions(tmp_path):
    w, root = start(tmp_path, idle_rotate_s=0.7)
    try:
        (root / "one.md").write_text("1\n")
        w.sync()
        wait_until(lambda: all(r["closed"] for r in WatchStore.open(w.store.path).sessions()), 20,
                   "the idle session to close")
        (root / "two.md").write_text("2\n")
        w.sync()
    finally:
        w.stop()
    st = WatchStore.open(tmp_path / "store")
    recs = st.sessions()
    assert len(recs) == 2 and all(r["closed"] for r in recs)
    for rec, name in zip(recs, ("one.md", "two.md"), strict=True):
        evs, _ = st.read_session(rec["session_id"])
        types = [e["event_type"] for e in evs]
        assert types == ["session_start", "fs_snapshot", "file_write", "fs_snapshot", "session_end"]
        assert evs[2]["file_path"] == f"/sandbox/w/{name}"
        summ = json.loads((st.path / "sessions" / rec["session_id"] / "summary.json").read_text())
        assert summ["total_events"] == 5 and summ["behavioral_events"] == 1 and summ["task_id"] == rec["task_id"]
    assert recs[0]["task_id"] < recs[1]["task_id"]  # task ids sort by start time


def test_second_watcher_on_the_same_store_is_refused(tmp_path):
    from filegram_ray.watch.store import StoreBusyError

    w, root = start(tmp_path)
    try:
        with pytest.raises(StoreBusyError, match="in use"):
            Watcher(tmp_path / "store", [str(root)], config()).start()
    finally:
        w.stop()
