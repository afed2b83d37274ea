"""Engine throughput: tool calls and raw events per second for a scripted session (prints figures).

Run: python tests/benchmarks/bench_engine.py [N_ROUNDS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from filegram_ray.engine import EngineSession


def main(rounds: int = 50) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle"
        (bundle / "notes").mkdir(parents=True)
        for i in range(20):
            (bundle / "notes" / f"n{i:02d}.md").write_text("".join(f"line {j} of note {i}\n" for j in range(200)))
        t0 = time.perf_counter()
        s = EngineSession(bundle, Path(tmp) / "work", "p1_bench", "T-01", seed=1, start_ms=1.7e12)
        s.start()
        calls = 0
        for r in range(rounds):
            with s.iteration(input_tokens=2000, output_tokens=200):
                s.call("read", file_path=f"notes/n{r % 20:02d}.md", offset=1, limit=100)
                s.call("grep", pattern=f"line {r} ", include="*.md")
                s.call("write", file_path=f"out/r{r}.md", content=f"# Round {r}\n" + "text\n" * 50)
                s.call("edit", file_path=f"out/r{r}.md", old_string=f"# Round {r}", new_string=f"# Round {r} (v2)")
                s.call("bash", command=f"mkdir -p arch/{r} && cp out/r{r}.md arch/{r}/r{r}.md.bak && ls arch")
                calls += 5
        s.finish()
        t1 = time.perf_counter()
        counts = s.write_trajectory(Path(tmp) / "traj")
        t2 = time.perf_counter()
    print(f"tool calls: {calls}, raw events: {counts['n_events_raw']}, kept: {counts['n_events']}")
    print(f"session: {t1 - t0:.2f} s ({calls / (t1 - t0):.0f} calls/s, {counts['n_events_raw'] / (t1 - t0):.0f} "
          f"events/s); write_trajectory: {t2 - t1:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
