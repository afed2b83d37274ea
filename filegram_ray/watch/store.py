"""The watcher store: everything ``filegram watch`` records, in one local folder.

Layout::

    store.json                       format marker, watched folders (real path + label), resolved settings
    lock                             held (flock) while a watcher or ``--forget`` works on the store
    sessions/index.json              one record per session: id, task id, start/end (epoch ms), closed, events
    sessions/<session_id>/events.jsonl   the append-only session log (:mod:`filegram_ray.watch.journal`)
    sessions/<session_id>/summary.json   written when the session closes (reference §12 fields)
    media/blobs/<hash>.blob          content-addressed text snapshots  } reference §2.2 layout, shared by all
    media/diffs/<hash>.diff          content-addressed unified diffs   } sessions (one copy per distinct text)
    shadow/<hh>/<hash>               the captured text of each file's current version (diff base; private)
    state/checkpoint.json            the watcher's file index as of a log position (replayed forward on start)
    state/name.key                   secret key of the keyed hash in redacted names (private, never exported)
    engrams/ memory/ indices/ cache/ written by ``filegram watch --update-memory`` (the encode stage's run layout)

Blobs and diffs are produced by :class:`filegram_ray.engine.media.MediaStore` (same hashing, NUL check,
truncation and diff format as the engine) and written here once, atomically, before the event that refers to
them is logged; a media reference in an event is relative to ``media/`` as in a trajectory folder.
Nothing here is sent anywhere: the store is plain files on the local disk.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json
from filegram_ray.storage import atomic_write_local
from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.journal import LogReport, read_log
from filegram_ray.watch.privacy import Redactor, Root, make_label

__all__ = ["STORE_FORMAT", "StoreBusyError", "StoreError", "WatchStore", "is_watch_store", "task_id_for"]

STORE_FORMAT = "filegram-watch"
STORE_VERSION = 1


class StoreError(UserError):
    """A store folder is missing, not a watcher store, or inconsistent (the message names the path)."""


class StoreBusyError(UserError, RuntimeError):
    """Another process (a running watcher) holds the store's lock."""


def is_watch_store(path: str | os.PathLike) -> bool:
    """True if ``path`` holds a watcher store (``store.json`` with the format marker)."""
    p = Path(path) / "store.json"
    try:
        return load_json(p.read_bytes(), str(p)).get("format") == STORE_FORMAT
    except (OSError, ValueError):
        return False


def task_id_for(session_id: str, started_ms: float) -> str:
    """The task id a session gets as a trajectory: ``S-<UTC start YYYYmmddTHHMMSS>-<6 hex of its id>`` (sorts by
    start time)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started_ms / 1000.0))
    return f"S-{stamp}-{session_id.replace('-', '')[:6]}"


def _write_nosync(path: Path, data: bytes) -> None:
    """Atomic write (temporary name, rename) without fsync: made durable by :meth:`WatchStore.sync` per batch."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
    os.replace(tmp, path)


def _syncfs(path: Path) -> None:
    """Flush the file system holding ``path`` (Linux ``syncfs``: one call instead of one fsync per file);
    elsewhere ``os.sync``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_local(path, json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8"))


class WatchStore:
    """A store folder (see the module docstring).

    Use :meth:`open` for an existing store or :meth:`create` for a new one; :meth:`open_or_create` does either.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()
        self._lock_fh = None

    # ------------------------------------------------------------------ creation / settings
    @classmethod
    def open(cls, path: str | os.PathLike) -> WatchStore:
        """Open an existing store.

        Raises:
            StoreError: ``path`` is not a watcher store.
        """
        s = cls(path)
        if not is_watch_store(s.path):
            raise StoreError(f"{s.path}: not a filegram watch store (no store.json with format "
                             f"{STORE_FORMAT!r}); create one with `filegram watch DIR --out {path}`")
        return s

    @classmethod
    def open_or_create(cls, path: str | os.PathLike, dirs: list[str], config: WatchConfig | None) -> WatchStore:
        """Open the store at ``path`` (creating it if absent) and set its watched folders and settings.

        ``dirs`` empty → keep the stored folders; otherwise the stored folders are replaced by ``dirs`` (a folder
        watched before keeps its label). ``config`` None → keep the stored settings.

        Raises:
            StoreError: ``path`` exists, is not empty and is not a store; a folder does not exist or is not a
                folder; two folders are nested; no folder to watch.
        """
        s = cls(path)
        if s.path.exists() and not is_watch_store(s.path) and any(s.path.iterdir()):
            raise StoreError(f"{s.path}: exists, is not empty and is not a filegram watch store; choose a new "
                             f"folder for --out")
        meta = s.meta() if is_watch_store(s.path) else {
            "format": STORE_FORMAT, "version": STORE_VERSION, "created_at_ms": time.time() * 1000.0,
            "roots": [], "config": WatchConfig().model_dump()}
        old = {r["path"]: r["label"] for r in meta["roots"]}
        if dirs:
            roots, taken = [], set()
            for d in dirs:
                real = os.path.realpath(os.path.expanduser(d))
                if not os.path.isdir(real):
                    raise StoreError(f"{d}: not a folder (filegram watch watches folders)")
                if real in (r["path"] for r in roots):
                    continue
                for r in roots:
                    if real.startswith(r["path"] + os.sep) or r["path"].startswith(real + os.sep):
                        raise StoreError(f"{d}: nested with {r['path']}; name only the outer folder (folders are "
                                         f"watched recursively)")
                label = old.get(real) or make_label(s._label_source(real, config or meta["config"]),
                                                    taken | set(old.values()))
                taken.add(label)
                roots.append({"path": real, "label": label})
            meta["roots"] = roots
        if not meta["roots"]:
            raise StoreError(f"{s.path}: no folder to watch; name at least one: `filegram watch DIR --out {path}`")
        if config is not None:
            meta["config"] = config.model_dump()
        for sub in ("sessions", "media/blobs", "media/diffs", "shadow", "state"):
            (s.path / sub).mkdir(parents=True, exist_ok=True)
        _write_json(s.path / "store.json", meta)
        return s

    def _label_source(self, real: str, config: WatchConfig | dict[str, Any]) -> str:
        """The path a new folder's label is made from: its base name redacted like every recorded name unless
        content mode is ``full`` (a folder named after an e-mail address must not put it into every event)."""
        cfg = config if isinstance(config, WatchConfig) else WatchConfig.model_validate(config)
        if cfg.content == "full":
            return real
        base = Redactor(cfg.phone_region, self.name_key()).redact_name(os.path.basename(real))
        return os.path.join(os.path.dirname(real), base)

    def meta(self) -> dict[str, Any]:
        return load_json((self.path / "store.json").read_bytes(), str(self.path / "store.json"))

    @property
    def config(self) -> WatchConfig:
        return WatchConfig.model_validate(self.meta()["config"])

    @property
    def roots(self) -> list[Root]:
        return [Root(r["path"], r["label"]) for r in self.meta()["roots"]]

    # ------------------------------------------------------------------ lock
    def lock(self, what: str = "watcher") -> None:
        """Take the store's exclusive lock (released by :meth:`unlock` or process exit).

        Raises:
            StoreBusyError: another process holds it (the message names that process when known).
        """
        fh = open(self.path / "lock", "a+")  # noqa: SIM115 - held until unlock
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            raise StoreBusyError(f"{self.path} is in use ({holder or 'another process'}); stop that watcher first "
                                 f"(Ctrl-C, or kill its pid)") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{what} pid {os.getpid()}")
        fh.flush()
        self._lock_fh = fh

    def unlock(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.seek(0)
            self._lock_fh.truncate()
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    # ------------------------------------------------------------------ media (CAS) and shadows
    @property
    def media_dir(self) -> Path:
        return self.path / "media"

    def put_media(self, media, *, durable: bool = True) -> int:
        """Write the blobs/diffs of a :class:`~filegram_ray.engine.media.MediaStore` that are not stored yet
        (atomically); ``durable`` → flushed to disk before returning (else the caller calls :meth:`sync`).
        Returns how many files were new."""
        new = 0
        for h, entry in media.entries.items():
            rel = f"blobs/{h}.blob" if entry["type"] == "blob" else f"diffs/{h}.diff"
            target = self.media_dir / rel
            if not target.exists():
                _write_nosync(target, media.read(rel))
                new += 1
        if new and durable:
            self.sync()
        return new

    def sync(self) -> None:
        """Make everything written to the store so far durable (one ``syncfs``)."""
        _syncfs(self.path)

    def shadow_path(self, raw_hash: str) -> Path:
        return self.path / "shadow" / raw_hash[:2] / raw_hash

    def put_shadow(self, raw_hash: str, text: str) -> None:
        """Store the captured text of a file version (made durable with the next batch's :meth:`sync`; a shadow
        lost in a crash only turns that file's next edit into an overwrite without a diff)."""
        p = self.shadow_path(raw_hash)
        if not p.exists():
            _write_nosync(p, text.encode("utf-8", "surrogatepass"))

    def get_shadow(self, raw_hash: str | None) -> str | None:
        if not raw_hash:
            return None
        try:
            return self.shadow_path(raw_hash).read_bytes().decode("utf-8", "surrogatepass")
        except OSError:
            return None

    def gc_shadows(self, keep: set[str]) -> int:
        """Remove shadow files whose hash is not in ``keep``; returns how many were removed."""
        n = 0
        base = self.path / "shadow"
        for p in base.glob("*/*"):
            if p.name not in keep:
                p.unlink(missing_ok=True)
                n += 1
        return n

    # ------------------------------------------------------------------ sessions
    def sessions(self) -> list[dict[str, Any]]:
        """Session records in start order: ``{session_id, task_id, started_ms, ended_ms, closed, events}``."""
        p = self.path / "sessions" / "index.json"
        if not p.exists():
            return []
        return load_json(p.read_bytes(), str(p))

    def save_sessions(self, records: list[dict[str, Any]]) -> None:
        _write_json(self.path / "sessions" / "index.json", records)

    def log_path(self, session_id: str) -> Path:
        return self.path / "sessions" / session_id / "events.jsonl"

    def read_session(self, session_id: str, *, keep_state: bool = False) -> tuple[list[dict[str, Any]], LogReport]:
        """Events of one session log (state-only lines dropped; ``_state`` removed unless ``keep_state``) and the
        log report (torn last line, bad lines)."""
        objs, rep = read_log(self.log_path(session_id))
        if keep_state:
            return objs, rep
        out = []
        for o in objs:
            if "event_type" not in o:
                continue
            if "_state" in o:
                o = {k: v for k, v in o.items() if k != "_state"}
            out.append(o)
        return out, rep

    def write_summary(self, session_id: str, summary: dict[str, Any]) -> None:
        _write_json(self.path / "sessions" / session_id / "summary.json", summary)

    # ------------------------------------------------------------------ name redaction key
    def name_key(self) -> bytes:
        """The store's secret key for name placeholders (:meth:`~filegram_ray.watch.privacy.Redactor.redact_name`):
        32 random bytes in ``state/name.key`` (mode 0600), made on first use. It stays in the store (never in
        events, blobs or exports) so a name gets the same placeholder in every session of this store, and a
        placeholder cannot be checked against a guessed name without it."""
        p = self.path / "state" / "name.key"
        try:
            key = p.read_bytes()
        except FileNotFoundError:
            key = None
        if key is not None:
            if len(key) != 32:
                raise StoreError(f"{p}: not a name key (expected 32 bytes, found {len(key)}); restore it from a "
                                 f"backup, or remove it (names recorded later then get new placeholders)")
            return key
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".name.key.tmp-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, p)  # first writer wins; a concurrent one reads the winner's key
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return p.read_bytes()

    # ------------------------------------------------------------------ checkpoint
    def load_checkpoint(self) -> dict[str, Any]:
        p = self.path / "state" / "checkpoint.json"
        if not p.exists():
            return {"index": {}, "logs": {}, "baseline_roots": []}
        return load_json(p.read_bytes(), str(p))

    def save_checkpoint(self, ckpt: dict[str, Any]) -> None:
        atomic_write_local(self.path / "state" / "checkpoint.json",
                           json.dumps(ckpt, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    # ------------------------------------------------------------------ memory artefacts
