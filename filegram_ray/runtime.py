"""Ray runtime helpers shared by every stage.

* :func:`init_ray` connects to a cluster (``--address``, ``RAY_ADDRESS`` under ``ray job submit``) or starts an
  in-process local Ray; it keeps a local Ray on loopback and off token auth (ENVIRONMENT_FACTS §1).
* :func:`map_units` runs a *worker class* over work units either on a pool of Ray actors (fault tolerant: an actor
  that dies is restarted by Ray and its unit resubmitted) or serially in this process (``serial=True``), which is
  what ``ray.init(local_mode=True)`` was for before Ray 2.60 removed it.

A worker class has a constructor taking keyword arguments and a ``process(unit) -> dict`` method. ``process``
must be idempotent (write atomically, then a completion record), because a unit in flight on an actor that dies
is run again.

Every stage ends (issue 13, BR-08 / BR-23 / REL-concurrent-generate-index-corruption):

* a unit that keeps killing its worker is retried ``max_restarts`` times, then becomes an error row;
* a CPU request that no node of the cluster can meet fails at once (:func:`check_cpu_request`), and a pool is
  never larger than the cluster can place (:func:`pool_capacity`), so no unit waits for an actor that cannot start;
* :func:`exclusive_stage` holds the run directory's lock for the whole stage (a second process on the same run
  directory is refused) and refuses a seed other than the one the run was made with.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["init_ray", "map_units", "error_row", "ResourceRequestError", "check_cpu_request",
           "pool_capacity", "exclusive_stage", "check_run_seed", "recorded_seed", "Interruption", "end_process",
           "StageMeter", "unit_counts", "UNIT_KEYS"]

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


def recorded_seed(run) -> int | None:
    """The master seed a run directory was made with (``run.json`` → ``config.seed``), or None for a new run."""
    if not run.exists("run.json"):
        return None
    data = run.read_json("run.json")
    cfg = data.get("config") or {}
    return int(cfg["seed"]) if isinstance(cfg, dict) and cfg.get("seed") is not None else None


def check_run_seed(run, config, check_ids: bool = False) -> None:
    """Refuse a config whose seed differs from the run directory's recorded seed; record it on a new run.

    A run directory holds the outputs of one plan: a stage run with another seed would add units of a second
    plan beside those of the first (REL-render-rerun-without-seed-mixes-derivatives). The job scripts default
    ``--seed`` to the recorded one (:func:`filegram_ray.jobargs.config_from_args`).

    Raises:
        ValueError: the seeds differ (names both and the run directory); with ``check_ids`` (a stage that may
            start a run, on a new one), a profile or task id that the config's sets do not have
            (:func:`~filegram_ray.config.check_sets`), before anything is written. Other stages check ids against
            the run's own outputs.
    """
    seed = recorded_seed(run)
    if seed is None:
        from filegram_ray.config import check_sets
        from filegram_ray.schema.meta import RunManifest

        if check_ids:  # a stage that starts the run: an unknown profile/task id is refused before it is recorded
            check_sets(config)

        data = run.read_json("run.json") if run.exists("run.json") else {}
        man = RunManifest.model_validate(data)
        man.config = config.model_dump(mode="json")
        man.seed = int(config.seed)
        run.write_json("run.json", man.model_dump(mode="json"))
        return
    if seed != int(config.seed):
        raise UserError(f"{run.uri} was made with seed {seed} (run.json) but this run asks for seed {config.seed}: "
                         f"a run directory holds one plan — rerun with --seed {seed}, or use a new --run-dir")


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of a live process from ``/proc`` (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / tick


def _pss_mb(pid: int) -> float:
    """Proportional set size of a process in MiB (shared pages split among their users), RSS where the kernel
    gives no ``smaps_rollup``; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class StageMeter:
    """Wall seconds, CPU seconds and peak memory of a stage: this process and every process below it (a local
    Ray's raylet and workers), sampled every ``interval`` s from ``/proc`` by a background thread.

    ``cpu_s`` sums user+system time of the tree's processes during the stage (a process that ends between two
    samples loses at most ``interval`` s); ``peak_memory_mb`` is the largest sum of the tree's PSS seen in one
    sample; ``driver_peak_memory_mb`` is the largest PSS of the driver process alone (what the driver holds: rows,
    plans, results — the number that must stay flat as a profile set grows). CPU seconds hardly change with a shared machine's load, wall seconds do: on an otherwise idle machine a
    stage takes at least ``cpu_s`` / cores. Connected to a remote cluster only the driver is seen. Linux; elsewhere
    only ``seconds`` is measured.

    Memory is read every ``mem_every``-th sample (and at the first and last): the kernel walks a process's page
    tables for ``smaps_rollup``, ~15 ms per Ray worker — read every second for a dozen workers that was ~20 % of a
    core (measured with py-spy on the encode stage, issue 17); ``/proc/<pid>/stat`` for the CPU is cheap.
    """

    def __init__(self, interval: float = 1.0, mem_every: int = 5):
        self.interval = interval
        self.mem_every = max(1, int(mem_every))
        self._n_samples = 0
        self.seconds = self.cpu_s = self.peak_memory_mb = self.driver_peak_memory_mb = 0.0
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = None
        self._thread = None
        self._ok = os.path.isdir("/proc/self")

    def _tree(self) -> list[int]:
        root = os.getpid()
        kids: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = _proc_stat(int(name))
                if st is not None:
                    kids.setdefault(st[0], []).append(int(name))
        out, todo = [], [root]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(kids.get(p, []))
        return out

    def _sample(self, first: bool = False, last: bool = False) -> None:
        mem = 0.0
        read_mem = first or last or self._n_samples % self.mem_every == 0
        self._n_samples += 1
        for pid in self._tree():
            st = _proc_stat(pid)
            if st is None:
                continue
            if pid not in self._base:
                self._base[pid] = st[1] if first else 0.0
            self._last[pid] = st[1]
            if not read_mem:
                continue
            pss = _pss_mb(pid)
            mem += pss
            if pid == os.getpid():
                self.driver_peak_memory_mb = max(self.driver_peak_memory_mb, pss)
        self.peak_memory_mb = max(self.peak_memory_mb, mem)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - measuring never breaks a stage
                pass

    def __enter__(self) -> StageMeter:
        import threading

        self._t0 = time.perf_counter()
        if self._ok:
            self._sample(first=True)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, name="stage-meter", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._t0
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            try:
                self._sample(last=True)
            except Exception:  # noqa: BLE001
                pass
        self.cpu_s = sum(max(0.0, self._last[p] - self._base.get(p, 0.0)) for p in self._last)

    def record(self) -> dict[str, float]:
        return {"seconds": round(self.seconds, 2), "cpu_s": round(self.cpu_s, 1),
                "peak_memory_mb": round(self.peak_memory_mb, 1),
                "driver_peak_memory_mb": round(self.driver_peak_memory_mb, 1)}


#: the unit counts every stage record carries (issue 17): ``units: {planned, done, skipped, failed}``
UNIT_KEYS = ("planned", "done", "skipped", "failed")


def unit_counts(planned: int, done: int, skipped: int, failed: int) -> dict[str, int]:
    """The ``units`` field of a stage record: units the stage was given (``planned``), finished now (``done``),
    left alone because an earlier run finished them (``skipped``) and ended as error rows (``failed``)."""
    return {"planned": int(planned), "done": int(done), "skipped": int(skipped), "failed": int(failed)}


def _write_stage_fields(run, stage: str, fields: dict[str, Any]) -> None:
    """Merge ``fields`` into ``run.json``'s record of ``stage`` (after the stage wrote its own record)."""
    from filegram_ray.schema.meta import RunManifest

    data = run.read_json("run.json") if run.exists("run.json") else {}
    man = RunManifest.model_validate(data)
    man.stages[stage] = {**(man.stages.get(stage) or {}), **fields}
    run.write_json("run.json", man.model_dump(mode="json"))


def may_start_run(fn, config) -> bool:
    """Whether the stage function ``fn`` (an :func:`exclusive_stage` one) may start a new run directory with
    ``config``: its ``starts_run`` declaration, a bool or a ``config -> bool`` callable (False when undeclared)."""
    starts = getattr(fn, "starts_run", False)
    return bool(starts(config) if callable(starts) else starts)


def refuse_missing_run(config, stage: str, may_start: bool) -> None:
    """Refuse a stage that reads a run's outputs (``may_start`` false) on a local run directory that does not
    exist, before anything (``RunDir``, its lock, ``run.json``) creates it; a file in its place is refused for every
    stage. Remote URIs are not checked.

    Raises:
        NotADirectoryError: ``--run-dir`` names a file. FileNotFoundError: names the directory and the stage.
    """
    path = _local_run_path(config)
    if path is None:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"--run-dir {path} is a file, not a run directory")
    if not may_start and not os.path.isdir(path):
        raise FileNotFoundError(f"run directory {path} does not exist: the {stage} stage reads a run's outputs — "
                                "run the pipeline (or jobs/generate.py) on it first, or pass the --run-dir of an "
                                "existing run")


def exclusive_stage(stage: str, starts_run: bool | Callable[[Any], bool] = False):
    """Decorator for ``run_<stage>(config, ...)``: hold the run directory's lock while the stage runs (a second
    process on the same run directory fails at once with :class:`~filegram_ray.storage.RunDirLockedError`) and
    check the seed (:func:`check_run_seed`). Re-entrant: the pipeline holds the lock across its stages.

    It also writes the stage record every stage shares into ``run.json`` (``stages.<stage>``, merged into the
    stage's own record): ``seconds``, ``cpu_s`` and ``peak_memory_mb`` (:class:`StageMeter`) and ``units``
    (``{planned, done, skipped, failed}``, from the ``units`` key of the stage's result, see :func:`unit_counts`).
    The returned result carries the same fields.

    Args:
        starts_run: whether the stage may start a new run directory (seed, generate; caption given MP4 files of
            its own): a bool or a ``config -> bool`` callable. A stage that may not refuses a missing directory
            (:func:`refuse_missing_run`); one that may checks the config's profile/task ids before the new run's
            ``run.json`` records them (:func:`check_run_seed`).

    Raises:
        FileNotFoundError: a stage that reads a run on a local run directory that does not exist (nothing is
            created).
    """

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(config, *args, **kwargs):
            may_start = may_start_run(wrapper, config)
            refuse_missing_run(config, stage, may_start)
            created = missing_local_dir(config)
            run = config.run()
            new_run = not run.exists("run.json")
            try:
                return _run_stage(fn, stage, run, config, may_start, *args, **kwargs)
            except BaseException:
                if new_run:
                    forget_failed_start(run, created)
                raise

        wrapper.starts_run = starts_run
        return wrapper

    return deco


def _run_stage(fn, stage: str, run, config, may_start: bool, *args, **kwargs):
    """The body of :func:`exclusive_stage`'s wrapper: lock, seed check, stale temporary files swept
    (:meth:`~filegram_ray.storage.RunDir.sweep_temp`: no write is in flight while this process holds the lock, so
    every ``.<name>.tmp-<hex>`` file is an orphan of a killed or failed earlier job), meter, stage record."""
    with run.lock(stage):
        check_run_seed(run, config, check_ids=may_start)
        swept = run.sweep_temp()
        if swept:
            log.info("%s: removed %d temporary file(s) of unfinished writes: %s", stage, len(swept),
                     ", ".join(swept[:5]) + (" …" if len(swept) > 5 else ""))
        with StageMeter() as meter:
            result = fn(config, *args, **kwargs)
        fields = meter.record()
        if isinstance(result, dict):
            units = result.get("units")
            if isinstance(units, dict) and set(UNIT_KEYS) <= set(units):
                fields["units"] = {k: int(units[k]) for k in UNIT_KEYS}
            result.update(fields)
        try:
            _write_stage_fields(run, stage, fields)
        except Exception as exc:  # noqa: BLE001 - the outputs are written; bookkeeping never hides them
            log.warning("%s: could not write the stage record into run.json: %s", stage, exc)
        return result


def _local_run_path(config) -> str | None:
    """The absolute local path of ``config.run_dir`` (``file://`` or a plain path); None for an object store."""
    from filegram_ray.storage import local_run_path

    return local_run_path(config.run_dir)


def missing_local_dir(config) -> bool:
    """Whether ``config.run_dir`` is a local directory that does not exist yet (this job will create it)."""
    path = _local_run_path(config)
    return path is not None and not os.path.isdir(path)


def forget_failed_start(run, created_dir: bool) -> None:
    """After a job that started a run failed before finishing any unit: remove the ``run.json`` it wrote (the seed
    and set it recorded must not pin the directory: a corrected command, another ``--seed`` included, starts it
    afresh) and, when the job created the directory, the lock file and the then empty directory. Nothing is
    removed once a unit is done (``_done/``) or a stage recorded itself: from then on the run holds outputs of
    that plan. Never raises."""
    try:
        if run.listdir("_done"):
            return
        if run.exists("run.json"):
            data = run.read_json("run.json")
            if isinstance(data, dict) and data.get("stages"):
                return
            run.remove("run.json", recursive=False)
        if created_dir and run.is_local:
            lock = os.path.join(run.root, ".lock")
            if os.path.exists(lock):
                os.remove(lock)
            os.rmdir(run.root)  # only when empty: anything else written stays
    except Exception as exc:  # noqa: BLE001 - clean-up never hides the job's own error
        log.debug("could not forget the failed start of %s: %s", run.uri, exc)


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


def error_row(unit_id: str, exc: BaseException, stage: str) -> dict[str, Any]:
    """The row recorded for a unit that failed (:meth:`filegram_ray.stages.base.Row.error`): the batch goes on
    without it."""
    from filegram_ray.stages.base import Row

    return Row.error(unit_id, exc, stage)


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
    from filegram_ray.stages.base import WorkerSpec
    from filegram_ray.stages.executors import ActorPoolExecutor, SerialExecutor

    spec = WorkerSpec(worker_cls, dict(init_kwargs or {}), num_actors=num_actors, num_cpus=num_cpus_per_actor,
                      max_restarts=max_restarts)
    ex = SerialExecutor(progress) if serial else ActorPoolExecutor(progress, actor_restart_timeout_s)
    return ex.map(spec, units, label=stage, on_row=on_result)


def __getattr__(name: str):  # Progress moved to the executors; old imports keep working
    if name == "Progress":
        from filegram_ray.stages.executors import Progress

        return Progress
    raise AttributeError(name)


def iter_ok(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Rows whose status is ``ok``."""
    return (r for r in rows if r.get("status") == "ok")
