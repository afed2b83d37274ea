"""Synthetic inputs for the bench tests: 6 profiles × 10 tasks, index, meta.json perturbations, engram fingerprints.

Not collected by pytest (no ``test_`` prefix). All values are invented for tests; tier vectors are chosen so that
five profiles have ≥ 3 neighbours sharing ≥ 3 dimensions and one (s6) has none.
"""

from __future__ import annotations

import random

import polars as pl

DIMS = "ABCDEF"
VECTORS = {
    "s1_anchor": "LLLLLM",
    "s2_flatrewriter": "LLRRLM",
    "s3_visual": "LLLLML",
    "s4_searcher": "MLLLLM",
    "s5_textonly": "LMLLLR",
    "s6_opposite": "RRRRRR",
}
LANG = {"s1_anchor": "Chinese", "s2_flatrewriter": "Chinese", "s3_visual": "English", "s4_searcher": "English",
        "s5_textonly": "English", "s6_opposite": "English"}
ROLE = {"s1_anchor": "Research Analyst", "s2_flatrewriter": "Policy Analyst", "s3_visual": "Landscape Architect",
        "s4_searcher": "Supply Chain Analyst", "s5_textonly": "Data Analyst", "s6_opposite": "Executive Assistant"}
NAME = {"s1_anchor": "Wei Chen", "s2_flatrewriter": "Jing Liu", "s3_visual": "Ming Zhao", "s4_searcher": "Priya Rao",
        "s5_textonly": "Marc Chen", "s6_opposite": "Aisha Jones"}
TASKS = [
    ("T-01", "understand", ["A", "B"], "Summarise an analyst's working notes"),
    ("T-02", "create", ["B", "C", "F"], "Draft meeting minutes and an action tracker"),
    ("T-03", "organize", ["C", "A"], "Sort a cluttered download area"),
    ("T-04", "synthesize", ["A", "B", "F"], "Write a company research report"),
    ("T-05", "iterate", ["D", "B"], "Condense a long report in place"),
    ("T-06", "maintain", ["D", "C", "E"], "Apply update batches to a knowledge base"),
    ("T-07", "organize", ["C", "D", "A"], "Build a registration records system"),
    ("T-08", "create", ["B", "F", "C"], "Assemble a personal portfolio"),
    ("T-09", "iterate", ["D", "A", "E"], "Revise a report after reviewer feedback"),
    ("T-10", "understand", ["A", "E", "B", "F"], "Five-minute triage briefing"),
]
#: two perturbed sessions per profile: (task, dimension) — shift rule L→M, R→M, M→L (reference §5.7)
PERTURB = {"s1_anchor": [("T-06", "C"), ("T-10", "A")], "s2_flatrewriter": [("T-02", "B"), ("T-09", "D")],
           "s3_visual": [("T-04", "F"), ("T-07", "C")], "s4_searcher": [("T-03", "A"), ("T-08", "B")],
           "s5_textonly": [("T-05", "D"), ("T-10", "E")], "s6_opposite": [("T-01", "A"), ("T-02", "F")]}


def _attrs(v: str, pid: str) -> dict[str, str]:
    a, b, c, d, e, f = v
    return {
        "tone": {"L": "professional", "M": "friendly", "R": "casual"}[b],
        "verbosity": {"L": "detailed", "M": "balanced", "R": "concise"}[b],
        "output_detail": {"L": "detailed", "M": "balanced", "R": "concise"}[b],
        "documentation": {"L": "comprehensive", "M": "moderate", "R": "minimal"}[b],
        "output_structure": {"L": "hierarchical", "M": "narrative", "R": "flat_list"}[b],
        "reading_strategy": {"L": "sequential_deep", "M": "targeted_search", "R": "breadth_first"}[a],
        "thoroughness": {"L": "exhaustive", "M": "balanced", "R": "minimal"}[a],
        "organization_style": {"L": "deeply_nested", "M": "by_type", "R": "flat"}[c],
        "naming_convention": {"L": "descriptive_long", "M": "date_prefixed", "R": "short_abbreviation"}[c],
        "directory_style": {"L": "nested_by_topic", "M": "adaptive", "R": "flat"}[c],
        "naming": {"L": "long_descriptive", "M": "date_prefix", "R": "short_abbrev"}[c],
        "edit_strategy": {"L": "incremental_small", "M": "balanced", "R": "bulk_rewrite"}[d],
        "version_strategy": {"L": "keep_history", "M": "archive_old", "R": "overwrite"}[d],
        "error_handling": {"L": "defensive", "M": "balanced", "R": "optimistic"}[d],
        "working_style": {"L": "methodical", "M": "pragmatic", "R": "exploratory"}[e],
        "cross_modal_behavior": {"L": "visual_heavy", "M": "tables_and_references", "R": "text_only"}[f],
    }


def profiles() -> list[dict]:
    return [{"profile_id": pid, "name": NAME[pid], "role": ROLE[pid], "language": LANG[pid],
             "tiers": dict(zip(DIMS, v)), "attributes": _attrs(v, pid)} for pid, v in VECTORS.items()]


def tasks() -> list[dict]:
    return [{"task_id": t, "type": ty, "dimensions": dims, "name_en": title} for t, ty, dims, title in TASKS]


def _shift(tier: str, r: random.Random) -> str:
    return "M" if tier in "LR" else r.choice("LR")


def write_run(run, failed: tuple[str, ...] = ("s6_opposite/T-07",)) -> None:
    """Write trajectories/index.parquet, meta.json of every trajectory and engram fingerprints into ``run``."""
    r = random.Random(1234)
    rows = []
    for pid, v in VECTORS.items():
        pert = dict(PERTURB[pid])
        for task_id, *_ in TASKS:
            tid = f"{pid}/{task_id}"
            p = None
            if task_id in pert:
                dim = pert[task_id]
                frm = v[DIMS.index(dim)]
                p = {"dimension": dim, "from": frm, "to": _shift(frm, r)}
            status = "error" if tid in failed else "ok"
            rows.append({"trajectory_id": tid, "profile_id": pid, "task_id": task_id, "status": status,
                         "n_events_raw": 50, "n_events": 40, "perturbed": p is not None, "error": None})
            run.write_json(f"trajectories/{tid}/meta.json", {
                "trajectory_id": tid, "profile_id": pid, "task_id": task_id, "seed": 1, "perturbation": p})
            fp = [round(r.random() * (3 if v[i // 3 if i < 12 else (4 if i < 14 else 5)] == "L" else 1), 3)
                  for i in range(17)]
            run.write_json(f"engrams/{pid}/{task_id}.json", {"trajectory_id": task_id, "fingerprint": fp})
    run.write_table("trajectories/index.parquet", pl.DataFrame(rows))


#: Perturbation candidates and their active dimensions (reference §5.7 runner TASK_ACTIVE_DIMS).
CANDIDATES = {"T-12": "CDB", "T-16": "ABE", "T-18": "DCE", "T-22": "ABF", "T-24": "ABE", "T-26": "CAF",
              "T-29": "CDA", "T-31": "BCF"}


def write_full_run(run, profiles_list, tasks_list, seed: int = 5, per_profile: int = 5) -> int:
    """Index + meta.json for every profile × task, ``per_profile`` perturbed sessions each (seeded, reference
    §5.7 shape: one dimension, one tier). No fingerprints. Returns the number of perturbed sessions."""
    r = random.Random(seed)
    rows, n_pert = [], 0
    cands = [t for t in CANDIDATES if t in {x.task_id for x in tasks_list}]
    for p in profiles_list:
        chosen = dict.fromkeys(r.sample(cands, min(per_profile, len(cands))))
        for t in tasks_list:
            tid = f"{p.profile_id}/{t.task_id}"
            pert = None
            if t.task_id in chosen:
                dim = r.choice(CANDIDATES[t.task_id])
                pert = {"dimension": dim, "from": p.tiers[dim], "to": _shift(p.tiers[dim], r)}
                n_pert += 1
            rows.append({"trajectory_id": tid, "profile_id": p.profile_id, "task_id": t.task_id, "status": "ok",
                         "perturbed": pert is not None})
            # every trajectory has its folder, as a generated run does (bench leaves out an index row without one)
            run.write_json(f"trajectories/{tid}/meta.json", {"trajectory_id": tid, "perturbation": pert})
    run.write_table("trajectories/index.parquet", pl.DataFrame(rows))
    return n_pert
