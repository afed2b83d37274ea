"""Are the actions motivated and the outputs drawn from the inputs? (issue #28 item 4, "motivation")

Read from a trajectory's raw event log (``events_raw.json``: the tool calls with their arguments and the file
events, in order; paths made relative to the session's ``target_directory``), its final outputs
(``outputs/<path>``) and the task's input bundle (``workspaces/<task_id>/files/``, text as the engine's ``read``
shows it: :func:`filegram_ray.workspace.extract.extract_text`):

* **search hits** — share of ``file_search`` events whose search matched at least one file (``files_matched`` ≥ 1);
  beside it the share after which a matched file was opened (reported only): a ``file_read``, before the next
  search, of a file the search matches — for a glob, a path the pattern matches; for a grep, an input file whose
  text holds the query (case-insensitive). The event's own ``files_opened_after`` is always empty (reference §4,
  event 4), so the raw log's order is read instead.
* **inspected before change** — share of ``file_delete`` / ``file_move`` / ``file_rename`` events whose file was
  inspected earlier in the session: read (``file_read`` of that path), named by an inspecting shell command
  (:data:`INSPECT_COMMANDS`; ``ls`` only with a ``-l`` flag), or written by the agent itself earlier (it knows what
  it wrote). Paths are followed through moves and renames. A listing of the whole folder does not count: the
  question is whether *that file* was looked at.
* **sourced sentences** — share of the sentences of the agent's created text outputs (``.md``/``.txt`` files first
  written by the agent, in their final state) that carry a fact found in the input files read in the same session
  (the read lines only, ``view_range``): a number of ≥ 2 digits, a name (≥ 2 capitalised words in a row, or an
  all-caps token of ≥ 3 letters), or a span of ≥ :data:`SPAN_WORDS` consecutive words (CJK: ≥
  :data:`SPAN_CJK_CHARS` consecutive characters); file names in a sentence are not facts. Sentences = lines split
  at ``.!?。！？``; headings, table separators, code fences and sentences under 3 words (6 CJK characters) are not
  sentences. Edited input files are not counted (their sentences were the input's), nor sessions that read no
  input file (an empty workspace: counted as ``sessions_without_input_read``).

Thresholds (2 digits, 5 words, 10 CJK characters ≈ 5 words, 3 words for a sentence) are ours; the bounds are issue
#28's (:data:`filegram_ray.validity.separability.BOUNDS`).
"""

from __future__ import annotations

import fnmatch
import logging
import re
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filegram_ray.limits import load_json

log = logging.getLogger(__name__)

#: Shell commands that look at a named file (ours); ``ls`` counts only with a long-format flag.
INSPECT_COMMANDS = frozenset({"stat", "file", "head", "tail", "cat", "wc", "less", "more", "du", "md5sum",
                              "sha256sum", "diff", "cmp"})
#: Words in a row that make a copied span a fact (issue #28: "a ≥ 5-word span").
SPAN_WORDS = 5
#: CJK characters in a row that make a span (ours: about 5 words at ~2 characters a word).
SPAN_CJK_CHARS = 10
TEXT_OUTPUT_KINDS = (".md", ".txt", ".markdown")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9\u00c0-\u024f]+(?:['’.][A-Za-z0-9]+)*")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.:/-]*\d(?:%)?|(?<![\w.])\d{2,}")
_NAME = re.compile(r"\b(?:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)\b|\b[A-Z]{3,}\b")
_FILE_NAME = re.compile(r"\S*[_/]\S*|\S+\.[A-Za-z][A-Za-z0-9]{1,4}\b\S*")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def _rel(path: str, root: str) -> str:
    p = str(path or "")
    if root and p.startswith(root.rstrip("/") + "/"):
        p = p[len(root.rstrip("/")) + 1:]
    return p[2:] if p.startswith("./") else p


# ------------------------------------------------------------------------------------------------ actions
def action_checks(raw: list[dict[str, Any]], lines_of: Callable[[str], list[str] | None] | None = None
                  ) -> dict[str, Any]:
    """Search and inspection counts of one session's raw events (module docstring). ``lines_of(path)``: an input
    file's text lines (None when it is not an input), for "a matched file was opened".

    Returns ``{"searches", "search_hits", "search_opened", "changes", "inspected", "uninspected": [
    {"event", "path"}]}``."""
    root = next((str(e.get("target_directory") or "") for e in raw if e.get("event_type") == "session_start"), "")
    inspected: set[str] = set()
    out: Counter = Counter()
    missed: list[dict[str, str]] = []
    query: tuple[str, str] | None = None  # (type, query) of the last search, until a matched file is read
    for e in raw:
        t = e.get("event_type")
        if t == "file_search":
            out["searches"] += 1
            out["search_hits"] += int((e.get("files_matched") or 0) >= 1)
            q = str(e.get("query") or "")
            query = (str(e.get("search_type") or "grep"), q) if q else None
        if t == "file_read" and query is not None:
            path = _rel(e.get("file_path") or "", root)
            if query[0] == "glob":
                found = fnmatch.fnmatch(path, query[1]) or fnmatch.fnmatch(path, query[1].removeprefix("**/"))
            else:
                lines = lines_of(path) if lines_of is not None else None
                found = lines is not None and query[1].lower() in "\n".join(lines).lower()
            if found:
                out["search_opened"] += 1
                query = None
        if t in ("file_read", "file_write", "file_edit", "file_copy"):
            for k in ("file_path", "new_path", "target_path", "dest_path"):
                if e.get(k):
                    inspected.add(_rel(e[k], root))
        elif t == "tool_call" and e.get("tool_name") == "bash":
            inspected |= _inspected_by_command(str((e.get("tool_parameters") or {}).get("command") or ""))
        elif t in ("file_delete", "file_move", "file_rename"):
            path = _rel(e.get("file_path") or e.get("old_path") or "", root)
            out["changes"] += 1
            ok = path in inspected
            out["inspected"] += int(ok)
            if not ok:
                missed.append({"event": t, "path": path})
            if t != "file_delete" and ok and e.get("new_path"):
                inspected.add(_rel(e["new_path"], root))
    return {**{k: out[k] for k in ("searches", "search_hits", "search_opened", "changes", "inspected")},
            "uninspected": missed}


def _inspected_by_command(cmd: str) -> set[str]:
    """Paths a shell command line looks at: arguments of :data:`INSPECT_COMMANDS` and of ``ls -l…``."""
    got: set[str] = set()
    for part in re.split(r"&&|\|\||;|\|", cmd):
        try:
            toks = shlex.split(part)
        except ValueError:
            toks = part.split()
        if not toks:
            continue
        head, args = toks[0], toks[1:]
        flags = [a for a in args if a.startswith("-")]
        if head in INSPECT_COMMANDS or (head == "ls" and any("l" in f for f in flags if not f.startswith("--"))):
            got |= {a[2:] if a.startswith("./") else a for a in args if not a.startswith("-")}
    return got


# ------------------------------------------------------------------------------------------------ sentences
def sentences(text: str) -> list[str]:
    """Sentences of a markdown/plain text (module docstring)."""
    out: list[str] = []
    fence = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            fence = not fence
            continue
        if fence or not s or s.startswith("#") or re.fullmatch(r"[|:\-\s]+", s):
            continue
        s = re.sub(r"^(?:[-*+>]\s+|\d+[.)]\s+)+", "", s)
        if s.startswith("|"):
            s = " ; ".join(c.strip() for c in s.strip("|").split("|") if c.strip())
            parts = [s]
        else:
            parts = _SENT_SPLIT.split(s)
        for p in parts:
            p = p.strip()
            if len(_WORD.findall(p)) >= 3 or len(_CJK.findall(p)) >= 6:
                out.append(p)
    return out


def _norm_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


class SourceText:
    """The text a session read, indexed for fact look-ups (numbers, names, word spans, CJK spans)."""

    def __init__(self, texts: list[str]):
        self.raw = "\n".join(texts)
        self.numbers = {n.rstrip("%").replace(",", "") for n in _NUMBER.findall(self.raw)}
        self.low = self.raw.lower()
        words = _norm_words(self.raw)
        self.spans = {tuple(words[i:i + SPAN_WORDS]) for i in range(len(words) - SPAN_WORDS + 1)}
        cjk = re.sub(r"\s+", "", self.raw)
        self.cjk = cjk

    def fact(self, sentence: str) -> str | None:
        """The kind of the first fact of ``sentence`` found in this text (``number`` | ``name`` | ``span``), or
        None. File names in the sentence (a token with ``_`` or ``/``, or ending in a letter-led extension) are
        dropped first: a list of the files read is not a fact taken from them."""
        sentence = _FILE_NAME.sub(" ", sentence)
        for n in _NUMBER.findall(sentence):
            if n.rstrip("%").replace(",", "") in self.numbers:
                return "number"
        for m in _NAME.findall(sentence):
            if m.lower() in self.low:
                return "name"
        w = _norm_words(sentence)
        if any(tuple(w[i:i + SPAN_WORDS]) in self.spans for i in range(len(w) - SPAN_WORDS + 1)):
            return "span"
        flat = re.sub(r"\s+", "", sentence)
        for m in re.finditer(r"[\u3400-\u9fff\uf900-\ufaff]{%d,}" % SPAN_CJK_CHARS, flat):
            run = m.group(0)
            if any(run[i:i + SPAN_CJK_CHARS] in self.cjk for i in range(len(run) - SPAN_CJK_CHARS + 1)):
                return "span"
        return None


class _InputCache:
    def __init__(self, workspaces: Path):
        self.root = workspaces
        self.cache: dict[tuple[str, str], list[str] | None] = {}

    def lines(self, task_id: str, path: str) -> list[str] | None:
        key = (task_id, path)
        if key not in self.cache:
            from filegram_ray.workspace.extract import ExtractionError, extract_text

            f = self.root / task_id / "files" / path
            try:
                self.cache[key] = extract_text(f).splitlines() if f.is_file() else None
            except (ExtractionError, OSError, ValueError):
                self.cache[key] = None
        return self.cache[key]


def session_sources(raw: list[dict[str, Any]], task_id: str, inputs: _InputCache) -> tuple[SourceText, list[str]]:
    """(what the session read of its input files, the final relative paths of the text files it created)."""
    root = next((str(e.get("target_directory") or "") for e in raw if e.get("event_type") == "session_start"), "")
    origin: dict[str, str] = {}  # current path -> original input path
    created: dict[str, str] = {}  # created path -> current path
    texts: list[str] = []
    for e in raw:
        t = e.get("event_type")
        if t == "file_read":
            p = _rel(e.get("file_path") or "", root)
            if p in {v for v in created.values()}:
                continue
            lines = inputs.lines(task_id, origin.get(p, p))
            if lines is None:
                continue
            a, b = (list(e.get("view_range") or [1, len(lines)]) + [len(lines)])[:2]
            texts.append("\n".join(lines[max(int(a or 1), 1) - 1:int(b or len(lines))]))
        elif t == "file_write" and e.get("operation") == "create":
            p = _rel(e.get("file_path") or "", root)
            if p.lower().endswith(TEXT_OUTPUT_KINDS):
                created[p] = p
        elif t in ("file_move", "file_rename"):
            old, new = _rel(e.get("old_path") or "", root), _rel(e.get("new_path") or "", root)
            origin[new] = origin.pop(old, old)
            for k, v in list(created.items()):
                if v == old:
                    created[k] = new
        elif t == "file_delete":
            p = _rel(e.get("file_path") or "", root)
            for k, v in list(created.items()):
                if v == p:
                    del created[k]
    return SourceText(texts), sorted(set(created.values()))


# ------------------------------------------------------------------------------------------------ run
def motivation(run_dir: str | Path, trajectories: list[tuple[str, str]], examples: int = 3) -> dict[str, Any]:
    """The three motivation shares over ``trajectories`` (``[(profile_id, task_id)]``) of a local run directory.

    Returns ``{"search_hits", "search_opened", "inspected_before_change", "sourced_sentences" (shares 0..1, NaN
    when nothing was counted), "counts": {...}, "fact_kinds": {number, name, span}, "examples": {"uninspected",
    "unsourced"}, "skipped": [{"trajectory_id", "error"}]}``. A trajectory whose raw log is unreadable is left out
    and named in ``skipped``."""
    run = Path(run_dir)
    inputs = _InputCache(run / "workspaces")
    tot: Counter = Counter()
    kinds: Counter = Counter()
    ex_uninspected: list[str] = []
    ex_unsourced: list[str] = []
    skipped: list[dict[str, str]] = []
    for pid, tid in trajectories:
        base = run / "trajectories" / pid / tid
        try:
            raw = load_json((base / "events_raw.json").read_bytes(), str(base / "events_raw.json"))
            if not isinstance(raw, list):
                raise ValueError(f"{base / 'events_raw.json'}: expected a JSON list of events")
        except (OSError, ValueError) as exc:
            skipped.append({"trajectory_id": f"{pid}/{tid}", "error": str(exc)})
            continue
        raw = [e for e in raw if isinstance(e, dict)]
        try:
            a = action_checks(raw, lambda path, tid=tid: inputs.lines(tid, path))
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type: this trajectory only
            skipped.append({"trajectory_id": f"{pid}/{tid}", "error": f"{base / 'events_raw.json'}: malformed "
                                                                      f"event field ({exc})"})
            continue
        for k in ("searches", "search_hits", "search_opened", "changes", "inspected"):
            tot[k] += a[k]
        for m in a["uninspected"][:1]:
            if len(ex_uninspected) < examples:
                ex_uninspected.append(f"{pid}/{tid}: {m['event']} {m['path']}")
        try:
            src, outs = session_sources(raw, tid, inputs)
        except (TypeError, ValueError, AttributeError) as exc:
            skipped.append({"trajectory_id": f"{pid}/{tid}", "error": f"{base / 'events_raw.json'}: malformed "
                                                                      f"event field ({exc})"})
            continue
        if not src.raw.strip():  # nothing read from an input (an empty workspace): nothing to take facts from
            tot["sessions_without_input_read"] += 1
            continue
        for rel in outs:
            f = base / "outputs" / rel
            if not f.is_file():
                continue
            for s in sentences(f.read_text(encoding="utf-8", errors="replace")):
                tot["sentences"] += 1
                k = src.fact(s)
                if k:
                    tot["sourced"] += 1
                    kinds[k] += 1
                elif len(ex_unsourced) < examples and tot["sentences"] % 37 == 1:
                    ex_unsourced.append(f"{pid}/{tid} {rel}: {s[:120]}")

    def share(a: str, b: str) -> float:
        return tot[a] / tot[b] if tot[b] else float("nan")

    return {"search_hits": share("search_hits", "searches"), "search_opened": share("search_opened", "searches"),
            "inspected_before_change": share("inspected", "changes"),
            "sourced_sentences": share("sourced", "sentences"), "counts": dict(tot), "fact_kinds": dict(kinds),
            "examples": {"uninspected": ex_uninspected, "unsourced": ex_unsourced}, "skipped": skipped}
