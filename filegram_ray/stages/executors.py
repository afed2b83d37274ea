"""Where a stage's units run. An executor takes a :class:`~filegram_ray.stages.base.WorkerSpec` and units and
returns one :class:`~filegram_ray.stages.base.Row` per unit; it never names a stage (the ``label`` it is given is
for progress lines and error rows only).

* :class:`SerialExecutor` — one worker in this process, no Ray (debugging, tests, ``--serial``);
* :class:`ActorPoolExecutor` — a pool of ``num_actors`` actors, one unit in flight on each; a unit whose actor
  dies (its process, or its node) goes at once to another live actor, at most ``max_restarts`` times, then it is an
  error row — every unit yields exactly one row (BR-08 / BR-23); the dead actor rejoins when Ray has restarted it,
  or a new actor replaces it;
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
    """Units on a pool of actors (``spec.num_actors`` actors of ``spec.num_cpus`` CPUs, capped by what the
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


#: how often (seconds) the actor pool looks up the state of the actors that hold units
_LOOK_EVERY_S = 5.0


def _restarting_actors(ray) -> set[str]:
    """Ids (hex) of this job's actors that Ray is restarting (state ``RESTARTING``), from Ray's state API (the
    GCS, through the dashboard); empty when it does not answer within 10 s (the pool then only waits longer)."""
    try:
        from ray.util.state import list_actors

        job = ray.get_runtime_context().get_job_id()
        rows = list_actors(filters=[("job_id", "=", job), ("state", "=", "RESTARTING")], limit=10000, timeout=10,
                           raise_on_missing_output=False)
        return {r["actor_id"] if isinstance(r, dict) else r.actor_id for r in rows}
    except Exception:  # noqa: BLE001 - bookkeeping only
        return set()


def _run_pool(ray, actors: list, units: list[dict[str, Any]], emit, label: str, max_restarts: int,
              actor_restart_timeout_s: float, new_actor: Callable[[], Any], died_errors: tuple) -> None:
    """The loop of :class:`ActorPoolExecutor`: hand each idle actor the next unit, collect rows in completion
    order, and never wait on a dead actor while live ones could work.

    A unit whose actor died (its process, or the node under it: :data:`died_errors`) goes back to the front of the
    queue at once — any live actor takes it — at most ``max_restarts`` times, then it is an error row naming it; so
    every unit yields exactly one row. The dead actor is probed in the background (Ray restarts it, on another
    node if its node is gone) and rejoins the idle set when it answers; one that does not answer within
    ``actor_restart_timeout_s`` (restarts spent, or no node can place it) is killed and replaced by a new actor.
    A unit sent to an actor whose node is lost before the actor ran it does not fail: Ray keeps it queued for the
    restarted actor, however long no node can place that (seen on a 3-node cluster that lost a node as a stage
    began). So every few seconds the actors holding units are looked up (:func:`_restarting_actors`), and one that
    Ray is restarting is killed: its unit goes back to the queue without counting as an attempt.
    Each actor runs one unit at a time, so a death costs only the unit in flight on it. ``actors`` is updated in
    place (replacements), for the caller's cleanup. (``ray.util.ActorPool`` hands a returned-but-dead actor the
    next queued unit and offers no way to wait for a restart without blocking every other actor.)
    """
    import time
    from collections import deque

    queue = deque(units)
    idle = list(actors)
    inflight: dict[Any, tuple[str, dict[str, Any], Any]] = {}  # task ref -> (unit id, unit, actor)
    evicted: set = set()  # task refs whose actor was killed here before it ran them (not an attempt of the unit)
    last_look = [time.monotonic()]
    probing: dict[Any, tuple[Any, float]] = {}  # pid() ref of a dead actor -> (actor, since)
    attempts: dict[str, int] = {}
    stuck = [0]  # actors replaced since the last row: a cluster that can place none ends the loop

    def replace(actor) -> None:
        stuck[0] += 1
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        fresh = new_actor()
        idx = next((i for i, a in enumerate(actors) if a == actor), None)
        if idx is None:
            actors.append(fresh)
        else:
            actors[idx] = fresh
        probing[fresh.pid.remote()] = (fresh, time.monotonic())

    def finished(ref) -> None:
        if ref in probing:
            actor, _ = probing.pop(ref)
            try:
                ray.get(ref)
                idle.append(actor)
            except Exception:  # noqa: BLE001 - gone for good (restarts spent)
                log.warning("%s: an actor did not come back; starting a new actor", label)
                replace(actor)
            return
        uid, unit, actor = inflight.pop(ref)
        try:
            _, row, node = ray.get(ref)
        except died_errors as exc:
            if ref in evicted:
                evicted.discard(ref)
                queue.appendleft(unit)
                probing[actor.pid.remote()] = (actor, time.monotonic())
                return
            attempts[uid] = attempts.get(uid, 0) + 1
            if attempts[uid] <= max_restarts:
                log.warning("%s: actor died on %s (attempt %d); resubmitting", label, uid, attempts[uid])
                queue.appendleft(unit)
            else:
                row = Row.error(uid, exc, label)
                row["error"] = (f"the worker process died {attempts[uid]} times while processing {uid} (a "
                                f"native crash or out-of-memory kill?): {row['error']}")[:2000]
                emit(row)
            probing[actor.pid.remote()] = (actor, time.monotonic())
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be deserialised
            idle.append(actor)
            emit(Row.error(uid, exc, label))
            return
        idle.append(actor)
        stuck[0] = 0
        emit(row, node)

    def evict_restarting() -> None:
        """Kill the restarting actors that hold a unit (docstring above); the units come back through
        ``finished`` as died errors."""
        restarting = _restarting_actors(ray)
        for ref, (uid, _, actor) in list(inflight.items()):
            if ref not in evicted and actor._actor_id.hex() in restarting:
                log.warning("%s: the actor holding %s is restarting (its node lost?); %s goes to another actor",
                            label, uid, uid)
                evicted.add(ref)
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass

    while queue or inflight:
        if stuck[0] > 2 * len(actors) + 3 and not inflight:
            err = RuntimeError(f"no actor could be started in {stuck[0]} tries (is any node left that can place "
                               "one?)")
            while queue:
                emit(Row.error(str(queue.popleft().get("unit_id")), err, label))
            return
        while queue and idle:
            actor, unit = idle.pop(0), queue.popleft()
            inflight[actor.process.remote(unit)] = (str(unit.get("unit_id")), unit, actor)
        if queue and not inflight and not probing:  # every actor gone: start one
            replace(None)
        waiting = list(inflight) + list(probing)
        ready, _ = ray.wait(waiting, num_returns=1, timeout=1.0)
        if ready:
            ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
        for ref in ready:
            finished(ref)
        now = time.monotonic()
        for ref, (actor, since) in list(probing.items()):
            if now - since > actor_restart_timeout_s:
                probing.pop(ref)
                log.warning("%s: an actor did not come back within %.0f s; starting a new actor", label,
                            actor_restart_timeout_s)
                replace(actor)
        if inflight and now - last_look[0] >= _LOOK_EVERY_S:
            last_look[0] = now
            evict_restarting()
