"""Work that must stop at a call's deadline — document extraction and grep's regex matching — in a helper process.

Third-party parsers (pypdf, openpyxl, python-docx, python-pptx) and Python's backtracking ``re`` engine have no time
bound of their own, and a thread cannot be stopped. So the engine hands such work to one long-lived helper process
per Python process and waits for the answer until the call's deadline (``Limits.max_call_s``). A helper that
overruns is killed (SIGKILL) and a fresh one starts with the next request.

* The parent reads every file itself, under the sandbox's link rule, and sends bytes; the helper never sees a
  sandbox path. For extraction it writes the bytes to a private temp folder under the original base name (the kind
  comes from the extension) and runs :func:`filegram_ray.workspace.extract.extract_text`.
* grep matches each line with stdlib ``re`` — the same engine and results as an unbounded in-process search, at
  full speed, with the deadline enforced from outside.
* Answers are JSON + UTF-8 frames (never pickle: the helper parses hostile input). Extracted text longer than the
  request's ``max_chars`` is cut and ends with ``[extraction cut at N chars]``.
* The helper's address space is capped (``FILEGRAM_HELPER_MAX_AS_BYTES``, default 4 GiB; our own bound) so a
  decompression bomb fails there with MemoryError, not in the engine.
* Start-up costs one interpreter start (about 0.1 s; parsers load lazily on first use) and is not charged to the
  call's deadline.
* If no helper can be started at all (no subprocesses allowed), the work runs in this process — extraction
  without a time bound, grep with the ``regex`` module's per-search timeout — and a warning is logged once.

Errors: :class:`Overrun` (the deadline passed; the helper was killed), :class:`BoundedFailed` (the input could not
be processed: ``reason`` says why, e.g. :class:`~filegram_ray.workspace.extract.ExtractionError`'s reason).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

_LEN = struct.Struct("!Q")
#: our own bound on the helper's address space (bytes)
DEFAULT_MAX_AS_BYTES = 4 * 1024 ** 3
CUT_MARKER = "[extraction cut at {n} chars]"
#: seconds a new helper may take to start (our own bound; not charged to the call that starts it)
STARTUP_S = 60.0

log = logging.getLogger(__name__)


class Overrun(Exception):
    """The work did not finish before the deadline; the helper process was killed."""


class BoundedFailed(Exception):
    """The input could not be processed; ``reason`` is the explanation shown to the agent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- framing ----------------------------------------------------------------------------------------------------

def _write_frame(f, header: dict, payload: bytes) -> None:
    h = json.dumps(header).encode("utf-8")
    f.write(_LEN.pack(len(h)) + h + _LEN.pack(len(payload)))
    f.write(payload)
    f.flush()


def _read_exact(f, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        b = f.read(n - len(buf))
        if not b:
            return None
        buf += b
    return bytes(buf)


def _read_frame(f) -> tuple[dict, bytes] | None:
    raw = _read_exact(f, _LEN.size)
    if raw is None:
        return None
    h = _read_exact(f, _LEN.unpack(raw)[0])
    raw = _read_exact(f, _LEN.size) if h is not None else None
    payload = _read_exact(f, _LEN.unpack(raw)[0]) if raw is not None else None
    if h is None or payload is None:
        return None
    return json.loads(h), payload


# --- the work itself (run in the helper, or here as the fallback) ---------------------------------------------

def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\x00", "")) or "document"
    return base if base not in (".", "..") else "document"


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n" + CUT_MARKER.format(n=max_chars)


def _extract(data: bytes, name: str, max_chars: int) -> str:
    from filegram_ray.workspace.extract import ExtractionError, extract_text

    with tempfile.TemporaryDirectory(prefix="fg-extract-") as tmp:
        path = os.path.join(tmp, _safe_name(name))
        with open(path, "wb") as f:
            f.write(data)
        try:
            text = extract_text(path)
        except ExtractionError as exc:
            raise BoundedFailed(exc.reason) from None
        except Exception as exc:  # noqa: BLE001 - a parser's own error is the document's fault
            raise BoundedFailed(f"{type(exc).__name__}: {str(exc).replace(path, name)}") from None
    return _cut(text, max_chars)


def grep_lines(search, files: list[tuple[str, bytes]], max_hits: int, line_cap: int,
               ) -> tuple[int, list[tuple[str, int, str]]]:
    """(matching lines in total, first ``max_hits`` as (rel, 1-based line number, line cut at ``line_cap``)):
    each file decoded as UTF-8 (invalid bytes replaced), split into the lines ``read`` numbers
    (:func:`filegram_ray.engine.lines.view_lines`: at ``\n`` only, case BR2-12), ``search(line)`` per line on
    its NFC form (:func:`~filegram_ray.engine.lines.match_key`); the pattern is given in NFC."""
    from filegram_ray.engine.lines import match_key, view_lines

    total = 0
    hits: list[tuple[str, int, str]] = []
    for rel, data in files:
        for no, line in enumerate(view_lines(data.decode("utf-8", errors="replace")), 1):
            if search(match_key(line)):  # compared in NFC, shown as read shows it (lines.py, case BR3-13)
                total += 1
                if len(hits) < max_hits:
                    hits.append((rel, no, line[:line_cap]))
    return total, hits


def _split_payload(sizes: list[list[Any]], payload: bytes) -> list[tuple[str, bytes]]:
    out, pos = [], 0
    for rel, n in sizes:
        out.append((rel, payload[pos:pos + n]))
        pos += n
    return out


def _serve(header: dict, payload: bytes) -> tuple[dict, bytes]:
    op = header.get("op")
    if op == "extract":
        text = _extract(payload, str(header.get("name", "document")), int(header.get("max_chars", 1 << 30)))
        return {"ok": True}, text.encode("utf-8")  # extract_text leaves no lone surrogate (BR-27)
    if op == "grep":
        try:
            rx = re.compile(header["pattern"])
        except (re.error, RecursionError, OverflowError, ValueError) as exc:
            raise BoundedFailed(f"invalid regular expression {header['pattern']!r}: {exc}") from None
        total, hits = grep_lines(rx.search, _split_payload(header["files"], payload), int(header["max_hits"]),
                                 int(header["line_cap"]))
        return {"ok": True, "total": total, "hits": hits}, b""
    raise BoundedFailed(f"unknown operation {op!r}")


# --- the helper process -----------------------------------------------------------------------------------------

class Helper:
    """One helper process, started on first use and restarted after a kill or crash. Thread-safe."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        """Start a helper and wait (up to STARTUP_S, outside any call's deadline) for its ready frame. The
        helper runs this file as a script: no package import, and the current folder is not on its path."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
        code = f"import sys, runpy; del sys.path[0]; runpy.run_path({os.path.abspath(__file__)!r}, run_name='__main__')"
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, close_fds=True)
        ready, _, _ = select.select([proc.stdout.fileno()], [], [], STARTUP_S)
        frame = _read_frame(proc.stdout) if ready else None
        if frame is None or not frame[0].get("ready"):
            proc.kill()
            proc.wait()
            raise OSError(f"the helper process did not start within {STARTUP_S} s")
        return proc

    def close(self) -> None:
        """Stop the helper (if this process started it)."""
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()

    def request(self, header: dict, payload: bytes, timeout: float | None) -> tuple[dict, bytes]:
        """Send one request and wait for its answer. Overrun after ``timeout`` seconds (None: no bound),
        BoundedFailed for an answer that reports a failure, OSError if the helper cannot run."""
        with self._lock:
            if self._owner != os.getpid():  # forked: the helper belongs to the parent process
                self._proc, self._owner = None, os.getpid()
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            try:
                _write_frame(proc.stdin, header, payload)
                fd = proc.stdout.fileno()
                while True:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise Overrun()
                    ready, _, _ = select.select([fd], [], [], left)
                    if ready:
                        break
                answer = _read_frame(proc.stdout)
            except Overrun:
                self.close()
                raise
            except OSError:
                self.close()
                raise OSError("the helper process stopped unexpectedly") from None
            if answer is None:
                self.close()
                raise OSError("the helper process stopped unexpectedly")
        head, data = answer
        if not head.get("ok"):
            raise BoundedFailed(str(head.get("reason", "unknown error")))
        return head, data


_HELPER = Helper()
atexit.register(_HELPER.close)
_fallback_logged = False


def _fallback(exc: OSError) -> None:
    global _fallback_logged
    if not _fallback_logged:
        _fallback_logged = True
        log.warning("no helper process (%s): document extraction runs in-process without a time bound and grep "
                    "uses per-search timeouts", exc)


def extract_document(data: bytes, name: str, *, timeout: float | None, max_chars: int) -> str:
    """Text of the document ``data`` called ``name`` (base name; its extension gives the kind), cut at
    ``max_chars``. Overrun after ``timeout`` seconds; BoundedFailed (with the extractor's reason) for an
    unreadable document."""
    try:
        _head, text = _HELPER.request({"op": "extract", "name": name, "max_chars": int(max_chars)}, data, timeout)
    except OSError as exc:
        _fallback(exc)
        return _extract(data, name, max_chars)
    return text.decode("utf-8")


def grep_files(pattern: str, files: list[tuple[str, bytes]], *, timeout: float | None, max_hits: int,
               line_cap: int) -> tuple[int, list[tuple[str, int, str]]]:
    """:func:`grep_lines` with stdlib ``re`` over ``files`` ((rel, bytes) of text files), stopped after
    ``timeout`` seconds (Overrun). BoundedFailed for an invalid pattern."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise BoundedFailed(f"invalid regular expression {pattern!r}: {exc}") from None
    header = {"op": "grep", "pattern": pattern, "files": [[rel, len(data)] for rel, data in files],
              "max_hits": int(max_hits), "line_cap": int(line_cap)}
    try:
        head, _ = _HELPER.request(header, b"".join(data for _rel, data in files), timeout)
    except OSError as exc:
        _fallback(exc)
        return _grep_here(pattern, files, timeout, max_hits, line_cap)
    return int(head["total"]), [(str(r), int(n), str(t)) for r, n, t in head["hits"]]


def _grep_here(pattern: str, files: list[tuple[str, bytes]], timeout: float | None, max_hits: int,
               line_cap: int) -> tuple[int, list[tuple[str, int, str]]]:
    import regex

    rx = regex.compile(pattern, flags=regex.V0)
    deadline = None if timeout is None else time.monotonic() + timeout

    def search(line: str) -> bool:
        if deadline is None:
            return rx.search(line) is not None
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return rx.search(line, timeout=left) is not None
        except TimeoutError:
            raise Overrun() from None

    return grep_lines(search, files, max_hits, line_cap)


def main() -> None:
    """Helper loop: frames in on stdin, frames out on stdout (see the module docstring)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints of a parser must not corrupt the answer stream
    inp = sys.stdin.buffer
    try:
        import resource

        cap = int(os.environ.get("FILEGRAM_HELPER_MAX_AS_BYTES", DEFAULT_MAX_AS_BYTES))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    _write_frame(out, {"ready": True}, b"")
    while True:
        frame = _read_frame(inp)
        if frame is None:
            return
        try:
            head, data = _serve(*frame)
        except BoundedFailed as exc:
            head, data = {"ok": False, "reason": exc.reason}, b""
        except MemoryError:
            head, data = {"ok": False, "reason": "ran out of memory"}, b""
        _write_frame(out, head, data)


if __name__ == "__main__":
    main()
