"""The append-only, crash-safe session log: ``<store>/sessions/<session_id>/events.jsonl``.

One JSON object per line, UTF-8, ``\\n``-terminated. A line is an event in the engine's schema
(:mod:`filegram_ray.schema.events`) that may carry one extra key, ``_state``: the watcher's index change that the
event implies (see :mod:`filegram_ray.watch.recorder`); a line holding only ``_state`` records a change to the
index without an event (a folder opted out, a file found unchanged). Event and index change are thus written by
one ``write``: after a crash the index is rebuilt by replaying the log, so nothing is lost or applied twice.

Durability: every batch of lines is written with one ``write`` and made durable with ``fsync`` before the batch
counts as recorded (group commit). A crash can leave a *torn* last line (no final newline, or not JSON):
:func:`read_log` skips it and reports it; :meth:`SessionLog.open` moves the torn bytes to
``events.jsonl.torn`` (appended, for inspection) and truncates the log to its last complete line before
appending again, so a torn line never glues onto the next one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filegram_ray.limits import load_json

__all__ = ["LogReport", "SessionLog", "dumps_line", "read_log"]


def dumps_line(obj: dict[str, Any]) -> bytes:
    """One log line: compact JSON (non-ASCII kept), newline-terminated."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


@dataclass
class LogReport:
    """What :func:`read_log` found: complete ``lines``, and a torn tail (``torn_bytes`` > 0) if any."""

    path: str
    lines: int = 0
    torn_bytes: int = 0
    torn_reason: str = ""
    bad_lines: list[int] = field(default_factory=list)

    def message(self) -> str:
        if not self.torn_bytes and not self.bad_lines:
            return ""
        parts = []
        if self.torn_bytes:
            parts.append(f"torn last line ({self.torn_bytes} bytes, {self.torn_reason}) ignored")
        if self.bad_lines:
            parts.append(f"{len(self.bad_lines)} unreadable line(s) skipped: {self.bad_lines[:5]}")
        return f"{self.path}: " + "; ".join(parts)


def _split(data: bytes, path: str) -> tuple[list[dict[str, Any]], LogReport, int]:
    """Parse log bytes → (objects, report, byte length of the complete part)."""
    rep = LogReport(path)
    out: list[dict[str, Any]] = []
    end = data.rfind(b"\n") + 1  # bytes up to and including the last newline
    tail = data[end:]
    pos, lineno = 0, 0
    while pos < end:
        nl = data.index(b"\n", pos)
        raw = data[pos:nl]
        pos = nl + 1
        lineno += 1
        if not raw.strip():
            continue
        try:
            obj = load_json(raw, f"journal line {lineno}", duplicates=True)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
        except (UnicodeDecodeError, ValueError):
            if pos == end and not tail:
                # the last line is complete but not JSON: a torn write that happened to end in "\n" bytes
                rep.torn_bytes, rep.torn_reason = len(raw) + 1, "not JSON"
                end -= len(raw) + 1
                break
            rep.bad_lines.append(lineno)
            continue
        out.append(obj)
    if tail:
        rep.torn_bytes, rep.torn_reason = len(tail), "no final newline"
    rep.lines = len(out)
    return out, rep, end


def read_log(path: str | os.PathLike) -> tuple[list[dict[str, Any]], LogReport]:
    """All complete objects of a log file, in order, and a :class:`LogReport` (torn tail, bad lines).

    A missing file reads as empty. Never raises on content; a torn last line is the expected result of a crash.
    """
    p = Path(path)
    if not p.exists():
        return [], LogReport(str(p))
    objs, rep, _ = _split(p.read_bytes(), str(p))
    return objs, rep


class SessionLog:
    """An open session log for appending.

    Use :meth:`open` (recovers a torn tail first), then :meth:`append` batches, then :meth:`close`.
    """

    def __init__(self, path: Path, fh, lines: int, recovered: LogReport):
        self.path = path
        self._fh = fh
        self.lines = lines
        self.recovered = recovered

    @classmethod
    def open(cls, path: str | os.PathLike) -> SessionLog:
        """Open (creating if needed) for appending; a torn tail is moved to ``<log>.torn`` and cut off.

        Returns the log; ``recovered`` reports what was cut (``torn_bytes`` 0 when the log was clean).
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        data = p.read_bytes() if p.exists() else b""
        _objs, rep, end = _split(data, str(p))
        if end < len(data):
            with open(p.with_name(p.name + ".torn"), "ab") as t:
                t.write(data[end:] + (b"" if data.endswith(b"\n") else b"\n"))
                t.flush()
                os.fsync(t.fileno())
            with open(p, "r+b") as fh:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
        fh = open(p, "ab")  # noqa: SIM115 - held open for the session's lifetime
        if not data:
            _fsync_dir(p.parent)
        return cls(p, fh, rep.lines + len(rep.bad_lines), rep)

    def append(self, objs: list[dict[str, Any]]) -> int:
        """Append ``objs`` as lines with one write and one fsync; returns the line count afterwards."""
        if not objs:
            return self.lines
        self._fh.write(b"".join(dumps_line(o) for o in objs))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.lines += len(objs)
        return self.lines

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
