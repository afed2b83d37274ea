"""Validity of FileGramOS memory on an encoded run (beyond the paper). An evaluation script: it reads meta.json and
the profile tiers (ground truth), which memory code never does.

    python tests/benchmarks/validity_memory.py RUN_DIR [--profiles-dir conf/profiles]

Prints:
1. leave-profiles-out tier recovery per dimension A–F: a scikit-learn classifier (standardised log1p fingerprints →
   logistic regression) trained on the trajectories of the other profiles (GroupKFold by profile), scored per
   trajectory and per profile (majority vote); and the accuracy of the store's own rule classification;
2. precision / recall of the τ = 1.5 deviation flags against the perturbed trajectories (meta.json
   ``perturbation``), plus how often the top shifted dimension names the perturbed one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

DIMS = "ABCDEF"
ATTR_OF = {"A": "reading_strategy", "B": "output_detail", "C": "directory_style", "D": "edit_strategy",
           "E": "working_style", "F": "cross_modal_behavior"}


def main(argv=None) -> int:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from filegram_ray.memory.stage import load_engram, load_store
    from filegram_ray.paths import profiles_dir
    from filegram_ray.profiles import load_profile
    from filegram_ray.storage import RunDir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--profiles-dir", default=None)
    args = ap.parse_args(argv)
    run = RunDir(args.run_dir)
    pdir = Path(args.profiles_dir) if args.profiles_dir else profiles_dir()
    idx = run.read_table("engrams/index.parquet").to_dicts()
    if not idx:
        print("no engrams in", args.run_dir)
        return 1
    tiers = {}
    for pid in sorted({r["profile_id"] for r in idx}):
        path = pdir / f"{pid}.yaml"
        tiers[pid] = load_profile(path).tiers if path.exists() else None
    rows = []
    for r in idx:
        meta = run.read_json(f"trajectories/{r['profile_id']}/{r['task_id']}/meta.json")
        eng = load_engram(run, r["profile_id"], r["task_id"])
        rows.append((r["profile_id"], r["trajectory_id"], np.asarray(eng.fingerprint), meta.get("perturbation")))
    print(f"run {args.run_dir}: {len(rows)} trajectories, {len(tiers)} profiles")

    # 1. tier recovery (unperturbed trajectories of profiles with known tiers)
    base = [r for r in rows if r[3] is None and tiers.get(r[0])]
    groups = np.asarray([r[0] for r in base])
    X = np.log1p(np.maximum(np.stack([r[2] for r in base]), 0)) if base else np.zeros((0, 17))
    n_prof = len(set(groups.tolist()))
    print("\n1. leave-profiles-out tier recovery (trajectory acc / profile acc / store rule-classifier acc)")
    stores = {p: load_store(run, p) for p in tiers if run.exists(f"memory/{p}/store.json")}
    for d in DIMS:
        y = np.asarray([tiers[g][d] for g in groups])
        rule = [next((c["tier"] for c in s.dimension_classifications if c["attribute"] == ATTR_OF[d]), "?")
                == tiers[p][d] for p, s in stores.items() if tiers.get(p)]
        rule_acc = f"{np.mean(rule):.2f}" if rule else "n/a"
        if n_prof < 3 or len(set(y.tolist())) < 2:
            print(f"  {d}: too few profiles/tiers for a held-out split; rule classifier {rule_acc}")
            continue
        pred = np.empty_like(y)
        for tr, te in GroupKFold(n_splits=min(5, n_prof)).split(X, y, groups):
            if len(set(y[tr].tolist())) < 2:
                pred[te] = y[tr][0]
                continue
            clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
            pred[te] = clf.fit(X[tr], y[tr]).predict(X[te])
        traj_acc = float(np.mean(pred == y))
        votes = {}
        for g, p in zip(groups, pred, strict=True):
            votes.setdefault(g, Counter())[p] += 1
        prof_acc = np.mean([votes[g].most_common(1)[0][0] == tiers[g][d] for g in votes])
        print(f"  {d}: {traj_acc:.2f} / {prof_acc:.2f} / {rule_acc}   (chance ≈ {max(Counter(y).values()) / len(y):.2f})")

    # 2. τ-flags vs perturbations
    tp = fp = fn = loc_hit = 0
    for p, s in stores.items():
        pert = {r[1]: r[3] for r in rows if r[0] == p}
        for tid, flagged in s.deviation_flags.items():
            truth = pert.get(tid) is not None
            tp += flagged and truth
            fp += flagged and not truth
            fn += (not flagged) and truth
            if flagged and truth:
                det = s.deviation_details.get(tid) or [{}]
                loc_hit += str(det[0].get("dimension", "")).startswith(str(pert[tid].get("dimension", "?")))
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    print(f"\n2. τ-flags: TP={tp} FP={fp} FN={fn} precision={prec:.2f} recall={rec:.2f}; "
          f"top shifted dimension = perturbed dimension in {loc_hit}/{tp} true positives")
    print(json.dumps({"tp": tp, "fp": fp, "fn": fn}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
