"""Ray for every job: the connection, what the cluster can place, and a clean end.

* :func:`init_ray` connects to a cluster (``--address``, ``RAY_ADDRESS`` under ``ray job submit``) or starts an
  in-process local Ray; it keeps a local Ray on loopback and off token auth (ENVIRONMENT_FACTS §1).
* :func:`check_cpu_request` / :func:`pool_capacity`: a CPU request that no node of the cluster can meet fails at
  once, and a pool is never larger than the cluster can place, so no unit waits for an actor that cannot start
  (BR-08).
* :class:`Interruption` / :func:`end_process`: Ctrl-C and SIGTERM end a job even when a library swallows the
  interrupt (BR-23).

The stage contract (lock, seed check, skips, error rows, records) lives in :mod:`filegram_ray.stages`.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from typing import Any

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["init_ray", "ResourceRequestError", "RayAddressError", "check_cpu_request",
           "pool_capacity", "Interruption", "end_process"]

#: environment variable that lets CPU requests wait for nodes an autoscaler has not started yet
ALLOW_PENDING_ENV = "FILEGRAM_ALLOW_PENDING_RESOURCES"


class RayAddressError(UserError, ConnectionError):
    """Nothing answers at the Ray address the user gave (``--address`` / ``RAY_ADDRESS``)."""


class ResourceRequestError(UserError):
    """A Ray resource request that no node of the connected cluster can meet (the message names the request and
    the cluster's CPUs); raised before anything is scheduled instead of waiting forever (BR-08)."""


def _node_cpus() -> list[float]:
    import ray

    return [float(n.get("Resources", {}).get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")]


def check_cpu_request(cpus: float, what: str) -> None:
    """Fail fast when no alive node of the connected Ray cluster has ``cpus`` CPUs.

    Args:
        cpus: CPUs one actor or task asks for.
        what: the config key that set it (``generate.num_cpus_per_actor``), named in the error.

    Raises:
        ResourceRequestError: the request exceeds the largest node. On an autoscaling cluster whose bigger nodes
            are not started yet, set ``FILEGRAM_ALLOW_PENDING_RESOURCES=1`` to let the request wait instead.
    """
    if os.environ.get(ALLOW_PENDING_ENV, "") not in ("", "0"):
        return
    nodes = _node_cpus()
    largest = max(nodes, default=0.0)
    if cpus > largest + 1e-9:
        raise ResourceRequestError(
            f"{what}={cpus:g} asks for {cpus:g} CPUs per worker, but the largest node of this Ray cluster has "
            f"{largest:g} CPUs ({len(nodes)} node(s), {sum(nodes):g} CPUs in all): lower {what} "
            f"(set {ALLOW_PENDING_ENV}=1 if an autoscaler will add bigger nodes)")


def pool_capacity(cpus_per_actor: float) -> int:
    """How many actors of ``cpus_per_actor`` CPUs the alive nodes can hold at once (at least 1)."""
    if cpus_per_actor <= 0:
        return sys.maxsize
    return max(1, sum(math.floor(c / cpus_per_actor + 1e-9) for c in _node_cpus()))


class Interruption:
    """Ctrl-C (SIGINT) and SIGTERM for a job's driver: the first signal raises KeyboardInterrupt in the main thread
    and arms a watchdog; :func:`end_process` then stops Ray and leaves. If the interrupt is swallowed somewhere
    (Ray Data's iterator turned one into ``RuntimeError: release unlocked lock`` and kept retrying — BR-23), the
    watchdog ends the process after ``grace_s`` seconds; a second signal ends it at once.

    Use as a context manager around the job; ``signal_number`` is set once a signal arrived. Outside the main thread
    it does nothing.
    """

    def __init__(self, grace_s: float = 20.0):
        self.grace_s = grace_s
        self.signal_number: int | None = None
        self._old: dict[int, Any] = {}

    def _handler(self, signum, frame):  # noqa: ARG002
        if self.signal_number is not None:
            end_process(128 + signum, shutdown=False)
        self.signal_number = signum
        import threading

        t = threading.Timer(self.grace_s, end_process, args=(128 + signum,))
        t.daemon = True
        t.start()
        raise KeyboardInterrupt

    def __enter__(self) -> Interruption:
        import signal
        import threading

        global _ACTIVE_INTERRUPTION
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
            _ACTIVE_INTERRUPTION = self
        return self

    def __exit__(self, *exc) -> None:
        import signal

        global _ACTIVE_INTERRUPTION
        for sig, old in self._old.items():
            signal.signal(sig, old)
        if _ACTIVE_INTERRUPTION is self:
            _ACTIVE_INTERRUPTION = None

    def reinstall(self) -> None:
        """Take SIGTERM back after ``ray.init`` replaced its handler with ``sys.exit``."""
        import signal

        if self._old:
            signal.signal(signal.SIGTERM, self._handler)


_ACTIVE_INTERRUPTION: Interruption | None = None


def end_process(code: int, shutdown: bool = True) -> None:
    """Stop this driver's Ray (its actors and, for a local Ray, its worker processes) and exit with ``code`` at
    once — without waiting for non-daemon threads such as Ray Data's executor."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if shutdown:
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass
    os._exit(code)


def init_ray(address: str | None = None, num_cpus: int | None = None, quiet: bool = True,
             runtime_env: dict[str, Any] | None = None) -> None:
    """Connect to Ray once per process.

    Args:
        address: cluster address (``auto`` for a cluster started on this machine with ``ray start``,
            ``ray://host:10001``, ``127.0.0.1:6379``). Default: ``RAY_ADDRESS`` from the environment (set by
            ``ray job submit``) or, if unset, a new local Ray in this process — never silently a ``ray start``
            cluster that happens to run on the machine.
        num_cpus: CPUs for a new local Ray (ignored when connecting to a cluster).
        quiet: lower Ray's log level to warnings, and Ray Data's logged progress blocks (what it prints without a
            terminal, every 10 s) unless ``FILEGRAM_RAY_DATA_PROGRESS=1``.
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
        _check_reachable(address)
        kwargs["address"] = address
    else:
        kwargs["address"] = "local"
        # A laptop run: keep everything on loopback and skip token auth (ENVIRONMENT_FACTS §1).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray starts its workers at niceness 15, below this driver (0): on a machine shared with other work the
        # stages' actors then get a fraction of the CPU the same code gets in the driver (measured in
        # tests/benchmarks/bench_embed.py: the encode stage at a third of bare sentence-transformers under load
        # 30). A local run's workers do the run's work, so they run at the driver's priority (override with
        # RAY_worker_niceness=15). `ray job submit` does the same for its drivers.
        os.environ.setdefault("RAY_worker_niceness", "0")
        kwargs["include_dashboard"] = False
        kwargs["_node_ip_address"] = "127.0.0.1"
        if num_cpus:
            kwargs["num_cpus"] = num_cpus
    ray.init(**kwargs)
    if quiet and os.environ.get("FILEGRAM_RAY_DATA_PROGRESS") != "1":
        # without a terminal Ray Data logs a progress block every 10 s per dataset; the stages print their own
        # "[stage] n/N units" lines (FILEGRAM_RAY_DATA_PROGRESS=1 keeps Ray's)
        logging.getLogger("ray.data._internal.progress.logging_progress").setLevel(logging.WARNING)
    if quiet and not logging.getLogger().isEnabledFor(logging.DEBUG):
        # Ray Data's INFO lines (each dataset's execution plan, where its logs are, "a new progress UI is
        # available") are Ray's bookkeeping, not the stage's: shown with `filegram -v`
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    if _ACTIVE_INTERRUPTION is not None:
        _ACTIVE_INTERRUPTION.reinstall()


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) Ray address where nothing accepts a TCP connection within
    ``timeout_s``: ``ray.init`` would retry the unreachable GCS for minutes, printing warnings, before failing.
    ``auto``, ``local`` and other forms are left to Ray.

    Raises:
        RayAddressError: (a ``ConnectionError`` and a user mistake) names the address and what to do.
    """
    import re
    import socket

    m = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)/?", address.strip())
    if not m:
        return
    host, port = m.group(1), int(m.group(2))
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RayAddressError(f"Ray address {address}: nothing answers at {host}:{port} ({exc.strerror or exc}); "
                              "start a head with `ray start --head` (then --address auto or its address), or leave "
                              "--address and RAY_ADDRESS unset for a local Ray") from None
