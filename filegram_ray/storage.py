"""The storage seam: every stage reads and writes its run directory through :class:`RunDir`.

A run directory is a local path (``runs/default``), a ``file://`` URI, or any fsspec URI (``s3://bucket/run``,
``gs://…``, ``memory://run`` in tests). Design rules (ARCHITECTURE.md §1):

* a unit of work is written atomically: bytes go to a temporary name beside the target, then are renamed
  (on object stores, where a single ``put`` is already atomic, the object is written under its final key once);
* a finished item leaves a completion record ``_done/<stage>/<unit>.json`` so reruns skip it; an item that
  failed leaves a row in ``errors/<stage>.parquet`` (:meth:`RunDir.write_errors`);
* index tables are Parquet files written with polars;
* one process at a time runs a stage on a run directory (:meth:`RunDir.lock`): two jobs on one run directory
  raced on the same temp files and index tables (REL-concurrent-generate-index-corruption). On a local directory
  (or a shared POSIX mount) the lock is exclusive (``flock``); on S3 it is a record created with a conditional PUT
  (``If-None-Match: *``), so of two jobs racing for it exactly one wins; on other object stores it is **advisory**:
  it stops the common mistake (a second job started on a run directory that a live job holds) but is not mutual
  exclusion (see :meth:`RunDir.lock`).

Paths handed to and returned from :class:`RunDir` are always *relative* POSIX paths inside the run directory.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import posixpath
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import fsspec

from filegram_ray.errors import StorageError, UserError
from filegram_ray.limits import load_json

__all__ = ["ERROR_COLUMNS", "ERRORS_DIR", "RunDir", "RunDirLockedError", "StorageError", "atomic_write_local",
           "safe_unit_name"]

# Object stores without a cheap rename: write the final key directly (a single PUT is atomic there).
_PUT_IS_ATOMIC = {"s3", "s3a", "gs", "gcs", "abfs", "az", "memory"}
# Object stores whose fsspec driver creates a key only if it does not exist, atomically on the server:
# s3fs ``pipe_file(..., mode="create")`` sends ``If-None-Match: *`` (AWS S3 since 2024-08; MinIO, moto).
_CONDITIONAL_CREATE = {"s3", "s3a"}


class RunDirLockedError(StorageError):
    """Another process holds the run directory's lock; the message names it (host, pid, stage, since when)."""


#: lock file of a local run directory (``fcntl.flock``; left in place, emptied on release)
LOCK_FILE = ".lock"
#: lock record on an object store (removed on release; stale when its heartbeat is older than LOCK_STALE_S)
LOCK_RECORD = "_lock.json"
#: on a store with conditional create: the one job that may take over a stale record of token T creates this first
LOCK_TAKEOVER = "_lock.takeover-{token}.json"
LOCK_HEARTBEAT_S = 30.0
LOCK_STALE_S = 180.0

#: the folder of the error tables, one per stage (:meth:`RunDir.write_errors`)
ERRORS_DIR = "errors"
#: the columns of an error table: :meth:`filegram_ray.stages.base.Row.error`'s fields
ERROR_COLUMNS = ("unit", "stage", "error_type", "error", "traceback")

# locks held by this process: run root → [depth, handle]; a stage inside the pipeline re-enters the pipeline's lock
_HELD: dict[str, list[Any]] = {}
_HELD_GUARD = threading.Lock()


def safe_unit_name(unit_id: str) -> str:
    """Turn a unit id such as ``p1_methodical/T-01`` into a flat file-name-safe token (``p1_methodical__T-01``)."""
    return unit_id.replace("/", "__").replace("\\", "__")


#: Name of the temporary sibling of a write in progress: ``.<name>.tmp-<8 hex digits>`` (:func:`temp_name`).
TEMP_RE = re.compile(r"\..+\.tmp-[0-9a-f]{8}", re.DOTALL)


def temp_name(name: str) -> str:
    """The temporary sibling name of a write of ``name`` in progress (matches :data:`TEMP_RE`)."""
    return f".{name}.tmp-{uuid.uuid4().hex[:8]}"


def atomic_write_local(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a local ``path`` via a temporary sibling and ``os.replace`` (atomic on POSIX).

    A write that fails (``ENOSPC``, ``EDQUOT``, an interrupt) removes its temporary file before the error goes on, so a
    full disk leaves nothing behind (case REL2-FAULT-diskfull-orphan-tmp-files); what a killed process leaves is swept
    by :meth:`RunDir.sweep_temp` when the next stage starts.

    Raises:
        OSError: the write or the rename failed (the target keeps its old bytes, or stays absent).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(temp_name(path.name))
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def local_run_path(uri: str | os.PathLike) -> str | None:
    """The absolute local path of a run directory URI (``file://`` or a plain path); None for an object store."""
    s = str(uri)
    if "://" in s and not s.startswith("file://"):
        return None
    return os.path.abspath(os.path.expanduser(s.removeprefix("file://")))


def refuse_missing_local_run(uri: str | os.PathLike, what: str = "this command") -> None:
    """Refuse a local run directory that does not exist, before anything creates it (``RunDir`` and the readers
    make folders as they go): commands that only read a run must not leave a typo'd directory behind. Object-store
    URIs are not checked here.

    Raises:
        StorageError: names the path and says that ``what`` reads an existing run (or that the path is a file).
    """
    path = local_run_path(uri)
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        raise StorageError(f"{path}: a file, not a run directory ({what} reads a run directory)")
    if path is not None and not os.path.isdir(path):
        raise StorageError(f"{path}: no such run directory ({what} reads an existing run; nothing was created)")


class RunDir:
    """A run directory on any fsspec filesystem.

    Args:
        uri: local path or fsspec URI of the run directory root. Created if missing.
        storage_options: keyword arguments for the fsspec filesystem (e.g. ``endpoint_url`` for an S3-compatible
            server, ``key``/``secret``).

    Raises:
        StorageError: if the filesystem cannot be created for ``uri``.
    """

    def __init__(self, uri: str | os.PathLike, storage_options: dict[str, Any] | None = None):
        uri = os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        try:
            fs, root = fsspec.core.url_to_fs(uri, **self.storage_options)
        except Exception as exc:  # pragma: no cover - depends on installed backends
            raise StorageError(f"cannot open run directory {uri!r}: {exc}") from exc
        self.fs = fs
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self.protocol = protocol
        self.is_local = protocol in ("file", "local")
        if self.is_local:
            root = os.path.abspath(root)
        self.root = root.rstrip("/") or "/"
        self.uri = uri if not self.is_local else self.root
        if self.is_local:
            os.makedirs(self.root, exist_ok=True)

    # ------------------------------------------------------------------ paths
    def __repr__(self) -> str:
        return f"RunDir({self.uri!r})"

    def __reduce__(self):  # picklable for Ray tasks and actors
        return (RunDir, (self.uri, self.storage_options))

    def full(self, rel: str = "") -> str:
        """Absolute filesystem path (inside ``fs``) of a relative run-directory path."""
        rel = rel.strip("/")
        if rel.startswith("..") or "/../" in f"/{rel}/":
            raise StorageError(f"{self.uri}: relative path {rel!r} escapes the run directory")
        return posixpath.join(self.root, rel) if rel else self.root

    def url(self, rel: str = "") -> str:
        """URI of a relative path, usable by other fsspec/pyarrow clients."""
        if self.is_local:
            return self.full(rel)
        return f"{self.protocol}://{self.full(rel).lstrip('/')}" if self.protocol != "memory" else (
            "memory://" + self.full(rel))

    # ------------------------------------------------------------------ reads
    def _forget_listings(self, full: str) -> None:
        """Drop what the fsspec driver cached of ``full``'s listings (its own, its parents', everything under it).
        s3fs keeps every listing it made for the life of the filesystem object, which fsspec shares across a
        process; other processes (a stage's actors on other nodes, another job) write here meanwhile, and a stale
        listing misses their files (``exists`` reads the parent's listing too)."""
        if self.is_local:
            return
        try:
            self.fs.invalidate_cache(full)
            cache = getattr(self.fs, "dircache", None)
            if cache is not None:
                prefix = full.rstrip("/") + "/"
                for key in [k for k in list(cache) if str(k).startswith(prefix)]:
                    cache.pop(key, None)
        except Exception:  # noqa: BLE001 - a driver without a listings cache
            pass

    def exists(self, rel: str) -> bool:
        full = self.full(rel)
        self._forget_listings(full)
        return self.fs.exists(full)

    def read_bytes(self, rel: str) -> bytes:
        try:
            if not self.is_local:  # one GET (``open`` asks HEAD, then GET If-Match that HEAD's ETag: a PUT in
                return self.fs.cat_file(self.full(rel))  # between fails it with PreconditionFailed on S3)
            with self.fs.open(self.full(rel), "rb") as fh:
                return fh.read()
        except FileNotFoundError as exc:
            raise StorageError(f"{self.uri}: missing file {rel!r}") from exc

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def read_json(self, rel: str) -> Any:
        """Parsed JSON of ``rel`` with the strict reader :func:`~filegram_ray.limits.load_json` (UTF-8, no
        duplicate keys, no lone surrogates, bounded nesting). Raises StorageError naming the URI and ``rel``."""
        data = self.read_bytes(rel)
        try:
            return load_json(data, f"{self.uri}: {rel}")
        except ValueError as exc:
            raise StorageError(str(exc)) from None

    def listdir(self, rel: str = "") -> list[str]:
        """Names (not paths) of the entries directly under ``rel``; empty if it does not exist."""
        full = self.full(rel)
        self._forget_listings(full)
        if not self.fs.exists(full):
            return []
        names = []
        for entry in self.fs.ls(full, detail=False):
            names.append(posixpath.basename(str(entry).rstrip("/")))
        return sorted(n for n in names if n)

    def walk_files(self, rel: str = "") -> list[str]:
        """All file paths under ``rel``, relative to the run directory root, sorted."""
        full = self.full(rel)
        self._forget_listings(full)
        if not self.fs.exists(full):
            return []
        out = [posixpath.relpath(str(path), self.root) for path in self.fs.find(full)]
        return sorted(out)

    # ------------------------------------------------------------------ writes
    def write_bytes(self, rel: str, data: bytes) -> str:
        """Write ``data`` atomically at ``rel``; returns ``rel``."""
        full = self.full(rel)
        if self.is_local:
            atomic_write_local(full, data)
            return rel
        parent = posixpath.dirname(full)
        if parent:
            self.fs.makedirs(parent, exist_ok=True)
        if self.protocol in _PUT_IS_ATOMIC:
            self.fs.pipe_file(full, data)
        else:
            tmp = posixpath.join(parent, temp_name(posixpath.basename(full)))
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, full)
            except BaseException:
                with contextlib.suppress(Exception):
                    if self.fs.exists(tmp):
                        self.fs.rm(tmp)
                raise
        return rel

    def sweep_temp(self) -> list[str]:
        """Remove the temporary files of writes that never finished (:data:`TEMP_RE`: ``.<name>.tmp-<8 hex>``, what
        :meth:`write_bytes` writes before its rename) anywhere in the run directory; returns their relative paths,
        sorted. A process killed mid-write (or a full disk under an older version) left them; the stage wrappers
        call this under the run directory's lock when a stage starts, so a resumed run holds the same files as a
        clean one (case REL2-FAULT-diskfull-orphan-tmp-files). Object stores whose single put is atomic write no
        temporary files and are not walked. Never raises: a file that cannot be removed is logged and left."""
        if self.protocol in _PUT_IS_ATOMIC:
            return []
        import logging

        removed: list[str] = []
        if self.is_local:
            for dirpath, _dirs, files in os.walk(self.root):
                for name in files:
                    if TEMP_RE.fullmatch(name):
                        full = os.path.join(dirpath, name)
                        try:
                            os.unlink(full)
                        except OSError as exc:
                            logging.getLogger(__name__).warning("cannot remove stale temporary file %s: %s", full,
                                                                exc)
                            continue
                        removed.append(os.path.relpath(full, self.root).replace(os.sep, "/"))
            return sorted(removed)
        for rel in self.walk_files():
            name = posixpath.basename(rel)
            if TEMP_RE.fullmatch(name) and not name.startswith(f".{LOCK_RECORD}."):  # the lock's heartbeat runs on
                try:
                    self.fs.rm(self.full(rel))
                    removed.append(rel)
                except Exception as exc:  # noqa: BLE001 - a sweep never sinks the stage
                    logging.getLogger(__name__).warning("cannot remove stale temporary file %s: %s", rel, exc)
        return sorted(removed)

    def write_text(self, rel: str, text: str) -> str:
        return self.write_bytes(rel, text.encode("utf-8"))

    def write_json(self, rel: str, obj: Any, *, indent: int | None = 2) -> str:
        """Write JSON deterministically (sorted keys, UTF-8, no ASCII escaping)."""
        return self.write_text(rel, json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=True,
                                               default=_json_default) + "\n")

    def remove(self, rel: str, recursive: bool = True) -> None:
        full = self.full(rel)
        if self.fs.exists(full):
            self.fs.rm(full, recursive=recursive)

    def put_tree(self, local_dir: str | os.PathLike, rel: str) -> list[str]:
        """Copy a local directory tree into the run directory under ``rel`` (each file atomically).

        Returns the relative paths written, sorted.
        """
        local_dir = Path(local_dir)
        written = []
        for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
            sub = path.relative_to(local_dir).as_posix()
            target = posixpath.join(rel, sub)
            self.write_bytes(target, path.read_bytes())
            written.append(target)
        return written

    def get_tree(self, rel: str, local_dir: str | os.PathLike) -> list[Path]:
        """Copy every file under ``rel`` into ``local_dir`` (created); returns the local paths."""
        local_dir = Path(local_dir)
        out = []
        prefix = rel.strip("/")
        for sub in self.walk_files(rel):
            inner = posixpath.relpath(sub, prefix) if prefix else sub
            dest = local_dir / inner
            atomic_write_local(dest, self.read_bytes(sub))
            out.append(dest)
        return out

    # ------------------------------------------------------------------ one job's hold on the run directory
    @classmethod
    @contextlib.contextmanager
    def open_for(cls, uri: str | os.PathLike, stage: str, *, storage_options: dict[str, Any] | None = None,
                 may_start: bool = False, seed: int | None = None, snapshot: dict[str, Any] | None = None,
                 check_new: Any = None) -> Iterator[RunDir]:
        """Every question a job asks of its run directory before and after its work, in one place: the run
        directory of ``stage`` (a stage's name, or ``pipeline``), held while the block runs.

        Before: a file named as the run directory is refused; a local run directory that does not exist is refused
        unless ``may_start`` (a stage that reads a run's outputs must not create an empty one) — both before
        anything (this object, its lock, ``run.json``) creates it; the lock is taken (:meth:`lock`); the seed is
        checked — a run made with another master seed is refused (a run directory holds one plan: a stage run with
        another seed would add items of a second plan beside the first,
        REL-render-rerun-without-seed-mixes-derivatives), and a new run gets ``check_new()`` (the config's ids
        checked against its sets) and then ``run.json`` with ``snapshot`` and ``seed``; temporary files of writes
        that never finished are removed (:meth:`sweep_temp`). ``run.new`` tells whether this job started the run.

        After a failure of a job that started the run and finished nothing (no completion record, no stage
        record): its ``run.json`` is removed (the seed and set it recorded must not pin the directory: a corrected
        command starts it afresh), its lock file when it created it, and the directory when it created it and it is
        empty. Object-store URIs are not checked for existence.

        Raises:
            NotADirectoryError: ``uri`` names a file. FileNotFoundError: a missing local run directory and not
                ``may_start`` (names it and the stage). RunDirLockedError: another process holds it.
            UserError: another seed than the run's (names both and the directory).
        """
        path = local_run_path(uri)
        if path is not None and os.path.exists(path) and not os.path.isdir(path):
            raise NotADirectoryError(f"--run-dir {path} is a file, not a run directory")
        if path is not None and not may_start and not os.path.isdir(path):
            raise FileNotFoundError(f"run directory {path} does not exist: the {stage} stage reads a run's outputs "
                                    "— run the pipeline (or jobs/generate.py) on it first, or pass the --run-dir of "
                                    "an existing run")
        created = path is not None and not os.path.isdir(path)
        created_lock = path is not None and not os.path.exists(os.path.join(path, LOCK_FILE))
        run = cls(uri, storage_options)
        run.new = not run.exists("run.json")
        try:
            with run.lock(stage):
                if seed is not None:
                    run._check_seed(int(seed), snapshot, check_new)
                swept = run.sweep_temp()
                if swept:
                    import logging

                    logging.getLogger(__name__).info(
                        "%s: removed %d temporary file(s) of unfinished writes: %s", stage, len(swept),
                        ", ".join(swept[:5]) + (" …" if len(swept) > 5 else ""))
                yield run
        except RunDirLockedError:  # never held: what is there (run.json, the lock file) belongs to the holder
            raise
        except BaseException:
            if run.new:
                run._forget_start(created, created_lock)
            raise

    def recorded_seed(self) -> int | None:
        """The master seed this run directory was made with (``run.json`` → ``config.seed``), or None for a new
        run."""
        if not self.exists("run.json"):
            return None
        from filegram_ray.schema.meta import read_manifest

        cfg = read_manifest(self).get("config") or {}
        return int(cfg["seed"]) if isinstance(cfg, dict) and cfg.get("seed") is not None else None

    def _check_seed(self, seed: int, snapshot: dict[str, Any] | None, check_new: Any) -> None:
        recorded = self.recorded_seed()
        if recorded is None:
            from filegram_ray.schema.meta import RunManifest, read_manifest

            if check_new is not None:  # e.g. an unknown profile/task id is refused before it is recorded
                check_new()
            man = RunManifest.model_validate(read_manifest(self))
            man.config, man.seed = dict(snapshot or {}), seed
            self.write_json("run.json", man.model_dump(mode="json"))
        elif recorded != seed:
            raise UserError(f"{self.uri} was made with seed {recorded} (run.json) but this run asks for seed {seed}: "
                            f"a run directory holds one plan — rerun with --seed {recorded}, or use a new --run-dir")

    def _forget_start(self, created_dir: bool, created_lock: bool) -> None:
        """:meth:`open_for`'s clean-up of a failed start (never raises: it never hides the job's own error)."""
        try:
            if self.listdir("_done"):
                return
            if self.exists("run.json"):
                data = self.read_json("run.json")
                if isinstance(data, dict) and data.get("stages"):
                    return
                self.remove("run.json", recursive=False)
            if (created_dir or created_lock) and self.is_local:
                lock = os.path.join(self.root, LOCK_FILE)
                if os.path.exists(lock):
                    os.remove(lock)
            if created_dir and self.is_local:
                os.rmdir(self.root)  # only when empty: anything else written stays
        except Exception as exc:  # noqa: BLE001 - clean-up never hides the job's own error
            import logging

            logging.getLogger(__name__).debug("could not forget the failed start of %s: %s", self.uri, exc)

    # ------------------------------------------------------------------ the run-directory lock
    @contextlib.contextmanager
    def lock(self, stage: str):
        """Hold this run directory exclusively while the block runs; re-entrant within one process.

        Local directories use ``fcntl.flock`` on ``<run>/.lock`` (released by the kernel if the process dies, so a
        crash never leaves a stale lock): exclusive between processes of one machine, and on network file systems
        as far as their ``flock`` is.

        Object stores use ``_lock.json`` with a heartbeat every :data:`LOCK_HEARTBEAT_S` s; a record whose
        heartbeat is older than :data:`LOCK_STALE_S` seconds is taken over (a job that died leaves its record:
        a resubmission within that time is refused, the message says when the record goes stale).

        On S3 (:data:`_CONDITIONAL_CREATE`) the record is created with a conditional PUT (s3fs ``mode="create"``,
        ``If-None-Match: *``): of any number of jobs racing for a free run directory exactly one creates it, the
        others are refused. A stale record is taken over by the one job that first creates
        ``_lock.takeover-<its token>.json`` (again conditionally); it then removes the stale record and creates its
        own conditionally. A heartbeat rewrites the record only while it still holds the holder's token. What stays
        possible: a holder that stalls for more than :data:`LOCK_STALE_S` s (suspended VM, store unreachable) and
        resumes while another job holds the record goes on with its stage (its heartbeat stops and logs that it
        lost the lock); an S3-compatible store that ignores ``If-None-Match`` makes the create a plain PUT.

        On other object stores the lock is **advisory**: read, written with a plain PUT, read back after 0.2 s.
        It refuses a second job while a live job's record is there, but two jobs can both hold it when they start
        within one PUT's latency of each other, when a holder stalls as above, or when the store is not
        read-after-write consistent. Start one job per run directory there (one RayJob, one ``ray job submit``);
        docs/install.md says the same.

        Raises:
            RunDirLockedError: another process holds the lock (the message names its host, pid and stage).
        """
        key = f"{self.protocol}://{self.root}"
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None:
                held[0] += 1
        if held is not None:
            try:
                yield
            finally:
                with _HELD_GUARD:
                    held[0] -= 1
            return
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "stage": stage,
                 "since": time.strftime("%Y-%m-%dT%H:%M:%S"), "token": uuid.uuid4().hex}
        handle = self._lock_local(owner) if self.is_local else self._lock_remote(owner)
        with _HELD_GUARD:
            _HELD[key] = [1, handle]
        try:
            yield
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)
            if self.is_local:
                self._unlock_local(handle)
            else:
                self._unlock_remote(handle, owner)

    def _locked_message(self, holder: dict[str, Any] | None) -> str:
        who = (f"pid {holder.get('pid')} on {holder.get('host')} (stage {holder.get('stage')}, since "
               f"{holder.get('since')})") if holder else "another process"
        stale = ""
        if holder and holder.get("beat") is not None:
            try:
                age = time.time() - float(holder["beat"])
                stale = (f"; its last heartbeat was {age:.0f} s ago — if that job is gone, the lock is taken over "
                         f"{max(0.0, LOCK_STALE_S - age):.0f} s from now")
            except (TypeError, ValueError):
                pass
        return (f"{self.uri} is in use by {who}: one job at a time per run directory — wait for it to finish, "
                f"or use another --run-dir{stale}")

    def _lock_local(self, owner: dict[str, Any]):
        import fcntl
        import stat

        path = os.path.join(self.root, LOCK_FILE)
        try:  # never through a link: a .lock pointing outside would be truncated by every stage
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(f"{path}: is a symbolic link; the run directory's lock file must be a regular file "
                                "of its own (remove the link)") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.close(fd)
            what = "has other hard links" if stat.S_ISREG(st.st_mode) else "is not a regular file"
            raise UserError(f"{path}: {what}; the run directory's lock file must be a regular file of its own "
                            "(remove it)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = load_json(os.pread(fd, 4096, 0) or b"null", LOCK_FILE)
            except (OSError, ValueError):
                holder = None
            os.close(fd)
            raise RunDirLockedError(self._locked_message(holder)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({k: v for k, v in owner.items() if k != "token"}).encode(), 0)
        return fd

    def _unlock_local(self, fd: int) -> None:
        import fcntl

        try:
            os.ftruncate(fd, 0)  # an empty lock file: same bytes after every run
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _read_lock_record(self) -> dict[str, Any] | None:
        for attempt in range(3):
            try:
                return load_json(self.read_bytes(LOCK_RECORD), LOCK_RECORD)
            except (StorageError, ValueError):
                return None
            except OSError:  # the record changed while it was read (a racing PUT): read it again
                if attempt == 2:
                    raise
                time.sleep(0.05)
        return None

    def _record_bytes(self, owner: dict[str, Any]) -> bytes:
        return (json.dumps({**owner, "beat": time.time()}, sort_keys=True) + "\n").encode()

    def _create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` holding ``data`` only if no object has that key (a conditional PUT); False when one
        has. Raises TypeError when the installed fsspec driver has no ``mode="create"``."""
        try:
            self.fs.pipe_file(self.full(rel), data, mode="create")
        except FileExistsError:
            return False
        return True

    def _live(self, rec: dict[str, Any] | None) -> bool:
        try:
            return bool(rec) and time.time() - float(rec.get("beat", 0)) < LOCK_STALE_S
        except (TypeError, ValueError):
            return False

    def _lock_conditional(self, owner: dict[str, Any]) -> None:
        """Take ``_lock.json`` with conditional creates (:meth:`lock`); raises RunDirLockedError when held."""
        for _ in range(3):
            if self._create_exclusive(LOCK_RECORD, self._record_bytes(owner)):
                return
            cur = self._read_lock_record()
            if cur is None:  # released (or half-visible) between the create and the read: try again
                time.sleep(0.1)
                continue
            if self._live(cur):
                raise RunDirLockedError(self._locked_message(cur))
            # stale: the one job that creates the takeover marker of this token may remove the record
            marker = LOCK_TAKEOVER.format(token=re.sub(r"[^0-9A-Za-z]", "", str(cur.get("token")))[:64])
            if not self._create_exclusive(marker, self._record_bytes(owner)):
                raise RunDirLockedError(self._locked_message(cur) + " (another job is taking over its stale lock)")
            try:
                again = self._read_lock_record()
                if again is not None and again.get("token") != cur.get("token"):
                    raise RunDirLockedError(self._locked_message(again))
                if again is not None:
                    self.remove(LOCK_RECORD, recursive=False)
                if self._create_exclusive(LOCK_RECORD, self._record_bytes(owner)):
                    return
                raise RunDirLockedError(self._locked_message(self._read_lock_record()))
            finally:
                with contextlib.suppress(Exception):
                    self.remove(marker, recursive=False)
        raise RunDirLockedError(self._locked_message(self._read_lock_record()))

    def _lock_advisory(self, owner: dict[str, Any]) -> None:
        """Take ``_lock.json`` by read, PUT, read back (:meth:`lock`); raises RunDirLockedError when held."""
        cur = self._read_lock_record()
        if cur and cur.get("token") != owner["token"] and self._live(cur):
            raise RunDirLockedError(self._locked_message(cur))
        self.write_bytes(LOCK_RECORD, self._record_bytes(owner))
        time.sleep(0.2)  # a racing writer's record lands by now; the last write wins, the other side backs off
        cur = self._read_lock_record()
        if not cur or cur.get("token") != owner["token"]:
            raise RunDirLockedError(self._locked_message(cur))

    def _lock_remote(self, owner: dict[str, Any]):
        conditional = self.protocol in _CONDITIONAL_CREATE
        if conditional:
            try:
                self._lock_conditional(owner)
            except TypeError:  # an fsspec driver without mode="create" (s3fs older than 2024.12)
                conditional = False
        if not conditional:
            self._lock_advisory(owner)
        stop = threading.Event()

        def beat() -> None:
            import logging

            while not stop.wait(LOCK_HEARTBEAT_S):
                with contextlib.suppress(Exception):
                    cur = self._read_lock_record()
                    if cur is not None and cur.get("token") != owner["token"]:
                        logging.getLogger(__name__).error(
                            "%s: this job lost the run directory's lock to %s (its heartbeat stalled for more than "
                            "%.0f s); the other job's record is left alone", self.uri,
                            self._locked_message(cur).split(" is in use by ")[-1].split(":")[0], LOCK_STALE_S)
                        return
                    self.write_bytes(LOCK_RECORD, self._record_bytes(owner))

        threading.Thread(target=beat, name="filegram-run-lock", daemon=True).start()
        return stop

    def _unlock_remote(self, stop: threading.Event, owner: dict[str, Any]) -> None:
        stop.set()
        cur = self._read_lock_record()
        if cur and cur.get("token") == owner["token"]:
            self.remove(LOCK_RECORD)

    # ------------------------------------------------------------------ completion records
    def _done_path(self, stage: str, unit_id: str) -> str:
        return f"_done/{stage}/{safe_unit_name(unit_id)}.json"

    def mark_done(self, stage: str, unit_id: str, record: dict[str, Any] | None = None) -> None:
        """Record that ``unit_id`` of ``stage`` finished (written last, after the unit's own files)."""
        self.write_json(self._done_path(stage, unit_id), {"unit": unit_id, "stage": stage, **(record or {})})

    def is_done(self, stage: str, unit_id: str) -> bool:
        return self.exists(self._done_path(stage, unit_id))

    def done_records(self, stage: str) -> list[dict[str, Any]]:
        """All completion records of ``stage``, sorted by unit id."""
        recs = []
        for name in self.listdir(f"_done/{stage}"):
            if name.endswith(".json") and not name.startswith("."):
                recs.append(self.read_json(f"_done/{stage}/{name}"))
        return sorted(recs, key=lambda r: str(r.get("unit")))

    # ------------------------------------------------------------------ error rows
    def write_errors(self, stage: str, rows: list[dict[str, Any]], planned: Iterable[str] = ()) -> None:
        """``errors/<stage>.parquet``: the stage's items that ended as error rows (:data:`ERROR_COLUMNS`, one row
        each, by unit): this run's ``rows`` over an earlier run's rows of items it did not plan (``planned``: the
        ids of this run's items). Written only when it holds a row (an empty table is removed)."""
        import polars as pl

        rel = f"{ERRORS_DIR}/{stage}.parquet"
        keep = {}
        if self.exists(rel):
            done = set(planned)
            keep = {r["unit"]: r for r in self.read_table(rel).to_dicts() if r.get("unit") not in done}
        for r in rows:
            keep[str(r.get("unit"))] = {c: (None if r.get(c) is None else str(r.get(c))) for c in ERROR_COLUMNS}
            keep[str(r.get("unit"))]["stage"] = stage
        if not keep:
            self.remove(rel)
            return
        data = [keep[k] for k in sorted(keep)]
        self.write_table(rel, pl.DataFrame(data, schema={c: pl.Utf8 for c in ERROR_COLUMNS}))

    def error_rows(self, stage: str | None = None) -> list[dict[str, Any]]:
        """The error rows of one stage (``errors/<stage>.parquet``), or of every stage (by stage name, then unit):
        dicts of :data:`ERROR_COLUMNS`. What the viewer and the commands show."""
        names = [f"{stage}.parquet"] if stage else sorted(self.listdir(ERRORS_DIR))
        out: list[dict[str, Any]] = []
        for name in names:
            rel = f"{ERRORS_DIR}/{name}"
            if name.endswith(".parquet") and self.exists(rel):
                out += self.read_table(rel).to_dicts()
        return out

    # ------------------------------------------------------------------ tables
    def write_table(self, rel: str, df) -> str:
        """Write a polars DataFrame (or anything ``polars.DataFrame(...)`` accepts) as Parquet, atomically."""
        import polars as pl

        if not isinstance(df, pl.DataFrame):
            df = pl.DataFrame(df)
        buf = io.BytesIO()
        df.write_parquet(buf, compression="zstd", statistics=False)
        return self.write_bytes(rel, buf.getvalue())

    def read_table(self, rel: str):
        """Read a Parquet table as a polars DataFrame.

        Raises:
            StorageError: if the table does not exist or is not a readable Parquet file (names the file).
        """
        import polars as pl

        data = self.read_bytes(rel)
        try:
            return pl.read_parquet(io.BytesIO(data))
        except Exception as exc:  # noqa: BLE001 - polars/pyarrow raise several types for a corrupt file
            raise StorageError(f"{self.uri}: {rel}: not a readable Parquet table ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''})") from None

def _json_default(obj: Any):
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return obj.as_posix()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
