"""Content-addressable media store of one trajectory (reference §2.2).

Layout written by :meth:`MediaStore.write_to` under ``<trajectory>/media/``::

    manifest.json        {"version": 1, "entries": {hash: {type, original_path, size_bytes, stored_at,
                          references}}, "stats": {total_blobs, total_diffs, total_bytes, deduplicated_saves}}
    blobs/<hash>.blob    full text snapshots
    diffs/<hash>.diff    unified diffs (3 context lines), headers ``a/<file_path>`` / ``b/<file_path>``; exact:
                         ``patch -p1`` / ``git apply`` rebuild the new text byte for byte (see unified_diff)

Constants (all reference §2.2): hash = first 16 hex chars of SHA-256 of the UTF-8 text; a blob is skipped when a
NUL char occurs in its first 8,192 chars; text over 1,048,576 UTF-8 bytes is cut to its first 1,048,576 chars
and the marker line ``[truncated at 1MB]`` appended; a repeated hash only increments ``references`` (and
``deduplicated_saves``). ``stored_at`` is the *simulated* clock (epoch ms) so the same seed gives the same bytes. Every blob, diff and
the manifest are valid UTF-8: a lone surrogate in a text (a name that is not UTF-8) is stored by the rule of
:mod:`filegram_ray.names` (``%XX``; case BR-27), and the hash is that of the bytes stored.

The store is kept in memory during a session (its size is bounded by the engine's write limits) and written
once, atomically per file, at the end.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from filegram_ray.engine.lines import split_lines  # the one line model (BR2-12); re-exported here
from filegram_ray.names import utf8_bytes

#: reference §2.2
HASH_LEN = 16
NUL_SCAN_CHARS = 8192
MAX_BLOB_BYTES = 1_048_576
TRUNCATION_MARKER = "[truncated at 1MB]"
DIFF_CONTEXT_LINES = 3
#: GNU diff's marker after a last line that has no newline (read by ``patch`` and ``git apply``)
NO_NEWLINE_MARKER = "\\ No newline at end of file\n"


def content_hash(text: str | None) -> str | None:
    """SHA-256[:16] of the UTF-8 text; ``None`` for empty/absent content (reference §3.4 before/after_hash)."""
    if not text:
        return None
    return hashlib.sha256(utf8_bytes(text)).hexdigest()[:HASH_LEN]


def unified_diff(before: str, after: str, file_path: str) -> str:
    """Unified diff (3 context lines, line endings kept) with headers ``a/<file_path>``, ``b/<file_path>``.

    Exact: ``patch -p1`` and ``git apply`` accept it and rebuild ``after`` from ``before`` byte for byte
    (:func:`apply_diff` does the same in Python). A last line without a newline is followed by the marker line
    ``\\ No newline at end of file``, so a change of only the final newline is a real hunk."""
    out = []
    for line in difflib.unified_diff(split_lines(before), split_lines(after), fromfile=f"a/{file_path}",
                                     tofile=f"b/{file_path}", n=DIFF_CONTEXT_LINES, lineterm="\n"):
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE_MARKER)
    return "".join(out)


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_diff(diff: str, before: str) -> str:
    """Apply a unified diff made by :func:`unified_diff` (or any single-file unified diff) to ``before``.

    Returns the new text. Raises ValueError when a hunk does not match ``before`` (context or removed lines
    differ, or the diff is malformed)."""
    old = split_lines(before)
    lines = split_lines(diff)
    out: list[str] = []
    pos = 0  # next line of ``old`` not yet copied
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            raise ValueError(f"malformed diff: expected a hunk header, got {lines[i]!r}")
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        new_count = int(m.group(4) if m.group(4) is not None else 1)
        first = start - 1 if count else start  # a hunk adding to an empty range starts after line ``start``
        if first < pos or first > len(old):
            raise ValueError(f"hunk {lines[i].strip()!r} does not fit the old text")
        out.extend(old[pos:first])
        pos = first
        i += 1
        seen_old = seen_new = 0
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            tag, body = line[:1], line[1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
                if not body.endswith("\n"):
                    raise ValueError("malformed diff: end-of-file marker after an unterminated line")
                body = body[:-1]
                i += 1
            if tag in (" ", "-"):
                if pos >= len(old) or old[pos] != body:
                    raise ValueError(f"hunk does not match the old text at line {pos + 1}")
                pos += 1
                seen_old += 1
                if tag == " ":
                    out.append(body)
                    seen_new += 1
            elif tag == "+":
                out.append(body)
                seen_new += 1
            else:
                raise ValueError(f"malformed diff line {line!r}")
            i += 1
        if (seen_old, seen_new) != (count, new_count):
            raise ValueError(f"hunk line counts do not match its header ({seen_old}/{count} old, "
                             f"{seen_new}/{new_count} new)")
    out.extend(old[pos:])
    return "".join(out)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class MediaStore:
    """In-memory CAS; ``save_blob``/``save_diff`` return a MediaRef dict or ``None`` when nothing is stored."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self._data: dict[str, bytes] = {}
        self.stats = {"total_blobs": 0, "total_diffs": 0, "total_bytes": 0, "deduplicated_saves": 0}

    def _put(self, kind: str, text: str, original_path: str, now_ms: float) -> dict[str, str]:
        data = utf8_bytes(text)
        h = hashlib.sha256(data).hexdigest()[:HASH_LEN]
        rel = f"blobs/{h}.blob" if kind == "blob" else f"diffs/{h}.diff"
        if h in self.entries:
            self.entries[h]["references"] += 1
            self.stats["deduplicated_saves"] += 1
        else:
            self.entries[h] = {"type": kind, "original_path": original_path, "size_bytes": len(data),
                               "stored_at": now_ms, "references": 1}
            self._data[rel] = data
            self.stats["total_blobs" if kind == "blob" else "total_diffs"] += 1
            self.stats["total_bytes"] += len(data)
        return {"type": kind, "hash": h, "path": rel}

    def save_blob(self, text: str, original_path: str, now_ms: float) -> dict[str, str] | None:
        """Store a full-text snapshot; ``None`` if it holds a NUL in its first 8,192 chars."""
        if "\x00" in text[:NUL_SCAN_CHARS]:
            return None
        if len(utf8_bytes(text)) > MAX_BLOB_BYTES:
            text = text[:MAX_BLOB_BYTES] + "\n" + TRUNCATION_MARKER + "\n"
        return self._put("blob", text, original_path, now_ms)

    def save_diff(self, before: str, after: str, file_path: str, now_ms: float) -> dict[str, str] | None:
        """Store the unified diff before→after; ``None`` if the diff is empty."""
        diff = unified_diff(before, after, file_path)
        if not diff:
            return None
        return self._put("diff", diff, file_path, now_ms)

    def read(self, rel: str) -> bytes:
        """Bytes stored at ``rel`` (e.g. ``blobs/<hash>.blob``); KeyError if absent."""
        return self._data[rel]

    def manifest(self) -> dict[str, Any]:
        return {"version": 1, "entries": self.entries, "stats": dict(self.stats)}

    def write_to(self, media_dir: Path) -> int:
        """Write manifest and every blob/diff under ``media_dir``; returns the number of files written."""
        media_dir = Path(media_dir)
        (media_dir / "blobs").mkdir(parents=True, exist_ok=True)
        (media_dir / "diffs").mkdir(parents=True, exist_ok=True)
        for rel, data in sorted(self._data.items()):
            _atomic_write(media_dir / rel, data)
        _atomic_write(media_dir / "manifest.json",
                      json.dumps(self.manifest(), indent=2, ensure_ascii=False).encode("utf-8"))
        return len(self._data) + 1
