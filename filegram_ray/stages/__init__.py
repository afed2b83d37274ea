"""One stage contract, one runner, three executors (issue #29).

* :mod:`filegram_ray.stages.base` — :class:`Stage`, :class:`Row`, :class:`StageRecord`, :class:`WorkerSpec`;
* :mod:`filegram_ray.stages.runner` — :func:`run_stage`, the only place that locks, skips, records;
* :mod:`filegram_ray.stages.executors` — serial, actor pool, Ray Data.

The pipeline's stages are listed once, in :data:`filegram_ray.pipeline.STAGES`.
"""

from filegram_ray.stages.base import Row, Stage, StageRecord, UnitCounts, WorkerSpec
from filegram_ray.stages.runner import run_stage

__all__ = ["Row", "Stage", "StageRecord", "UnitCounts", "WorkerSpec", "run_stage"]
