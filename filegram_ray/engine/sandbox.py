"""Per-trajectory sandbox: a private copy of a task bundle and the only path resolver tools may use.

A sandbox has a *real* root (a directory under the engine's work root) and a *virtual* root
``/sandbox/<profile_id>_<task_id>`` (reference §1.2 naming). Agents may give a path relative to the root or as a
virtual absolute path; events always record the virtual path, so the real temp directory never reaches the bytes
of a trajectory (same seed → same bytes).

Refused (raise :class:`SandboxError`, which tools turn into a tool error): non-string or empty paths, NUL bytes,
names that are not valid UTF-8 (surrogate escapes), ``~`` expansion, absolute paths outside the virtual or real
root, ``..`` escapes, symlinks whose target resolves outside the root (``os.path.realpath`` check after
resolving every link), and device/FIFO/socket files. :class:`Limits` bound a session; exceeding one raises
:class:`LimitExceeded` (also a tool error).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

VIRTUAL_PREFIX = "/sandbox"


class SandboxError(Exception):
    """A path or operation is not allowed inside the sandbox (reported to the agent as a tool error)."""


class LimitExceeded(SandboxError):
    """A session limit (:class:`Limits`) was hit."""


@dataclass(frozen=True)
class Limits:
    """Per-session resource limits. Our own safety bounds (not upstream constants).

    max_write_bytes: largest single write/edit result, bytes (UTF-8).
    max_total_ops: tool calls per session; upstream's 150 LLM iterations (§1.1) × a few calls fit easily.
    max_wall_s: real seconds since ``start()``; checked before each tool call.
    max_sandbox_bytes: total size of the sandbox tree after a write.
    max_path_chars: longest accepted path argument.
    """

    max_write_bytes: int = 5 * 1024 * 1024
    max_total_ops: int = 5000
    max_wall_s: float = 600.0
    max_sandbox_bytes: int = 512 * 1024 * 1024
    max_path_chars: int = 1024


class Sandbox:
    """A private directory tree. ``resolve(path)`` → (real ``Path``, relative POSIX str, ``"."`` for the root)."""

    def __init__(self, root: Path, virtual_root: str, limits: Limits | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.real_root = os.path.realpath(self.root)
        self.virtual_root = virtual_root.rstrip("/")
        self.limits = limits or Limits()

    @classmethod
    def create(cls, bundle_files_dir: Path | None, root: Path, virtual_root: str,
               limits: Limits | None = None) -> Sandbox:
        """Copy ``bundle_files_dir`` (if given) to a fresh ``root``; symlinks are copied as links (never
        followed) and special files are skipped. Raises FileNotFoundError if the bundle dir is missing and
        FileExistsError if ``root`` already exists and is not empty."""
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            raise FileExistsError(f"sandbox root {root} already exists and is not empty")
        if bundle_files_dir is not None:
            src = Path(bundle_files_dir)
            if not src.is_dir():
                raise FileNotFoundError(f"bundle files dir {src} does not exist")
            if root.exists():
                root.rmdir()

            def _ignore(d: str, names: list[str]) -> list[str]:
                out = []
                for n in names:
                    st = os.lstat(os.path.join(d, n))
                    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                        out.append(n)
                return out

            shutil.copytree(src, root, symlinks=True, ignore=_ignore)
        return cls(root, virtual_root, limits)

    # --- path handling -----------------------------------------------------------------------------------------

    def virtual(self, rel: str) -> str:
        """Virtual absolute path of a relative path (``"."`` → the virtual root itself)."""
        return self.virtual_root if rel in ("", ".") else f"{self.virtual_root}/{rel}"

    def to_rel(self, path: str) -> str:
        """Normalised relative POSIX path of ``path`` (no filesystem access); raises SandboxError on escape."""
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
        if any(ord(c) < 32 for c in path):
            raise SandboxError("path contains control characters")
        if path.startswith("~"):
            raise SandboxError(f"home-directory paths are outside the sandbox: {path!r}")
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            if norm == self.virtual_root or norm == self.real_root:
                return "."
            for base in (self.virtual_root, self.real_root):
                if norm.startswith(base + "/"):
                    path = norm[len(base) + 1:]
                    break
            else:
                raise SandboxError(f"absolute path outside the sandbox: {path!r} "
                                   f"(use a relative path or {self.virtual_root}/...)")
        rel = posixpath.normpath(path)
        if rel == ".." or rel.startswith(("../", "/")):
            raise SandboxError(f"path escapes the sandbox: {path!r}")
        return rel

    def resolve(self, path: str, *, must_exist: bool = False) -> tuple[Path, str]:
        """(real path, relative path). Follows symlinks of every existing component and refuses any that
        lands outside the root; refuses device/FIFO/socket files. ``must_exist`` raises SandboxError if absent.
        """
        rel = self.to_rel(path)
        real = self.root / rel if rel != "." else self.root
        resolved = os.path.realpath(real)
        if resolved != self.real_root and not resolved.startswith(self.real_root + os.sep):
            raise SandboxError(f"path resolves outside the sandbox (symlink?): {path!r}")
        if os.path.lexists(real):
            st = os.stat(resolved) if os.path.exists(resolved) else os.lstat(real)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise SandboxError(f"not a regular file or directory: {path!r}")
        elif must_exist:
            raise SandboxError(f"no such file or directory: {path!r}")
        return real, rel

    # --- limits ------------------------------------------------------------------------------------------------

    def check_write_size(self, nbytes: int) -> None:
        if nbytes > self.limits.max_write_bytes:
            raise LimitExceeded(f"write of {nbytes} bytes exceeds the limit of {self.limits.max_write_bytes}")

    def tree_bytes(self) -> int:
        total = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
        return total

    def check_tree_size(self, extra: int = 0) -> None:
        if self.tree_bytes() + extra > self.limits.max_sandbox_bytes:
            raise LimitExceeded(f"sandbox would exceed {self.limits.max_sandbox_bytes} bytes")


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
