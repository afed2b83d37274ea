"""Watcher sessions as trajectories: the Real-World setting's input.

A session becomes a trajectory folder in the engine's layout (reference §2.1)::

    trajectories/<profile_id>/<task_id>/events_raw.json   every event of the session (schema-checked)
                                        events.json       the post-execution filter's output (reference §4)
                                        summary.json      the session summary
                                        media/            the blobs and diffs its events refer to + manifest.json

``task_id`` is the session's ``S-<UTC start>-<id>`` (:func:`~filegram_ray.watch.store.task_id_for`), so
sessions sort by time; ``profile_id`` defaults to the store's (``real_user``). ``trajectories/index.parquet``
gets one row per session (rows of other trajectories are kept), so ``filegram memory encode`` and the memory
methods (:func:`filegram_ray.methods.trajectory.build_views`) read them like generated trajectories. There is no
``meta.json``: a real user has no ground-truth profile.

Only closed sessions with at least one file event are exported (a session closes after ``idle_rotate_s`` of quiet
or when the watcher stops); ``include_open`` adds the one still being recorded (re-importing later rewrites it).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from filegram_ray.engine.filter import filter_events
from filegram_ray.limits import load_json
from filegram_ray.schema.events import EventParseError, dumps_events, parse_event
from filegram_ray.watch.recorder import BEHAVIOURAL
from filegram_ray.watch.store import WatchStore

__all__ = ["MEDIA_FIELDS", "import_store", "session_trajectory", "update_store_memory", "usable_sessions",
           "watch_units"]

MEDIA_FIELDS = ("media_ref", "media_ref_old", "media_ref_new", "media_ref_diff")


def usable_sessions(store: WatchStore, include_open: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Session records worth exporting (closed unless ``include_open``, with ≥ 1 file event) and notes on the
    ones skipped."""
    out, notes = [], []
    for rec in store.sessions():
        if not rec.get("closed") and not include_open:
            notes.append(f"{rec['task_id']}: still open (being recorded); skipped")
            continue
        events, _ = store.read_session(rec["session_id"])
        if not any(e.get("event_type") in BEHAVIOURAL for e in events):
            notes.append(f"{rec['task_id']}: no file events; skipped")
            continue
        out.append(rec)
    return out, notes


def watch_units(store: WatchStore) -> tuple[dict[str, Any], list[str]]:
    """Closed sessions with file events as memory units for :func:`filegram_ray.memory.incremental.update_memory`:
    task id → loader of (filtered events, the store's media folder). Returns (units, notes on skipped sessions)."""
    recs, notes = usable_sessions(store)

    def loader(sid: str):
        def load():
            raw, _ = store.read_session(sid)
            return filter_events(raw), store.media_dir
        return load

    return {rec["task_id"]: loader(rec["session_id"]) for rec in recs}, notes


def update_store_memory(store: WatchStore, profile_id: str | None, embedder: str, rebuild: bool) -> list[str]:
    """Encode the store's new closed sessions and bring its FileGramOS memory up to date
    (:func:`filegram_ray.memory.incremental.update_memory`; ``profile_id`` None: the store's); returns the lines
    to print: the summary, then notes on skipped sessions and errors. What ``filegram watch --update-memory`` and
    ``filegram memory update`` run."""
    from filegram_ray.memory.incremental import update_memory
    from filegram_ray.storage import RunDir

    units, notes = watch_units(store)
    r = update_memory(RunDir(store.path), profile_id or store.config.profile_id, units, embedder=embedder,
                      rebuild=rebuild)
    state = "up to date" if r["up_to_date"] else f"{r['encoded_now']} session(s) encoded now"
    return [f"memory update: {state}, {r['reused']} reused, {r['sessions']} in memory"
            + (f" (rebuilt: {r['rebuilt']})" if r["rebuilt"] else "") + f"; embedder {r['embedder']}; seconds "
            + ", ".join(f"{k}={v}" for k, v in r["seconds"].items()),
            *[f"  {m}" for m in notes + r["errors"]]]


def session_trajectory(store: WatchStore, rec: dict[str, Any]) -> dict[str, bytes]:
    """The files of one session's trajectory folder: relative path → bytes.

    Raises:
        ValueError: an event fails the engine's schema (names the session log, the event index and the field).
    """
    sid = rec["session_id"]
    raw, rep = store.read_session(sid)
    src = str(store.log_path(sid))
    for i, ev in enumerate(raw):
        try:
            parse_event(ev, i)
        except EventParseError as exc:
            raise ValueError(f"{src}: {exc}") from None
    files: dict[str, bytes] = {"events_raw.json": dumps_events(raw), "events.json": dumps_events(filter_events(raw))}
    entries: dict[str, dict[str, Any]] = {}
    stats = Counter()
    for ev in raw:
        for f in MEDIA_FIELDS:
            ref = ev.get(f)
            if not isinstance(ref, dict):
                continue
            h = ref["hash"]
            if h in entries:
                entries[h]["references"] += 1
                stats["deduplicated_saves"] += 1
                continue
            try:
                data = (store.media_dir / ref["path"]).read_bytes()
            except OSError:
                continue  # a forgotten path's blob: the reference is dangling, as upstream tolerates (§7.1)
            files[f"media/{ref['path']}"] = data
            path = ev.get("file_path") or "fs_snapshot.json"
            entries[h] = {"type": ref["type"], "original_path": path.removeprefix("/sandbox/"),
                          "size_bytes": len(data), "stored_at": ev["timestamp"], "references": 1}
            stats["total_blobs" if ref["type"] == "blob" else "total_diffs"] += 1
            stats["total_bytes"] += len(data)
    manifest = {"version": 1, "entries": entries,
                "stats": {k: stats[k] for k in ("total_blobs", "total_diffs", "total_bytes", "deduplicated_saves")}}
    files["media/manifest.json"] = json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8")
    summary = store.path / "sessions" / sid / "summary.json"
    by_type = Counter(e["event_type"] for e in raw)
    summ = load_json(summary.read_bytes(), str(summary)) if summary.exists() else {
        "session_id": sid, "task_id": rec["task_id"], "start_time": rec["started_ms"], "end_time": None,
        "total_events": len(raw), "events_by_type": dict(sorted(by_type.items()))}
    if rep.torn_bytes:
        summ["torn_last_line_bytes"] = rep.torn_bytes
    files["summary.json"] = json.dumps(summ, indent=2, ensure_ascii=False).encode("utf-8")
    return files


def import_store(store_path: str | os.PathLike, run_dir: str, *, profile_id: str | None = None,
                 include_open: bool = False, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write a watcher store's sessions into a run directory as one profile's trajectories.

    Args:
        store_path: the watcher store. run_dir: run directory (path or fsspec URI). profile_id: the profile
            the sessions belong to (default: the store's, ``real_user``). include_open: also the open session.
        storage_options: fsspec options for ``run_dir``.

    Returns:
        ``{"profile_id", "imported": [task ids], "errors": [messages], "skipped": [notes], "run_dir"}``; a
        session that fails becomes an ``error`` row in ``trajectories/index.parquet`` and never stops the rest.

    Raises:
        StoreError: ``store_path`` is not a watcher store.
    """
    import polars as pl

    from filegram_ray.storage import RunDir

    store = WatchStore.open(store_path)
    pid = profile_id or store.config.profile_id
    run = RunDir(run_dir, storage_options)
    recs, notes = usable_sessions(store, include_open)
    rows, imported, errors = [], [], []
    for rec in recs:
        tid = rec["task_id"]
        uid = f"{pid}/{tid}"
        try:
            files = session_trajectory(store, rec)
            for rel, data in sorted(files.items()):
                run.write_bytes(f"trajectories/{uid}/{rel}", data)
            n_raw = len(json.loads(files["events_raw.json"]))
            n = len(json.loads(files["events.json"]))
            rows.append({"trajectory_id": uid, "profile_id": pid, "task_id": tid, "status": "ok",
                         "n_events_raw": n_raw, "n_events": n, "perturbed": False, "error": None})
            imported.append(tid)
        except Exception as exc:  # noqa: BLE001 - one bad session never sinks the import
            errors.append(f"{tid}: {exc}")
            rows.append({"trajectory_id": uid, "profile_id": pid, "task_id": tid, "status": "error",
                         "n_events_raw": 0, "n_events": 0, "perturbed": False, "error": str(exc)[:500]})
    schema = {"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8, "status": pl.Utf8,
              "n_events_raw": pl.Int64, "n_events": pl.Int64, "perturbed": pl.Boolean, "error": pl.Utf8}
    df = pl.DataFrame(rows, schema=schema)
    if run.exists("trajectories/index.parquet"):
        old = run.read_table("trajectories/index.parquet")
        old = old.filter(~pl.col("trajectory_id").is_in(df["trajectory_id"].to_list()))
        df = pl.concat([old.select(df.columns).cast(df.schema), df])
    run.write_table("trajectories/index.parquet", df.sort("trajectory_id"))
    return {"profile_id": pid, "imported": imported, "errors": errors, "skipped": notes, "run_dir": run.uri}
