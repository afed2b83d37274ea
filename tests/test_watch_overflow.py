"""The watcher keeps up with bursts or says so (case REL2-WATCH-burst-queue-overflow-loses-events): when the
kernel's inotify queue overflows, the running watcher reconciles with the disk at once and notes it.

Three ways in: the kernel's own IN_Q_OVERFLOW delivered through watchdog's real handling while notifications
were being lost; a real burst of 5,000 files at the default queue size; and (as root, where
``fs.inotify.max_queued_events`` can be lowered for the watcher's inotify instance) a real kernel overflow.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import pytest
from watch_helpers import config, file_events, start

from filegram_ray.watch.observer import Watcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")

MAX_QUEUED = "/proc/sys/fs/inotify/max_queued_events"


def _writes(store) -> Counter:
    return Counter(e["file_path"] for e in file_events(store) if e["event_type"] == "file_write")


class _Lose:
    """Drop every notification (as the kernel does once its queue is full) until the closing of a sentinel
    file has gone by: inotify keeps one queue per instance, in order, so everything before it was dropped.
    The close is the sentinel's last notification; stopping at its creation instead let its close through
    to the recorder on some runs, so the reconcile found it already known (a 300-or-301 race)."""

    def __init__(self, w: Watcher, monkeypatch, sentinel) -> None:
        self.w, self.mp, self.sentinel, self.seen = w, monkeypatch, str(sentinel), False
        self.real = w.q.put
        monkeypatch.setattr(w.q, "put", self.put)

    def put(self, ev, *a, **k) -> None:
        self.seen = self.seen or (ev.kind == "closed" and ev.src == self.sentinel)

    def stop(self) -> None:
        with open(self.sentinel, "w"):
            pass
        end = time.monotonic() + 30
        while not self.seen and time.monotonic() < end:
            time.sleep(0.02)
        assert self.seen, "the sentinel's notification never arrived"
        self.mp.setattr(self.w.q, "put", self.real)


def _inject_kernel_overflow(w: Watcher) -> None:
    """Hand watchdog's inotify reader the event the kernel queues when its queue is full (wd -1,
    IN_Q_OVERFLOW): from there the real code path runs (watchdog re-adds its watches, our hook, the recorder)."""
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent

    w._observer._inotify_fd.handle_event(InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b""))


def test_overflow_reconciles_at_once_REL2_WATCH_burst_queue_overflow_loses_events(tmp_path, monkeypatch):
    """REL2-WATCH-burst-queue-overflow-loses-events: notifications lost while files are created, changed,
    renamed and deleted; on the overflow signal the running watcher (no restart) records every one of them
    once, and its summary says it reconciled, with counts."""
    w, root = start(tmp_path)
    try:
        (root / "old.md").write_text("old\n")
        (root / "gone.md").write_text("gone\n")
        (root / "moved.md").write_text("moved content\n")
        w.sync()
        lose = _Lose(w, monkeypatch, root / "zz-sentinel.txt")  # the kernel drops what happens now
        (root / "sub").mkdir()
        for i in range(300):
            (root / "sub" / f"f{i:03d}.txt").write_text(f"file {i}\n")
        (root / "old.md").write_text("old\nchanged\n")
        (root / "gone.md").unlink()
        os.rename(root / "moved.md", root / "sub" / "moved.md")
        lose.stop()
        _inject_kernel_overflow(w)
        w.sync(timeout=60)
        (root / "after.md").write_text("after\n")  # watching goes on normally afterwards
        w.sync()
    finally:
        summary = w.stop()
    writes = _writes(tmp_path / "store")
    assert {f"/sandbox/w/sub/f{i:03d}.txt" for i in range(300)} <= set(writes)
    assert max(writes.values()) == 1 and "/sandbox/w/after.md" in writes
    evs = file_events(tmp_path / "store")
    kinds = Counter((e["event_type"], e.get("file_path") or e.get("new_path") or e.get("dir_path")) for e in evs)
    assert kinds[("file_edit", "/sandbox/w/old.md")] == 1
    assert kinds[("file_delete", "/sandbox/w/gone.md")] == 1
    assert kinds[("file_move", "/sandbox/w/sub/moved.md")] == 1
    assert kinds[("dir_create", "/sandbox/w/sub")] == 1
    assert summary["counters"]["queue_overflows"] == 1
    assert summary["counters"]["overflow_created"] == 301  # and the sentinel
    note = [n for n in summary["notes"] if "overflowed" in n]
    assert len(note) == 1 and "created 301" in note[0] and "deleted 1" in note[0] and "moved 1" in note[0]


def test_burst_of_5000_files_is_recorded_completely(tmp_path):
    """A writer creates 5,000 small files as fast as it can (the case's burst) at the machine's queue size:
    whether or not the kernel's queue overflowed, every file is in the store exactly once, without a restart."""
    w, root = start(tmp_path)
    n = 5000
    try:
        t0 = time.monotonic()
        for i in range(n):
            with open(root / f"n{i:05d}.txt", "w") as fh:
                fh.write(f"burst file {i}\n")
        wrote_s = time.monotonic() - t0
        w.sync(timeout=300)
        took_s = time.monotonic() - t0
    finally:
        summary = w.stop()
    writes = _writes(tmp_path / "store")
    print(f"\nburst: {n} files written in {wrote_s:.2f} s, all recorded after {took_s:.1f} s; "
          f"overflows {summary['counters'].get('queue_overflows', 0)}, "
          f"found by reconciling {summary['counters'].get('overflow_created', 0)}")
    assert set(writes) == {f"/sandbox/w/n{i:05d}.txt" for i in range(n)}
    assert max(writes.values()) == 1


@pytest.mark.skipif(not os.access(MAX_QUEUED, os.W_OK), reason="needs root to lower fs.inotify.max_queued_events")
def test_real_kernel_overflow_is_caught_up(tmp_path):
    """The kernel's queue for the watcher's inotify instance is made small (the limit is read when the instance
    is created, so it is lowered only while the watcher starts and restored right after: watchdog creates its
    instance when the observer is made in older releases and at the first scheduled watch since 7.1): a burst
    overflows it for real, and the running watcher still records every file once and counts the overflows."""
    old = open(MAX_QUEUED).read().strip()
    with open(MAX_QUEUED, "w") as fh:
        fh.write("64")
    try:
        w, root = start(tmp_path)
    finally:
        with open(MAX_QUEUED, "w") as fh:
            fh.write(old)
    try:
        (root / "d").mkdir()
        for i in range(1000):
            (root / "d" / f"k{i:04d}.txt").write_text(f"k {i}\n")
        w.sync(timeout=120)
    finally:
        summary = w.stop()
    writes = _writes(tmp_path / "store")
    assert set(writes) == {f"/sandbox/w/d/k{i:04d}.txt" for i in range(1000)} and max(writes.values()) == 1
    assert summary["counters"]["queue_overflows"] >= 1
    assert any("overflowed" in n for n in summary["notes"])


def test_overflow_without_loss_records_nothing_twice(tmp_path):
    """An overflow signal when nothing was actually lost (the queue had been drained): the reconciliation finds
    nothing to add, records nothing twice, and still says it ran."""
    w, root = start(tmp_path, content="full")
    try:
        for i in range(20):
            (root / f"a{i}.txt").write_text(f"{i}\n")
        w.sync()
        _inject_kernel_overflow(w)
        w.sync()
    finally:
        summary = w.stop()
    writes = _writes(tmp_path / "store")
    assert len(writes) == 20 and max(writes.values()) == 1
    assert summary["counters"]["queue_overflows"] == 1
    assert any("nothing was missed" in n for n in summary["notes"])


def test_overflow_reconciles_every_watched_folder(tmp_path, monkeypatch):
    """The overflow hook is installed for every watched folder (two folders: both reconciled)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    w = Watcher(tmp_path / "store", [str(a), str(b)], config(), status_every_s=0).start()
    try:
        w.sync()
        lose = _Lose(w, monkeypatch, b / "zz-sentinel.txt")
        (a / "x.txt").write_text("x\n")
        (b / "y.txt").write_text("y\n")
        lose.stop()
        _inject_kernel_overflow(w)
        w.sync()
    finally:
        summary = w.stop()
    assert set(_writes(tmp_path / "store")) == {"/sandbox/a/x.txt", "/sandbox/b/y.txt", "/sandbox/b/zz-sentinel.txt"}
    assert summary["counters"]["queue_overflows"] >= 1
