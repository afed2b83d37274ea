"""``filegram memory …`` subcommands: ``show`` prints a profile's retrieved context; ``encode`` runs the stage;
``update`` brings a watcher store's memory up to date incrementally (:mod:`filegram_ray.memory.incremental`)."""

from __future__ import annotations

import argparse


def _show(args: argparse.Namespace) -> int:
    from filegram_ray.memory.api import load_store
    from filegram_ray.memory.index import load_indices
    from filegram_ray.memory.retrieve import retrieve
    from filegram_ray.storage import RunDir, refuse_missing_local_run

    refuse_missing_local_run(args.run_dir, "filegram memory show")
    run = RunDir(args.run_dir)
    pid, kind = args.profile_id, args.embedder
    from filegram_ray.watch.store import is_watch_store

    watch_store = is_watch_store(args.run_dir)
    if watch_store:  # a watcher store: its profile and the embedder its memory was built with
        from filegram_ray.memory.incremental import load_state
        from filegram_ray.watch.store import WatchStore

        pid = pid or WatchStore.open(args.run_dir).config.profile_id
        if load_state(run, pid) is None:
            raise SystemExit(f"filegram memory show: {args.run_dir} has no memory yet; run "
                             f"`filegram memory update {args.run_dir}` first")
        if not run.exists(f"memory/{pid}/store.json"):  # `watch --forget` deletes the consolidated memory
            raise SystemExit(f"filegram memory show: {args.run_dir} has no consolidated memory (a `filegram watch "
                             f"--forget` removes it); run `filegram memory update {args.run_dir}` first")
    elif pid is None:
        raise SystemExit("filegram memory show: PROFILE_ID is required for a run directory")
    else:  # the short form names a profile as in every other command (p3 = p3_efficient_executor)
        from filegram_ray.config import match_ids

        have = [d for d in run.listdir("memory") if run.exists(f"memory/{d}/store.json")]
        if pid not in have:
            pid = match_ids([pid], have, "profile_id", f"{run.url('memory')}", label="argument PROFILE_ID")[0]
    store = load_store(run, pid)
    indices = embedder = None
    if args.query is not None:
        from filegram_ray.memory.embed import kind_of_identity, make_embedder

        if kind is None:  # the embedder the indices were built with (indices/<profile>/embedder.json)
            rel = f"indices/{pid}/embedder.json"
            kind = kind_of_identity(run.read_json(rel) if run.exists(rel) else None)
        embedder = make_embedder(kind)
        indices = load_indices(run, pid, embedder)
    channels = tuple(c for c in args.channels.split(",") if c)
    ctx = retrieve(store, args.query, channels=channels, indices=indices, embedder=embedder)
    if watch_store:  # docs/watch.md "What is not recorded": a count of 0 there is not a habit
        print("[note: this memory comes from the watcher, which cannot observe searches or folder browsing; "
              "what it says of them (\"never uses search\", \"never browsed directories\") reflects that, not "
              "your habits]\n")
    print(ctx.text)
    print(f"\n[tokens: memory={ctx.tokens_memory}, context={ctx.tokens_context} ({ctx.tokenizer})]")
    return 0


def _encode(args: argparse.Namespace) -> int:
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.memory.stage import run_encode

    summary = run_encode(config_from_args(args, section="encode"))
    return 1 if summary["errors"] and summary["errors"] == summary["trajectories"] else 0


def _update(args: argparse.Namespace) -> int:
    from filegram_ray.extras import require_extras

    require_extras(("watch",), "filegram memory update")
    from filegram_ray.memory.incremental import update_memory
    from filegram_ray.storage import RunDir
    from filegram_ray.watch.export import watch_units
    from filegram_ray.watch.store import StoreError, WatchStore

    try:
        store = WatchStore.open(args.store)
    except StoreError as exc:
        raise SystemExit(f"filegram memory update: {exc}") from None
    pid = args.profile_id or store.config.profile_id
    units, notes = watch_units(store)
    r = update_memory(RunDir(store.path), pid, units, embedder=args.embedder, rebuild=args.rebuild)
    state = "up to date" if r["up_to_date"] else f"{r['encoded_now']} session(s) encoded now"
    print(f"memory update: {state}, {r['reused']} reused, {r['sessions']} in memory"
          + (f" (rebuilt: {r['rebuilt']})" if r["rebuilt"] else "") + f"; embedder {r['embedder']}; seconds "
          + ", ".join(f"{k}={v}" for k, v in r["seconds"].items()))
    for m in notes + r["errors"]:
        print(f"  {m}")
    print(f"next: filegram memory show {args.store} [--query TEXT]")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("memory", help="FileGramOS memory: encode a run, update a watcher store, show a "
                              "profile's context")
    sub = p.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")
    s = sub.add_parser("show", help="print the retrieved context of one profile")
    s.add_argument("run_dir", help="run directory (path or URI), or a watcher store")
    s.add_argument("profile_id", nargs="?", default=None, help="profile id (a watcher store: default its own)")
    s.add_argument("--query", default=None, help="query text: adds the relevant chunks and episodes")
    s.add_argument("--channels", default="procedural,semantic,episodic", help="comma-separated enabled channels")
    s.add_argument("--embedder", default=None, choices=["minilm", "minilm-int8", "e5-small", "hashing"],
                   help="query embedder (default: the one the indices record); another one is refused")
    s.set_defaults(func=_show)
    e = sub.add_parser("encode", help="run the encode stage (same as jobs/encode.py)")
    from filegram_ray.jobargs import add_common_options

    add_common_options(e)
    e.set_defaults(func=_encode)
    u = sub.add_parser("update", help="encode a watcher store's new sessions and update its memory incrementally")
    u.add_argument("store", help="watcher store (filegram watch --out STORE)")
    u.add_argument("--profile-id", default=None, help="profile id (default: the store's)")
    u.add_argument("--embedder", default="minilm", choices=["minilm", "minilm-int8", "hashing"],
                   help="episode/chunk embedder (minilm-int8: the same model int8 on onnxruntime, no torch)")
    u.add_argument("--rebuild", action="store_true", help="re-encode every session")
    u.set_defaults(func=_update)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
