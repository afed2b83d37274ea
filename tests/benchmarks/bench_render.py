"""Benchmark of the render stage: files/s per renderer and for the whole stage on a synthetic set; prints an
extrapolation to the paper's ≈2.5 K agent outputs (FILEGRAM_REFERENCE §0) against the goal of ≤ 10 min on 2 cores.

Usage:
    python tests/benchmarks/bench_render.py                 # 40 outputs, serial stage
    python tests/benchmarks/bench_render.py --outputs 80 --ray
    python tests/benchmarks/bench_render.py --skip-stage --plan runs/default   # price a real run's plan (read only)
    python tests/benchmarks/bench_render.py --from-run runs/default --outputs 40   # stage on a sample of real outputs
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the synthetic run fixture

from synthetic_run import synthetic_markdown, write_synthetic_run

from filegram_ray.config import load_config
from filegram_ray.storage import RunDir
from rendering import renderers as R
from rendering.policy import MIX, category_of
from rendering.sections import split_sections
from rendering.stage import INDEX_PATH, TIMINGS_PATH, run_render

PAPER_OUTPUTS = 2500  # ≈2.5 K agent-generated files (ref §0)
GOAL_S = 600.0
RAY_FIXED_S = 30.0  # ours: Ray start + actor pools + piper voice load on an idle 2-core machine (ENVIRONMENT_FACTS §1)


def per_renderer(n_sections: int) -> dict[str, float]:
    """Render ``n_sections`` synthetic sections (half English, half Chinese) with every renderer in this process;
    print files/s (wall and per CPU-second); return CPU-seconds per file by format."""
    rng = random.Random(11)
    secs = []
    while len(secs) < n_sections:
        lang = "zh" if len(secs) % 2 else "en"
        secs.extend(split_sections(synthetic_markdown(rng, lang)).sections)
    secs = secs[:n_sections]
    tts = R.TtsEngine()
    for fmt in R.FORMATS:  # warm-up: imports, fonts, styles (once per actor in the stage)
        try:
            R.build(fmt, secs[0], **({"tts": tts} if fmt == "wav" else {}))
        except R.NotApplicable:
            pass
    print(f"per renderer, {n_sections} synthetic sections each (one process, warm):")
    print(f"{'format':10s} {'files':>6s} {'n/a':>5s} {'wall s':>7s} {'files/s':>8s} {'cpu ms/f':>9s} {'KB/file':>8s}")
    cpu_per_file: dict[str, float] = {}
    for fmt in R.FORMATS:
        ok = na = size = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for s in secs:
            try:
                r = R.build(fmt, s, **({"tts": tts} if fmt == "wav" else {}))
            except R.NotApplicable:
                na += 1
                continue
            ok += 1
            size += len(r.data)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        cpu_per_file[fmt] = cpu / max(ok, 1)
        print(f"{fmt:10s} {ok:6d} {na:5d} {dt:7.2f} {ok / dt if dt else 0:8.1f} {1000 * cpu_per_file[fmt]:9.1f} "
              f"{size / max(ok, 1) / 1e3:8.1f}")
    # CPU work of the full run: the §0 mix of derivatives (12,622 for ≈2.5 K outputs) × CPU-s per file
    fmt_of = {"pdf": ["pdf"], "docx": ["docx"], "markdown": ["md"], "presentation": ["pptx"],
              "image": ["png_page", "png_chart"], "audio": ["wav"], "spreadsheet": ["xlsx"]}
    work = sum(n * sum(cpu_per_file[f] for f in fmt_of[c]) / len(fmt_of[c]) for c, n in MIX.items())
    print(f"CPU work of the §0 mix ({sum(MIX.values())} derivatives): {work:.0f} CPU-s → {work / 2 / 60:.1f} min on "
          f"2 cores if both are busy all along (audio {MIX['audio'] * cpu_per_file['wav'] / work:.0%} of it)")
    return cpu_per_file


def _copy_sample(src_dir: str, run: RunDir, n: int) -> int:
    """Copy every k-th text output of an existing run (read only) into ``run``; returns the source's text-output
    count (the extrapolation target)."""
    from rendering.stage import RenderConfig, _text_outputs

    src = RunDir(src_dir)
    outs, _, _ = _text_outputs(src, RenderConfig())
    step = max(1, len(outs) // n)
    rows = outs[::step][:n]
    for r in rows:
        rel = f"trajectories/{r['profile_id']}/{r['task_id']}/outputs/{r['path']}"
        run.write_bytes(rel, src.read_bytes(rel))
    run.write_table("trajectories/outputs.parquet", rows)
    return len(outs)


def stage(n_outputs: int, use_ray: bool, from_run: str | None = None) -> None:
    """Run the stage on ``n_outputs`` synthetic outputs; print the mix vs ref §0 and two extrapolations to
    :data:`PAPER_OUTPUTS` outputs: from wall time (depends on the machine's load: other jobs share the 2 cores) and,
    in serial mode, from this process's CPU time (planning, rendering, writing, index: the stage's whole work; on
    2 free cores the Ray pools run it two at a time, plus :data:`RAY_FIXED_S` of start-up)."""
    tmp = tempfile.mkdtemp(prefix="bench-render-")
    run = RunDir(tmp)
    target = PAPER_OUTPUTS
    if from_run:
        target = _copy_sample(from_run, run, n_outputs)
        print(f"\nsample: {n_outputs} of the {target} text outputs of {from_run}")
    else:
        write_synthetic_run(run, n_outputs, seed=3)
    cfg = load_config(overrides=[f"run_dir={tmp}"])
    t0, c0 = time.perf_counter(), time.process_time()
    rec = run_render(cfg, executor="actor-pool" if use_ray else "serial")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
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
    load = os.getloadavg()
    t_full = wall / n_outputs * target
    print(f"from wall time: {n / n_outputs * target:.0f} derivatives in {t_full / 60:.1f} min "
          f"({'Ray pools' if use_ray else 'serial = 1 core'}; load average {load[0]:.1f} on 2 cores during the run; "
          f"per-format wall seconds inside workers: " + ", ".join(f"{f}={x:.1f}" for f, x in sorted(_secs(run.read_table(TIMINGS_PATH)).items()))
          + ")")
    if not use_ray:
        t_cpu = cpu / n_outputs * target / 2 + RAY_FIXED_S
        print(f"from CPU time: {cpu:.1f} CPU-s for {n_outputs} outputs ({cpu / max(n, 1) * 1000:.0f} CPU-ms per "
              f"derivative) → {t_cpu / 60:.1f} min for {target} outputs on 2 free cores "
              f"({'within' if t_cpu <= GOAL_S else 'OVER'} the 10-min goal)")
    print(f"stage record: derivatives={rec['units']['planned']} files/s={rec['files_per_s']}; run dir {tmp}")


def plan_extrapolation(run_dir: str, cpu_per_file: dict[str, float], seed: int) -> None:
    """Plan (read only: sections + format policy, nothing rendered or written) every text output of an existing
    run directory, then price the plan with the per-renderer CPU-seconds measured above: the stage's CPU work for
    that run's real mix, and its duration on 2 free cores (both busy, plus :data:`RAY_FIXED_S`)."""
    from rendering.stage import RenderConfig, _text_outputs, plan_output

    run = RunDir(run_dir)
    cfg = RenderConfig()
    outs, ignored, _ = _text_outputs(run, cfg)
    c0 = time.process_time()
    fmts = Counter(u["format"] for o in outs for u in plan_output(o, run, cfg, seed))
    plan_cpu = time.process_time() - c0
    n = sum(fmts.values())
    work = plan_cpu + sum(k * cpu_per_file.get(f, 0.0) for f, k in fmts.items())
    cats = Counter()
    for f, k in fmts.items():
        cats[category_of(f)] += k
    print(f"\nplan of {run_dir}: {len(outs)} text outputs ({ignored} other files) → {n} derivatives "
          f"({n / max(len(outs), 1):.2f}/output); planning {plan_cpu:.1f} CPU-s")
    ref_total = sum(MIX.values())
    print(f"{'category':13s} {'planned':>8s} {'share':>6s} {'ref §0':>7s} {'CPU-s':>7s}")
    for cat, ref in MIX.items():
        secs = sum(k * cpu_per_file.get(f, 0.0) for f, k in fmts.items() if category_of(f) == cat)
        print(f"{cat:13s} {cats.get(cat, 0):8d} {cats.get(cat, 0) / max(n, 1):6.1%} {ref / ref_total:7.1%} "
              f"{secs:7.0f}")
    t = work / 2 + RAY_FIXED_S
    print(f"stage CPU work {work:.0f} CPU-s → {t / 60:.1f} min on 2 free cores "
          f"({'within' if t <= GOAL_S else 'OVER'} the 10-min goal)")


def _secs(idx) -> dict[str, float]:
    """Seconds per format from ``derivatives/timings.parquet`` (render times live apart from the byte-stable
    index)."""
    out: dict[str, float] = {}
    for f, s in zip(idx["format"].to_list(), idx["render_s"].to_list()):
        out[f] = out.get(f, 0.0) + float(s or 0.0)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--outputs", type=int, default=40)
    p.add_argument("--sections", type=int, default=12, help="sections per renderer in the per-renderer part")
    p.add_argument("--ray", action="store_true", help="run the stage on Ray instead of serially")
    p.add_argument("--skip-stage", action="store_true", help="per-renderer figures only")
    p.add_argument("--plan", metavar="RUN_DIR", help="also price the format plan of an existing run (read only)")
    p.add_argument("--seed", type=int, default=7, help="pipeline seed for --plan")
    p.add_argument("--from-run", metavar="RUN_DIR", help="stage input: a sample of this run's text outputs (read "
                   "only) instead of synthetic ones; extrapolates to that run's output count")
    args = p.parse_args()
    cpu = per_renderer(args.sections)
    if args.plan:
        plan_extrapolation(args.plan, cpu, args.seed)
    if not args.skip_stage:
        stage(args.outputs, args.ray, args.from_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
