"""Issue #53 on generated runs: does the simulated person do the task, write from what it read, and leave nothing of
the tools in its files — before and after, every issue #28 figure beside.

Takes pairs of runs made by ``bench_validity.py`` (or ``filegram pipeline --only seed generate``), each pair two
independently generated sets scored with each other as the cross-set (``filegram validity RUN --cross RUN2``), and
writes a dated measurement page:

* the issue's figures per set: task outcomes reached, output sentences that are an input's sentence verbatim and
  that carry a fact read, files holding a tool marker, silent overwrites, operations per instant, deletes at one
  instant, inspected before change, one count reading the acting tier (A searches, C folder depth, and B / D / E / F);
* every bounded issue #28 check with PASS / FAIL, and how many trajectories get the original FileGramOS code's
  fingerprint (:func:`fingerprint_parity`);
* per-task outcome shares, the top-20 repeated 4-grams of the outputs, before and after;
* sessions quoted side by side, before and after: the same profile and task of a "before" run and an "after" run
  made from the same profile set and seed (the actions in order and the first lines of the main output).

    python tests/benchmarks/bench_behaviour.py --before B1 B2 --after A1 A2 [--fresh F1 F2] --page PAGE

``--before`` / ``--after`` are runs of the same two profile sets (the old and the new simulator); ``--fresh`` two
more sets of the new simulator made with seeds never looked at while the change was made (the done-criterion sets).
A run's ``results/validity.json`` is reused when it is newer than its trajectory index (``--recompute`` forces a new
one). Errors: a missing run is one line, exit 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_validity import session_actions  # noqa: E402  (this folder is the script's: on sys.path)

from filegram_ray.validity.realism import check_lines  # noqa: E402
from filegram_ray.validity.report import run_validity  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: The sessions quoted before / after (profile index in the set, task): a content task, the empty-workspace
#: paperwork, corrections, batches, a cleanup, a review (issue #53's examples).
QUOTED = [(0, "T-01"), (1, "T-04"), (2, "T-11"), (3, "T-18"), (4, "T-21"), (5, "T-13")]
ISSUE53 = [("task outcomes reached", "task outcomes reached (≥ 0.95)"),
           ("output sentences that are an input's sentence verbatim", "verbatim sentences (≤ 0.20)"),
           ("motivation: output sentences with a fact from an input read", "sentences with a fact read (≥ 0.80)"),
           ("files holding a tool's marker", "files with a tool marker (= 0)"),
           ("moves or renames onto an existing file", "silent overwrites (= 0)"),
           ("sessions with more than", "sessions with > 3 operations at one instant (= 0)"),
           ("sessions whose deletes all share one instant", "sessions with all deletes at one instant (= 0)"),
           ("motivation: deletes/moves/renames after an inspection", "inspected before change (≥ 0.90)"),
           ("one count reads the acting tier of a session, A", "one count → acting tier, A searches (≤ 0.75)"),
           ("one count reads the acting tier of a session, C", "one count → acting tier, C depth (≤ 0.75)")]


class BenchError(Exception):
    pass


def _profiles_dir(run: Path) -> str | None:
    rec = json.loads((run / "run.json").read_text()) if (run / "run.json").exists() else {}
    return ((rec.get("stages") or {}).get("generate") or {}).get("profiles_dir") or \
        (rec.get("config") or {}).get("profiles_dir")


def validity(run: Path, other: Path, recompute: bool) -> dict:
    out = run / "results" / "validity.json"
    idx = run / "trajectories" / "index.parquet"
    if not idx.exists():
        raise BenchError(f"{run}: no trajectories/index.parquet (generate the run first)")
    if out.exists() and not recompute and out.stat().st_mtime > idx.stat().st_mtime:
        res = json.loads(out.read_text())
        if res.get("train_run") == str(other) and "outcomes" in (res.get("realism") or {}):
            return res
    t0 = time.perf_counter()
    res = run_validity(str(run), profiles_dir=_profiles_dir(run), train_run=str(other),
                       train_profiles_dir=_profiles_dir(other))
    print(f"validity of {run} (cross {other}) in {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(json.dumps(res, default=str))


def cached(run: Path, name: str, fn, recompute: bool) -> dict:
    """``fn(run)``, kept in ``run/results/<name>.json`` and reused while it is newer than the run's trajectory index
    (unless ``recompute``); written under a temp name, then renamed."""
    out = run / "results" / f"{name}.json"
    idx = run / "trajectories" / "index.parquet"
    if out.exists() and not recompute and out.stat().st_mtime > idx.stat().st_mtime:
        return json.loads(out.read_text())
    res = json.loads(json.dumps(fn(run), default=str))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(res))
    tmp.replace(out)
    return res


def light(run: Path) -> dict:
    """Only what sessions do and write (:func:`~filegram_ray.validity.realism.behaviour_checks`: motivation and task
    outcomes, no tier recovery), for the "before" runs with ``--before-light``; the issue #28 checks shown for such a
    run are those of its own ``results/validity.json`` (measured when the run was made, named on the page)."""
    import pyarrow.parquet as pq

    from filegram_ray.validity.motivation import motivation
    from filegram_ray.validity.outcomes import outcomes
    from filegram_ray.validity.realism import behaviour_checks

    t0 = time.perf_counter()
    rows = pq.read_table(run / "trajectories" / "index.parquet").to_pylist()
    pairs = [(r["profile_id"], r["task_id"]) for r in rows if r.get("status", "ok") == "ok"]
    out = {"motivation": motivation(str(run), pairs), "outcomes": outcomes(str(run), pairs), "acting_counts": {}}
    old_file = run / "results" / "validity.json"
    old = json.loads(old_file.read_text()) if old_file.exists() else {}
    names = {c["name"] for c in behaviour_checks(out)}
    earlier = [c for c in (old.get("realism") or {}).get("checks", []) if c["name"] not in names]
    stamp = dt.datetime.fromtimestamp(old_file.stat().st_mtime, dt.timezone.utc) if old_file.exists() else None
    print(f"motivation and outcomes of {run} in {time.perf_counter() - t0:.0f} s", flush=True)
    return {"n_sessions": len(pairs), "n_profiles": len({p for p, _ in pairs}), "train_run": old.get("train_run"),
            "earlier": f"{stamp:%Y-%m-%d %H:%M} UTC" if stamp else None,
            "realism": {**{k: (old.get("realism") or {}).get(k) for k in ("tau_flags", "flag_reason", "rule_sessions",
                                                                           "memory_answerer")},
                        **out, "checks": earlier + behaviour_checks(out)}}


def fingerprint_parity(run: Path) -> dict:
    """How many of a run's trajectories get the same 17-D fingerprint and procedural features from this code as
    from the original FileGramOS code (``upstream_quirks=True`` reproduces the original on tests/fixtures/fid/):
    the default mode differs from it only where an output triggers one of its documented quirk fixes
    (``memory.features.text_structure``).

    Also, from the same features: the share of (task, acting tier) groups of sessions in which every session has the
    same count — A's searches and C's folder depth (issue #53 found half of C's groups with one value).
    ``{"n", "fingerprint_equal", "features_equal", "examples", "one_value_groups": {dim: share}}``."""
    from filegram_ray.memory.engram import encode_engram, load_events

    n = same_fp = same_feats = 0
    examples: list[str] = []
    values: dict[tuple[str, str, str], set] = {}
    for base in sorted((run / "trajectories").glob("*/*")):
        if not (base / "events.json").exists():
            continue
        ev = load_events(base / "events.json")
        tid = f"{base.parent.name}/{base.name}"
        ours = encode_engram(ev, tid, base.name, base / "media")
        orig = encode_engram(ev, tid, base.name, base / "media", upstream_quirks=True)
        n += 1
        same_fp += ours.fingerprint == orig.fingerprint
        same_feats += ours.procedural == orig.procedural
        if ours.procedural != orig.procedural and len(examples) < 3:
            examples.append(tid)
        meta = json.loads((base / "meta.json").read_text(encoding="utf-8")) if (base / "meta.json").exists() else {}
        acting = meta.get("acting_tiers") or {}
        for d, (attr, key) in (("A", ("reading_strategy", "total_searches")),
                               ("C", ("directory_style", "max_dir_depth"))):
            if acting.get(d):
                values.setdefault((d, base.name, acting[d]), set()).add(ours.procedural.get(attr, {}).get(key))
    one = {d: sum(len(v) == 1 for (dd, _, _), v in values.items() if dd == d)
           / max(1, sum(1 for dd, _, _ in values if dd == d)) for d in "AC"}
    return {"n": n, "fingerprint_equal": same_fp, "features_equal": same_feats, "examples": examples,
            "one_value_groups": one}


def _check(res: dict, start: str) -> dict | None:
    return next((c for c in res["realism"]["checks"] if c["name"].startswith(start)), None)


def _fmt_share(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _fmt(c: dict | None) -> str:
    if c is None:
        return "–"
    v = c["value"]
    mark = "" if c["pass"] is None else (" ✓" if c["pass"] else " **✗**")
    return ("n/a" if v is None else f"{v:.3f}" if isinstance(v, float) and not v.is_integer() else f"{v:g}") + mark


def digest(run: Path, pid: str, tid: str, n_actions: int = 12, n_lines: int = 8) -> list[str]:
    """The actions of one session in order and the first lines of its main (longest created text) output."""
    base = run / "trajectories" / pid / tid
    if not (base / "events.json").exists():
        return ["(no such session)"]
    acts = session_actions(json.loads((base / "events.json").read_text(encoding="utf-8")), hits=False,
                           relative=True)
    out = ["actions: " + "; ".join(acts[:n_actions]) + (f"; … ({len(acts)} in all)" if len(acts) > n_actions else "")]
    raw = json.loads((base / "events_raw.json").read_text(encoding="utf-8"))
    created = {e["file_path"].split("/", 3)[-1] for e in raw if e.get("event_type") == "file_write"
               and e.get("operation") == "create" and str(e.get("file_path", "")).endswith((".md", ".txt"))}
    outs = [p for p in (base / "outputs").rglob("*") if p.is_file() and p.suffix in (".md", ".txt")] \
        if (base / "outputs").exists() else []
    outs = [p for p in outs if any(str(p).endswith(c) for c in created)] or outs
    if outs:
        main = max(outs, key=lambda p: p.stat().st_size)
        lines = [ln for ln in main.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        out.append(f"`{main.relative_to(base / 'outputs')}`:")
        out += [ln[:160] for ln in lines[:n_lines]]
    return out


def page(sets: dict[str, list[tuple[Path, dict]]], commit: str, quoted: list[tuple[str, str]]) -> str:
    now = dt.datetime.now(dt.timezone.utc)
    L = [f"# The simulated person does the task (issue #53): before and after — {now:%Y-%m-%d}", "",
         f"Written by `tests/benchmarks/bench_behaviour.py` at {now:%H:%M} UTC, measuring code of commit {commit}. "
         "Every figure is also printed by `filegram validity RUN --cross RUN2`; definitions: docs/validity.md. "
         "The run directories are named by folder only (`<before>/run-S` …): each set is made with `filegram profiles "
         "new --n N --seed S` and `filegram pipeline --serial --only seed generate`, by the simulator of the label.",
         ""]
    for label, pair in sets.items():
        L.append(f"- **{label}**: " + "; ".join(
            f"`<{label}>/{r.name}` ({res['n_sessions']} sessions, {res['n_profiles']} profiles, cross-set "
            f"`<{label}>/{Path(str(res.get('train_run'))).name}`)" for r, res in pair))
    L += ["", "## The issue's figures", "", "| figure (bound) | " + " | ".join(
        f"{label} {r.name}" for label, pair in sets.items() for r, _ in pair) + " |",
          "|---|" + "---|" * sum(len(p) for p in sets.values())]
    for start, title in ISSUE53:
        L.append(f"| {title} | " + " | ".join(_fmt(_check(res, start)) for pair in sets.values() for _, res in pair)
                 + " |")
    L.append("| fingerprints equal the original code's (= all) | " + " | ".join(
        f"{res['parity']['fingerprint_equal']} / {res['parity']['n']}" for pair in sets.values() for _, res in pair)
             + " |")
    L.append("| every procedural feature equals the original code's (info) | " + " | ".join(
        f"{res['parity']['features_equal']} / {res['parity']['n']}" for pair in sets.values() for _, res in pair)
             + " |")
    L.append("| (task, acting tier) groups where every session has one value, A searches / C depth (info) | "
             + " | ".join(" / ".join(f"{res['parity']['one_value_groups'][d]:.2f}" for d in "AC")
                          for pair in sets.values() for _, res in pair) + " |")
    L.append("| acting-tier one count, B / D / E / F (info) | " + " | ".join(
        " / ".join(_fmt_share(((res["realism"].get("acting_counts") or {}).get(d) or {}).get("accuracy"))
                   for d in "BDEF") for pair in sets.values() for _, res in pair) + " |")
    L += ["", "## Every bounded check of issue #28 (and the above), per set", ""]
    for label, pair in sets.items():
        for r, res in pair:
            fails = [c["name"] for c in res["realism"]["checks"] if c["pass"] is False]
            L += [f"### {label}: `{r.name}` — {'FAIL: ' + '; '.join(fails) if fails else 'every check PASS'}", ""]
            if res.get("earlier"):
                L += [f"Measured here: the checks from “searches that match a file” on. The issue #28 checks above "
                      f"them are the run's own `results/validity.json` of {res['earlier']} (the validity code of "
                      "that time, the same bounds).", ""]
            L += ["```", *[ln.rstrip() for ln in check_lines(res["realism"])], "```", ""]
    L += ["## Task outcomes per task", "", "| task | " + " | ".join(f"{label} {r.name}" for label, pair in
                                                                   sets.items() for r, _ in pair) + " |",
          "|---|" + "---|" * sum(len(p) for p in sets.values())]
    tasks = sorted({t for pair in sets.values() for _, res in pair
                    for t in ((res["realism"].get("outcomes") or {}).get("by_task") or {})})
    for t in tasks:
        cells = []
        for pair in sets.values():
            for _, res in pair:
                v = ((res["realism"].get("outcomes") or {}).get("by_task") or {}).get(t)
                cells.append("–" if not v else f"{v['share']:.2f}" + (
                    f" ({'; '.join(list(v.get('missing') or {})[:1])})" if v.get("missing") else ""))
        L.append(f"| {t} | " + " | ".join(cells) + " |")
    L += ["", "## The 20 most repeated 4-grams of the outputs (files holding each)", ""]
    for label, pair in sets.items():
        r, res = pair[0]
        grams = (res["realism"].get("motivation") or {}).get("top_ngrams") or []
        L += [f"**{label}** (`{r.name}`): " + "; ".join(f"“{g}” {n}" for g, n in grams), ""]
    if quoted and "before" in sets and "after" in sets:
        b_run, a_run = sets["before"][0][0], sets["after"][0][0]
        L += ["## Six sessions, before and after (same profile, task and seed)", ""]
        for pid, tid in quoted:
            L += [f"### `{pid}` {tid}", "", "| before | after |", "|---|---|"]
            b, a = digest(b_run, pid, tid), digest(a_run, pid, tid)
            for i in range(max(len(b), len(a))):
                cell = [(x[i] if i < len(x) else "").replace("|", "\\|") for x in (b, a)]
                L.append(f"| {cell[0]} | {cell[1]} |")
            L.append("")
    return "\n".join(L).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", nargs=2, type=Path, required=True, help="two runs of the old simulator")
    ap.add_argument("--after", nargs=2, type=Path, required=True, help="the same two sets, new simulator")
    ap.add_argument("--fresh", nargs=2, type=Path, default=None, help="two fresh sets of the new simulator")
    ap.add_argument("--page", type=Path, required=True, help="measurement page to write (replaced)")
    ap.add_argument("--recompute", action="store_true", help="recompute validity.json even when it is fresh")
    ap.add_argument("--before-light", action="store_true",
                    help="measure only motivation and task outcomes on the --before runs (their issue #28 checks "
                         "are taken from their own results/validity.json, dated on the page)")
    ap.add_argument("--commit", default=None, help="commit of the measuring code (default: this checkout's HEAD)")
    args = ap.parse_args(argv)
    try:
        groups = {"before": args.before, "after": args.after}
        if args.fresh:
            groups["fresh"] = args.fresh
        sets: dict[str, list[tuple[Path, dict]]] = {}
        for label, (a, b) in groups.items():
            for r in (a, b):
                if not (r / "trajectories").is_dir():
                    raise BenchError(f"{r}: not a run directory with trajectories/")
            if label == "before" and args.before_light:
                sets[label] = [(r, cached(r, "behaviour_light", light, args.recompute)) for r in (a, b)]
            else:
                sets[label] = [(a, validity(a, b, args.recompute)), (b, validity(b, a, args.recompute))]
            for r, res in sets[label]:
                res["parity"] = cached(r, "fingerprint_parity", fingerprint_parity, args.recompute)
        run0 = args.after[0] / "trajectories"
        pids = sorted(p.name for p in run0.iterdir() if p.is_dir())
        quoted = [(pids[i % len(pids)], t) for i, t in QUOTED] if pids else []
        commit = args.commit or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                               capture_output=True, text=True).stdout.strip()
        text = page(sets, commit, quoted)
        args.page.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.page.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.page)
        print(f"wrote {args.page}")
        return 0
    except BenchError as exc:
        print(f"bench_behaviour: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
