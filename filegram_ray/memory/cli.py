"""``filegram memory …`` subcommands: ``show`` prints a profile's retrieved context; ``encode`` runs the stage."""

from __future__ import annotations

import argparse


def _show(args: argparse.Namespace) -> int:
    from filegram_ray.memory.index import load_indices
    from filegram_ray.memory.retrieve import retrieve
    from filegram_ray.memory.stage import load_store
    from filegram_ray.storage import RunDir

    run = RunDir(args.run_dir)
    store = load_store(run, args.profile_id)
    indices = embedder = None
    if args.query is not None:
        from filegram_ray.memory.embed import make_embedder

        kind = args.embedder
        if kind is None:  # the embedder the run's indices were built with (indices/<profile>/embedder.json)
            rel = f"indices/{args.profile_id}/embedder.json"
            recorded = run.read_json(rel).get("model") if run.exists(rel) else None
            kind = "hashing" if recorded == "hashing" else "minilm"
        embedder = make_embedder(kind)
        indices = load_indices(run, args.profile_id, embedder)
    channels = tuple(c for c in args.channels.split(",") if c)
    ctx = retrieve(store, args.query, channels=channels, indices=indices, embedder=embedder)
    print(ctx.text)
    print(f"\n[tokens: memory={ctx.tokens_memory}, context={ctx.tokens_context} ({ctx.tokenizer})]")
    return 0


def _encode(args: argparse.Namespace) -> int:
    from filegram_ray.config import load_config
    from filegram_ray.memory.stage import format_summary, run_encode

    cfg = load_config(args.config, list(args.set) + ([f"run_dir={args.run_dir}"] if args.run_dir else []))
    print(format_summary(run_encode(cfg, serial=args.serial, address=args.address)))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("memory", help="FileGramOS memory: encode a run, show a profile's context")
    sub = p.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")
    s = sub.add_parser("show", help="print the retrieved context of one profile")
    s.add_argument("run_dir", help="run directory (path or URI)")
    s.add_argument("profile_id")
    s.add_argument("--query", default=None, help="query text: adds the relevant chunks and episodes")
    s.add_argument("--channels", default="procedural,semantic,episodic", help="comma-separated enabled channels")
    s.add_argument("--embedder", default=None, choices=["minilm", "hashing"],
                   help="query embedder (default: the one the run's indices record); another one is refused")
    s.set_defaults(func=_show)
    e = sub.add_parser("encode", help="run the encode stage (same as jobs/encode.py)")
    e.add_argument("--config", default=None)
    e.add_argument("--run-dir", default=None)
    e.add_argument("--set", action="append", default=[], metavar="K=V")
    e.add_argument("--serial", action="store_true")
    e.add_argument("--address", default=None)
    e.set_defaults(func=_encode)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
