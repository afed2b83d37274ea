"""Recording → events (the Real-World setting): rebuild the file-operation timeline from captions.

Input: the caption rows of one recording (:mod:`video.captions` schema: keyframe time, text lines with boxes, and
for a VLM its structured ``operation``). Output: events in the ``events.json`` format of the engine (reference
§3.1–§3.4: the 12 kept types, relative paths, epoch-ms timestamps, ``profile_id`` = ``real_user`` as the OS watcher
writes it, reference §12) plus the text seen on screen as media blobs (reference §2.2), so every memory method
ingests a recording exactly as it ingests a trajectory.

How an operation is read back (OCR captions). Each keyframe gives:

* the **status line** — the bottom band of the frame (or, on a recording of another UI, any line) matched against
  the file-manager messages of :func:`video.timeline.status_text` (``Opened P, lines A-B``, ``Saved new file P, N
  chars``, ``Moved A to B`` …; the matcher tolerates the spaces OCR drops);
* the **clock** — a ``YYYY-MM-DD HH:MM:SS`` in the title bar (the session time of the operation): it becomes the
  event timestamp, and it separates two identical operations in a row; without a clock the keyframe time is used;
* the **main pane** — the lines right of the tree and between the pane header and the status band: the content of
  a written file, the diff of an edit.

Consecutive keyframes with the same (status, clock) are one operation. Derived fields follow the engine's rules
(reference §3.4): ``context_switch`` on a read whose file differs from the previous read (the tab switch),
``cross_file_reference`` when the read/edit is shown side by side with another file (``read_then_edit`` when that
previous operation was a read and this one an edit), ``view_count`` / ``revisit_interval_ms`` / ``file_age_ms``,
``is_backup`` / ``was_temporary`` from the extension, ``naming_pattern_change``, depths from path components.

Recovery is measured by :func:`score_recovery` (precision and recall per event type against the true events).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import re
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["KEY_FIELDS", "ParsedOp", "Reconstruction", "parse_status", "reconstruct", "score_recovery"]

_SP = r"\s*"
_SEP = r"\s*[,，]\s*"
_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("browse", re.compile(rf"^Opened{_SP}folder{_SP}(?P<path>.+?){_SEP}(?P<n>\d+){_SP}items?\.?$", re.I)),
    ("read", re.compile(rf"^Opened{_SP}(?P<path>.+?){_SEP}lines?{_SP}(?P<a>\d+){_SP}[-–~]{_SP}(?P<b>\d+)"
                        rf"(?:{_SEP}view{_SP}(?P<v>\d+))?(?:{_SEP}side{_SP}by{_SP}side{_SP}with{_SP}(?P<src>.+))?$",
                        re.I)),
    ("write", re.compile(rf"^Saved{_SP}new{_SP}file{_SP}(?P<path>.+?){_SEP}(?P<n>\d+){_SP}chars?\.?$", re.I)),
    ("overwrite", re.compile(rf"^Saved{_SP}(?P<path>.+?){_SEP}(?P<n>\d+){_SP}chars?{_SP}\(?{_SP}replaced{_SP}\)?$",
                             re.I)),
    ("edit", re.compile(rf"^Saved{_SP}(?P<path>.+?){_SEP}\+{_SP}(?P<a>\d+){_SP}[-–]{_SP}(?P<d>\d+){_SP}lines?"
                        rf"(?:{_SEP}side{_SP}by{_SP}side{_SP}with{_SP}(?P<src>.+))?$", re.I)),
    ("search", re.compile(rf"^Search{_SP}[\"“”'‘’]?(?P<q>.*?)[\"“”'‘’]?{_SP}[:：]{_SP}(?P<n>\d+){_SP}match(?:es)?"
                          rf"{_SP}(?:\(?{_SP}(?P<t>grep|glob|codesearch){_SP}\)?)?$", re.I)),
    ("dir_create", re.compile(rf"^Created{_SP}folder{_SP}(?P<path>.+)$", re.I)),
    ("move", re.compile(rf"^Moved{_SP}(?P<rest>.+)$", re.I)),
    ("rename", re.compile(rf"^Renamed{_SP}(?P<rest>.+)$", re.I)),
    ("copy", re.compile(rf"^Copied{_SP}(?P<rest>.+)$", re.I)),
    ("delete", re.compile(rf"^Deleted{_SP}(?P<path>.+)$", re.I)),
    ("tab_switch", re.compile(rf"^Switched{_SP}to{_SP}(?P<path>.+)$", re.I)),
    ("side_by_side", re.compile(rf"^Side{_SP}by{_SP}side{_SP}[:：]?{_SP}(?P<a>.+?){_SP}[|｜lI]{_SP}(?P<b>.+)$", re.I)),
]
_CLOCK = re.compile(r"(\d{4})\s*-\s*(\d{2})\s*-\s*(\d{2})\s*(\d{2})\s*[:：]\s*(\d{2})\s*[:：]\s*(\d{2})")
_TO = re.compile(r"\s*to\s*", re.I)

#: The fields that identify an event when recovered events are matched with true ones (:func:`score_recovery`).
KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "file_read": ("file_path",), "file_write": ("file_path",), "file_edit": ("file_path",),
    "file_search": ("query",), "file_browse": ("directory_path",), "file_rename": ("old_path", "new_path"),
    "file_move": ("old_path", "new_path"), "dir_create": ("dir_path",), "file_delete": ("file_path",),
    "file_copy": ("source_path", "dest_path"), "context_switch": ("to_file",),
    "cross_file_reference": ("source_file", "target_file"),
}
BACKUP_EXT = {".bak", ".backup", ".orig", ".old", ".save"}            # reference §3.4 is_backup
TEMP_EXT = {".tmp", ".temp", ".bak", ".swp", ".swo", ".pyc", ".o", ".log"}  # reference §3.4 was_temporary
CROSS_REF_WINDOW_MS = 30_000  # reference §3.4: cross_file_reference only within 30 s


class ParsedOp(dict):
    """One operation read from a status line: ``kind`` plus its fields (``path``, ``old``, ``new``, ``n`` …)."""


def _clean(path: str) -> str:
    p = path.strip().strip("\"'“”‘’").strip()
    p = re.sub(r"\s*/\s*", "/", p)
    return p.rstrip(".,，;") if p.endswith((",", "，", ";")) else p


def _split_to(rest: str, same_name: bool) -> tuple[str, str] | None:
    """``A to B`` → (A, B). Paths may contain "to" and OCR drops spaces, so every split is tried: spaced ``" to "``
    first; for moves/copies the split where both sides end with the same file name wins."""
    cands = [(m.start(), m.end(), m.group(0).strip() != m.group(0)) for m in _TO.finditer(rest)]
    if not cands:
        return None
    pairs = [(rest[:s].strip(), rest[e:].strip(), spaced) for s, e, spaced in cands if rest[:s].strip()
             and rest[e:].strip()]
    if not pairs:
        return None
    if same_name:
        for a, b, _ in pairs:
            if posixpath.basename(a) == posixpath.basename(b):
                return _clean(a), _clean(b)
    spaced = [p for p in pairs if p[2]]
    a, b, _ = (spaced or pairs)[0]
    return _clean(a), _clean(b)


def parse_status(text: str) -> ParsedOp | None:
    """The operation of one status-line text, or None when it is not an operation message (``Ready``,
    ``Selected …``, ``Editing …``, ``Searching...``)."""
    t = unicodedata.normalize("NFKC", text or "").strip()
    for kind, pat in _PATTERNS:
        m = pat.match(t)
        if not m:
            continue
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        if kind in ("move", "rename", "copy"):
            pair = _split_to(g["rest"], same_name=kind != "rename")
            if pair is None:
                return None
            return ParsedOp(kind=kind, old=pair[0], new=pair[1])
        op = ParsedOp(kind=kind)
        for k, v in g.items():
            op[k] = _clean(v) if k in ("path", "src", "a", "b") and not v.isdigit() else v
        return op
    return None


def _clock_ms(texts: Sequence[str]) -> float | None:
    for t in texts:
        m = _CLOCK.search(unicodedata.normalize("NFKC", t))
        if m:
            y, mo, d, h, mi, s = (int(x) for x in m.groups())
            try:
                return datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp() * 1000.0
            except ValueError:
                return None
    return None


def _regions(width: int, height: int) -> dict[str, float]:
    """Bands of our guidance-video layout for a frame size (:func:`video.frames.layout`)."""
    from video.frames import layout

    try:
        L = layout(width - width % 2, height - height % 2)
    except ValueError:
        return {"status_top": height * 0.93, "title_bottom": height * 0.05, "tree_right": width * 0.28,
                "body_top": height * 0.19}
    return {"status_top": L.body_bottom - 2, "title_bottom": L.title_h, "tree_right": L.tree_w,
            "body_top": L.body_top - 2}


def _rows_in_order(lines: list[dict]) -> list[dict]:
    """Lines top to bottom; boxes whose centres lie within half a line height of each other form one row, read left
    to right (OCR may split one printed line into several boxes with slightly different tops)."""
    out: list[dict] = []
    row: list[dict] = []
    for ln in sorted(lines, key=lambda ln: (ln["box"][1] + ln["box"][3]) / 2):
        cy = (ln["box"][1] + ln["box"][3]) / 2
        h = max(4, ln["box"][3] - ln["box"][1])
        if row and abs(cy - (row[0]["box"][1] + row[0]["box"][3]) / 2) > h / 2:
            out.extend(sorted(row, key=lambda r: r["box"][0]))
            row = []
        row.append(ln)
    out.extend(sorted(row, key=lambda r: r["box"][0]))
    return out


def _keyframe_view(lines: list[dict], width: int, height: int) -> dict[str, Any]:
    reg = _regions(width, height)
    status = [ln for ln in lines if (ln["box"][1] + ln["box"][3]) / 2 >= reg["status_top"]]
    status_text = " ".join(ln["text"] for ln in _rows_in_order(status))
    title = [ln["text"] for ln in lines if (ln["box"][1] + ln["box"][3]) / 2 <= reg["title_bottom"]]
    body = [ln for ln in lines if ln["box"][0] >= reg["tree_right"] - 4
            and reg["body_top"] <= (ln["box"][1] + ln["box"][3]) / 2 < reg["status_top"]]
    op = parse_status(status_text)
    if op is None:  # another UI, or the band moved: any line that reads as an operation
        for ln in lines:
            op = parse_status(ln["text"])
            if op is not None:
                status_text = ln["text"]
                break
    return {"op": op, "status": status_text, "clock": _clock_ms(title) or _clock_ms([ln["text"] for ln in lines]),
            "body": body}


def _ops_from_ocr(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operations (one per run of keyframes with the same status and clock) of OCR caption rows."""
    ops: list[dict[str, Any]] = []
    for r in sorted(rows, key=lambda r: float(r["t_s"])):
        lines = r.get("lines") or []
        if isinstance(lines, str):
            lines = json.loads(lines) if lines else []
        v = _keyframe_view(lines, int(r.get("width") or 1280), int(r.get("height") or 720))
        if v["op"] is None:
            continue
        sig = (v["status"].replace(" ", ""), v["clock"])
        if ops and ops[-1]["sig"] == sig:
            ops[-1]["body"] = v["body"] or ops[-1]["body"]  # the settled (last) view of the operation
            continue
        ops.append({"sig": sig, "op": v["op"], "clock": v["clock"], "t_s": float(r["t_s"]), "body": v["body"]})
    return ops


_VLM_KINDS = {"read": "read", "open": "read", "view": "read", "write": "write", "create": "write",
              "save": "write", "edit": "edit", "modify": "edit", "search": "search", "browse": "browse",
              "open_folder": "browse", "new_folder": "dir_create", "dir_create": "dir_create", "mkdir": "dir_create",
              "move": "move", "rename": "rename", "copy": "copy", "delete": "delete"}


def _ops_from_vlm(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operations of VLM caption rows: the transcribed status line when it parses, else the structured fields."""
    ops: list[dict[str, Any]] = []
    for r in sorted(rows, key=lambda r: float(r["t_s"])):
        try:
            o = json.loads(r.get("operation") or "{}")
        except json.JSONDecodeError:
            continue
        if not isinstance(o, dict):
            continue
        op = parse_status(str(o.get("status_line") or ""))
        if op is None:
            kind = _VLM_KINDS.get(str(o.get("action") or "").strip().lower().replace(" ", "_"))
            path = _clean(str(o.get("file") or o.get("path") or ""))
            if not kind or not path:
                continue
            op = ParsedOp(kind=kind, path=path, old=path, new=_clean(str(o.get("target") or "")),
                          q=str(o.get("query") or ""), n=str(o.get("count") or 0), a="1", b="1", d="0")
            if kind in ("move", "rename", "copy") and not op["new"]:
                continue
        clock = _clock_ms([str(o.get("clock") or "")])
        body = [{"text": t, "box": [0, 0, 0, 0]} for t in str(o.get("visible_text") or "").splitlines() if t]
        sig = (json.dumps(op, sort_keys=True), clock)
        if ops and ops[-1]["sig"] == sig:
            continue
        ops.append({"sig": sig, "op": op, "clock": clock, "t_s": float(r["t_s"]), "body": body})
    return ops


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p and p != "."])


def _ext(path: str) -> str:
    base = posixpath.basename(path)
    return "." + base.rsplit(".", 1)[-1].lower() if "." in base else ""


def _file_type(path: str) -> str:
    e = _ext(path)
    return e[1:] if e else "unknown"


def _naming_change(old: str, new: str) -> str:
    """reference §3.4 ``naming_pattern_change`` on file stems, first match wins."""
    a = posixpath.splitext(posixpath.basename(old))[0]
    b = posixpath.splitext(posixpath.basename(new))[0]
    if "_" in a and "-" in b:
        return "snake_to_kebab"
    if "-" in a and "_" in b:
        return "kebab_to_snake"
    if "_" in a and a != a.lower():
        return "mixed_to_other"
    if a.replace("_", "") == b.replace("_", "").lower() or a.lower() == b.lower():
        return "case_change"
    return "other"


@dataclass
class Reconstruction:
    """Events rebuilt from one recording: ``events`` (``events.json`` order and format), ``blobs`` (path under
    ``media/`` → text seen on screen: written content, diffs) and ``video_t_s`` (per event, the recording time in
    seconds of the keyframe it was read from)."""

    events: list[dict[str, Any]]
    blobs: dict[str, str]
    video_t_s: list[float]

    def __iter__(self):  # ``events, blobs = reconstruct(...)``
        return iter((self.events, self.blobs))


def reconstruct(rows: Sequence[dict[str, Any]], recording_id: str, captioner: str = "ocr") -> Reconstruction:
    """Rebuild the events of one recording from its caption rows.

    Args:
        rows: caption rows of the recording (keys ``t_s``, ``lines`` (list or JSON), ``width``, ``height``;
            VLM rows ``operation`` JSON).
        recording_id: names the session (its UUIDs derive from it, so the output is deterministic).
        captioner: ``ocr`` or ``vlm`` (how the rows are read).

    Returns:
        A :class:`Reconstruction` (unpacks as ``events, blobs``).
    """
    ops = _ops_from_vlm(rows) if captioner == "vlm" else _ops_from_ocr(rows)
    ns = uuid.uuid5(uuid.NAMESPACE_URL, f"filegram-ray/recording/{recording_id}")
    session = str(uuid.uuid5(ns, "session"))
    events: list[dict[str, Any]] = []
    times: list[float] = []
    blobs: dict[str, str] = {}
    base_ms = next((o["clock"] for o in ops if o["clock"] is not None), 0.0) or 0.0
    t0_s = next((o["t_s"] for o in ops if o["clock"] is not None), 0.0)
    last_ts = -1.0
    reads: dict[str, list[float]] = {}
    last_read_path: str | None = None
    switches = 0
    prev_op: tuple[str, str, float] | None = None  # (read|edit, path, ts) — the cross-reference state (§3.4)

    video_t = 0.0

    def add(etype: str, ts: float, **fields: Any) -> None:
        ev = {"event_id": str(uuid.uuid5(ns, f"{len(events)}")), "event_type": etype, "timestamp": ts,
              "session_id": session, "profile_id": "real_user", **fields}
        events.append(ev)
        times.append(video_t)

    def blob(text: str) -> dict[str, str] | None:
        if not text:
            return None
        h = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        blobs[f"blobs/{h}.blob"] = text
        return {"type": "blob", "hash": h, "path": f"blobs/{h}.blob"}

    for o in ops:
        op = o["op"]
        video_t = o["t_s"]
        ts = o["clock"] if o["clock"] is not None else base_ms + (o["t_s"] - t0_s) * 1000.0
        ts = max(ts, last_ts)  # never backwards (a misread clock)
        last_ts = ts
        kind = op["kind"]
        body = "\n".join(ln["text"] for ln in o["body"])
        if kind == "read":
            path = op["path"]
            if path != last_read_path:
                switches += 1
                add("context_switch", ts, from_file=last_read_path, to_file=path, trigger="file_read",
                    switch_count=switches)
            src = op.get("src")
            if src and src != path:
                add("cross_file_reference", ts, source_file=src, target_file=path, reference_type="sequential_access",
                    interval_ms=int(ts - prev_op[2]) if prev_op and prev_op[1] == src else 0)
            prev_reads = reads.setdefault(path, [])
            a, b = int(op.get("a") or 1), int(op.get("b") or 1)
            add("file_read", ts, file_path=path, file_type=_file_type(path), directory_depth=max(0, _depth(path) - 1),
                view_count=int(op.get("v") or len(prev_reads) + 1), view_range=[a, b], content_length=len(body),
                revisit_interval_ms=int(ts - prev_reads[-1]) if prev_reads else None)
            prev_reads.append(ts)
            last_read_path = path
            prev_op = ("read", path, ts)
        elif kind in ("write", "overwrite"):
            path = op["path"]
            ref = blob(body)
            fields = {"file_path": path, "file_type": _file_type(path), "directory_depth": max(0, _depth(path) - 1),
                      "operation": "overwrite" if kind == "overwrite" else "create",
                      "content_length": int(op.get("n") or len(body)), "before_hash": None,
                      "after_hash": ref["hash"] if ref else None}
            if ref:
                fields["media_ref"] = ref
            add("file_write", ts, **fields)
        elif kind == "edit":
            path = op["path"]
            src = op.get("src")
            if src and src != path:
                rtype = "read_then_edit" if prev_op and prev_op[0] == "read" else "sequential_access"
                add("cross_file_reference", ts, source_file=src, target_file=path, reference_type=rtype,
                    interval_ms=int(ts - prev_op[2]) if prev_op and prev_op[1] == src else 0)
            added, deleted = int(op.get("a") or 0), int(op.get("d") or 0)
            ref = blob(body)
            fields = {"file_path": path, "file_type": _file_type(path), "edit_tool": "edit", "lines_added": added,
                      "lines_deleted": deleted, "lines_modified": min(added, deleted),
                      "diff_summary": f"+{added} -{deleted}", "before_hash": None, "after_hash": None}
            if ref:
                fields["media_ref_diff"] = ref
            add("file_edit", ts, **fields)
            prev_op = ("edit", path, ts)
        elif kind == "search":
            add("file_search", ts, search_type=(op.get("t") or "grep").lower(), query=op.get("q", ""),
                files_matched=int(op.get("n") or 0), files_opened_after=[])
        elif kind == "browse":
            path = op["path"] or "."
            add("file_browse", ts, directory_path=path, files_listed=int(op.get("n") or 0),
                depth=0 if path == "." else _depth(path))
        elif kind == "dir_create":
            add("dir_create", ts, dir_path=op["path"], depth=_depth(op["path"]), sibling_count=0)
        elif kind in ("move", "rename"):
            old, new = op["old"], op["new"]
            if kind == "rename":
                add("file_rename", ts, old_path=old, new_path=new, naming_pattern_change=_naming_change(old, new))
            else:
                add("file_move", ts, old_path=old, new_path=new,
                    destination_directory_depth=max(0, _depth(posixpath.dirname(new))))
        elif kind == "copy":
            add("file_copy", ts, source_path=op["old"], dest_path=op["new"], is_backup=_ext(op["new"]) in BACKUP_EXT)
        elif kind == "delete":
            path = op["path"]
            last = reads.get(path)
            add("file_delete", ts, file_path=path, file_age_ms=int(ts - last[-1]) if last else None,
                was_temporary=_ext(path) in TEMP_EXT)
        elif kind == "tab_switch":
            switches += 1
            add("context_switch", ts, from_file=last_read_path, to_file=op["path"], trigger="file_read",
                switch_count=switches)
        elif kind == "side_by_side":
            add("cross_file_reference", ts, source_file=op["a"], target_file=op["b"],
                reference_type="sequential_access", interval_ms=0)
    return Reconstruction(events, blobs, times)


# ------------------------------------------------------------------------------------------------ recovery
def _norm(value: Any) -> str:
    s = unicodedata.normalize("NFKC", "" if value is None else str(value)).casefold()
    return re.sub(r"\s+", "", s)


def _similar(a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...], threshold: float) -> bool:
    for f in fields:
        x, y = _norm(a.get(f)), _norm(b.get(f))
        if x == y:
            continue
        if not x or not y or difflib.SequenceMatcher(None, x, y, autojunk=False).ratio() < threshold:
            return False
    return True


def _align(true: list[dict], pred: list[dict], fields: tuple[str, ...], threshold: float) -> int:
    """Size of the largest order-preserving matching (LCS with fuzzy equality)."""
    n, m = len(true), len(pred)
    if not n or not m:
        return 0
    prev = [0] * (m + 1)
    for i in range(1, n + 1):
        cur = [0] * (m + 1)
        for j in range(1, m + 1):
            if _similar(true[i - 1], pred[j - 1], fields, threshold):
                cur[j] = prev[j - 1] + 1
            else:
                cur[j] = max(prev[j], cur[j - 1])
        prev = cur
    return prev[m]


def score_recovery(true_events: Sequence[dict[str, Any]], recovered: Sequence[dict[str, Any]],
                   threshold: float = 0.9) -> dict[str, dict[str, float]]:
    """Precision and recall of recovered events per event type.

    A recovered event matches a true one of the same type when every key field (:data:`KEY_FIELDS`) is equal after
    Unicode normalisation, case folding and removing whitespace, or similar with a ``difflib`` ratio ≥
    ``threshold`` (OCR slips such as a lost underscore); matches keep the order of both sequences (largest
    order-preserving matching per type).

    Returns:
        ``{event_type: {"true": n, "recovered": m, "matched": k, "precision": k/m, "recall": k/n}}`` for every type
        present in either list (precision/recall ``None`` when undefined), plus ``"all"`` over all types.
    """
    out: dict[str, dict[str, float]] = {}
    tot = {"true": 0, "recovered": 0, "matched": 0}
    types = sorted({e.get("event_type") for e in [*true_events, *recovered]} & set(KEY_FIELDS))
    for t in types:
        tr = [e for e in true_events if e.get("event_type") == t]
        pr = [e for e in recovered if e.get("event_type") == t]
        k = _align(tr, pr, KEY_FIELDS[t], threshold)
        out[t] = {"true": len(tr), "recovered": len(pr), "matched": k,
                  "precision": k / len(pr) if pr else None, "recall": k / len(tr) if tr else None}
        tot["true"] += len(tr)
        tot["recovered"] += len(pr)
        tot["matched"] += k
    out["all"] = {**tot, "precision": tot["matched"] / tot["recovered"] if tot["recovered"] else None,
                  "recall": tot["matched"] / tot["true"] if tot["true"] else None}
    return out
