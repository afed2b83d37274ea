"""One stage contract, one runner, three executors (issue #29).

* :mod:`filegram_ray.stages.registry` — :data:`~filegram_ray.stages.registry.STAGES`, the one list of the
  pipeline's stages (also ``filegram_ray.pipeline.STAGES``);
* :mod:`filegram_ray.stages.base` — :class:`~filegram_ray.stages.base.Stage`, ``Row``, ``StageRecord``,
  ``WorkerSpec``;
* :mod:`filegram_ray.stages.runner` — :func:`~filegram_ray.stages.runner.run_stage`, the only place that locks,
  skips and records;
* :mod:`filegram_ray.stages.executors` — serial, actor pool, Ray Data.

Nothing is imported here, so reading the stage list costs no import of pydantic or Ray.
"""
