"""The 8 behavioural-mode tools (reference §1.1): read, write, edit, multiedit, grep, glob, list, bash.

Each tool is a function ``tool(sandbox, ctx, **args) -> (ToolResult, observations)``. ``observations`` are facts
checked on disk (existence before/after, text before/after, entries listed) from which the collector derives the
events; a tool never reports what it merely intended. Every failure — bad argument, refused path, limit, missing
file — raises :class:`ToolError` (or :class:`~filegram_ray.engine.sandbox.SandboxError`), which the session turns
into ``ToolResult(ok=False, ...)``; a tool never crashes the session.

Constants (reference §1.1): read window default offset 1, limit 2000 lines; lines longer than 2,000 chars are
cut; the whole read output is capped at 30,000 chars. grep/glob report at most 100 matches (§3.3
``max_results``). Document kinds (pdf, docx, xlsx, pptx, eml, ics) are read through
``filegram_ray.workspace.extract.extract_text``; media kinds only through the session's annotations (a media file
without one gives a "skipped" notice and no event).

``bash`` is not a shell: the command is tokenised with :mod:`shlex` and only ``mkdir``, ``mv``, ``cp``, ``rm``,
``ls`` and ``touch``, chained with ``&&`` or ``;``, are executed — in Python, on sandbox-resolved paths. Pipes,
redirection, ``||``, background ``&``, ``$``/backtick substitution, globs, ``~`` and every other program are
refused before anything runs; all path arguments are resolved before the first sub-command executes.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filegram_ray.engine.sandbox import LimitExceeded, Sandbox, SandboxError

#: reference §1.1 read window and caps
READ_DEFAULT_OFFSET = 1
READ_DEFAULT_LIMIT = 2000
READ_LINE_CAP = 2000
READ_OUTPUT_CAP = 30_000
#: reference §3.3 grep/glob max_results
MAX_RESULTS = 100
#: our own bound on entries printed by ``list``/``ls``
LIST_CAP = 100
#: reference §2.2 NUL scan window used to call a file binary
BINARY_SCAN = 8192

DOCUMENT_KINDS = frozenset({"pdf", "docx", "xlsx", "pptx", "eml", "ics"})
BASH_PROGRAMS = ("mkdir", "mv", "cp", "rm", "ls", "touch")
_BASH_FLAGS = {"mkdir": set("pv"), "rm": set("rfRdv"), "cp": set("rRfpnav"), "mv": set("fnv"),
               "ls": set("alR1AhFt"), "touch": set("c")}


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


def _read_text(real: Path) -> str:
    data = real.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def _read_text_strict(real: Path, rel: str) -> str:
    data = real.read_bytes()
    if b"\x00" in data[:BINARY_SCAN]:
        raise ToolError(f"{rel}: binary file, cannot edit as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel}: not UTF-8 text, cannot edit") from None


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


def _annotation(ctx: ToolContext, rel: str) -> dict[str, Any] | None:
    ann = ctx.annotations.get(rel)
    if ann is None:  # upstream keys annotations by bare filename (§1.1)
        ann = ctx.annotations.get(posixpath.basename(rel))
    return ann


def _write_file(sb: Sandbox, real: Path, text: str) -> None:
    data = text.encode("utf-8")
    sb.check_write_size(len(data))
    old = real.stat().st_size if real.exists() else 0
    sb.check_tree_size(len(data) - old)
    real.parent.mkdir(parents=True, exist_ok=True)
    tmp = real.with_name(f".{real.name}.fgtmp")
    tmp.write_bytes(data)
    os.replace(tmp, real)


def _walk_files(sb: Sandbox, base_real: Path) -> list[tuple[Path, str]]:
    """Regular files under ``base_real`` (sorted, symlinks never followed out), as (real, rel)."""
    out = []
    for dirpath, dirs, files in os.walk(base_real):
        dirs.sort()
        for f in sorted(files):
            p = Path(dirpath) / f
            rel = os.path.relpath(p, sb.root).replace(os.sep, "/")
            try:
                real, rel = sb.resolve(rel)
            except SandboxError:
                continue
            if real.is_file():
                out.append((real, rel))
    return out


def _format_window(text: str, offset: int, limit: int) -> tuple[str, list[int], str]:
    """Line-numbered view of ``text``; returns (output, view_range, shown raw text)."""
    lines = text.splitlines()
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
    real, rel = sb.resolve(file_path, must_exist=True)
    if real.is_dir():
        raise ToolError(f"{file_path}: is a directory (use list or bash ls)")
    kind = _kind(rel)
    if _is_media(kind):
        ann = _annotation(ctx, rel)
        if ann is None:
            return ToolResult(True, f"[skipped: {rel} is a {kind} file with no annotation]"), []
        content = str(ann.get("raw_content") or ann.get("content") or "")
        modality = str(ann.get("modality", kind))
        text, _vr, shown = _format_window(content, 1, READ_DEFAULT_LIMIT)
        output = f"[{modality} annotation of {rel}]\n{text}"
        view_range = [1, len(content.splitlines())]  # §3.4: annotated media → [1, annotation lines]
        return (ToolResult(True, output, content=shown),
                [{"kind": "read", "rel": rel, "view_range": view_range, "output_len": len(output)}])
    if kind in DOCUMENT_KINDS:
        from filegram_ray.workspace.extract import extract_text  # lazy import (§ brief)
        try:
            text = extract_text(real)
        except ValueError as exc:
            raise ToolError(f"{rel}: cannot extract text: {exc}") from None
    else:
        text = _read_text(real)
    output, view_range, shown = _format_window(text, offset, limit)
    return (ToolResult(True, output, content=shown),
            [{"kind": "read", "rel": rel, "view_range": view_range, "output_len": len(output)}])


def tool_write(sb: Sandbox, ctx: ToolContext, file_path: Any = None,
               content: Any = None) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    content = _str_arg("content", content)
    real, rel = sb.resolve(file_path)
    if rel == "." or real.is_dir():
        raise ToolError(f"{file_path}: is a directory")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("content is not encodable as UTF-8") from None
    existed = real.exists()
    before = _read_text(real) if existed else None
    _write_file(sb, real, content)
    after = _read_text(real)
    verb = "overwrote" if existed else "created"
    return (ToolResult(True, f"{verb} {rel} ({len(content)} chars)"),
            [{"kind": "write", "rel": rel, "existed": existed, "before": before, "after": after,
              "written_chars": len(content), "tool": "write"}])


def _apply_edit(text: str, old: str, new: str, replace_all: bool, rel: str) -> str:
    if old == new:
        raise ToolError("old_string and new_string are identical")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_string not found in {rel}")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times in {rel}; add context or set replace_all")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def tool_edit(sb: Sandbox, ctx: ToolContext, file_path: Any = None, old_string: Any = None,
              new_string: Any = None, replace_all: Any = False) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    old = _str_arg("old_string", old_string)
    new = _str_arg("new_string", new_string)
    if not isinstance(replace_all, bool):
        raise ToolError("argument 'replace_all' must be a boolean")
    real, rel = sb.resolve(file_path)
    if rel == "." or real.is_dir():
        raise ToolError(f"{file_path}: is a directory")
    if old == "":  # §3.3: empty old_string writes new_string as the whole file
        existed = real.exists()
        before = _read_text(real) if existed else None
        _write_file(sb, real, new)
        return (ToolResult(True, f"{'overwrote' if existed else 'created'} {rel}"),
                [{"kind": "write", "rel": rel, "existed": existed, "before": before, "after": _read_text(real),
                  "written_chars": len(new), "tool": "edit"}])
    if not real.exists():
        raise ToolError(f"no such file: {file_path}")
    before = _read_text_strict(real, rel)
    after = _apply_edit(before, old, new, replace_all, rel)
    _write_file(sb, real, after)
    after_disk = _read_text(real)
    return (ToolResult(True, f"edited {rel}"),
            [{"kind": "edit", "rel": rel, "tool": "edit", "before": before, "after": after_disk, "n_edits": 1}])


def tool_multiedit(sb: Sandbox, ctx: ToolContext, file_path: Any = None,
                   edits: Any = None) -> tuple[ToolResult, list[dict]]:
    file_path = _str_arg("file_path", file_path, allow_empty=False)
    if not isinstance(edits, list) or not edits:
        raise ToolError("argument 'edits' must be a non-empty list of {old_string, new_string}")
    real, rel = sb.resolve(file_path, must_exist=True)
    if real.is_dir():
        raise ToolError(f"{file_path}: is a directory")
    before = _read_text_strict(real, rel)
    text = before
    for i, e in enumerate(edits):
        if not isinstance(e, dict):
            raise ToolError(f"edits[{i}] must be an object")
        unknown = set(e) - {"old_string", "new_string", "replace_all"}
        if unknown:
            raise ToolError(f"edits[{i}]: unexpected field(s) {sorted(unknown)}")
        old = _str_arg(f"edits[{i}].old_string", e.get("old_string"), allow_empty=False)
        new = _str_arg(f"edits[{i}].new_string", e.get("new_string"))
        try:
            text = _apply_edit(text, old, new, bool(e.get("replace_all", False)), rel)
        except ToolError as exc:
            raise ToolError(f"edits[{i}]: {exc}; no edit applied") from None
    _write_file(sb, real, text)
    return (ToolResult(True, f"applied {len(edits)} edits to {rel}"),
            [{"kind": "edit", "rel": rel, "tool": "multiedit", "before": before, "after": _read_text(real),
              "n_edits": len(edits)}])


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out.extend(_expand_braces(pattern[:m.start()] + alt + pattern[m.end():]))
    return out


def tool_grep(sb: Sandbox, ctx: ToolContext, pattern: Any = None, path: Any = ".",
              include: Any = None) -> tuple[ToolResult, list[dict]]:
    pattern = _str_arg("pattern", pattern, allow_empty=False)
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    includes = None if include is None else _expand_braces(_str_arg("include", include, allow_empty=False))
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    real, rel = sb.resolve(path, must_exist=True)
    files = [(real, rel)] if real.is_file() else _walk_files(sb, real)
    hits: list[str] = []
    total = 0
    for freal, frel in files:
        if includes and not any(fnmatch.fnmatch(posixpath.basename(frel), p) for p in includes):
            continue
        data = freal.read_bytes()
        if b"\x00" in data[:BINARY_SCAN]:
            continue
        for no, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                total += 1
                if len(hits) < MAX_RESULTS:
                    hits.append(f"{frel}:{no}: {line[:READ_LINE_CAP]}")
    matched = min(total, MAX_RESULTS)
    if not hits:
        output = "No matches found"
    else:
        output = f"Found {total} matching lines" + (f" (showing {MAX_RESULTS})" if total > MAX_RESULTS else "")
        output += "\n" + "\n".join(hits)
    return ToolResult(True, output), [{"kind": "search", "search_type": "grep", "query": pattern,
                                       "matched": matched}]


def tool_glob(sb: Sandbox, ctx: ToolContext, pattern: Any = None, path: Any = ".") -> tuple[ToolResult, list[dict]]:
    pattern = _str_arg("pattern", pattern, allow_empty=False)
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(f"glob pattern must be relative and stay inside the sandbox: {pattern!r}")
    real, _rel = sb.resolve(path, must_exist=True)
    if not real.is_dir():
        raise ToolError(f"{path}: not a directory")
    found = []
    for pat in _expand_braces(pattern):
        for p in real.glob(pat):
            prel = os.path.relpath(p, sb.root).replace(os.sep, "/")
            try:
                preal, prel = sb.resolve(prel)
            except SandboxError:
                continue
            if preal.is_file():
                found.append(prel)
    found = sorted(set(found))
    shown = found[:MAX_RESULTS]
    output = "\n".join(shown) if shown else "No files found"
    if len(found) > MAX_RESULTS:
        output += f"\n[{len(found)} files matched; showing the first {MAX_RESULTS}]"
    return ToolResult(True, output), [{"kind": "search", "search_type": "glob", "query": pattern,
                                       "matched": len(shown)}]


def tool_list(sb: Sandbox, ctx: ToolContext, path: Any = ".") -> tuple[ToolResult, list[dict]]:
    path = "." if path is None else _str_arg("path", path, allow_empty=False)
    real, rel = sb.resolve(path, must_exist=True)
    if not real.is_dir():
        raise ToolError(f"{path}: not a directory")
    lines: list[str] = []
    listed = 0

    def walk(d: Path, indent: int) -> None:
        nonlocal listed
        for entry in sorted(os.listdir(d)):
            if listed >= LIST_CAP or entry.startswith("."):
                continue
            p = d / entry
            listed += 1
            if p.is_dir() and not p.is_symlink():
                lines.append("  " * indent + entry + "/")
                walk(p, indent + 1)
            else:
                lines.append("  " * indent + entry)

    walk(real, 0)
    output = (sb.virtual(rel) + "/\n" + "\n".join("  " + x for x in lines)) if lines else f"{rel}: empty directory"
    return ToolResult(True, output), [{"kind": "browse", "rel": rel, "listed": listed, "tool": "list"}]


# --- restricted bash --------------------------------------------------------------------------------------------

_FORBIDDEN_CHARS = {"$": "variable/command substitution", "`": "command substitution", "*": "glob",
                    "?": "glob", "[": "glob", "]": "glob", "{": "brace expansion", "}": "brace expansion",
                    "~": "home expansion", "\n": "newline", "\r": "newline", "\\": "escape",
                    "!": "history expansion", "#": "comment"}


def parse_bash(command: str) -> list[tuple[str, list[str]]]:
    """Split ``command`` into [(connector, argv)], connector ∈ {"", "&&", ";"}; raise ToolError if anything
    outside the allowed language appears (see module docstring)."""
    if not command.strip():
        raise ToolError("empty command")
    for ch, what in _FORBIDDEN_CHARS.items():
        if ch in command:
            raise ToolError(f"refused: {what} ({ch!r}) is not supported; only {', '.join(BASH_PROGRAMS)} "
                            f"chained with && or ; are allowed")
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError as exc:
        raise ToolError(f"cannot parse command: {exc}") from None
    cmds: list[tuple[str, list[str]]] = []
    cur: list[str] = []
    conn = ""
    for tok in tokens:
        if tok in ("&&", ";"):
            if not cur:
                raise ToolError(f"refused: empty command before {tok!r}")
            cmds.append((conn, cur))
            cur, conn = [], tok
        elif tok and all(c in "();<>|&" for c in tok):
            raise ToolError(f"refused: shell operator {tok!r} (pipes, redirection, ||, & and subshells are "
                            f"not supported)")
        else:
            cur.append(tok)
    if cur:
        cmds.append((conn, cur))
    elif conn == "&&":
        raise ToolError("refused: command ends with '&&'")
    for _conn, argv in cmds:
        prog = argv[0]
        if prog not in BASH_PROGRAMS:
            raise ToolError(f"refused: {prog!r} is not an allowed program (allowed: {', '.join(BASH_PROGRAMS)})")
        allowed = _BASH_FLAGS[prog]
        for a in argv[1:]:
            if a.startswith("-") and a != "-" and (a.startswith("--") or not set(a[1:]) <= allowed):
                raise ToolError(f"refused: unsupported option {a!r} for {prog}")
    return cmds


def _split_argv(argv: list[str]) -> tuple[set[str], list[str]]:
    flags: set[str] = set()
    paths: list[str] = []
    for a in argv[1:]:
        if a.startswith("-") and a != "-":
            flags |= set(a[1:])
        else:
            paths.append(a)
    return flags, paths


def _dirs_in(d: Path) -> int:
    return sum(1 for e in os.scandir(d) if e.is_dir(follow_symlinks=False))


def _count_listing(d: Path, flags: set[str]) -> tuple[int, list[str]]:
    show_hidden = bool(flags & {"a", "A"})
    names = sorted(n for n in os.listdir(d) if show_hidden or not n.startswith("."))
    count, lines = len(names), list(names)
    if "R" in flags:
        for n in names:
            p = d / n
            if p.is_dir() and not p.is_symlink():
                c, sub = _count_listing(p, flags)
                count += c
                lines.extend(f"{n}/{s}" for s in sub)
    return count, lines


def _run_one(sb: Sandbox, argv: list[str], resolved: list[tuple[Path, str, str]],
             flags: set[str]) -> tuple[int, list[str], list[dict]]:
    """Execute one sub-command. Returns (status, output lines, observations)."""
    prog = argv[0]
    out: list[str] = []
    obs: list[dict] = []
    status = 0

    def fail(msg: str) -> None:
        nonlocal status
        out.append(f"{prog}: {msg}")
        status = 1

    if prog == "ls":
        targets = resolved or [(sb.root, ".", ".")]
        for real, rel, arg in targets:
            if not os.path.lexists(real):
                fail(f"cannot access '{arg}': No such file or directory")
                continue
            if real.is_dir():
                n, names = _count_listing(real, flags)
                if len(targets) > 1:
                    out.append(f"{arg}:")
                out.extend(names[:LIST_CAP])
                obs.append({"kind": "browse", "rel": rel, "listed": n, "tool": "bash"})
            else:
                out.append(arg)
                obs.append({"kind": "browse", "rel": rel, "listed": 1, "tool": "bash"})
        return status, out, obs

    if not resolved:
        return 1, [f"{prog}: missing operand"], obs

    if prog == "mkdir":
        for real, rel, arg in resolved:
            if rel == "." or os.path.lexists(real):
                if "p" not in flags or not real.is_dir():
                    fail(f"cannot create directory '{arg}': File exists")
                continue
            if not real.parent.is_dir() and "p" not in flags:
                fail(f"cannot create directory '{arg}': No such file or directory")
                continue
            try:
                real.mkdir(parents="p" in flags)
            except OSError as exc:
                fail(f"cannot create directory '{arg}': {exc.strerror}")
                continue
            if real.is_dir():  # verified on disk
                obs.append({"kind": "mkdir", "rel": rel, "dirs_in_parent": _dirs_in(real.parent)})
        return status, out, obs

    if prog == "touch":
        for real, rel, arg in resolved:
            if real.is_dir():
                continue
            if real.exists():
                os.utime(real)
                continue
            if "c" in flags:
                continue
            if not real.parent.is_dir():
                fail(f"cannot touch '{arg}': No such file or directory")
                continue
            real.touch()
            if real.is_file():
                obs.append({"kind": "write", "rel": rel, "existed": False, "before": None, "after": "",
                            "written_chars": 0, "tool": "touch"})
        return status, out, obs

    if prog == "rm":
        for real, rel, arg in resolved:
            if rel == ".":
                fail("refusing to remove the sandbox root")
                continue
            if not os.path.lexists(real):
                if "f" not in flags:
                    fail(f"cannot remove '{arg}': No such file or directory")
                continue
            if real.is_dir() and not real.is_symlink():
                if not flags & {"r", "R"}:
                    if "d" in flags and not any(real.iterdir()):
                        real.rmdir()
                    else:
                        fail(f"cannot remove '{arg}': Is a directory")
                        continue
                else:
                    shutil.rmtree(real)
            else:
                real.unlink()
            if not os.path.lexists(real):
                obs.append({"kind": "delete", "rel": rel})
        return status, out, obs

    # mv / cp: SOURCE... DEST
    if len(resolved) < 2:
        return 1, [f"{prog}: missing destination operand after '{resolved[0][2]}'"], obs
    *sources, (dreal, drel, darg) = resolved
    dest_is_dir = dreal.is_dir()
    if len(sources) > 1 and not dest_is_dir:
        return 1, [f"{prog}: target '{darg}' is not a directory"], obs
    for sreal, srel, sarg in sources:
        if srel == ".":
            fail(f"cannot {prog} the sandbox root")
            continue
        if not os.path.lexists(sreal):
            fail(f"cannot stat '{sarg}': No such file or directory")
            continue
        if dest_is_dir:
            treal, trel = sb.resolve(sreal.name if drel == "." else f"{drel}/{sreal.name}")
        else:
            treal, trel = dreal, drel
        if treal == sreal or trel == srel:
            fail(f"'{sarg}' and '{darg}' are the same file")
            continue
        if trel.startswith(srel + "/"):
            fail(f"cannot {prog} '{sarg}' to a subdirectory of itself")
            continue
        if not treal.parent.is_dir():
            fail(f"cannot {prog} to '{darg}': No such file or directory")
            continue
        if treal.is_dir() and not sreal.is_dir():
            fail(f"cannot overwrite directory '{darg}' with non-directory")
            continue
        existed = os.path.lexists(treal)
        try:
            if prog == "mv":
                if treal.is_dir() and sreal.is_dir():
                    fail(f"cannot move '{sarg}' onto existing directory '{darg}'")
                    continue
                os.replace(sreal, treal)
            else:
                if sreal.is_dir():
                    if not flags & {"r", "R", "a"}:
                        fail(f"-r not specified; omitting directory '{sarg}'")
                        continue
                    size = sum(p.stat().st_size for p in sreal.rglob("*") if p.is_file())
                    sb.check_tree_size(size)
                    shutil.copytree(sreal, treal, symlinks=True, dirs_exist_ok=True)
                else:
                    size = sreal.stat().st_size
                    sb.check_write_size(size)
                    sb.check_tree_size(size)
                    shutil.copyfile(sreal, treal)
        except LimitExceeded as exc:
            fail(str(exc))
            continue
        except OSError as exc:
            fail(f"cannot {prog} '{sarg}': {exc.strerror}")
            continue
        dst_arg = posixpath.normpath(drel) if drel != "." else "."
        if prog == "mv" and os.path.lexists(treal) and not os.path.lexists(sreal):
            obs.append({"kind": "move", "src": srel, "dst": trel, "dst_arg": dst_arg})
        elif prog == "cp" and os.path.lexists(treal):
            obs.append({"kind": "copy", "src": srel, "dst": trel, "dst_arg": dst_arg, "existed": existed})
    return status, out, obs


def tool_bash(sb: Sandbox, ctx: ToolContext, command: Any = None,
              description: Any = None) -> tuple[ToolResult, list[dict]]:
    """Restricted shell. Observations carry ``exit_status`` of the whole command on the last element."""
    command = _str_arg("command", command, allow_empty=False)
    cmds = parse_bash(command)
    # resolve every path before anything runs: one refused path refuses the whole command
    plans = []
    for conn, argv in cmds:
        flags, paths = _split_argv(argv)
        resolved = []
        for p in paths:
            real, rel = sb.resolve(p)
            resolved.append((real, rel, p))
        plans.append((conn, argv, flags, resolved))
    outputs: list[str] = []
    observations: list[dict] = []
    status = 0
    for conn, argv, flags, resolved in plans:
        if conn == "&&" and status != 0:
            continue
        status, out, obs = _run_one(sb, argv, resolved, flags)
        outputs.extend(out)
        observations.extend(obs)
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
    """Every entry under the sandbox root as (relative POSIX path, is_dir), sorted; symlinks count as files."""
    out = []
    for dirpath, dirs, files in os.walk(sb.root):
        dirs.sort()
        for d in dirs:
            p = Path(dirpath) / d
            out.append((os.path.relpath(p, sb.root).replace(os.sep, "/"), not p.is_symlink()))
        for f in files:
            p = Path(dirpath) / f
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                out.append((os.path.relpath(p, sb.root).replace(os.sep, "/"), False))
    return sorted(out)
