"""Behaviour like a person, signal like a distribution — every figure with its bound (docs/validity.md, "The
bounded checks").

:func:`realism` gathers, for the sessions of a run (and optionally a second, independently generated set):

1. single-session separability (:func:`~filegram_ray.validity.separability.separability`), within the set
   (leave-profiles-out) and cross-set, bound ≤ 0.80 per dimension;
2. task × tier η² of the 17 fingerprint features (bound ≤ 0.80) and, for comparison, of :data:`NAMED_COUNTS`;
3. profile-level recovery from all of a profile's sessions (the leave-profiles-out and cross-set classifier of
   :func:`filegram_ray.validity.core.recovery`), bound ≥ 0.90 per dimension;
4. perturbations: no-ops by counterfactual re-simulation (``meta.json`` ``perturbation_check``; bound 0) and
   visibility across sessions (:func:`perturbation_visibility`, bound AUC ≥ :data:`VISIBILITY_AUC`, ours);
5. the count-rule answerer without memory on ShiftAna / AnomDet (bound ≤ chance + 15 points), on the run's bank
   (``bench/items.parquet``) when it has one, else on ShiftAna / AnomDet items built in memory with the bench
   builders and the run's seed;
6. motivation (:mod:`filegram_ray.validity.motivation`): search hits ≥ 0.90, inspected before delete/move/rename
   ≥ 0.90, sourced output sentences ≥ 0.80;
7. τ-flag precision and recall of the memory's own flags (reference §7.4, τ = 1.5), reported without a bound, with
   the measured reason when recall is low (the deviation δ of perturbed vs. unperturbed sessions).

Each bounded figure becomes a row of ``checks``: ``{"name", "value", "bound", "op" (">=" | "<=" | "=="),
"pass"}``; a figure that could not be measured has ``value`` None and ``pass`` None (n/a, with ``note``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import defaultdict
from typing import Any

import numpy as np

from filegram_ray.validity.separability import (
    BOUNDS,
    DIMENSIONS,
    FINGERPRINT_NAMES,
    CountRuleAnswerer,
    MemoryRuleAnswerer,
    rule_session_accuracy,
    rule_tiers,
    score_rule_answerer,
    separability,
    task_tier_eta2,
)

log = logging.getLogger(__name__)

#: Smallest AUC at which a perturbation counts as visible across sessions (ours: a perturbed session must stand out
#: from the same profile's other sessions, on the perturbed dimension, in at least 70 % of the pairs).
VISIBILITY_AUC = 0.70
#: Counts that a simulator writing fixed counts per tier makes a deterministic function of task × tier (η² 1.00:
#: docs/measurements/2026-12-02-validity.md, "before"); reported beside the fingerprint η².
NAMED_COUNTS = ("version_strategy.total_deletes", "cross_modal_behavior.image_files_created",
                "cross_modal_behavior.structured_files_created", "directory_style.files_moved",
                "directory_style.max_dir_depth", "edit_strategy.avg_lines_changed",
                "reading_strategy.searches_and_browses")


#: Share of output sentences that may be an input's sentence word for word (ours: outputs are written, not pasted).
VERBATIM_BOUND = 0.20
#: Most a single count may read the tier a session acted in (ours: A's searches and C's folder depth vary within
#: a tier as B, D, E and F do, ≤ 0.75).
ACTING_COUNT_BOUND = 0.75
#: The count of each dimension read against the acting tier (the counts of the hand-written rules).
ACTING_COUNTS = {"A": "reading_strategy.total_searches", "B": "output_detail.total_output_chars",
                 "C": "directory_style.max_dir_depth", "D": "edit_strategy.avg_lines_changed",
                 "E": "version_strategy.total_deletes", "F": "cross_modal_behavior.image_files_created"}


def acting_count_accuracy(sessions: list[Any], run_dir: str) -> dict[str, Any]:
    """How well one count reads the tier a session *acted* in (``meta.json`` ``acting_tiers``, the simulator's
    ground truth): a depth-2 tree on that count, 5-fold leave-profiles-out, per dimension (:data:`ACTING_COUNTS`).
    ``{dim: {"accuracy", "count", "n"}}`` or ``{dim: {"na": reason}}``."""
    import json
    from pathlib import Path

    from sklearn.model_selection import GroupKFold

    from filegram_ray.validity.separability import flat_features, tree_accuracy

    rows = []
    for s in sessions:
        try:
            meta = json.loads((Path(run_dir) / "trajectories" / s.profile_id / s.task_id / "meta.json")
                              .read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        acting = meta.get("acting_tiers")
        if isinstance(acting, dict):
            rows.append((s, acting, flat_features(s.proc)))
    out: dict[str, Any] = {}
    groups = np.asarray([s.profile_id for s, _, _ in rows])
    if len(set(groups.tolist())) < 5:
        return {d: {"na": "fewer than 5 profiles with acting tiers"} for d in ACTING_COUNTS}
    folds = list(GroupKFold(n_splits=5).split(np.zeros(len(rows)), groups=groups))
    for d, name in ACTING_COUNTS.items():
        x = np.asarray([f.get(name, 0.0) for _, _, f in rows])
        y = np.asarray([a.get(d, "?") for _, a, _ in rows], dtype=object)
        hits = sum(round(tree_accuracy(x[tr], y[tr], x[te], y[te]) * len(te)) for tr, te in folds)
        out[d] = {"accuracy": hits / len(rows), "count": name.split(".")[1], "n": len(rows)}
    return out


def perturbation_visibility(sessions: list[Any]) -> dict[str, Any]:
    """How far each perturbed session stands out from its own profile's other sessions on the perturbed dimension.

    Score of a session for dimension d = ‖z_d(session) − mean z_d(the profile's other unperturbed sessions)‖ with z
    = per-task standardised log1p fingerprint (:class:`~filegram_ray.validity.core.TaskScaler` fitted on the
    unperturbed sessions, so that a task perturbed in many profiles does not standardise its shifts away).
    AUC = P(score of a perturbed session on its dimension > score of an unperturbed session of the same profile on
    that dimension), ties ½. Returns ``{"auc", "n_perturbed", "by_dimension": {dim: auc}}``."""
    from filegram_ray.validity.core import DIM_COLS, TaskScaler

    if not sessions:
        return {"auc": float("nan"), "n_perturbed": 0, "by_dimension": {}}
    F = np.stack([s.fp for s in sessions])
    base_rows = [i for i, s in enumerate(sessions) if s.perturbation is None] or list(range(len(sessions)))
    scaler = TaskScaler().fit(F[base_rows], [sessions[i].task_id for i in base_rows])
    Z = scaler.transform(F, [s.task_id for s in sessions])
    by_p: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(sessions):
        by_p[s.profile_id].append(i)
    wins: dict[str, list[float]] = defaultdict(list)
    n_pert = 0
    for idx in by_p.values():
        base = [i for i in idx if sessions[i].perturbation is None]
        for i in idx:
            p = sessions[i].perturbation
            if p is None or len(base) < 3:
                continue
            n_pert += 1
            cols = DIM_COLS[p["dimension"]]

            def score(j: int) -> float:
                others = [k for k in base if k != j]
                return float(np.linalg.norm(Z[j, cols] - Z[others][:, cols].mean(axis=0)))

            sp = score(i)
            for j in base:
                sj = score(j)
                wins[p["dimension"]].append(1.0 if sp > sj else 0.5 if sp == sj else 0.0)
    alls = [w for ws in wins.values() for w in ws]
    return {"auc": float(np.mean(alls)) if alls else float("nan"), "n_perturbed": n_pert,
            "by_dimension": {d: float(np.mean(wins[d])) for d in DIMENSIONS if wins.get(d)}}


def flag_reason(sessions: list[Any], tau: float) -> dict[str, Any]:
    """Why the memory's own τ-flags (reference §7.4) miss perturbed sessions: per profile the deviation δ of every
    session from the profile's centroid (memory's ``normalize_fingerprints`` / ``deviation``) and the cutoff
    mean(δ) + τ·sd(δ); returns medians of δ for perturbed and unperturbed sessions, of the cutoff, and the share of
    perturbed sessions below their cutoff, plus the share of flagged unperturbed sessions by task type."""
    from filegram_ray.memory.consolidate import deviation, normalize_fingerprints

    by_p: dict[str, list[Any]] = defaultdict(list)
    for s in sessions:
        by_p[s.profile_id].append(s)
    dp, du, cut, below = [], [], [], []
    false_by_type: dict[str, list[bool]] = defaultdict(list)
    for own in by_p.values():
        if len(own) < 3:
            continue
        own = sorted(own, key=lambda s: s.task_id)
        _, dist, flags = deviation(normalize_fingerprints(np.stack([s.fp for s in own])), tau)
        c = float(dist.mean() + tau * dist.std(ddof=1))
        cut.append(c)
        for s, d, f in zip(own, dist.tolist(), flags.tolist()):
            if s.perturbation:
                dp.append(d)
                below.append(d <= c)
            else:
                du.append(d)
                false_by_type[s.task_type].append(bool(f))

    def med(xs: list[float]) -> float:
        return float(np.median(xs)) if xs else float("nan")

    return {"delta_perturbed": med(dp), "delta_unperturbed": med(du), "cutoff": med(cut),
            "perturbed_below_cutoff": float(np.mean(below)) if below else float("nan"),
            "false_flag_rate_by_task_type": {t: float(np.mean(v)) for t, v in sorted(false_by_type.items())}}


def _bank_items(run_uri: str, storage_options: dict[str, Any] | None, profiles_dir: str | None,
                tasks_dir: str | None, fingerprints: dict[str, Any] | None = None
                ) -> tuple[list[Any], dict[str, str], str]:
    """ShiftAna / AnomDet items and their correct letters: the run's bank, else built in memory. In memory, a
    trajectory without an Engram (encode not run) gets its fingerprint from ``fingerprints`` (trajectory id →
    17 numbers, computed from its events with the memory's feature code, as encode would), so AnomDet's check that
    the impostor differs works as in the bench stage."""
    from filegram_ray.bench.schema import AnswerKey, Item
    from filegram_ray.storage import RunDir

    run = RunDir(run_uri, storage_options or {})
    if run.exists("bench/items.parquet") and run.exists("bench/answers_key.parquet"):
        items = [Item.from_row(r) for r in run.read_table("bench/items.parquet").iter_rows(named=True)]
        items = [it for it in items if it.sub_track in ("ShiftAna", "AnomDet")]
        keys = [AnswerKey.from_row(r) for r in run.read_table("bench/answers_key.parquet").iter_rows(named=True)]
        if items:
            return items, {k.question_id: k.correct for k in keys}, "the run's bank (bench/items.parquet)"
    from filegram_ray.bench.bank import build_bank
    from filegram_ray.bench.inputs import load_bench_inputs
    from filegram_ray.schema.meta import read_manifest

    seed = int(read_manifest(run).get("seed") or 0)
    inputs = load_bench_inputs(run, profiles_dir=profiles_dir, tasks_dir=tasks_dir)
    if fingerprints:
        trajs = [t if t.fingerprint is not None or t.trajectory_id not in fingerprints else
                 dataclasses.replace(t, fingerprint=tuple(float(x) for x in fingerprints[t.trajectory_id]))
                 for t in inputs.trajectories]
        inputs = dataclasses.replace(inputs, trajectories=trajs)
    held = {t.trajectory_id for t in inputs.trajectories}  # default counts scale to the ids the run holds
    inputs = dataclasses.replace(inputs, run_profiles=frozenset(t.split("/")[0] for t in held),
                                 run_tasks=frozenset(t.split("/")[-1] for t in held))
    bank = build_bank(inputs, seed, sub_tasks=["ShiftAna", "AnomDet"])
    return bank.items, {k.question_id: k.correct for k in bank.keys}, f"built in memory (seed {seed})"


def _absent(x: Any) -> bool:
    """A figure that could not be measured: None or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def _meets(value: float, bound: float, op: str) -> bool:
    """``value op bound`` for op in ``>=``, ``<=``, ``==``."""
    return bool(value >= bound if op == ">=" else value <= bound if op == "<=" else value == bound)


def _missed_note(share: float | None, n: int | None) -> str:
    """``k of n profiles read as another tier; the bound allows m`` for a profile-level recovery figure (one profile
    is 1 / n of it: at 30 profiles the bound 0.90 allows 3 misses), or "" without a figure."""
    if _absent(share) or not n:
        return ""
    missed, allowed = round((1.0 - share) * n), math.floor(n * (1.0 - BOUNDS["profile"]) + 1e-9)
    return f"{missed} of {n} profiles read as another tier; the bound allows {allowed}"


def _check(name: str, value: float | None, bound: float, op: str, note: str = "") -> dict[str, Any]:
    ok = None
    if not _absent(value):
        ok = _meets(value, bound, op)
    else:
        value = None
    return {"name": name, "value": value, "bound": bound, "op": op, "pass": ok, "note": note}


def behaviour_checks(out: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks on what sessions do and write, from ``out["motivation"]`` (:func:`~.motivation.motivation`),
    ``out["outcomes"]`` (:func:`~.outcomes.outcomes`) and ``out["acting_counts"]`` (:func:`acting_count_accuracy`;
    empty: those two checks are n/a): searches, inspections, sourced and verbatim sentences, task outcomes, tool
    markers in files, silent overwrites, operations at one instant, one count against the acting tier."""
    from filegram_ray.validity.motivation import MAX_OPS_PER_INSTANT
    from filegram_ray.validity.outcomes import OUTCOME_BOUND

    checks: list[dict[str, Any]] = []
    mot = out["motivation"]
    for key, label in (("search_hits", "searches that match a file"),
                       ("inspected_before_change", "deletes/moves/renames after an inspection of the file"),
                       ("sourced_sentences", "output sentences with a fact from an input read")):
        c = mot.get("counts", {})
        n = {"search_hits": "searches", "inspected_before_change": "changes",
             "sourced_sentences": "sentences"}[key]
        left = len(mot.get("skipped") or [])
        checks.append(_check(f"motivation: {label}", mot.get(key), BOUNDS[key], ">=",
                             mot.get("error") or f"of {c.get(n, 0)}"
                             + (f"; {left} trajectories left out (unreadable events_raw.json)" if left else "")))
    oc = out["outcomes"]
    checks.append(_check("task outcomes reached", oc.get("share"), OUTCOME_BOUND, ">=",
                         oc.get("error") or f"{oc.get('ok', 0)} of {oc.get('n', 0)} sessions; lowest tasks: "
                         + ", ".join(f"{t} {v['share']:.2f}" for t, v in sorted(
                             (oc.get("by_task") or {}).items(), key=lambda kv: kv[1]["share"])[:3])))
    c = mot.get("counts", {})
    checks.append(_check("output sentences that are an input's sentence verbatim", mot.get("verbatim_sentences"),
                         VERBATIM_BOUND, "<=", mot.get("error") or f"{c.get('verbatim', 0)} of {c.get('sentences', 0)}"))
    checks.append(_check("files holding a tool's marker (viewer notes, line numbers, cuts)",
                         None if "error" in mot else float(c.get("files_with_tool_markers", 0)), 0.0, "==",
                         mot.get("error") or f"in {c.get('sessions_with_tool_markers', 0)} of {c.get('sessions', 0)} "
                         "sessions"))
    checks.append(_check("moves or renames onto an existing file (silent overwrites)",
                         None if "error" in oc else float(len(oc.get("overwrites") or [])), 0.0, "==",
                         oc.get("error") or "; ".join((oc.get("overwrites") or [])[:2])))
    checks.append(_check(f"sessions with more than {MAX_OPS_PER_INSTANT} file operations at one instant",
                         None if "error" in mot else float(c.get("sessions_ops_batched", 0)), 0.0, "==",
                         mot.get("error") or f"most at one instant: {c.get('max_ops_one_instant', 0)}"))
    checks.append(_check("sessions whose deletes all share one instant",
                         None if "error" in mot else float(c.get("sessions_deletes_one_instant", 0)), 0.0, "==",
                         mot.get("error") or f"of {c.get('sessions', 0)}"))
    for d in ("A", "C"):
        r = out["acting_counts"].get(d) or {}
        checks.append(_check(f"one count reads the acting tier of a session, {d} ({r.get('count', '–')})",
                             r.get("accuracy"), ACTING_COUNT_BOUND, "<=", r.get("na") or
                             ("not measured" if not r else f"{r.get('n', 0)} sessions; B, D, E, F: ") + ", ".join(
                                 f"{x} {out['acting_counts'][x]['accuracy']:.2f}" for x in "BDEF"
                                 if out["acting_counts"].get(x, {}).get("accuracy") is not None)))
    return checks


def realism(test: Any, train: Any | None, lpo: dict[str, Any], cross: dict[str, Any] | None,
            perturbations: dict[str, Any], tau: dict[str, Any], *, run_uri: str,
            storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """All the bounded realism figures of a run (module docstring). ``test`` / ``train``:
    :class:`~filegram_ray.validity.core.SessionSet`; ``lpo`` / ``cross`` / ``perturbations`` / ``tau``: the results
    of :func:`~filegram_ray.validity.core.recovery`, :func:`~filegram_ray.validity.core.perturbation_effects` and
    :func:`~filegram_ray.validity.core.tau_flags` on the same sessions."""
    from filegram_ray.storage import RunDir
    from filegram_ray.validity.motivation import motivation
    from filegram_ray.validity.outcomes import outcomes

    sess = test.sessions
    out: dict[str, Any] = {"n_sessions": len(sess)}
    out["separability"] = separability(sess)
    if train is not None:
        out["separability_cross"] = separability(sess, train.sessions)
    out["eta2"] = task_tier_eta2(sess)
    out["eta2_counts"] = task_tier_eta2(sess, NAMED_COUNTS)
    out["rule_sessions"] = rule_session_accuracy(sess)
    out["visibility"] = perturbation_visibility(sess)
    out["flag_reason"] = flag_reason(sess, tau["tau"])
    tiers = {s.trajectory_id: rule_tiers(s.proc) for s in sess}
    try:
        items, keys, source = _bank_items(run_uri, storage_options, test.profiles_dir, None,
                                          {s.trajectory_id: s.fp for s in sess})
        def tier_of(t: str) -> dict[str, str]:
            return tiers.get(t) or {d: "?" for d in DIMENSIONS}

        out["rule_answerer"] = {"source": source, **score_rule_answerer(items, keys, CountRuleAnswerer(tier_of))}
        by_user: dict[str, list[str]] = {}
        for s in sess:
            by_user.setdefault(s.profile_id, []).append(s.trajectory_id)
        mem = MemoryRuleAnswerer(tier_of, lambda p: by_user.get(p, []))
        out["memory_answerer"] = {"source": source, **score_rule_answerer(items, keys, mem)}
    except (ValueError, OSError) as exc:  # a bank that cannot be built is an n/a row, never the end of the check
        log.warning("validity: count-rule answerer not scored: %s", exc)
        out["rule_answerer"] = {"source": None, "error": str(exc)}
        out["memory_answerer"] = {"source": None, "error": str(exc)}
    run = RunDir(run_uri, storage_options or {})
    if run.is_local:
        pairs = [(s.profile_id, s.task_id) for s in sess]
        out["motivation"] = motivation(run.full(""), pairs)
        out["outcomes"] = outcomes(run.full(""), pairs)
        out["acting_counts"] = acting_count_accuracy(sess, run.full(""))
    else:
        out["motivation"] = {"error": "motivation is measured on a local run directory only"}
        out["outcomes"] = {"error": "outcomes are measured on a local run directory only"}
        out["acting_counts"] = {}

    checks: list[dict[str, Any]] = []
    for key, label in (("separability", "within-set (leave-profiles-out)"), ("separability_cross", "cross-set")):
        for d in DIMENSIONS:
            r = out.get(key, {}).get(d)
            if r is None:
                continue
            checks.append(_check(f"single-session separability {d}, {label}", r.get("accuracy"),
                                 BOUNDS["separability"], "<=", r.get("na") or f"best feature {r.get('feature')}"))
    worst = max(((n, v["eta2"]) for n, v in out["eta2"].items() if v["eta2"] is not None), key=lambda x: x[1],
                default=(None, None))
    checks.append(_check("max task × tier η² over the 17 fingerprint features", worst[1], BOUNDS["eta2"], "<=",
                         f"{worst[0]}" if worst[0] else "no feature varies, or < 3 sessions per task × tier cell"))
    for key, label in (("lpo", "leave-profiles-out"), ("cross", "cross-set")):
        src = lpo if key == "lpo" else cross
        if src is None:
            continue
        for d in DIMENSIONS:
            r = src.get(d, {})
            checks.append(_check(f"profile-level recovery {d}, {label}", r.get("profile"), BOUNDS["profile"], ">=",
                                 r.get("na") or _missed_note(r.get("profile"), r.get("n_profiles"))))
    checks.append(_check("no-op perturbations (counterfactual re-simulation)",
                         float(perturbations["no_op"]) if perturbations["checked"] else None, 0.0,
                         "==", f"{perturbations['checked']} of {perturbations['n']} checked"))
    checks.append(_check("perturbation visible across sessions (AUC)", out["visibility"]["auc"], VISIBILITY_AUC,
                         ">=", f"{out['visibility']['n_perturbed']} perturbed sessions"))
    for s in ("ShiftAna", "AnomDet"):
        r = out["rule_answerer"].get(s)
        checks.append(_check(f"count-rule answerer {s}, accuracy − chance", r["margin"] if r else None,
                             BOUNDS["rule_answerer_margin"], "<=",
                             (f"accuracy {r['accuracy']:.2f}, chance {r['chance']:.2f}, {r['n']} items"
                              + (f" of {r['n_profiles']} profiles; 95 % interval over profiles "
                                 f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]" if r.get("interval") else "")
                              if r else
                              out["rule_answerer"].get("error") or "no item")))
    checks += behaviour_checks(out)
    out["checks"] = checks
    a = tau["store"]["all"]
    out["tau_flags"] = {"tau": tau["tau"], "precision": a["precision"], "recall": a["recall"]}
    return out


def _fmt(x: Any) -> str:
    if _absent(x):
        return "n/a"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def check_lines(res: dict[str, Any]) -> list[str]:
    """One printed line per bounded figure: ``PASS|FAIL|n/a  value  op bound  name  (note)``."""
    lines = []
    for c in res["checks"]:
        mark = "n/a " if c["pass"] is None else "PASS" if c["pass"] else "FAIL"
        shown = _fmt(c["value"])
        if c["pass"] is not None and _meets(float(shown), c["bound"], c["op"]) != c["pass"]:
            shown = f"{c['value']:.5f}"  # 0.79970 would print as 0.800, which reads as meeting ">= 0.8"
        lines.append(f"    {mark}  {shown:>6} {c['op']} {c['bound']:<5g} {c['name']}"
                     + (f"  ({c['note']})" if c.get("note") else ""))
    t, fr = res["tau_flags"], res["flag_reason"]
    lines.append(f"    info  τ-flags (memory's own, τ = {t['tau']}): precision {_fmt(t['precision'])}, recall "
                 f"{_fmt(t['recall'])}" + (f"; reason: perturbed sessions' median δ {_fmt(fr['delta_perturbed'])} "
                                           f"vs unperturbed {_fmt(fr['delta_unperturbed'])}, median cutoff "
                                           f"{_fmt(fr['cutoff'])}: {_fmt(fr['perturbed_below_cutoff'])} of the "
                                           "perturbed sessions fall below their profile's cutoff"
                                           if (t['recall'] or 0) < 0.6 else ""))
    rs = res["rule_sessions"]
    lines.append("    info  hand-written single-count rules, tier of a single session: "
                 + ", ".join(f"{d} {_fmt(rs[d])}" for d in DIMENSIONS))
    mem = res.get("memory_answerer") or {}
    got = [f"{s} {mem[s]['accuracy']:.2f} (chance {mem[s]['chance']:.2f}, {mem[s]['margin']:+.2f}"
           + (f", 95 % [{mem[s]['interval'][0]:+.2f}, {mem[s]['interval'][1]:+.2f}]" if mem[s].get("interval") else "")
           + ")" for s in ("ShiftAna", "AnomDet") if isinstance(mem.get(s), dict)]
    if got:
        lines.append("    info  the same readings with the user's usual taken from memory (all of the user's other "
                     "sessions; MemoryRuleAnswerer): " + ", ".join(got))
    return lines


def markdown_lines(res: dict[str, Any]) -> list[str]:
    """The ``validity.md`` section of these figures."""
    L = ["## 5. Behaviour like a person, signal like a distribution", "",
         "| check | value | bound | result | note |", "|---|---|---|---|---|"]
    for c in res["checks"]:
        mark = "n/a" if c["pass"] is None else "PASS" if c["pass"] else "**FAIL**"
        L.append(f"| {c['name']} | {_fmt(c['value'])} | {c['op']} {c['bound']:g} | {mark} | {c.get('note', '')} |")
    L += ["", "Single-session separability, best one-feature depth-2 tree (top features):", ""]
    for key in ("separability", "separability_cross"):
        for d in DIMENSIONS:
            r = res.get(key, {}).get(d)
            if not r or "na" in r:
                continue
            fb = r.get("fingerprint_best") or {}
            L.append(f"- {key.replace('_', ' ')} {d}: {_fmt(r['accuracy'])} (chance {_fmt(r['chance'])}); "
                     + ", ".join(f"{n} {a:.2f}" for n, a in r["top"][:3])
                     + (f"; best fingerprint feature {fb.get('feature')} {_fmt(fb.get('accuracy'))}" if fb else ""))
    L += ["", "Task × tier η² (largest over the six dimensions' tiers):", "",
          "| feature | η² | dimension |", "|---|---|---|"]
    for n in FINGERPRINT_NAMES:
        v = res["eta2"][n]
        L.append(f"| {n} | {_fmt(v['eta2'])} | {v['dimension'] or '–'} |")
    for n, v in res["eta2_counts"].items():
        if n not in FINGERPRINT_NAMES:
            L.append(f"| {n} (count, not bounded) | {_fmt(v['eta2'])} | {v['dimension'] or '–'} |")
    mot = res["motivation"]
    if "counts" in mot:
        L += ["", f"Motivation counts: {mot['counts']}; fact kinds {mot['fact_kinds']}; searches after which a "
              f"matched file was opened: {_fmt(mot['search_opened'])}."]
        for k, xs in mot["examples"].items():
            if xs:
                L.append(f"- {k} examples: " + " · ".join(f"`{x}`" for x in xs))
    oc = res.get("outcomes") or {}
    if oc.get("by_task"):
        L += ["", "Task outcomes per task (share of sessions that reached it; what the others lack):", "",
              "| task | sessions | reached | most often missing |", "|---|---|---|---|"]
        for t, v in oc["by_task"].items():
            miss = "; ".join(f"{k} ({n})" for k, n in (v.get("missing") or {}).items())
            L.append(f"| {t} | {v['n']} | {_fmt(v['share'])} | {miss or '–'} |")
    if mot.get("top_ngrams"):
        L += ["", "The 20 word 4-grams found in most output files (how many files hold each):", "",
              "; ".join(f"“{g}” {n}" for g, n in mot["top_ngrams"])]
    ac = res.get("acting_counts") or {}
    if ac:
        L += ["", "One count against the tier each session acted in (depth-2 tree, leave-profiles-out): "
              + ", ".join(f"{d} {v.get('count')} {_fmt(v.get('accuracy'))}" for d, v in ac.items() if "na" not in v)]
    L += ["", *[ln.strip() for ln in check_lines(res)[-2:]]]
    return L
