"""Build the static run viewer: ``RUN`` → ``RUN/view/`` (HTML pages + ``data/*.js`` + ``static/``).

The site needs no server: every page is a Jinja2-rendered HTML file; the data a page needs arrive as small
JavaScript files assigning ``window.FG_*`` (``file://`` pages cannot ``fetch()`` JSON in Chromium, a ``<script src>``
loads from disk). Index data (one row per item, per trajectory) load with the list pages; one item's answers and
contexts (``data/items/<id>.js``) and one trajectory's events (``data/traj/<id>.js``) load only when that item or
trajectory is opened, so a full default run (≈ 7K answer rows, 640 trajectories) opens in well under 2 s.

Reads (all optional except what each page shows; a missing table leaves its section with a one-line note):

* ``results/summary.parquet``, ``results/intervals.parquet``, ``results/paired.parquet`` (written by
  :mod:`filegram_ray.evaluate.report`; nothing is recomputed here), ``results/*.png``;
* ``results/results.parquet`` (answers), ``bench/items.parquet`` (public question and choices),
  ``bench/answers_key.parquet`` (key), ``results/contexts/…`` (the exact context each method returned,
  :func:`filegram_ray.evaluate.worker.context_path`);
* ``trajectories/<profile>/<task>/{events.json,meta.json,media/}``, ``engrams/<profile>/<task>.json`` (17-D
  fingerprint, reference §7.3), ``recordings/<profile>/<task>.mp4`` (guidance video);
* ``run.json`` (stage records), ``errors/<stage>.parquet`` (every stage's error rows).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from filegram_ray.evaluate.report import VALIDITY_METHODS
from filegram_ray.storage import RunDir, StorageError, refuse_missing_local_run

log = logging.getLogger(__name__)

__all__ = ["VALIDITY_ROWS", "build_view", "site_name"]

#: rows of the results table that check the reader rather than a memory method: the report's own list
#: (:data:`filegram_ray.evaluate.report.VALIDITY_METHODS`; oracle/random, and the reader rows of
#: :mod:`filegram_ray.evaluate.reader_validity`: empty, gold, wrong_user, order, masked)
VALIDITY_ROWS = VALIDITY_METHODS
#: sub-task columns in the report's order (reference §8.4 Table 3, :data:`filegram_ray.evaluate.scoring.SUB_TASK_ORDER`)
SUB_TASKS = ("AttrRec", "BehavFP", "ProfRec", "BehavInf", "TraceDis", "AnomDet", "ShiftAna", "FileGrd", "VisGrd")
CHANNELS = ("procedural", "semantic", "episodic")
#: characters of one snapshot / diff shown on a trajectory page (longer ones are cut with a note)
MEDIA_SHOW_CHARS = 20_000
PAGES = ("index", "items", "item", "trajectories", "trajectory", "run")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def site_name(ident: str) -> str:
    """File-name-safe, collision-free name of an item or trajectory id (``p1/T-01`` → ``p1__T-01``; an id holding
    other characters gets them replaced and a 8-hex sha256 suffix)."""
    flat = ident.replace("/", "__")
    safe = _SAFE.sub("_", flat)
    return safe if safe == flat and not safe.startswith(".") else f"{safe}-{hashlib.sha256(ident.encode()).hexdigest()[:8]}"


def _js(var: str, obj: Any) -> str:
    """``window.<var> = <json>;`` — deterministic (sorted keys), NaN → null."""
    return f"window.{var} = {json.dumps(_clean(obj), sort_keys=True, ensure_ascii=False, separators=(',', ':'))};\n"


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if obj != obj or obj in (float("inf"), float("-inf")) else round(obj, 4)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _table(run: RunDir, rel: str):
    """The table at ``rel`` or None when absent (a corrupt one raises StorageError naming it)."""
    return run.read_table(rel) if run.exists(rel) else None


# ----------------------------------------------------------------------------------------------------- results
def results_section(run: RunDir) -> dict[str, Any]:
    """The Results page's data: method rows and validity rows with every sub-task / channel cell as
    ``{mean, lo, hi}`` (lo/hi from ``results/intervals.parquet`` when present), paired-test markers, the plots.

    Returns ``{"columns", "rows", "validity", "has_intervals", "paired", "note"}``; ``rows`` are ordered as in
    ``summary.parquet``.
    """
    summary = _table(run, "results/summary.parquet")
    if summary is None:
        return {"columns": [], "rows": [], "validity": [], "has_intervals": False, "paired": [],
                "note": "results/summary.parquet is missing: run `filegram evaluate` first.",
                "reader": _reader_verdict(run)}
    intervals = _table(run, "results/intervals.parquet")
    paired = _table(run, "results/paired.parquet")
    cols = [c for c in ("avg", *SUB_TASKS, *CHANNELS, "multimodal", "real_world")
            if c in summary.columns and summary[c].drop_nulls().len()]
    ci: dict[tuple[str, str], dict[str, Any]] = {}
    if intervals is not None:
        from filegram_ray.evaluate.reader_validity import MIN_INTERVAL_PROFILES

        for r in intervals.iter_rows(named=True):  # as the report: no bracket from fewer than 5 profiles
            few = (r.get("n_profiles") or 0) < MIN_INTERVAL_PROFILES
            ci[(r["method"], r["cell"])] = {"lo": None if few else r["lo"], "hi": None if few else r["hi"],
                                            "n_profiles": r.get("n_profiles")}
    marks: dict[str, list[str]] = {}
    paired_rows = []
    no_interval = bool(ci) and all(v["lo"] is None for v in ci.values())  # fewer than 5 profiles everywhere
    if paired is not None:
        for r in paired.iter_rows(named=True):
            # a marker only where the report gives one: distinguishable AND the reader passes its gate (``mark``;
            # a paired table written before the gate has no such column: no marker)
            row = {k: r.get(k) for k in ("scope", "baseline", "method", "test", "n", "diff", "lo", "hi", "p_holm",
                                         "distinguishable", "mark")}
            if no_interval:
                row["lo"] = row["hi"] = None
            paired_rows.append(row)
            if r.get("scope") == "avg" and row["mark"]:
                marks.setdefault(r["method"], []).append(r["baseline"])
    rows, validity = [], []
    for r in summary.iter_rows(named=True):
        cells = {}
        for c in cols:
            v = r.get(c)
            cells[c] = {"mean": v, **ci.get((r["method"], c), {})}
        failed = bool(r.get("failed"))
        if failed:  # no result: the report shows no number for it, nor does the viewer
            cells = {c: {"mean": None} for c in cols}
        row = {"method": r["method"], "n": r.get("n"), "n_errors": r.get("n_errors"), "cells": cells,
               "tokens_in": r.get("tokens_in"), "marks": sorted(marks.get(r["method"], [])), "failed": failed}
        (validity if r["method"] in VALIDITY_ROWS else rows).append(row)
    note = "" if intervals is not None else ("No interval table (results/intervals.parquet) in this run: an older "
                                             "evaluate wrote it; the plain scores are shown, intervals are missing.")
    from filegram_ray.evaluate.stage import stale_results_note

    stale = stale_results_note(run)
    if stale:
        note = (note + " " if note else "") + stale[0].upper() + stale[1:] + "."
    return {"columns": cols, "rows": rows, "validity": validity, "has_intervals": intervals is not None,
            "paired": paired_rows, "note": note, "reader": _reader_verdict(run)}


def _reader_verdict(run: RunDir) -> dict[str, Any]:
    """What ``results/findings.json`` says of the reader and the findings: ``{known, reads, why, findings:
    [{id, statement, verdict, not_tested}]}`` (``known`` False when the file is absent or unreadable)."""
    out: dict[str, Any] = {"known": False, "reads": False, "why": "", "findings": []}
    if not run.exists("results/findings.json"):
        return out
    try:
        doc = run.read_json("results/findings.json")
    except StorageError as exc:
        log.warning("view: %s", exc)
        return out
    if not isinstance(doc, dict):
        return out
    reader = doc.get("reader") if isinstance(doc.get("reader"), dict) else {}
    out.update(known=True, reads=bool(reader.get("can_rank")), why=str(reader.get("why") or ""))
    for f in doc.get("findings") or []:
        if isinstance(f, dict):
            out["findings"].append({k: str(f.get(k) or "") for k in ("id", "statement", "verdict", "not_tested")})
    return out


# -------------------------------------------------------------------------------------------------------- items
def _contexts(run: RunDir) -> dict[tuple[str, str], dict[str, Any]]:
    """(method, question_id) → {text, chars, tokens} from every ``results/contexts/**.parquet`` (a row without a
    question id is skipped; a null text is shown as an empty context)."""
    import polars as pl

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for rel in run.walk_files("results/contexts"):
        if not rel.endswith(".parquet"):
            continue
        method = rel.split("/")[-2]
        try:
            df = run.read_table(rel)
            rows = df.select(pl.col("question_id"), pl.col("context_text"), pl.col("context_chars"),
                             pl.col("context_tokens")).iter_rows(named=True)
        except (StorageError, pl.exceptions.PolarsError) as exc:
            log.warning("view: %s: %s", rel, exc)
            continue
        for r in rows:
            if r["question_id"] is None:
                continue
            out[(method, str(r["question_id"]))] = {"text": str(r["context_text"] or ""), "chars": r["context_chars"],
                                                    "tokens": r["context_tokens"]}
    return out


#: open-ended scores (0–100, the Likert judge's (s − 1) / 4 · 100) at or above which an answer shows as right
#: (judge 4–5: the reference value named, alone), at or below which as wrong (judge 1–2: another value or nothing
#: inferred); between them (3: the right value among others) as partial — the rubric of
#: :class:`filegram_ray.evaluate.scoring.RubricJudge`
OPEN_RIGHT, OPEN_WRONG = 75.0, 25.0


def outcome(answer: dict[str, Any], is_open: bool) -> str:
    """How one answer row reads: ``"1"`` right, ``"0"`` wrong, ``"p"`` partial (open-ended only), ``"e"`` error
    (never answered, or no score). Multiple choice: ``is_correct``; open-ended: the score against
    :data:`OPEN_RIGHT` / :data:`OPEN_WRONG`."""
    if answer.get("status") != "ok":
        return "e"
    if not is_open:
        return "1" if answer.get("is_correct") else "0"
    score = answer.get("score")
    if score is None:
        return "e"
    return "1" if score >= OPEN_RIGHT else "0" if score <= OPEN_WRONG else "p"


def items_section(run: RunDir, data: Path) -> dict[str, Any]:
    """Write ``data/items_index.js`` (``window.FG_ITEMS``: per item ``[id, page name, sub-task, channel, setting,
    {method: [outcome, score]}, open-ended]``, :func:`outcome`), one ``data/items/<name>.js`` (``window.FG_ITEM``)
    per item and one ``data/ctx/<sha256[:20]>.js`` (``window.FG_CTX[ref]``) per distinct context text (loaded only
    when a method's answer is shown); returns counts for the page. Nothing is written when
    ``results/results.parquet`` is missing; a row without a question id or method is left out and counted."""
    results = _table(run, "results/results.parquet")
    if results is None:
        (data / "items_index.js").write_text(_js("FG_ITEMS", {"methods": [], "rows": [], "sub_tasks": []}))
        return {"n_items": 0, "n_rows": 0, "note": "results/results.parquet is missing."}
    items = _table(run, "bench/items.parquet")
    key = _table(run, "bench/answers_key.parquet")
    public = {r["question_id"]: r for r in items.iter_rows(named=True)} if items is not None else {}
    keys = {r["question_id"]: r for r in key.iter_rows(named=True)} if key is not None else {}
    contexts = _contexts(run)
    by_item: dict[str, list[dict[str, Any]]] = {}
    skipped = 0
    for r in results.iter_rows(named=True):
        if r.get("question_id") is None or r.get("method") is None:
            skipped += 1
            continue
        r["question_id"], r["method"] = str(r["question_id"]), str(r["method"])
        by_item.setdefault(r["question_id"], []).append(r)
    methods = sorted({r["method"] for rows in by_item.values() for r in rows},
                     key=lambda m: (m in VALIDITY_ROWS, m))
    (data / "items").mkdir(parents=True, exist_ok=True)
    (data / "ctx").mkdir(parents=True, exist_ok=True)
    rows, written = [], set()
    for qid in sorted(by_item):
        answers = sorted(by_item[qid], key=lambda r: (r["method"] in VALIDITY_ROWS, r["method"]))
        first = answers[0]
        pub = public.get(qid, {})
        name = site_name(qid)
        try:
            choices = json.loads(pub.get("choices") or "[]")
        except (TypeError, ValueError):
            choices = []
        is_open = bool(first.get("is_open")) if first.get("is_open") is not None else not choices
        rows.append([qid, name, first.get("sub_track") or "", first.get("channel") or "", first.get("setting") or "",
                     {a["method"]: [outcome(a, is_open), a.get("score")] for a in answers}, is_open])
        k = keys.get(qid, {})
        doc = {"question_id": qid, "sub_track": first.get("sub_track"), "channel": first.get("channel"),
               "setting": first.get("setting"), "question": pub.get("question", ""), "choices": choices,
               "key": k.get("correct", first.get("correct")), "key_text": k.get("correct_text", ""),
               "is_open": is_open, "answers": []}
        for a in answers:
            ctx = contexts.get((a["method"], qid))
            ref = None
            if ctx is not None:  # one file per distinct context text: items of one spec often share it
                ref = hashlib.sha256(ctx["text"].encode("utf-8")).hexdigest()[:20]
                if ref not in written:
                    written.add(ref)
                    (data / "ctx" / f"{ref}.js").write_text(
                        f"(window.FG_CTX = window.FG_CTX || {{}})[{json.dumps(ref)}] = "
                        f"{json.dumps(ctx['text'], ensure_ascii=False)};\n", encoding="utf-8")
            doc["answers"].append({
                "method": a["method"], "status": a.get("status"), "error": a.get("error") or "",
                "choice": a.get("choice") or "", "score": a.get("score"), "correct": a.get("is_correct"),
                "outcome": outcome(a, is_open), "likert": a.get("likert"),
                "raw": a.get("answer_text") or "", "tokens_out": a.get("tokens_out"), "context_ref": ref,
                "context_tokens": None if ctx is None else ctx["tokens"],
                "context_chars": None if ctx is None else ctx["chars"]})
        (data / "items" / f"{name}.js").write_text(_js("FG_ITEM", doc), encoding="utf-8")
    sub_tasks = [s for s in SUB_TASKS if any(r[2] == s for r in rows)]
    sub_tasks += sorted({r[2] for r in rows if r[2] and r[2] not in sub_tasks})
    (data / "items_index.js").write_text(_js("FG_ITEMS", {"methods": methods, "rows": rows, "sub_tasks": sub_tasks}),
                                         encoding="utf-8")
    notes = []
    if not contexts:
        notes.append("This run recorded no contexts (results/contexts/ is written by evaluate from this version on): "
                     "item pages show answers without context text.")
    if skipped:
        notes.append(f"{skipped} rows of results/results.parquet have no question id or method and are not shown.")
    return {"n_items": len(rows), "n_rows": results.height, "note": " ".join(notes)}


# ------------------------------------------------------------------------------------------------- trajectories
def _trajectory_ids(run: RunDir) -> list[str]:
    out = []
    for p in run.listdir("trajectories"):
        if p.startswith(".") or p.endswith((".parquet", ".json")):
            continue
        for t in run.listdir(f"trajectories/{p}"):
            if run.exists(f"trajectories/{p}/{t}/events.json"):
                out.append(f"{p}/{t}")
    return sorted(out)


#: per event type, the fields naming what it touched, as (from, to) (filegram_ray/schema/events.py)
_PATH_PAIRS = {"file_rename": ("old_path", "new_path"), "file_move": ("old_path", "new_path"),
               "file_copy": ("source_path", "dest_path"), "context_switch": ("from_file", "to_file"),
               "cross_file_reference": ("source_file", "target_file")}
#: the single field naming what an event touched, first present wins (file events, file_browse's
#: directory_path, dir_create's dir_path, file_search's query, session_start's target_directory, the OS watcher's
#: ``path``; tool calls and errors name their tool)
_PATH_FIELDS = ("file_path", "directory_path", "dir_path", "query", "target_directory", "path", "tool_name")


def event_path(e: dict[str, Any]) -> str:
    """What an event touched, for the timeline: ``from → to`` for renames, moves, copies, context switches and
    cross-file references (``→ to`` when there is no ``from``), else the first of :data:`_PATH_FIELDS`; an
    ``fs_snapshot`` says how many files it saw. ``""`` for events that touch nothing (iterations, replies)."""
    pair = _PATH_PAIRS.get(str(e.get("event_type")))
    if pair is None and (e.get("source_path") or e.get("dest_path")):
        pair = ("source_path", "dest_path")
    if pair is not None and (e.get(pair[0]) or e.get(pair[1])):
        a, b = (str(e.get(k) or "") for k in pair)
        return f"{a} → {b}" if a else f"→ {b}"
    for k in _PATH_FIELDS:
        if e.get(k):
            return str(e[k])
    if e.get("event_type") == "fs_snapshot" and e.get("total_files") is not None:
        return f"{e.get('total_files')} files, depth {e.get('max_depth', '?')}"
    return ""


def local_file_ok(run: RunDir, rel: str) -> bool:
    """True unless ``rel`` is, in a local run, a symbolic link or a path whose real location is outside the run
    (a link in one of its folders): its bytes are never copied into the site. Object-store runs have no links."""
    if not run.is_local:
        return True
    full = run.full(rel)
    if os.path.islink(full):
        return False
    root = os.path.realpath(run.root)
    return os.path.realpath(full).startswith(root + os.sep)


def _media(run: RunDir, base: str, ref: Any) -> str | None:
    if not isinstance(ref, dict) or not ref.get("path"):
        return None
    rel = f"{base}/media/{ref['path']}"
    try:
        if not local_file_ok(run, rel):
            return f"[media file {ref['path']} is a link out of the run: not shown]"
        text = run.read_bytes(rel).decode("utf-8", errors="replace")
    except StorageError:
        return f"[missing media file {ref['path']}]"
    if len(text) > MEDIA_SHOW_CHARS:
        return text[:MEDIA_SHOW_CHARS] + f"\n[… {len(text) - MEDIA_SHOW_CHARS:,} more characters not shown]"
    return text


def _millis(value: Any) -> float | None:
    """An event timestamp in epoch milliseconds, or None when it is not a finite number (a string, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        return None
    return float(value)


def fingerprint_svg(values: list[float], mean: list[float] | None, names: list[str]) -> str:
    """A small inline SVG bar chart of a 17-D fingerprint (reference §7.3) against the profile mean.

    Each feature is drawn relative to ``max(|value|, |mean|)`` of that feature (features have different units), a
    bar for this trajectory and a tick for the profile mean. Returns the SVG markup (escaped names in ``<title>``).
    """
    from html import escape

    w, bar_h, gap, label_w = 200, 12, 4, 180
    h = len(values) * (bar_h + gap) + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="fp" width="{label_w + w + 60}" height="{h}" '
             f'role="img" aria-label="fingerprint">']
    for i, v in enumerate(values):
        m = mean[i] if mean else None
        scale = max(abs(v or 0.0), abs(m or 0.0)) or 1.0
        y = 2 + i * (bar_h + gap)
        bw = w * abs(v or 0.0) / scale
        name = escape(names[i] if i < len(names) else f"f{i}")
        parts.append(f'<text x="0" y="{y + bar_h - 2}" font-size="10">{name}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{bar_h}" fill="#4a7bd0">'
                     f'<title>{name}: {v:.4g}</title></rect>')
        if m is not None:
            mx = label_w + w * abs(m) / scale
            parts.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{y - 1}" y2="{y + bar_h + 1}" stroke="#d0452a" '
                         f'stroke-width="2"><title>profile mean: {m:.4g}</title></line>')
        parts.append(f'<text x="{label_w + w + 4}" y="{y + bar_h - 2}" font-size="10">{v:.3g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def trajectories_section(run: RunDir, data: Path, site: Path) -> dict[str, Any]:
    """Write ``data/traj_index.js`` (``window.FG_TRAJ``) and one ``data/traj/<name>.js`` (``window.FG_T``) per
    trajectory (events, snapshots/diffs, perturbation, fingerprint SVG); guidance videos are copied to
    ``media/``. Returns counts for the page. A trajectory whose events.json cannot be read becomes an error
    entry (its message shown), never a failed build."""
    from filegram_ray.memory.constants import FINGERPRINT_FEATURES

    ids = _trajectory_ids(run)
    names = [f"{dim} {key}" for dim, _, key in FINGERPRINT_FEATURES]  # e.g. "A search_ratio" (reference §7.3)
    fps: dict[str, list[float]] = {}
    for tid in ids:
        rel = f"engrams/{tid}.json"
        if run.exists(rel):
            try:
                fp = run.read_json(rel).get("fingerprint")
                if isinstance(fp, list) and fp:
                    fps[tid] = [float(x) for x in fp]
            except (StorageError, TypeError, ValueError, AttributeError) as exc:
                log.warning("view: %s: %s", rel, exc)
    means: dict[str, list[float]] = {}
    for pid in sorted({t.split("/")[0] for t in fps}):
        rows = [v for t, v in fps.items() if t.split("/")[0] == pid]
        means[pid] = [sum(col) / len(col) for col in zip(*rows)]
    (data / "traj").mkdir(parents=True, exist_ok=True)
    index = []
    for tid in ids:
        pid, task = tid.split("/", 1)
        base = f"trajectories/{tid}"
        name = site_name(tid)
        doc: dict[str, Any] = {"id": tid, "profile": pid, "task": task, "events": [], "error": ""}
        try:
            events = run.read_json(f"{base}/events.json")
            if not isinstance(events, list):
                raise ValueError("events.json: expected a list of events")
        except (StorageError, ValueError) as exc:
            doc["error"] = str(exc)
            events = []
        meta = {}
        if run.exists(f"{base}/meta.json"):
            try:
                meta = run.read_json(f"{base}/meta.json")
            except StorageError as exc:
                doc["error"] = doc["error"] or str(exc)
        pert = meta.get("perturbation") if isinstance(meta, dict) else None
        doc["perturbation"] = pert
        stamps = [_millis(e.get("timestamp")) for e in events if isinstance(e, dict)]
        t0 = next((t for t in stamps if t is not None), 0.0)
        bad_stamps = 0
        for e in events:
            if not isinstance(e, dict):
                continue
            ts = _millis(e.get("timestamp"))
            bad_stamps += ts is None and e.get("timestamp") is not None
            doc["events"].append({
                "type": str(e.get("event_type", "?")), "path": event_path(e),
                "t": None if ts is None else (ts - t0) / 1000.0,
                "perturbed": bool(e.get("perturbed") or e.get("is_perturbed")),
                "snapshot": _media(run, base, e.get("media_ref")),
                "diff": _media(run, base, e.get("media_ref_diff") or e.get("diff_media"))})
        if bad_stamps:
            doc["error"] = doc["error"] or (f"{base}/events.json: {bad_stamps} event(s) with a timestamp that is not "
                                            "a number (epoch milliseconds): shown without a time")
        video = f"recordings/{tid}.mp4"
        if run.exists(video) and not local_file_ok(run, video):
            doc["error"] = doc["error"] or f"{video} is a link out of the run: not copied into the site"
        elif run.exists(video):
            dest = site / "media" / f"{name}.mp4"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(run.read_bytes(video))
            doc["video"] = f"media/{name}.mp4"
        if tid in fps:
            doc["fingerprint_svg"] = fingerprint_svg(fps[tid], means.get(pid), names)
        (data / "traj" / f"{name}.js").write_text(_js("FG_T", doc), encoding="utf-8")
        index.append([tid, name, pid, task, len(doc["events"]), pert is not None, bool(doc.get("video")),
                      doc["error"]])
    (data / "traj_index.js").write_text(_js("FG_TRAJ", index), encoding="utf-8")
    return {"n_trajectories": len(index), "n_fingerprints": len(fps)}


# ----------------------------------------------------------------------------------------------------------- run
def run_section(run: RunDir) -> dict[str, Any]:
    """run.json's stages (seconds, CPU seconds, peak memory, units, errors) and the error rows of the run
    (answers, Engrams, trajectories), each with its message."""
    stages = []
    info: dict[str, Any] = {}
    note = ""
    if run.exists("run.json"):
        try:
            info = run.read_json("run.json")
        except StorageError as exc:
            info, note = {}, str(exc)
        if not isinstance(info, dict):
            info, note = {}, f"{run.url('run.json')}: not a JSON object (a {type(info).__name__}): no stage shown"
    from filegram_ray.stage_list import STAGES

    order = {s.name: i for i, s in enumerate(STAGES)}
    recs = info.get("stages") if isinstance(info.get("stages"), dict) else {}
    for name, rec in sorted(recs.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):  # pipeline order
        if not isinstance(rec, dict):
            continue
        units = rec.get("units") if isinstance(rec.get("units"), dict) else {}
        stages.append({"stage": name, "seconds": rec.get("seconds"), "cpu_s": rec.get("cpu_s"),
                       "memory_mb": rec.get("peak_memory_mb"), "driver_memory_mb": rec.get("driver_peak_memory_mb"),
                       "planned": units.get("planned"), "done": units.get("done"), "skipped": units.get("skipped"),
                       "failed": units.get("failed"),
                       "errors": rec.get("n_error_rows", rec.get("n_errors", units.get("failed")))})
    errors = []
    results = _table(run, "results/results.parquet")
    if results is not None and "status" in results.columns:
        for r in results.filter(results["status"] != "ok").iter_rows(named=True):
            errors.append({"where": "evaluate", "unit": f"{r.get('method')} {r.get('question_id')}",
                           "error": r.get("error")})
    for r in run.error_rows():  # every stage's error rows (errors/<stage>.parquet), as the runner wrote them
        errors.append({"where": r.get("stage"), "unit": r.get("unit"),
                       "error": f"{r.get('error_type')}: {r.get('error')}"})
    return {"stages": stages, "errors": errors, "seed": info.get("seed"), "note": note}


# --------------------------------------------------------------------------------------------------------- build
def _render(site: Path, ctx: dict[str, Any]) -> None:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("filegram_ray.view", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v, d=1: "–" if v is None else f"{v:.{d}f}"
    for page in PAGES:
        html = env.get_template(f"{page}.html.j2").render(page=page, **ctx)
        (site / f"{page}.html").write_text(html, encoding="utf-8")


#: the file that marks a folder as a site this command wrote (``--out`` may replace such a folder, nothing else)
SITE_MARK = ".filegram-view"
#: what the top level of a viewer folder written before :data:`SITE_MARK` existed holds
_OLD_SITE = {"index.html", "items.html", "item.html", "trajectories.html", "trajectory.html", "run.html", "static",
             "data", "img", "media"}
#: CJK fonts served with the site, in the order a browser tries them (the ``justmytype-intl-cjk`` wheel,
#: filegram_ray/models.yaml): Simplified Chinese first (the project's Chinese profiles), then Japanese kana and
#: Korean Hangul
_SITE_FONTS = ("NotoSansSC", "NotoSansJP", "NotoSansKR")


def _site_fonts(site: Path) -> None:
    """Serve the CJK text of the site in Noto Sans: ``static/fonts.css`` with one ``@font-face`` per font the
    site's text needs, each font cut (fontTools' subsetter) to the characters the site uses, so a system without a
    CJK font shows names instead of boxes. A site without CJK text gets an empty ``fonts.css``. Same site text →
    same bytes."""
    import io

    text = set()
    for f in sorted(site.rglob("*")):
        if f.is_file() and f.suffix in (".js", ".html"):
            text.update(f.read_text(encoding="utf-8"))
    wanted = sorted(ch for ch in text if ord(ch) >= 0x2E80)  # CJK radicals, kana, Han, Hangul, full-width forms
    css = []
    if wanted:
        from fontTools import subset
        from fontTools.ttLib import TTFont

        from rendering.glyphs import font_chain  # the Noto files, checked against filegram_ray/models.yaml

        left = {ord(c) for c in wanted}
        for font in (f for name in _SITE_FONTS for f in font_chain() if f.name == name):
            with TTFont(font.path, lazy=True) as f:
                mine = sorted(left & set(f.getBestCmap()))
            if not mine:
                continue
            left -= set(mine)
            opts = subset.Options()
            opts.layout_features, opts.name_IDs, opts.notdef_outline = ["*"], ["*"], True
            sub = subset.Subsetter(opts)
            logging.getLogger("fontTools").setLevel(logging.WARNING)  # its per-table notes are not ours to print
            tt = subset.load_font(font.path, opts)
            tt.recalcTimestamp = False  # head.modified stays the font's own: same site text, same bytes
            sub.populate(unicodes=mine)
            sub.subset(tt)
            buf = io.BytesIO()
            tt.save(buf)
            (site / "static" / f"{font.name}.ttf").write_bytes(buf.getvalue())
            css.append(f'@font-face {{ font-family: "FG {font.name}"; src: url("{font.name}.ttf") '
                       'format("truetype"); font-display: swap; }')
    (site / "static" / "fonts.css").write_text("\n".join(css) + ("\n" if css else ""), encoding="utf-8")


def _assemble(run: RunDir, site: Path) -> dict[str, Any]:
    data = site / "data"
    data.mkdir(parents=True)
    static = site / "static"
    shutil.copytree(Path(__file__).with_name("static"), static)
    plots, skipped = [], []
    for png in ("subtasks.png", "channels.png", "text_vs_multimodal.png"):
        rel = f"results/{png}"
        if run.exists(rel) and not local_file_ok(run, rel):
            skipped.append(rel)  # a link out of the run: its target is never copied into the site
        elif run.exists(rel):
            (site / "img").mkdir(exist_ok=True)
            (site / "img" / png).write_bytes(run.read_bytes(rel))
            plots.append(f"img/{png}")
    results = results_section(run)
    if skipped:
        results["note"] = (results["note"] + " " if results["note"] else "") + \
            f"Not shown: {', '.join(skipped)} (a link out of the run)."
    ctx = {"run_url": run.uri, "results": results, "items": items_section(run, data),
           "trajectories": trajectories_section(run, data, site), "run": run_section(run), "plots": plots}
    _render(site, ctx)
    _site_fonts(site)
    (site / SITE_MARK).write_text("a static run viewer written by `filegram view`; `filegram view --out` replaces "
                                  "this folder\n", encoding="utf-8")
    return ctx


def _is_site(path: Path) -> bool:
    """``path`` is a folder this command wrote (it holds :data:`SITE_MARK`, or, written before the mark existed,
    an index.html and static/view.js and nothing but viewer files at its top level)."""
    if (path / SITE_MARK).is_file():
        return True
    names = {p.name for p in path.iterdir()}
    return (path / "index.html").is_file() and (path / "static" / "view.js").is_file() and names <= _OLD_SITE


def _check_target(run: RunDir, target: Path) -> None:
    """Refuse a site folder that is not new, empty or an earlier site, that is the run or holds it, or that is a
    link: ``--out`` replaces the folder whole, and nothing else may be lost.

    Raises:
        UserError: one line naming the folder and why.
    """
    from filegram_ray.errors import UserError

    if target.is_symlink():
        raise UserError(f"filegram view --out {target}: a symbolic link; give a folder path (nothing was changed)")
    if run.is_local:
        root = Path(os.path.realpath(run.root))
        real = Path(os.path.realpath(target))
        if real == root or root.is_relative_to(real):
            raise UserError(f"filegram view --out {target}: this folder holds the run {run.root}; the site replaces "
                            "its folder whole (nothing was changed)")
        if real.is_relative_to(root) and real != root / "view":
            raise UserError(f"filegram view --out {target}: inside the run {run.root}, where only RUN/view is the "
                            "viewer's; give a folder outside the run (nothing was changed)")
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError(f"filegram view --out {target}: not a folder (a file is there; nothing was changed)")
    if any(target.iterdir()) and not _is_site(target):
        raise UserError(f"filegram view --out {target}: a folder holding other files, not an earlier site of "
                        "`filegram view` (the site replaces its folder whole; give a new or empty folder)")


def _sweep(parent: Path, name: str) -> None:
    """Remove the temporary folders of earlier builds of ``parent/name`` that were killed: ``.<name>.tmp-<pid>-…``
    whose process is gone on this machine (a temporary folder of an older version, without a pid, when it is
    more than an hour old)."""
    for p in parent.glob(f".{name}.tmp-*"):
        pid = p.name[len(f".{name}.tmp-"):].split("-", 1)[0]
        try:
            if pid.isdigit():
                os.kill(int(pid), 0)
                continue  # a build running now
            if time.time() - p.lstat().st_mtime < 3600:
                continue
        except ProcessLookupError:
            pass
        except (PermissionError, OSError):
            continue  # alive under another user, or not ours to judge
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            log.info("view: removed %s, left by a build that did not finish", p)


def build_view(run: RunDir | str, out: str | os.PathLike | None = None) -> str:
    """Write the static viewer of ``run`` and return the path (or URL) of its ``index.html``.

    Args:
        run: the run directory (local or object store, :class:`~filegram_ray.storage.RunDir`).
        out: local folder for the site; None: ``RUN/view/`` (built in a local temporary folder, then copied in,
            each file atomically, for an object-store run). It must be new, empty or an earlier site of this
            command (one holding :data:`SITE_MARK`): the site replaces it whole.

    The site is built in a temporary sibling folder (``.<name>.tmp-<pid>-…``) and moved into place whole: a failed
    build leaves the previous site as it was, and the temporary folder of a build that was killed is removed by the
    next one. Same run → same bytes (sorted keys and rows, no timestamps). Nothing a link in the run points to is
    copied into the site (:func:`local_file_ok`).

    Raises:
        StorageError: ``run`` is a local path that does not exist (nothing is created), has no ``run.json``,
            ``results/`` or ``trajectories/`` (nothing to show), or a table is unreadable (names the file).
        UserError: ``out`` is a file, a link, a folder of other files, the run or a folder holding it
            (:func:`_check_target`; nothing is changed).
    """
    if not isinstance(run, RunDir):
        refuse_missing_local_run(run, "filegram view")  # RunDir would create it: a typo must not
        run = RunDir(str(run))
    if not any(run.exists(p) for p in ("run.json", "results", "trajectories")):
        raise StorageError(f"{run.uri}: not a run directory (no run.json, results/ or trajectories/)")
    if out is None and not run.is_local:
        with tempfile.TemporaryDirectory(prefix="filegram-view-") as tmp:
            site = Path(tmp) / "view"
            _assemble(run, site)
            run.remove("view")
            run.put_tree(site, "view")
        return run.url("view/index.html")
    target = Path(out) if out is not None else Path(run.full("view"))
    target = target.absolute()
    _check_target(run, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep(target.parent, target.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=target.parent))
    try:
        site = tmp / "site"
        _assemble(run, site)
        if target.exists():
            target.rename(tmp / "old")
        site.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target / "index.html")


def make_server(site_dir: str | os.PathLike, port: int = 8000):
    """An HTTP server for ``site_dir`` bound to 127.0.0.1 only (``port`` 0: a free one); call ``serve_forever()``.

    Raises:
        OSError: the port is taken (EADDRINUSE).
    """
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=os.fspath(site_dir))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(site_dir: str | os.PathLike, port: int = 8000) -> None:  # pragma: no cover - runs until Ctrl-C
    """Serve ``site_dir`` on ``http://127.0.0.1:<port>/`` until interrupted (loopback only).

    Raises:
        UserError: the port cannot be bound (taken, or privileged), naming it.
    """
    from filegram_ray.errors import UserError

    try:
        httpd = make_server(site_dir, port)
    except OSError as exc:
        raise UserError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc} (choose another --port)") from exc
    with httpd:
        print(f"serving {site_dir} on http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass


def view_after_pipeline(run: RunDir) -> str | None:
    """Build ``RUN/view/`` at the end of a pipeline that evaluated and print ``open <index.html>`` (its last line).

    The evaluate results are already written by then: a viewer that fails to build is logged with its traceback and
    the pipeline still succeeds (``filegram view RUN`` rebuilds it). Returns the index path, or None on failure.
    """
    try:
        index = build_view(run)
    except Exception:  # noqa: BLE001 - the run's results stand; the traceback is kept in the log
        log.exception("view: the run viewer could not be built (rerun `filegram view %s`)", run.uri)
        return None
    print(f"open {index}", flush=True)
    return index
