"""Ray runtime helpers shared by every stage.

* :func:`init_ray` connects to a cluster (``--address``, ``RAY_ADDRESS`` under ``ray job submit``) or starts an
  in-process local Ray; it keeps a local Ray on loopback and off token auth (ENVIRONMENT_FACTS §1).
* :func:`map_units` runs a *worker class* over work units either on a pool of Ray actors (fault tolerant: an actor
  that dies is restarted by Ray and its unit resubmitted) or serially in this process (``serial=True``), which is
  what ``ray.init(local_mode=True)`` was for before Ray 2.60 removed it.

A worker class has a constructor taking keyword arguments and a ``process(unit) -> dict`` method. ``process``
must be idempotent (write atomically, then a completion record), because a unit in flight on an actor that dies
is run again.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["init_ray", "map_units", "error_row", "Progress"]


def init_ray(address: str | None = None, num_cpus: int | None = None, quiet: bool = True,
             runtime_env: dict[str, Any] | None = None) -> None:
    """Connect to Ray once per process.

    Args:
        address: cluster address (``auto`` for a cluster started on this machine with ``ray start``,
            ``ray://host:10001``, ``127.0.0.1:6379``). Default: ``RAY_ADDRESS`` from the environment (set by
            ``ray job submit``) or, if unset, a new local Ray in this process — never silently a ``ray start``
            cluster that happens to run on the machine.
        num_cpus: CPUs for a new local Ray (ignored when connecting to a cluster).
        quiet: lower Ray's log level to warnings.
        runtime_env: Ray runtime environment for this driver's workers (e.g. extra ``PYTHONPATH``).
    """
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = {"ignore_reinit_error": True}
    if quiet:
        kwargs["logging_level"] = logging.WARNING
        kwargs["log_to_driver"] = True
    if runtime_env:
        kwargs["runtime_env"] = runtime_env
    if address:
        kwargs["address"] = address
    else:
        kwargs["address"] = "local"
        # A laptop run: keep everything on loopback and skip token auth (ENVIRONMENT_FACTS §1).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        kwargs["include_dashboard"] = False
        kwargs["_node_ip_address"] = "127.0.0.1"
        if num_cpus:
            kwargs["num_cpus"] = num_cpus
    ray.init(**kwargs)


def error_row(unit_id: str, exc: BaseException, stage: str) -> dict[str, Any]:
    """The row recorded for a unit that failed: the batch goes on without it."""
    return {
        "unit": unit_id,
        "stage": stage,
        "status": "error",
        "error_type": type(exc).__name__,
        "error": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


class Progress:
    """A minimal progress line on stderr (tqdm when available and stderr is a terminal)."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.n, self.t0 = total, desc, 0, time.perf_counter()
        self.enabled = enabled
        self._bar = None
        self._last = 0.0
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit="unit", dynamic_ncols=True)
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
            print(f"[{self.desc}] {self.n}/{self.total} units, {rate:.1f}/s {status}", file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _process_safely(worker, unit: dict[str, Any], stage: str) -> dict[str, Any]:
    uid = str(unit.get("unit_id") or unit)
    try:
        out = worker.process(unit)
        out = dict(out or {})
        out.setdefault("unit", uid)
        out.setdefault("status", "ok")
        return out
    except Exception as exc:  # one bad unit never sinks the batch
        log.warning("%s: unit %s failed: %s", stage, uid, exc)
        return error_row(uid, exc, stage)


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
    """Run ``worker_cls(**init_kwargs).process(unit)`` for every unit; returns one result row per unit.

    Args:
        worker_cls: class with ``__init__(**init_kwargs)`` and ``process(unit: dict) -> dict``.
        units: work units; each must carry a unique ``unit_id`` string.
        num_actors: size of the actor pool (ignored when ``serial``).
        num_cpus_per_actor: Ray CPU request per actor; below 1 lets more actors share a small machine.
        serial: run in this process without Ray (debugging; same code path as the actors).
        stage: name used in logs and error rows.
        max_restarts: Ray restarts per actor before its units are reported as errors.
        on_result: callback per finished row (e.g. to print progress details).
        actor_restart_timeout_s: how long to wait for Ray to restart a dead actor before replacing it.

    Returns:
        Result rows in completion order: the worker's dict (``status`` ``ok`` unless set) or an error row.
    """
    units = list(units)
    results: list[dict[str, Any]] = []
    bar = Progress(len(units), stage, enabled=progress)

    def _emit(row: dict[str, Any]) -> None:
        results.append(row)
        if on_result:
            on_result(row)
        bar.update(1, row.get("status", ""))

    if not units:
        bar.close()
        return results
    if serial:
        worker = worker_cls(**(init_kwargs or {}))
        for unit in units:
            _emit(_process_safely(worker, unit, stage))
        bar.close()
        return results

    import ray
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

    init_ray()

    @ray.remote
    class _Actor:
        def __init__(self, cls, kwargs):
            self.worker = cls(**(kwargs or {}))

        def process(self, unit):
            return _process_safely(self.worker, unit, stage)

        def pid(self):
            return os.getpid()

    n = max(1, min(num_actors, len(units)))
    actor_opts = {"num_cpus": num_cpus_per_actor, "max_restarts": max_restarts, "max_task_retries": 0}
    actors = [_Actor.options(**actor_opts).remote(worker_cls, init_kwargs) for _ in range(n)]
    pending = list(reversed(units))
    attempts: dict[str, int] = {}
    in_flight: dict[Any, tuple[int, dict[str, Any]]] = {}

    def _submit(slot: int) -> None:
        unit = pending.pop()
        ref = actors[slot].process.remote(unit)
        in_flight[ref] = (slot, unit)

    for slot in range(n):
        if pending:
            _submit(slot)
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        ref = ready[0]
        slot, unit = in_flight.pop(ref)
        uid = str(unit.get("unit_id"))
        try:
            row = ray.get(ref)
        except (RayActorError, ActorDiedError, ActorUnavailableError) as exc:
            attempts[uid] = attempts.get(uid, 0) + 1
            if attempts[uid] <= max_restarts:
                log.warning("%s: actor died on %s (attempt %d); resubmitting", stage, uid, attempts[uid])
                pending.append(unit)
            else:
                _emit(error_row(uid, exc, stage))
            # Wait until Ray has restarted the actor before giving it work again; replace it if it is gone.
            try:
                ray.get(actors[slot].pid.remote(), timeout=actor_restart_timeout_s)
            except Exception:
                log.warning("%s: actor slot %d did not come back; starting a new actor", stage, slot)
                actors[slot] = _Actor.options(**actor_opts).remote(worker_cls, init_kwargs)
        except Exception as exc:  # e.g. a unit that cannot be deserialised
            _emit(error_row(uid, exc, stage))
        else:
            _emit(row)
        if pending:
            _submit(slot)
    for a in actors:
        ray.kill(a, no_restart=True)
    bar.close()
    return results


def iter_ok(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Rows whose status is ``ok``."""
    return (r for r in rows if r.get("status") == "ok")
