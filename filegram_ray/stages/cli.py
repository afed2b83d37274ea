"""The command lines of the stages, all derived from :data:`filegram_ray.pipeline.STAGES`:

* ``filegram run <stage> [options]`` and ``python jobs/<stage>.py [options]`` — one stage (:func:`stage_main`);
* ``filegram pipeline [--only …] [--skip …]`` and ``python jobs/pipeline.py`` — the stages in order
  (:func:`pipeline_main`).

Every stage job takes the common options (:func:`filegram_ray.jobargs.add_common_options`) and the stage's own
(:meth:`filegram_ray.stages.base.Stage.add_arguments`).
"""

from __future__ import annotations

import argparse
from typing import Any

from filegram_ray.pipeline import STAGES, stage_ref

__all__ = ["register", "stage_main", "pipeline_main", "stage_parser", "pipeline_parser"]


def stage_parser(name: str, prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of one stage's job (common options + the stage's own)."""
    from filegram_ray.jobargs import add_common_options

    ref = stage_ref(name)
    p = argparse.ArgumentParser(prog=prog, description=f"{ref.name} stage: {ref.description}")
    add_common_options(p)
    ref.load().add_arguments(p)
    return p


def stage_main(name: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run one stage from a command line; returns the exit code (:meth:`~filegram_ray.stages.base.Stage.exit_code`:
    1 when a unit failed)."""
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.stages.runner import run_stage

    cls = stage_ref(name).load()
    args = stage_parser(name, prog).parse_args(argv)
    shared, overrides = cls.from_arguments(args)
    cfg = config_from_args(args, shared, section=cls.section_name())
    record = run_stage(cls, cfg, overrides=overrides or None)
    cls.after_run(record, cfg)
    return cls.exit_code(record)


def pipeline_parser(prog: str | None = None, p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The pipeline's parser: common options, ``--only`` / ``--skip``."""
    from filegram_ray.jobargs import add_common_options

    names = [s.name for s in STAGES]
    p = p or argparse.ArgumentParser(prog=prog, description="Run the whole FileGram pipeline: "
                                     + " → ".join(names))
    add_common_options(p)
    p.add_argument("--only", nargs="+", choices=names, help="run only these stages")
    p.add_argument("--skip", nargs="+", choices=names, help="skip these stages")
    return p


def _pipeline(args: argparse.Namespace) -> int:
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.pipeline import run_pipeline

    cfg = config_from_args(args)
    timings = run_pipeline(cfg, only=args.only, skip=args.skip, serial=args.serial)
    if "evaluate" in timings:  # only a pipeline that evaluated has a report of this run to point at
        print(f"\nReport: {cfg.run().url('results/report.md')}")
        from filegram_ray.view.build import view_after_pipeline

        view_after_pipeline(cfg.run())  # the last line: "open RUN/view/index.html"
    return 0


def pipeline_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run the pipeline from a command line (``jobs/pipeline.py``)."""
    return _pipeline(pipeline_parser(prog).parse_args(argv))


def register(sub: Any) -> None:
    """``filegram pipeline`` and ``filegram run <stage>`` (the stage's options are parsed by its own parser, so
    ``filegram run --help`` imports no stage)."""
    p = sub.add_parser("pipeline", help="run " + " → ".join(s.name for s in STAGES))
    pipeline_parser(p=p)
    p.set_defaults(func=_pipeline)
    r = sub.add_parser("run", help="run one stage (filegram run <stage> --help for its options)",
                       description="Run one stage. Stages:\n" + "\n".join(f"  {s.name:<9} {s.description}"
                                                                         for s in STAGES),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("stage", choices=[s.name for s in STAGES], metavar="STAGE", help="the stage to run")
    r.add_argument("options", nargs=argparse.REMAINDER, help="the stage's options")
    r.set_defaults(func=lambda a: stage_main(a.stage, a.options, prog=f"filegram run {a.stage}"))
