"""The 8 behavioural-mode tools (reference §1.1): read, write, edit, multiedit, grep, glob, list, bash.

Each tool is a function ``tool(sandbox, ctx, **args) -> (ToolResult, observations)``. ``observations`` are facts
checked on disk (existence before/after, text before/after, entries listed) from which the collector derives the
events; a tool never reports what it merely intended. Every failure — bad argument, refused path, limit, missing
file — raises :class:`ToolError` (or :class:`~filegram_ray.engine.sandbox.SandboxError`), which the session turns
into ``ToolResult(ok=False, ...)``; a tool never crashes the session. Tools touch the disk only through the
sandbox's primitives (:mod:`filegram_ray.engine.sandbox`: the link rule, the limits, the per-call deadline).

Constants (reference §1.1): read window default offset 1, limit 2000 lines; lines longer than 2,000 chars are
cut; the whole read output is capped at 30,000 chars. grep/glob report at most 100 matches (§3.3
``max_results``). Document kinds (pdf, docx, xlsx, pptx, eml, ics) are read through
``filegram_ray.workspace.extract.extract_text`` in a helper process stopped at the call's deadline
(:mod:`filegram_ray.engine.bounded`); media kinds only through the session's annotations (a media file without
one gives a "skipped" notice and no event).

One line model (case BR2-12, :mod:`filegram_ray.engine.lines`): a line ends at ``\n`` only (a ``\r`` before it
belongs to the ending); a lone ``\r``, a form feed, U+0085 or U+2028 stays inside its line, so ``read``'s line
numbers, ``grep``'s, a read's ``view_range`` and the recorded diff's hunks all count the same lines, as ``wc -l``
and ``grep -n`` do.

One view per file (case R2-eml-grep-line-numbers-differ-from-read): ``read`` and ``grep`` see the same text of a
file — :func:`file_view`: a document's extracted text, a media file's annotation, a text file's decoded bytes — so
a line number grep reports is the ``offset`` at which read shows that line, and the ``view_range`` recorded for a
read counts lines of that view. Extracted views are cached per process by content (SHA-256 of the bytes), so a
grep across a folder extracts each document once. grep gives each document's extraction the call's time left
minus :data:`GREP_MATCH_RESERVE` of it (kept for matching); a document that overruns ends the collection (it and
the files after it are named as not searched) and later greps in the process skip it at once, so one slow
document never keeps the rest of a folder unsearched.

Per-call bounds (:class:`~filegram_ray.engine.sandbox.Limits`): grep matches lines with stdlib ``re`` in the same
helper process, killed at the call's deadline; grep and glob walk the tree through descriptors and stop at the
deadline; files over ``max_read_bytes`` are not read; patterns are length-limited and brace expansion
stops at ``max_pattern_expansions`` alternatives; ``edit``/``multiedit`` project the result size (occurrences ×
length change) and refuse before building the text. ``edit`` on a CRLF file (every newline is ``\r\n``) matches
and writes LF-typed ``old_string``/``new_string`` as CRLF, so the file keeps its line endings.

``bash`` is not a shell: see :mod:`filegram_ray.engine.bash` for the exact language.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from filegram_ray.engine.bash import LIST_CAP, BashRefused, run_bash
from filegram_ray.engine.lines import match_key, nfc_spans, view_lines
from filegram_ray.engine.sandbox import LimitExceeded, Sandbox

#: reference §1.1 read window and caps
READ_DEFAULT_OFFSET = 1
READ_DEFAULT_LIMIT = 2000
READ_LINE_CAP = 2000
READ_OUTPUT_CAP = 30_000
#: reference §3.3 grep/glob max_results
MAX_RESULTS = 100
#: reference §2.2 NUL scan window used to call a file binary
BINARY_SCAN = 8192
#: share of a grep call's time limit kept for matching after documents are extracted (our own choice)
GREP_MATCH_RESERVE = 0.25

DOCUMENT_KINDS = frozenset({"pdf", "docx", "xlsx", "pptx", "eml", "ics"})

__all__ = ["DOCUMENT_KINDS", "LIST_CAP", "TOOLS", "ToolContext", "ToolError", "ToolResult", "list_tree",
           "tool_schemas"]


@dataclass
class ToolResult:
    """Outcome of one tool call as the agent sees it.

    ok: success flag; output: the text the agent reads (on failure, the error text); error: error message or
    None; content: for a successful ``read``, the raw text shown (no line numbers), else None.
    """

    ok: bool
    output: str
    error: str | None = None
    content: str | None = None


class ToolError(Exception):
    """A tool failed; the message is shown to the agent."""


@dataclass
class ToolContext:
    """What tools need besides the sandbox: the media annotations ``{relpath: {"modality", "content"}}``."""

    annotations: dict[str, dict[str, Any]]


# --- helpers ----------------------------------------------------------------------------------------------------

def _kind(rel: str) -> str:
    try:
        from filegram_ray.workspace.extract import kind_of  # lazy: another area owns it
        return kind_of(rel)
    except ImportError:  # pragma: no cover - extract module absent
        ext = posixpath.splitext(rel)[1].lower().lstrip(".")
        return ext or "unknown"


def _is_media(kind: str) -> bool:
    try:
        from filegram_ray.workspace.extract import is_media
        return is_media(kind)
    except ImportError:  # pragma: no cover
        return kind in {"png", "jpg", "jpeg", "gif", "mp3", "wav", "mp4"}


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def _read_text(sb: Sandbox, rel: str, shown: str | None = None) -> str:
    return _decode(sb.read_bytes(rel, shown))


def _read_text_strict(sb: Sandbox, rel: str, shown: str) -> tuple[str, int]:
    """(text, size in bytes) of a file to edit; ToolError for binary or non-UTF-8 content."""
    data = sb.read_bytes(rel, shown)
    if b"\x00" in data[:BINARY_SCAN]:
        raise ToolError(f"{rel}: binary file, cannot edit as text")
    try:
        return data.decode("utf-8"), len(data)
    except UnicodeDecodeError:
        raise ToolError(f"{rel}: not UTF-8 text, cannot edit") from None


#: our own bounds on the per-process cache of extracted document views (entries, characters in total)
VIEW_CACHE_ENTRIES = 512
VIEW_CACHE_CHARS = 64 * 1024 * 1024


class _ViewCache:
    """LRU of extracted views keyed by (SHA-256 of the bytes, kind, character cap); thread-safe."""

    def __init__(self) -> None:
        import threading
        from collections import OrderedDict

        self._d: OrderedDict[tuple[bytes, str, int], str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[bytes, str, int]) -> str | None:
        with self._lock:
            text = self._d.get(key)
            if text is not None:
                self._d.move_to_end(key)
            return text

    def put(self, key: tuple[bytes, str, int], text: str) -> None:
        with self._lock:
            if key in self._d or len(text) > VIEW_CACHE_CHARS // 4:
                return
            self._d[key] = text
            self._chars += len(text)
            while len(self._d) > VIEW_CACHE_ENTRIES or self._chars > VIEW_CACHE_CHARS:
                _k, old = self._d.popitem(last=False)
                self._chars -= len(old)


_VIEWS = _ViewCache()
#: documents (view-cache keys) whose extraction overran a grep's time budget in this process: later greps skip
#: them at once (and say so), so one slow document does not keep the files after it unsearched; read still tries
_SLOW_VIEWS: set[tuple[bytes, str, int]] = set()


def _view_key(sb: Sandbox, rel: str, data: bytes) -> tuple[bytes, str, int]:
    import hashlib

    return hashlib.sha256(data).digest(), _kind(rel), sb.limits.max_read_bytes


def _extract_view(sb: Sandbox, rel: str, data: bytes, timeout: float | None = None) -> str:
    """Extracted text of document bytes ``data`` (cached by content), within ``timeout`` seconds (default: the
    call's time left); Overrun / BoundedFailed pass through."""
    from filegram_ray.engine.bounded import extract_document

    key = _view_key(sb, rel, data)
    text = _VIEWS.get(key)
    if text is None:
        text = extract_document(data, posixpath.basename(rel), timeout=sb.time_left() if timeout is None else timeout,
                                max_chars=sb.limits.max_read_bytes)
        _VIEWS.put(key, text)
    return text


def document_text(sb: Sandbox, rel: str, shown: str | None = None) -> str:
    """Extracted text of document ``rel`` (a kind in DOCUMENT_KINDS), bounded by the call's deadline and by
    ``max_read_bytes`` of input and of text. ToolError names the file when it cannot be read or takes too long."""
    from filegram_ray.engine.bounded import BoundedFailed, Overrun

    data = sb.read_bytes(rel, shown)
    sb.check_time(f"reading {rel}")
    try:
        return _extract_view(sb, rel, data)
    except Overrun:
        raise LimitExceeded(f"{rel}: text extraction stopped: the call ran past its time limit "
                            f"({sb.limits.max_call_s} s per call)") from None
    except BoundedFailed as exc:
        raise ToolError(f"{rel}: cannot extract text: {exc.reason}") from None


def annotation_text(ann: dict[str, Any]) -> str:
    """The text of a media annotation that ``read`` numbers and ``grep`` searches."""
    return str(ann.get("raw_content") or ann.get("content") or "")


def file_view(sb: Sandbox, ctx: ToolContext, rel: str, shown: str | None = None) -> str | None:
    """The one view of file ``rel`` that ``read`` numbers and ``grep`` searches (module docstring): a media
    file's annotation text (None when it has none), a document's extracted text, else the decoded bytes.
    Raises ToolError / LimitExceeded as :func:`document_text` and the sandbox do."""
    kind = _kind(rel)
    if _is_media(kind):
        ann = _annotation(ctx, rel)
        return None if ann is None else annotation_text(ann)
    if kind in DOCUMENT_KINDS:
        return document_text(sb, rel, shown)
    return _read_text(sb, rel, shown)


def _str_arg(name: str, value: Any, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise ToolError(f"argument '{name}' must be a string, got {type(value).__name__}")
    if not allow_empty and value == "":
        raise ToolError(f"argument '{name}' must not be empty")
    return value


def _int_arg(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"argument '{name}' must be an integer, got {type(value).__name__}")
    if value < lo:
        raise ToolError(f"argument '{name}' must be >= {lo}, got {value}")
    return value


def _pattern_arg(sb: Sandbox, name: str, value: Any) -> str:
    value = _str_arg(name, value, allow_empty=False)
    if len(value) > sb.limits.max_pattern_chars:
        raise LimitExceeded(f"argument '{name}' is longer than {sb.limits.max_pattern_chars} chars")
    return value


def _annotation(ctx: ToolContext, rel: str) -> dict[str, Any] | None:
    ann = ctx.annotations.get(rel)
    if ann is None:  # upstream keys annotations by bare filename (§1.1)
        ann = ctx.annotations.get(posixpath.basename(rel))
    return ann


def _encode(text: str, what: str, limit: int) -> bytes:
    if len(text) > limit:  # every char is at least one UTF-8 byte: refuse before encoding
        raise LimitExceeded(f"write of at least {len(text)} bytes exceeds the limit of {limit}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(f"{what} is not encodable as UTF-8") from None


def _regular_files(sb: Sandbox, rel: str, what: str) -> list[str]:
    """Regular files under folder ``rel`` in ``os.walk`` order (a folder's files, then its sub-folders, names
    sorted); links and special files are never followed nor listed."""
    return [e.rel for _d, _dirs, others in sb.walk(rel, what=what) for e in others if e.kind == "file"]


def _format_window(text: str, offset: int, limit: int) -> tuple[str, list[int], str]:
    """Line-numbered view of ``text``; returns (output, view_range, shown raw text). Lines are those of
    :func:`~filegram_ray.engine.lines.view_lines` (they end at ``\n`` only, as grep's and the diff's do)."""
    lines = view_lines(text)
    n = len(lines)
    if n == 0:
        return "(empty file)\n", [1, 0], ""
    if offset > n:
        raise ToolError(f"offset {offset} is past the end of the file ({n} lines)")
    out, shown, last = [], [], offset - 1
    size = 0
    truncated = False
    for i in range(offset - 1, min(n, offset - 1 + limit)):
        line = lines[i]
        if len(line) > READ_LINE_CAP:
            line = line[:READ_LINE_CAP] + " [line cut]"
        row = f"{i + 1:6d}\t{line}\n"
        if size + len(row) > READ_OUTPUT_CAP:
            truncated = True
            break
        out.append(row)
        shown.append(lines[i])
        size += len(row)
        last = i + 1
    if last < offset:  # not even one line fitted: show a cut first line
        row = f"{offset:6d}\t{lines[offset - 1][:READ_OUTPUT_CAP - 40]}\n"
        out, shown, last, truncated = [row], [lines[offset - 1]], offset, True
    if truncated:
        out.append(f"[output cut at {READ_OUTPUT_CAP} chars; continue with offset={last + 1}]\n")
    elif last < n:
        out.append(f"[lines {offset}-{last} of {n}; continue with offset={last + 1}]\n")
    else:
        out.append(f"[end of file, {n} lines]\n")
    return "".join(out), [offset, last], "\n".join(shown)


# --- tools ------------------------------------------------------------------------------------------------------

def tool_read(sb: Sandbox, ctx: ToolContext, file_path: Any = None, offset: Any = None,
              limit: Any = None) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    offset = READ_DEFAULT_OFFSET if offset is None else _int_arg("offset", offset, 1)
    limit = READ_DEFAULT_LIMIT if limit is None else _int_arg("limit", limit, 1)
    rel = sb.resolve(file_path, must_exist=True)
    if sb.kind(rel, file_path) == "dir":
        raise ToolError(f"{file_path}: is a directory (use list or bash ls)")
    kind = _kind(rel)
    text = file_view(sb, ctx, rel, file_path)
    if text is None:  # a media file nobody described
        return ToolResult(True, f"[skipped: {rel} is a {kind} file with no annotation]"), []
    output, view_range, shown = _format_window(text, offset, limit)
    if _is_media(kind):
        # §3.4: annotated media → [1, annotation lines] (the default window); offset/limit count annotation lines,
        # the same lines grep numbers
        modality = str((_annotation(ctx, rel) or {}).get("modality", kind))
        output = f"[{modality} annotation of {rel}]\n{output}"
    return (ToolResult(True, output, content=shown),
            [{"kind": "read", "rel": rel, "view_range": view_range, "output_len": len(output)}])


def tool_write(sb: Sandbox, ctx: ToolContext, file_path: Any = None,
               content: Any = None) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    content = _str_arg("content", content)
    rel = sb.resolve(file_path)
    if rel == "." or sb.kind(rel, file_path) == "dir":
        raise ToolError(f"{file_path}: is a directory")
    data = _encode(content, "content", sb.limits.max_write_bytes)
    existed = sb.kind(rel, file_path) == "file"
    before = _read_text(sb, rel, file_path) if existed else None
    sb.write_bytes(rel, data, file_path)
    after = _read_text(sb, rel, file_path)
    verb = "overwrote" if existed else "created"
    return (ToolResult(True, f"{verb} {rel} ({len(content)} chars)"),
            [{"kind": "write", "rel": rel, "existed": existed, "before": before, "after": after,
              "written_chars": len(content), "tool": "write"}])


def _utf8_len(s: str, what: str) -> int:
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: never written (BR-27)
        raise ToolError(f"{what} is not encodable as UTF-8") from None


def _is_crlf(text: str) -> bool:
    """Every newline of ``text`` is CRLF (and there is at least one)."""
    n = text.count("\n")
    return n > 0 and text.count("\r\n") == n


def _to_crlf(s: str) -> str:
    return re.sub(r"(?<!\r)\n", "\r\n", s)


def _apply_edit(text: str, nbytes: int, old: str, new: str, replace_all: bool, rel: str,
                limit: int) -> tuple[str, int]:
    """(new text, its UTF-8 size). On a CRLF file LF-typed strings are matched and written as CRLF. The size
    of the result is projected from the occurrence count and refused (LimitExceeded) before it is built."""
    if old == new:
        raise ToolError("old_string and new_string are identical")
    if _is_crlf(text):
        old, new = _to_crlf(old), _to_crlf(new)
        if old == new:
            raise ToolError("old_string and new_string differ only in line endings (the file uses CRLF)")
    count = text.count(old)
    if count:
        spans = None
    else:  # what read shows may be in another Unicode normalisation form than what was typed (lines.py)
        spans = nfc_spans(text, old)
        count = len(spans)
    if count == 0:
        raise ToolError(f"old_string not found in {rel}")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times in {rel}; add context or set replace_all")
    n = count if replace_all else 1
    if spans is None:
        projected = nbytes + n * (_utf8_len(new, "new_string") - _utf8_len(old, "old_string"))
    else:
        projected = nbytes + sum(_utf8_len(new, "new_string") - _utf8_len(text[a:b], "old_string")
                                 for a, b in spans[:n])
    if projected > limit:
        raise LimitExceeded(f"edit would make {rel} {projected} bytes; the limit is {limit} "
                            f"({n} replacement(s); nothing was changed)")
    if spans is not None:  # the matched stretches of the file's own characters are replaced, the rest kept
        out, pos = [], 0
        for a, b in spans[:n]:
            out += [text[pos:a], new]
            pos = b
        return "".join(out) + text[pos:], projected
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), projected


def tool_edit(sb: Sandbox, ctx: ToolContext, file_path: Any = None, old_string: Any = None,
              new_string: Any = None, replace_all: Any = False) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    old = _str_arg("old_string", old_string)
    new = _str_arg("new_string", new_string)
    if not isinstance(replace_all, bool):
        raise ToolError("argument 'replace_all' must be a boolean")
    limit = sb.limits.max_write_bytes
    if len(new) > limit:
        raise LimitExceeded(f"new_string of at least {len(new)} bytes exceeds the write limit of {limit}")
    rel = sb.resolve(file_path)
    kind = "dir" if rel == "." else sb.kind(rel, file_path)
    if kind == "dir":
        raise ToolError(f"{file_path}: is a directory")
    if old == "":  # §3.3: empty old_string writes new_string as the whole file
        existed = kind == "file"
        before = _read_text(sb, rel, file_path) if existed else None
        sb.write_bytes(rel, _encode(new, "new_string", limit), file_path)
        return (ToolResult(True, f"{'overwrote' if existed else 'created'} {rel}"),
                [{"kind": "write", "rel": rel, "existed": existed, "before": before,
                  "after": _read_text(sb, rel, file_path), "written_chars": len(new), "tool": "edit"}])
    if kind is None:
        raise ToolError(f"no such file: {file_path}")
    before, nbytes = _read_text_strict(sb, rel, file_path)
    after, _ = _apply_edit(before, nbytes, old, new, replace_all, rel, limit)
    sb.write_bytes(rel, _encode(after, "the edited text", limit), file_path)
    return (ToolResult(True, f"edited {rel}"),
            [{"kind": "edit", "rel": rel, "tool": "edit", "before": before,
              "after": _read_text(sb, rel, file_path), "n_edits": 1}])


def tool_multiedit(sb: Sandbox, ctx: ToolContext, file_path: Any = None,
                   edits: Any = None) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    if not isinstance(edits, list) or not edits:
        raise ToolError("argument 'edits' must be a non-empty list of {old_string, new_string}")
    limit = sb.limits.max_write_bytes
    rel = sb.resolve(file_path, must_exist=True)
    if sb.kind(rel, file_path) == "dir":
        raise ToolError(f"{file_path}: is a directory")
    before, nbytes = _read_text_strict(sb, rel, file_path)
    text = before
    for i, e in enumerate(edits):
        if not isinstance(e, dict):
            raise ToolError(f"edits[{i}] must be an object")
        unknown = set(e) - {"old_string", "new_string", "replace_all"}
        if unknown:
            raise ToolError(f"edits[{i}]: unexpected field(s) {sorted(unknown)}")
        old = _str_arg(f"edits[{i}].old_string", e.get("old_string"), allow_empty=False)
        new = _str_arg(f"edits[{i}].new_string", e.get("new_string"))
        if len(new) > limit:
            raise LimitExceeded(f"edits[{i}].new_string exceeds the write limit of {limit}; no edit applied")
        try:
            text, nbytes = _apply_edit(text, nbytes, old, new, bool(e.get("replace_all", False)), rel, limit)
        except (ToolError, LimitExceeded) as exc:
            raise type(exc)(f"edits[{i}]: {exc}; no edit applied") from None
    sb.write_bytes(rel, _encode(text, "the edited text", limit), file_path)
    return (ToolResult(True, f"applied {len(edits)} edits to {rel}"),
            [{"kind": "edit", "rel": rel, "tool": "multiedit", "before": before,
              "after": _read_text(sb, rel, file_path), "n_edits": len(edits)}])


def expand_braces(pattern: str, limit: int) -> list[str]:
    """``{a,b}`` alternatives of a glob pattern (nested and repeated groups), innermost first; LimitExceeded as
    soon as more than ``limit`` patterns would be produced."""
    out: list[str] = []
    todo = [pattern]
    while todo:
        p = todo.pop()
        m = re.search(r"\{([^{}]*)\}", p)
        if not m:
            out.append(p)
        else:
            alts = m.group(1).split(",")
            todo.extend(p[:m.start()] + alt + p[m.end():] for alt in reversed(alts))
        if len(out) + len(todo) > limit:
            raise LimitExceeded(f"pattern {pattern!r} expands to more than {limit} alternatives")
    return out


def tool_grep(sb: Sandbox, ctx: ToolContext, pattern: Any = None, path: Any = ".",
              include: Any = None) -> tuple[ToolResult, list[dict]]:
    from filegram_ray.engine.bounded import BoundedFailed, Overrun, grep_files

    typed = _pattern_arg(sb, "pattern", pattern)
    pattern = match_key(typed)  # lines are searched in NFC too (lines.py)
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    includes = None if include is None else expand_braces(match_key(_pattern_arg(sb, "include", include)),
                                                          sb.limits.max_pattern_expansions)
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    rel = sb.resolve(path, must_exist=True)
    files = [rel] if sb.kind(rel, path) == "file" else _regular_files(sb, rel, "grep")
    texts: list[tuple[str, bytes]] = []
    too_big = unreadable = slow = left_out = 0
    files = [f for f in files
             if not includes or any(fnmatch.fnmatch(posixpath.basename(f), p) for p in includes)]
    for i, frel in enumerate(files):
        sb.check_time("grep")
        kind = _kind(frel)
        if _is_media(kind):  # the annotation read shows, or nothing (R2-eml-grep-line-numbers-differ-from-read)
            ann = _annotation(ctx, frel)
            if ann is not None:
                texts.append((frel, annotation_text(ann).encode("utf-8", "surrogatepass")))
            continue
        try:
            data = sb.read_bytes(frel)
        except LimitExceeded:
            too_big += 1
            continue
        if kind in DOCUMENT_KINDS:  # the extracted text read shows, numbered the same way
            key = _view_key(sb, frel, data)
            if key in _SLOW_VIEWS and _VIEWS.get(key) is None:
                slow += 1
                continue
            left = sb.time_left()
            budget = None if left is None else left - GREP_MATCH_RESERVE * sb.limits.max_call_s
            try:
                if budget is not None and budget <= 0:
                    raise Overrun()
                texts.append((frel, _extract_view(sb, frel, data, budget).encode("utf-8", "surrogatepass")))
            except Overrun:
                if budget is not None and budget > 0 and len(_SLOW_VIEWS) < VIEW_CACHE_ENTRIES:
                    _SLOW_VIEWS.add(key)  # it had time of its own and did not finish
                slow += 1
                left_out = len(files) - i - 1  # the rest of the call's time is for matching what was read
                break
            except BoundedFailed:
                unreadable += 1
            continue
        if b"\x00" not in data[:BINARY_SCAN]:
            texts.append((frel, data))
    try:
        total, found = grep_files(pattern, texts, timeout=sb.time_left(), max_hits=MAX_RESULTS,
                                  line_cap=READ_LINE_CAP) if texts else (0, [])
    except Overrun:
        raise LimitExceeded(f"grep stopped: matching ran past the call's time limit "
                            f"({sb.limits.max_call_s} s per call)") from None
    except BoundedFailed as exc:
        raise ToolError(exc.reason) from None
    if not found:
        output = "No matches found"
    else:
        output = f"Found {total} matching lines" + (f" (showing {MAX_RESULTS})" if total > MAX_RESULTS else "")
        output += "\n" + "\n".join(f"{r}:{no}: {line}" for r, no, line in found)
    if too_big:
        output += f"\n[{too_big} file(s) over {sb.limits.max_read_bytes} bytes not searched]"
    if unreadable:
        output += f"\n[{unreadable} document(s) not searched: their text cannot be extracted]"
    if slow:
        output += (f"\n[{slow} document(s) not searched: text extraction ran past the call's time limit "
                   f"({sb.limits.max_call_s} s)]")
    if left_out:
        output += f"\n[{left_out} more file(s) not searched: the call's time ran out; grep again to search them]"
    return ToolResult(True, output), [{"kind": "search", "search_type": "grep", "query": typed,
                                       "matched": min(total, MAX_RESULTS)}]


def _glob_matcher(pattern: str) -> tuple[Callable[[list[str]], bool], int | None]:
    """(match(path segments), most segments a match can have or None) for a pathlib-style glob: ``**`` is a
    whole segment matching zero or more folders; other segments match one name with fnmatch rules (``*`` also
    matches a leading dot; case-sensitive). A pattern ending in ``**`` matches folders only: no file."""
    segs = [s for s in pattern.split("/") if s not in ("", ".")]
    parts: list[Callable[[str], Any] | None] = []
    for s in segs:
        if s == "**":
            parts.append(None)
        elif "**" in s:
            raise ToolError(f"invalid glob pattern {pattern!r}: '**' can only be an entire path component")
        else:
            parts.append(re.compile(fnmatch.translate(s)).fullmatch)
    if not parts or parts[-1] is None:
        return (lambda _segs: False), 0
    size = len(parts)

    def closure(states: set[int]) -> set[int]:
        todo = list(states)
        while todo:
            i = todo.pop()
            if i < size and parts[i] is None and i + 1 not in states:
                states.add(i + 1)
                todo.append(i + 1)
        return states

    def match(path_segs: list[str]) -> bool:
        states = closure({0})
        for seg in path_segs:
            nxt: set[int] = set()
            for i in states:
                if i < size:
                    part = parts[i]
                    if part is None:
                        nxt.add(i)
                    elif part(seg):
                        nxt.add(i + 1)
            if not nxt:
                return False
            states = closure(nxt)
        return size in states

    return match, (None if None in parts else size)


def tool_glob(sb: Sandbox, ctx: ToolContext, pattern: Any = None, path: Any = ".") -> tuple[ToolResult, list[dict]]:
    pattern = _pattern_arg(sb, "pattern", pattern)
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(f"glob pattern must be relative and stay inside the sandbox: {pattern!r}")
    matchers = [_glob_matcher(p) for p in expand_braces(pattern, sb.limits.max_pattern_expansions)]
    rel = sb.resolve(path, must_exist=True)
    if sb.kind(rel, path) != "dir":
        raise ToolError(f"{path}: not a directory")
    deepest = None if any(d is None for _m, d in matchers) else max(d for _m, d in matchers)
    base = 0 if rel == "." else len(rel) + 1
    found = set()
    for d, dirs, others in sb.walk(rel, path, what="glob"):
        sub = d[base:] if d != rel else ""
        depth = 0 if sub == "" else sub.count("/") + 1
        if deepest is not None and depth + 1 >= deepest:
            dirs.clear()  # no match can be deeper than the pattern
        for e in others:
            if e.kind == "file":
                segs = (sub.split("/") if sub else []) + [e.name]
                if any(m(segs) for m, _d in matchers):
                    found.add(e.rel)
    found_sorted = sorted(found)
    shown = found_sorted[:MAX_RESULTS]
    output = "\n".join(shown) if shown else "No files found"
    if len(found_sorted) > MAX_RESULTS:
        output += f"\n[{len(found_sorted)} files matched; showing the first {MAX_RESULTS}]"
    return ToolResult(True, output), [{"kind": "search", "search_type": "glob", "query": pattern,
                                       "matched": len(shown)}]


def tool_list(sb: Sandbox, ctx: ToolContext, path: Any = ".") -> tuple[ToolResult, list[dict]]:
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    rel = sb.resolve(path, must_exist=True)
    if sb.kind(rel, path) != "dir":
        raise ToolError(f"{path}: not a directory")
    lines: list[str] = []
    listed = 0

    def walk(d: str, indent: int) -> None:
        nonlocal listed
        for e in sb.scandir(d):
            if listed >= LIST_CAP or e.name.startswith("."):
                continue
            listed += 1
            if e.kind == "dir":
                lines.append("  " * indent + e.name + "/")
                walk(e.rel, indent + 1)
            else:
                lines.append("  " * indent + e.name)

    walk(rel, 0)
    output = (sb.virtual(rel) + "/\n" + "\n".join("  " + x for x in lines)) if lines else f"{rel}: empty directory"
    return ToolResult(True, output), [{"kind": "browse", "rel": rel, "listed": listed, "tool": "list"}]


def tool_bash(sb: Sandbox, ctx: ToolContext, command: Any = None,
              description: Any = None) -> tuple[ToolResult, list[dict]]:
    """Restricted shell (:mod:`filegram_ray.engine.bash`). Observations of a failed command carry
    ``bash_failed``."""
    command = _str_arg("command", command, allow_empty=False)
    try:
        status, outputs, observations = run_bash(sb, command)
    except BashRefused as exc:
        raise ToolError(str(exc)) from None
    text = "\n".join(outputs)
    if status != 0:
        return ToolResult(False, text or f"exit status {status}", error=text or f"exit status {status}"), \
            [dict(o, bash_failed=True) for o in observations]
    return ToolResult(True, text), observations


TOOLS = {"read": tool_read, "write": tool_write, "edit": tool_edit, "multiedit": tool_multiedit,
         "grep": tool_grep, "glob": tool_glob, "list": tool_list, "bash": tool_bash}


def _fn(name: str, desc: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required, "additionalProperties": False}}}


_PATH = {"type": "string", "description": "path relative to the workspace root, or /sandbox/<id>/... absolute"}


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI-style function schemas of the 8 tools (reference §1.1 behavioural mode), in a fixed order."""
    return [
        _fn("read", "Read a file as numbered lines (documents as extracted text, media via annotations).",
            {"file_path": _PATH, "offset": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
             "limit": {"type": "integer", "minimum": 1, "description": "number of lines (default 2000)"}},
            ["file_path"]),
        _fn("write", "Create or overwrite a text file (parent folders are created).",
            {"file_path": _PATH, "content": {"type": "string"}}, ["file_path", "content"]),
        _fn("edit", "Replace old_string by new_string in a file (must be unique unless replace_all).",
            {"file_path": _PATH, "old_string": {"type": "string"}, "new_string": {"type": "string"},
             "replace_all": {"type": "boolean", "default": False}}, ["file_path", "old_string", "new_string"]),
        _fn("multiedit", "Apply several edits to one file atomically, in order.",
            {"file_path": _PATH, "edits": {"type": "array", "items": {"type": "object", "properties": {
                "old_string": {"type": "string"}, "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"}}, "required": ["old_string", "new_string"]}}},
            ["file_path", "edits"]),
        _fn("grep", "Search file contents with a regular expression; reports matching lines.",
            {"pattern": {"type": "string"}, "path": _PATH,
             "include": {"type": "string", "description": "file-name filter, e.g. *.md or *.{md,txt}"}},
            ["pattern"]),
        _fn("glob", "Find files whose path matches a glob pattern, e.g. **/*.pdf.",
            {"pattern": {"type": "string"}, "path": _PATH}, ["pattern"]),
        _fn("list", "List a directory tree.", {"path": _PATH}, []),
        _fn("bash", "File management only: mkdir, mv, cp, rm, ls, touch, chained with && or ;. "
                    "No pipes, redirection, substitution or globs.",
            {"command": {"type": "string"}, "description": {"type": "string"}}, ["command"]),
    ]


def list_tree(sb: Sandbox) -> list[tuple[str, bool]]:
    """Every entry under the sandbox root as (relative POSIX path, is_dir), sorted; links count as files,
    special files are left out. Walks through descriptors, so no path is too deep to list."""
    out = []
    for _d, dirs, others in sb.walk(".", what="snapshot"):
        out.extend((e.rel, True) for e in dirs)
        out.extend((e.rel, False) for e in others if e.kind in ("file", "link"))
    return sorted(out)
