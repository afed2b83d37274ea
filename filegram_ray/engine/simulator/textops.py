"""Line-level text helpers of the persona simulator: the repairs and cuts an edit makes (:func:`revise_line`,
:func:`condense_line`), the whole-file rewrites built from them (:func:`repaired_text`, :func:`condensed_text`),
and the parser of the ``list`` tool's output (:func:`parse_listing`). Pure functions, no randomness. Split out of
``agent.py``; ``agent.py`` re-exports them."""

from __future__ import annotations

import re

SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|(?<=[。！？])")


def revise_line(line: str, lang: str, fixes: list[tuple[str, str, str]] | None = None) -> str | None:
    """A real repair of one line, or None when the line needs none (never a marker, never a cut).

    In order: a figure that another source gives differently (``fixes``: ``(label, wrong, right)``, label in the
    line) is corrected; a pseudo-heading (``**x**``) becomes a heading; a ``*`` bullet becomes ``-``; a long
    sentence (> 90 chars) joined by a comma or semicolon is split there into two sentences (all words kept);
    doubled spaces are collapsed.
    """
    s = line.rstrip()
    for label, wrong, right in fixes or []:
        if label.lower() in s.lower() and re.search(rf"(?<![\d.]){re.escape(wrong)}(?![\d])", s):
            return re.sub(rf"(?<![\d.]){re.escape(wrong)}(?![\d])", right, s, count=1)
    m = re.match(r"^\s*\*\*(.+?)\*\*\s*$", s)
    if m:
        return f"## {m.group(1)}"
    if re.match(r"^\s*\*\s+", s):
        return re.sub(r"^(\s*)\*\s+", r"\1- ", s)
    if len(s) > 90:
        if not re.search(r"[\u4e00-\u9fff]", s):
            m = re.search(r"^(.{30,}?[a-z0-9)]), (?:and |but |which )?([a-z][^,]{20,})$", s)
            if m:
                return f"{m.group(1)}. {m.group(2)[0].upper()}{m.group(2)[1:]}"
            if "; " in s[20:-20]:
                i = s.index("; ", 20)
                return f"{s[:i]}. {s[i + 2].upper()}{s[i + 3:]}"
        elif "，" in s[15:-10]:
            i = s.index("，", 15)
            return s[:i] + "。" + s[i + 1:]
    if "  " in s.strip():
        return re.sub(r"(?<=\S) {2,}", " ", s)
    return None


def condense_line(line: str, lang: str, fixes: list[tuple[str, str, str]] | None = None) -> str | None:
    """A line cut to its first sentence (whole sentences only), or None when it has just one."""
    s = line.rstrip()
    lead = re.match(r"^(\s*(?:[-*+]\s+|\d+[.)]\s+)?)", s).group(1)
    body = s[len(lead):]
    parts = SENTENCE_BREAK.split(body)  # by the line's own script, whatever the persona's language
    parts = [p for p in parts if p.strip()]
    if len(parts) < 2:
        return None
    return lead + parts[0].strip()


def repaired_text(text: str, fixes: list[tuple[str, str, str]], lang: str) -> str:
    """``text`` with every repairable line repaired (:func:`revise_line`): the D-R whole-file rewrite."""
    out = []
    for ln in text.split("\n"):
        new = revise_line(ln, lang, fixes) if ln.strip() and not ln.startswith("|") else None
        out.append(new if new is not None else ln)
    return "\n".join(out).rstrip("\n") + "\n"


def condensed_text(text: str, lang: str) -> str:
    """``text`` cut for a shorter brief (the D-R whole-file rewrite of a shortening task): every paragraph to
    its first sentence, at most three bullets per section; headings and tables kept."""
    out: list[str] = []
    bullets = 0
    for ln in text.split("\n"):
        if ln.startswith("#"):
            bullets = 0
            out.append(ln)
        elif re.match(r"^\s*[-*+]\s", ln):
            bullets += 1
            if bullets <= 3:
                out.append(ln)
        elif ln.strip() and not ln.startswith("|"):
            out.append(condense_line(ln, lang) or ln)
        else:
            out.append(ln)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip("\n") + "\n"


def parse_listing(text: str) -> tuple[list[str], list[str]]:
    """Files and folders from a ``list`` tool output.

    Accepts one relative path per line (folders end in ``/``) or an indented tree (two spaces or tree glyphs per
    level, folders ending in ``/``); the first line may be the root itself. Returns ``(files, dirs)``.
    """
    files: list[str] = []
    dirs: list[str] = []
    stack: list[tuple[int, str]] = []
    if text.rstrip().endswith("empty directory"):
        return [], []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and (lines[0].rstrip().endswith("/") and lines[0].startswith("/") or lines[0].strip() in ("./", ".")):
        lines = lines[1:]
    for raw in lines:
        clean = re.sub(r"[│├└─┬┼]+", lambda m: " " * len(m.group(0)), raw.rstrip())
        stripped = clean.lstrip(" -*")
        if not stripped or stripped.startswith(("(", "[", "…", "...")):
            continue
        indent = len(clean) - len(clean.lstrip(" "))
        is_dir = stripped.endswith("/")
        name = stripped.rstrip("/")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if "/" in name:  # already a relative path
            path = name.removeprefix("./")
        else:
            path = f"{stack[-1][1]}/{name}" if stack else name
        if is_dir:
            dirs.append(path)
            stack.append((indent, path))
        else:
            files.append(path)
    # Normalise stacked paths (stack holds full paths after the first level).
    fixed = []
    for f in files:
        fixed.append(re.sub(r"/+", "/", f))
    for d in list(dirs):
        parts = d.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in dirs:
                dirs.append(parent)
    for f in fixed:
        parts = f.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in dirs:
                dirs.append(parent)
    return fixed, dirs
