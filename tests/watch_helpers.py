"""Helpers for the watcher tests: a running watcher on a temp folder and compact views of its events.

The tests drive real file operations on real folders with the real inotify observer; they wait with
:meth:`Watcher.sync` (a barrier through the kernel's event queue, with a timeout), never with fixed sleeps.
"""

from __future__ import annotations

import time
from pathlib import Path

from filegram_ray.schema.events import parse_event
from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.observer import Watcher
from filegram_ray.watch.store import WatchStore

FILE_TYPES = {"file_read", "file_write", "file_edit", "file_rename", "file_move", "dir_create", "file_delete",
              "file_copy", "context_switch", "cross_file_reference"}

#: fast timings for tests (the defaults are reference §12's 2 s debounce and 0.5 s delete re-check)
FAST = {"debounce_ms": 300, "close_settle_ms": 60, "delete_recheck_ms": 150, "read_dedup_ms": 0,
        "checkpoint_interval_s": 0.2}


def config(**kw) -> WatchConfig:
    return WatchConfig(**{"content": "full", **FAST, **kw})


def start(tmp_path: Path, **kw) -> tuple[Watcher, Path]:
    root = tmp_path / "w"
    root.mkdir(exist_ok=True)
    w = Watcher(tmp_path / "store", [str(root)], config(**kw), status_every_s=0).start()
    return w, root


def all_events(store_path) -> list[dict]:
    """Every event of every session of a store, in log order; each is validated against the engine schema and
    each of its media references must resolve to a stored blob/diff."""
    st = WatchStore.open(store_path)
    out = []
    for rec in st.sessions():
        evs, _ = st.read_session(rec["session_id"])
        for i, e in enumerate(evs):
            parse_event(e, i)
            for f in ("media_ref", "media_ref_old", "media_ref_new", "media_ref_diff"):
                if f in e:
                    assert (st.media_dir / e[f]["path"]).is_file(), (f, e)
            out.append(e)
    return out


def file_events(store_path) -> list[dict]:
    return [e for e in all_events(store_path) if e["event_type"] in FILE_TYPES]


def p(x):
    """Event path → index key (``/sandbox/w/a.txt`` → ``w/a.txt``)."""
    return x[len("/sandbox/"):] if isinstance(x, str) and x.startswith("/sandbox/") else x


def brief(e: dict) -> tuple:
    """A compact, comparable form of a file event."""
    t = e["event_type"]
    if t == "file_write":
        return (t, p(e["file_path"]), e["operation"], e["content_length"])
    if t == "file_edit":
        return (t, p(e["file_path"]), e["lines_added"], e["lines_deleted"])
    if t == "file_read":
        return (t, p(e["file_path"]), e["view_count"])
    if t == "file_rename":
        return (t, p(e["old_path"]), p(e["new_path"]), e["naming_pattern_change"])
    if t == "file_move":
        return (t, p(e["old_path"]), p(e["new_path"]), e["destination_directory_depth"])
    if t == "dir_create":
        return (t, p(e["dir_path"]), e["depth"], e["sibling_count"])
    if t == "file_delete":
        return (t, p(e["file_path"]))
    if t == "file_copy":
        return (t, p(e["source_path"]), p(e["dest_path"]), e["is_backup"])
    if t == "context_switch":
        return (t, p(e["from_file"]), p(e["to_file"]))
    if t == "cross_file_reference":
        return (t, p(e["source_file"]), p(e["target_file"]), e["reference_type"])
    return (t,)


class Tail:
    """The file events recorded since the last call (for asserting what one operation produced)."""

    def __init__(self, w: Watcher):
        self.w = w
        self.n = 0

    def new(self) -> list[dict]:
        self.w.sync()
        evs = file_events(self.w.store.path)
        out, self.n = evs[self.n:], len(evs)
        return out

    def brief(self) -> list[tuple]:
        return [brief(e) for e in self.new()]


def media_text(store_path, ref: dict) -> str:
    return (Path(store_path) / "media" / ref["path"]).read_text("utf-8")


def wait_until(pred, timeout: float = 20.0, what: str = "condition"):
    """Poll ``pred`` until truthy (returns its value) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
