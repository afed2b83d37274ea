"""The whole pipeline: seed → generate → encode → bench → render → evaluate, each stage a function of the config.

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
    ("bench", "filegram_ray.bench.stage:run_bench"),
    ("render", "rendering.stage:run_render"),
    ("evaluate", "filegram_ray.evaluate.stage:run_evaluate"),
]


def stage_function(name: str):
    """The ``run_<stage>(config)`` callable of a stage."""
    target = dict(STAGES)[name]
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)


def with_serial(cfg: PipelineConfig, stages: list[str]) -> PipelineConfig:
    """A copy of ``cfg`` with ``serial: true`` in every named stage section."""
    data = cfg.model_dump()
    for s in stages:
        data[s] = {**(data.get(s) or {}), "serial": True}
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
    timings: dict[str, Any] = {}
    for name in selected:
        print(f"\n=== stage {name} ===", flush=True)
        t0 = time.perf_counter()
        result = stage_function(name)(cfg)
        timings[name] = {"seconds": round(time.perf_counter() - t0, 2), "result": result}
        print(f"=== stage {name} done in {timings[name]['seconds']:.1f} s ===", flush=True)
    print("\nPipeline summary", file=sys.stdout)
    print(f"{'stage':<10} {'seconds':>9}")
    for name, rec in timings.items():
        print(f"{name:<10} {rec['seconds']:>9.1f}")
    print(f"{'total':<10} {sum(r['seconds'] for r in timings.values()):>9.1f}")
    return timings
