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
from typing import TYPE_CHECKING, Any

from filegram_ray.errors import UserError

if TYPE_CHECKING:  # imported where used: `filegram pipeline --help` reads STAGES without pydantic (issue 31)
    from filegram_ray.config import PipelineConfig

#: (stage name, the config section it reads), in pipeline order. Every stage is ``run_<stage>(config)``: it takes
#: all its options — ``serial`` (run in this process without Ray) included — from that section of the one
#: pipeline config, and ``exclusive_stage`` writes its record (seconds, CPU seconds, peak memory, units) into
#: run.json.
STAGES: list[tuple[str, str]] = [
    ("seed", "workspace"),
    ("generate", "generate"),
    ("encode", "encode"),
    ("render", "render"),
    ("record", "record"),
    ("caption", "caption"),
    ("bench", "bench"),
    ("evaluate", "evaluate"),
]
#: stages that never use Ray (nothing to switch off)
_IN_PROCESS = {"bench"}


def stage_functions() -> dict[str, Callable[[PipelineConfig], dict[str, Any]]]:
    """``{stage name: run_<stage>}`` (imported on call: ``filegram --help`` does not load every stage)."""
    from filegram_ray.bench.stage import run_bench
    from filegram_ray.engine.generate import run_generate
    from filegram_ray.evaluate.stage import run_evaluate
    from filegram_ray.memory.stage import run_encode
    from filegram_ray.workspace.stage import run_seed
    from rendering.stage import run_render
    from video.stage import run_caption, run_record

    return {"seed": run_seed, "generate": run_generate, "encode": run_encode, "render": run_render,
            "record": run_record, "caption": run_caption, "bench": run_bench, "evaluate": run_evaluate}


def stage_function(name: str) -> Callable[[PipelineConfig], dict[str, Any]]:
    """The ``run_<stage>(config)`` callable of a stage."""
    return stage_functions()[name]


def with_serial(cfg: PipelineConfig, stages: list[str]) -> PipelineConfig:
    """A copy of ``cfg`` with ``serial: true`` in the config sections of the named stages."""
    data = cfg.model_dump()
    sections = dict(STAGES)
    for s in stages:
        if s in sections and s not in _IN_PROCESS:
            sec = sections[s]
            data[sec] = {**(data.get(sec) or {}), "serial": True}
    from filegram_ray.config import PipelineConfig

    return PipelineConfig.model_validate(data)


def run_pipeline(cfg: PipelineConfig, only: list[str] | None = None, skip: list[str] | None = None,
                 serial: bool = False) -> dict[str, Any]:
    """Run the selected stages in order; returns ``{stage: {"seconds": float, "result": …}}``.

    Args:
        serial: every selected stage in this process without Ray (sets ``<section>.serial``).

    Raises:
        ValueError: an unknown stage name in ``only``/``skip``; an unknown profile or task id when seed or generate
            is selected (:func:`~filegram_ray.config.check_sets`), before any stage runs.
    """
    names = [n for n, _ in STAGES]
    for s in (only or []) + (skip or []):
        if s not in names:
            raise UserError(f"unknown stage {s!r}; stages are {', '.join(names)}")
    selected = [n for n in names if (not only or n in only) and n not in (skip or [])]
    from filegram_ray.config import check_sets
    from filegram_ray.runtime import (
        forget_failed_start,
        init_ray,
        may_start_run,
        missing_local_dir,
        refuse_missing_run,
    )

    if "seed" in selected or "generate" in selected:  # unknown ids are refused before the first stage starts
        check_sets(cfg, ("profiles", "tasks"))  # seed records the run's sets too (its run.json snapshot)
    functions = stage_functions()
    if selected:  # before the pipeline's lock creates the directory
        refuse_missing_run(cfg, selected[0], may_start_run(functions[selected[0]], cfg))
    if serial:
        cfg = with_serial(cfg, selected)
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
                result = functions[name](cfg)
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
