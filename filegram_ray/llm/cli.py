"""``filegram llm``: the packaged GGUF models and a local OpenAI-compatible server on them (CPU).

* ``filegram llm models`` — the packaged models, whether their packages are installed, where they are cached.
* ``filegram llm assemble [MODEL] [--cache-dir DIR]`` — concatenate a split model once (see
  :func:`filegram_ray.llm.server.model_path`) and print its path.
* ``filegram llm serve [MODEL|PATH] [--port 8011] [--host 127.0.0.1]`` — run llama-cpp-python's server in the
  foreground until Ctrl-C; prints the base URL and the evaluate options that use it.
"""

from __future__ import annotations

import argparse


def _models(args: argparse.Namespace) -> int:
    from filegram_ray.llm.server import DEFAULT_MODEL, MODELS, model_cache_dir

    cache = model_cache_dir(args.cache_dir, args.run_dir)
    for m in MODELS.values():
        state = "installed" if m.installed() else "not installed"
        where = ""
        if m.is_split:
            f = cache / m.filename
            where = f"assembled: {f}" if f.is_file() else f"assembles into {cache}"
        default = " (default)" if m.name == DEFAULT_MODEL else ""
        print(f"{m.name:<20} {m.title:<40} {state:<14} chat_format={m.chat_format:<24} {where}{default}")
        if not m.installed():
            print(f"{'':<20} install: {m.pip}")
    return 0


def _assemble(args: argparse.Namespace) -> int:
    from filegram_ray.llm.server import gguf_header, model_path

    path = model_path(args.model, cache_dir=args.cache_dir, run_dir=args.run_dir, verify=args.verify)
    info = gguf_header(path)
    print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB, GGUF v{info['version']}, "
          f"{info.get('general.name', '?')})")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from filegram_ray.llm.server import LlamaCppServer

    srv = LlamaCppServer(args.model, port=args.port, host=args.host, n_ctx=args.n_ctx, n_threads=args.threads,
                         chat_format=args.chat_format, alias=args.alias, cache_dir=args.cache_dir,
                         run_dir=args.run_dir, log_path=args.log, startup_timeout=args.startup_timeout)
    print(f"starting: {' '.join(srv.command())}", flush=True)
    srv.start()
    print(f"serving {srv.model} as {srv.alias!r} at {srv.base_url} (log: {srv.log_path})\n"
          f"evaluate with it: python jobs/evaluate.py --backbone-url {srv.base_url} --backbone-model {srv.alias}\n"
          "Ctrl-C stops the server.", flush=True)
    try:
        rc = srv.wait()
    except KeyboardInterrupt:
        rc = 0
    finally:
        srv.stop()
    return rc


def register(sub) -> None:
    from filegram_ray.llm.server import DEFAULT_MODEL

    p = sub.add_parser("llm", help="packaged GGUF models and a local OpenAI-compatible server (CPU)")
    llm = p.add_subparsers(dest="llm_command", metavar="COMMAND")

    def cache_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument("--cache-dir", default=None, help="where split models are assembled (default: "
                       "$FILEGRAM_MODEL_CACHE, else <run-dir>/cache/models, else ~/.cache/filegram-ray/models)")
        q.add_argument("--run-dir", default=None, help="a local run directory whose cache/models/ holds them")

    m = llm.add_parser("models", help="list the packaged models")
    cache_opts(m)
    m.set_defaults(func=_models)

    a = llm.add_parser("assemble", help="assemble a split packaged model into the cache and print its path")
    a.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=f"packaged model name (default {DEFAULT_MODEL})")
    a.add_argument("--verify", action="store_true", help="re-check the sha256 of an already cached file")
    cache_opts(a)
    a.set_defaults(func=_assemble)

    s = llm.add_parser("serve", help="run llama-cpp-python's OpenAI-compatible server on a packaged model",
                       description="Run llama-cpp-python's OpenAI-compatible server in the foreground on a "
                       "packaged GGUF model (or a GGUF path), with the thread and chat-format settings measured "
                       "on 2-core machines. Needs pip install 'llama-cpp-python[server]'.")
    s.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"packaged model name (`filegram llm models`) or a GGUF path (default {DEFAULT_MODEL})")
    s.add_argument("--port", type=int, default=8011, help="TCP port (default 8011)")
    s.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; 0.0.0.0 for other machines)")
    s.add_argument("--alias", default="local", help="model name clients send (default 'local')")
    s.add_argument("--n-ctx", type=int, default=None, help="context window in tokens (default: the model's entry)")
    s.add_argument("--threads", type=int, default=None, help="threads (default: every core available)")
    s.add_argument("--chat-format", default="auto",
                   help="llama-cpp-python chat format (default: the measured one for a packaged model)")
    s.add_argument("--log", default=None, help="server log file (default /tmp/llama_server_<port>.log)")
    s.add_argument("--startup-timeout", type=float, default=180.0, help="seconds to wait for the server")
    cache_opts(s)
    s.set_defaults(func=_serve)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])
