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
from pathlib import Path
from typing import Any

from filegram_ray.storage import RunDir, StorageError, refuse_missing_local_run

log = logging.getLogger(__name__)

__all__ = ["VALIDITY_ROWS", "build_view", "site_name"]

#: rows of the results table that check the reader rather than a memory method (evaluate's validity rows:
#: oracle/random from :func:`filegram_ray.evaluate.reader_validity.validity_rows`, gold/order/wrong_user from
#: :mod:`filegram_ray.evaluate.reader_validity`)
VALIDITY_ROWS = ("oracle", "random", "gold", "order", "wrong_user")
SUB_TASKS = ("AttrRec", "ProfRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "FileGrd")
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
                "note": "results/summary.parquet is missing: run `filegram evaluate` first."}
    intervals = _table(run, "results/intervals.parquet")
    paired = _table(run, "results/paired.parquet")
    cols = [c for c in ("avg", *SUB_TASKS, *CHANNELS, "multimodal", "real_world")
            if c in summary.columns and summary[c].drop_nulls().len()]
    ci: dict[tuple[str, str], dict[str, Any]] = {}
    if intervals is not None:
        for r in intervals.iter_rows(named=True):
            ci[(r["method"], r["cell"])] = {"lo": r["lo"], "hi": r["hi"], "n_profiles": r.get("n_profiles")}
    marks: dict[str, list[str]] = {}
    paired_rows = []
    if paired is not None:
        for r in paired.iter_rows(named=True):
            paired_rows.append({k: r.get(k) for k in ("scope", "baseline", "method", "test", "n", "diff", "lo", "hi",
                                                       "p_holm", "distinguishable")})
            if r.get("scope") == "avg" and r.get("distinguishable"):
                marks.setdefault(r["method"], []).append(r["baseline"])
    rows, validity = [], []
    for r in summary.iter_rows(named=True):
        cells = {}
        for c in cols:
            v = r.get(c)
            cells[c] = {"mean": v, **ci.get((r["method"], c), {})}
        row = {"method": r["method"], "n": r.get("n"), "n_errors": r.get("n_errors"), "cells": cells,
               "tokens_in": r.get("tokens_in"), "marks": sorted(marks.get(r["method"], []))}
        (validity if r["method"] in VALIDITY_ROWS else rows).append(row)
    note = "" if intervals is not None else ("No interval table (results/intervals.parquet) in this run: an older "
                                             "evaluate wrote it; the plain scores are shown, intervals are missing.")
    from filegram_ray.evaluate.stage import stale_results_note

    stale = stale_results_note(run)
    if stale:
        note = (note + " " if note else "") + stale[0].upper() + stale[1:] + "."
    return {"columns": cols, "rows": rows, "validity": validity, "has_intervals": intervals is not None,
            "paired": paired_rows, "note": note}


# -------------------------------------------------------------------------------------------------------- items
def _contexts(run: RunDir) -> dict[tuple[str, str], dict[str, Any]]:
    """(method, question_id) → {text, chars, tokens} from every ``results/contexts/**.parquet``."""
    import polars as pl

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for rel in run.walk_files("results/contexts"):
        if not rel.endswith(".parquet"):
            continue
        method = rel.split("/")[-2]
        try:
            df = run.read_table(rel)
        except StorageError as exc:
            log.warning("view: %s", exc)
            continue
        for r in df.select(pl.col("question_id"), pl.col("context_text"), pl.col("context_chars"),
                           pl.col("context_tokens")).iter_rows(named=True):
            out[(method, r["question_id"])] = {"text": r["context_text"], "chars": r["context_chars"],
                                               "tokens": r["context_tokens"]}
    return out


def items_section(run: RunDir, data: Path) -> dict[str, Any]:
    """Write ``data/items_index.js`` (``window.FG_ITEMS``), one ``data/items/<name>.js`` (``window.FG_ITEM``) per
    item and one ``data/ctx/<sha256[:20]>.js`` (``window.FG_CTX[ref]``) per distinct context text (loaded only
    when a method's answer is shown); returns counts for the page. Nothing is written when ``results/results.parquet`` is missing."""
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
    for r in results.iter_rows(named=True):
        by_item.setdefault(r["question_id"], []).append(r)
    methods = sorted({r["method"] for r in results.iter_rows(named=True)},
                     key=lambda m: (m in VALIDITY_ROWS, m))
    (data / "items").mkdir(parents=True, exist_ok=True)
    (data / "ctx").mkdir(parents=True, exist_ok=True)
    rows, written = [], set()
    for qid in sorted(by_item):
        answers = sorted(by_item[qid], key=lambda r: (r["method"] in VALIDITY_ROWS, r["method"]))
        first = answers[0]
        pub = public.get(qid, {})
        name = site_name(qid)
        rows.append([qid, name, first.get("sub_track") or "", first.get("channel") or "", first.get("setting") or "",
                     {a["method"]: (None if a.get("status") != "ok" else int(bool(a.get("is_correct"))))
                      for a in answers}])
        try:
            choices = json.loads(pub.get("choices") or "[]")
        except ValueError:
            choices = []
        k = keys.get(qid, {})
        doc = {"question_id": qid, "sub_track": first.get("sub_track"), "channel": first.get("channel"),
               "setting": first.get("setting"), "question": pub.get("question", ""), "choices": choices,
               "key": k.get("correct", first.get("correct")), "key_text": k.get("correct_text", ""),
               "answers": []}
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
                "raw": a.get("answer_text") or "", "tokens_out": a.get("tokens_out"), "context_ref": ref,
                "context_tokens": None if ctx is None else ctx["tokens"],
                "context_chars": None if ctx is None else ctx["chars"]})
        (data / "items" / f"{name}.js").write_text(_js("FG_ITEM", doc), encoding="utf-8")
    sub_tasks = [s for s in SUB_TASKS if any(r[2] == s for r in rows)]
    (data / "items_index.js").write_text(_js("FG_ITEMS", {"methods": methods, "rows": rows, "sub_tasks": sub_tasks}),
                                         encoding="utf-8")
    return {"n_items": len(rows), "n_rows": results.height,
            "note": "" if contexts else "This run recorded no contexts (results/contexts/ is written by evaluate "
                                        "from this version on): item pages show answers without context text."}


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


def _event_path(e: dict[str, Any]) -> str:
    if e.get("source_path") or e.get("dest_path"):
        return f"{e.get('source_path', '')} → {e.get('dest_path', '')}"
    for k in ("file_path", "dir_path", "path", "query"):
        if e.get(k):
            return str(e[k])
    return ""


def _media(run: RunDir, base: str, ref: Any) -> str | None:
    if not isinstance(ref, dict) or not ref.get("path"):
        return None
    rel = f"{base}/media/{ref['path']}"
    try:
        text = run.read_bytes(rel).decode("utf-8", errors="replace")
    except StorageError:
        return f"[missing media file {ref['path']}]"
    if len(text) > MEDIA_SHOW_CHARS:
        return text[:MEDIA_SHOW_CHARS] + f"\n[… {len(text) - MEDIA_SHOW_CHARS:,} more characters not shown]"
    return text


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
        t0 = next((e.get("timestamp") for e in events if isinstance(e, dict) and e.get("timestamp") is not None), 0)
        for e in events:
            if not isinstance(e, dict):
                continue
            ts = e.get("timestamp")
            doc["events"].append({
                "type": e.get("event_type", "?"), "path": _event_path(e),
                "t": None if not isinstance(ts, (int, float)) else (ts - (t0 or 0)) / 1000.0,
                "perturbed": bool(e.get("perturbed") or e.get("is_perturbed")),
                "snapshot": _media(run, base, e.get("media_ref")), "diff": _media(run, base, e.get("media_ref_diff"))})
        video = f"recordings/{tid}.mp4"
        if run.exists(video):
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
    if run.exists("run.json"):
        info = run.read_json("run.json")
    from filegram_ray.stage_list import STAGES

    order = {s.name: i for i, s in enumerate(STAGES)}
    recs = info.get("stages") or {}
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
            errors.append({"where": "evaluate", "unit": f"{r['method']} {r['question_id']}", "error": r.get("error")})
    for r in run.error_rows():  # every stage's error rows (errors/<stage>.parquet), as the runner wrote them
        errors.append({"where": r["stage"], "unit": r["unit"], "error": f"{r['error_type']}: {r['error']}"})
    return {"stages": stages, "errors": errors, "seed": info.get("seed")}


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


def _assemble(run: RunDir, site: Path) -> dict[str, Any]:
    data = site / "data"
    data.mkdir(parents=True)
    static = site / "static"
    shutil.copytree(Path(__file__).with_name("static"), static)
    plots = []
    for png in ("subtasks.png", "channels.png", "text_vs_multimodal.png"):
        if run.exists(f"results/{png}"):
            (site / "img").mkdir(exist_ok=True)
            (site / "img" / png).write_bytes(run.read_bytes(f"results/{png}"))
            plots.append(f"img/{png}")
    ctx = {"run_url": run.uri, "results": results_section(run), "items": items_section(run, data),
           "trajectories": trajectories_section(run, data, site), "run": run_section(run), "plots": plots}
    _render(site, ctx)
    return ctx


def build_view(run: RunDir | str, out: str | os.PathLike | None = None) -> str:
    """Write the static viewer of ``run`` and return the path (or URL) of its ``index.html``.

    Args:
        run: the run directory (local or object store, :class:`~filegram_ray.storage.RunDir`).
        out: local folder for the site; None: ``RUN/view/`` (built in a local temporary folder, then copied in,
            each file atomically, for an object-store run).

    The site is built in a temporary sibling folder and moved into place whole: a failed build leaves the previous
    site as it was. Same run → same bytes (sorted keys and rows, no timestamps).

    Raises:
        StorageError: ``run`` is a local path that does not exist (nothing is created), has no ``run.json``,
            ``results/`` or ``trajectories/`` (nothing to show), or a table is unreadable (names the file).
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
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
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
