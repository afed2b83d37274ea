"""The one door of every stage, generated from :data:`~filegram_ray.stage_list.STAGES`: ``jobs/<stage>.py`` and
``filegram run <stage>`` (:func:`stage_main`), ``filegram <stage>`` (:func:`register`; for a stage whose name is an
area's command, :data:`AREA_DOORS`, that area's subcommand: ``filegram bench build``, ``filegram render run``) and
``filegram memory encode`` — all take the same options (:func:`add_stage_options`: the common ones of :func:`~filegram_ray.jobargs.add_common_options` and the
stage's own, :meth:`~filegram_ray.stages.base.Stage.add_arguments`) and run the same way (:func:`run_from_args`:
the stages it needs first, then the stage; its record's exit code).
"""

from __future__ import annotations

import argparse
from typing import Any

from filegram_ray import stage_list
from filegram_ray.stage_list import stage_ref

__all__ = ["AREA_DOORS", "add_stage_door", "add_stage_options", "register", "run_from_args", "stage_main",
           "stage_parser", "top_level"]

#: stages whose name is also an area's command (``filegram bench``, ``filegram render``): their door there is that
#: area's subcommand; every other stage is a top-level command, ``filegram <stage>``
AREA_DOORS = {"bench": "bench build", "render": "render run"}


def top_level() -> dict[str, str]:
    """``{stage: one-line help}`` of the stages that are top-level commands (``filegram <stage>``), in pipeline
    order: every stage of :data:`~filegram_ray.stage_list.STAGES` but those of :data:`AREA_DOORS`."""
    return {s.name: f"run the {s.name} stage: {s.description}" for s in stage_list.STAGES
            if s.name not in AREA_DOORS}


def add_stage_options(p: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The options of stage ``name``'s door on ``p``: the common ones and the stage's own."""
    from filegram_ray.jobargs import add_common_options

    add_common_options(p)
    stage_ref(name).load().add_arguments(p)
    return p


def stage_parser(name: str, prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of one stage's job (common options + the stage's own)."""
    ref = stage_ref(name)
    return add_stage_options(argparse.ArgumentParser(prog=prog, description=f"{ref.name} stage: {ref.description}"),
                             name)


def run_from_args(name: str, args: argparse.Namespace) -> int:
    """Run stage ``name`` from its door's parsed options — after the stages it needs (``needs``; a finished item
    of theirs is skipped), all on the same ``--serial`` choice — and return its exit code
    (:func:`~filegram_ray.stages.runner.exit_code`)."""
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.stages.runner import exit_code, run_with_needs, with_needs, with_section_overrides

    cls = stage_ref(name).load()
    shared, overrides = cls.from_arguments(args)
    cfg = config_from_args(args, shared, sections=[stage_ref(n).section for n in with_needs(name)])
    if overrides:
        cfg = with_section_overrides(cfg, {name: overrides})
    return exit_code(cls, run_with_needs(name, cfg))


def stage_main(name: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run one stage from a command line (``jobs/<stage>.py``, ``filegram run <stage>``); returns the exit code."""
    return run_from_args(name, stage_parser(name, prog).parse_args(argv))


def add_stage_door(sub: Any, command: str, name: str, help: str) -> argparse.ArgumentParser:  # noqa: A002
    """Add ``command`` to ``sub`` (an argparse subparsers object) as stage ``name``'s door."""
    p = sub.add_parser(command, help=help, description=f"{name} stage: {stage_ref(name).description}")
    add_stage_options(p, name)
    p.set_defaults(func=lambda a: run_from_args(name, a))
    return p


def register(sub: Any, names: list[str] | None = None) -> None:
    """``filegram <stage>`` for the stages of :func:`top_level` (only ``names`` when given: each door imports its
    stage's module)."""
    for name, help_text in top_level().items():
        if names is None or name in names:
            add_stage_door(sub, name, name, help_text)
