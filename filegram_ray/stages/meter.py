"""Measuring a stage: wall seconds, CPU seconds and peak memory of the driver and every process below it
(:class:`StageMeter`), read from ``/proc``. The runner (:func:`filegram_ray.stages.runner.run_stage`) puts the
figures into each stage's record."""

from __future__ import annotations

import os
import time

__all__ = ["StageMeter"]


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
