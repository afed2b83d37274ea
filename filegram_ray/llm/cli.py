"""``filegram llm``: the packaged GGUF models and a local OpenAI-compatible server on them (CPU).

* ``filegram llm models`` — the packaged models, whether their packages are installed, where they are cached.
* ``filegram llm assemble [MODEL] [--cache-dir DIR]`` — concatenate a split model once (see
  :func:`filegram_ray.llm.server.model_path`) and print its path.
* ``filegram llm serve [MODEL|PATH] [--port 8011] [--host 127.0.0.1]`` — run llama-cpp-python's server in the
  foreground until Ctrl-C; prints the base URL and the evaluate options that use it.
* ``filegram llm train-reader RUN [RUN …] [--out PATH]`` — train the encoder reader's head on training runs of other
  profile sets (:mod:`filegram_ray.llm.reader_train`) and print its path and card.
"""

from __future__ import annotations

import argparse
import os
import signal


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
    from filegram_ray.llm.server import LlamaCppServer, default_threads

    srv = LlamaCppServer(args.model, port=args.port, host=args.host, n_ctx=args.n_ctx, n_threads=args.threads,
                         chat_format=None if args.chat_format == "gguf" else args.chat_format, alias=args.alias, cache_dir=args.cache_dir,
                         run_dir=args.run_dir, log_path=args.log, startup_timeout=args.startup_timeout)
    print(f"starting: {' '.join(srv.command())}", flush=True)
    busy = os.getloadavg()[0]
    if srv.n_threads > 1 and busy > 2 * srv.n_threads:
        print(f"note: load average {busy:.0f} on {default_threads()} cores: other jobs share this machine. Measured "
              "here, 2 threads then ran 5-10x slower than --threads 1 (threads wait for each other); consider "
              "--threads 1.", flush=True)
    srv.start()
    print(f"serving {srv.model} as {srv.alias!r} at {srv.base_url} (log: {srv.log_path})\n"
          f"evaluate with it: python jobs/evaluate.py --backbone-url {srv.base_url} --backbone-model {srv.alias}\n"
          "Ctrl-C (or kill PID) stops the server.", flush=True)
    def _terminate(signum, frame):  # `kill PID` (and Ctrl-C in a background job, where SIGINT is ignored)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        rc = srv.wait()
    except KeyboardInterrupt:
        rc = 0
    finally:
        srv.stop()
        signal.signal(signal.SIGTERM, previous)
    return rc


def _train_reader(args: argparse.Namespace) -> int:
    import json

    from filegram_ray.llm.reader_head import ReaderHead
    from filegram_ray.llm.reader_train import train_reader

    path = train_reader(args.runs, tag=args.contexts_tag, seed=args.seed, epochs=args.epochs, rank=args.rank,
                        out=args.out, num_actors=args.num_actors)
    card = ReaderHead.load(path).card
    print(f"{path}\n" + json.dumps({k: card[k] for k in ("training", "n_rows", "sources", "inputs_sha256")
                                    if k in card}, indent=2))
    for r in card.get("training_runs", []):
        print(f"  trained on {r['run']}: seed {r['seed']}, {len(r['profile_sha256'])} profiles, {r['n_items']} items, "
              f"{r['n_rows']} rows, contexts of {', '.join(r['methods'])} + gold evidence")
    print(f"use it: --set 'evaluate.backbone={{kind: encoder, head: {path}}}'")
    return 0


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
    s.add_argument("--threads", type=int, default=None,
                   help="threads (default: every core available, best on an idle machine; on a machine busy with "
                   "other jobs 1 thread was 5-10x faster than 2)")
    s.add_argument("--chat-format", default="auto",
                   help="llama-cpp-python chat format (default: the measured one for a packaged model; 'gguf' = "
                        "the model's own template, which the LLM agent uses: tool calls come back as JSON text)")
    s.add_argument("--log", default=None, help="server log file (default /tmp/llama_server_<port>.log)")
    s.add_argument("--startup-timeout", type=float, default=180.0, help="seconds to wait for the server")
    cache_opts(s)
    s.set_defaults(func=_serve)

    t = llm.add_parser("train-reader", help="train the encoder reader's head on runs of other profile sets",
                       description="Train the encoder reader's head (evaluate.backbone: {kind: encoder, head: PATH}) "
                       "on the multiple-choice items of training runs — run directories of other profile sets and "
                       "seeds than any run it will answer, each with bench/ and an evaluate's results/contexts/ — "
                       "from their gold evidence and every evaluated method's contexts. Seeded and resumable; "
                       "the result is cached by its inputs' hash (~/.cache/filegram-ray/readers/).")
    t.add_argument("runs", nargs="+", help="training run directories")
    t.add_argument("--out", default=None, help="also copy the head here (PATH.npz + PATH.json)")
    t.add_argument("--contexts-tag", default="lexical", help="results/contexts/<tag>/ to read (default lexical)")
    t.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    t.add_argument("--epochs", type=int, default=60, help="full-batch Adam steps (default 60)")
    t.add_argument("--rank", type=int, default=None, help="rank of the bilinear map (default 16)")
    t.add_argument("--num-actors", type=int, default=2, help="feature actors (0.5 CPU each)")
    t.set_defaults(func=_train_reader)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])
