"""Where a stage's tasks run. An executor takes a :class:`~filegram_ray.stages.base.WorkerSpec` (or, the
model-call executor, a :class:`~filegram_ray.stages.base.ModelCallSpec`) and tasks ``{"task_id", "items"}`` and
returns one :class:`~filegram_ray.stages.base.Row` per item; it never names a stage (the ``label`` it is given is
for progress lines and error rows only).

* :class:`SerialExecutor` — one worker in this process, no Ray (debugging, tests, ``executor: serial``);
* :class:`ActorPoolExecutor` — a pool of ``num_actors`` actors, one task in flight on each; a task whose actor
  dies (its process, or its node) goes at once to another live actor, at most ``max_restarts`` times; then a task
  of several items is split into one task per item, and a single item is an error row — every item yields
  exactly one row (BR-08 / BR-23); the dead actor rejoins when Ray has restarted it, or a new actor replaces it;
* :class:`RayDataExecutor` — ``ray.data.from_items(tasks).map_batches(...)`` on an actor pool
  (``ActorPoolStrategy``), one task per batch; Ray Data retries a failed task, the worker's own exceptions are
  error rows;
* :class:`ModelCallExecutor` — items answered by a model through a ``ray.data.llm`` processor: their requests
  built on one of the three above (``prepare``), sent in waves through the processor (``call``), each item's
  replies collected in the driver as soon as they are all in (``collect``).

A worker's exception never sinks the batch: it becomes the item's error row in the process that ran it
(:func:`run_task`), with its type, message and traceback (:meth:`~filegram_ray.stages.base.Row.error`). The Ray
executors count the rows by the node that made them (:attr:`_Base.units_by_node`, ``{node id: {"ip", "units"}}``);
the runner puts the counts into the stage record (``nodes``). The node is never part of a row: rows feed the
stages' tables, which are the same bytes whichever node ran an item.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from filegram_ray.stages.base import Executor, ModelCallSpec, Row, WorkerSpec  # noqa: F401 - Executor: the protocol

log = logging.getLogger(__name__)

__all__ = ["EXECUTORS", "ActorPoolExecutor", "Executor", "ModelCallExecutor", "Progress", "RayDataExecutor",
           "SerialExecutor", "make_worker", "map_units", "run_task", "tasks_of", "this_node"]


class Progress:
    """A progress line on stderr: tqdm when stderr is a terminal, else ``[label] n/N <noun>, r/s`` every 5 s
    (``noun``: what one item is, the stage's step)."""

    def __init__(self, total: int, desc: str, enabled: bool = True, noun: str = "items"):
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


def _uid(item: dict[str, Any]) -> str:
    return str(item.get("unit_id") or item)


def run_task(worker: Any, task: dict[str, Any], label: str) -> list[Row]:
    """One row per item of ``task``: ``worker.process_task(items)`` (an iterable of ``(unit_id, fields or
    exception)``) when the worker has it, else ``worker.process(item)`` per item. An exception is that item's
    error row (one bad item never sinks the task); one that ends ``process_task`` itself fails the items it had
    not reported yet."""
    items = list(task["items"])
    many = getattr(worker, "process_task", None)
    if many is None:
        rows = []
        for item in items:
            uid = _uid(item)
            try:
                rows.append(Row.of(uid, dict(worker.process(item) or {})))
            except Exception as exc:  # noqa: BLE001 - the row names it, the task goes on
                log.warning("%s: %s failed: %s", label, uid, exc)
                rows.append(Row.error(uid, exc, label))
        return rows
    got: dict[str, Row] = {}
    try:
        for uid, res in many(items):
            uid = str(uid)
            if isinstance(res, BaseException):
                log.warning("%s: %s failed: %s", label, uid, res)
                got[uid] = Row.error(uid, res, label)
            else:
                got[uid] = Row.of(uid, dict(res or {}))
    except Exception as exc:  # noqa: BLE001 - the task's items not reported yet share its error
        log.warning("%s: task %s failed: %s", label, task.get("task_id"), exc)
        for item in items:
            got.setdefault(_uid(item), Row.error(_uid(item), exc, label))
    missing = RuntimeError("the worker reported no result for this item")
    return [got.get(_uid(it)) or Row.error(_uid(it), missing, label) for it in items]


def tasks_of(groups: Iterable[list[dict[str, Any]]], prefix: str = "task") -> list[dict[str, Any]]:
    """Tasks ``{"task_id": "<prefix>-00000", "items": group}`` of groups of items."""
    return [{"task_id": f"{prefix}-{k:05d}", "items": list(g)} for k, g in enumerate(groups)]


class _Base:
    name = "base"
    uses_ray = True

    def __init__(self, progress: bool = True):
        self.progress = progress
        #: rows made on each Ray node by this executor so far: ``{node id: {"ip": str, "units": int}}``
        self.units_by_node: dict[str, dict[str, Any]] = {}

    def map(self, spec: WorkerSpec, tasks: Iterable[dict[str, Any]], *, label: str, noun: str = "items",
            on_row: Callable[[Row], None] | None = None) -> list[Row]:
        tasks = list(tasks)
        rows: list[Row] = []
        bar = Progress(sum(len(t["items"]) for t in tasks), label, enabled=self.progress, noun=noun)

        def emit(row: Row, node: tuple[str, str] | None = None) -> None:
            if node and node[0]:
                self.units_by_node.setdefault(node[0], {"ip": node[1], "units": 0})["units"] += 1
            rows.append(row)
            if on_row is not None:
                on_row(row)
            bar.update(1, row.get("status", ""))

        try:
            if tasks:
                self._run(spec, tasks, label, emit)
        finally:
            bar.close()
        return rows

    def _run(self, spec: WorkerSpec, tasks: list[dict[str, Any]], label: str, emit: Callable[..., None]) -> None:
        raise NotImplementedError


class SerialExecutor(_Base):
    """Every task in this process, one worker, no Ray (the same worker code the actors run)."""

    name = "serial"
    uses_ray = False

    def _run(self, spec, tasks, label, emit):
        worker = make_worker(spec)
        for task in tasks:
            for row in run_task(worker, task, label):
                emit(row)


class ActorPoolExecutor(_Base):
    """Tasks on a pool of actors (``spec.num_actors`` actors of ``spec.num_cpus`` CPUs, capped by what the
    cluster can place); see the module docstring for what happens when an actor dies.

    Args:
        actor_restart_timeout_s: how long to wait for Ray to restart a dead actor before starting a new one.
    """

    name = "actor-pool"

    def __init__(self, progress: bool = True, actor_restart_timeout_s: float = 120.0):
        super().__init__(progress)
        self.actor_restart_timeout_s = actor_restart_timeout_s

    def _run(self, spec, tasks, label, emit):
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

            def process(self, task):  # (task_id, rows, node): the pool's results come back in completion order
                return str(task["task_id"]), run_task(self.worker, task, label), self.node

            def pid(self):
                return os.getpid()

        n = max(1, min(spec.num_actors, len(tasks)))
        cap = pool_capacity(spec.num_cpus)
        if n > cap:  # an actor that can never be placed would hold its task forever
            log.warning("%s: %d actors × %g CPUs do not fit the cluster; using %d actors", label, n, spec.num_cpus,
                        cap)
            n = cap
        opts: dict[str, Any] = {"num_cpus": spec.num_cpus, "max_restarts": spec.max_restarts,
                                "max_task_retries": 0}
        if spec.env_vars:
            opts["runtime_env"] = {"env_vars": dict(spec.env_vars)}
        actors = [_Actor.options(**opts).remote(spec) for _ in range(n)]
        try:
            _run_pool(ray, actors, tasks, emit, label, spec.max_restarts, self.actor_restart_timeout_s,
                      lambda: _Actor.options(**opts).remote(spec),
                      (RayActorError, ActorDiedError, ActorUnavailableError))
        finally:  # also on Ctrl-C: no actor of this pool outlives the call
            for a in actors:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001 - already dead
                    pass


class _DataCall:
    """``map_batches`` callable of :class:`RayDataExecutor`: column ``task`` (JSON) in, column ``rows`` (JSON list)
    out."""

    def __init__(self, spec: WorkerSpec, label: str):
        self.worker, self.label = make_worker(spec), label
        self.node = json.dumps(this_node())

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = [run_task(self.worker, json.loads(t), self.label) for t in batch["task"]]
        return {"rows": [json.dumps(rows, ensure_ascii=False, default=str) for rows in out],
                "node": [self.node] * len(out)}


class RayDataExecutor(_Base):
    """Tasks as a Ray Dataset through ``map_batches`` on an actor pool (one task per call); rows stream back in
    completion order. Items and rows must be JSON-serialisable."""

    name = "ray-data"

    def _run(self, spec, tasks, label, emit):
        import ray

        from filegram_ray.runtime import check_cpu_request, init_ray, pool_capacity

        init_ray()
        check_cpu_request(spec.num_cpus, f"{label}.num_cpus_per_actor")
        size = max(1, min(spec.num_actors, len(tasks), pool_capacity(spec.num_cpus)))
        ds = ray.data.from_items([{"task": json.dumps(t, ensure_ascii=False)} for t in tasks],
                                 override_num_blocks=len(tasks))
        kwargs: dict[str, Any] = {"fn_constructor_kwargs": {"spec": spec, "label": label}, "batch_size": 1,
                                  "num_cpus": spec.num_cpus,
                                  "compute": ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=1)}
        if spec.env_vars:
            kwargs["runtime_env"] = {"env_vars": dict(spec.env_vars)}
        seen: set[str] = set()
        try:
            for rec in ds.map_batches(_DataCall, **kwargs).iter_rows():
                node = tuple(json.loads(rec["node"]))
                for r in json.loads(rec["rows"]):
                    row = Row(r)
                    seen.add(row.unit)
                    emit(row, node)
        except Exception as exc:  # noqa: BLE001 - a task Ray Data gave up on: its items become error rows
            for t in tasks:
                for it in t["items"]:
                    if _uid(it) not in seen:
                        emit(Row.error(_uid(it), exc, label))


class ModelCallExecutor(_Base):
    """Items answered by a model (:class:`~filegram_ray.stages.base.ModelCallSpec`; the module docstring), in
    waves of ``spec.wave`` items: their ``prepare`` tasks on ``inner`` (the stage's executor), the requests of the
    prepared items through ``spec.call`` (a ``ray.data.llm`` processor, on Ray whatever ``inner`` is), and each
    item's ``collect`` in this process as soon as its last reply is in. An item whose ``prepare`` or ``collect``
    raises is an error row; a request the model could not answer is a reply with its ``error`` (the stage's
    ``collect`` keeps it in the item's own table)."""

    uses_ray = True

    def __init__(self, inner: _Base, progress: bool = True):
        super().__init__(progress)
        self.inner = inner
        self.name = f"model-call ({inner.name})"

    def _run(self, spec: ModelCallSpec, tasks, label, emit):
        from filegram_ray.runtime import init_ray

        init_ray()
        quiet = type(self.inner)(progress=False)
        wave: list[dict[str, Any]] = []
        n = 0
        for task in tasks:
            wave.append(task)
            n += len(task["items"])
            if n >= spec.wave:
                self._wave(spec, wave, quiet, label, emit)
                wave, n = [], 0
        if wave:
            self._wave(spec, wave, quiet, label, emit)

    def _wave(self, spec: ModelCallSpec, tasks, inner: _Base, label: str, emit: Callable[[Row], None]) -> None:
        items = {_uid(it): it for t in tasks for it in t["items"]}
        prepared: dict[str, dict[str, Any]] = {}
        for row in inner.map(spec.prepare, tasks, label=label):
            if row.ok:
                prepared[row.unit] = row
            else:
                emit(row)
        owner: dict[str, str] = {}
        requests: dict[str, list[dict[str, Any]]] = {uid: [] for uid in prepared}
        for uid, row in prepared.items():
            for req in row.get("requests") or []:
                owner[str(req["req_key"])] = uid
                requests[uid].append(req)
        replies: dict[str, list[dict[str, Any]]] = {uid: [] for uid in prepared}

        def collect(uid: str) -> None:
            try:
                emit(Row.of(uid, dict(spec.collect(items[uid], dict(prepared[uid].get("state") or {}),
                                                   requests[uid], replies[uid]) or {})))
            except Exception as exc:  # noqa: BLE001 - the item's row names it
                log.warning("%s: %s failed: %s", label, uid, exc)
                emit(Row.error(uid, exc, label))

        for uid in [u for u, reqs in requests.items() if not reqs]:
            collect(uid)
        pending = {uid: len(reqs) for uid, reqs in requests.items() if reqs}
        if not pending:
            return
        try:
            for reply in spec.call([r for uid in pending for r in requests[uid]]):
                uid = owner.get(str(reply.get("req_key")))
                if uid is None or uid not in pending:
                    continue
                replies[uid].append(dict(reply))
                pending[uid] -= 1
                if pending[uid] == 0:
                    del pending[uid]
                    collect(uid)
        except Exception as exc:  # noqa: BLE001 - a processor that fails outright: the items still waiting fail
            for uid in list(pending):
                emit(Row.error(uid, exc, label))
            return
        for uid in list(pending):  # a request the processor never answered: collect with what came back
            collect(uid)


def map_units(
    worker_cls: type,
    units: Iterable[dict[str, Any]],
    *,
    init_kwargs: dict[str, Any] | None = None,
    num_actors: int = 2,
    num_cpus_per_actor: float = 1.0,
    executor: str = "actor-pool",
    stage: str = "stage",
    max_restarts: int = 3,
    progress: bool = True,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    actor_restart_timeout_s: float = 120.0,
) -> list[dict[str, Any]]:
    """Run ``worker_cls(**init_kwargs).process(unit)`` for every unit (one task each) on the executor named
    ``executor`` (:data:`EXECUTORS`; the module docstring documents the fault tolerance); one row per unit, in
    completion order. For code outside a stage (benchmarks, tests); a stage declares a
    :class:`~filegram_ray.stages.base.WorkerSpec` and lets the runner pick the executor.

    Args:
        worker_cls: class with ``__init__(**init_kwargs)`` and ``process(unit: dict) -> dict``.
        units: work units; each must carry a unique ``unit_id`` string.
        num_actors: size of the actor pool (ignored by the serial executor).
        num_cpus_per_actor: Ray CPU request per actor; below 1 lets more actors share a small machine.
        executor: ``serial`` (this process, no Ray), ``actor-pool`` or ``ray-data``.
        stage: label used in progress lines and error rows.
        max_restarts: times a unit whose actor died is run again before it is an error row.
        on_result: callback per finished row.
        actor_restart_timeout_s: how long to wait for Ray to restart a dead actor before replacing it.
    """
    spec = WorkerSpec(worker_cls, dict(init_kwargs or {}), num_actors=num_actors, num_cpus=num_cpus_per_actor,
                      max_restarts=max_restarts)
    ex = (ActorPoolExecutor(progress, actor_restart_timeout_s) if executor == "actor-pool"
          else EXECUTORS[executor](progress))
    return ex.map(spec, tasks_of([u] for u in units), label=stage, noun="units", on_row=on_result)


#: the executors a stage section's ``executor`` names (:data:`~filegram_ray.stages.base.EXECUTOR_NAMES`)
EXECUTORS: dict[str, type] = {"serial": SerialExecutor, "actor-pool": ActorPoolExecutor, "ray-data": RayDataExecutor}


#: how often (seconds) the actor pool looks up the state of the actors that hold tasks
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


def _run_pool(ray, actors: list, tasks: list[dict[str, Any]], emit, label: str, max_restarts: int,
              actor_restart_timeout_s: float, new_actor: Callable[[], Any], died_errors: tuple) -> None:
    """The loop of :class:`ActorPoolExecutor`: hand each idle actor the next task, emit its rows in completion
    order, and never wait on a dead actor while live ones could work.

    A task whose actor died (its process, or the node under it: :data:`died_errors`) goes back to the front of the
    queue at once — any live actor takes it — at most ``max_restarts`` times; then a task of several items is split
    into one task per item (each with ``max_restarts`` tries of its own) and a single item is an error row naming
    it; so every item yields exactly one row. The dead actor is probed in the background (Ray restarts it, on
    another node if its node is gone) and rejoins the idle set when it answers; one that does not answer within
    ``actor_restart_timeout_s`` (restarts spent, or no node can place it) is killed and replaced by a new actor.
    A task sent to an actor whose node is lost before the actor ran it does not fail: Ray keeps it queued for the
    restarted actor, however long no node can place that (seen on a 3-node cluster that lost a node as a stage
    began). So every few seconds the actors holding tasks are looked up (:func:`_restarting_actors`), and one that
    Ray is restarting is killed: its task goes back to the queue without counting as an attempt.
    Each actor runs one task at a time, so a death costs only the task in flight on it. ``actors`` is updated in
    place (replacements), for the caller's cleanup. (``ray.util.ActorPool`` hands a returned-but-dead actor the
    next queued task and offers no way to wait for a restart without blocking every other actor.)
    """
    from collections import deque

    queue = deque(tasks)
    idle = list(actors)
    inflight: dict[Any, tuple[str, dict[str, Any], Any]] = {}  # task ref -> (task id, task, actor)
    evicted: set = set()  # task refs whose actor was killed here before it ran them (not an attempt of the task)
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

    def died(tid: str, task: dict[str, Any], exc: BaseException) -> None:
        """A task whose worker died past its tries: one task per item, or the single item's error row."""
        items = task["items"]
        if len(items) > 1:
            log.warning("%s: the worker died %d times on a task of %d items; running them one by one", label,
                        attempts[tid], len(items))
            for k, it in reversed(list(enumerate(items))):
                queue.appendleft({"task_id": f"{tid}.{k}", "items": [it]})
            return
        uid = _uid(items[0])
        row = Row.error(uid, exc, label)
        row["error"] = (f"the worker process died {attempts[tid]} times while processing {uid} (a native crash "
                        f"or out-of-memory kill?): {row['error']}")[:2000]
        emit(row)

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
        tid, task, actor = inflight.pop(ref)
        try:
            _, rows, node = ray.get(ref)
        except died_errors as exc:
            if ref in evicted:
                evicted.discard(ref)
                queue.appendleft(task)
                probing[actor.pid.remote()] = (actor, time.monotonic())
                return
            attempts[tid] = attempts.get(tid, 0) + 1
            if attempts[tid] <= max_restarts:
                log.warning("%s: actor died on %s (attempt %d); resubmitting", label, tid, attempts[tid])
                queue.appendleft(task)
            else:
                died(tid, task, exc)
            probing[actor.pid.remote()] = (actor, time.monotonic())
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be deserialised
            idle.append(actor)
            for it in task["items"]:
                emit(Row.error(_uid(it), exc, label))
            return
        idle.append(actor)
        stuck[0] = 0
        for row in rows:
            emit(row, node)

    def evict_restarting() -> None:
        """Kill the restarting actors that hold a task (docstring above); the tasks come back through
        ``finished`` as died errors."""
        restarting = _restarting_actors(ray)
        for ref, (tid, _, actor) in list(inflight.items()):
            if ref not in evicted and actor._actor_id.hex() in restarting:
                log.warning("%s: the actor holding %s is restarting (its node lost?); %s goes to another actor",
                            label, tid, tid)
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
                for it in queue.popleft()["items"]:
                    emit(Row.error(_uid(it), err, label))
            return
        while queue and idle:
            actor, task = idle.pop(0), queue.popleft()
            inflight[actor.process.remote(task)] = (str(task["task_id"]), task, actor)
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
