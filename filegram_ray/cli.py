"""The ``filegram`` console script. Subcommands mirror the pipeline stages.

Each area of the library contributes its subcommands through a ``register(subparsers)`` function in its own
``cli`` module, listed in :data:`COMMANDS`; the handler is stored as ``func`` on the parsed namespace.

Start-up is kept short (``filegram --help`` stays under 0.5 s): this module imports only the standard library,
and ``--help`` is drawn from the one-line helps in :data:`COMMANDS`; an area's ``cli`` module is imported only when
its command runs (``filegram memory …`` imports ``filegram_ray.memory.cli`` alone), and those modules import numpy,
torch, Ray and the like inside their handlers. ``tests/test_cli_startup.py`` checks that the table matches what the
modules register and that importing this module loads none of numpy, polars, Faker, torch or Ray.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys

from filegram_ray import __version__
from filegram_ray.stages.cli import register as register_stage_doors
from filegram_ray.stages.cli import top_level

#: top-level command → (module providing ``register(subparsers)``, one-line help), in ``--help`` order. The help
#: must equal the one the module registers (checked by tests/test_cli_startup.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "profiles": ("filegram_ray.profiles.cli", "inspect or build profile sets"),
    "tasks": ("filegram_ray.tasks.cli", "inspect the task set"),
    "workspace": ("filegram_ray.workspace.cli", "build, list or import task input bundles"),
    "engine": ("filegram_ray.engine.cli", "trajectory engine utilities"),
    "memory": ("filegram_ray.memory.cli", "FileGramOS memory: encode a run, show a profile's context"),
    "watch": ("filegram_ray.watch.cli", "record your own file activity (Linux inotify) into a local store"),
    "mcp": ("filegram_ray.mcp.cli", "serve your FileGramOS memory to your AI assistants (Model Context Protocol; "
            "local, read-only)"),
    "bench": ("filegram_ray.bench.cli", "build FileGramBench items (bench stage) and show their counts"),
    "methods": ("filegram_ray.methods.cli", "list the registered memory methods"),
    "llm": ("filegram_ray.llm.cli", "packaged GGUF models and a local OpenAI-compatible server (CPU)"),
    "render": ("rendering.cli", "render agent outputs into multimodal derivatives"),
    "video": ("video.cli", "guidance videos, screen-recording captions, events from recordings"),
    "pipeline": ("filegram_ray.pipeline",
                 "run seed → generate → encode → render → record → caption → bench → evaluate"),
    "run": ("filegram_ray.pipeline", "run one stage (filegram run <stage> --help for its options)"),
    # every stage's own door, generated from STAGES (bench and render: `bench build`, `render run`)
    **{name: ("filegram_ray.stages.cli", help_text) for name, help_text in top_level().items()},  # STAGE_DOORS
    "models": ("filegram_ray.weights",
               "the models manifest: list the packaged models, verify installed weights"),
    "validity": ("filegram_ray.validity.cli", "does the behaviour carry the profile, like a person? (tier "
                 "recovery, single-session separability, η², perturbations, a count-rule answerer, motivation, "
                 "τ-flags, aggregate counts; each bounded figure PASS/FAIL) → RUN/results/validity.md"),
    "findings": ("filegram_ray.evaluate.cli", "the paper's findings F1–F6 decided on an evaluated run (paired "
                 "tests, intervals; holds / fails / undecided with the items to decide)"),
    "submit": ("filegram_ray.submit",
               "submit a job to a Ray cluster (as ray job submit) and say plainly when its head is lost"),
    "view": ("filegram_ray.view.cli", "write a static viewer of a run (results, items with contexts, trajectories, "
             "run) → RUN/view/index.html"),
}

#: the module of the stages' own doors (``filegram <stage>``): given a command line, only the named stage is loaded
STAGE_DOORS = "filegram_ray.stages.cli"

#: modules providing ``register(subparsers)``, in the order their commands appear in ``--help``.
COMMAND_MODULES = list(dict.fromkeys(mod for mod, _ in COMMANDS.values()))


def _present(module: str) -> bool:
    """Whether ``module``'s top-level package is installed (``rendering`` and ``video`` are optional areas); the
    package is located, not imported."""
    return importlib.util.find_spec(module.split(".", 1)[0]) is not None


def _register(sub, module: str) -> bool:
    """Import ``module`` and let it add its commands; False when that area is not part of this build."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module or module.startswith(exc.name + ".")):
            return False  # that area is not part of this build
        raise
    mod.register(sub)
    return True


def _command_of(argv: list[str]) -> str | None:
    """The top-level command ``argv`` names: its first word that is not an option (None when there is none)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``filegram`` parser.

    Args:
        argv: the command line about to be parsed. Given, only the module of the command it names is imported and
            registered; every other command is a placeholder carrying its one-line help (enough for ``--help`` and
            for argparse's "invalid choice" message). None: every area's module is imported and registered (the
            complete parser, for tests and documentation tools).
    """
    parser = argparse.ArgumentParser(
        prog="filegram",
        description="FileGram on Ray: generate persona trajectories, encode FileGramOS memory, build and run "
        "FileGramBench.",
    )
    parser.add_argument("--version", action="version", version=f"filegram-ray {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = _command_of(argv) if argv is not None else None
    load = set(COMMAND_MODULES) if argv is None else ({COMMANDS[wanted][0]} if wanted in COMMANDS else set())
    done: set[str] = set()
    for name, (module, help_text) in COMMANDS.items():
        if module in done:
            continue
        if module == STAGE_DOORS and argv is not None:  # a stage's door loads that stage's module alone
            if name == wanted:
                register_stage_doors(sub, [name])
            else:
                sub.add_parser(name, help=help_text, add_help=False)
            continue
        if module in load:
            done.add(module)
            if _register(sub, module):
                continue
        elif _present(module):
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


#: third-party loggers whose INFO lines (faiss trying AVX512/AVX2 builds, "Loading SentenceTransformer model …")
#: are noise on the command line; ``-v`` shows them
_CHATTY_LIBRARIES = ("faiss", "faiss.loader", "sentence_transformers", "transformers", "httpx", "urllib3")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
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
