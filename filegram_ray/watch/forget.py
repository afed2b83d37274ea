"""``filegram watch --forget PATH``: remove a file's or folder's history from a store.

What is removed, for PATH and everything below it:

* every event that names it in any path field (its reads, writes, edits, renames and moves from or to it, copies
  from or to it, deletions, folder creations, context switches and cross-file references involving it), in every
  session log (each log is rewritten atomically: temporary file, fsync, rename);
* its entries in the ``fs_snapshot`` listings (a new listing blob replaces the old one; file counts are lowered);
* the blobs and diffs only those events referred to (a blob whose text also belongs to another file's remaining
  event stays: it is that file's content too), and its shadow copies;
* torn-line leftovers (``events.jsonl.torn``) and everything ``filegram memory update`` derived from the store
  (Engrams, consolidated memory, indices, vector cache) when any session changed — the next update re-encodes.

A path that still exists stays known to the watcher (without any content), so a restart does not record it as new;
its *future* changes are recorded again unless it is ignored (``--ignore``) or its folder opted out.
The store's lock is taken: a running watcher must be stopped first.
"""

from __future__ import annotations

import json
import os
from typing import Any

from filegram_ray.engine.collector import components, file_type_of
from filegram_ray.engine.media import MediaStore
from filegram_ray.storage import atomic_write_local
from filegram_ray.watch.export import MEDIA_FIELDS
from filegram_ray.watch.journal import dumps_line, read_log
from filegram_ray.watch.recorder import session_summary
from filegram_ray.watch.store import StoreError, WatchStore

__all__ = ["PATH_FIELDS", "forget"]

PATH_FIELDS = ("file_path", "old_path", "new_path", "dir_path", "directory_path", "source_path", "dest_path",
               "from_file", "to_file", "source_file", "target_file")


def _key_of(store: WatchStore, target: str) -> str:
    if target.startswith("/sandbox/"):
        return target[len("/sandbox/"):].rstrip("/")
    real = os.path.realpath(os.path.expanduser(target))
    for r in store.roots:
        if real == r.path:
            return r.label
        if real.startswith(r.path + os.sep):
            return f"{r.label}/{real[len(r.path) + 1:].replace(os.sep, '/')}"
    labels = {r.label for r in store.roots}
    if not os.path.isabs(target) and target.split("/", 1)[0] in labels:
        return target.rstrip("/")
    raise StoreError(f"{target}: not inside a watched folder of {store.path} "
                     f"({', '.join(r.path for r in store.roots)})")


def forget(store_path: str | os.PathLike, target: str) -> dict[str, Any]:
    """Remove ``target``'s events, blobs and shadows from a store (see the module docstring).

    Args:
        target: a real path inside a watched folder (it need not exist any more), an event path
            ``/sandbox/<label>/<path>``, or an index key ``<label>/<path>``.

    Returns:
        Counts: ``events_removed``, ``sessions_rewritten``, ``media_removed``, ``index_entries_removed``,
        ``still_exists`` (bool), ``memory_cleared`` (bool), ``key``.

    Raises:
        StoreError: not a store, or ``target`` is not inside a watched folder.
        StoreBusyError: a watcher is running on the store.
    """
    store = WatchStore.open(store_path)
    key = _key_of(store, target)

    def hit(p: Any) -> bool:
        if not isinstance(p, str):
            return False
        k = p[len("/sandbox/"):] if p.startswith("/sandbox/") else p
        return k == key or k.startswith(key + "/")

    store.lock("forget")
    try:
        cfg, roots = store.config, store.roots
        from filegram_ray.watch.recorder import Recorder

        rec0 = Recorder(store)
        rec0.replay()  # the index as of the end of the logs, before any line is removed
        recs = store.sessions()
        dropped_refs: set[str] = set()
        removed = rewritten = 0
        for rec in recs:
            sid = rec["session_id"]
            path = store.log_path(sid)
            objs, _rep = read_log(path)
            keep: list[dict[str, Any]] = []
            changed = False
            for o in objs:
                if "event_type" in o and any(hit(o.get(f)) for f in PATH_FIELDS):
                    dropped_refs.update(r["path"] for f in MEDIA_FIELDS if isinstance(r := o.get(f), dict))
                    removed += 1
                    changed = True
                    continue
                if "_state" in o:
                    ops = [op for op in o["_state"] if not any(hit(x) for x in op[1:3] if isinstance(x, str))]
                    if len(ops) != len(o["_state"]):
                        changed = True
                        o = dict(o, _state=ops) if ops else {k: v for k, v in o.items() if k != "_state"}
                    if "event_type" not in o and "_state" not in o:
                        continue
                if o.get("event_type") == "fs_snapshot" and isinstance(o.get("media_ref"), dict):
                    new = _scrub_snapshot(store, o, hit, dropped_refs)
                    if new is not o:
                        o, changed = new, True
                keep.append(o)
            torn = path.with_name(path.name + ".torn")
            if torn.exists():
                torn.unlink()
                changed = True
            if changed:
                atomic_write_local(path, b"".join(dumps_line(o) for o in keep))
                rewritten += 1
                rec["lines"] = len(keep)
                if rec.get("closed"):
                    events = [{k: v for k, v in o.items() if k != "_state"} for o in keep if "event_type" in o]
                    store.write_summary(sid, session_summary(rec, events, cfg, roots))
        # media no remaining event refers to
        still = set()
        for rec in recs:
            objs, _ = read_log(store.log_path(rec["session_id"]))
            still.update(r["path"] for o in objs for f in MEDIA_FIELDS if isinstance(r := o.get(f), dict))
        media_removed = 0
        for rel in sorted(dropped_refs - still):
            p = store.media_dir / rel
            if p.exists():
                p.unlink()
                media_removed += 1
        # the index: entries that no longer exist go; existing ones stay known, without content
        idx = rec0.index
        n_idx = 0
        exists = False
        for k in [k for k in idx if k == key or k.startswith(key + "/")]:
            n_idx += 1
            label, _, rel = k.partition("/")
            root = next((r for r in roots if r.label == label), None)
            real = os.path.join(root.path, *rel.split("/")) if root and rel else (root.path if root else "")
            if real and os.path.lexists(real):
                exists = True
                idx[k] = dict(idx[k], sh=False) if idx[k].get("k") == "f" else idx[k]
            else:
                del idx[k]
        keep_sh = {e["h"] for e in idx.values() if e.get("sh") and e.get("h")}
        store.gc_shadows(keep_sh)
        logs = {}
        for rec in recs:
            objs, _ = read_log(store.log_path(rec["session_id"]))
            logs[rec["session_id"]] = len(objs)
        store.save_checkpoint({"index": idx, "logs": logs, "baseline_roots": sorted(rec0.baseline_roots)})
        store.save_sessions(recs)
        cleared = bool(rewritten)
        if cleared:
            store.clear_memory()
        return {"key": key, "events_removed": removed, "sessions_rewritten": rewritten,
                "media_removed": media_removed, "index_entries_removed": n_idx, "still_exists": exists,
                "memory_cleared": cleared}
    finally:
        store.unlock()


def _scrub_snapshot(store: WatchStore, ev: dict[str, Any], hit, dropped: set[str]) -> dict[str, Any]:
    ref = ev["media_ref"]
    try:
        listing = json.loads((store.media_dir / ref["path"]).read_text("utf-8"))
    except (OSError, ValueError):
        return ev
    gone = [p for p in listing if hit(p)]
    if not gone:
        return ev
    rest = [p for p in listing if not hit(p)]
    # an entry that is a prefix of another one is a folder; the other removed entries are files
    leaves = [p for p in gone if not any(q.startswith(p + "/") for q in gone)]
    by_type = dict(ev.get("file_count_by_type") or {})
    for p in leaves:
        t = file_type_of(p)
        if by_type.get(t):
            by_type[t] -= 1
            if not by_type[t]:
                del by_type[t]
    ms = MediaStore()
    new_ref = ms.save_blob(json.dumps(rest, ensure_ascii=False), "fs_snapshot.json", ev["timestamp"])
    store.put_media(ms)
    dropped.add(ref["path"])
    return dict(ev, media_ref=new_ref, file_count_by_type=dict(sorted(by_type.items())),
                total_files=max(0, int(ev.get("total_files", 0)) - len(leaves)),
                max_depth=max((components(p) - 1 for p in rest), default=0))
