"""``filegram watch``: record your own file activity; ``--status``, ``--forget PATH``, ``--import-into RUN``, and the
store's FileGramOS memory: ``--update-memory`` (encode the new sessions, :mod:`filegram_ray.memory.incremental`) and
``--show-memory`` (print its retrieved context)."""

from __future__ import annotations

import argparse
import json
import sys

NOT_RECORDED = ("searches (grep, file-manager search), folder browsing (ls, opening a folder), which program "
                "opened a file, the lines viewed (view_range is null), anything outside the named folders, hidden "
                "and ignored paths, folders holding the opt-out marker")


def _config(args: argparse.Namespace, stored):
    from filegram_ray.watch.config import WatchConfig

    base = stored.model_dump() if stored is not None else WatchConfig().model_dump()
    over = {"content": args.content, "profile_id": args.profile_id, "debounce_ms": args.debounce_ms,
            "idle_rotate_s": None if args.idle_minutes is None else args.idle_minutes * 60.0,
            "record_reads": False if args.no_reads else None,
            "default_ignores": False if args.no_default_ignores else None,
            "ignore_hidden": False if args.include_hidden else None,
            "phone_region": args.phone_region}
    base.update({k: v for k, v in over.items() if v is not None})
    if args.ignore:
        base["ignore"] = list(dict.fromkeys(list(base.get("ignore", [])) + args.ignore))
    return WatchConfig.model_validate(base)


def _watch(args: argparse.Namespace) -> int:
    from filegram_ray.extras import require_extras

    require_extras(("watch",), "filegram watch")
    from filegram_ray.watch.observer import WatchLimitError
    from filegram_ray.watch.store import StoreBusyError, StoreError, WatchStore, is_watch_store

    try:
        if args.forget:
            from filegram_ray.watch.forget import forget

            r = forget(args.out, args.forget)
            print(f"forgot {r['key']}: {r['events_removed']} events removed from {r['sessions_rewritten']} "
                  f"session log(s), {r['media_removed']} blob/diff file(s) deleted, {r['index_entries_removed']} "
                  f"index entr{'y' if r['index_entries_removed'] == 1 else 'ies'} cleared")
            others = [n for n in r["lineage"] if n != r["key"] and not n.startswith(r["key"] + "/")]
            if others:
                print(f"  also under its other names (renames/moves): {', '.join(others[:10])}"
                      + (f" and {len(others) - 10} more" if len(others) > 10 else ""))
            if r["memory_cleared"]:
                print(f"  memory derived from {len(r['sessions_to_reencode'])} session(s) removed; run "
                      f"`filegram watch --out {args.out} --update-memory` (re-encodes only those sessions)")
            if r["still_exists"]:
                print("note: the path still exists; its future changes will be recorded unless you ignore it "
                      "(--ignore PATTERN) or put a .nofilegram file in its folder")
            return 0
        if args.status:
            return _status(args.out)
        if args.update_memory:
            return _update_memory(args)
        if args.show_memory:
            return _show_memory(args)
        if args.import_into:
            from filegram_ray.watch.export import import_store

            r = import_store(args.out, args.import_into, profile_id=args.profile_id, include_open=args.include_open)
            print(f"imported {len(r['imported'])} session(s) as trajectories/{r['profile_id']}/<task> in "
                  f"{r['run_dir']}; {len(r['errors'])} error(s)")
            for m in r["skipped"] + r["errors"]:
                print(f"  {m}")
            print(f"next: filegram memory encode --run-dir {args.import_into}   (or evaluate / methods on it)")
            return 1 if r["errors"] and not r["imported"] else 0
        stored = WatchStore.open(args.out).config if is_watch_store(args.out) else None
        cfg = _config(args, stored)
        from filegram_ray.watch.observer import run_watch

        def status(line: str) -> None:
            if not args.quiet:
                print(line, flush=True)

        print(_banner(args, cfg), flush=True)
        summary = run_watch(args.out, args.dirs, cfg, duration_s=args.duration, on_status=status,
                            status_every_s=0 if args.quiet else args.status_every)
    except (StoreError, StoreBusyError, WatchLimitError) as exc:
        print(f"filegram watch: {exc}", file=sys.stderr)
        return 2
    print(_summary_text(summary))
    return 0


def _update_memory(args: argparse.Namespace) -> int:
    """``--update-memory``: encode the store's new sessions and bring its memory up to date incrementally."""
    from filegram_ray.watch.export import update_store_memory
    from filegram_ray.watch.store import WatchStore

    store = WatchStore.open(args.out)
    print("\n".join(update_store_memory(store, args.profile_id, args.embedder or "minilm", args.rebuild)))
    print(f"next: filegram watch --out {args.out} --show-memory [--query TEXT]")
    return 0


def _show_memory(args: argparse.Namespace) -> int:
    """``--show-memory``: the store's retrieved context (its profile, the embedder its memory was built with)."""
    from filegram_ray.memory.cli import print_context
    from filegram_ray.memory.incremental import load_state
    from filegram_ray.storage import RunDir
    from filegram_ray.watch.store import WatchStore

    store = WatchStore.open(args.out)
    run = RunDir(store.path)
    pid = args.profile_id or store.config.profile_id
    update = f"run `filegram watch --out {args.out} --update-memory` first"
    if load_state(run, pid) is None:
        raise SystemExit(f"filegram watch: {args.out} has no memory yet; {update}")
    if not run.exists(f"memory/{pid}/store.json"):  # `watch --forget` deletes the consolidated memory
        raise SystemExit(f"filegram watch: {args.out} has no consolidated memory (a `filegram watch --forget` "
                         f"removes it); {update}")
    # docs/watch.md "What is not recorded": a count of 0 there is not a habit
    print_context(run, pid, args.query, args.channels, args.embedder,
                  note="[note: this memory comes from the watcher, which cannot observe searches or folder "
                       "browsing; what it says of them (\"never uses search\", \"never browsed directories\") "
                       "reflects that, not your habits]")
    return 0


def _banner(args, cfg) -> str:
    from filegram_ray.watch.config import SECRET_PATTERNS

    dirs = ", ".join(args.dirs) if args.dirs else "(the folders watched last time)"
    return "\n".join([
        f"filegram watch: recording {dirs} into {args.out}",
        f"  content capture: {cfg.content}   reads: {'on' if cfg.record_reads else 'off'}   "
        f"profile: {cfg.profile_id}",
        f"  never recorded: {len(cfg.patterns())} ignore patterns (secrets always: {', '.join(SECRET_PATTERNS[:6])}, "
        f"…){', hidden names' if cfg.ignore_hidden else ''}, folders holding {cfg.opt_out_marker}",
        f"  not observable: {NOT_RECORDED}",
        "  nothing leaves this machine. Ctrl-C to stop.",
    ])


def _summary_text(s: dict) -> str:
    ev = ", ".join(f"{k} {v}" for k, v in s.get("events", {}).items()) or "none"
    lag = s.get("lag", {})
    lines = [f"filegram watch: stopped after {s.get('seconds', 0)} s; {s.get('sessions', 0)} session(s) in "
             f"{s.get('store')}",
             f"  events: {ev}"]
    if lag.get("count"):
        lines.append(f"  change→log lag: p50 {lag['p50_ms']} ms, p95 {lag['p95_ms']} ms, max {lag['max_ms']} ms "
                     f"(includes the debounce)")
    c = s.get("counters", {})
    if c:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in c.items()))
    lines += [f"  note: {n}" for n in s.get("notes", [])]
    return "\n".join(lines)


def _status(store_path: str) -> int:
    from collections import Counter

    from filegram_ray.watch.store import WatchStore

    store = WatchStore.open(store_path)
    cfg = store.config
    print(f"store {store.path}: content {cfg.content}, profile {cfg.profile_id}")
    for r in store.roots:
        print(f"  watching {r.path} as /sandbox/{r.label}")
    total = Counter()
    for rec in store.sessions():
        events, rep = store.read_session(rec["session_id"])
        c = Counter(e["event_type"] for e in events)
        total.update(c)
        state = "closed" if rec.get("closed") else "open"
        warn = f"  [{rep.message()}]" if rep.message() else ""
        print(f"  {rec['task_id']}  {state:<6} {len(events):>6} events{warn}")
    blobs = sum(1 for _ in store.media_dir.glob("blobs/*.blob"))
    diffs = sum(1 for _ in store.media_dir.glob("diffs/*.diff"))
    print(f"  media: {blobs} blobs, {diffs} diffs")
    print("  events by type: " + json.dumps(dict(sorted(total.items()))))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "watch", help="record your own file activity (Linux inotify) into a local store",
        description="Record file activity in the named folders as FileGram events (the engine's schema) into a "
        "local store. Privacy on by default: only the named folders, secrets and hidden/ignored paths never, "
        "folders with a .nofilegram file never, content redacted, nothing leaves the machine. "
        f"Not observable: {NOT_RECORDED}.")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="folders to watch (default: those of the last run)")
    p.add_argument("--out", required=True, metavar="STORE", help="the store folder (created if missing)")
    g = p.add_argument_group("actions on a store instead of watching")
    g.add_argument("--forget", metavar="PATH", help="remove PATH's events, blobs and shadows (file or folder; followed through its renames "
                   "and moves, and for a folder every file ever inside it)")
    g.add_argument("--status", action="store_true", help="list sessions and counts")
    g.add_argument("--import-into", metavar="RUN_DIR", help="write the sessions as trajectories of one profile "
                   "into a run directory (Real-World setting)")
    g.add_argument("--include-open", action="store_true", help="with --import-into: also the open session")
    g.add_argument("--update-memory", action="store_true", help="encode the store's new sessions and update its "
                   "FileGramOS memory incrementally (old sessions are not re-encoded)")
    g.add_argument("--show-memory", action="store_true", help="print the retrieved context of the store's memory")
    g.add_argument("--query", default=None, help="with --show-memory: query text (adds the relevant chunks and "
                   "episodes)")
    g.add_argument("--channels", default="procedural,semantic,episodic",
                   help="with --show-memory: comma-separated enabled channels")
    g.add_argument("--embedder", default=None, choices=["minilm", "minilm-int8", "hashing"],
                   help="--update-memory: the episode/chunk embedder (default minilm; minilm-int8: the same model "
                   "int8 on onnxruntime, no torch); --show-memory: the query "
                   "embedder (default: the one the memory was built with)")
    g.add_argument("--rebuild", action="store_true", help="with --update-memory: re-encode every session")
    s = p.add_argument_group("settings (stored in the store; omitted = as stored)")
    s.add_argument("--content", choices=["off", "redacted", "full"], default=None,
                   help="content capture (default redacted)")
    s.add_argument("--ignore", action="append", default=[], metavar="PATTERN",
                   help="extra gitignore-style pattern (repeatable)")
    s.add_argument("--no-default-ignores", action="store_true",
                   help="drop the reference §12 defaults and editor temporaries (secret patterns stay)")
    s.add_argument("--include-hidden", action="store_true", help="record hidden files and folders too")
    s.add_argument("--no-reads", action="store_true", help="do not record file reads")
    s.add_argument("--profile-id", default=None, help="profile id of the events (default real_user)")
    s.add_argument("--debounce-ms", type=int, default=None, help="quiet time before a change is read (2000)")
    s.add_argument("--idle-minutes", type=float, default=None, help="a session ends after this quiet time (30)")
    s.add_argument("--phone-region", default=None, help="region for national phone numbers in redaction (US)")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="stop after this long")
    p.add_argument("--status-every", type=float, default=30.0, metavar="SECONDS", help="status line period")
    p.add_argument("--quiet", action="store_true", help="no status lines")
    p.set_defaults(func=_watch)
