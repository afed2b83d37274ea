"""The whole pipeline: seed → generate → encode → render → record → caption → bench → evaluate, each stage a
function of the config.

Render runs before bench so the File Grounding sub-task can use the rendered derivatives; record (guidance videos of
a seeded sample of trajectories) and caption (keyframes → OCR/VLM captions → events read back) run before bench so
Visual Grounding and the Real-World setting can use the recordings.

Each stage is resumable, so a rerun of the pipeline skips finished work; ``--only``/``--skip`` pick stages.
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any

from filegram_ray.config import PipelineConfig

#: (stage name, "module:function"), in pipeline order.
STAGES: list[tuple[str, str]] = [
    ("seed", "filegram_ray.workspace.stage:run_seed"),
    ("generate", "filegram_ray.engine.generate:run_generate"),
    ("encode", "filegram_ray.memory.stage:run_encode"),
    ("render", "rendering.stage:run_render"),
    ("record", "video.stage:run_record"),
    ("caption", "video.stage:run_caption"),
    ("bench", "filegram_ray.bench.stage:run_bench"),
    ("evaluate", "filegram_ray.evaluate.stage:run_evaluate"),
]

#: how each stage is told to run without Ray: a config section key, or a keyword argument.
_SERIAL_SECTION = {"seed": "workspace"}
_SERIAL_KWARGS = {"generate": {"gen": {"serial": True}}, "encode": {"serial": True}, "render": {"serial": True},
                  "record": {"serial": True}, "caption": {"serial": True}, "evaluate": {"serial": True}}


def stage_function(name: str):
    """The ``run_<stage>(config)`` callable of a stage."""
    target = dict(STAGES)[name]
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)


def with_serial(cfg: PipelineConfig, stages: list[str]) -> PipelineConfig:
    """A copy of ``cfg`` with ``serial: true`` in the sections of the named stages that take it from there."""
    data = cfg.model_dump()
    for s in stages:
        if s in _SERIAL_SECTION:
            sec = _SERIAL_SECTION[s]
            data[sec] = {**(data.get(sec) or {}), "serial": True}
    return PipelineConfig.model_validate(data)


def run_pipeline(cfg: PipelineConfig, only: list[str] | None = None, skip: list[str] | None = None,
                 serial: bool = False) -> dict[str, Any]:
    """Run the selected stages in order; returns ``{stage: {"seconds": float, "result": …}}``.

    Raises:
        ValueError: an unknown stage name in ``only``/``skip``.
    """
    names = [n for n, _ in STAGES]
    for s in (only or []) + (skip or []):
        if s not in names:
            raise ValueError(f"unknown stage {s!r}; stages are {', '.join(names)}")
    selected = [n for n in names if (not only or n in only) and n not in (skip or [])]
    if serial:
        cfg = with_serial(cfg, selected)
    else:  # one Ray connection for every stage (a cluster's RAY_ADDRESS, or a local Ray)
        from filegram_ray.runtime import init_ray

        init_ray(cfg.ray.address, cfg.ray.num_cpus)
    timings: dict[str, Any] = {}
    for name in selected:
        print(f"\n=== stage {name} ===", flush=True)
        t0 = time.perf_counter()
        kwargs = _SERIAL_KWARGS.get(name, {}) if serial else {}
        result = stage_function(name)(cfg, **kwargs)
        timings[name] = {"seconds": round(time.perf_counter() - t0, 2), "result": result}
        print(f"=== stage {name} done in {timings[name]['seconds']:.1f} s ===", flush=True)
    print("\nPipeline summary", file=sys.stdout)
    print(f"{'stage':<10} {'seconds':>9}")
    for name, rec in timings.items():
        print(f"{name:<10} {rec['seconds']:>9.1f}")
    print(f"{'total':<10} {sum(r['seconds'] for r in timings.values()):>9.1f}")
    return timings
