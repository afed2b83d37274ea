"""The ``filegram`` console script. Subcommands mirror the pipeline stages.

Each area of the library contributes its subcommands through a ``register(subparsers)`` function in its own
``cli`` module, listed in :data:`COMMAND_MODULES`; the handler is stored as ``func`` on the parsed namespace.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from filegram_ray import __version__

#: modules providing ``register(subparsers)``, in the order their commands appear in ``--help``.
COMMAND_MODULES = [
    "filegram_ray.profiles.cli",
    "filegram_ray.tasks.cli",
    "filegram_ray.workspace.cli",
    "filegram_ray.engine.cli",
    "filegram_ray.memory.cli",
    "filegram_ray.watch.cli",
    "filegram_ray.bench.cli",
    "filegram_ray.methods.cli",
    "filegram_ray.llm.cli",
    "rendering.cli",
    "video.cli",
    "filegram_ray.pipeline_cli",
    "filegram_ray.validity.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filegram",
        description="FileGram on Ray: generate persona trajectories, encode FileGramOS memory, build and run "
        "FileGramBench.",
    )
    parser.add_argument("--version", action="version", version=f"filegram-ray {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue  # that area is not part of this build
            raise
        mod.register(sub)
    return parser


#: third-party loggers whose INFO lines (faiss trying AVX512/AVX2 builds, "Loading SentenceTransformer model …")
#: are noise on the command line; ``-v`` shows them
_CHATTY_LIBRARIES = ("faiss", "faiss.loader", "sentence_transformers", "transformers", "httpx", "urllib3")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # libraries' start-up chatter (faiss's loader, model loading) only with -v
        for name in _CHATTY_LIBRARIES:
            logging.getLogger(name).setLevel(logging.WARNING)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from filegram_ray.jobargs import run_job

    try:
        rc = run_job(lambda _argv: args.func(args))
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
