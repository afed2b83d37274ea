"""Per-trajectory sandbox: a private copy of a task bundle and the only way tools touch the filesystem.

A sandbox has a *real* root (a directory under the engine's work root) and a *virtual* root
``/sandbox/<profile_id>_<task_id>`` (reference §1.2 naming). Agents may give a path relative to the root or as a
virtual absolute path; events always record the virtual path, so the real temp directory never reaches the bytes
of a trajectory (same seed → same bytes).

**The link rule** (one rule, applied everywhere): a sandbox holds only regular files and directories.

* Links in a bundle are never copied (nor special files, or a second name that is the same text in another
  Unicode form); each one skipped is listed in :attr:`Sandbox.skipped` with the reason. No tool can create a link.
* A regular file with more than one name (``st_nlink > 1``) met in a live sandbox is a *hard link* planted from
  outside (the bundle copy and every tool write new single-name files) and counts as a link (case
  REL2-SANDBOX-touch-planted-hardlink-changes-outside-mtime): refused by path resolution, by reads and ``touch``
  on the open descriptor, by ``write``/``cp``/``mv`` onto it and by ``rm`` (removing a name changes the other
  name's link count and ctime); listed with kind ``"link"``, so grep, glob and ``cp -r`` never read it.
* Every filesystem call walks the path from a descriptor of the sandbox root, one component at a time, with
  ``openat(..., O_NOFOLLOW)``, and does its final operation relative to the parent's descriptor (``unlinkat``,
  ``renameat``, ``mkdirat``, ``O_NOFOLLOW`` opens). This happens at the moment of each call, not once per command,
  so a link that appears later (planted from outside, moved by an earlier sub-command) is refused when reached:
  a path that names or passes through a link raises :class:`SandboxError`.

**Names that are not valid UTF-8** (case BR-27) **or hold a control, line-separator or bidi character** (cases
REL2-SANDBOX-c1-control-names-accepted, REL2-IMPORT-control-char-names-dropped-by-engine) never reach a tool, an
event or the media store: the one rule of :mod:`filegram_ray.names` (the workspace import's) applies — each such
byte or character becomes ``%XX`` (``caf%E9.txt``, ``a%E2%80%A8b.md``; a taken name gets ``~2``, ``~3`` …); a
tool argument holding one is refused. The bundle copy writes the file under that name; a name met later (planted
from outside the sandbox: no tool can create one) is renamed in place by the listing that meets it. Each rename
is listed in :attr:`Sandbox.renamed` as (original shown with ``\\xNN``, new relative path); the generate stage
records both lists in the trajectory's ``meta.json`` (``sandbox``).

**Paths**: refused (SandboxError, a tool error) are non-strings, empty paths, NUL bytes, names that are not valid
UTF-8 (surrogate escapes), characters the names rule refuses, ``~`` expansion, absolute paths outside the virtual
or real root, ``..`` escapes, device/FIFO/socket files. ``.`` and ``..`` are followed as the kernel follows them
(:meth:`Sandbox.resolve`, case REL2-SEM-rm-dot-dotdot-deletes-parent): ``missing/..`` and ``file.txt/..`` are
refused (:class:`PathLookupError`), ``link/..`` is a path through a link, never a lexical shortcut. Accepted paths are normalised to Unicode NFC (one canonical form per
name: a folder typed in composed form is the same folder as its decomposed spelling in a bundle, which is copied
under its NFC name).

**Limits** (:class:`Limits`, exceeding one raises :class:`LimitExceeded`, also a tool error) are checked before
the operation that would cross them: bytes of one write (projected before the text is built), total bytes and
number of entries in the sandbox counted however deep (a descriptor walk, never limited by ``PATH_MAX``), depth
and length of every path an operation would create (so a move cannot bury files below what a walk can reach),
per-call wall time (:meth:`Sandbox.begin_call` / :meth:`Sandbox.check_time`) and the session's ops and wall time
(:class:`OpCounter`).

**Clock**: with ``clock`` (a zero-argument callable giving the simulated epoch ms), every entry the sandbox writes
(bundle copy included) gets that time as its mtime, so ``ls -t`` orders files by the simulated timeline and the
same seed gives the same listing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shutil
import stat
import time
import unicodedata
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from filegram_ray.names import (
    escape_name,
    free_name,
    name_problem,
    printable,
)

VIRTUAL_PREFIX = "/sandbox"

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class SandboxError(Exception):
    """A path or operation is not allowed inside the sandbox (reported to the agent as a tool error)."""


class LimitExceeded(SandboxError):
    """A limit of :class:`Limits` would be crossed; nothing was changed by the refused operation."""


@dataclass(frozen=True)
class Limits:
    """Per-session resource limits. Our own safety bounds (not upstream constants).

    max_write_bytes: largest single write/edit/copied file, bytes (UTF-8); an edit's size is projected
        (occurrences × length change) before the new text is built.
    max_total_ops: tool calls per session; upstream's 150 LLM iterations (§1.1) × a few calls fit easily.
    max_wall_s: real seconds since ``start()``; checked before each call and bounds every call's deadline.
    max_sandbox_bytes: total size of the regular files in the sandbox, counted however deep.
    max_entries: files + directories in the sandbox, counted however deep (bundles hold tens to hundreds).
    max_path_chars: longest accepted path argument, and longest relative path an operation may create.
    max_depth: most components of any path in the sandbox (bounds open descriptors during a walk).
    max_call_s: wall seconds of one grep, glob or document extraction (regex matching is bounded in CPU
        seconds by the ``regex`` module's timeout, checked against the same budget).
    max_read_bytes: largest file read, grepped or extracted in one call.
    max_bash_words: words in one ``bash`` command (all sub-commands together).
    max_pattern_chars: longest grep regex or glob/include pattern.
    max_pattern_expansions: most alternatives a ``{a,b}`` brace pattern may expand to.
    """

    max_write_bytes: int = 5 * 1024 * 1024
    max_total_ops: int = 5000
    max_wall_s: float = 600.0
    max_sandbox_bytes: int = 512 * 1024 * 1024
    max_entries: int = 10_000
    max_path_chars: int = 1024
    max_depth: int = 64
    max_call_s: float = 10.0
    max_read_bytes: int = 64 * 1024 * 1024
    max_bash_words: int = 256
    max_pattern_chars: int = 1000
    max_pattern_expansions: int = 64


@dataclass(frozen=True)
class Entry:
    """One directory entry seen by :meth:`Sandbox.scandir` / :meth:`Sandbox.walk`.

    kind: ``"file"``, ``"dir"``, ``"link"`` or ``"other"`` (device, FIFO, socket); never followed.
    """

    name: str
    rel: str
    kind: str
    size: int
    mtime_ns: int
    mode: int


@dataclass
class Usage:
    """What a subtree holds: ``entries`` (every entry below it), ``bytes`` (regular files), ``depth`` (most
    components of a path relative to it), ``chars`` (longest such relative path) and ``links`` (symbolic or
    hard links, or special files found)."""

    entries: int = 0
    bytes: int = 0
    depth: int = 0
    chars: int = 0
    links: int = 0


@dataclass
class Budget:
    """Room left in the sandbox, measured once (:meth:`Sandbox.budget`) and drawn on by one operation."""

    limits: Limits
    entries: int
    bytes: int

    def take(self, entries: int = 0, nbytes: int = 0) -> None:
        """Account for ``entries`` new entries and ``nbytes`` more bytes; LimitExceeded if over a limit."""
        e, b = self.entries + entries, self.bytes + nbytes
        if e > self.limits.max_entries:
            raise LimitExceeded(f"the sandbox would hold {e} files and folders; the limit is "
                                f"{self.limits.max_entries}")
        if b > self.limits.max_sandbox_bytes:
            raise LimitExceeded(f"the sandbox would exceed {self.limits.max_sandbox_bytes} bytes")
        self.entries, self.bytes = e, b


def components(rel: str) -> int:
    """Number of components of a relative POSIX path (``"."`` → 0)."""
    return 0 if rel in ("", ".") else rel.count("/") + 1


def _join(rel: str, name: str) -> str:
    return name if rel in ("", ".") else f"{rel}/{name}"


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _kind_st(st: os.stat_result) -> str:
    """:func:`_kind` of an entry met in a live sandbox: a regular file with more than one name (a hard link
    planted from outside: no tool and no bundle copy makes one) is a ``"link"`` (the link rule)."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return "link"
    return _kind(st.st_mode)


def _is_hard_link(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


class PathLookupError(SandboxError):
    """A component of a path that a later ``.`` or ``..`` steps out of is absent or not a folder: what the
    kernel reports (``strerror``: ``"No such file or directory"`` or ``"Not a directory"``) for ``missing/..``
    and ``file.txt/..``; the path is refused, as bash's programs refuse it."""

    def __init__(self, path: str, strerror: str) -> None:
        super().__init__(f"{path}: {strerror}")
        self.path, self.strerror = path, strerror


class Sandbox:
    """A private directory tree and the filesystem primitives tools use on it (see the module docstring)."""

    def __init__(self, root: Path, virtual_root: str, limits: Limits | None = None, *,
                 clock: Callable[[], float] | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.real_root = os.path.realpath(self.root)
        self.virtual_root = virtual_root.rstrip("/")
        self.limits = limits or Limits()
        self.clock = clock
        #: (bundle-relative path as found, reason) of every bundle entry not copied in
        self.skipped: list[tuple[str, str]] = []
        #: (path as found, ``\xNN`` for bytes that are not UTF-8; sandbox-relative path it got) of every name
        #: that is not valid UTF-8, renamed ``%XX`` by the bundle copy or when a listing met it (BR-27)
        self.renamed: list[tuple[str, str]] = []
        self._root_fd = os.open(self.root, _O_DIR)
        self._close_fd = weakref.finalize(self, os.close, self._root_fd)
        self._deadline: float | None = None

    @classmethod
    def create(cls, bundle_files_dir: Path | None, root: Path, virtual_root: str,
               limits: Limits | None = None, *, clock: Callable[[], float] | None = None) -> Sandbox:
        """Copy ``bundle_files_dir`` (if given) to a fresh ``root`` under the link rule (links, special files and
        names with control characters are skipped and listed in ``skipped``; names are stored in NFC; a name that
        is not valid UTF-8 is copied under its ``%XX`` name and listed in ``renamed``).

        Raises FileNotFoundError if the bundle dir is missing, FileExistsError if ``root`` exists and is not
        empty, LimitExceeded (nothing left behind) if the bundle is larger than the limits allow."""
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            raise FileExistsError(f"sandbox root {root} already exists and is not empty")
        src = None
        if bundle_files_dir is not None:
            src = Path(bundle_files_dir)
            if not src.is_dir():
                raise FileNotFoundError(f"bundle files dir {src} does not exist")
        sb = cls(root, virtual_root, limits, clock=clock)
        if src is not None:
            try:
                sb._import_bundle(src)
            except BaseException:
                sb.close()
                shutil.rmtree(root, ignore_errors=True)
                raise
        return sb

    def close(self) -> None:
        """Close the root descriptor (the directory itself is left for the caller to delete)."""
        self._close_fd()

    # --- bundle copy -------------------------------------------------------------------------------------------

    def _import_bundle(self, src: Path) -> None:
        budget = Budget(self.limits, 0, 0)
        sfd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        dfd = os.open(".", _O_DIR, dir_fd=self._root_fd)
        try:
            self._import_dir(sfd, dfd, ".", ".", budget)
        finally:
            os.close(sfd)
            os.close(dfd)
        self._stamp(".")

    def _import_dir(self, sfd: int, dfd: int, src_rel: str, rel: str, budget: Budget) -> None:
        with os.scandir(sfd) as it:
            items = sorted(it, key=lambda e: (name_problem(e.name) is not None, e.name))  # valid names first
        taken: set[str] = set()
        for e in items:
            shown = _join(src_rel, printable(e.name))
            if name_problem(e.name):  # not UTF-8, or a character no name may hold: copied under its %XX name
                name = free_name(unicodedata.normalize("NFC", escape_name(e.name)),
                                 lambda n: n in taken or any(unicodedata.normalize("NFC", x.name) == n
                                                             for x in items if not name_problem(x.name)))
                self.renamed.append((shown, _join(rel, name)))
            else:
                name = unicodedata.normalize("NFC", e.name)
            if name in taken:
                self.skipped.append((shown, "same name as another entry once normalised to NFC"))
                continue
            st = e.stat(follow_symlinks=False)
            kind = _kind(st.st_mode)
            if kind == "link":
                self.skipped.append((shown, "symbolic link (links are never copied into a sandbox)"))
                continue
            if kind == "other":
                self.skipped.append((shown, "not a regular file or directory"))
                continue
            child = _join(rel, name)
            self.check_place(child)
            budget.take(1, st.st_size if kind == "file" else 0)
            taken.add(name)
            if kind == "dir":
                os.mkdir(name, 0o755, dir_fd=dfd)
                csfd = os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
                cdfd = os.open(name, _O_DIR, dir_fd=dfd)
                try:
                    self._import_dir(csfd, cdfd, shown, child, budget)
                finally:
                    os.close(csfd)
                    os.close(cdfd)
            else:
                rfd = os.open(e.name, _O_READ, dir_fd=sfd)
                try:
                    if not stat.S_ISREG(os.fstat(rfd).st_mode):
                        self.skipped.append((shown, "not a regular file"))
                        continue
                    wfd = os.open(name, _O_NEW, stat.S_IMODE(st.st_mode) & 0o777 | 0o600, dir_fd=dfd)
                    try:
                        _copy_fd(rfd, wfd)
                    finally:
                        os.close(wfd)
                finally:
                    os.close(rfd)
            times = self._now_ns()
            os.utime(name, ns=times or (st.st_atime_ns, st.st_mtime_ns), dir_fd=dfd, follow_symlinks=False)
        t = self._now_ns()
        if t:
            os.utime(".", ns=t, dir_fd=dfd, follow_symlinks=False)

    # --- path handling -----------------------------------------------------------------------------------------

    def virtual(self, rel: str) -> str:
        """Virtual absolute path of a relative path (``"."`` → the virtual root itself)."""
        return self.virtual_root if rel in ("", ".") else f"{self.virtual_root}/{rel}"

    def _raw_rel(self, path: str) -> str:
        """``path`` checked (type, length, NUL, UTF-8, the names rule, ``~``) and made relative to the root,
        not yet normalised: a virtual or real absolute path loses its root prefix. SandboxError otherwise."""
        if not isinstance(path, str):
            raise SandboxError(f"path must be a string, got {type(path).__name__}")
        if path == "":
            raise SandboxError("empty path")
        if len(path) > self.limits.max_path_chars:
            raise SandboxError(f"path longer than {self.limits.max_path_chars} chars")
        if "\x00" in path:
            raise SandboxError("path contains a NUL byte")
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise SandboxError("path is not valid UTF-8") from None
        bad = name_problem(path)  # the one names rule (filegram_ray.names): controls, line and bidi characters
        if bad:
            raise SandboxError(f"path {bad}: {path!r}; such names are refused")
        if path.startswith("~"):
            raise SandboxError(f"home-directory paths are outside the sandbox: {path!r}")
        if not path.startswith("/"):
            return path
        for base in (self.virtual_root, self.real_root):
            if path == base or path.startswith(base + "/"):
                return path[len(base) + 1:] or "."
        norm = posixpath.normpath(path)
        for base in (self.virtual_root, self.real_root):
            if norm == base:
                return "."
            if norm.startswith(base + "/"):
                return norm[len(base) + 1:]
        raise SandboxError(f"absolute path outside the sandbox: {path!r} "
                           f"(use a relative path or {self.virtual_root}/...)")

    def to_rel(self, path: str) -> str:
        """Normalised (NFC) relative POSIX path of ``path`` (no filesystem access); SandboxError on escape.
        Error messages quote ``path`` as given. ``.`` and ``..`` are removed as text here; :meth:`resolve` also
        checks them against the disk, as the kernel does."""
        rel = unicodedata.normalize("NFC", posixpath.normpath(self._raw_rel(path)))
        if rel == ".." or rel.startswith(("../", "/")):
            raise SandboxError(f"path escapes the sandbox: {path!r}")
        if components(rel) > self.limits.max_depth:
            raise SandboxError(f"path deeper than {self.limits.max_depth} folders: {path!r}")
        return rel

    def _check_dots(self, path: str) -> None:
        """Follow ``.`` and ``..`` in ``path`` as the kernel does (bash's meaning): the component before each
        must be a folder that exists now, and ``..`` never steps above the root. PathLookupError (absent /
        not a folder), SandboxError (a link; an escape)."""
        parts = self._raw_rel(path).split("/")
        if "." not in parts and ".." not in parts:
            return
        stack: list[str] = []
        for part in parts:
            if part == "":
                continue
            if part not in (".", ".."):
                stack.append(unicodedata.normalize("NFC", part))
                continue
            if stack:
                st = self.lstat("/".join(stack), path)
                if st is None:
                    raise PathLookupError(path, "No such file or directory")
                if stat.S_ISLNK(st.st_mode):
                    raise self._link_error(path)
                if not stat.S_ISDIR(st.st_mode):
                    raise PathLookupError(path, "Not a directory")
            if part == "..":
                if not stack:
                    raise SandboxError(f"path escapes the sandbox: {path!r}")
                stack.pop()

    def resolve(self, path: str, *, must_exist: bool = False) -> str:
        """Relative NFC path of ``path`` after checking the disk as it is now: ``.`` and ``..`` are followed
        as the kernel follows them, and a trailing ``/`` asks for a folder (:class:`PathLookupError` for
        ``missing/..``, ``file.txt/..`` or ``file.txt/``); refuses a
        path that names or passes through a link (a hard link planted from outside counts as one: the link
        rule), and device/FIFO/socket files; ``must_exist`` refuses an absent path. Every later filesystem call
        re-checks at its own moment of use."""
        rel = self.to_rel(path)
        self._check_dots(path)
        st = self.lstat(rel, path)
        if st is None:
            if must_exist:
                raise SandboxError(f"no such file or directory: {path!r}")
        elif stat.S_ISLNK(st.st_mode) or _is_hard_link(st):
            raise self._link_error(path, st)
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise SandboxError(f"not a regular file or directory: {path!r}")
        elif stat.S_ISREG(st.st_mode) and path.endswith("/"):  # "a.txt/" names a folder, as in the kernel
            raise PathLookupError(path, "Not a directory")
        return rel

    # --- descriptor walking ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _dir(self, rel: str, shown: str | None = None, *, create: bool = False) -> Iterator[int]:
        """Descriptor of directory ``rel``, every component opened with O_NOFOLLOW from the root descriptor.
        ``create`` makes missing components (mkdir -p). FileNotFoundError / NotADirectoryError when a component
        is absent or a file; SandboxError when one is a link."""
        fd = os.open(".", _O_DIR, dir_fd=self._root_fd)
        try:
            if rel not in ("", "."):
                for name in rel.split("/"):
                    try:
                        nfd = os.open(name, _O_DIR, dir_fd=fd)
                    except FileNotFoundError:
                        if not create:
                            raise
                        os.mkdir(name, 0o755, dir_fd=fd)
                        self._stamp_at(fd, name)
                        self._stamp_at(fd, ".")
                        nfd = os.open(name, _O_DIR, dir_fd=fd)
                    except NotADirectoryError:
                        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                            raise self._link_error(shown or rel) from None
                        raise
                    os.close(fd)
                    fd = nfd
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _parent(self, rel: str, shown: str | None = None, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder holding ``rel``, last component). ``"."`` → (root descriptor, ".")."""
        if rel in ("", "."):
            with self._dir(".") as fd:
                yield fd, "."
            return
        head, _, name = rel.rpartition("/")
        with self._dir(head or ".", shown, create=create) as fd:
            yield fd, name

    @staticmethod
    def _link_error(shown: str, st: os.stat_result | None = None) -> SandboxError:
        if st is not None and _is_hard_link(st):
            return SandboxError(f"hard links are not followed in the sandbox (a file with another name, maybe "
                                f"outside the sandbox): {shown!r}")
        return SandboxError(f"symbolic links are not followed in the sandbox: {shown!r}")

    def lstat(self, rel: str, shown: str | None = None) -> os.stat_result | None:
        """``lstat`` of ``rel`` (a final link is reported, not followed); ``None`` if it or a parent is absent
        or a parent is a file; SandboxError if a parent is a link."""
        try:
            with self._parent(rel, shown) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def kind(self, rel: str, shown: str | None = None) -> str | None:
        """``"file"``, ``"dir"`` or ``None`` (absent); SandboxError for a link or a special file."""
        st = self.lstat(rel, shown)
        if st is None:
            return None
        k = _kind_st(st)
        if k == "link":
            raise self._link_error(shown or rel, st)
        if k == "other":
            raise SandboxError(f"not a regular file or directory: {shown or rel!r}")
        return k

    def exists(self, rel: str, shown: str | None = None) -> bool:
        """Whether anything (a link included) is at ``rel``."""
        return self.lstat(rel, shown) is not None

    def scandir(self, rel: str, shown: str | None = None) -> list[Entry]:
        """Entries of directory ``rel`` sorted by name (links and special files reported, never followed)."""
        with self._dir(rel, shown) as fd:
            return self._entries(fd, rel)

    def _entries(self, fd: int, rel: str) -> list[Entry]:
        out = []
        with os.scandir(fd) as it:
            items = list(it)
        names = {e.name for e in items}
        for e in items:
            name = e.name
            if name_problem(name):  # not UTF-8 or a refused character, planted from outside: renamed %XX
                name = self._rename_met(fd, rel, name, names)
                if name is None:
                    continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            out.append(Entry(name, _join(rel, name), _kind_st(st), st.st_size, st.st_mtime_ns, st.st_mode))
        out.sort(key=lambda x: x.name)
        return out

    def _rename_met(self, fd: int, rel: str, raw: str, names: set[str]) -> str | None:
        """Give a name that is not valid UTF-8, met in directory ``fd`` (= ``rel``), its ``%XX`` name on disk
        (module docstring); the new name, or None when it vanished meanwhile."""
        new = free_name(unicodedata.normalize("NFC", escape_name(raw)),
                        lambda n: n in names or self._lexists_at(fd, n))
        try:
            os.rename(raw, new, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            return None
        names.discard(raw)
        names.add(new)
        self.renamed.append((_join(rel, printable(raw)), _join(rel, new)))
        return new

    @staticmethod
    def _lexists_at(fd: int, name: str) -> bool:
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False

    def walk(self, rel: str = ".", shown: str | None = None, *,
             what: str = "walk") -> Iterator[tuple[str, list[Entry], list[Entry]]]:
        """``os.walk``-like, top-down, names sorted: ``(dir_rel, dirs, others)``; ``others`` holds files, links
        and special files (never followed). Removing items from ``dirs`` prunes them. Every descent opens the
        child with O_NOFOLLOW from its parent's descriptor (no ``PATH_MAX`` limit); checks the call deadline."""
        with self._dir(rel, shown) as fd:
            yield from self._walk_fd(fd, rel, what)

    def _walk_fd(self, fd: int, rel: str, what: str) -> Iterator[tuple[str, list[Entry], list[Entry]]]:
        self.check_time(what)
        entries = self._entries(fd, rel)
        dirs = [e for e in entries if e.kind == "dir"]
        yield rel, dirs, [e for e in entries if e.kind != "dir"]
        for d in dirs:
            try:
                cfd = os.open(d.name, _O_DIR, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                continue  # replaced since it was listed (a link now): not followed
            try:
                yield from self._walk_fd(cfd, d.rel, what)
            finally:
                os.close(cfd)

    def usage(self, rel: str = ".", shown: str | None = None) -> Usage:
        """What ``rel`` holds (see :class:`Usage`); a file → 0 entries, its size, depth 0."""
        st = self.lstat(rel, shown)
        if st is None:
            return Usage()
        if not stat.S_ISDIR(st.st_mode):
            return Usage(0, st.st_size if stat.S_ISREG(st.st_mode) else 0, 0, 0,
                         0 if _kind_st(st) == "file" else 1)
        u = Usage()
        with self._dir(rel, shown) as fd:
            self._usage_fd(fd, 0, 0, u)
        return u

    def _usage_fd(self, fd: int, depth: int, chars: int, u: Usage) -> None:
        """Add what directory ``fd`` holds to ``u`` (``depth``/``chars``: of its path below the measured root).
        Only regular files are stat'ed; the kind of the rest comes from the directory entry."""
        self.check_time("size check")
        subdirs = []
        with os.scandir(fd) as it:
            for e in it:
                u.entries += 1
                u.depth = max(u.depth, depth + 1)
                n = chars + len(e.name) + (1 if depth else 0)
                if n > u.chars:
                    u.chars = n
                if e.is_dir(follow_symlinks=False):
                    subdirs.append((e.name, n))
                elif e.is_file(follow_symlinks=False):
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        u.entries -= 1
                        continue
                    u.bytes += st.st_size
                    u.links += _is_hard_link(st)
                else:
                    u.links += 1
        for name, n in subdirs:
            try:
                cfd = os.open(name, _O_DIR, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                continue  # replaced since it was listed (a link now): not followed
            try:
                self._usage_fd(cfd, depth + 1, n, u)
            finally:
                os.close(cfd)

    # --- limits ------------------------------------------------------------------------------------------------

    def budget(self) -> Budget:
        """Current totals of the whole sandbox, to draw one operation's growth from."""
        u = self.usage(".")
        return Budget(self.limits, u.entries, u.bytes)

    def check_write_size(self, nbytes: int) -> None:
        if nbytes > self.limits.max_write_bytes:
            raise LimitExceeded(f"write of {nbytes} bytes exceeds the limit of {self.limits.max_write_bytes}")

    def check_place(self, rel: str, sub: Usage | None = None) -> None:
        """Refuse creating ``rel`` (holding ``sub``) if a path would get deeper or longer than the limits."""
        depth = components(rel) + (sub.depth if sub else 0)
        chars = len(rel) + (sub.chars + 1 if sub and sub.chars else 0)
        if depth > self.limits.max_depth:
            raise LimitExceeded(f"a path would be {depth} folders deep; the limit is {self.limits.max_depth}")
        if chars > self.limits.max_path_chars:
            raise LimitExceeded(f"a path would be {chars} chars long; the limit is {self.limits.max_path_chars}")

    def tree_bytes(self) -> int:
        """Bytes of every regular file in the sandbox, however deep."""
        return self.usage(".").bytes

    def begin_call(self, deadline: float | None) -> None:
        """Set the ``time.monotonic()`` deadline of the tool call about to run (``None``: no deadline)."""
        self._deadline = deadline

    def time_left(self) -> float | None:
        """Seconds left before the call's deadline (``None`` without one)."""
        return None if self._deadline is None else self._deadline - time.monotonic()

    def check_time(self, what: str) -> None:
        """LimitExceeded if the current call ran past its deadline."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise LimitExceeded(f"{what} stopped: the call ran past its time limit "
                                f"({self.limits.max_call_s} s per call)")

    # --- clock -------------------------------------------------------------------------------------------------

    def _now_ns(self) -> tuple[int, int] | None:
        if self.clock is None:
            return None
        t = int(round(float(self.clock()) * 1_000_000))
        return t, t

    def _stamp_at(self, fd: int, name: str) -> None:
        t = self._now_ns()
        if t:
            os.utime(name, ns=t, dir_fd=fd, follow_symlinks=False)

    def _stamp(self, rel: str) -> None:
        if self.clock is None:
            return
        with self._parent(rel) as (fd, name):
            self._stamp_at(fd, name)

    # --- file operations ---------------------------------------------------------------------------------------

    def read_bytes(self, rel: str, shown: str | None = None, *, limit: int | None = None) -> bytes:
        """Bytes of regular file ``rel`` (O_NOFOLLOW; FIFOs never block). ``limit`` (default max_read_bytes):
        LimitExceeded for a larger file."""
        limit = self.limits.max_read_bytes if limit is None else limit
        with self._parent(rel, shown) as (pfd, name):
            try:
                fd = os.open(name, _O_READ, dir_fd=pfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._link_error(shown or rel) from None
                raise
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise SandboxError(f"not a regular file or directory: {shown or rel!r}")
            if _is_hard_link(st):  # checked on the open descriptor: the bytes read are never another name's
                raise self._link_error(shown or rel, st)
            if st.st_size > limit:
                raise LimitExceeded(f"{shown or rel}: {st.st_size} bytes is more than the {limit} bytes a call "
                                    f"may read")
            chunks, n = [], 0
            while True:
                b = os.read(fd, _CHUNK)
                if not b:
                    break
                n += len(b)
                if n > limit:
                    raise LimitExceeded(f"{shown or rel}: more than the {limit} bytes a call may read")
                chunks.append(b)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def missing_dirs(self, rel: str) -> int:
        """How many folders ``mkdir -p rel`` would create (0 if ``rel`` exists)."""
        parts = [] if rel in ("", ".") else rel.split("/")
        for i in range(len(parts), 0, -1):
            st = self.lstat("/".join(parts[:i]))
            if st is not None:
                return len(parts) - i
        return len(parts)

    def write_bytes(self, rel: str, data: bytes, shown: str | None = None, *, parents: bool = True) -> None:
        """Atomically replace/create file ``rel`` (temp file + ``renameat`` in the parent's descriptor).
        Checks the write size, sandbox totals and path limits first. ``parents`` creates missing folders."""
        self.check_write_size(len(data))
        self.check_place(rel)
        st = self.lstat(rel, shown)
        if st is not None and (not stat.S_ISREG(st.st_mode) or _is_hard_link(st)):
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            raise self._link_error(shown or rel, st) if _kind_st(st) == "link" else \
                SandboxError(f"not a regular file or directory: {shown or rel!r}")
        head = rel.rpartition("/")[0] or "."
        new_dirs = self.missing_dirs(head) if parents else 0
        self.budget().take(new_dirs + (st is None), len(data) - (st.st_size if st is not None else 0))
        with self._parent(rel, shown, create=parents) as (pfd, name):
            self._write_at(pfd, name, data, None if st is None else stat.S_IMODE(st.st_mode))

    def _write_at(self, pfd: int, name: str, data: bytes | int, mode: int | None,
                  times: tuple[int, int] | None = None) -> None:
        """Write ``data`` (bytes, or a descriptor to copy from) to a temp file beside ``name``, then rename."""
        tmp = f".fgtmp.{os.getpid()}.{time.monotonic_ns()}"
        fd = os.open(tmp, _O_NEW, 0o644 if mode is None else mode, dir_fd=pfd)
        try:
            if isinstance(data, int):
                _copy_fd(data, fd)
            else:
                _write_all(fd, data)
            t = times or self._now_ns()
            if t:  # on the new file's descriptor, before the rename: never on what the name holds later
                os.utime(fd, ns=t)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
            raise
        self._stamp_at(pfd, ".")

    def mkdir(self, rel: str, shown: str | None = None, *, parents: bool = False) -> None:
        """Create folder ``rel`` (``parents``: and missing parents). FileExistsError if it exists,
        FileNotFoundError if the parent is missing without ``parents``."""
        self.check_place(rel)
        self.budget().take(self.missing_dirs(rel) if parents else 1)
        with self._parent(rel, shown, create=parents) as (pfd, name):
            os.mkdir(name, 0o755, dir_fd=pfd)
            self._stamp_at(pfd, name)
            self._stamp_at(pfd, ".")

    def touch(self, rel: str, shown: str | None = None) -> bool:
        """Set the mtime of ``rel`` (clock or now), creating an empty file if absent; True if created."""
        st = self.lstat(rel, shown)
        if st is not None:
            if _kind_st(st) != "file" and not stat.S_ISDIR(st.st_mode):
                raise self._link_error(shown or rel, st) if _kind_st(st) == "link" else \
                    SandboxError(f"not a regular file or directory: {shown or rel!r}")
            with self._parent(rel, shown) as (pfd, name):
                try:
                    fd = os.open(name, _O_READ, dir_fd=pfd)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        raise self._link_error(shown or rel) from None
                    raise
            try:  # the times are set on the descriptor checked here, never on another name's inode
                fst = os.fstat(fd)
                if _kind_st(fst) == "link":
                    raise self._link_error(shown or rel, fst)
                if not (stat.S_ISREG(fst.st_mode) or stat.S_ISDIR(fst.st_mode)):
                    raise SandboxError(f"not a regular file or directory: {shown or rel!r}")
                t = self._now_ns()
                os.utime(fd, ns=t) if t else os.utime(fd)
            finally:
                os.close(fd)
            return False
        self.check_place(rel)
        self.budget().take(1)
        with self._parent(rel, shown) as (pfd, name):
            fd = os.open(name, _O_NEW, 0o644, dir_fd=pfd)
            os.close(fd)
            self._stamp_at(pfd, name)
            self._stamp_at(pfd, ".")
        return True

    def unlink(self, rel: str, shown: str | None = None) -> None:
        """Remove a file (a symbolic link itself, never its target). SandboxError for a hard link (removing
        a name of a file with other names changes that file's link count and ctime: the link rule)."""
        with self._parent(rel, shown) as (pfd, name):
            self._refuse_hard_link(pfd, name, shown or rel)
            os.unlink(name, dir_fd=pfd)
            self._stamp_at(pfd, ".")

    def rmdir(self, rel: str, shown: str | None = None) -> None:
        with self._parent(rel, shown) as (pfd, name):
            os.rmdir(name, dir_fd=pfd)
            self._stamp_at(pfd, ".")

    def _refuse_hard_link(self, pfd: int, name: str, shown: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if _is_hard_link(st):
                raise self._link_error(shown, st)

    def rmtree(self, rel: str, shown: str | None = None) -> None:
        """Delete folder ``rel`` and everything in it through descriptors (symbolic links are removed, never
        entered). SandboxError, nothing removed, if it holds a hard link (the link rule; one met later, planted
        during the removal, is left in place and stops it there)."""
        for d, _dirs, others in self.walk(rel, shown, what="rm -r"):
            for e in others:
                if e.kind == "link" and stat.S_ISREG(e.mode):
                    shown_e = (shown or rel) + e.rel[len(rel):] if rel != "." else e.rel
                    raise SandboxError(f"{shown_e!r} is a hard link (a file with another name, maybe outside the "
                                       f"sandbox); nothing removed")
        with self._parent(rel, shown) as (pfd, name):
            cfd = os.open(name, _O_DIR, dir_fd=pfd)
            try:
                self._rmtree_fd(cfd)
            finally:
                os.close(cfd)
            os.rmdir(name, dir_fd=pfd)
            self._stamp_at(pfd, ".")

    def _rmtree_fd(self, fd: int) -> None:
        for e in self._entries(fd, "."):
            if e.kind == "dir":
                cfd = os.open(e.name, _O_DIR, dir_fd=fd)
                try:
                    self._rmtree_fd(cfd)
                finally:
                    os.close(cfd)
                os.rmdir(e.name, dir_fd=fd)
            else:
                self._refuse_hard_link(fd, e.name, e.name)
                os.unlink(e.name, dir_fd=fd)

    def rename(self, src: str, dst: str, shown_src: str | None = None, shown_dst: str | None = None) -> None:
        """``renameat`` src → dst (replacing a file at dst). Refuses (LimitExceeded) a move that would bury an
        entry deeper or longer than the path limits."""
        self.check_place(dst, self.usage(src, shown_src))
        with self._parent(src, shown_src) as (sfd, sname), self._parent(dst, shown_dst) as (dfd, dname):
            self._refuse_hard_link(sfd, sname, shown_src or src)
            self._refuse_hard_link(dfd, dname, shown_dst or dst)
            os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            self._stamp_at(sfd, ".")
            self._stamp_at(dfd, ".")

    def copy(self, src: str, dst: str, shown_src: str | None = None, shown_dst: str | None = None, *,
             preserve: bool = False, no_clobber: bool = False) -> None:
        """Copy file or folder ``src`` to ``dst`` (a folder is merged into an existing folder ``dst``). The
        whole source is measured first: LimitExceeded if it holds a link or special file (the link rule), or if
        the copy would cross the size, entry or path limits; a link met later is refused when reached.
        ``preserve``: keep mode and mtime (cp -p); ``no_clobber``: leave existing files alone (cp -n)."""
        sub = self.usage(src, shown_src)
        if sub.links:
            raise SandboxError(f"{shown_src or src!r} holds a symbolic link, a hard link or a special file; not copied")
        skind = self.kind(src, shown_src)
        if skind == "file":
            self.check_write_size(sub.bytes)
        self.check_place(dst, sub)
        self.budget().take(sub.entries + 1, sub.bytes)  # an upper bound: merged folders count again
        with self._parent(src, shown_src) as (sfd, sname), \
                self._parent(dst, shown_dst) as (dfd, dname):
            self._copy_at(sfd, sname, dfd, dname, shown_src or src, preserve, no_clobber)
            self._stamp_at(dfd, ".")

    def _copy_at(self, sfd: int, sname: str, dfd: int, dname: str, shown: str, preserve: bool,
                 no_clobber: bool) -> None:
        self.check_time("copy")
        st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
        times = (st.st_atime_ns, st.st_mtime_ns) if preserve else None
        kind = _kind_st(st)
        if kind == "dir":
            try:
                os.mkdir(dname, 0o755, dir_fd=dfd)
            except FileExistsError:
                if _kind(os.stat(dname, dir_fd=dfd, follow_symlinks=False).st_mode) != "dir":
                    raise
            csfd = os.open(sname, _O_DIR, dir_fd=sfd)
            try:
                cdfd = os.open(dname, _O_DIR, dir_fd=dfd)
                try:
                    for e in self._entries(csfd, "."):
                        self._copy_at(csfd, e.name, cdfd, e.name, f"{shown}/{e.name}", preserve, no_clobber)
                    if preserve:
                        os.fchmod(cdfd, stat.S_IMODE(st.st_mode))
                finally:
                    os.close(cdfd)
            finally:
                os.close(csfd)
            t = times or self._now_ns()
            if t:
                os.utime(dname, ns=t, dir_fd=dfd, follow_symlinks=False)
            return
        if kind != "file":
            raise SandboxError(f"{shown!r} is a symbolic link, a hard link or a special file; not copied")
        try:
            dst = os.stat(dname, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            dst = None
        if dst is not None:
            if no_clobber:
                return
            if _kind_st(dst) != "file":
                raise SandboxError(f"cannot overwrite {dname!r}: not a regular file (a link or special file)")
        mode = stat.S_IMODE(st.st_mode) if preserve else (stat.S_IMODE(dst.st_mode) if dst else None)
        rfd = os.open(sname, _O_READ, dir_fd=sfd)
        try:
            if _kind_st(os.fstat(rfd)) != "file":
                raise SandboxError(f"{shown!r} is not a regular file with one name; not copied")
            self._write_at(dfd, dname, rfd, mode, times)
        finally:
            os.close(rfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy_fd(rfd: int, wfd: int) -> None:
    while True:
        b = os.read(rfd, _CHUNK)
        if not b:
            return
        _write_all(wfd, b)


class OpCounter:
    """Counts tool calls and real wall time against :class:`Limits`."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.ops = 0
        self.started = time.monotonic()

    def tick(self) -> None:
        self.ops += 1
        if self.ops > self.limits.max_total_ops:
            raise LimitExceeded(f"more than {self.limits.max_total_ops} tool calls in this session")
        if time.monotonic() - self.started > self.limits.max_wall_s:
            raise LimitExceeded(f"session ran longer than {self.limits.max_wall_s} s of wall time")

    def deadline(self) -> float:
        """``time.monotonic()`` deadline of a call starting now: max_call_s, cut by the session's wall time."""
        now = time.monotonic()
        return min(now + self.limits.max_call_s, self.started + self.limits.max_wall_s)
