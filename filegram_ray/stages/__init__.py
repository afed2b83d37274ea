"""One stage contract, one runner, four executors, one door.

* :mod:`filegram_ray.stages.base` — :class:`~filegram_ray.stages.base.Stage` (items, tasks, a worker, eight hooks),
  ``Row``, ``StageRecord``, ``StageOptions``, ``WorkerSpec``, ``ModelCallSpec``;
* :mod:`filegram_ray.stages.runner` — :func:`~filegram_ray.stages.runner.run_stage`, the only place that holds the
  run directory, skips, records and counts;
* :mod:`filegram_ray.stages.executors` — serial, actor pool, Ray Data, and model calls through a ``ray.data.llm``
  processor;
* :mod:`filegram_ray.stages.cli` — the one door of every stage (``filegram run <stage>``, ``jobs/<stage>.py``,
  ``filegram evaluate``, ``filegram bench build`` …).

The list of stages is :data:`filegram_ray.stage_list.STAGES`. Nothing is imported here.
"""
