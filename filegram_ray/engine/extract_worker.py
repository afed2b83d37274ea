"""Document text extraction in a helper process, so a ``read`` can be stopped at its deadline.

Third-party parsers (pypdf, openpyxl, python-docx, python-pptx) run with no time bound of their own; a thread
cannot be stopped, so the engine hands the bytes of a document to one long-lived helper process per Python process
and waits for the answer until the call's deadline (``Limits.max_call_s``). A helper that overruns is killed and a
fresh one starts with the next request.

* The parent reads the file itself (under the sandbox's link rule) and sends its bytes; the helper never sees a
  sandbox path. It writes them to a private temp folder under the original base name (the kind comes from the
  extension) and runs :func:`filegram_ray.workspace.extract.extract_text`.
* Answers are JSON + UTF-8 frames (never pickle: the helper parses hostile input). Text longer than the
  request's ``max_chars`` is cut and ends with ``[extraction cut at N chars]``.
* The helper's address space is capped (``FILEGRAM_EXTRACT_MAX_AS_BYTES``, default 4 GiB; our own bound) so a
  decompression bomb fails there with MemoryError, not in the engine.
* Start-up costs one interpreter start and the parser imports (about a second, once per process).

Errors: :class:`ExtractTimeout` (the deadline passed; the helper was killed), :class:`ExtractFailed` (the document
could not be read: ``reason`` as :class:`~filegram_ray.workspace.extract.ExtractionError` gives it).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time

_LEN = struct.Struct("!Q")
#: our own bound on the helper's address space (bytes)
DEFAULT_MAX_AS_BYTES = 4 * 1024 ** 3
CUT_MARKER = "[extraction cut at {n} chars]"

log = logging.getLogger(__name__)


class ExtractTimeout(Exception):
    """Extraction did not finish before the deadline; the helper process was killed."""


class ExtractFailed(Exception):
    """The document could not be read as its kind; ``reason`` is the extractor's explanation."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


class ExtractWorker:
    """One helper process, started on first use and restarted after a kill or crash. Thread-safe."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
        return subprocess.Popen([sys.executable, "-m", "filegram_ray.engine.extract_worker"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, close_fds=True)

    def close(self) -> None:
        """Stop the helper (if this process started it)."""
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()

    def extract(self, data: bytes, name: str, *, timeout: float | None, max_chars: int) -> str:
        """Text of the document ``data`` called ``name`` (base name; its extension gives the kind).

        Raises ExtractTimeout after ``timeout`` seconds (None: no bound), ExtractFailed for an unreadable
        document, OSError if no helper can be started."""
        with self._lock:
            if self._owner != os.getpid():  # forked: the helper belongs to the parent process
                self._proc, self._owner = None, os.getpid()
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            try:
                _write_frame(proc.stdin, {"name": name, "max_chars": int(max_chars)}, data)
                fd = proc.stdout.fileno()
                while True:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise ExtractTimeout(name)
                    ready, _, _ = select.select([fd], [], [], left)
                    if ready:
                        break
                answer = _read_frame(proc.stdout)
            except ExtractTimeout:
                self.close()
                raise
            except (BrokenPipeError, OSError):
                self.close()
                raise OSError("the extraction helper process stopped unexpectedly") from None
            if answer is None:
                self.close()
                raise OSError("the extraction helper process stopped unexpectedly")
        header, payload = answer
        if not header.get("ok"):
            raise ExtractFailed(str(header.get("reason", "unknown error")))
        return payload.decode("utf-8", "surrogatepass")


_WORKER = ExtractWorker()
atexit.register(_WORKER.close)
_fallback_logged = False


def extract_document(data: bytes, name: str, *, timeout: float | None, max_chars: int) -> str:
    """Extract through the shared helper (see :meth:`ExtractWorker.extract`). If no helper process can be
    started at all, extracts in this process (logged once: the time bound is then lost)."""
    try:
        return _WORKER.extract(data, name, timeout=timeout, max_chars=max_chars)
    except OSError as exc:
        if not _fallback_logged:
            _log_fallback(exc)
        return _extract_here(data, name, max_chars)


def _log_fallback(exc: OSError) -> None:
    global _fallback_logged
    _fallback_logged = True
    log.warning("document extraction runs in-process without a time bound: %s", exc)


def _extract_here(data: bytes, name: str, max_chars: int) -> str:
    from filegram_ray.workspace.extract import ExtractionError, extract_text

    with tempfile.TemporaryDirectory(prefix="fg-extract-") as tmp:
        path = os.path.join(tmp, _safe_name(name))
        with open(path, "wb") as f:
            f.write(data)
        try:
            text = extract_text(path)
        except ExtractionError as exc:
            raise ExtractFailed(exc.reason) from None
        except Exception as exc:  # noqa: BLE001 - a parser's own error is the document's fault
            raise ExtractFailed(f"{type(exc).__name__}: {str(exc).replace(path, name)}") from None
    return _cut(text, max_chars)


def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\x00", "")) or "document"
    return base if base not in (".", "..") else "document"


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n" + CUT_MARKER.format(n=max_chars)


def main() -> None:
    """Helper loop: frames in on stdin, frames out on stdout (see the module docstring)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints of a parser must not corrupt the answer stream
    inp = sys.stdin.buffer
    try:
        import resource

        cap = int(os.environ.get("FILEGRAM_EXTRACT_MAX_AS_BYTES", DEFAULT_MAX_AS_BYTES))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    while True:
        frame = _read_frame(inp)
        if frame is None:
            return
        header, data = frame
        name = str(header.get("name", "document"))
        try:
            text = _extract_here(data, name, int(header.get("max_chars", 1 << 30)))
            _write_frame(out, {"ok": True}, text.encode("utf-8", "surrogatepass"))
        except ExtractFailed as exc:
            _write_frame(out, {"ok": False, "reason": exc.reason}, b"")
        except MemoryError:
            _write_frame(out, {"ok": False, "reason": "ran out of memory while extracting"}, b"")


if __name__ == "__main__":
    main()
