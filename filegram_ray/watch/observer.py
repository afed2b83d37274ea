"""The running watcher: watchdog's observer feeding the :class:`~filegram_ray.watch.recorder.Recorder`.

On Linux the observer is watchdog's inotify observer in *full-events* mode (a move into or out of the watched
folders arrives as a move with an empty side, not as a create/delete), one recursive watch per named folder. On
other systems watchdog's default observer is used (FSEvents, ReadDirectoryChangesW, kqueue); moves across the
watched boundary then arrive as creations/deletions, which the recorder handles the same way, and reads are not
reported (only inotify reports ``IN_CLOSE_NOWRITE``).

When the kernel's inotify queue overflows (notifications dropped), watchdog re-adds its watches and our emitter
hook queues an ``overflow`` notice; the recorder then reconciles with the disk at once
(:meth:`~filegram_ray.watch.recorder.Recorder.resync`) and notes it with counts.

Threads: watchdog's emitter and dispatcher threads only put :class:`RawEvent` objects on a queue; one recorder
thread does everything else (reads files, writes the store), so the store has a single writer. The store's lock
keeps a second watcher (or ``--forget``) out while this one runs.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

from filegram_ray.errors import UserError
from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.recorder import SYNC_PREFIX, RawEvent, Recorder
from filegram_ray.watch.store import WatchStore

log = logging.getLogger(__name__)

__all__ = ["WatchLimitError", "Watcher", "run_watch"]


class WatchLimitError(UserError, RuntimeError):
    """The kernel refused more inotify watches or instances (one watch per sub-folder is needed)."""

_KINDS = {"created", "modified", "closed", "closed_no_write", "opened", "deleted", "moved"}


class _QuietStopRace(logging.Filter):
    """Drop watchdog's error line about a race in its own shutdown (harmless: emitted after we stopped it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in str(record.msg)


logging.getLogger("watchdog.observers.inotify").addFilter(_QuietStopRace())


def _limit(name: str) -> str:
    try:
        with open(f"/proc/sys/fs/inotify/{name}") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def _make_observer(on_overflow: Callable[[str], None]):
    """watchdog's observer; on Linux one whose emitters call ``on_overflow(watched folder)`` when the kernel
    reports ``IN_Q_OVERFLOW`` (inotify's queue, ``fs.inotify.max_queued_events``, was full and notifications were
    dropped), after watchdog has re-added its recursive watches — so a scan started then misses nothing."""
    if sys.platform.startswith("linux"):
        from watchdog.observers.inotify import InotifyFullEmitter, InotifyObserver

        class _Emitter(InotifyFullEmitter):
            def on_thread_start(self) -> None:
                super().on_thread_start()
                group, path = self._inotify, self.watch.path
                rebuild = group.on_queue_overflow  # watchdog: drop half-paired moves, re-add the watches

                def overflowed() -> None:
                    rebuild()
                    on_overflow(path)

                group.on_queue_overflow = overflowed

        class _Observer(InotifyObserver):
            def __init__(self) -> None:
                super().__init__(generate_full_events=True)
                self._emitter_class = _Emitter

        return _Observer()
    from watchdog.observers import Observer

    return Observer()  # FSEvents / ReadDirectoryChangesW / kqueue: no overflow notice reaches us


def _handler_class():
    from watchdog.events import FileSystemEventHandler

    class _Handler(FileSystemEventHandler):
        """watchdog event handler: converts and enqueues (runs in watchdog's dispatcher thread)."""

        def __init__(self, q: queue.Queue):
            super().__init__()
            self.q = q

        dispatch = _dispatch

    return _Handler


def _dispatch(self, event) -> None:
    kind = event.event_type
    if kind not in _KINDS or (kind == "modified" and event.is_directory):
        return  # attrib (chmod, touch of an existing file) and folder mtime changes carry no content change
    src = os.fsdecode(event.src_path) if event.src_path else ""
    dest = os.fsdecode(event.dest_path) if event.dest_path else ""
    self.q.put(RawEvent(kind, src, dest, bool(event.is_directory), bool(getattr(event, "is_synthetic", False)),
                        time.time() * 1000.0))


class Watcher:
    """Record file activity in the named folders into a store until :meth:`stop`.

    Args:
        store_path: the store folder (created if absent).
        dirs: folders to watch; empty → the folders the store watched last time.
        config: settings; None → the store's stored settings (defaults for a new store).
        on_status: called with a one-line status every ``status_every_s`` seconds (None: log at INFO).
        status_every_s: status period in seconds (0 disables).

    Raises (from :meth:`start`):
        StoreError: bad store folder or watched folder. StoreBusyError: another watcher holds the store.
    """

    def __init__(self, store_path: str | os.PathLike, dirs: list[str] | tuple[str, ...] = (),
                 config: WatchConfig | None = None, *, on_status: Callable[[str], None] | None = None,
                 status_every_s: float = 30.0):
        self.store_path = store_path
        self.dirs = list(dirs)
        self.config = config
        self.on_status = on_status or (lambda s: log.info("%s", s))
        self.status_every_s = status_every_s
        self.q: queue.Queue[RawEvent] = queue.Queue()
        self.store: WatchStore | None = None
        self.recorder: Recorder | None = None
        self.notes: list[str] = []
        self._observer = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._idle = False
        self._seen: set[str] = set()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.started_at = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Watcher:
        """Open and lock the store, recover it, start watching, reconcile with the disk. Returns self once the
        recorder is running (the baseline scan of a new folder happens before this returns)."""
        self.store = WatchStore.open_or_create(self.store_path, self.dirs, self.config)
        self.store.lock()
        try:
            self.recorder = Recorder(self.store)
            self.notes = self.recorder.recover()  # the recorder's own list: later notes (overflows) join it
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\..*")
            self._observer = _make_observer(self._on_overflow)
            handler = _handler_class()(self.q)
            for root in self.recorder.roots:
                self._observer.schedule(handler, root.path, recursive=True)
            try:
                self._observer.start()  # adds the inotify watches before returning
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EMFILE):
                    raise
                raise WatchLimitError(
                    f"the kernel refused more inotify watches ({exc}); inotify needs one watch per sub-folder, "
                    f"ignored ones included. Raise the limit (current: {_limit('max_user_watches')} watches, "
                    f"{_limit('max_user_instances')} instances), e.g. `sudo sysctl fs.inotify.max_user_watches="
                    f"524288`, or watch smaller folders") from None
            self.started_at = time.time()
            self._thread = threading.Thread(target=self._run, name="filegram-watch-recorder", daemon=True)
            self._thread.start()
            self._started.wait()
            if self._error is not None:
                raise self._error
        except BaseException:
            self._teardown_observer()
            self.store.unlock()
            raise
        return self

    def _on_overflow(self, path: str) -> None:
        """Called in watchdog's thread when the kernel dropped notifications: the recorder thread reconciles
        with the disk at its next pass (:meth:`Recorder.resync`)."""
        self.q.put(RawEvent("overflow", os.fsdecode(path)))

    def _run(self) -> None:
        rec = self.recorder
        try:
            done = rec.reconcile()
            if done:
                self.notes.append("reconciled with the disk: " + ", ".join(f"{k} {v}" for k, v in done.items()))
            rec.pump()
            rec.checkpoint()  # the baseline is durable before any change is recorded (no-op unless quiescent)
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._started.set()
            return
        self._started.set()
        last_status = time.monotonic()
        while True:
            now = time.time() * 1000.0
            nxt = min((p.deadline for p in rec.pending.values()), default=now + 500.0)
            timeout = min(0.5, max(0.0, (nxt - now) / 1000.0))
            try:
                ev = self.q.get(timeout=timeout)
                rec.handle(ev)
                for _ in range(20_000):  # drain what is queued, then commit as one batch
                    try:
                        rec.handle(self.q.get_nowait())
                    except queue.Empty:
                        break
            except queue.Empty:
                pass
            try:
                rec.pump()
            except Exception:  # noqa: BLE001 - keep recording; the traceback goes to the log
                log.exception("filegram watch: recorder error (continuing)")
                rec.stats["recorder_errors"] += 1
            with self._cond:  # published together, so sync() never pairs a new barrier with an old idle state
                self._idle = self.q.empty() and rec.quiescent()
                self._seen = set(rec.sync_seen)
                self._cond.notify_all()
            if self.status_every_s and time.monotonic() - last_status > self.status_every_s:
                last_status = time.monotonic()
                self.on_status(self.status_line())
            if self._stop.is_set() and self.q.empty():
                break
        rec.shutdown()

    def stop(self) -> dict[str, Any]:
        """Stop watching, record everything still pending, close the session, release the store. Returns the
        summary (:meth:`summary`)."""
        self._teardown_observer()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.store is not None:
            self.store.unlock()
        return self.summary()

    def _teardown_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
            self._observer = None

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ waiting
    def sync(self, timeout: float = 30.0) -> None:
        """Wait until every change made before this call is in the log.

        Writes a hidden barrier file into each watched folder (never recorded, removed afterwards): once the
        recorder has seen it, every earlier notification of that folder has been processed (inotify keeps order
        per watch); then waits until nothing is pending. For tests and benchmarks.

        Raises:
            TimeoutError: not reached within ``timeout`` seconds.
        """
        names = {}
        for root in self.recorder.roots:
            name = f"{SYNC_PREFIX}{uuid.uuid4().hex[:12]}"
            path = os.path.join(root.path, name)
            with open(path, "w"):
                pass
            names[name] = path
        deadline = time.monotonic() + timeout
        try:
            with self._cond:
                while True:
                    if self._error is not None:
                        raise RuntimeError("filegram watch recorder failed") from self._error
                    if set(names) <= self._seen and self._idle:
                        return
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"filegram watch: not in sync after {timeout} s")
                    self._cond.wait(min(left, 0.2))
        finally:
            for p in names.values():
                try:
                    os.unlink(p)
                except OSError:
                    pass

    # ------------------------------------------------------------------ reporting
    def status_line(self) -> str:
        rec = self.recorder
        n = sum(rec.stats[t] for t in ("file_read", "file_write", "file_edit", "file_rename", "file_move",
                                       "dir_create", "file_delete", "file_copy"))
        sess = rec.session["task_id"] if rec.session else "none open"
        lag = rec.lag_summary()
        return (f"watch: {n} file events recorded, session {sess}, {len(rec.pending)} pending"
                + (f", lag p50 {lag['p50_ms']} ms" if lag.get("count") else ""))

    def summary(self) -> dict[str, Any]:
        """Counts by event type, sessions, media files written, recorder counters, lag and run time."""
        rec = self.recorder
        if rec is None:
            return {}
        stats = dict(rec.stats)
        return {"store": str(self.store.path), "roots": [{"label": r.label, "path": r.path} for r in rec.roots],
                "content": rec.cfg.content, "seconds": round(time.time() - self.started_at, 1),
                "events": {k: v for k, v in sorted(stats.items()) if k.startswith(("file_", "dir_", "context_",
                                                                                     "cross_"))},
                "counters": {k: v for k, v in sorted(stats.items()) if not k.startswith(("file_", "dir_",
                                                                                         "context_", "cross_"))},
                "sessions": len(rec.sessions), "lag": rec.lag_summary(), "notes": list(self.notes)}


def run_watch(store_path: str | os.PathLike, dirs: list[str], config: WatchConfig | None = None, *,
              duration_s: float | None = None, on_status: Callable[[str], None] | None = None,
              status_every_s: float = 30.0) -> dict[str, Any]:
    """Watch until Ctrl-C / SIGTERM (or ``duration_s``); returns :meth:`Watcher.summary`."""
    import signal

    w = Watcher(store_path, dirs, config, on_status=on_status, status_every_s=status_every_s)
    stop = threading.Event()

    def _term(*_):
        stop.set()

    old = signal.signal(signal.SIGTERM, _term) if threading.current_thread() is threading.main_thread() else None
    w.start()
    try:
        end = None if duration_s is None else time.monotonic() + duration_s
        while not stop.is_set() and (end is None or time.monotonic() < end):
            stop.wait(0.5 if end is None else max(0.0, min(0.5, end - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        summary = w.stop()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    return summary
