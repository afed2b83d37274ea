"""Calibrate the persona simulator against TIER_TARGETS.md.

Generates (resumably) the selected trajectories into a run dir, then prints
  1. per dimension × tier: mean of that dimension's §7.2/§7.3 features over trajectories whose *effective* tier
     (perturbation applied) is that tier, on the task types where the dimension is strong (TIER_TARGETS §5), and
     the share of trajectories inside the TIER_TARGETS core band;
  2. whole-set totals against the paper (ref §0: 20,028 kept actions / 640, ≈ 2.5 K agent files, event mix);
  3. the rule classifier (TIER_TARGETS J rows, ref §7.6) per profile against the matrix tiers.

Usage:
    python tests/benchmarks/calibrate_simulator.py --run-dir /tmp/cal640               # all 640
    python tests/benchmarks/calibrate_simulator.py --run-dir /tmp/cal --profiles p1 p3 --tasks T-01 T-09
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.config import load_config
from filegram_ray.engine.generate import KEPT_TYPES, run_generate
from filegram_ray.engine.simulator.calibration import (
    BANDS,
    DIM_FEATURES,
    classify_profile,
    flatten,
    procedural,
)

#: Task types where each dimension is strongly expressed (TIER_TARGETS §5 "S" cells).
STRONG = {"A": {"understand", "synthesize"}, "B": {"understand", "synthesize", "create"},
          "C": {"understand", "synthesize", "create", "organize"}, "D": {"iterate", "maintain"},
          "E": None, "F": {"understand", "synthesize", "create"}}
#: Paper per-trajectory means of kept actions (TIER_TARGETS §5 size table, from ref §0).
PAPER = {"file_read": 7.1, "cross_file_reference": 6.4, "context_switch": 6.1, "file_write": 4.7,
         "file_browse": 2.6, "file_edit": 1.65, "dir_create": 1.5, "other": 1.3, "kept": 31.3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profiles", nargs="+")
    ap.add_argument("--tasks", nargs="+")
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--serial", action="store_true")
    args = ap.parse_args(argv)
    cfg = load_config(None, [f"run_dir={args.run_dir}", f"seed={args.seed}"])
    data = cfg.model_dump()
    data.update(profiles=args.profiles, tasks=args.tasks,
                generate={"num_actors": args.num_actors, "executor": "serial" if args.serial else "actor-pool"})
    cfg = type(cfg).model_validate(data)
    run_generate(cfg)

    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    profiles = {p.profile_id: p for p in load_profiles()}
    tasks = {t.task_id: t for t in load_tasks()}
    root = Path(args.run_dir) / "trajectories"
    rows = []
    for meta_p in sorted(root.glob("*/*/meta.json")):
        meta = json.loads(meta_p.read_text())
        if args.profiles and not any(meta["profile_id"].split("_")[0] == p or meta["profile_id"] == p
                                     for p in args.profiles):
            continue
        if args.tasks and meta["task_id"] not in args.tasks:
            continue
        proc = procedural(meta_p.parent)
        prof = profiles[meta["profile_id"]]
        tiers = dict(prof.tiers)
        if meta.get("perturbation"):
            tiers[meta["perturbation"]["dimension"]] = meta["perturbation"]["to"]
        kept = Counter(e["event_type"] for e in json.loads((meta_p.parent / "events.json").read_text()))
        rows.append({"pid": meta["profile_id"], "tid": meta["task_id"], "type": tasks[meta["task_id"]].type,
                     "tiers": tiers, "base": dict(prof.tiers), "proc": proc, "f": flatten(proc), "kept": kept,
                     "raw": meta["event_counts"].get("raw", 0), "perturbed": bool(meta.get("perturbation"))})
    if not rows:
        print("no trajectories found")
        return 1
    print(f"\n== 1. Per dimension × tier (means; [in core band %]); n = {len(rows)} trajectories ==")
    for dim, feats in DIM_FEATURES.items():
        sel = [r for r in rows if STRONG[dim] is None or r["type"] in STRONG[dim]]
        print(f"\n{dim}  ({'all tasks' if STRONG[dim] is None else '/'.join(sorted(STRONG[dim]))})")
        print(f"  {'tier':<5}{'n':>5}  " + "".join(f"{f[:18]:>19}" for f in feats))
        for tier in "LMR":
            tr = [r for r in sel if r["tiers"][dim] == tier]
            if not tr:
                continue
            cells = []
            for f in feats:
                vals = [r["f"].get(f, 0.0) for r in tr]
                m = statistics.fmean(vals)
                band = BANDS.get(dim, {}).get(tier, {}).get(f)
                inb = "" if band is None else f"[{100 * sum(band[0] <= v <= band[1] for v in vals) / len(vals):.0f}%]"
                cells.append(f"{m:>11.2f}{inb:>8}")
            print(f"  {tier:<5}{len(tr):>5}  " + "".join(cells))
        if dim == "E":
            for tier in "LMR":
                tr = [r for r in rows if r["tiers"]["E"] == tier]
                if tr:
                    share = sum(r["f"].get("total_deletes", 0) >= 1 for r in tr) / len(tr)
                    print(f"  E-{tier}: share of trajectories with ≥ 1 delete = {share:.0%}")
    n = len(rows)
    tot = Counter()
    for r in rows:
        tot.update(r["kept"])
    other = sum(tot[t] for t in ("file_search", "file_rename", "file_move", "file_delete", "file_copy"))
    kept = sum(tot.values())
    raw = sum(r["raw"] for r in rows)
    creates = sum(r["f"].get("files_created", 0) for r in rows)
    print(f"\n== 2. Whole set vs paper (per trajectory; paper scaled to {n}) ==")
    print(f"  kept actions   {kept:>7} ({kept / n:.1f}/traj; paper {PAPER['kept']} → {PAPER['kept'] * n:.0f})")
    print(f"  raw events     {raw:>7} (stripped {100 * (1 - kept / max(raw, 1)):.1f} %; paper 74.3 %)")
    print(f"  files created  {creates:>7.0f} ({creates / n:.2f}/traj; paper ≈ 2.5 K / 640 = 3.9)")
    print(f"  {'type':<22}{'ours/traj':>10}{'paper':>8}{'ratio':>8}")
    for t in KEPT_TYPES[:7]:
        print(f"  {t:<22}{tot[t] / n:>10.2f}{PAPER[t]:>8.2f}{tot[t] / n / PAPER[t]:>8.2f}")
    print(f"  {'other (srch/ren/mv/del/cp)':<22}{other / n:>10.2f}{PAPER['other']:>8.2f}{other / n / 1.3:>8.2f}")
    print("\n== 3. Rule classifier (TIER_TARGETS J) per profile vs matrix ==")
    by_p = defaultdict(list)
    for r in rows:
        if not r["perturbed"]:
            by_p[r["pid"]].append(r["proc"])
    hits = Counter()
    total = 0
    for pid in sorted(by_p, key=lambda x: int(x.split("_")[0][1:]) if x.split("_")[0][1:].isdigit() else 0):
        got = classify_profile(by_p[pid])
        want = profiles[pid].tiers
        marks = " ".join(f"{d}:{got[d]}{'' if got[d] == want[d] else '≠' + want[d]}" for d in "ABCDEF")
        ok = sum(got[d] == want[d] for d in "ABCDEF")
        for d in "ABCDEF":
            hits[d] += got[d] == want[d]
        total += 1
        print(f"  {pid:<26} {ok}/6  {marks}")
    print("  recovered per dimension: " + "  ".join(f"{d} {hits[d]}/{total}" for d in "ABCDEF"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
