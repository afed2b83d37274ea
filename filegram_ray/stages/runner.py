"""The one runner of every stage: :func:`run_stage`, and :func:`run_stages` for several in pipeline order.

It alone owns what every stage shares: the run directory (:meth:`~filegram_ray.storage.RunDir.open_for`: refusing a
missing one for a stage that reads a run, the lock, the seed check, sweeping temporary files of unfinished writes,
forgetting a failed start), the extras check, the executor, skipping finished items, writing each finished item's
completion record, error rows (``errors/<stage>.parquet``), progress, the counts, the measurements and the **one**
write of the stage's :class:`~filegram_ray.stages.base.StageRecord` into ``run.json`` — also when the stage fails
(on Ray with the executor units each node ran: ``nodes``, ``{node id: {"ip", "units"}}``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from filegram_ray.stages.base import ModelCallSpec, Row, Stage, StageRecord, UnitCounts

if TYPE_CHECKING:
    from pydantic import BaseModel

    from filegram_ray.config import PipelineConfig
    from filegram_ray.stages.executors import Executor
    from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

#: the field of a completion record holding its item's ``key``
RECORD_KEY = "item_key"

__all__ = ["check_sets", "choose_executor", "exit_code", "run_stage", "run_stages", "stage_function", "stage_functions",
           "stage_options"]


def section_of(stage: type[Stage]) -> str:
    """The config section of a stage's options: its :data:`~filegram_ray.stage_list.STAGES` line's, else (a stage
    outside the pipeline) its name."""
    from filegram_ray.stage_list import STAGES

    return next((s.section for s in STAGES if s.name == stage.name), stage.name)


def stage_options(stage: type[Stage], config: PipelineConfig, overrides: dict[str, Any] | None = None) -> BaseModel:
    """The stage's section of ``config`` (plus ``overrides``, a call's own choices such as ``--methods``) validated
    by its ``Config``.

    Raises:
        UserError: one line naming each bad key (``<section>.<key>: <problem>``)."""
    from pydantic import ValidationError

    from filegram_ray.errors import UserError

    section = section_of(stage)
    try:
        return stage.Config.model_validate({**config.section(section), **(overrides or {})})
    except ValidationError as exc:
        raise UserError("; ".join(f"{'.'.join([section, *map(str, e['loc'])])}: "
                                  f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())) from exc


def choose_executor(stage: type[Stage], opts: Any, progress: bool = True) -> Executor:
    """The executor of one stage run: the serial one when the stage never uses Ray (``in_process``), else its
    section's ``executor`` (``serial`` | ``actor-pool`` | ``ray-data``)."""
    from filegram_ray.stages.executors import EXECUTORS, SerialExecutor

    if stage.in_process:
        return SerialExecutor(progress)
    return EXECUTORS[getattr(opts, "executor", None) or "actor-pool"](progress)


def exit_code(stage: type[Stage], record: dict[str, Any]) -> int:
    """A stage job's exit code for its record, by the stage's ``exit_on``: 1 when an item failed (``any``), when
    every item failed (``all``), or never (``never``); else 0."""
    u = record.get("units") or {}
    failed = int(u.get("failed") or 0)
    if stage.exit_on == "never" or not failed:
        return 0
    return 1 if stage.exit_on == "any" or failed == int(u.get("planned") or 0) else 0


def _record_dir(stage: type[Stage], step: str) -> str:
    """Where the completion records of ``step`` live: ``_done/<stage>/`` for the first step, ``_done/<stage>.<step>/``
    for a later one."""
    return stage.name if step == stage.steps[0] else f"{stage.name}.{step}"


def _finished(run: RunDir, where: str, item: dict[str, Any]) -> Row | None:
    """The row of an item an earlier run finished: its completion record exists, holds the item's ``key`` (when the
    item has one) and every one of the item's ``outputs`` exists; else None."""
    uid = str(item["unit_id"])
    if not run.is_done(where, uid):
        return None
    from filegram_ray.storage import safe_unit_name

    rec = run.read_json(f"_done/{where}/{safe_unit_name(uid)}.json")
    if "key" in item and rec.get(RECORD_KEY) != item["key"]:
        log.info("%s: %s was made with other settings or inputs; doing it again", where, uid)
        return None
    if any(not run.exists(str(p)) for p in item.get("outputs") or ()):
        log.info("%s: %s has a completion record but not all of its outputs; doing it again", where, uid)
        return None
    return Row({**rec, "unit": uid, "status": "ok", "skipped": True})


def input_digest(run: RunDir, paths: list[str], memo: dict[str, str] | None = None) -> str:
    """16 hex digits of sha256 over ``paths`` (run-relative) and each one's bytes (a missing file counts as
    missing): what an item's ``inputs`` add to its key. ``memo`` keeps each file's digest for the step, so many items
    naming one file read it once."""
    import hashlib

    from filegram_ray.errors import StorageError

    memo = {} if memo is None else memo
    h = hashlib.sha256()
    for p in sorted({str(p) for p in paths}):
        if p not in memo:
            try:
                memo[p] = hashlib.sha256(run.read_bytes(p)).hexdigest()
            except StorageError as exc:  # a missing input: the item's worker names it, if it needs it
                if not isinstance(exc.__cause__, FileNotFoundError):
                    raise
                memo[p] = "missing"
        h.update(f"{p}\0{memo[p]}\n".encode())
    return h.hexdigest()[:16]


def _with_inputs(run: RunDir, item: dict[str, Any], memo: dict[str, str]) -> dict[str, Any]:
    """The item with its ``inputs``' digest (:func:`input_digest`) folded into its ``key``: a finished item whose
    inputs changed since (a trajectory generated again, a bench rebuilt) is done again."""
    if not item.get("inputs"):
        return item
    return {**item, "key": f"{item.get('key', '')}|inputs:{input_digest(run, list(item['inputs']), memo)}"}


def _completion_record(row: Row, item: dict[str, Any]) -> dict[str, Any]:
    """What the runner writes for a finished item: the row's fields and the item's ``key`` (as
    :data:`RECORD_KEY`, beside a worker's own fields)."""
    rec = {k: v for k, v in row.items() if k not in ("unit", "status", "stage", "skipped")}
    if "key" in item:
        rec[RECORD_KEY] = item["key"]
    return rec


def _run_step(inst: Stage, step: str, executor: Executor) -> tuple[list[Row], UnitCounts]:
    """Run one step: its items, the finished ones skipped, the others grouped into tasks and mapped on
    ``executor`` (the model-call executor around it for a :class:`ModelCallSpec`); one row per item, in item
    order, and the step's counts."""
    from filegram_ray.errors import UserError
    from filegram_ray.stages.executors import ModelCallExecutor, tasks_of

    stage, run = type(inst), inst.run
    memo: dict[str, str] = {}
    items = [_with_inputs(run, it, memo) for it in inst.items(step)]
    ids = [str(it["unit_id"]) for it in items]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise UserError(f"{stage.name}: items named twice: {dup}")
    where = _record_dir(stage, step)
    force = bool(getattr(inst.opts, "force", False))
    rows: dict[str, Row] = {}
    todo = []
    for it in items:
        done = _finished(run, where, it) if stage.resumable and not force else None
        if done is None:
            todo.append(it)
        else:
            rows[str(it["unit_id"])] = done
    if todo:
        by_id = {str(it["unit_id"]): it for it in todo}
        if force:  # an item that fails now must not pass as finished on the next run
            for uid in by_id:
                run.remove(f"_done/{where}/{_safe(uid)}.json", recursive=False)
        groups = [list(g) for g in inst.tasks(step, todo)]
        grouped = [str(it["unit_id"]) for g in groups for it in g]
        if sorted(grouped) != sorted(by_id):
            raise RuntimeError(f"{stage.name}.tasks({step!r}) must put every unfinished item in exactly one task")
        spec = inst.worker(step)
        ex = ModelCallExecutor(executor, executor.progress) if isinstance(spec, ModelCallSpec) else executor

        def on_row(row: Row) -> None:
            if row.ok and stage.resumable:
                run.mark_done(where, row.unit, _completion_record(row, by_id[row.unit]))

        for row in ex.map(spec, tasks_of(groups, step), label=stage.name, noun=step, on_row=on_row):
            rows[row.unit] = row
    missing = RuntimeError("no result came back for this item")
    ordered = [rows.get(uid) or Row.error(uid, missing, stage.name) for uid in ids]
    n_skipped = sum(1 for r in ordered if r.get("skipped"))
    n_failed = sum(1 for r in ordered if not r.ok)
    return ordered, UnitCounts(planned=len(ordered), done=len(ordered) - n_failed - n_skipped, skipped=n_skipped,
                               failed=n_failed)


def _safe(uid: str) -> str:
    from filegram_ray.storage import safe_unit_name

    return safe_unit_name(uid)


def check_sets(config: PipelineConfig, keys: tuple[str, ...] = ("profiles", "tasks")) -> None:
    """Refuse unknown ids in ``config.profiles`` / ``config.tasks``, and a malformed set that the config names,
    before any work starts or any record is written (a new run records its sets in its ``run.json`` snapshot).

    A set is loaded when ids of it are asked for or its directory is given (``profiles_dir``, default
    ``conf/profiles``; ``tasks_dir``, default ``conf/tasks``); the ids are matched by
    :func:`~filegram_ray.config.match_ids` (short form ``p1`` included).

    Raises:
        UserError: ``config field profiles: unknown id 'p99' (<profile dir> has: …)``.
        FileNotFoundError / ProfileError / TaskError: the set directory is missing or malformed (names the file).
    """
    from filegram_ray.config import match_ids

    if "profiles" in keys and (config.profiles or config.profiles_dir):
        from filegram_ray.paths import profiles_dir
        from filegram_ray.profiles import load_profiles

        ids = [p.profile_id for p in load_profiles(config.profiles_dir)]
        match_ids(config.profiles, ids, "profiles", str(config.profiles_dir or profiles_dir()))
    if "tasks" in keys and (config.tasks or config.tasks_dir):
        from filegram_ray.paths import tasks_dir
        from filegram_ray.tasks import load_tasks

        match_ids(config.tasks, [t.task_id for t in load_tasks(config.tasks_dir)], "tasks",
                  str(config.tasks_dir or tasks_dir()))


def run_stage(stage: type[Stage], config: PipelineConfig, *, overrides: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """Run ``stage`` on ``config`` and return its record as a dict (the ``run.json`` record: the stage's summary
    fields and :class:`~filegram_ray.stages.base.StageRecord`'s at one level).

    Args:
        stage: the :class:`~filegram_ray.stages.base.Stage` subclass.
        config: the pipeline config (``run_dir``, ``seed``, the stage's section; its ``executor`` picks where the
            items run).
        overrides: values laid over the stage's config section (``{"executor": "serial"}``).

    Raises:
        FileNotFoundError / NotADirectoryError: a stage that reads a run, on a local run directory that does not
            exist (nothing is created) or is a file.
        RunDirLockedError: another process holds the run directory.
        UserError: another seed than the run's; a bad section; a missing extra; what :meth:`Stage.check` refuses.
    """
    from filegram_ray.errors import UserError
    from filegram_ray.runtime import init_ray
    from filegram_ray.stages.meter import StageMeter
    from filegram_ray.storage import RunDir

    opts = stage_options(stage, config, overrides)
    may_start = _may_start(stage, opts)
    from filegram_ray.extras import STAGE_EXTRAS, config_extras, require_extras

    extras = config_extras(stage.name, config.model_dump(mode="json")) if stage.name in STAGE_EXTRAS \
        else tuple(stage.extras)
    if extras:
        require_extras(extras, f"{stage.name} stage")
    executor = choose_executor(stage, opts)
    nodes_before = {k: v["units"] for k, v in getattr(executor, "units_by_node", {}).items()}
    with RunDir.open_for(config.run_dir, stage.name, storage_options=config.storage_options, may_start=may_start,
                         seed=config.seed, snapshot=config.model_dump(mode="json"),
                         check_new=(lambda: check_sets(config)) if may_start else None) as run:
        counts: dict[str, UnitCounts] = {}
        summary: dict[str, Any] = {}
        errors: list[Row] = []
        with StageMeter() as meter:
            if executor.uses_ray:  # the run's Ray (--address / RAY_ADDRESS / ray.num_cpus), before check()
                init_ray(config.ray.address, config.ray.num_cpus)  # may start servers
            inst = stage(config, opts, run, uses_ray=executor.uses_ray)
            inst.counts = counts  # the stage's summary reads its counts here
            checked = False
            try:
                inst.check()
                checked = True
                planned: list[str] = []
                for step in stage.steps:
                    rows, counts[step] = _run_step(inst, step, executor)
                    inst.rows[step] = rows
                    planned += [r.unit for r in rows]
                    errors += [r for r in rows if not r.ok]
                    run.write_errors(stage.name, errors, planned)  # before a later step or finish reads it
                    for e in rows:
                        if not e.ok:
                            print(f"ERROR {stage.name} {e.unit}: {e.get('error_type')}: {e.get('error')}", flush=True)
                summary = dict(inst.finish([r for step in stage.steps for r in inst.rows[step]]) or {})
            except BaseException as exc:
                # a failed start is forgotten, not recorded; a request check() refused leaves run.json as it was
                refused = not checked and isinstance(exc, UserError)
                if not refused and not (run.new and not run.listdir("_done")):
                    _write_record(run, stage.name, _record(summary, meter, counts, executor, stage, len(errors),
                                                           failed=exc, nodes=_units_by_node(executor, nodes_before)),
                                  config)
                raise
            finally:
                inst.close()
        nodes = _units_by_node(executor, nodes_before)
        record = _record(summary, meter, counts, executor, stage, len(errors), nodes=nodes)
        if len(nodes) > 1:  # on one machine the line says nothing (run.json keeps the count either way)
            print(f"{stage.name}: units per Ray node: " + ", ".join(
                f"{v['ip']} ({k[:8]}) {v['units']}" for k, v in nodes.items()), flush=True)
        _write_record(run, stage.name, record, config)
        return _dump(record)


def _record(summary: dict[str, Any], meter, counts: dict[str, UnitCounts], executor, stage: type[Stage],
            n_errors: int, failed: BaseException | None = None,
            nodes: dict[str, dict[str, Any]] | None = None) -> StageRecord:
    total = sum(counts.values(), UnitCounts())
    name = "in-process" if stage.in_process else executor.name
    extra: dict[str, Any] = {"status": "failed", "error": f"{type(failed).__name__}: {failed}"[:2000]} if failed \
        else {}
    return StageRecord.model_validate({**summary, **meter.record(), "units": total, "executor": name,
                                       "steps": dict(counts) if len(counts) > 1 else None, "n_errors": n_errors,
                                       **({"nodes": nodes} if nodes else {}), **extra})


def _units_by_node(executor, before: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The executor units each Ray node ran during this stage (the executor's counts minus ``before``), sorted by
    node IP: ``{node id: {"ip": str, "units": int}}``; empty for the serial executor."""
    out = {}
    for node, v in getattr(executor, "units_by_node", {}).items():
        n = v["units"] - before.get(node, 0)
        if n > 0:
            out[node] = {"ip": v["ip"], "units": n}
    return dict(sorted(out.items(), key=lambda kv: (kv[1]["ip"], kv[0])))


def _dump(record: StageRecord) -> dict[str, Any]:
    """The record as ``run.json`` holds it (``steps`` only for a stage with several)."""
    out = record.model_dump(mode="json")
    if out.get("steps") is None:
        out.pop("steps", None)
    return out


def _write_record(run, name: str, record: StageRecord, config: PipelineConfig) -> None:
    """The stage's one write of ``run.json``: its record, the config snapshot and the package versions."""
    from filegram_ray.schema.meta import record_stage

    try:
        record_stage(run, name, _dump(record), config.model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 - the outputs are written; bookkeeping never hides them
        log.warning("%s: could not write the stage record into run.json: %s", name, exc)


def run_stages(config: PipelineConfig, names: list[str], *, title: bool = True,
               checked: bool = False) -> dict[str, Any]:
    """Run the stages ``names`` in the order given, under one hold of the run directory (no other job slips in
    between two of them) and one Ray connection; returns ``{stage: {"seconds": float, "result": record}}``.
    A stage whose items failed does not stop the next; a stage that raises does.

    Raises:
        UserError: an unknown stage name; and what :func:`run_stage` raises.
    """
    import time

    from filegram_ray.runtime import init_ray
    from filegram_ray.stage_list import stage_ref
    from filegram_ray.storage import RunDir

    classes = {n: stage_ref(n).load() for n in names}
    timings: dict[str, Any] = {}
    if not names:
        return timings
    # ``checked``: the caller ran _check_request on this request already (the ids are read once)
    may_start = _may_start(classes[names[0]], stage_options(classes[names[0]], config)) if checked else \
        _check_request(config, names[0])
    # held in the first stage's name: a refusal of a missing run directory names the stage that reads it
    with RunDir.open_for(config.run_dir, names[0], storage_options=config.storage_options, may_start=may_start):
        if any(not classes[n].in_process and stage_options(classes[n], config).executor != "serial"
               for n in names):  # one Ray connection for every stage (a cluster's RAY_ADDRESS or a local Ray)
            init_ray(config.ray.address, config.ray.num_cpus)
        for name in names:
            if title:
                print(f"\n=== stage {name} ===", flush=True)
            t0 = time.perf_counter()
            result = run_stage(classes[name], config)
            timings[name] = {"seconds": round(time.perf_counter() - t0, 2), "result": result}
            if title:
                print(f"=== stage {name} done in {timings[name]['seconds']:.1f} s ===", flush=True)
    return timings


def _check_request(config: PipelineConfig, first: str) -> bool:
    """Whether the job that begins with stage ``first`` may start a run; if so, its profile and task ids are
    checked (:func:`check_sets`, new run or not) before any stage runs or records anything."""
    from filegram_ray.stage_list import stage_ref

    cls = stage_ref(first).load()
    may_start = _may_start(cls, stage_options(cls, config))
    if may_start:
        check_sets(config)
    return may_start


def _may_start(stage: type[Stage], opts: Any) -> bool:
    """Whether ``stage`` with its options ``opts`` may start a new run (its ``starts_run``: a bool, or the name
    of the option that says)."""
    return stage.starts_run if isinstance(stage.starts_run, bool) else bool(getattr(opts, stage.starts_run))


def stage_function(stage: type[Stage]) -> Callable[..., dict[str, Any]]:
    """``run_<stage>(config, **overrides)``: the stage on ``config`` (overrides laid over its section, e.g.
    ``executor="serial"``), after the stages it needs (:data:`~filegram_ray.stage_list.STAGES` ``needs``: generate
    runs seed first, whose finished bundles are skipped); returns the stage's record. What a stage module uses to
    define its ``run_<stage>``."""

    def run(config: PipelineConfig, **overrides: Any) -> dict[str, Any]:
        if not (_listed(stage) and with_needs(stage.name)[:-1]):
            return run_stage(stage, config, overrides=overrides or None)
        config = with_section_overrides(config, {stage.name: overrides}) if overrides else config
        return run_with_needs(stage.name, config)

    run.__name__ = run.__qualname__ = f"run_{stage.name}"
    run.stage = stage
    return run


def run_with_needs(name: str, config: PipelineConfig) -> dict[str, Any]:
    """Stage ``name`` after the stages it needs (each on the stage's executor, :func:`same_executor`; what an
    earlier run of theirs finished is skipped); returns its record."""
    names = with_needs(name)
    _check_request(config, names[0])  # a refused id is refused before the needed stages are announced
    for need in names[:-1]:
        print(f"{name} needs the {need} stage: running it first (what an earlier run finished is skipped)",
              flush=True)
    return run_stages(same_executor(config, names), names, title=False, checked=True)[name]["result"]


def with_needs(name: str) -> list[str]:
    """The stages a stage's own door runs: the ones it ``needs``, then itself."""
    from filegram_ray.stage_list import stage_ref

    return [*stage_ref(name).needs, name]


def same_executor(config: PipelineConfig, names: list[str]) -> PipelineConfig:
    """``config`` with the executor of the last of ``names`` (the stage a door runs) laid over the stages it
    needs: a needed stage runs where the stage runs (``generate.executor: serial`` seeds in this process too)."""
    from filegram_ray.stage_list import stage_ref

    last = stage_ref(names[-1])
    executor = stage_options(last.load(), config).executor
    return with_section_overrides(config, {n: {"executor": executor} for n in names[:-1]})


def _listed(stage: type[Stage]) -> bool:
    from filegram_ray.stage_list import STAGES

    return any(s.name == stage.name for s in STAGES)


def with_section_overrides(config: PipelineConfig, by_stage: dict[str, dict[str, Any]]) -> PipelineConfig:
    """``config`` with ``{stage name: {key: value}}`` laid over those stages' sections."""
    from filegram_ray.stage_list import stage_ref

    data = config.model_dump()
    for name, upd in by_stage.items():
        sec = stage_ref(name).section
        data[sec] = {**(data.get(sec) or {}), **upd}
    return type(config).model_validate(data)


def stage_functions() -> dict[str, Callable[..., dict[str, Any]]]:
    """``{stage name: run_<stage>}`` in pipeline order."""
    from filegram_ray.stage_list import STAGES

    return {s.name: stage_function(s.load()) for s in STAGES}
