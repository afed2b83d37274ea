"""Are the actions motivated and the outputs drawn from the inputs? (the motivation checks)

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
  looked at first. A delete needs a look at the *content*: a ``file_read`` of that path, a content command naming it
  (:data:`INSPECT_COMMANDS`: ``cat``, ``head``, ``diff``, ``md5sum``, …), or the agent wrote it itself. A move or
  rename may also rest on a *listing that shows what is decided on* — the names, kinds and sizes of the folder the
  file sits in: an ``ls`` of its folder (any flags), a ``list`` of the folder or one above it, or a glob whose
  pattern matches it. A one-file ``ls -l x`` issued before acting on ``x`` is no look at anything: it does not
  count. Paths are followed through moves and renames.
* **sourced sentences** — share of the sentences of the agent's created text outputs (``.md``/``.txt`` files first
  written by the agent, in their final state) that carry a fact found in the input files read in the same session
  (the read lines only, ``view_range``): a number of ≥ 2 digits, a name (≥ 2 capitalised words in a row, or an
  all-caps token of ≥ 3 letters), or a span of ≥ :data:`SPAN_WORDS` consecutive words (CJK: ≥
  :data:`SPAN_CJK_CHARS` consecutive characters); file names in a sentence are not facts. Sentences = lines split
  at ``.!?。！？``; headings, table separators, code fences and sentences under 3 words (6 CJK characters) are not
  sentences. Edited input files are not counted (their sentences were the input's), nor sessions that read no
  input file (an empty workspace: counted as ``sessions_without_input_read``).

Thresholds (2 digits, 5 words, 10 CJK characters ≈ 5 words, 3 words for a sentence) are ours; the bounds are
:data:`filegram_ray.validity.separability.BOUNDS` (the bounds table of docs/validity.md).
"""

from __future__ import annotations

import fnmatch
import logging
import re
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from filegram_ray.limits import load_json

log = logging.getLogger(__name__)

#: Shell commands that show a named file's content (ours).
INSPECT_COMMANDS = frozenset({"head", "tail", "cat", "less", "more", "md5sum", "sha256sum", "diff", "cmp"})
#: Words in a row that make a copied span a fact (ours: a ≥ 5-word span).
SPAN_WORDS = 5
#: CJK characters in a row that make a span (ours: about 5 words at ~2 characters a word).
SPAN_CJK_CHARS = 10
#: Fewest words for an output sentence to be judged a verbatim input sentence (ours: shorter ones are labels,
#: names and dates, which any summary repeats).
VERBATIM_WORDS = 5
TEXT_OUTPUT_KINDS = (".md", ".txt", ".markdown")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9\u00c0-\u024f]+(?:['’.][A-Za-z0-9]+)*")
# Boundaries are ASCII letters and digits, not ``\b``: in Chinese text a number or a name stands next to CJK
# characters, which are word characters too ("在2024-08-20前", "TSMC方面"), and a file name ends where ASCII does.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d[\d,.:/-]*\d(?:%)?|(?<![A-Za-z0-9_.])\d{2,}")
_NAME = re.compile(r"(?<![A-Za-z])(?:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)(?![a-z])|(?<![A-Za-z])[A-Z]{3,}(?![A-Za-z])")
_FILE_NAME = re.compile(r"[!-~]*[_/][!-~]*|[!-~]+\.[A-Za-z][A-Za-z0-9]{1,4}(?![A-Za-z0-9])[!-~]*")
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
    seen: set[str] = set()      # content looked at
    listed: set[str] = set()    # folders listed ("." = the root)
    trees: set[str] = set()     # folders listed with everything under them (the list tool)
    globs: list[str] = []       # glob patterns run (a match is shown)
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
                    seen.add(_rel(e[k], root))
        elif t == "tool_call":
            params = e.get("tool_parameters") or {}
            name = e.get("tool_name")
            if name == "bash":
                shown, dirs = _looked_by_command(str(params.get("command") or ""))
                seen |= shown
                listed |= dirs
            elif name == "list":
                trees.add(_norm_dir(str(params.get("path") or ".")))
            elif name == "glob" and params.get("pattern"):
                globs.append(str(params["pattern"]))
        elif t in ("file_delete", "file_move", "file_rename"):
            path = _rel(e.get("file_path") or e.get("old_path") or "", root)
            out["changes"] += 1
            ok = path in seen or (t != "file_delete" and _was_listed(path, listed, trees, globs))
            out["inspected"] += int(ok)
            if not ok:
                missed.append({"event": t, "path": path})
            if t != "file_delete" and e.get("new_path"):
                new = _rel(e["new_path"], root)
                if path in seen:
                    seen.add(new)
                for s_ in [s_ for s_ in seen if s_.startswith(path + "/")]:
                    seen.add(new + s_[len(path):])
    return {**{k: out[k] for k in ("searches", "search_hits", "search_opened", "changes", "inspected")},
            "uninspected": missed}


def _norm_dir(d: str) -> str:
    d = d.strip().rstrip("/")
    d = d[2:] if d.startswith("./") else d
    return "." if d in ("", ".") else d


def _was_listed(path: str, listed: set[str], trees: set[str], globs: list[str]) -> bool:
    """``path`` (a file or a folder) was shown by a listing of its folder, of itself (a folder), by a recursive
    listing above it, or matched by a glob."""
    parent = _norm_dir(str(PurePosixPath(path).parent))
    if parent in listed or path in listed:
        return True
    if any(tr == "." or parent == tr or parent.startswith(tr + "/") or path == tr for tr in trees):
        return True
    return any(fnmatch.fnmatch(path, g) or fnmatch.fnmatch(path, g.removeprefix("**/")) for g in globs)


def _looked_by_command(cmd: str) -> tuple[set[str], set[str]]:
    """(files whose content a shell command line shows, folders it lists): arguments of
    :data:`INSPECT_COMMANDS`, and the folder operands of ``ls`` (no operand = the root). A file operand of ``ls``
    is not a look at the file."""
    shown: set[str] = set()
    dirs: set[str] = set()
    for part in re.split(r"&&|\|\||;|\|", cmd):
        try:
            toks = shlex.split(part)
        except ValueError:
            toks = part.split()
        if not toks:
            continue
        head, args = toks[0], [a for a in toks[1:] if not a.startswith("-")]
        if head in INSPECT_COMMANDS:
            shown |= {a[2:] if a.startswith("./") else a for a in args}
        elif head == "ls":
            for a in args or ["."]:
                if not PurePosixPath(a).suffix or a in (".", ".."):
                    dirs.add(_norm_dir(a))
    return shown, dirs


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
        self.cjk_flat = re.sub(r"[，。；：、！？,.;:!?]+", "", cjk)
        self.joined = f" {' '.join(words)} "

    def verbatim(self, sentence: str) -> bool:
        """Whether ``sentence`` is an input's sentence as it was read: its words (≥ :data:`VERBATIM_WORDS`), in
        order, stand in the text read (a CJK sentence: its characters without spaces, ≥ 10)."""
        w = _norm_words(sentence)
        if len(_CJK.findall(sentence)) >= SPAN_CJK_CHARS:
            flat = re.sub(r"[\s，。；：、！？,.;:!?]+", "", sentence)
            return len(flat) >= SPAN_CJK_CHARS and flat in self.cjk_flat
        if len(w) < VERBATIM_WORDS:
            return False
        return f" {' '.join(w)} " in self.joined

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
    """Input files' text as the read tool shows it: a document's extracted text, a media file's annotation
    (``bundle.json``)."""

    def __init__(self, workspaces: Path):
        self.root = workspaces
        self.cache: dict[tuple[str, str], list[str] | None] = {}
        self.notes: dict[str, dict[str, str]] = {}

    def _annotations(self, task_id: str) -> dict[str, str]:
        if task_id not in self.notes:
            meta = self.root / task_id / "bundle.json"
            try:
                files = load_json(meta.read_bytes(), str(meta)).get("files", []) if meta.is_file() else []
            except (OSError, ValueError):
                files = []
            self.notes[task_id] = {f["path"]: str(f["annotation"].get("content", "")) for f in files
                                   if isinstance(f, dict) and isinstance(f.get("annotation"), dict)}
        return self.notes[task_id]

    def lines(self, task_id: str, path: str) -> list[str] | None:
        key = (task_id, path)
        if key not in self.cache:
            from filegram_ray.workspace.extract import ExtractionError, extract_text

            note = self._annotations(task_id).get(path)
            f = self.root / task_id / "files" / path
            try:
                self.cache[key] = note.splitlines() if note is not None else (
                    extract_text(f).splitlines() if f.is_file() else None)
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
    ex_verbatim: list[str] = []
    ex_markers: list[str] = []
    grams: Counter = Counter()
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
        t = timing(raw)
        tot["max_ops_one_instant"] = max(tot["max_ops_one_instant"], t["max_ops"])
        tot["sessions_ops_batched"] += int(t["max_ops"] > MAX_OPS_PER_INSTANT)
        tot["sessions_deletes_one_instant"] += int(t["deletes_one_instant"])
        tot["sessions"] += 1
        marked = markers_in_outputs(base)
        if marked:
            tot["sessions_with_tool_markers"] += 1
            tot["files_with_tool_markers"] += len(marked)
            if len(ex_markers) < examples:
                ex_markers.append(f"{pid}/{tid} {marked[0][0]}: {marked[0][1]}")
        texts = [(rel, (base / "outputs" / rel).read_text(encoding="utf-8", errors="replace")) for rel in outs
                 if (base / "outputs" / rel).is_file()]
        for rel, text in texts:
            grams.update(ngrams(text))
        if not src.raw.strip():  # nothing read from an input (an empty workspace): nothing to take facts from
            tot["sessions_without_input_read"] += 1
            continue
        for rel, text in texts:
            for s in sentences(text):
                tot["sentences"] += 1
                k = src.fact(s)
                if k:
                    tot["sourced"] += 1
                    kinds[k] += 1
                elif len(ex_unsourced) < examples and tot["sentences"] % 37 == 1:
                    ex_unsourced.append(f"{pid}/{tid} {rel}: {s[:120]}")
                if src.verbatim(s):
                    tot["verbatim"] += 1
                    if len(ex_verbatim) < examples and tot["verbatim"] % 53 == 1:
                        ex_verbatim.append(f"{pid}/{tid} {rel}: {s[:120]}")

    def share(a: str, b: str) -> float:
        return tot[a] / tot[b] if tot[b] else float("nan")

    return {"search_hits": share("search_hits", "searches"), "search_opened": share("search_opened", "searches"),
            "inspected_before_change": share("inspected", "changes"),
            "sourced_sentences": share("sourced", "sentences"), "verbatim_sentences": share("verbatim", "sentences"),
            "counts": dict(tot), "fact_kinds": dict(kinds),
            "top_ngrams": [[" ".join(g), n] for g, n in grams.most_common(TOP_NGRAMS)],
            "examples": {"uninspected": ex_uninspected, "unsourced": ex_unsourced, "verbatim": ex_verbatim,
                         "tool_markers": ex_markers}, "skipped": skipped}


#: Most file operations one instant may hold (ours: a person does one thing at a time; a command may chain two or
#: three, as ``mkdir -p a && mv x a/x``).
MAX_OPS_PER_INSTANT = 3
#: N-gram length and how many of the most repeated ones are reported (ours: the top 20).
NGRAM, TOP_NGRAMS = 4, 20
_OPS = ("file_write", "file_edit", "file_delete", "file_move", "file_rename", "file_copy", "dir_create")
#: What the engine's tools print about a file that is not the file (a viewer's note, a line number, a cut):
#: none of it may reach a file the agent wrote.
TOOL_MARKERS = re.compile(r"\[end of file, \d+ lines\]|\[lines \d+-\d+ of \d+|\[output cut at \d+|\[line cut\]"
                          r"|\[skipped: |\[\w+ annotation of |\[\d+ files matched|^ {0,5}\d{1,6}\t", re.MULTILINE)


def timing(raw: list[dict[str, Any]]) -> dict[str, Any]:
    """How a session's file operations spread in time: the most that share one timestamp, and whether its deletes
    (two or more) all happened at one instant."""
    at: Counter = Counter()
    deletes: set[Any] = set()
    n_del = 0
    for e in raw:
        if e.get("event_type") in _OPS:
            at[e.get("timestamp")] += 1
        if e.get("event_type") == "file_delete":
            n_del += 1
            deletes.add(e.get("timestamp"))
    return {"max_ops": max(at.values(), default=0), "deletes_one_instant": n_del >= 2 and len(deletes) == 1}


def markers_in_outputs(base: Path) -> list[tuple[str, str]]:
    """``(file, marker)`` for every file under ``base/outputs`` that holds a tool marker (:data:`TOOL_MARKERS`)."""
    out = []
    root = base / "outputs"
    if not root.is_dir():
        return out
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.suffix.lower() in (".md", ".txt", ".csv", ".json", ".markdown", ".svg", ".log"):
            m = TOOL_MARKERS.search(f.read_text(encoding="utf-8", errors="replace"))
            if m:
                out.append((str(f.relative_to(root)), m.group(0).strip()[:40]))
    return out


def ngrams(text: str, n: int = NGRAM, limit: int = 4000) -> set[tuple[str, ...]]:
    """The word n-grams of one output (lower case; CJK runs count one word per character), each once."""
    toks: list[str] = []
    for m in re.finditer(r"[\u3400-\u9fff]|[A-Za-z0-9']+", text[:limit * 8]):
        toks.append(m.group(0).lower())
        if len(toks) >= limit:
            break
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}
