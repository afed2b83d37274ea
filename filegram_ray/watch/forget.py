"""``filegram watch --forget PATH``: remove a file's or folder's history from a store.

PATH is followed through its renames and moves, back and forward: the *identities* forgotten are every file or
folder that was ever at PATH (a current or an earlier name) and, for a folder, everything that was ever inside it
under any of its names — including files later moved out of it (their history after the move too) and files
moved into it (their history before the move too). Names are resolved in log order from the ``_state`` operations
(``mv`` carries a file to its new name, a deletion ends it; a later, unrelated file at a reused name is a new
identity and is kept unless it is itself at PATH). What is removed, for every forgotten identity:

* every event that names it in any path field while the name was its own (reads, writes, edits, renames and moves,
  copies from or to it, deletions, folder creations, context switches and cross-file references involving it),
  in every session log (each log is rewritten atomically: temporary file, fsync, rename), and the ``_state``
  operations that name it;
* its entries in the ``fs_snapshot`` listings (a new listing blob replaces the old one; file counts are lowered);
* the blobs and diffs only those events referred to (a blob whose text also belongs to another file's remaining
  event stays: it is that file's content too — a *copy* is another file, forget it by its own name), and its
  shadow copies;
* torn-line leftovers (``events.jsonl.torn``) and what ``filegram watch --update-memory`` derived from the rewritten
  sessions (:func:`forget_memory`): their Engrams, every profile's consolidated memory and indices, the embedding
  cache; the next ``--update-memory`` re-encodes only those sessions.

Not followed: changes made while no watcher ran (recorded at the restart as deletion + creation, so a file renamed
then is two identities: forget both names).
A path that still exists stays known to the watcher (without any content), so a restart does not record it as new;
its *future* changes are recorded again unless it is ignored (``--ignore``) or its folder opted out.
The store's lock is taken: a running watcher must be stopped first.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np

from filegram_ray.engine.collector import components, file_type_of
from filegram_ray.engine.media import MediaStore
from filegram_ray.limits import load_json
from filegram_ray.storage import atomic_write_local
from filegram_ray.watch.export import MEDIA_FIELDS
from filegram_ray.watch.journal import dumps_line, read_log
from filegram_ray.watch.recorder import session_summary
from filegram_ray.watch.store import StoreError, WatchStore

__all__ = ["PATH_FIELDS", "forget", "forget_memory", "forgotten_lines"]

#: every event field that names a file or folder (the schema's path fields, ``files_opened_after`` a list of them;
#: ``target_directory`` is the watched folder itself, named by session_start)
PATH_FIELDS = ("file_path", "old_path", "new_path", "dir_path", "directory_path", "source_path", "dest_path",
               "from_file", "to_file", "source_file", "target_file", "files_opened_after")


def _key_of(store: WatchStore, target: str) -> str:
    if target.startswith("/sandbox/"):
        return target[len("/sandbox/"):].rstrip("/")
    real = os.path.realpath(os.path.expanduser(target))
    for r in store.roots:
        if real == r.path:
            return r.label
        if real.startswith(r.path + os.sep):
            from filegram_ray.watch.recorder import Recorder

            return Recorder(store).key_of(r, real[len(r.path) + 1:].replace(os.sep, "/"))  # names redacted
    labels = {r.label for r in store.roots}
    if not os.path.isabs(target) and target.split("/", 1)[0] in labels:
        return target.rstrip("/")
    raise StoreError(f"{target}: not inside a watched folder of {store.path} "
                     f"({', '.join(r.path for r in store.roots)})")


class _Lineage:
    """Which file each index key names at each point of the logs.

    A file (or folder) is one *identity* from the moment a key first names it until it is deleted; the
    ``_state`` operations of the log lines carry it along: ``mv`` moves it (a folder's keys below it move with it)
    to a new key, ``del``/``delp`` end it (a later file at the same key is a new identity). ``names[i]`` is every
    key identity ``i`` ever had. Changes made while no watcher ran are recorded as deletion + creation (no rename
    is observable then), so those start a new identity.
    """

    def __init__(self) -> None:
        self.owner: dict[str, int] = {}
        self.names: list[set[str]] = []

    def ident(self, key: str) -> int:
        i = self.owner.get(key)
        if i is None:
            i = self.owner[key] = len(self.names)
            self.names.append({key})
        return i

    def _under(self, key: str) -> list[str]:
        return [k for k in self.owner if k == key or k.startswith(key + "/")]

    def apply(self, op: list[Any]) -> set[int]:
        """Apply one ``_state`` operation; returns the identities it names."""
        kind, key = op[0], op[1]
        if kind == "set":
            return {self.ident(key)}
        if kind == "del":
            i = self.ident(key)
            del self.owner[key]
            return {i}
        if kind == "delp":
            self.ident(key)
            out = set()
            for k in self._under(key):
                out.add(self.owner.pop(k))
            return out
        if kind == "mv":
            dst = op[2]
            out = {self.ident(key)}
            moved = [(k, self.owner[k]) for k in self._under(key)]
            for k in self._under(dst):  # a file replaced by the move ends here
                out.add(self.owner.pop(k))
            for k, _ in moved:
                self.owner.pop(k, None)
            for k, i in moved:
                nk = dst + k[len(key):]
                self.owner[nk] = i
                self.names[i].add(nk)
            return out
        return set()


def _event_keys(o: dict[str, Any]) -> list[str]:
    keys = []
    for f in PATH_FIELDS:
        v = o.get(f)
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, str) and x:
                keys.append(x[len("/sandbox/"):] if x.startswith("/sandbox/") else x)
    return keys


def _resolve(store: WatchStore, recs: list[dict[str, Any]]
             ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[tuple[set[int], list[set[int]], dict[str, int]]]],
                        _Lineage]:
    """Pass 1 of :func:`forget`: every line of every session log (read_log order) and the identities each names:
    ``(logs, line_ids, lineage)``; ``line_ids[sid][i]`` = (identities the event names, identities each ``_state``
    operation names, listed path → identity of an ``fs_snapshot``). Sessions never overlap, so log order is time
    order."""
    lin = _Lineage()
    logs: dict[str, list[dict[str, Any]]] = {}
    line_ids: dict[str, list[tuple[set[int], list[set[int]], dict[str, int]]]] = {}
    for rec in recs:
        sid = rec["session_id"]
        objs, _rep = read_log(store.log_path(sid))
        logs[sid] = objs
        per = line_ids[sid] = []
        for o in objs:
            keys = _event_keys(o) if "event_type" in o else []
            pre = {k: lin.owner[k] for k in keys if k in lin.owner}  # a rename's old name, a deletion
            listing: dict[str, int] = {}
            if o.get("event_type") == "fs_snapshot" and isinstance(o.get("media_ref"), dict):
                listing = {p: lin.ident(p) for p in _read_listing(store, o) or []}
            op_ids = [lin.apply(op) for op in o.get("_state", []) if isinstance(op, list) and len(op) > 1]
            ev_ids = set(pre.values()) | {lin.ident(k) for k in keys if k not in pre}  # a new name
            per.append((ev_ids, op_ids, listing))
    return logs, line_ids, lin


def _targets(lin: _Lineage, key: str) -> tuple[set[int], list[str]]:
    """The identities forgetting ``key`` removes — every file/folder ever at ``key`` and everything ever below one
    of its names — and every key they had (sorted)."""
    prefixes = {key} | {n for ns in lin.names if key in ns for n in ns}
    targets = {i for i, ns in enumerate(lin.names)
               if any(n == p or n.startswith(p + "/") for n in ns for p in prefixes)}
    return targets, sorted({n for i in targets for n in lin.names[i]})


def forgotten_lines(store: WatchStore, targets: list[str]) -> tuple[dict[str, set[int]], list[str]]:
    """Which events :func:`forget` would remove for ``targets``, without changing the store (no lock is taken: a
    watcher may be running; the logs are read as they are now).

    Args:
        targets: paths as :func:`forget` takes them (real paths inside a watched folder, ``/sandbox/…`` event paths
            or ``<label>/<path>`` keys; current or earlier names).

    Returns:
        (session id → indices of its log lines — in :func:`~filegram_ray.watch.journal.read_log` order — whose
        event names a forgotten file or folder, every key the forgotten files and folders had).

    Raises:
        StoreError: a target is not inside a watched folder.
    """
    keys = [_key_of(store, t) for t in targets]
    logs, line_ids, lin = _resolve(store, store.sessions())
    gone: set[int] = set()
    names: set[str] = set()
    for key in keys:
        t, n = _targets(lin, key)
        gone |= t
        names.update(n)
    out = {sid: {i for i, (o, (ev_ids, _ops, _listing)) in enumerate(zip(logs[sid], per))
                 if "event_type" in o and ev_ids & gone}
           for sid, per in line_ids.items()}
    return out, sorted(names)


def forget(store_path: str | os.PathLike, target: str) -> dict[str, Any]:
    """Remove ``target``'s events, blobs and shadows from a store (see the module docstring).

    Args:
        target: a real path inside a watched folder (it need not exist any more), an event path
            ``/sandbox/<label>/<path>``, or an index key ``<label>/<path>``; a current or an earlier name.

    Returns:
        Counts: ``events_removed``, ``sessions_rewritten``, ``media_removed``, ``index_entries_removed``,
        ``still_exists`` (bool), ``memory_cleared`` (bool: memory derived from a changed session was removed),
        ``sessions_to_reencode`` (task ids), ``key``, ``lineage`` (every key the forgotten files and folders
        had, sorted).

    Raises:
        StoreError: not a store, or ``target`` is not inside a watched folder.
        StoreBusyError: a watcher is running on the store.
    """
    store = WatchStore.open(store_path)
    key = _key_of(store, target)

    store.lock("forget")
    try:
        cfg, roots = store.config, store.roots
        from filegram_ray.watch.recorder import Recorder

        rec0 = Recorder(store)
        rec0.replay()  # the index as of the end of the logs, before any line is removed
        recs = store.sessions()
        logs, line_ids, lin = _resolve(store, recs)
        targets, lineage = _targets(lin, key)
        # pass 2: rewrite the logs without them
        dropped_refs: set[str] = set()
        removed = rewritten = 0
        changed_tasks: list[str] = []
        for rec in recs:
            sid = rec["session_id"]
            path = store.log_path(sid)
            keep: list[dict[str, Any]] = []
            changed = False
            for o, (ev_ids, op_ids, listing) in zip(logs[sid], line_ids[sid]):
                if "event_type" in o and ev_ids & targets:
                    dropped_refs.update(r["path"] for f in MEDIA_FIELDS if isinstance(r := o.get(f), dict))
                    removed += 1
                    changed = True
                    continue
                if "_state" in o:
                    ops = [op for op, ids in zip(o["_state"], op_ids) if not ids & targets]
                    if len(ops) != len(o["_state"]):
                        changed = True
                        o = dict(o, _state=ops) if ops else {k: v for k, v in o.items() if k != "_state"}
                    if "event_type" not in o and "_state" not in o:
                        continue
                if listing and set(listing.values()) & targets:
                    o = _scrub_snapshot(store, o, {p for p, i in listing.items() if i in targets}, dropped_refs)
                    changed = True
                keep.append(o)
            torn = path.with_name(path.name + ".torn")
            if torn.exists():
                torn.unlink()
                changed = True
            if changed:
                atomic_write_local(path, b"".join(dumps_line(o) for o in keep))
                rewritten += 1
                changed_tasks.append(rec["task_id"])
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
        now = {k for k, i in lin.owner.items() if i in targets} | {key}
        idx = rec0.index
        n_idx = 0
        exists = False
        if rec0.names is not None:  # learn which on-disk names the redacted ones stand for
            for r in roots:
                rec0.scan(r)
        for k in [k for k in idx if any(k == p or k.startswith(p + "/") for p in now)]:
            n_idx += 1
            label, _, rel = k.partition("/")
            root = next((r for r in roots if r.label == label), None)
            real = os.path.join(root.path, *rec0.real_rel(rel)) if root and rel else (root.path if root else "")
            if real and os.path.lexists(real):
                exists = True
                idx[k] = dict(idx[k], sh=False) if idx[k].get("k") == "f" else idx[k]
            else:
                del idx[k]
        keep_sh = {e["h"] for e in idx.values() if e.get("sh") and e.get("h")}
        store.gc_shadows(keep_sh)
        counts = {}
        for rec in recs:
            objs, _ = read_log(store.log_path(rec["session_id"]))
            counts[rec["session_id"]] = len(objs)
        store.save_checkpoint({"index": idx, "logs": counts, "baseline_roots": sorted(rec0.baseline_roots)})
        store.save_sessions(recs)
        cleared = bool(rewritten) and forget_memory(store, changed_tasks)
        return {"key": key, "events_removed": removed, "sessions_rewritten": rewritten,
                "media_removed": media_removed, "index_entries_removed": n_idx, "still_exists": exists,
                "memory_cleared": cleared, "sessions_to_reencode": changed_tasks, "lineage": lineage}
    finally:
        store.unlock()


def forget_memory(store: WatchStore, task_ids: list[str]) -> bool:
    """Remove what ``filegram watch --update-memory`` derived from the sessions ``task_ids`` (their rewritten logs no
    longer hold what it was derived from); returns True if anything was removed.

    Per profile with an update state (``memory/<profile>/incremental.json``): the sessions' Engrams are deleted
    and dropped from the state's ``encoded`` list, the exact fingerprint statistics are recomputed from the
    Engrams that remain, and the consolidated memory (``store.json``) and the FAISS indices are deleted (they mix
    every session). The embedding cache (``cache/``) is deleted: it holds vectors of the forgotten text. The next
    ``--update-memory`` re-encodes only those sessions and re-consolidates. A profile without an update state is
    removed whole (its memory is rebuilt from the logs).
    """
    from filegram_ray.memory.consolidate import FingerprintStats
    from filegram_ray.memory.engram import Engram
    from filegram_ray.storage import RunDir

    mem = store.path / "memory"
    if not mem.is_dir() and not (store.path / "engrams").is_dir():
        return False
    run = RunDir(store.path)
    drop = set(task_ids)
    for pdir in sorted(p for p in mem.iterdir() if p.is_dir()) if mem.is_dir() else []:
        pid = pdir.name
        state_p = pdir / "incremental.json"
        try:
            state = load_json(state_p.read_bytes(), str(state_p))
        except (OSError, ValueError):
            state = None
        if state is None:
            for sub in ("engrams", "memory", "indices"):
                shutil.rmtree(store.path / sub / pid, ignore_errors=True)
            continue
        for tid in drop:
            (store.path / "engrams" / pid / f"{tid}.json").unlink(missing_ok=True)
        state["encoded"] = [t for t in state["encoded"] if t not in drop]
        fps = [Engram.from_json(run.read_bytes(f"engrams/{pid}/{t}.json")).fingerprint for t in state["encoded"]]
        state["fingerprint_stats"] = FingerprintStats.of(np.asarray(fps)).model_dump()
        (pdir / "store.json").unlink(missing_ok=True)
        shutil.rmtree(store.path / "indices" / pid, ignore_errors=True)
        run.write_json(f"memory/{pid}/incremental.json", state)
    # Engrams of a profile without memory/ (an interrupted update): of the forgotten sessions, removed
    for e in (store.path / "engrams").glob("*/*.json") if (store.path / "engrams").is_dir() else []:
        if e.stem in drop:
            e.unlink()
    shutil.rmtree(store.path / "cache", ignore_errors=True)
    return True


def _read_listing(store: WatchStore, ev: dict[str, Any]) -> list[str] | None:
    try:
        path = store.media_dir / ev["media_ref"]["path"]
        listing = load_json(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
    return [p for p in listing if isinstance(p, str)] if isinstance(listing, list) else None


def _scrub_snapshot(store: WatchStore, ev: dict[str, Any], gone_set: set[str], dropped: set[str]) -> dict[str, Any]:
    ref = ev["media_ref"]
    listing = _read_listing(store, ev)
    if listing is None:
        return ev
    gone = [p for p in listing if p in gone_set]
    if not gone:
        return ev
    rest = [p for p in listing if p not in gone_set]
    # an entry that is a prefix of another one is a folder; the other removed entries are files
    leaves = [p for p in gone if not any(q.startswith(p + "/") for q in listing)]
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
