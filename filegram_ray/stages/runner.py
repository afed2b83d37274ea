"""The one runner of every stage: :func:`run_stage`.

It alone owns what every stage shares: refusing a missing run directory (for a stage that reads a run), the run
directory's lock, the seed check, sweeping temporary files of unfinished writes, the extras check, skipping
finished units, writing each finished unit's completion record, error rows, progress, the measurements and the
**one** write of the stage's :class:`~filegram_ray.stages.base.StageRecord` into ``run.json`` (on Ray with the
executor units each node ran: ``nodes``, ``{node id: {"ip", "units"}}``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from filegram_ray.stages.base import Row, Stage, StageRecord, UnitCounts

if TYPE_CHECKING:
    from filegram_ray.config import PipelineConfig
    from filegram_ray.stages.executors import Executor

log = logging.getLogger(__name__)

__all__ = ["run_stage", "choose_executor", "stage_result", "stage_function", "stage_functions"]


def choose_executor(stage: type[Stage], opts: Any, progress: bool = True) -> Executor:
    """The executor of one stage run: serial when the stage never uses Ray (``in_process``) or its section says
    ``serial: true``; else the section's ``executor`` (``actor-pool`` | ``ray-data``), default actor pool."""
    from filegram_ray.stages.executors import EXECUTORS, SerialExecutor

    if stage.in_process or getattr(opts, "serial", False):
        return SerialExecutor(progress)
    return EXECUTORS[getattr(opts, "executor", None) or "actor-pool"](progress)


def stage_result(record: StageRecord) -> dict[str, Any]:
    """The dict a ``run_<stage>`` function returns and ``run.json`` holds: the stage's summary fields and the
    shared fields of :class:`StageRecord` at one level."""
    return record.model_dump(mode="json")


def run_stage(stage: type[Stage], config: PipelineConfig, executor: Executor | None = None, *,
              overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``stage`` on ``config`` and return its record as a dict (:func:`stage_result`).

    Args:
        stage: the :class:`Stage` subclass.
        config: the pipeline config (``run_dir``, ``seed``, the stage's section).
        executor: where the units run; default :func:`choose_executor`.
        overrides: values laid over the stage's config section (``{"serial": True}``).

    Raises:
        FileNotFoundError / NotADirectoryError: a stage that reads a run, on a local run directory that does not
            exist (nothing is created) or is a file.
        RunDirLockedError: another process holds the run directory.
        UserError: another seed than the run's; a missing extra; what :meth:`Stage.check` refuses.
    """
    if getattr(stage, "legacy", None) is not None:  # transitional, until every stage is ported (issue #29)
        if executor is not None and not executor.uses_ray and stage.name != "bench":
            data = config.model_dump()
            data[stage.section_name()] = {**(data.get(stage.section_name()) or {}), "serial": True}
            config = type(config).model_validate(data)
        return stage.legacy(config)
    from filegram_ray.runtime import init_ray
    from filegram_ray.stages.meter import StageMeter
    from filegram_ray.stages.rundir import (
        check_run_seed,
        forget_failed_start,
        missing_local_dir,
        missing_lock_file,
        refuse_missing_run,
    )
    from filegram_ray.storage import RunDirLockedError

    opts = stage.options(config, overrides)
    may_start = stage.may_start_run(config)
    refuse_missing_run(config, stage.name, may_start)
    extras = stage.required_extras(config)
    if extras:
        from filegram_ray.extras import require_extras

        require_extras(extras, f"{stage.name} stage")
    created, created_lock = missing_local_dir(config), missing_lock_file(config)
    run = config.run()
    new_run = not run.exists("run.json")
    executor = executor or choose_executor(stage, opts)
    nodes_before = {k: v["units"] for k, v in getattr(executor, "units_by_node", {}).items()}
    try:
        with run.lock(stage.name):
            check_run_seed(run, config, check_ids=may_start)
            swept = run.sweep_temp()
            if swept:
                log.info("%s: removed %d temporary file(s) of unfinished writes: %s", stage.name, len(swept),
                         ", ".join(swept[:5]) + (" …" if len(swept) > 5 else ""))
            with StageMeter() as meter:
                if executor.uses_ray:  # the run's Ray (--address / RAY_ADDRESS / ray.num_cpus), before check()
                    init_ray(config.ray.address, config.ray.num_cpus)  # may start servers or a nested stage
                inst = stage(config, opts, run, executor)
                try:
                    inst.check()
                    units = inst.plan()
                    rows: dict[str, Row] = {}
                    todo = []
                    for u in units:
                        done = inst.finished(u)
                        if done is None:
                            todo.append(u)
                        else:
                            rows[str(u["unit_id"])] = done
                    spec = inst.worker() if todo else None
                    if todo and spec is not None:
                        def on_row(row: Row) -> None:
                            if row.ok:
                                for unit_id, rec in inst.done_records(row).items():
                                    run.mark_done(stage.name, unit_id, rec)

                        for row in executor.map(spec, todo, label=stage.name, on_row=on_row):
                            rows[row.unit] = row
                    ordered = [rows[str(u["unit_id"])] for u in units if str(u["unit_id"]) in rows]
                    errors = [r for r in ordered if not r.ok]
                    for e in errors:
                        print(f"ERROR {stage.name} {e.unit}: {e.get('error_type')}: {e.get('error')}", flush=True)
                    summary = dict(inst.finish(ordered) or {})
                finally:
                    inst.close()
            n_skipped = sum(1 for r in ordered if r.get("skipped"))
            counts = UnitCounts(planned=len(units), done=len(ordered) - len(errors) - n_skipped, skipped=n_skipped,
                                failed=len(errors))
            if isinstance(summary.get("units"), dict):
                counts = UnitCounts.model_validate(summary.pop("units"))
            nodes = _units_by_node(executor, nodes_before)
            record = StageRecord.model_validate({**summary, **meter.record(), "units": counts,
                                                 "executor": "in-process" if stage.in_process else executor.name,
                                                 "n_errors": counts.failed, **({"nodes": nodes} if nodes else {})})
            if nodes:
                print(f"{stage.name}: units per Ray node: " + ", ".join(
                    f"{v['ip']} ({k[:8]}) {v['units']}" for k, v in nodes.items()), flush=True)
            _write_record(run, stage.name, record, config)
            return stage_result(record)
    except RunDirLockedError:  # never held: what is there (run.json, the lock file) belongs to the holder
        raise
    except BaseException:
        if new_run:
            forget_failed_start(run, created, created_lock)
        raise


def _units_by_node(executor, before: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The executor units each Ray node ran during this stage (the executor's counts minus ``before``), sorted by
    node IP: ``{node id: {"ip": str, "units": int}}``; empty for the serial executor."""
    out = {}
    for node, v in getattr(executor, "units_by_node", {}).items():
        n = v["units"] - before.get(node, 0)
        if n > 0:
            out[node] = {"ip": v["ip"], "units": n}
    return dict(sorted(out.items(), key=lambda kv: (kv[1]["ip"], kv[0])))


def _write_record(run, name: str, record: StageRecord, config: PipelineConfig) -> None:
    """The stage's one write of ``run.json``: its record, the config snapshot and the package versions."""
    from filegram_ray.schema.meta import record_stage

    try:
        record_stage(run, name, record.model_dump(mode="json"), config.model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 - the outputs are written; bookkeeping never hides them
        log.warning("%s: could not write the stage record into run.json: %s", name, exc)


def stage_function(stage: str | type[Stage]) -> Callable[..., dict[str, Any]]:
    """``run_<stage>(config, executor=None, **overrides)``: :func:`~filegram_ray.stages.runner.run_stage` of a
    stage (its name, or its class — what a stage module uses to define its ``run_<stage>``)."""
    from filegram_ray.stages.registry import stage_ref

    cls = stage_ref(stage).load() if isinstance(stage, str) else stage
    name = cls.name

    def run(config: PipelineConfig, executor=None, **overrides: Any) -> dict[str, Any]:
        return run_stage(cls, config, executor, overrides=overrides or None)

    run.__name__ = run.__qualname__ = f"run_{name}"
    run.stage = cls
    return run


def stage_functions() -> dict[str, Callable[..., dict[str, Any]]]:
    """``{stage name: run_<stage>}`` in pipeline order."""
    from filegram_ray.stages.registry import STAGES

    return {s.name: stage_function(s.name) for s in STAGES}
