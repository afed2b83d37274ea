"""``filegram mcp --store STORE``: serve a watcher store's FileGramOS memory to AI assistants over the Model Context
Protocol (stdio by default, ``--http`` for streamable HTTP on 127.0.0.1). Set-up for clients: docs/mcp.md."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "serve your FileGramOS memory to your AI assistants (Model Context Protocol; local, read-only)"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # stdout carries the protocol under stdio


def _mcp(args: argparse.Namespace) -> int:
    from filegram_ray.extras import require_extras

    require_extras(("mcp", "watch"), "filegram mcp")
    import os

    from filegram_ray.mcp.memory import MemoryService
    from filegram_ray.mcp.server import serve_http, serve_stdio

    service = MemoryService(args.store, forget=args.forget, embedder=args.embedder, update=not args.no_update,
                            refresh_s=args.refresh_seconds)
    service.start()
    _say(f"filegram mcp: serving the memory of {service.store.path} (memory: {service.state}); read-only"
         + ("" if service.update_enabled else ", not updated") + ".")
    for rule in service.rules.describe():
        _say(f"  forget: {rule}")
    _say(f"  requests are logged without contents to {service.store.path / 'mcp' / 'requests.jsonl'}")
    try:
        if not args.http:
            serve_stdio(service)
            return 0

        def ready(url: str, token: str) -> None:
            _say(f"  streamable HTTP on {url} (127.0.0.1 only)")
            _say(f"  bearer token: {token}")
            _say("  client configuration (mcpServers):")
            _say(json.dumps({"mcpServers": {"filegram": {"type": "http", "url": url,
                                                          "headers": {"Authorization": f"Bearer {token}"}}}},
                            indent=2))
            _say("  Ctrl-C stops the server.")

        serve_http(service, port=args.port, token=os.environ.get("FILEGRAM_MCP_TOKEN") or None, on_ready=ready)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        service.close(timeout=2.0)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mcp", help=HELP,
        description="Serve the FileGramOS memory of a `filegram watch` store over the Model Context Protocol: tools "
        "how_does_the_user, recall, recent_sessions, profile; resources filegram://…; the prompt "
        "work_like_this_user. Read-only; only redacted stores; nothing leaves this machine. The memory is brought "
        "up to date in the background (as `filegram memory update`). Client set-up: docs/mcp.md.")
    p.add_argument("--store", required=True, metavar="STORE", help="the watcher store (filegram watch --out STORE)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 with a bearer token (printed "
                   "at start; FILEGRAM_MCP_TOKEN sets it) instead of stdio")
    p.add_argument("--port", type=int, default=8765, help="with --http: the port on 127.0.0.1 (0: a free one; "
                   "default 8765)")
    p.add_argument("--forget", action="append", default=[], metavar="DATE|PATH",
                   help="leave out sessions before DATE (YYYY-MM-DD, local time) or everything about PATH (a file "
                   "or folder; followed through renames and moves as `filegram watch --forget`), without changing "
                   "the store; repeatable")
    p.add_argument("--embedder", default=None, choices=["minilm", "minilm-int8", "hashing"],
                   help="episode/chunk embedder (default: the one the memory was built with, else minilm when the "
                   "embed extra is installed, else minilm-int8, else hashing)")
    p.add_argument("--no-update", action="store_true", help="serve the memory on disk; never update it")
    p.add_argument("--refresh-seconds", type=float, default=30.0, metavar="S",
                   help="how often new sessions are added to the memory (default 30)")
    p.set_defaults(func=_mcp)
