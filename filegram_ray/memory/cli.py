"""``filegram memory …`` subcommands: ``show`` prints a profile's retrieved context (:func:`print_context`, also
what ``filegram watch --show-memory`` prints for a watcher store); ``encode`` is the encode stage's door
(:mod:`filegram_ray.stages.cli`); ``update`` brings a watcher store's memory up to date (the same path as ``filegram
watch --update-memory``, :mod:`filegram_ray.watch.cli`)."""

from __future__ import annotations

import argparse


def _show(args: argparse.Namespace) -> int:
    from filegram_ray.storage import RunDir, refuse_missing_local_run

    refuse_missing_local_run(args.run_dir, "filegram memory show")
    run = RunDir(args.run_dir)
    pid = args.profile_id
    if pid is None:
        raise SystemExit("filegram memory show: PROFILE_ID is required for a run directory (a watcher store's memory: "
                         f"filegram watch --out {args.run_dir} --show-memory)")
    from filegram_ray.config import match_ids

    # the short form names a profile as in every other command (p3 = p3_efficient_executor)
    have = [d for d in run.listdir("memory") if run.exists(f"memory/{d}/store.json")]
    if pid not in have:
        pid = match_ids([pid], have, "profile_id", f"{run.url('memory')}", label="argument PROFILE_ID")[0]
    print_context(run, pid, args.query, args.channels, args.embedder)
    return 0


def print_context(run, pid: str, query: str | None, channels: str, kind: str | None, note: str = "") -> None:
    """Print the retrieved context of profile ``pid`` of ``run`` (a run directory or a watcher store: the encode
    stage's layout), for ``query`` (None: the channels alone) over the comma-separated ``channels``, the query
    embedded by ``kind`` (None: the one its indices record; another one is refused); ``note`` first when given.

    Raises:
        StorageError: no memory of ``pid`` (names the file)."""
    from filegram_ray.memory.api import load_store
    from filegram_ray.memory.index import load_indices
    from filegram_ray.memory.retrieve import retrieve

    store = load_store(run, pid)
    indices = embedder = None
    if query is not None:
        from filegram_ray.memory.embed import kind_of_identity, make_embedder

        if kind is None:  # the embedder the indices were built with (indices/<profile>/embedder.json)
            rel = f"indices/{pid}/embedder.json"
            kind = kind_of_identity(run.read_json(rel) if run.exists(rel) else None)
        embedder = make_embedder(kind)
        indices = load_indices(run, pid, embedder)
    ctx = retrieve(store, query, channels=tuple(c for c in channels.split(",") if c), indices=indices,
                   embedder=embedder)
    if note:
        print(note + "\n")
    print(ctx.text)
    print(f"\n[tokens: memory={ctx.tokens_memory}, context={ctx.tokens_context} ({ctx.tokenizer})]")


def _update(args: argparse.Namespace) -> int:
    """``filegram memory update STORE``: encode a watcher store's new sessions and bring its memory up to date
    (:func:`~filegram_ray.memory.incremental.update_memory`, the path of ``filegram watch --update-memory``)."""
    from filegram_ray.extras import require_extras

    require_extras(("watch",), "filegram memory update")
    from filegram_ray.watch.export import update_store_memory
    from filegram_ray.watch.store import StoreError, WatchStore

    try:
        store = WatchStore.open(args.store)
    except StoreError as exc:
        raise SystemExit(f"filegram memory update: {exc}") from None
    print("\n".join(update_store_memory(store, args.profile_id, args.embedder, args.rebuild)))
    print(f"next: filegram watch --out {args.store} --show-memory [--query TEXT]")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("memory", help="FileGramOS memory: encode a run, show a profile's context")
    sub = p.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")
    s = sub.add_parser("show", help="print the retrieved context of one profile")
    s.add_argument("run_dir", help="run directory (path or URI)")
    s.add_argument("profile_id", nargs="?", default=None, help="profile id (p3 or p3_efficient_executor)")
    s.add_argument("--query", default=None, help="query text: adds the relevant chunks and episodes")
    s.add_argument("--channels", default="procedural,semantic,episodic", help="comma-separated enabled channels")
    s.add_argument("--embedder", default=None, choices=["minilm", "minilm-int8", "e5-small", "hashing"],
                   help="query embedder (default: the one the indices record); another one is refused")
    s.set_defaults(func=_show)
    from filegram_ray.stages.cli import add_stage_door

    add_stage_door(sub, "encode", "encode", help="run the encode stage (same as jobs/encode.py)")
    u = sub.add_parser("update", help="encode a watcher store's new sessions and update its memory incrementally "
                       "(as `filegram watch --out STORE --update-memory`)")
    u.add_argument("store", help="watcher store (filegram watch --out STORE)")
    u.add_argument("--profile-id", default=None, help="profile id (default: the store's)")
    u.add_argument("--embedder", default="minilm", choices=["minilm", "minilm-int8", "hashing"],
                   help="episode/chunk embedder (minilm-int8: the same model int8 on onnxruntime, no torch)")
    u.add_argument("--rebuild", action="store_true", help="re-encode every session")
    u.set_defaults(func=_update)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
