"""Ingest seconds and memory tokens of every memory method, next to the paper's In./Out. (reference §8.4, Table 3).

For each profile of a run, every method ingests that profile's trajectories (the paper's per-profile memory, the
context of ProfRec/AttrRec items) and answers a few fixed queries; the table prints, per method, the mean ingest
seconds per profile, the mean stored memory tokens (In.) and retrieved context tokens per query (Out.), both
``len(text)//4`` as in the evaluate stage, beside the paper's figures. All methods run in one process, one after
the other, on the same views (ratios side by side; this machine is shared and noisy). Nothing is asserted.

A run directory without trajectories gets a small one first (seed + generate for ``--profiles`` × ``--tasks``).
The full run: ``python jobs/pipeline.py`` then ``--run-dir runs/default``.

``--from-run RUN`` reads an evaluated run instead (nothing is ingested): per method, the ingest seconds of the
evaluate stage's own units (``_done/evaluate`` records: units ingested, seconds per ingest; the views a
:class:`~filegram_ray.evaluate.stage.SpecWorker` builds once per spec for all methods are not in them, their total is
printed apart when run.json has it), and the memory tokens of ``results/results.parquet`` — In. = the mean
``tokens_in_memory`` of the items whose context is a profile's 32 sessions (``all_trajectories``, the paper's
per-profile memory) and over all items, Out. = the mean ``tokens_out`` per item; both ``len(text)//4`` for every
method (:class:`~filegram_ray.methods.base.Context`).

Usage:
    python tests/benchmarks/bench_methods.py [--run-dir RUN] [--profiles p1_methodical p8_minimal_editor]
        [--tasks T-01 T-02 …] [--methods mma visrag …] [--backbone-url URL --backbone-model M]
    python tests/benchmarks/bench_methods.py --from-run runs/default
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config  # noqa: E402

#: Paper Table 3 (reference §8.4): In. (stored tokens per profile) and Out. (context tokens per query).
PAPER = {"no_context": ("–", "–"), "full_context": ("625.2K", "45.9K"), "naive_rag": ("625.2K", "3.9K"),
         "eager_summarization": ("625.2K", "3.7K"), "visrag": ("609.8K", "10.0K"), "mem0": ("119.9K", "3.0K"),
         "zep": ("219.1K", "3.8K"), "memos": ("302.3K", "4.2K"), "simplemem": ("9.3K", "3.5K"),
         "evermemos": ("1098.9K", "8.4K"), "memu": ("293.6K", "7.9K"), "mma": ("331.8K", "4.5K"),
         "filegramos": ("109.7K", "4.3K")}
QUERIES = ("How does this user organise the folders they create?",
           "Does this user put tables or images in their documents?",
           "How does this user read and search the source files before writing?")
DEFAULT_TASKS = ["T-01", "T-02", "T-03", "T-04", "T-05", "T-06"]


def _k(x: float) -> str:
    return f"{x / 1000:.1f}K" if x >= 1000 else f"{x:.0f}"


def from_run(run_dir: str, methods: list[str] | None = None) -> int:
    """Print the per-method table of an evaluated run (see the module docstring); returns 0."""
    import json
    import os

    import polars as pl

    from filegram_ray.evaluate.stage import load_items
    from filegram_ray.storage import RunDir

    if "://" not in run_dir and not os.path.isfile(os.path.join(run_dir, "results", "results.parquet")):
        print(f"bench_methods: {run_dir} has no results/results.parquet (not an evaluated run directory: run "
              "`python jobs/pipeline.py --run-dir DIR` or `python jobs/evaluate.py --run-dir DIR` first)",
              file=sys.stderr)
        return 2
    run = RunDir(run_dir)
    res = run.read_table("results/results.parquet")
    kind = {it["question_id"]: str((it.get("context") or {}).get("kind")) for it in load_items(run)}
    res = res.with_columns(pl.col("question_id").replace_strict(kind, default="").alias("kind"))
    times: dict[str, list[dict]] = {}
    for rec in run.done_records("evaluate"):
        unit = str(rec.get("unit", ""))
        if unit.count("/") >= 2:
            times.setdefault(unit.split("/")[1], []).append(rec)
    names = methods or [m for m in res["method"].unique(maintain_order=True).to_list()
                        if m not in ("oracle", "random")]
    try:
        ev = json.loads(run.read_text("run.json"))["stages"]["evaluate"]
        views_s, seconds = ev.get("views_s"), ev.get("seconds")
    except Exception:  # noqa: BLE001 - an older run.json: the table goes without the stage figures
        views_s = seconds = None
    print(f"bench_methods --from-run {run_dir}: {res['question_id'].n_unique()} items, "
          f"{sum(len(v) for v in times.values())} unit records; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (now)")
    print(f"\n{'method':<26}{'units':>6}{'ingests':>8}{'ingest s':>9}{'s/ingest':>9}{'retr s':>7}"
          f"{'In. 32-sess':>12}{'In. all':>9}{'Out.':>8}{'In. paper':>10}{'Out. paper':>11}")
    for m in sorted(names, key=lambda n: (list(PAPER).index(n) if n in PAPER else len(PAPER), n)):
        r = res.filter((pl.col("method") == m) & (pl.col("status") == "ok"))
        recs = times.get(m, [])
        ing = [float(x.get("ingest_s") or 0.0) for x in recs if not x.get("cached_state")]
        retr = sum(float(x.get("retrieve_s") or 0.0) for x in recs)
        full = r.filter(pl.col("kind") == "all_trajectories")
        tin32 = full["tokens_in_memory"].mean() if full.height else None
        tin = r["tokens_in_memory"].mean() if r.height else None
        tout = r["tokens_out"].mean() if r.height else None
        pin, pout = PAPER.get(m, ("", ""))
        print(f"{m:<26}{len(recs):>6}{len(ing):>8}{sum(ing):>9.1f}{(sum(ing) / len(ing) if ing else 0):>9.2f}"
              f"{retr:>7.1f}{(_k(tin32) if tin32 is not None else '-'):>12}{(_k(tin) if tin is not None else '-'):>9}"
              f"{(_k(tout) if tout is not None else '-'):>8}{pin:>10}{pout:>11}")
    if views_s is not None:
        print(f"\nviews built once per context spec for all methods: {views_s:.1f} s; evaluate stage: {seconds} s")
    print("ingest s: the method's own ingest (FileGramOS ablations reuse FileGramOS's state: 0 ingests); "
          "In./Out.: len(text)//4 tokens, In. paper per profile (32 sessions)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--profiles", nargs="+", default=None,
                    help="profiles of a new run (default: p1_methodical p8_minimal_editor)")
    ap.add_argument("--tasks", nargs="+", default=None, help="tasks of a new run (default: %s)" % " ".join(DEFAULT_TASKS))
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--backbone-url", default=None)
    ap.add_argument("--backbone-model", default="local")
    ap.add_argument("--from-run", default=None, help="an evaluated run: print its evaluate figures, ingest nothing")
    args = ap.parse_args(argv)
    if args.from_run:
        return from_run(args.from_run, args.methods)

    from filegram_ray.methods import build_views, make_method, method_names
    from filegram_ray.methods.embed import default_embedder, run_cache_dir

    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fg-bench-methods-")
    cfg = load_config(None, [f"run_dir={run_dir}", "workspace.tts=tone"])
    run = cfg.run()
    given = [f"--{k}" for k in ("profiles", "tasks") if getattr(args, k) is not None]
    if run.exists("trajectories/index.parquet") and given:
        # an existing run is measured as it is: its trajectories decide the set, not --profiles/--tasks
        ap.error(f"{' and '.join(given)} pick the trajectories of a new run; {run_dir} already has trajectories "
                 "(measured as they are) — drop them or pass a new --run-dir")
    if not run.exists("trajectories/index.parquet"):
        from filegram_ray.pipeline import run_pipeline

        args.profiles = args.profiles or ["p1_methodical", "p8_minimal_editor"]
        args.tasks = args.tasks or list(DEFAULT_TASKS)
        cfg = load_config(None, [f"run_dir={run_dir}", "workspace.tts=tone", f"profiles={args.profiles}",
                                 f"tasks={args.tasks}"])
        print(f"bench_methods: generating {len(args.profiles)}×{len(args.tasks)} trajectories into {run_dir}")
        run_pipeline(cfg, only=["seed", "generate"], executor="serial")
    index = run.read_table("trajectories/index.parquet")
    ok = index.filter(index["status"] == "ok") if "status" in index.columns else index
    tid_col = "trajectory_id" if "trajectory_id" in ok.columns else ok.columns[0]
    by_profile: dict[str, list[str]] = {}
    for tid in sorted(ok[tid_col].to_list()):
        by_profile.setdefault(tid.split("/")[0], []).append(tid)
    llm_fn = None
    if args.backbone_url:
        from filegram_ray.llm import make_backbone

        llm_fn = make_backbone({"kind": "openai", "base_url": args.backbone_url, "model": args.backbone_model}).complete
    embedder = default_embedder(run_cache_dir(run))
    names = args.methods or [n for n in method_names() if n in PAPER]
    specs = {p: build_views(run, {"kind": "all_trajectories", "trajectories": t}) for p, t in by_profile.items()}
    n_traj = sum(len(t) for t in by_profile.values())
    print(f"bench_methods: {len(specs)} profiles, {n_traj} trajectories, "
          f"{sum(len(v.events) for vs in specs.values() for v in vs)} events; backbone: "
          f"{'LLM ' + args.backbone_url if llm_fn else 'none (rule fallbacks)'}")
    rows = []
    for name in names:
        m = make_method(name, llm_fn=llm_fn, embedder=embedder)
        secs, tin, tout, err = [], [], [], ""
        try:
            for views in specs.values():
                t0 = time.perf_counter()
                state = m.ingest(views)
                secs.append(time.perf_counter() - t0)
                ctxs = [m.retrieve(state, q) for q in QUERIES]
                tin.append(ctxs[0].tokens_in_memory)
                tout.extend(c.tokens_out for c in ctxs)
        except Exception as exc:  # noqa: BLE001 - a benchmark row reports the failure and goes on
            err = f"{type(exc).__name__}: {exc}"[:80]
        rows.append((name, secs, tin, tout, err, getattr(m, "mode", lambda llm: "")(llm_fn is not None)))
    print(f"\n{'method':<26}{'ingest s/profile':>17}{'In. (ours)':>12}{'Out. (ours)':>12}{'In. paper':>11}"
          f"{'Out. paper':>11}  mode")
    for name, secs, tin, tout, err, mode in rows:
        if err:
            print(f"{name:<26}  failed: {err}")
            continue
        pin, pout = PAPER.get(name, ("", ""))
        print(f"{name:<26}{sum(secs) / len(secs):>17.2f}{_k(sum(tin) / len(tin)):>12}{_k(sum(tout) / len(tout)):>12}"
              f"{pin:>11}{pout:>11}  {mode}")
    print(f"\nIn. here is per profile over {n_traj // max(1, len(specs))} trajectories (paper: 32 per profile); "
          "scale by 32/n to compare.")
    print(f"run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
