"""Benchmark of the render stage: files/s per renderer and for the whole stage on a synthetic set; prints an
extrapolation to the paper's ≈2.5 K agent outputs (FILEGRAM_REFERENCE §0) against the goal of ≤ 10 min on 2 cores.

Usage:
    python tests/benchmarks/bench_render.py                 # 40 outputs, serial stage
    python tests/benchmarks/bench_render.py --outputs 80 --ray
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config
from filegram_ray.storage import RunDir
from rendering import renderers as R
from rendering.policy import MIX, category_of
from rendering.sections import split_sections
from rendering.stage import INDEX_PATH, run_render
from rendering.synthetic import synthetic_markdown, write_synthetic_run

PAPER_OUTPUTS = 2500  # ≈2.5 K agent-generated files (ref §0)
GOAL_S = 600.0


def per_renderer(n_sections: int) -> None:
    rng = random.Random(11)
    secs = []
    while len(secs) < n_sections:
        lang = "zh" if len(secs) % 2 else "en"
        secs.extend(split_sections(synthetic_markdown(rng, lang)).sections)
    secs = secs[:n_sections]
    tts = R.TtsEngine()
    print(f"per renderer, {n_sections} synthetic sections each (one process):")
    print(f"{'format':10s} {'files':>6s} {'n/a':>5s} {'s':>7s} {'files/s':>8s} {'KB/file':>8s}")
    for fmt in R.FORMATS:
        ok = na = size = 0
        t0 = time.perf_counter()
        for s in secs:
            try:
                r = R.build(fmt, s, **({"tts": tts} if fmt == "wav" else {}))
            except R.NotApplicable:
                na += 1
                continue
            ok += 1
            size += len(r.data)
        dt = time.perf_counter() - t0
        print(f"{fmt:10s} {ok:6d} {na:5d} {dt:7.2f} {ok / dt if dt else 0:8.1f} {size / max(ok, 1) / 1e3:8.1f}")


def stage(n_outputs: int, use_ray: bool) -> None:
    tmp = tempfile.mkdtemp(prefix="bench-render-")
    run = RunDir(tmp)
    write_synthetic_run(run, n_outputs, seed=3)
    cfg = load_config(overrides=[f"run_dir={tmp}"])
    t0 = time.perf_counter()
    rec = run_render(cfg, serial=not use_ray, progress=False)
    wall = time.perf_counter() - t0
    idx = run.read_table(INDEX_PATH)
    ok = idx.filter(idx["status"] == "ok")
    n = ok.height
    cats = Counter(category_of(f) for f in ok["format"].to_list())
    ref_total = sum(MIX.values())
    print(f"\nstage ({'Ray' if use_ray else 'serial'}): {n_outputs} outputs → {n} derivatives "
          f"({n / n_outputs:.2f}/output), {ok['bytes'].sum() / 1e6:.1f} MB, wall {wall:.1f} s, {n / wall:.2f} files/s")
    print(f"{'category':13s} {'ours':>6s} {'share':>6s} {'ref §0':>7s}")
    for cat, ref in MIX.items():
        print(f"{cat:13s} {cats.get(cat, 0):6d} {cats.get(cat, 0) / max(n, 1):6.1%} {ref / ref_total:7.1%}")
    t_full = wall / n_outputs * PAPER_OUTPUTS
    print(f"extrapolated to {PAPER_OUTPUTS} outputs: {n / n_outputs * PAPER_OUTPUTS:.0f} derivatives in "
          f"{t_full / 60:.1f} min ({'within' if t_full <= GOAL_S else 'OVER'} the 10-min goal; "
          f"{'2 Ray actors pools' if use_ray else 'serial = 1 core'}; per-format seconds: "
          + ", ".join(f"{f}={s:.1f}" for f, s in sorted(_secs(idx).items())) + ")")
    print(f"machine load average during the run (1/5/15 min, 2 cores): {os.getloadavg()}")
    print(f"stage record: units_planned={rec['units_planned']} files/s={rec['files_per_s']}; run dir {tmp}")


def _secs(idx) -> dict[str, float]:
    out: dict[str, float] = {}
    for f, s in zip(idx["format"].to_list(), idx["render_s"].to_list()):
        out[f] = out.get(f, 0.0) + float(s or 0.0)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--outputs", type=int, default=40)
    p.add_argument("--sections", type=int, default=12, help="sections per renderer in the per-renderer part")
    p.add_argument("--ray", action="store_true", help="run the stage on Ray instead of serially")
    args = p.parse_args()
    per_renderer(args.sections)
    stage(args.outputs, args.ray)
    return 0


if __name__ == "__main__":
    sys.exit(main())
