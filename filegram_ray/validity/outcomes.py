"""Did each session do its task? The outcome of every task, checked on the session's final workspace against the
bundle's own truth (``workspaces/<task>/bundle.json`` facts) and the task's deliverables.

A session's final workspace is replayed from its raw event log (:func:`replay`): the bundle's files, then every
write, edit, copy, move, rename and delete in order; a file's final text is its ``outputs/`` copy when the session
created or changed it, else the bundle's original (followed through moves). The replay also counts **silent
overwrites**: a move or rename onto a path that held a file (nothing in a plan moves onto an existing file, so any
such move is a loss of a file).

Outcomes (:data:`CHECKS`, one per task; ours, from each prompt and what the bundle planted):

* written deliverables: the file the prompt names (or a created text file) holds facts from the inputs (at least
  :data:`MIN_FACTS` sentences with a number, name or date found in the bundle), and what the prompt asks it to
  cover (T-16: ≤ 30 lines; T-17 / T-32: every planted problem named; T-15: the recomputed CAGR; …);
* changes: T-11 every planted wrong value corrected in its file and logged; T-09 the report under 800 words; T-10 the
  module, the DCF section and the index; T-12 every note in one style; T-13 every comment decided, no conflict
  accepted on both sides; T-14 every version kept and the chain in order; T-18 the batches applied in order with
  the index refreshed after each and the final regrouping; T-21 every duplicate and junk file settled;
* organising: every file of the collection sorted (into a folder or renamed with a category), the record asked for.

The result per session is ``{"ok": bool, "missing": [what is missing]}``; :func:`outcomes` gives the share per task
and overall (bound ≥ :data:`OUTCOME_BOUND` in ``filegram validity``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

#: Share of sessions that must reach their task's outcome (ours: ≥ 95 % of sessions on a fresh set).
OUTCOME_BOUND = 0.95
#: Sentences with a fact from the inputs a written deliverable needs at least (ours).
MIN_FACTS = 3
TEXT_EXT = (".md", ".txt", ".markdown", ".csv")


def _rel(path: str, root: str) -> str:
    p = str(path or "")
    if root and p.startswith(root.rstrip("/") + "/"):
        p = p[len(root.rstrip("/")) + 1:]
    return p[2:] if p.startswith("./") else p


@dataclass
class Final:
    """A session's final workspace: ``paths`` final path → origin (bundle path, or None for a file the session
    created), the created paths, the events in order, and readers for a file's final text."""

    base: Path
    bundle: Path
    paths: dict[str, str | None] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)
    overwrites: list[str] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    _cache: dict[str, str] = field(default_factory=dict)

    def text(self, path: str) -> str:
        """The final text of ``path`` ("" when it is not a text file or cannot be read)."""
        if path in self._cache:
            return self._cache[path]
        out = ""
        f = self.base / "outputs" / path
        if f.is_file():
            out = f.read_text(encoding="utf-8", errors="replace")
        else:
            origin = self.paths.get(path)
            if origin:
                out = _bundle_text(self.bundle / "files" / origin)
        self._cache[path] = out
        return out

    def created_texts(self) -> list[str]:
        return [p for p in sorted(self.created) if p in self.paths and p.lower().endswith(TEXT_EXT)]

    def named(self, name: str) -> list[str]:
        """Final paths whose file name is ``name`` (case-insensitive)."""
        return [p for p in self.paths if PurePosixPath(p).name.lower() == name.lower()]

    def origin_of(self, bundle_path: str) -> list[str]:
        """Final paths holding the bundle file ``bundle_path`` (moved, renamed or copied)."""
        return [p for p, o in self.paths.items() if o == bundle_path]


def _bundle_text(path: Path) -> str:
    if not path.is_file():
        return ""
    try:
        from filegram_ray.workspace.extract import extract_text

        return extract_text(path)
    except Exception:  # noqa: BLE001 - a file without a text view has no text to check
        return ""


def replay(base: Path, bundle: Path) -> Final:
    """The final workspace of the trajectory in ``base`` (``events_raw.json`` + ``outputs/``) over the bundle in
    ``bundle`` (``files/`` + ``bundle.json``). Raises ``ValueError`` / ``OSError`` for an unreadable log."""
    raw = json.loads((base / "events_raw.json").read_text(encoding="utf-8"))
    if not isinstance(raw, list):
        raise ValueError(f"{base / 'events_raw.json'}: expected a JSON list of events")
    meta = json.loads((bundle / "bundle.json").read_text(encoding="utf-8")) if (bundle / "bundle.json").is_file() \
        else {"files": []}
    fin = Final(base=base, bundle=bundle, facts=[f for f in meta.get("facts", []) if isinstance(f, dict)])
    fin.paths = {f["path"]: f["path"] for f in meta.get("files", [])}
    root = next((str(e.get("target_directory") or "") for e in raw if isinstance(e, dict)
                 and e.get("event_type") == "session_start"), "")
    for e in raw:
        if not isinstance(e, dict):
            continue
        t = e.get("event_type")
        if t in ("file_write", "file_edit", "file_copy", "file_move", "file_rename", "file_delete", "file_read"):
            fin.events.append(e)
        if t == "file_write":
            p = _rel(e.get("file_path"), root)
            if e.get("operation") == "create" or p not in fin.paths:
                fin.paths[p] = None
                fin.created.add(p)
            fin.changed.add(p)
        elif t == "file_edit":
            fin.changed.add(_rel(e.get("file_path"), root))
        elif t == "file_copy":
            a, b = _rel(e.get("source_path"), root), _rel(e.get("dest_path"), root)
            for p, o in list(fin.paths.items()):
                if p == a or p.startswith(a + "/"):
                    fin.paths[b + p[len(a):]] = o
            fin.created.add(b)
        elif t in ("file_move", "file_rename"):
            a, b = _rel(e.get("old_path"), root), _rel(e.get("new_path"), root)
            if b in fin.paths and b != a:
                fin.overwrites.append(f"{a} -> {b}")
            for p in [p for p in fin.paths if p == a or p.startswith(a + "/")]:
                q = b + p[len(a):]
                fin.paths[q] = fin.paths.pop(p)
                for s in (fin.created, fin.changed):
                    if p in s:
                        s.discard(p)
                        s.add(q)
        elif t == "file_delete":
            a = _rel(e.get("file_path"), root)
            for p in [p for p in fin.paths if p == a or p.startswith(a + "/")]:
                fin.paths.pop(p)
                fin.created.discard(p)
    return fin


# ------------------------------------------------------------------------------------------------ helpers
_NUM = re.compile(r"\d[\d,.]*\d|\d")
_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z'’-]+)+\b|\b[A-Z]{2}[A-Za-z]+\b|[A-Z]{2,4}-\d{4}-\d{3,6}")


class Inputs:
    """The bundle's text, for "does this sentence carry a fact from the inputs" (numbers, names, dates)."""

    def __init__(self, fin: Final):
        texts = []
        for p in fin.paths.values():
            if p:
                texts.append(_bundle_text(fin.bundle / "files" / p))
        meta = fin.bundle / "bundle.json"
        if meta.is_file():
            for f in json.loads(meta.read_text(encoding="utf-8")).get("files", []):
                if f.get("annotation"):
                    texts.append(str(f["annotation"].get("content", "")))
        raw = "\n".join(texts)
        self.numbers = {n.replace(",", "") for n in _NUM.findall(raw) if len(n.replace(",", "").replace(".", "")) >= 2}
        self.names = set(_NAME.findall(raw))

    def facts_in(self, text: str) -> int:
        """Sentences / lines of ``text`` that carry a number (≥ 2 digits) or a name found in the inputs."""
        n = 0
        for line in text.splitlines():
            s = line.strip()
            if not s or s.startswith("#") or re.fullmatch(r"[|:\-\s]+", s):
                continue
            if any(x.replace(",", "") in self.numbers for x in _NUM.findall(s)
                   if len(x.replace(",", "").replace(".", "")) >= 2) or any(m in self.names for m in _NAME.findall(s)):
                n += 1
        return n


CHECKS: dict[str, Callable[[Final, Any], list[str]]] = {}


def check(*task_ids: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for t in task_ids:
            CHECKS[t] = fn
        return fn
    return deco


def _deliverable(fin: Final, name: str | None = None) -> tuple[str | None, str]:
    """The deliverable: the file named ``name`` (anywhere), else the longest text file the session created."""
    if name:
        got = fin.named(name)
        if got:
            return got[0], fin.text(got[0])
        return None, ""
    texts = [p for p in fin.created_texts() if not p.endswith(".csv")]
    if not texts:
        return None, ""
    best = max(texts, key=lambda p: len(fin.text(p)))
    return best, fin.text(best)


def _all_created(fin: Final) -> str:
    return "\n".join(fin.text(p) for p in fin.created_texts())


def _facts(fin: Final, text: str, need: int = MIN_FACTS) -> list[str]:
    if not fin.paths or all(o is None for o in fin.paths.values()):
        return []
    got = Inputs(fin).facts_in(text)
    return [] if got >= need else [f"only {got} sentences with a fact from the inputs (need {need})"]


# ------------------------------------------------------------------------------------------------ checks
@check("T-01", "T-02", "T-06", "T-07", "T-08", "T-22", "T-24", "T-25", "T-27", "T-28")
def _written(fin: Final, task: Any) -> list[str]:
    path, text = _deliverable(fin)
    if path is None:
        return ["no written deliverable"]
    return _facts(fin, text)


@check("T-16")
def _briefing(fin: Final, task: Any) -> list[str]:
    path, text = _deliverable(fin, "urgent_briefing.md")
    if path is None:
        return ["no urgent_briefing.md"]
    out = _facts(fin, text)
    n = len(text.rstrip("\n").split("\n"))
    return out + ([f"urgent_briefing.md has {n} lines (max 30)"] if n > 30 else [])


@check("T-03")
def _kb(fin: Final, task: Any) -> list[str]:
    text = _all_created(fin).lower()
    need = {"framework": ("framework", "框架"), "P/E": ("p/e", "市盈率"), "P/B": ("p/b", "市净率"),
            "ROE": ("roe", "净资产收益率"), "industry template": ("industry", "行业"),
            "entry point": ("how to use", "start here", "使用说明", "入口")}
    return [f"no {k}" for k, ws in need.items() if not any(w in text for w in ws)]


@check("T-04")
def _dinner(fin: Final, task: Any) -> list[str]:
    text = _all_created(fin)
    out = []
    for n in ("Daniel Chen", "John Doe", "Sarah Lee"):
        if n not in text:
            out.append(f"{n} not named")
    low = text.lower()
    if not any(w in low for w in ("minutes", "纪要")):
        out.append("no minutes")
    if not any(w in low for w in ("tracker", "跟踪", "owner,action")):
        out.append("no tracker")
    if not any(w in low for w in ("subject:", "主题：")):
        out.append("no e-mail draft")
    return out


@check("T-20")
def _weekly(fin: Final, task: Any) -> list[str]:
    text = _all_created(fin)
    out = []
    if not re.search(r"(template|模板)", text, re.IGNORECASE):
        out.append("no template")
    if len(set(re.findall(r"\d{4}-W\d{2}", text + " ".join(fin.paths)))) < 2:
        out.append("fewer than two example weeks")
    if not re.search(r"(how to use|guide|使用说明|查找)", text, re.IGNORECASE):
        out.append("no guide")
    return out


@check("T-05")
def _layout_note(fin: Final, task: Any) -> list[str]:
    top = [p for p in fin.created_texts() if "/" not in p]
    out = [] if top else ["no note at the top level"]
    sorted_ = sum(1 for p, o in fin.paths.items() if o and p != o)
    if sorted_ < 0.5 * sum(1 for o in fin.paths.values() if o):
        out.append(f"only {sorted_} files sorted")
    return out


def _sorted_share(fin: Final, exts: tuple[str, ...]) -> float:
    items = [(p, o) for p, o in fin.paths.items() if o and PurePosixPath(o).suffix.lower() in exts]
    if not items:
        return 1.0
    return sum(1 for p, o in items if p != o) / len(items)


@check("T-23", "T-26")
def _album(fin: Final, task: Any) -> list[str]:
    share = _sorted_share(fin, (".jpg", ".jpeg", ".png", ".gif", ".mp4", ".mp3", ".wav", ".txt", ".md", ".csv",
                                ".json"))
    return [] if share >= 0.9 else [f"only {share:.0%} of the files sorted"]


@check("T-29")
def _registry(fin: Final, task: Any) -> list[str]:
    out = []
    share = _sorted_share(fin, (".pdf",))
    if share < 0.9:
        out.append(f"only {share:.0%} of the registrations filed")
    pdfs = [PurePosixPath(p).name for p, o in fin.paths.items() if o and o.endswith(".pdf")]
    if not any(sum(1 for n in pdfs if n in fin.text(p)) >= 0.9 * max(1, len(pdfs)) for p in fin.created_texts()):
        out.append("no index listing the registrations")
    if not any(re.search(r"(how this registry works|looking a company up|使用说明|查找)", fin.text(p), re.IGNORECASE)
               for p in fin.created_texts()):
        out.append("no description of the system")
    return out


@check("T-30")
def _audio(fin: Final, task: Any) -> list[str]:
    out = []
    share = _sorted_share(fin, (".mp3", ".wav"))
    if share < 0.9:
        out.append(f"only {share:.0%} of the recordings filed")
    audio = [PurePosixPath(p).name for p, o in fin.paths.items() if o and o.endswith((".mp3", ".wav"))]
    text = _all_created(fin)
    if sum(1 for n in audio if n in text) < len(audio):
        out.append("not every recording has a summary")
    return out


@check("T-31")
def _compilation(fin: Final, task: Any) -> list[str]:
    final = [p for p, o in fin.paths.items() if o and "final" in PurePosixPath(p).parts[0].lower()]
    out = [] if len(final) >= 3 else ["no final folder with the chosen clips"]
    plan_text = _all_created(fin)
    if sum(1 for p in final if PurePosixPath(p).name in plan_text) < len(final):
        out.append("the plan does not list the chosen material")
    return out


@check("T-09")
def _condense(fin: Final, task: Any) -> list[str]:
    target = next((p for p, o in fin.paths.items() if o == "research_report.md"), None)
    if target is None:
        return ["research_report.md is gone"]
    words = len(re.findall(r"\S+", fin.text(target)))
    out = [] if words < 800 else [f"the report still has {words} words"]
    if "research_report.md" not in fin.changed and target not in fin.changed:
        out.append("the report was not changed")
    return out


@check("T-10")
def _kb_update(fin: Final, task: Any) -> list[str]:
    out = []
    ta = [p for p in fin.created_texts() if all(w in fin.text(p) for w in ("RSI", "MACD"))]
    if not ta:
        out.append("no technical analysis module")
    if not any(re.search(r"(discounted cash flow|DCF|现金流折现)", fin.text(p)) for p, o in fin.paths.items()
               if o and o.startswith("fundamentals/")):
        out.append("no DCF in the fundamentals")
    idx = fin.origin_of("index.md")
    itext = fin.text(idx[0]) if idx else ""
    if not ta or PurePosixPath(ta[0]).name not in itext:
        out.append("the index does not list the new module")
    if "DCF" not in itext and "现金流折现" not in itext:
        out.append("the index does not mention the DCF model")
    return out


def _forms(v: Any) -> list[str]:
    out = [str(v)]
    if isinstance(v, int):
        out.append(f"{v:,}")
    return out


@check("T-11")
def _corrections(fin: Final, task: Any) -> list[str]:
    out = []
    errs = [f for f in fin.facts if f.get("type") in ("name_spelling", "figure", "date") and f.get("files")]
    log = next((fin.text(p) for p in fin.named("correction_log.md")), None)
    if log is None:
        out.append("no correction_log.md")
    for e in errs:
        for f in e["files"]:
            paths = fin.origin_of(f)
            text = fin.text(paths[0]) if paths else ""
            wrong = [w for w in _forms(e["wrong"]) if re.search(rf"(?<![\d,]){re.escape(w)}(?![\d,])", text)]
            if wrong or not any(c in text for c in _forms(e["correct"])):
                out.append(f"{e.get('field')} not corrected in {f}")
        if log is not None and not any(c in log for c in _forms(e["correct"])):
            out.append(f"{e.get('field')} not in the correction log")
    return out


_STYLE_BAD = re.compile(r"^\s*(?:\*\*[^*]+\*\*\s*$|【|📌|🔹|🗂️|[*+] |✅|☐|✔|✗|DONE |TODO |\[[ x]\] )", re.MULTILINE)


@check("T-12")
def _style(fin: Final, task: Any) -> list[str]:
    out = [] if fin.named("style_guide.md") else ["no style_guide.md"]
    styled = [f["file"] for f in fin.facts if f.get("type") == "md_style"]
    for f in styled:
        paths = fin.origin_of(f)
        text = fin.text(paths[0]) if paths else ""
        if _STYLE_BAD.search(text) or re.search(r"^Date: (?!\d{4}-\d\d-\d\d)", text, re.MULTILINE):
            out.append(f"{f} not in the house style")
    return out


@check("T-13")
def _reviews(fin: Final, task: Any) -> list[str]:
    out = []
    notes = next((fin.text(p) for p in fin.named("revision_notes.md")), None)
    if notes is None:
        return ["no revision_notes.md"]
    comments = []
    for p, o in fin.paths.items():
        if o and re.match(r"feedback_reviewer\d+\.md$", PurePosixPath(o).name):
            comments += [ln[2:].strip() for ln in _bundle_text(fin.bundle / "files" / o).splitlines()
                         if ln.startswith("- ")]
    verdict = re.compile(r"(accepted|declined|partly|采纳|不采纳|部分)", re.IGNORECASE)

    def decision(c: str) -> str | None:
        """The verdict given to comment ``c``: on the line where ``c`` stands before any verdict (a reason may
        quote another comment)."""
        for ln in notes.splitlines():
            i, m = ln.find(c[:40]), verdict.search(ln)
            if i >= 0 and m and i < m.start():
                return ln[m.start():]
        return None

    for c in comments:
        if decision(c) is None:
            out.append(f"comment not decided: {c[:40]}")
    for f in fin.facts:
        if f.get("type") == "contradiction":
            if _accepted(decision(f["a"]) or "") and _accepted(decision(f["b"]) or ""):
                out.append("both sides of a conflict accepted")
    report = fin.origin_of("original_report.md")
    if not report or not any(p in fin.changed for p in report):
        out.append("the report was not revised")
    return out


def _accepted(verdict: str) -> bool:
    """A verdict (the text from the verdict word on) that accepts the comment."""
    head = verdict[:12].lower()
    return head.startswith(("accepted", "采纳"))


@check("T-14")
def _versions(fin: Final, task: Any) -> list[str]:
    lineage = next((f["versions"] for f in fin.facts if f.get("type") == "version_lineage"), [])
    out = []
    hist = next((fin.text(p) for p in fin.named("version_history.md")), None)
    if hist is None:
        return ["no version_history.md"]
    pos = []
    for v in sorted(lineage, key=lambda v: v["order"]):
        if not fin.origin_of(v["file"]):
            out.append(f"{v['file']} lost")
        i = hist.find(v["file"])
        pos.append(i if i >= 0 else hist.find(v["date"]))
    if any(p < 0 for p in pos) or pos != sorted(pos):
        out.append("the history does not give the versions in order")
    return out


@check("T-15")
def _memo(fin: Final, task: Any) -> list[str]:
    path, text = _deliverable(fin, "reconciliation_memo.md")
    if path is None:
        return ["no reconciliation_memo.md"]
    rev = _bundle_text(fin.bundle / "files" / "raw_data/revenue_history.csv").strip().splitlines()[1:]
    out = []
    if len(rev) >= 2:
        first, last = float(rev[0].split(",")[1]), float(rev[-1].split(",")[1])
        cagr = round(((last / first) ** (1 / (len(rev) - 1)) - 1) * 100, 1)
        if f"{cagr}%" not in text:
            out.append(f"the memo does not give the revenue CAGR from the data ({cagr}%)")
    return out + _facts(fin, text)


def _issues_named(fin: Final, text: str, kinds: tuple[str, ...]) -> list[str]:
    out = []
    for f in fin.facts:
        t = f.get("type")
        if t not in kinds:
            continue
        name = f.get("target") if t == "broken_ref" else f.get("media") if t == "memo_mismatch" else f.get("file")
        if name and name not in text:
            out.append(f"{t} not reported: {name}")
    return out


@check("T-17")
def _health(fin: Final, task: Any) -> list[str]:
    path, text = _deliverable(fin, "health_check_report.md")
    if path is None:
        return ["no health_check_report.md"]
    return _issues_named(fin, text, ("duplicate", "duplicate_media", "junk", "empty_file", "broken_ref"))


@check("T-32")
def _consistency(fin: Final, task: Any) -> list[str]:
    _, text = _deliverable(fin)
    report = "\n".join(fin.text(p) for p in fin.created_texts())
    if not text:
        return ["no consistency report"]
    return _issues_named(fin, report, ("duplicate_media", "broken_ref", "memo_mismatch"))


@check("T-18")
def _batches(fin: Final, task: Any) -> list[str]:
    out = []
    reads = [(i, _batch_no(e.get("file_path", ""))) for i, e in enumerate(fin.events)
             if e.get("event_type") == "file_read" and _batch_no(e.get("file_path", ""))]
    first_read = {}
    for i, b in reads:
        first_read.setdefault(b, i)
    order = sorted(first_read, key=lambda b: first_read[b])
    if order != sorted(first_read) or len(first_read) < 3:
        out.append(f"batches read in the order {order}")
    idx_edits = [i for i, e in enumerate(fin.events) if e.get("event_type") in ("file_edit", "file_write")
                 and str(e.get("file_path", "")).endswith("/index.md")]
    for b in (2, 3):
        if b in first_read and b - 1 in first_read and not any(first_read[b - 1] < i < first_read[b]
                                                                for i in idx_edits):
            out.append(f"the index not refreshed between batch {b - 1} and batch {b}")
    if 3 in first_read and not any(i > first_read[3] for i in idx_edits):
        out.append("the index not refreshed after batch 3")
    tops = {PurePosixPath(p).parts[0] for p in fin.paths if "/" in p}
    if not {"reference", "operations"} <= tops:
        out.append("no final regrouping into reference/ and operations/")
    names = " ".join(fin.paths)
    cases = re.findall(r"Add a summary of ([A-Z]{2,4}-\d{4}-\d+)", "\n".join(
        _bundle_text(fin.bundle / "files" / f"updates/batch_{k}.md") for k in (1, 2, 3)))
    for c in cases:
        if c.lower().replace("-", "_") not in names.lower():
            out.append(f"no summary of {c}")
    return out


def _batch_no(path: str) -> int:
    m = re.search(r"batch_(\d+)\.md$", str(path))
    return int(m.group(1)) if m else 0


@check("T-19")
def _lay(fin: Final, task: Any) -> list[str]:
    text = _all_created(fin)
    out = [] if "Chen" in text else ["no note for Mrs Chen"]
    return out + _facts(fin, text, 2)


@check("T-21")
def _cleanup(fin: Final, task: Any) -> list[str]:
    out = [] if fin.named("cleanup_log.md") else ["no cleanup_log.md"]
    log = next((fin.text(p) for p in fin.named("cleanup_log.md")), "")
    for f in fin.facts:
        if f.get("type") not in ("duplicate", "junk", "empty_file"):
            continue
        now = fin.origin_of(f["file"])
        if any(not re.search(r"(archive|trash|review|duplicates)", p, re.IGNORECASE) for p in now):
            if f.get("type") != "duplicate" or not any("kept" in ln.lower() or "保留" in ln
                                                       for ln in log.splitlines() if f["file"] in ln):
                out.append(f"{f['file']} not dealt with")
        if f.get("original") and not fin.origin_of(f["original"]) and f.get("type") == "duplicate":
            out.append(f"the original {f['original']} was lost")
        if f["file"] not in log:
            out.append(f"{f['file']} not in the cleanup log")
    return out


def session_outcome(base: Path, bundle: Path, task: Any) -> dict[str, Any]:
    """The outcome of one session: ``{"ok", "missing", "overwrites"}`` (no check for the task: ``ok`` None)."""
    fin = replay(base, bundle)
    fn = CHECKS.get(str(getattr(task, "task_id", task)))
    missing = fn(fin, task) if fn else []
    return {"ok": None if fn is None else not missing, "missing": missing, "overwrites": fin.overwrites}


def outcomes(run_dir: str | Path, trajectories: list[tuple[str, str]], examples: int = 6) -> dict[str, Any]:
    """Outcomes of ``trajectories`` (``[(profile_id, task_id)]``) of a local run: ``{"share", "n", "by_task":
    {task: {"n", "ok", "share", "missing": Counter}}, "overwrites", "examples", "skipped"}``."""
    run = Path(run_dir)
    by: dict[str, dict[str, Any]] = {}
    over: list[str] = []
    skipped: list[dict[str, str]] = []
    ex: list[str] = []
    n = ok = 0
    for pid, tid in trajectories:
        base = run / "trajectories" / pid / tid
        try:
            r = session_outcome(base, run / "workspaces" / tid, tid)
        except (OSError, ValueError) as exc:
            skipped.append({"trajectory_id": f"{pid}/{tid}", "error": str(exc)})
            continue
        over += [f"{pid}/{tid}: {x}" for x in r["overwrites"]]
        if r["ok"] is None:
            continue
        t = by.setdefault(tid, {"n": 0, "ok": 0, "missing": Counter()})
        t["n"] += 1
        n += 1
        if r["ok"]:
            t["ok"] += 1
            ok += 1
        else:
            for m in r["missing"]:
                t["missing"][re.sub(r"\d+", "N", m)[:70]] += 1
            if len(ex) < examples:
                ex.append(f"{pid}/{tid}: {'; '.join(r['missing'][:3])}")
    for t in by.values():
        t["share"] = t["ok"] / t["n"] if t["n"] else float("nan")
        t["missing"] = dict(t["missing"].most_common(4))
    return {"share": ok / n if n else float("nan"), "n": n, "ok": ok, "by_task": dict(sorted(by.items())),
            "overwrites": over, "examples": ex, "skipped": skipped}
