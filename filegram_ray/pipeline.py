"""The whole pipeline: seed → generate → encode → render → record → caption → bench → evaluate, each stage a
function of the config.

Render runs before bench so the File Grounding sub-task can use the rendered derivatives; record (guidance videos of
a seeded sample of trajectories) and caption (keyframes → OCR/VLM captions → events read back) run before bench so
Visual Grounding and the Real-World setting can use the recordings.

Each stage is resumable, so a rerun of the pipeline skips finished work; ``--only``/``--skip`` pick stages.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

from filegram_ray.errors import UserError

if TYPE_CHECKING:  # imported where used: `filegram pipeline --help` reads STAGES without pydantic (issue 31)
    from filegram_ray.config import PipelineConfig
    from filegram_ray.stages.base import Stage

class StageRef(NamedTuple):
    """One line of :data:`STAGES`: a stage's ``name``, the ``module:Class`` of its
    :class:`~filegram_ray.stages.base.Stage`, the config section holding its options, and one line of help."""

    name: str
    target: str
    section: str
    description: str

    def load(self) -> type[Stage]:
        """The stage's class (its module is imported on first use: ``filegram --help`` loads no stage)."""
        module, _, cls = self.target.partition(":")
        return getattr(import_module(module), cls)


#: The pipeline's stages in order — the only list of them. Config sections (:func:`sections`), the CLI
#: (``filegram run <stage>``, ``--only`` / ``--skip``), ``jobs/<stage>.py`` and the viewer derive from it; adding a
#: stage is one line here and its :class:`~filegram_ray.stages.base.Stage` subclass. The seed stage's options sit
#: in ``workspace:`` because the top-level ``seed`` is the run's master seed (an int).
STAGES: list[StageRef] = [
    StageRef("seed", "filegram_ray.workspace.stage:SeedStage", "workspace",
             "build every task's seeded multi-format input bundle → workspaces/"),
    StageRef("generate", "filegram_ray.engine.generate:GenerateStage", "generate",
             "persona agents do the tasks; typed events + content deltas → trajectories/"),
    StageRef("encode", "filegram_ray.memory.stage:EncodeStage", "encode",
             "FileGramOS Engrams, channels and FAISS indices → engrams/, memory/, indices/"),
    StageRef("render", "rendering.stage:RenderStage", "render",
             "multimodal derivatives of agent outputs → derivatives/"),
    StageRef("record", "video.record_stage:RecordStage", "record",
             "guidance videos of a seeded sample → recordings/"),
    StageRef("caption", "video.caption_stage:CaptionStage", "caption",
             "keyframes → OCR/VLM captions → events read back → captions/, realworld/"),
    StageRef("bench", "filegram_ray.bench.stage:BenchStage", "bench", "FileGramBench items → bench/"),
    StageRef("evaluate", "filegram_ray.evaluate.stage:EvaluateStage", "evaluate",
             "every memory method × the items → results/report.md"),
]


def stage_names() -> list[str]:
    """The stage names in pipeline order."""
    return [s.name for s in STAGES]


def stage_ref(name: str) -> StageRef:
    """The :data:`STAGES` line of ``name``.

    Raises:
        UserError: an unknown stage (the message lists the stages)."""
    for s in STAGES:
        if s.name == name:
            return s
    raise UserError(f"unknown stage {name!r}; stages are {', '.join(stage_names())}")


def sections() -> dict[str, str]:
    """``{config section: stage name}`` of every stage."""
    return {s.section: s.name for s in STAGES}


def stage_function(stage: str | type[Stage]) -> Callable[..., dict[str, Any]]:
    """``run_<stage>(config, executor=None, **overrides)``: :func:`~filegram_ray.stages.runner.run_stage` of a
    stage (its name, or its class — what a stage module uses to define its ``run_<stage>``)."""
    cls = stage_ref(stage).load() if isinstance(stage, str) else stage
    name = cls.name

    def run(config: PipelineConfig, executor=None, **overrides: Any) -> dict[str, Any]:
        from filegram_ray.stages.runner import run_stage

        return run_stage(cls, config, executor, overrides=overrides or None)

    run.__name__ = run.__qualname__ = f"run_{name}"
    run.stage = cls
    return run


def stage_functions() -> dict[str, Callable[..., dict[str, Any]]]:
    """``{stage name: run_<stage>}`` in pipeline order."""
    return {s.name: stage_function(s.name) for s in STAGES}


def run_pipeline(cfg: PipelineConfig, only: list[str] | None = None, skip: list[str] | None = None,
                 serial: bool = False) -> dict[str, Any]:
    """Run the selected stages in order; returns ``{stage: {"seconds": float, "result": …}}``.

    Args:
        serial: every selected stage in this process without Ray (the serial executor).

    Raises:
        UserError: an unknown stage name in ``only``/``skip``; an unknown profile or task id when seed or generate
            is selected (:func:`~filegram_ray.config.check_sets`), before any stage runs.
    """
    names = stage_names()
    for s in (only or []) + (skip or []):
        stage_ref(s)  # an unknown name is refused with the list
    selected = [n for n in names if (not only or n in only) and n not in (skip or [])]
    from filegram_ray.config import check_sets
    from filegram_ray.runtime import init_ray
    from filegram_ray.stages.rundir import forget_failed_start, missing_local_dir, refuse_missing_run
    from filegram_ray.stages.runner import run_stage

    if "seed" in selected or "generate" in selected:  # unknown ids are refused before the first stage starts
        check_sets(cfg, ("profiles", "tasks"))  # seed records the run's sets too (its run.json snapshot)
    classes = {n: stage_ref(n).load() for n in selected}
    if selected:  # before the pipeline's lock creates the directory
        refuse_missing_run(cfg, selected[0], classes[selected[0]].may_start_run(cfg))
    executor = None
    if serial:
        from filegram_ray.stages.executors import SerialExecutor

        executor = SerialExecutor()
    timings: dict[str, Any] = {}
    created = missing_local_dir(cfg)
    run = cfg.run()
    try:
        with run.lock("pipeline"):  # no other job slips in between two stages
            if not serial:  # one Ray connection for every stage (a cluster's RAY_ADDRESS or a local Ray), started
                init_ray(cfg.ray.address, cfg.ray.num_cpus)  # once the run directory is ours (a busy one fails at once)
            for name in selected:
                print(f"\n=== stage {name} ===", flush=True)
                t0 = time.perf_counter()
                result = run_stage(classes[name], cfg, executor)
                timings[name] = {"seconds": round(time.perf_counter() - t0, 2), "result": result}
                print(f"=== stage {name} done in {timings[name]['seconds']:.1f} s ===", flush=True)
    except BaseException:
        if created:  # a new directory where nothing got done (forget_failed_start checks) is removed again
            forget_failed_start(run, True)
        raise
    print("\nPipeline summary", file=sys.stdout)
    print(format_stage_table(timings))
    return timings


def format_stage_table(timings: dict[str, Any]) -> str:
    """The per-stage table (seconds, CPU seconds, peak memory, units) from :func:`run_pipeline`'s result."""
    lines = [f"{'stage':<10} {'seconds':>9} {'cpu s':>8} {'peak MiB':>9} {'driver MiB':>10} {'planned':>8} {'done':>6} {'skipped':>8} "
             f"{'failed':>7}"]
    for name, rec in timings.items():
        res = rec.get("result") if isinstance(rec.get("result"), dict) else {}
        u = res.get("units") if isinstance(res.get("units"), dict) else {}
        lines.append(f"{name:<10} {rec['seconds']:>9.1f} {float(res.get('cpu_s') or 0):>8.1f} "
                     f"{float(res.get('peak_memory_mb') or 0):>9.0f} {float(res.get('driver_peak_memory_mb') or 0):>10.0f} "
                     f"{u.get('planned', ''):>8} {u.get('done', ''):>6} "
                     f"{u.get('skipped', ''):>8} {u.get('failed', ''):>7}")
    total = sum(r["seconds"] for r in timings.values())
    cpu = sum(float((r.get("result") or {}).get("cpu_s") or 0) for r in timings.values()
              if isinstance(r.get("result"), dict))
    lines.append(f"{'total':<10} {total:>9.1f} {cpu:>8.1f}")
    return "\n".join(lines)
