"""The recorder: turns raw file-system notifications into engine-schema events in the session log.

It runs in one thread (:class:`~filegram_ray.watch.observer.Watcher` feeds it), so its state needs no locks.

Pipeline::

    RawEvent (watchdog) ──▶ policy (privacy.PathPolicy) ──▶ pending per path (debounce) ──▶ resolved items
        ──▶ commit in timestamp order (barrier) ──▶ WatchCollector (the engine's Collector) ──▶ log lines

* **Pending.** A created or modified file is read only after it has been quiet for ``debounce_ms`` (reference
  §12: 2 s), or ``close_settle_ms`` after its writer closed it, or at the latest ``max_pending_ms`` after its first
  write (a file written without pause is recorded in steps). Then it is compared with the index: same content
  → nothing; known file → ``file_edit`` (text: before/after blobs + unified diff against the shadow copy) or
  ``file_write`` ``overwrite`` (binary or over ``max_blob_bytes``: no content); new file → ``file_copy`` when its
  content equals a file read in the last 10 s (reference §12; ``cp`` reads its source, and that read is absorbed
  into the copy as in the engine), else ``file_write`` ``create``.
* **Atomic saves.** A file written under a temporary name and renamed over the target within the debounce window
  is never recorded under the temporary name: the pending change moves to the target and becomes one edit of it
  (or a create). Renames from ignored names (``.a.txt.swp``, ``.goutputstream-…``) and delete-then-recreate
  (re-checked after ``delete_recheck_ms``, reference §12) become edits of the target too.
* **Renames and moves.** Same folder → ``file_rename`` (``naming_pattern_change`` by the engine's rule), else
  ``file_move``; a folder's move is one event, its children's paths follow in the index. Moving out of the watched
  folders is a deletion (inotify cannot tell the destination); moving in is creation (files read as new).
* **Folders.** ``dir_create`` per created folder (``mkdir -p a/b/c`` is three); a removed folder records
  ``file_delete`` for each recorded file and folder in it, deepest first, then itself.
* **Reads.** inotify's ``IN_CLOSE_NOWRITE`` on a file (any process opened it read-only and closed it) → ``file_read``
  (``view_range`` null, ``content_length`` = characters of the file, bytes if binary); the recorder's own reads
  are discounted; re-opens within ``read_dedup_ms`` are one read. ``context_switch`` and ``cross_file_reference``
  are derived from reads and edits by the engine's rules.
* **Ordering.** A resolved item is committed only when no pending change started earlier, so the log is in
  timestamp order and the derived fields see reads and edits in the order they happened (within one watched
  folder: each has its own inotify watch and thread, so between folders the order is that of arrival). A new
  file is stamped when it appeared, an edit when its text reached the recorded state.

Each event line carries ``_state``: the index change it implies (``["set", key, entry]``, ``["del", key]``,
``["delp", key]`` (a folder and everything in it), ``["mv", src, dst]``). The index is checkpointed when the
recorder is quiescent; on start it is the checkpoint plus the ``_state`` of later log lines, then reconciled
with the disk (changes made while the watcher was not running are recorded then, with the restart's time).

Index keys are ``<label>/<path inside the watched folder>``; events name them ``/sandbox/<label>/<path>`` (the
engine's virtual root, so the post-execution filter reduces them to folder-relative paths, reference §12
normalisation) — real absolute paths never enter events.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import os
import random
import stat
import time
import uuid
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.engine.collector import Collector
from filegram_ray.engine.media import MediaStore, content_hash
from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.journal import SessionLog
from filegram_ray.watch.privacy import PathPolicy, Redactor, Root
from filegram_ray.watch.store import WatchStore, task_id_for

log = logging.getLogger(__name__)

__all__ = ["BEHAVIOURAL", "SYNC_PREFIX", "RawEvent", "Recorder", "WatchCollector", "session_summary"]

#: name prefix of the barrier files :meth:`Watcher.sync` writes (hidden, so never recorded)
SYNC_PREFIX = ".filegram-sync-"
#: overflows noted one by one in the summary's notes (later ones are counted in the counters only; ours)
OVERFLOW_NOTES = 10
#: reference §2.2: a text whose first 8,192 bytes hold a NUL is binary
NUL_SCAN = 8192
BEHAVIOURAL = frozenset({"file_read", "file_write", "file_edit", "file_rename", "file_move", "dir_create",
                         "file_delete", "file_copy", "context_switch", "cross_file_reference"})


@dataclass
class RawEvent:
    """One notification from watchdog: ``kind`` ∈ created, modified, closed, closed_no_write, opened, deleted,
    moved, attrib, overflow (the kernel dropped notifications; ``src`` is the watched folder); ``src``/``dest``
    absolute paths (``""`` when outside the watched folders); ``t`` epoch ms."""

    kind: str
    src: str
    dest: str = ""
    is_dir: bool = False
    synthetic: bool = False
    t: float = field(default_factory=lambda: time.time() * 1000.0)


@dataclass
class _Pending:
    key: str
    abs: str
    kind: str  # "content" | "delete"
    first: float
    last: float
    deadline: float


@dataclass(order=True)
class _Item:
    ts: float
    seq: int
    obs: dict[str, Any] | None = field(compare=False, default=None)
    state: list[list[Any]] = field(compare=False, default_factory=list)
    session_event: str | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)
    committed: bool = field(compare=False, default=False)


class _NoMedia:
    """Media store for content mode ``off``: stores nothing (same interface as MediaStore)."""

    entries: dict[str, Any] = {}

    def save_blob(self, *a, **k):
        return None

    def save_diff(self, *a, **k):
        return None


class WatchCollector(Collector):
    """The engine's :class:`~filegram_ray.engine.collector.Collector` with one virtual sandbox per watched folder.

    Relative paths handed to it are index keys ``<label>/<path>``; they appear in events as
    ``/sandbox/<label>/<path>``. Depth fields are counted from the watched folder (the engine counts from the
    sandbox root), and the leakage fields are null as in upstream's watcher (reference §12).
    """

    def __init__(self, session_id: str, profile_id: str, media):
        self.now = 0.0
        super().__init__(rng=random.Random(int.from_bytes(os.urandom(16), "big")), clock=lambda: self.now,
                         virtual=lambda rel: "/sandbox/" + rel, session_id=session_id, profile_id=profile_id,
                         message_id=None, model_provider=None, model_name=None, media=media)

    def emit(self, event_type: str, fields: dict[str, Any], *, session_event: bool = False) -> dict[str, Any]:
        fields = dict(fields)
        for f in ("directory_depth", "destination_directory_depth", "max_depth"):
            if f in fields:
                fields[f] = max(0, fields[f] - 1)
        if event_type == "dir_create":
            fields["depth"] = max(0, fields["depth"] - 1)
        ev = super().emit(event_type, fields, session_event=session_event)
        ev["message_id"] = None
        return ev

    def drain(self) -> list[dict[str, Any]]:
        out, self.events = self.events, []
        return out

    def restore(self, events: list[dict[str, Any]]) -> None:
        """Rebuild the derived-field state (view counts, last read, switch count, creation times) from the
        events of a session being resumed after a restart."""
        def key(p):
            return p[len("/sandbox/"):] if isinstance(p, str) and p.startswith("/sandbox/") else p

        for ev in events:
            t, ts = ev.get("event_type"), float(ev.get("timestamp") or 0)
            if t == "file_read":
                k = key(ev["file_path"])
                self.read_count[k] = self.read_count.get(k, 0) + 1
                self.last_read_at[k] = ts
                self.last_read_rel = k
                self.last_op = (k, "read", ts)
            elif t == "context_switch":
                self.switch_count = int(ev.get("switch_count") or self.switch_count)
            elif t == "file_edit":
                self.last_op = (key(ev["file_path"]), "edit", ts)
            elif t == "file_write" and ev.get("operation") == "create":
                self.created_at[key(ev["file_path"])] = ts
            elif t == "file_copy":
                self.created_at[key(ev["dest_path"])] = ts
            elif t in ("file_move", "file_rename"):
                src, dst = key(ev["old_path"]), key(ev["new_path"])
                for k in [k for k in self.created_at if k == src or k.startswith(src + "/")]:
                    self.created_at[dst + k[len(src):]] = self.created_at.pop(k)
            elif t == "file_delete":
                k = key(ev["file_path"])
                for c in [c for c in self.created_at if c == k or c.startswith(k + "/")]:
                    del self.created_at[c]


def _sha16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass
class _FileInfo:
    hash: str | None
    size: int
    mtime_ns: int
    text: str | None  # decoded text if text and <= max_blob_bytes


class Recorder:
    """The recorder state machine (see the module docstring). Not thread-safe: one thread calls everything.

    Args:
        store: the open, locked store.
        config: settings (normally ``store.config``).
    """

    def __init__(self, store: WatchStore, config: WatchConfig | None = None):
        self.store = store
        self.cfg = config or store.config
        self.roots: list[Root] = store.roots
        self.policy = PathPolicy(self.roots, self.cfg, str(store.path))
        self.redactor = Redactor(self.cfg.phone_region) if self.cfg.content == "redacted" else None
        # names are redacted unless content is "full": recorded keys hold placeholders, _real maps each
        # placeholder-bearing name back to the name on disk (rebuilt by every scan; never stored)
        self.names = Redactor(self.cfg.phone_region, store.name_key()) if self.cfg.content != "full" else None
        self._real: dict[str, str] = {}
        self.index: dict[str, dict[str, Any]] = {}
        self.by_hash: dict[str, set[str]] = defaultdict(set)
        self.subdirs: Counter = Counter()  # folder key -> number of recorded sub-folders (dir_create sibling_count)
        self._dirty = False
        self.pending: dict[str, _Pending] = {}
        self.ready: list[_Item] = []
        self._seq = 0
        self.last_read: dict[str, float] = {}  # key -> ts of the last recorded read (dedup)
        self.read_at: dict[str, float] = {}  # key -> ts of the last user close-after-read (copy detection)
        self.read_items: dict[str, list[_Item]] = defaultdict(list)
        self._self_reads: dict[str, list[float]] = {}  # abs path -> expiry times of our own opens
        self.session: dict[str, Any] | None = None
        self.log: SessionLog | None = None
        self.collector: WatchCollector | None = None
        self.sessions = store.sessions()
        self.last_activity = 0.0
        self.last_snapshot = 0.0
        self.last_checkpoint = time.monotonic()
        self.stats: Counter = Counter()
        self.lags_ms: deque[float] = deque(maxlen=200_000)
        self.baseline_roots: set[str] = set()
        self.sync_seen: set[str] = set()
        self._shadow_todo: dict[str, tuple[str | None, str]] = {}
        self.notes: list[str] = []
        self.overflowed: set[str] = set()  # watched folders whose notifications the kernel dropped (resync due)

    # ================================================================== index helpers
    def _set(self, key: str, entry: dict[str, Any]) -> None:
        old = self.index.get(key)
        if old is not None:
            self._unlink(key, old)
        self.index[key] = entry
        if entry.get("h"):
            self.by_hash[entry["h"]].add(key)
        if entry["k"] == "d":
            self.subdirs[key.rpartition("/")[0]] += 1
        self._dirty = True

    def _unlink(self, key: str, e: dict[str, Any]) -> None:
        if e.get("h"):
            self.by_hash[e["h"]].discard(key)
        if e["k"] == "d":
            self.subdirs[key.rpartition("/")[0]] -= 1

    def _del(self, key: str, prefix: bool = False) -> None:
        keys = [key] + ([k for k in self.index if k.startswith(key + "/")] if prefix else [])
        for k in keys:
            e = self.index.pop(k, None)
            if e is not None:
                self._unlink(k, e)
                self._dirty = True

    def _mv(self, src: str, dst: str) -> None:
        """Re-key ``src`` and everything below it to ``dst`` (replacing what was there). A no-op when ``src`` is
        not indexed, so replaying a move already applied changes nothing."""
        moved = [(k, dst + k[len(src):]) for k in self.index if k == src or k.startswith(src + "/")]
        if not moved:
            return
        entries = [(new, self.index[old]) for old, new in moved]
        for old, _ in moved:
            self._del(old)
        if any(k == dst or k.startswith(dst + "/") for k in self.index):
            self._del(dst, prefix=True)
        for new, e in entries:
            self._set(new, e)

    def apply_state(self, ops: list[list[Any]]) -> None:
        """Apply ``_state`` operations (from a log line or a fresh item) to the index."""
        for op in ops:
            if op[0] == "set":
                self._set(op[1], op[2])
            elif op[0] == "del":
                self._del(op[1])
            elif op[0] == "delp":
                self._del(op[1], prefix=True)
            elif op[0] == "mv":
                self._mv(op[1], op[2])

    def key_of(self, root: Root, rel: str) -> str:
        """The recorded key of a path inside a watched folder: ``<label>/<rel>`` with each name redacted
        (:meth:`Redactor.redact_name`) unless content mode is ``full``."""
        if not rel:
            return root.label
        if self.names is not None:
            rel = "/".join(self._recorded_name(c) for c in rel.split("/"))
        return f"{root.label}/{rel}"

    def _recorded_name(self, name: str) -> str:
        out = self.names.redact_name(name)
        if out != name:
            self._real[out] = name
        return out

    def real_rel(self, rel: str) -> list[str]:
        """The on-disk names of a recorded relative path (placeholders mapped back where known)."""
        return [self._real.get(c, c) for c in rel.split("/")]

    def abs_of(self, key: str) -> str:
        label, _, rel = key.partition("/")
        root = next(r for r in self.roots if r.label == label)
        return os.path.join(root.path, *self.real_rel(rel)) if rel else root.path

    # ================================================================== file reading
    def _expect_self_read(self, path: str) -> None:
        """Note that the recorder opened ``path`` now: the next open/close-without-write notifications of it
        stamped after this moment are its own (inotify cannot tell which process read a file)."""
        self._self_reads.setdefault(path, []).append(time.time() * 1000.0)

    def _is_self_read(self, path: str, t: float, consume: bool) -> bool:
        lst = self._self_reads.get(path)
        if not lst:
            return False
        while lst and t - lst[0] > 60_000.0:  # its notification was lost (queue overflow): stop waiting
            lst.pop(0)
        if not lst or t < lst[0] - 1.0:
            if not lst:
                self._self_reads.pop(path, None)
            return False
        if consume:
            lst.pop(0)
            if not lst:
                self._self_reads.pop(path, None)
        return True

    def read_file(self, path: str) -> _FileInfo | None:
        """Hash (and decode, if small text) a regular file without following symlinks; None if it is gone,
        unreadable or not a regular file."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        self._expect_self_read(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as fh:
                cap = self.cfg.max_blob_bytes
                data = fh.read(cap + 1)
                if len(data) <= cap:
                    h = _sha16(data)
                    text = None
                    if b"\x00" not in data[:NUL_SCAN]:
                        try:
                            text = data.decode("utf-8")
                        except UnicodeDecodeError:
                            text = None
                    return _FileInfo(h, len(data), st.st_mtime_ns, text)
                if st.st_size > self.cfg.hash_max_bytes:
                    return _FileInfo(None, st.st_size, st.st_mtime_ns, None)
                hasher = hashlib.sha256(data)
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    hasher.update(chunk)
                return _FileInfo(hasher.hexdigest()[:16], st.st_size, st.st_mtime_ns, None)
        except OSError:
            return None
        finally:
            os.close(fd)

    def captured(self, text: str) -> str:
        """The text as stored under the content mode: full, redacted, or (off) one SHA-256[:16] per line — enough
        to count changed lines, nothing to read back."""
        if self.cfg.content == "full":
            return text
        if self.cfg.content == "redacted":
            out, counts = self.redactor.redact(text)
            self.stats.update({f"redacted_{k}": v for k, v in counts.items()})
            return out
        return "".join(_sha16(line.encode("utf-8", "surrogatepass")) + "\n" for line in text.splitlines())

    def _entry(self, info: _FileInfo, created: float | None, written: float | None
               ) -> tuple[dict[str, Any], str | None]:
        """Index entry of a file version and its captured text (None for binary/large files). The text is kept
        as the shadow (diff base of the next edit): written at the next flush, unless a blob with the same text
        exists already (full mode: the create's or edit's own blob) — :meth:`shadow_text` falls back to it."""
        cap = self.captured(info.text) if info.text is not None else None
        entry = {"k": "f", "h": info.hash, "s": info.size, "m": info.mtime_ns,
                 "c": len(info.text) if info.text is not None else None, "sh": cap is not None,
                 "ch": content_hash(cap) if cap else None, "ca": created, "wa": written}
        if cap is not None:
            self._shadow_todo[info.hash] = (entry["ch"], cap)
        return entry, cap

    def shadow_text(self, entry: dict[str, Any] | None) -> str | None:
        """The captured text of an indexed file version, or None if none was kept."""
        if not entry or not entry.get("sh"):
            return None
        todo = self._shadow_todo.get(entry["h"])
        if todo is not None:
            return todo[1]
        text = self.store.get_shadow(entry["h"])
        if text is None and entry.get("ch"):
            try:
                text = (self.store.media_dir / "blobs" / f"{entry['ch']}.blob").read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                text = None
        if text is None and entry.get("c") == 0:
            return ""
        return text

    def _flush_shadows(self) -> None:
        blobs = self.store.media_dir / "blobs"
        for h, (ch, text) in self._shadow_todo.items():
            if not (ch and (blobs / f"{ch}.blob").exists()):
                self.store.put_shadow(h, text)
        self._shadow_todo.clear()

    # ================================================================== startup
    def recover(self) -> list[str]:
        """Load the checkpoint, replay later log lines, close stale sessions. Returns notes for the user (torn
        lines cut, sessions closed)."""
        self.replay()
        self._redact_index_names()
        self._resume_or_close()
        return self.notes

    def _redact_index_names(self) -> None:
        """A store recorded before names were redacted (or with content ``full`` before): re-key index entries
        whose names redact to something else, silently (no event would be true: nothing changed on disk). The
        earlier session logs keep the old names (``--forget`` removes them)."""
        if self.names is None:
            return
        renamed = {}
        roots = {r.label: r for r in self.roots}
        for k in self.index:
            label, _, rel = k.partition("/")
            if rel and label in roots:
                new = self.key_of(roots[label], rel)  # a placeholder redacts to itself
                if new != k:
                    renamed[k] = new
        if not renamed:
            return
        entries = [(renamed.get(k, k), e) for k, e in self.index.items()]
        self.index.clear()
        self.by_hash.clear()
        self.subdirs.clear()
        for k, e in entries:
            self._set(k, e)
        self.notes.append(f"{len(renamed)} recorded names were re-keyed to their redacted form; earlier session logs "
                          f"still hold them (use --forget PATH to remove them)")

    def replay(self) -> None:
        """The index as of the end of the logs: the checkpoint plus the ``_state`` of every later line."""
        ckpt = self.store.load_checkpoint()
        for k, e in ckpt.get("index", {}).items():
            self._set(k, e)
        applied = ckpt.get("logs", {})
        self.baseline_roots = set(ckpt.get("baseline_roots", []))
        for rec in self.sessions:
            sid = rec["session_id"]
            lines, rep = self.store.read_session(sid, keep_state=True)
            if rep.torn_bytes or rep.bad_lines:
                self.notes.append(rep.message())
            for obj in lines[applied.get(sid, 0):]:
                if "_state" in obj:
                    self.apply_state(obj["_state"])

    def _resume_or_close(self) -> None:
        # the last session may still be open (the watcher crashed): resume it if recent, else close it
        now = time.time() * 1000.0
        for rec in self.sessions:
            if rec.get("closed"):
                continue
            events, _ = self.store.read_session(rec["session_id"])
            last = max([float(e.get("timestamp") or 0) for e in events] + [rec["started_ms"]])
            if rec is self.sessions[-1] and now - last < self.cfg.idle_rotate_s * 1000.0:
                self._open_session(resume=rec, events=events)
                self.notes.append(f"resumed session {rec['task_id']} ({len(events)} events so far)")
            else:
                self._close_stale(rec, events, last)
                self.notes.append(f"closed session {rec['task_id']} left open by a crash ({len(events)} events)")

    def _close_stale(self, rec: dict[str, Any], events: list[dict[str, Any]], last: float) -> None:
        lg = SessionLog.open(self.store.log_path(rec["session_id"]))
        if lg.recovered.torn_bytes:
            self.notes.append(lg.recovered.message() + " (moved to events.jsonl.torn)")
        col = WatchCollector(rec["session_id"], self.cfg.profile_id, _NoMedia())
        col.now = last
        end = col.emit("session_end", {"total_iterations": 0, "total_tool_calls": 0,
                                       "duration_ms": max(0, round(last - rec["started_ms"]))}, session_event=True)
        rec.update(closed=True, ended_ms=last, lines=lg.append([end]))
        lg.close()
        self.store.save_sessions(self.sessions)
        self._write_summary(rec, events + [end])

    def scan(self, root: Root, rel_dir: str = "") -> tuple[list[str], list[str]]:
        """Recorded folders and files below ``root``/``rel_dir`` (keys, sorted; policy applied while walking)."""
        dirs, files = [], []
        top = os.path.join(root.path, rel_dir) if rel_dir else root.path
        for cur, dnames, fnames in os.walk(top):
            rc = os.path.relpath(cur, root.path).replace(os.sep, "/")
            rc = "" if rc == "." else rc
            keep = []
            for d in sorted(dnames):
                r = f"{rc}/{d}" if rc else d
                if not os.path.islink(os.path.join(cur, d)) and self.policy.reason(root, r, True) is None:
                    keep.append(d)
                    dirs.append(self.key_of(root, r))
            dnames[:] = keep
            for f in sorted(fnames):
                r = f"{rc}/{f}" if rc else f
                if self.policy.reason(root, r, False) is None and not os.path.islink(os.path.join(cur, f)):
                    files.append(self.key_of(root, r))
        return dirs, files

    def baseline(self, root: Root, rel_dir: str = "", *, read: bool = True) -> int:
        """Index everything below a folder without recording events (the state the user starts from).

        ``read=False`` (a folder opted back in while watching) indexes names, sizes and modification times only:
        its files may already have changed by the time the marker's removal is processed, so the first change
        of each is recorded as an overwrite (there is no earlier copy to diff against)."""
        dirs, files = self.scan(root, rel_dir)
        for k in dirs:
            self._set(k, {"k": "d"})
        for k in files:
            if read:
                info = self.read_file(self.abs_of(k))
            else:
                try:
                    st = os.stat(self.abs_of(k), follow_symlinks=False)
                except OSError:
                    continue
                info = _FileInfo(None, st.st_size, st.st_mtime_ns, None)
            if info is not None:
                self._set(k, self._entry(info, None, None)[0])
        return len(files)

    def reconcile(self, now: float | None = None, *, live: bool = False) -> Counter:
        """Bring the index up to date with the disk after a start: first start of a folder → baseline (no
        events); otherwise changes made while not watching are recorded now (renames found by equal content).

        ``live`` (a running watcher after a queue overflow, :meth:`resync`): files with a change already pending
        are left to it, so nothing is recorded twice. Returns counts: ``baseline_files``, ``dirs_created``,
        ``created``, ``changed``, ``moved``, ``deleted``."""
        now = time.time() * 1000.0 if now is None else now
        done = Counter()
        for root in self.roots:
            if root.label not in self.baseline_roots:
                done["baseline_files"] += self.baseline(root)
                self.baseline_roots.add(root.label)
                continue
            dirs, files = self.scan(root)
            on_disk = set(dirs) | set(files)
            for k in [k for k in sorted(self.index) if k.split("/", 1)[0] == root.label]:
                if k not in on_disk and not self.policy.check(self.abs_of(k), self.index[k]["k"] == "d"):
                    self._del(k, prefix=True)  # now ignored / opted out: forget silently
            for k in dirs:
                if k not in self.index:
                    self._push(now, {"kind": "mkdir", "rel": k, "dirs_in_parent": self._dirs_in_parent(k) + 1},
                               [["set", k, {"k": "d"}]])
                    self._set(k, {"k": "d"})
                    done["dirs_created"] += 1
            new_files = {}
            for k in files:
                if live and k in self.pending:
                    continue
                e = self.index.get(k)
                try:
                    st = os.stat(self.abs_of(k), follow_symlinks=False)
                except OSError:
                    continue
                if e and e["k"] == "f" and e["s"] == st.st_size and e["m"] == st.st_mtime_ns:
                    continue
                if e:
                    self.pending[k] = _Pending(k, self.abs_of(k), "content", now, now, now)
                    done["changed"] += 1
                else:
                    info = self.read_file(self.abs_of(k))
                    if info is not None:
                        new_files[k] = info
            missing = [k for k in self.index if k.split("/", 1)[0] == root.label and k not in on_disk
                       and self.index[k]["k"] == "f" and not (live and k in self.pending)]
            for k in sorted(missing):
                h = self.index[k].get("h")
                match = next((n for n, info in sorted(new_files.items()) if h and info.hash == h), None)
                if match is not None:
                    info = new_files.pop(match)
                    entry = dict(self.index[k], m=info.mtime_ns)
                    self._push(now, {"kind": "move", "src": k, "dst": match, "dst_arg": match},
                               [["mv", k, match], ["set", match, entry]])
                    self._mv(k, match)
                    self._set(match, entry)
                    done["moved"] += 1
                else:
                    self._push(now, {"kind": "delete", "rel": k}, [["del", k]])
                    self._del(k)
                    done["deleted"] += 1
            for k in [k for k in self.index if k.split("/", 1)[0] == root.label and "/" in k
                      and k not in on_disk and self.index[k]["k"] == "d" and not (live and k in self.pending)]:
                self._push(now, {"kind": "delete", "rel": k}, [["delp", k]])
                self._del(k, prefix=True)
                done["deleted"] += 1
            for k, info in sorted(new_files.items()):
                self._resolve_new(k, info, now, now)
                done["created"] += 1
        return done

    def resync(self) -> Counter:
        """After the kernel's event queue overflowed (notifications were dropped): reconcile the running
        watcher's index with the disk at once, recording what was missed as if found at a start (files created,
        changed, moved or deleted meanwhile; stamped now — reads in that gap cannot be recovered), and note it
        (log warning, :attr:`notes`, ``stats['queue_overflows']`` and ``stats['overflow_<kind>']``)."""
        roots = sorted(self.overflowed)
        self.overflowed.clear()
        self.policy.invalidate()
        for r in self.roots:  # barrier files whose creation was among the dropped notifications
            try:
                self.sync_seen.update(n for n in os.listdir(r.path) if n.startswith(SYNC_PREFIX))
            except OSError:
                pass
        done = self.reconcile(live=True)
        self.stats["queue_overflows"] += 1
        for k, v in done.items():
            self.stats[f"overflow_{k}"] += v
        what = ", ".join(f"{k} {v}" for k, v in sorted(done.items())) or "nothing was missed"
        msg = (f"inotify queue overflowed at {time.strftime('%H:%M:%S')} ({len(roots)} watched folder(s)); "
               f"reconciled with the disk at once: {what}")
        log.warning("filegram watch: %s", msg)
        if self.stats["queue_overflows"] <= OVERFLOW_NOTES:
            self.notes.append(msg)
        elif self.stats["queue_overflows"] == OVERFLOW_NOTES + 1:
            self.notes.append("more inotify queue overflows, each reconciled at once: totals in the counters "
                              "queue_overflows and overflow_*")
        return done

    # ================================================================== raw events
    def handle(self, ev: RawEvent) -> None:
        """Process one raw notification (updates pending state and the ready queue). ``overflow`` (the kernel
        dropped notifications) schedules a :meth:`resync` at the next :meth:`pump`."""
        self.stats["raw_events"] += 1
        if ev.kind == "overflow":
            self.overflowed.add(ev.src)
            return
        if ev.kind in ("opened", "closed_no_write") and not ev.is_dir:
            if self._is_self_read(ev.src, ev.t, consume=ev.kind == "closed_no_write"):
                return
            if ev.kind == "closed_no_write":
                self._on_read(ev)
            return
        name = os.path.basename(ev.src)
        if name.startswith(SYNC_PREFIX):
            if ev.kind == "created":
                self.sync_seen.add(name)
            elif ev.kind == "deleted":
                self.sync_seen.discard(name)
            return
        if self.policy.is_marker(ev.src) or (ev.dest and self.policy.is_marker(ev.dest)):
            self._on_marker(ev)
            return
        if ev.kind == "moved":
            self._on_moved(ev)
        elif ev.kind in ("created", "modified", "closed"):
            if ev.is_dir:
                if ev.kind == "created":
                    self._on_dir_created(ev.src, ev.t)
            else:
                self._on_content(ev.src, ev.t, closed=ev.kind == "closed")
        elif ev.kind == "deleted":
            self._on_deleted(ev.src, ev.is_dir, ev.t)

    def _loc(self, path: str, is_dir: bool) -> str | None:
        loc = self.policy.check(path, is_dir) if path else None
        return self.key_of(*loc) if loc else None

    def _ensure_session(self, t: float) -> None:
        """Open a session at the first recordable activity (so its first fs_snapshot shows the state before it);
        a gap longer than ``idle_rotate_s`` after a quiet period starts a new one."""
        if self.session is not None and self.quiescent() and t - self.last_activity > \
                self.cfg.idle_rotate_s * 1000.0:
            self.close_session()
        if self.session is None:
            self._open_session(start=t)

    def _push(self, ts: float, obs: dict[str, Any] | None, state: list[list[Any]] | None = None,
              session_event: str | None = None) -> _Item:
        self._ensure_session(ts)
        self._seq += 1
        it = _Item(ts, self._seq, obs, state or [], session_event)
        heapq.heappush(self.ready, it)
        return it

    def _on_read(self, ev: RawEvent) -> None:
        key = self._loc(ev.src, False)
        if key is None or (key not in self.index and key not in self.pending):
            return
        self.read_at[key] = ev.t
        self._ensure_session(ev.t)
        prev = self.last_read.get(key)
        if prev is not None and ev.t - prev < self.cfg.read_dedup_ms:
            return
        if not self.cfg.record_reads:
            return
        self.last_read[key] = ev.t
        it = self._push(ev.t, {"kind": "read", "rel": key, "view_range": None, "output_len": None})
        items = self.read_items[key]
        items.append(it)
        if len(items) > 8:
            items[:] = [x for x in items if not x.committed]

    def _on_content(self, path: str, t: float, closed: bool = False, arrival: bool = False) -> None:
        key = self._loc(path, False)
        if key is None:
            return
        wait = self.cfg.close_settle_ms if (closed or arrival) else self.cfg.debounce_ms
        p = self.pending.get(key)
        if p is None:
            self._ensure_session(t)
            self.pending[key] = _Pending(key, path, "content", t, t, t + wait)
        else:
            if p.kind == "delete":  # deleted then recreated: an atomic save
                p.kind = "content"
            p.last = max(p.last, t)
            p.deadline = t + wait

    def _on_dir_created(self, path: str, t: float) -> None:
        key = self._loc(path, True)
        if key is None or key in self.index:
            return
        self._push(t, {"kind": "mkdir", "rel": key, "dirs_in_parent": self._dirs_in_parent(key) + 1},
                   [["set", key, {"k": "d"}]])
        self._set(key, {"k": "d"})

    def _dirs_in_parent(self, key: str) -> int:
        return max(0, self.subdirs[key.rpartition("/")[0]])

    def _on_deleted(self, path: str, is_dir: bool, t: float) -> None:
        loc = self.policy.locate(path)
        if loc is None:
            return
        key = self.key_of(*loc)
        if is_dir or (key in self.index and self.index[key]["k"] == "d"):
            self._remove_tree(key, t)
            return
        p = self.pending.get(key)
        if key not in self.index:
            if p is not None:
                del self.pending[key]  # created and removed before it settled: a temporary file
                self.stats["temp_files_skipped"] += 1
            return
        self.pending[key] = _Pending(key, path, "delete", t if p is None else min(p.first, t), t,
                                     t + self.cfg.delete_recheck_ms)

    def _remove_tree(self, key: str, t: float) -> None:
        for k in [k for k in self.pending if k == key or k.startswith(key + "/")]:
            del self.pending[k]
        if key not in self.index:
            return
        under = sorted((k for k in self.index if k.startswith(key + "/")), key=lambda k: (-k.count("/"), k))
        for k in under + [key]:
            self._push(t, {"kind": "delete", "rel": k}, [["delp" if self.index[k]["k"] == "d" else "del", k]])
            self._del(k)

    def _on_moved(self, ev: RawEvent) -> None:
        src_key = self._loc(ev.src, ev.is_dir) if ev.src else None
        dst_key = self._loc(ev.dest, ev.is_dir) if ev.dest else None
        if ev.synthetic and dst_key is not None and dst_key in self.index:
            return  # a child of a folder move already applied to the index
        if src_key is None or src_key not in self.index and src_key not in self.pending:
            # from outside / from an ignored name / untracked: content arriving at dest
            if dst_key is None:
                return
            if ev.is_dir:
                self._on_dir_created(ev.dest, ev.t)
            else:
                self._on_content(ev.dest, ev.t, arrival=True)
            return
        if dst_key is None:  # moved out of the watched folders, or to an ignored name
            if ev.is_dir:
                self._remove_tree(src_key, ev.t)
            else:
                self._on_deleted(ev.src, False, ev.t)
            return
        if ev.is_dir:
            self._move_dir(src_key, dst_key, ev.dest, ev.t)
            return
        p = self.pending.pop(src_key, None)
        if src_key not in self.index:
            # written under a temporary name and renamed within the debounce window: never recorded as itself
            assert p is not None
            q = self.pending.get(dst_key)
            first = p.first if q is None else min(p.first, q.first)
            self.pending[dst_key] = _Pending(dst_key, ev.dest, "content", first, max(p.last, ev.t),
                                             ev.t + self.cfg.close_settle_ms)
            self.stats["atomic_saves"] += 1
            return
        if p is not None and p.kind == "content":
            self._resolve(p, read_from=ev.dest)  # the change before the rename belongs to the old name
        self.pending.pop(dst_key, None)
        self._push(ev.t, {"kind": "move", "src": src_key, "dst": dst_key, "dst_arg": dst_key},
                   [["mv", src_key, dst_key]])
        self._mv(src_key, dst_key)
        for it in self.read_items.pop(src_key, []):
            self.read_items[dst_key].append(it)

    def _move_dir(self, src_key: str, dst_key: str, dst_abs: str, t: float) -> None:
        for k in sorted(k for k in list(self.pending) if k == src_key or k.startswith(src_key + "/")):
            p = self.pending.pop(k)
            new_k = dst_key + k[len(src_key):]
            new_abs = os.path.join(dst_abs, *self.real_rel(k[len(src_key) + 1:])) if k != src_key else dst_abs
            if k in self.index and p.kind == "content":
                self._resolve(p, read_from=new_abs)
            elif k not in self.index:
                self.pending[new_k] = _Pending(new_k, new_abs, p.kind, p.first, p.last, p.deadline)
        if src_key not in self.index:
            self._on_dir_created(dst_abs, t)
            return
        self._push(t, {"kind": "move", "src": src_key, "dst": dst_key, "dst_arg": dst_key},
                   [["mv", src_key, dst_key]])
        self._mv(src_key, dst_key)
        self.policy.invalidate()

    def _on_marker(self, ev: RawEvent) -> None:
        self.policy.invalidate()
        changes = []
        if ev.kind in ("created", "modified", "closed"):
            changes.append((ev.src, True))
        elif ev.kind == "deleted":
            changes.append((ev.src, False))
        elif ev.kind == "moved":
            changes += [(ev.src, False), (ev.dest, True)]
        for path, appeared in changes:
            loc = self.policy.locate(os.path.dirname(path)) if path else None
            if loc is None:
                continue
            root, rel = loc
            dkey = self.key_of(root, rel)
            if appeared:  # opted out: stop tracking the folder's content, record nothing
                for k in [k for k in self.pending if k.startswith(dkey + "/")]:
                    del self.pending[k]
                for k in [k for k in self.index if k.startswith(dkey + "/") or (k == dkey and rel)]:
                    self._del(k)
                self.stats["opt_out_folders"] += 1
            elif self.policy.reason(root, rel, True) is None:  # opted back in: its content is the new baseline
                if rel:
                    self._set(dkey, {"k": "d"})
                self.baseline(root, rel, read=False)

    # ================================================================== resolution
    def _due(self, now: float) -> list[_Pending]:
        """Pending changes to resolve now: quiet long enough, or open for ``max_pending_ms`` (a file written
        without pause — a log, a download — is recorded in steps, so it never holds the log back)."""
        cap = self.cfg.max_pending_ms
        return sorted((p for p in self.pending.values() if p.deadline <= now or now - p.first >= cap),
                      key=lambda p: (p.first, p.key))

    def _resolve(self, p: _Pending, read_from: str | None = None) -> None:
        self.pending.pop(p.key, None)
        path = read_from or p.abs
        if p.kind == "delete":
            if os.path.lexists(path) and self._loc(path, False) == p.key:
                p = _Pending(p.key, path, "content", p.first, p.last, p.deadline)  # it came back: a re-save
            else:
                self._push(p.first, {"kind": "delete", "rel": p.key}, [["del", p.key]])
                self._del(p.key)
                return
        info = self.read_file(path)
        if info is None:
            self.stats["vanished_before_read"] += 1
            return
        old = self.index.get(p.key)
        if old is None or old["k"] != "f":
            self._resolve_new(p.key, info, p.first, p.last)
            return
        if (info.hash is not None and info.hash == old["h"]) or (
                old["h"] is None and info.size == old["s"] and info.mtime_ns == old["m"]):
            self._set(p.key, dict(old, m=info.mtime_ns))  # same content (touch, re-save): nothing to record
            self.stats["unchanged_saves"] += 1
            return
        before = self.shadow_text(old)
        entry, cap = self._entry(info, old.get("ca"), p.last)
        if cap is not None and before is not None:
            obs = {"kind": "edit", "rel": p.key, "tool": "external", "before": before, "after": cap, "n_edits": 1}
        else:
            obs = {"kind": "write", "rel": p.key, "existed": True, "before": None, "after": cap or "",
                   "written_chars": entry["c"] if entry["c"] is not None else info.size, "tool": "write"}
        self._push(p.last, obs, [["set", p.key, entry]])  # an edit, when the text reached what is recorded
        self._set(p.key, entry)

    def _resolve_new(self, key: str, info: _FileInfo, first: float, last: float) -> None:
        entry, cap = self._entry(info, first, last)
        gone = self._moved_source(key, info)
        if gone is not None:  # the same content just vanished elsewhere: a move the kernel did not pair
            self.pending.pop(gone, None)
            self._push(first, {"kind": "move", "src": gone, "dst": key, "dst_arg": key},
                       [["mv", gone, key], ["set", key, entry]])
            self._mv(gone, key)
            self._set(key, dict(entry, ca=self.index[key].get("ca")))
            return
        src = self._copy_source(key, info, first, last)
        if src is not None:
            obs = {"kind": "copy", "src": src, "dst": key, "dst_arg": key, "existed": False}
            for it in self.read_items.get(src, []):  # `cp` read its source: that read is part of the copy
                if not it.cancelled and not it.committed and first - 1000.0 <= it.ts <= last + self.cfg.close_settle_ms + 1000.0:
                    it.cancelled = True
        else:
            obs = {"kind": "write", "rel": key, "existed": False, "before": None, "after": cap or "",
                   "written_chars": entry["c"] if entry["c"] is not None else info.size, "tool": "write"}
        self._push(first, obs, [["set", key, entry]])  # a new file is stamped when it appeared
        self._set(key, entry)

    def _moved_source(self, key: str, info: _FileInfo) -> str | None:
        """An indexed file with the same content that no longer exists on disk (a move between two watched
        folders arrives as a departure and an arrival; a move whose departure is still queued looks the same)."""
        if not info.hash or not info.size:
            return None
        for k in sorted(self.by_hash.get(info.hash, ())):
            if k != key and self.index[k]["k"] == "f" and not os.path.lexists(self.abs_of(k)):
                return k
        return None

    def _copy_source(self, key: str, info: _FileInfo, first: float, last: float) -> str | None:
        if not info.hash or not info.size:
            return None
        best, best_t = None, None
        w = self.cfg.copy_window_ms
        for k in sorted(self.by_hash.get(info.hash, ())):
            if k == key:
                continue
            t = self.read_at.get(k)
            if t is not None and first - w <= t <= last + w and (best_t is None or t > best_t):
                best, best_t = k, t
        if best is not None:
            del self.read_at[best]  # one read makes one copy
        return best

    # ================================================================== commit
    def pump(self, now: float | None = None, *, flush_all: bool = False) -> int:
        """Resolve due pending changes and commit what can be committed; returns the number of log lines."""
        if self.overflowed:
            self.resync()
        now = time.time() * 1000.0 if now is None else now
        for p in (sorted(self.pending.values(), key=lambda p: (p.first, p.key)) if flush_all else self._due(now)):
            if p.key in self.pending:
                self._resolve(p)
        barrier = min((p.first for p in self.pending.values()), default=float("inf"))
        batch: list[_Item] = []
        while self.ready and self.ready[0].ts < barrier:
            it = heapq.heappop(self.ready)
            if not it.cancelled:
                batch.append(it)
        lines = self._commit(batch, now) if batch else 0
        if self.session is not None and not flush_all:
            if now - self.last_activity > self.cfg.idle_rotate_s * 1000.0 and not self.pending and not self.ready:
                self.close_session()
            elif self.cfg.snapshot_interval_s and now - self.last_snapshot > self.cfg.snapshot_interval_s * 1000:
                media = self._new_media()
                self._flush_lines([self._snapshot(now)], media)
        if not self.pending and not self.ready and time.monotonic() - self.last_checkpoint > \
                self.cfg.checkpoint_interval_s:
            self.checkpoint()
        return lines

    def _commit(self, batch: list[_Item], now: float) -> int:
        lines: list[dict[str, Any]] = []
        media = MediaStore() if self.cfg.content != "off" else _NoMedia()
        for it in batch:
            it.committed = True
            if self.session is None or it.ts - self.last_activity > self.cfg.idle_rotate_s * 1000.0:
                if lines:
                    self._flush_lines(lines, media)
                    lines, media = [], (MediaStore() if self.cfg.content != "off" else _NoMedia())
                if self.session is not None:
                    self.close_session()
                self._open_session(start=it.ts)
            self.collector.media = media
            self.collector.now = it.ts
            if it.obs is not None:
                if it.obs["kind"] == "read":
                    e = self.index.get(it.obs["rel"])
                    if e is None or e["k"] != "f":
                        continue
                    it.obs["output_len"] = e["c"] if e["c"] is not None else e["s"]
                self.collector.apply(it.obs)
            evs = self.collector.drain()
            if it.state:
                if evs:
                    evs[-1]["_state"] = it.state
                else:
                    lines.append({"_state": it.state})
            for e in evs:
                if e["event_type"] in BEHAVIOURAL:
                    self.stats[e["event_type"]] += 1
                    self.lags_ms.append(now - it.ts)
            lines.extend(evs)
            self.last_activity = max(self.last_activity, it.ts)
        self._flush_lines(lines, media)
        return len(lines)

    def _flush_lines(self, lines: list[dict[str, Any]], media) -> None:
        if not lines:
            return
        if isinstance(media, MediaStore):
            self.stats["media_files"] += self.store.put_media(media, durable=False)
        self._flush_shadows()
        self.store.sync()  # blobs, diffs and shadows on disk before the lines that refer to them
        self.log.append(lines)
        self.session["lines"] = self.log.lines

    def _new_media(self):
        """A fresh media store for the next events (the collector saves their blobs into it)."""
        self.collector.media = media = MediaStore() if self.cfg.content != "off" else _NoMedia()
        return media

    # ================================================================== sessions
    def _listing(self) -> list[tuple[str, bool]]:
        return [(k, e["k"] == "d") for k, e in self.index.items()] + [(r.label, True) for r in self.roots]

    def _snapshot(self, ts: float) -> dict[str, Any]:
        self.collector.now = ts
        self.last_snapshot = ts
        ev = self.collector.fs_snapshot(self._listing())
        self.collector.drain()
        return ev

    def _open_session(self, start: float | None = None, resume: dict[str, Any] | None = None,
                      events: list[dict[str, Any]] | None = None) -> None:
        if resume is not None:
            self.session = resume
            self.log = SessionLog.open(self.store.log_path(resume["session_id"]))
            if self.log.recovered.torn_bytes:
                self.notes.append(self.log.recovered.message() + " (moved to events.jsonl.torn)")
            self.collector = WatchCollector(resume["session_id"], self.cfg.profile_id, _NoMedia())
            self.collector.restore(events or [])
            self.last_activity = max([float(e.get("timestamp") or 0) for e in events or []] + [resume["started_ms"]])
            self.last_snapshot = self.last_activity
            return
        sid = str(uuid.uuid4())
        rec = {"session_id": sid, "task_id": task_id_for(sid, start), "started_ms": start, "ended_ms": None,
               "closed": False, "lines": 0}
        self.sessions.append(rec)
        self.store.save_sessions(self.sessions)
        self.session = rec
        self.log = SessionLog.open(self.store.log_path(sid))
        self.collector = WatchCollector(sid, self.cfg.profile_id, _NoMedia())
        self.collector.now = start
        media = MediaStore() if self.cfg.content != "off" else _NoMedia()
        self.collector.media = media
        first = [self.collector.emit("session_start", {"target_directory": f"/sandbox/{r.label}"},
                                     session_event=True) for r in sorted(self.roots, key=lambda r: r.label)]
        self.collector.drain()
        first.append(self._snapshot(start))
        self._flush_lines(first, media)
        self.last_activity = start
        self.stats["sessions_opened"] += 1

    def close_session(self) -> None:
        """End the open session: final ``fs_snapshot`` and ``session_end`` at the last activity, summary.json."""
        if self.session is None:
            return
        end = self.last_activity
        media = self._new_media()
        snap = self._snapshot(end)
        self.collector.now = end
        fin = self.collector.emit("session_end", {"total_iterations": 0, "total_tool_calls": 0,
                                                  "duration_ms": max(0, round(end - self.session["started_ms"]))},
                                  session_event=True)
        self.collector.drain()
        self._flush_lines([snap, fin], media)
        self.log.close()
        self.session.update(closed=True, ended_ms=end, lines=self.log.lines)
        self.store.save_sessions(self.sessions)
        events, _ = self.store.read_session(self.session["session_id"])
        self._write_summary(self.session, events)
        self.session = self.log = self.collector = None
        self.stats["sessions_closed"] += 1

    def _write_summary(self, rec: dict[str, Any], events: list[dict[str, Any]]) -> None:
        self.store.write_summary(rec["session_id"], session_summary(rec, events, self.cfg, self.roots))

    # ================================================================== checkpoint / stop
    def quiescent(self) -> bool:
        return not self.pending and not self.ready and not self.overflowed

    def checkpoint(self) -> None:
        """Write the index with the log position it reflects (only valid when quiescent)."""
        if not self.quiescent() or not self._dirty:
            return
        if self._shadow_todo:
            self._flush_shadows()
            self.store.sync()
        logs = {r["session_id"]: (self.log.lines if self.session is r and self.log else r.get("lines", 0))
                for r in self.sessions}
        self.store.save_checkpoint({"index": self.index, "logs": logs,
                                    "baseline_roots": sorted(self.baseline_roots), "written_at_ms":
                                    time.time() * 1000.0})
        self.last_checkpoint = time.monotonic()
        self._dirty = False
        keep = {e["h"] for e in self.index.values() if e.get("sh") and e.get("h")}
        self.stats["shadows_removed"] += self.store.gc_shadows(keep)

    def shutdown(self) -> None:
        """Resolve and commit everything pending, close the session, checkpoint."""
        self.pump(flush_all=True)
        self.pump(flush_all=True)
        self.close_session()
        self.checkpoint()

    def lag_summary(self) -> dict[str, float]:
        """Commit lag (ms from an event's timestamp to its fsync'd append): count, p50, p95, max."""
        if not self.lags_ms:
            return {"count": 0}
        xs = sorted(self.lags_ms)

        def q(p):
            return round(xs[min(len(xs) - 1, int(p * len(xs)))], 1)

        return {"count": len(xs), "p50_ms": q(0.5), "p95_ms": q(0.95), "max_ms": round(xs[-1], 1)}


def session_summary(rec: dict[str, Any], events: list[dict[str, Any]], cfg: WatchConfig, roots: list[Root]
                    ) -> dict[str, Any]:
    """summary.json of a session (reference §12 fields plus counts by type and the content mode)."""
    refs = {(r["type"], r["hash"]) for e in events for f in ("media_ref", "media_ref_old", "media_ref_new",
                                                                "media_ref_diff") if isinstance(r := e.get(f), dict)}
    by_type = Counter(e["event_type"] for e in events)
    return {
        "session_id": rec["session_id"], "task_id": rec["task_id"], "profile_id": cfg.profile_id,
        "watch_dirs": [f"/sandbox/{r.label}" for r in roots],
        "start_time": rec["started_ms"], "end_time": rec["ended_ms"],
        "duration_ms": max(0, round((rec["ended_ms"] or rec["started_ms"]) - rec["started_ms"])),
        "total_events": len(events), "behavioral_events": sum(by_type[t] for t in BEHAVIOURAL),
        "events_by_type": dict(sorted(by_type.items())),
        "media_stats": {"blobs": sum(1 for t, _ in refs if t == "blob"),
                        "diffs": sum(1 for t, _ in refs if t == "diff")},
        "content_mode": cfg.content,
    }
