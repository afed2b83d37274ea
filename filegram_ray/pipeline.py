"""The whole pipeline: seed → generate → encode → render → record → caption → bench → evaluate, each stage a
function of the config.

Render runs before bench so the File Grounding sub-task can use the rendered derivatives; record (guidance videos of
a seeded sample of trajectories) and caption (keyframes → OCR/VLM captions → events read back) run before bench so
Visual Grounding and the Real-World setting can use the recordings.

Each stage is resumable, so a rerun of the pipeline skips finished work; ``--only``/``--skip`` pick stages.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from filegram_ray.stage_list import STAGES, stage_names, stage_ref

if TYPE_CHECKING:  # imported where used: `filegram pipeline --help` reads STAGES without pydantic (fast --help)
    from filegram_ray.config import PipelineConfig

__all__ = ["format_stage_table", "pipeline_main", "register", "run_pipeline"]


def run_pipeline(cfg: PipelineConfig, only: list[str] | None = None, skip: list[str] | None = None,
                 executor: str | None = None) -> dict[str, Any]:
    """Run the selected stages in order (:func:`~filegram_ray.stages.runner.run_stages`: one hold of the run
    directory, one Ray connection) and print the per-stage table; returns ``{stage: {"seconds": float, "result":
    record}}``. Where each stage's items run is its section's ``executor``; ``executor`` given lays it over every
    selected stage's (``--serial``: ``serial``).

    Raises:
        UserError: an unknown stage name in ``only``/``skip``; an unknown profile or task id when seed or generate
            is selected (:func:`~filegram_ray.stages.runner.check_sets`), before any stage runs.
    """
    from filegram_ray.stages.runner import check_sets, run_stages, with_section_overrides

    for s in (only or []) + (skip or []):
        stage_ref(s)  # an unknown name is refused with the list
    selected = [n for n in stage_names() if (not only or n in only) and n not in (skip or [])]
    if executor is not None:
        cfg = with_section_overrides(cfg, {n: {"executor": executor} for n in selected})
    if "seed" in selected or "generate" in selected:  # unknown ids are refused before the first stage starts
        check_sets(cfg, ("profiles", "tasks"))  # seed records the run's sets too (its run.json snapshot)
    timings = run_stages(cfg, selected)
    print("\nPipeline summary", file=sys.stdout)
    print(format_stage_table(timings))
    return timings


def format_stage_table(timings: dict[str, Any]) -> str:
    """The per-stage table (seconds, CPU seconds, peak memory, units: :class:`~filegram_ray.stages.base.UnitCounts`,
    whose ``skipped`` is the ``earlier`` column; a stage of several steps, e.g. encode and evaluate, adds a line per
    step under its row) from :func:`run_pipeline`'s result, with a line explaining the unit columns."""
    lines = [f"{'stage':<10} {'seconds':>9} {'cpu s':>8} {'peak MiB':>9} {'driver MiB':>10} {'planned':>8} {'done':>6} "
             f"{'earlier':>8} {'failed':>7}"]
    for name, rec in timings.items():
        res = rec.get("result") if isinstance(rec.get("result"), dict) else {}
        u = res.get("units") if isinstance(res.get("units"), dict) else {}
        lines.append(f"{name:<10} {rec['seconds']:>9.1f} {float(res.get('cpu_s') or 0):>8.1f} "
                     f"{float(res.get('peak_memory_mb') or 0):>9.0f} {float(res.get('driver_peak_memory_mb') or 0):>10.0f} "
                     f"{u.get('planned', ''):>8} {u.get('done', ''):>6} "
                     f"{u.get('skipped', ''):>8} {u.get('failed', ''):>7}")
        steps = res.get("steps") if isinstance(res.get("steps"), dict) else {}
        for step, c in steps.items():  # a stage of several steps: its units are their sum, each step shown
            if isinstance(c, dict):
                lines.append(f"  · {step}: planned {c.get('planned', 0)}, done {c.get('done', 0)}, "
                             f"earlier {c.get('skipped', 0)}, failed {c.get('failed', 0)}")
    total = sum(r["seconds"] for r in timings.values())
    cpu = sum(float((r.get("result") or {}).get("cpu_s") or 0) for r in timings.values()
              if isinstance(r.get("result"), dict))
    lines.append(f"{'total':<10} {total:>9.1f} {cpu:>8.1f}")
    lines.append("units: done = finished by this run (a unit a stage renders as 'skipped', e.g. a format that does "
                 "not apply, counts here); earlier = finished by an earlier run and left alone; failed = error rows")
    return "\n".join(lines)


# -- the command lines: `filegram pipeline`, `jobs/pipeline.py`, `filegram run <stage>`, `filegram evaluate` --------

def pipeline_parser(prog: str | None = None, p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The pipeline's parser: common options, ``--only`` / ``--skip``."""
    from filegram_ray.jobargs import add_common_options

    names = stage_names()
    p = p or argparse.ArgumentParser(prog=prog, description="Run the whole FileGram pipeline: "
                                     + " → ".join(names))
    add_common_options(p)
    p.add_argument("--only", nargs="+", choices=names, help="run only these stages")
    p.add_argument("--skip", nargs="+", choices=names, help="skip these stages")
    return p


def _pipeline(args: argparse.Namespace) -> int:
    from filegram_ray.jobargs import config_from_args

    names = [n for n in stage_names() if (not args.only or n in args.only) and n not in (args.skip or [])]
    cfg = config_from_args(args, sections=[stage_ref(n).section for n in names])
    timings = run_pipeline(cfg, only=args.only, skip=args.skip)
    if "evaluate" in timings:  # only a pipeline that evaluated has a report of this run to point at
        print(f"\nReport: {cfg.run().url('results/report.md')}")
        from filegram_ray.view.build import view_after_pipeline

        view_after_pipeline(cfg.run())  # the last line: "open RUN/view/index.html"
    return 0


def pipeline_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run the pipeline from a command line (``jobs/pipeline.py``)."""
    return _pipeline(pipeline_parser(prog).parse_args(argv))


def register(sub: Any) -> None:
    """``filegram pipeline``, ``filegram run <stage>`` (the stage's options are parsed by its own parser, so
    ``filegram run --help`` imports no stage)."""
    p = sub.add_parser("pipeline", help="run " + " → ".join(stage_names()))
    pipeline_parser(p=p)
    p.set_defaults(func=_pipeline)
    r = sub.add_parser("run", help="run one stage (filegram run <stage> --help for its options)",
                       description="Run one stage. Stages:\n" + "\n".join(f"  {s.name:<9} {s.description}"
                                                                         for s in STAGES),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("stage", choices=stage_names(), metavar="STAGE", help="the stage to run")
    r.add_argument("options", nargs=argparse.REMAINDER, help="the stage's options")

    def _run(a: argparse.Namespace) -> int:
        from filegram_ray.stages.cli import stage_main

        return stage_main(a.stage, a.options, prog=f"filegram run {a.stage}")

    r.set_defaults(func=_run)
