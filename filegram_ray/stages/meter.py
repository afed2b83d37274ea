"""Measuring a stage: wall seconds, CPU seconds and peak memory of the driver and every process below it
(:class:`StageMeter`), read from ``/proc``, and — when the driver is connected to Ray — what the Ray cluster's object
stores spilled to disk, restored and created meanwhile (:func:`object_store_totals`). The runner
(:func:`filegram_ray.stages.runner.run_stage`) puts the figures into each stage's record."""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["StageMeter", "object_store_totals"]

#: the object-store counters a stage record carries (``object_store``), from Ray's per-node store statistics
STORE_COUNTERS = {"spilled_mib": "spilled_bytes_total", "spilled_objects": "spilled_objects_total",
                  "restored_mib": "restored_bytes_total", "restored_objects": "restored_objects_total",
                  "created_mib": "cumulative_created_bytes"}


def object_store_totals(timeout_s: float = 10.0) -> dict[str, float] | None:
    """The cluster's object-store counters since each node started, summed over the live nodes (what ``ray memory
    --stats-only`` prints: bytes and objects spilled to disk and restored, bytes created), in MiB and objects;
    None when this process is not connected to Ray or the raylets do not answer within ``timeout_s``. Read with
    Ray's own memory-summary call (``ray._private.internal_api``); a node that died takes its counts with it."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        from ray._private import internal_api

        state = internal_api.get_state_from_address(ray.get_runtime_context().gcs_address)
        stats = internal_api.get_memory_info_reply(state, timeout_seconds=timeout_s).store_stats
        return {k: float(getattr(stats, f)) / (2 ** 20 if k.endswith("_mib") else 1)
                for k, f in STORE_COUNTERS.items()}
    except Exception:  # noqa: BLE001 - measuring never breaks a stage (another Ray version, a node going away)
        return None


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

    On Ray, ``object_store`` holds what the cluster's object stores spilled, restored and created during the stage
    (:func:`object_store_totals` at the start — or when Ray comes up during the stage — and at the end; MiB and
    objects, never below 0: a node lost meanwhile takes its counts with it).

    Memory is read every ``mem_every``-th sample (and at the first and last): the kernel walks a process's page
    tables for ``smaps_rollup``, ~15 ms per Ray worker — read every second for a dozen workers that was ~20 % of a
    core (py-spy on the encode stage, docs/measurements/2026-12-01-speed-and-scale.md); ``/proc/<pid>/stat`` for the
    CPU is cheap.
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
        self._store0: dict[str, float] | None = None
        self.object_store: dict[str, float] | None = None

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
                if self._store0 is None:  # Ray came up inside the stage (a single-stage job connects there)
                    self._store0 = object_store_totals()
                self._sample()
            except Exception:  # noqa: BLE001 - measuring never breaks a stage
                pass

    def __enter__(self) -> StageMeter:
        import threading

        self._t0 = time.perf_counter()
        self._store0 = object_store_totals()
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
        end = object_store_totals() if self._store0 is not None else None
        if end is None and self._store0 is not None:  # answered at the start: a raylet killed just now (its node
            time.sleep(2.0)  # not yet marked dead) fails the summary call once; ask again once it is
            end = object_store_totals()
        if end is not None:
            self.object_store = {k: round(max(0.0, end[k] - self._store0.get(k, 0.0)), 1) for k in end}

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(self.seconds, 2), "cpu_s": round(self.cpu_s, 1),
                               "peak_memory_mb": round(self.peak_memory_mb, 1),
                               "driver_peak_memory_mb": round(self.driver_peak_memory_mb, 1)}
        if self.object_store is not None:
            out["object_store"] = self.object_store
        return out
