"""Where a stage's units run. An executor takes a :class:`~filegram_ray.stages.base.WorkerSpec` and units and
returns one :class:`~filegram_ray.stages.base.Row` per unit; it never names a stage (the ``label`` it is given is
for progress lines and error rows only).

* :class:`SerialExecutor` — one worker in this process, no Ray (debugging, tests, ``--serial``);
* :class:`ActorPoolExecutor` — ``ray.util.ActorPool`` of ``num_actors`` actors; a unit whose actor dies is run
  again once Ray has restarted the actor (or a new one replaced it), at most ``max_restarts`` times, then it is an
  error row — every unit yields exactly one row (BR-08 / BR-23);
* :class:`RayDataExecutor` — ``ray.data.from_items(units).map_batches(...)`` on an actor pool
  (``ActorPoolStrategy``), one unit per batch; Ray Data retries a failed task, the worker's own exceptions are
  error rows.

A worker's exception never sinks the batch: it becomes an error row in the process that ran it. The Ray executors
count the rows by the node that made them (:attr:`_Base.units_by_node`, ``{node id: {"ip", "units"}}``); the runner
puts the counts into the stage record (``nodes``). The node is never part of a row: rows feed the stages' tables,
which are the same bytes whichever node ran a unit.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from filegram_ray.stages.base import Executor, Row, WorkerSpec  # noqa: F401 - Executor: the protocol these meet

log = logging.getLogger(__name__)

__all__ = ["Executor", "SerialExecutor", "ActorPoolExecutor", "RayDataExecutor", "Progress", "EXECUTORS",
           "make_worker", "process_safely", "map_units", "this_node"]


class Progress:
    """A progress line on stderr: tqdm when stderr is a terminal, else ``[label] n/N <noun>, r/s`` every 5 s
    (``noun``: what one unit is, :attr:`~filegram_ray.stages.base.WorkerSpec.unit_noun`)."""

    def __init__(self, total: int, desc: str, enabled: bool = True, noun: str = "units"):
        self.total, self.desc, self.n, self.t0, self.noun = total, desc, 0, time.perf_counter(), noun
        self.enabled = enabled
        self._bar = None
        self._last = 0.0
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit=f" {noun}", dynamic_ncols=True)
            except ImportError:  # pragma: no cover
                self._bar = None

    def update(self, k: int = 1, status: str = "") -> None:
        self.n += k
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(k)
            if status:
                self._bar.set_postfix_str(status, refresh=False)
            return
        now = time.perf_counter()
        if now - self._last >= 5.0 or self.n >= self.total:
            self._last = now
            rate = self.n / max(now - self.t0, 1e-9)
            print(f"[{self.desc}] {self.n}/{self.total} {self.noun}, {rate:.1f}/s {status}", file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def make_worker(spec: WorkerSpec) -> Any:
    """``spec.cls(**spec.kwargs)``, then its ``setup()`` when it has one."""
    worker = spec.cls(**(spec.kwargs or {}))
    setup = getattr(worker, "setup", None)
    if callable(setup):
        setup()
    return worker


def this_node() -> tuple[str, str]:
    """``(node id, node IP)`` of the Ray node this process runs on (``("", "")`` outside Ray)."""
    try:
        import ray

        if not ray.is_initialized():
            return "", ""
        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - bookkeeping only
        return "", ""


def process_safely(worker: Any, unit: dict[str, Any], label: str) -> Row:
    """``worker.process(unit)`` as a :class:`Row`; an exception becomes an error row (one bad unit never sinks the
    batch)."""
    uid = str(unit.get("unit_id") or unit)
    try:
        return Row.of(uid, dict(worker.process(unit) or {}))
    except Exception as exc:  # noqa: BLE001 - the row names it, the batch goes on
        log.warning("%s: unit %s failed: %s", label, uid, exc)
        return Row.error(uid, exc, label)


class _Base:
    name = "base"
    uses_ray = True

    def __init__(self, progress: bool = True):
        self.progress = progress
        #: rows made on each Ray node by this executor so far: ``{node id: {"ip": str, "units": int}}``
        self.units_by_node: dict[str, dict[str, Any]] = {}

    def map(self, spec: WorkerSpec, units: Iterable[dict[str, Any]], *, label: str,
            on_row: Callable[[Row], None] | None = None) -> list[Row]:
        units = list(units)
        rows: list[Row] = []
        bar = Progress(len(units), label, enabled=self.progress, noun=spec.unit_noun)

        def emit(row: Row, node: tuple[str, str] | None = None) -> None:
            if node and node[0]:
                self.units_by_node.setdefault(node[0], {"ip": node[1], "units": 0})["units"] += 1
            rows.append(row)
            if on_row is not None:
                on_row(row)
            bar.update(1, row.get("status", ""))

        try:
            if units:
                self._run(spec, units, label, emit)
        finally:
            bar.close()
        return rows

    def _run(self, spec: WorkerSpec, units: list[dict[str, Any]], label: str, emit: Callable[..., None]) -> None:
        raise NotImplementedError


class SerialExecutor(_Base):
    """Every unit in this process, one worker, no Ray (the same worker code the actors run)."""

    name = "serial"
    uses_ray = False

    def _run(self, spec, units, label, emit):
        worker = make_worker(spec)
        for unit in units:
            emit(process_safely(worker, unit, label))


class ActorPoolExecutor(_Base):
    """Units on ``ray.util.ActorPool`` (``spec.num_actors`` actors of ``spec.num_cpus`` CPUs, capped by what the
    cluster can place); see the module docstring for what happens when an actor dies.

    Args:
        actor_restart_timeout_s: how long to wait for Ray to restart a dead actor before starting a new one.
    """

    name = "actor-pool"

    def __init__(self, progress: bool = True, actor_restart_timeout_s: float = 120.0):
        super().__init__(progress)
        self.actor_restart_timeout_s = actor_restart_timeout_s

    def _run(self, spec, units, label, emit):
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        from filegram_ray.runtime import check_cpu_request, init_ray, pool_capacity

        init_ray()
        check_cpu_request(spec.num_cpus, f"{label}.num_cpus_per_actor")

        @ray.remote
        class _Actor:
            def __init__(self, spec_):
                self.worker = make_worker(spec_)
                self.node = this_node()

            def process(self, unit):  # (unit_id, row, node): the pool's results come back in completion order
                return str(unit.get("unit_id")), process_safely(self.worker, unit, label), self.node

            def pid(self):
                return os.getpid()

        n = max(1, min(spec.num_actors, len(units)))
        cap = pool_capacity(spec.num_cpus)
        if n > cap:  # an actor that can never be placed would hold its unit forever
            log.warning("%s: %d actors × %g CPUs do not fit the cluster; using %d actors", label, n, spec.num_cpus,
                        cap)
            n = cap
        opts: dict[str, Any] = {"num_cpus": spec.num_cpus, "max_restarts": spec.max_restarts,
                                "max_task_retries": 0}
        if spec.env_vars:
            opts["runtime_env"] = {"env_vars": dict(spec.env_vars)}
        actors = [_Actor.options(**opts).remote(spec) for _ in range(n)]
        try:
            _run_pool(ray, actors, units, emit, label, spec.max_restarts, self.actor_restart_timeout_s,
                      lambda: _Actor.options(**opts).remote(spec),
                      (RayActorError, ActorDiedError, ActorUnavailableError))
        finally:  # also on Ctrl-C: no actor of this pool outlives the call
            for a in actors:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001 - already dead
                    pass


class _DataCall:
    """``map_batches`` callable of :class:`RayDataExecutor`: column ``unit`` (JSON) in, column ``row`` (JSON) out."""

    def __init__(self, spec: WorkerSpec, label: str):
        self.worker, self.label = make_worker(spec), label
        self.node = json.dumps(this_node())

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        rows = [process_safely(self.worker, json.loads(u), self.label) for u in batch["unit"]]
        return {"row": [json.dumps(r, ensure_ascii=False, default=str) for r in rows], "node": [self.node] * len(rows)}


class RayDataExecutor(_Base):
    """Units as a Ray Dataset through ``map_batches`` on an actor pool (one unit per call); rows stream back in
    completion order. Units and rows must be JSON-serialisable."""

    name = "ray-data"

    def _run(self, spec, units, label, emit):
        import ray

        from filegram_ray.runtime import check_cpu_request, init_ray, pool_capacity

        init_ray()
        check_cpu_request(spec.num_cpus, f"{label}.num_cpus_per_actor")
        size = max(1, min(spec.num_actors, len(units), pool_capacity(spec.num_cpus)))
        ds = ray.data.from_items([{"unit": json.dumps(u, ensure_ascii=False)} for u in units],
                                 override_num_blocks=len(units))
        kwargs: dict[str, Any] = {"fn_constructor_kwargs": {"spec": spec, "label": label}, "batch_size": 1,
                                  "num_cpus": spec.num_cpus,
                                  "compute": ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=1)}
        if spec.env_vars:
            kwargs["runtime_env"] = {"env_vars": dict(spec.env_vars)}
        seen: set[str] = set()
        try:
            for rec in ds.map_batches(_DataCall, **kwargs).iter_rows():
                row = Row(json.loads(rec["row"]))
                seen.add(row.unit)
                emit(row, tuple(json.loads(rec["node"])))
        except Exception as exc:  # noqa: BLE001 - a task Ray Data gave up on: its units become error rows
            for u in units:
                if str(u.get("unit_id")) not in seen:
                    emit(Row.error(str(u.get("unit_id")), exc, label))


def map_units(
    worker_cls: type,
    units: Iterable[dict[str, Any]],
    *,
    init_kwargs: dict[str, Any] | None = None,
    num_actors: int = 2,
    num_cpus_per_actor: float = 1.0,
    serial: bool = False,
    stage: str = "stage",
    max_restarts: int = 3,
    progress: bool = True,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    actor_restart_timeout_s: float = 120.0,
) -> list[dict[str, Any]]:
    """Run ``worker_cls(**init_kwargs).process(unit)`` for every unit on the serial or the actor-pool executor
    (:mod:`filegram_ray.stages.executors`, which documents the fault tolerance); one row per unit, in completion
    order. For code outside a stage (benchmarks, the LLM agent's shards); a stage declares a
    :class:`~filegram_ray.stages.base.WorkerSpec` and lets the runner pick the executor.

    Args:
        worker_cls: class with ``__init__(**init_kwargs)`` and ``process(unit: dict) -> dict``.
        units: work units; each must carry a unique ``unit_id`` string.
        num_actors: size of the actor pool (ignored when ``serial``).
        num_cpus_per_actor: Ray CPU request per actor; below 1 lets more actors share a small machine.
        serial: run in this process without Ray.
        stage: label used in progress lines and error rows.
        max_restarts: times a unit whose actor died is run again before it is an error row.
        on_result: callback per finished row.
        actor_restart_timeout_s: how long to wait for Ray to restart a dead actor before replacing it.
    """
    spec = WorkerSpec(worker_cls, dict(init_kwargs or {}), num_actors=num_actors, num_cpus=num_cpus_per_actor,
                      max_restarts=max_restarts)
    ex = SerialExecutor(progress) if serial else ActorPoolExecutor(progress, actor_restart_timeout_s)
    return ex.map(spec, units, label=stage, on_row=on_result)


#: executor names accepted by ``--executor`` / a stage section's ``executor`` key
EXECUTORS: dict[str, type] = {"serial": SerialExecutor, "actor-pool": ActorPoolExecutor, "ray-data": RayDataExecutor}


def _drop_idle(pool, actor) -> None:
    """Remove ``actor`` from ``pool``'s idle actors with the pool's public API: pop every idle actor
    (``ActorPool.pop_idle``) and push back all but ``actor``. The pool keeps an actor whose task failed with an
    error other than ``ActorDiedError``; a handle that will not come back must not be handed a unit again."""
    others = []
    while (idle := pool.pop_idle()) is not None:
        if idle != actor:
            others.append(idle)
    for a in others:
        pool.push(a)


def _run_pool(ray, actors: list, units: list[dict[str, Any]], emit, label: str, max_restarts: int,
              actor_restart_timeout_s: float, new_actor: Callable[[], Any], died_errors: tuple) -> None:
    """The loop of :class:`ActorPoolExecutor` on Ray's :class:`ray.util.ActorPool`: submit every unit, collect
    rows in completion order, resubmit a unit whose actor died (at most ``max_restarts`` times, then an error row
    naming it) once Ray has restarted that actor — or a new actor replaced it — so every unit yields exactly one
    row.

    ``ActorPool.get_next_unordered`` raises without naming the unit when a task fails, so each submitted task is
    tracked here (``unit_id`` → (ref, unit, actor)); after a failure, the finished refs that raise are the failed
    units, each handled once. ``actors`` is updated in place (replacements), for the caller's cleanup.
    """
    from ray.util import ActorPool

    pool = ActorPool(list(actors))
    tracked: dict[str, tuple[Any, dict[str, Any], Any]] = {}  # unit_id -> (ref, unit, actor) of the live task
    attempts: dict[str, int] = {}

    def _call(actor, unit):
        ref = actor.process.remote(unit)
        tracked[str(unit.get("unit_id"))] = (ref, unit, actor)
        return ref

    def _revive(actor) -> None:
        """Give the pool ``actor`` back once Ray has restarted it, or a new actor if it does not come back."""
        try:
            ray.get(actor.pid.remote(), timeout=actor_restart_timeout_s)
        except Exception:  # noqa: BLE001 - gone for good (restarts spent) or not back in time
            log.warning("%s: an actor did not come back; starting a new actor", label)
            idx = next((i for i, a in enumerate(actors) if a == actor), None)
            _drop_idle(pool, actor)  # a dead handle must not stay in the pool's idle set
            actor = new_actor()
            if idx is None:
                actors.append(actor)
            else:
                actors[idx] = actor
        try:
            pool.push(actor)
        except ValueError:  # the pool kept it (a restartable failure returns the actor to the idle set)
            pass

    def _failed_units() -> None:
        """Handle every finished task that raised and is still tracked (the one ``get_next_unordered`` just
        raised for, and any other that failed at the same time)."""
        refs = {t[0]: uid for uid, t in tracked.items()}
        done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0) if refs else ([], [])
        for ref in done:
            try:
                ray.get(ref)
                continue  # finished fine: the pool returns its row later
            except died_errors as exc:
                uid = refs[ref]
                _, unit, actor = tracked.pop(uid)
                attempts[uid] = attempts.get(uid, 0) + 1
                if attempts[uid] <= max_restarts:
                    log.warning("%s: actor died on %s (attempt %d); resubmitting", label, uid, attempts[uid])
                    _revive(actor)
                    pool.submit(_call, unit)
                else:
                    row = Row.error(uid, exc, label)
                    row["error"] = (f"the worker process died {attempts[uid]} times while processing {uid} (a "
                                    f"native crash or out-of-memory kill?): {row['error']}")[:2000]
                    emit(row)
                    _revive(actor)
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be deserialised
                uid = refs[ref]
                tracked.pop(uid)
                emit(Row.error(uid, exc, label))

    for unit in units:
        pool.submit(_call, unit)
    while pool.has_next():
        try:
            uid, row, node = pool.get_next_unordered()
        except Exception:  # noqa: BLE001 - which unit failed is found from the tracked refs
            _failed_units()
            continue
        tracked.pop(uid, None)
        emit(row, node)
    for uid, (ref, _, _) in list(tracked.items()):  # never expected: a failure the pool raised but Ray had not
        try:                                        # reported done yet; still exactly one row per unit
            _, row, node = ray.get(ref)
            emit(row, node)
        except Exception as exc:  # noqa: BLE001
            emit(Row.error(uid, exc, label))
