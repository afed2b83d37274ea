"""`filegram watch` throughput and lag on real folders (prints figures; not a test).

1. Burst: N files written as fast as Python can (one folder per 500), per content mode (off / redacted / full),
   side by side in one run: events/s sustained from the first write until the last event is fsync'd in the log.
2. Paced: files written at a fixed rate for a few seconds: does the recorder keep up (recorded rate, backlog)?
3. Lag: single changes, one at a time, with the default timings (reference §12: 2 s debounce; ours: 250 ms
   settle after the writer closes the file, 500 ms delete re-check) — time from just before the change to the
   moment its event line is in the session log (polled every 2 ms), per kind of change.

Run: python tests/benchmarks/bench_watch.py [N_BURST]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.observer import Watcher


class LogTail:
    """New complete lines of every session log of a store since the last poll."""

    def __init__(self, store: Path):
        self.store = store
        self.pos: dict[Path, int] = {}

    def poll(self) -> list[dict]:
        out = []
        for p in sorted(self.store.glob("sessions/*/events.jsonl")):
            with open(p, "rb") as fh:
                fh.seek(self.pos.get(p, 0))
                data = fh.read()
            end = data.rfind(b"\n") + 1
            self.pos[p] = self.pos.get(p, 0) + end
            out += [json.loads(x) for x in data[:end].splitlines() if x.strip()]
        return out


def burst(n: int, content: str) -> dict:
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        cfg = WatchConfig(content=content)
        w = Watcher(Path(tmp) / "store", [str(root)], cfg, status_every_s=0).start()
        tail = LogTail(Path(tmp) / "store")
        try:
            t0 = time.perf_counter()
            for d in range((n + 499) // 500):
                (root / f"d{d}").mkdir()
            for i in range(n):
                (root / f"d{i // 500}" / f"file{i:05d}.md").write_text(
                    f"# Note {i}\n\nContact me at user{i}@example.com or +1 415 555 {1000 + i % 9000:04d}.\n"
                    + "Some prose about the project plan and its next steps.\n" * 5)
            t_written = time.perf_counter()
            got = 0
            while got < n:
                got += sum(1 for e in tail.poll() if e.get("event_type") == "file_write")
                time.sleep(0.01)
            t_done = time.perf_counter()
        finally:
            w.stop()
        return {"content": content, "files": n, "write_s": t_written - t0, "total_s": t_done - t0,
                "events_per_s": n / (t_done - t0), "raw_events": w.recorder.stats["raw_events"]}


def paced(rate: float, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        w = Watcher(Path(tmp) / "store", [str(root)], WatchConfig(content="redacted"), status_every_s=0).start()
        tail = LogTail(Path(tmp) / "store")
        n = int(rate * seconds)
        got, backlog = 0, 0
        try:
            t0 = time.perf_counter()
            for i in range(n):
                due = t0 + i / rate
                while time.perf_counter() < due:
                    time.sleep(0.0005)
                (root / f"f{i:05d}.txt").write_text(f"entry {i}\n")
                if i % 50 == 0:
                    got += sum(1 for e in tail.poll() if e.get("event_type") == "file_write")
                    backlog = max(backlog, i + 1 - got)
            while got < n:
                got += sum(1 for e in tail.poll() if e.get("event_type") == "file_write")
                time.sleep(0.01)
            t1 = time.perf_counter()
        finally:
            w.stop()
        return {"target_per_s": rate, "files": n, "recorded_per_s": n / (t1 - t0), "max_backlog": backlog,
                "drain_after_last_write_s": t1 - (t0 + (n - 1) / rate)}


def lag(repeats: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        w = Watcher(Path(tmp) / "store", [str(root)], WatchConfig(content="redacted"), status_every_s=0).start()
        tail = LogTail(Path(tmp) / "store")
        out: dict[str, list[float]] = {}

        def timed(kind: str, action, match) -> None:
            tail.poll()
            t0 = time.perf_counter()
            action()
            while True:
                if any(match(e) for e in tail.poll()):
                    out.setdefault(kind, []).append((time.perf_counter() - t0) * 1000.0)
                    return
                if time.perf_counter() - t0 > 30:
                    raise TimeoutError(kind)
                time.sleep(0.002)

        try:
            for i in range(repeats):
                f = root / f"n{i}.md"
                timed("create (write+close)", lambda f=f: f.write_text("# n\n"),
                      lambda e, f=f: e.get("event_type") == "file_write" and e["file_path"].endswith(f.name))

                def append(f=f):
                    with open(f, "a") as fh:
                        fh.write("more\n")
                timed("edit (append, close)", append,
                      lambda e: e.get("event_type") == "file_edit")

                def keep_open(f=f):  # a writer that keeps the file open: the full debounce applies
                    fh = open(f, "a")  # noqa: SIM115
                    fh.write("streamed\n")
                    fh.flush()
                    keep_open.fh = fh
                timed("edit (writer keeps it open)", keep_open, lambda e: e.get("event_type") == "file_edit")
                keep_open.fh.close()
                w.sync()

                def atomic(f=f):
                    tmpf = f.with_name(f".{f.name}.tmp")
                    tmpf.write_text("# n\nsaved atomically\n")
                    os.replace(tmpf, f)
                timed("atomic save", atomic, lambda e: e.get("event_type") == "file_edit")
                g = root / f"renamed{i}.md"
                timed("rename", lambda f=f, g=g: os.rename(f, g), lambda e: e.get("event_type") == "file_rename")
                timed("read", lambda g=g: g.read_text(), lambda e: e.get("event_type") == "file_read")
                timed("delete", lambda g=g: g.unlink(), lambda e: e.get("event_type") == "file_delete")
        finally:
            w.stop()
        return out


def main(n: int = 2000) -> None:
    print(f"burst of {n} files (first write → last event fsync'd in the log), side by side:")
    for content in ("off", "redacted", "full"):
        r = burst(n, content)
        print(f"  content={r['content']:<9} {r['events_per_s']:7.0f} events/s sustained "
              f"({r['total_s']:.2f} s total, writing took {r['write_s']:.2f} s, {r['raw_events']} inotify events)")
    for rate in (100.0, 400.0):
        r = paced(rate, 5.0)
        print(f"paced {r['target_per_s']:.0f} files/s for 5 s: recorded {r['recorded_per_s']:.0f}/s, max backlog "
              f"{r['max_backlog']} files, all recorded {r['drain_after_last_write_s']:.2f} s after the last write")
    print("lag from change to recorded event (default timings: debounce 2 s, settle 250 ms, delete re-check 500 ms)")
    for kind, xs in lag(5).items():
        print(f"  {kind:<30} median {statistics.median(xs):7.0f} ms   max {max(xs):7.0f} ms   (n={len(xs)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
