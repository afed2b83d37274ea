"""What ``filegram validity RUN`` prints and writes: the entry point :func:`run_validity` (every measure of
:mod:`filegram_ray.validity.core` and :mod:`filegram_ray.validity.realism` on one run), ``results/validity.md`` /
``validity.json`` and the "Behaviour validity" section merged into ``results/report.md``."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from filegram_ray.errors import UserError
from filegram_ray.validity.core import (
    BAND,
    DIMENSIONS,
    TARGETS,
    TIERS,
    aggregate_counts,
    load_sessions,
    perturbation_effects,
    recovery,
    rule_recovery,
    tau_flags,
)
from filegram_ray.validity.realism import markdown_lines, realism

__all__ = ["run_validity", "render_markdown", "summary_lines", "merge_report", "dumps"]


def _f(x: Any, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _mark(x: float, target: float) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) or x >= target else " ✗"


def render_markdown(res: dict[str, Any]) -> str:
    """``results/validity.md`` from the result dict of :func:`run_validity`."""
    L = ["# Behaviour validity", "",
         f"Run `{res['run']}` · {res['n_sessions']} sessions · {res['n_profiles']} profiles · profile set "
         f"`{res['profiles_dir'] or 'conf/profiles'}`" + (f" · cross-set training run `{res['train_run']}`"
                                                          if res.get("train_run") else ""), "",
         *([f"Left out: {len(res['skipped'])} trajectories with an unreadable or malformed file (first: "
            f"{res['skipped'][0]['error']})", ""] if res.get("skipped") else []),
         *([f"Left out of the cross-set training run: {len(res['train_skipped'])} trajectories with an unreadable "
            f"or malformed file (first: {res['train_skipped'][0]['error']})", ""] if res.get("train_skipped") else []),
         "## 1. Tier recovery (unperturbed sessions)", "",
         ("Classifier: the dimension's own fingerprint columns, log1p, standardised per task on the training "
          "sessions, multinomial logistic regression (balanced class weights). Per profile = summed log-probabilities over its sessions. "
          f"Target: per profile ≥ {TARGETS['profile']:.2f} (✗ = below). Per session is information: a single "
          "session shows its tier only as a tendency (the simulator's design); its bound is single-session "
          "separability ≤ 0.80 (section 5)."), "",
         "| dim | LPO session | LPO profile | session by tier L/M/R | chance | rule classifier (profile) |"
         + (" cross-set session | cross-set profile |" if res.get("cross") else ""),
         "|---|---|---|---|---|---|" + ("---|---|" if res.get("cross") else "")]
    for d in DIMENSIONS:
        r = res["lpo"].get(d, {})
        if "na" in r or "error" in r:
            row = f"| {d} | n/a ({r.get('na') or r['error']}) | n/a | | | {_f(res['rule'][d]['profile'])} |"
        else:
            bt = "/".join(_f(r["session_by_tier"].get(t)) for t in TIERS)
            row = (f"| {d} | {_f(r['session'])} | {_f(r['profile'])}"
                   f"{_mark(r['profile'], TARGETS['profile'])} | {bt} | {_f(r['chance'])} | "
                   f"{_f(res['rule'][d]['profile'])} |")
        if res.get("cross"):
            c = res["cross"][d]
            row += (f" {_f(c['session'])} | {_f(c['profile'])}"
                    f"{_mark(c['profile'], TARGETS['profile'])} |")
        L.append(row)
    na = {r["na"] for r in res["lpo"].values() if "na" in r}
    if na:
        L += ["", f"Leave-profiles-out recovery: n/a ({'; '.join(sorted(na))}): with fewer profiles than folds a "
              "held-out profile's tier is often missing from its training fold, so the accuracy would read as a "
              "failure that says nothing about the behaviour. Generate more profiles, or train on another run "
              "(`--train-run OTHER`, cross-set columns)."]
    pe = res["perturbations"]
    L += ["", "## 2. Perturbations", "",
          (f"{pe['n']} perturbed sessions, {pe['checked']} with a counterfactual check in meta.json; "
           f"**no-op: {pe['no_op']}**. Effect = shift of the perturbed dimension's fingerprint columns against the "
           "counterfactual run (per-task SD units, Euclidean); leak = the same over the other dimensions; "
           "to target = the leave-profiles-out classifier puts the perturbed session in its target tier."), "",
          "| dim | n | checked | no-op | effect mean | effect median | effect min | leak mean | to target |",
          "|---|---|---|---|---|---|---|---|---|"]
    for d in DIMENSIONS:
        r = pe["dimensions"][d]
        L.append(f"| {d} | {r['n']} | {r['checked']} | {r['no_op']} | {_f(r['effect_mean'])} | "
                 f"{_f(r['effect_median'])} | {_f(r['effect_min'])} | {_f(r['leak_mean'])} | {_f(r['to_target'])} |")
    if pe["no_op_sessions"]:
        L += ["", "No-op sessions: " + ", ".join(f"`{x}`" for x in pe["no_op_sessions"][:30])]
    tf = res["tau"]
    L += ["", f"## 3. Deviation flags (τ = {tf['tau']})", "",
          ("Store = the memory's flags on the whole 17-D vector (a flagged session is attributed to the "
           "dimension of its top shifted feature). Per-dim = the same τ rule on that dimension's z-scored "
           "columns; task-standardised = the same after each feature is standardised per task over all profiles "
           f"(how the session compares with others doing that task). Targets: precision ≥ "
           f"{TARGETS['flag_precision']:.2f} and recall ≥ {TARGETS['flag_recall']:.2f}."), "",
          "| dim | store P / R | per-dim P / R | task-standardised P / R | TP/FP/FN | best R at P ≥ target: "
          "store · per-dim · task-std (τ) |",
          "|---|---|---|---|---|---|"]

    def pr(x: dict[str, Any]) -> str:
        return (f"{_f(x['precision'])}{_mark(x['precision'], TARGETS['flag_precision'])} / {_f(x['recall'])}"
                f"{_mark(x['recall'], TARGETS['flag_recall'])}")

    def best(x: dict[str, Any]) -> str:
        b = x.get("best")
        return "–" if not b else f"{_f(b['recall'])} ({b['tau']:g})"

    for d in DIMENSIONS:
        st, p, q = tf["store"][d], tf["per_dimension"][d], tf["per_dimension_task"][d]
        L.append(f"| {d} | {pr(st)} | {pr(p)} | {pr(q)} | {q['tp']}/{q['fp']}/{q['fn']} | "
                 f"{best(st)} · {best(p)} · {best(q)} |")
    a = tf["store"]["all"]
    L += ["", f"Store flags over all dimensions: precision {_f(a['precision'])}, recall {_f(a['recall'])} "
              f"(TP {a['tp']}, FP {a['fp']}, FN {a['fn']})."]
    ag = res["counts"]
    L += ["", "## 4. Aggregate counts vs the paper (reference §0)", "",
          f"Per trajectory over {ag['n_trajectories']} trajectories; band ±{int(BAND * 100)} % (TIER_TARGETS §5; "
          "'other' = search + rename + move + delete + copy is reported, not banded, and so is the kept total "
          "that contains it).", "",
          "| event type | ours | paper | ratio | in band |", "|---|---|---|---|---|"]
    for t, r in ag["per_traj"].items():
        band = "–" if r["in_band"] is None else ("yes" if r["in_band"] else "**no**")
        L.append(f"| {t} | {r['ours']:.2f} | {r['paper']:.2f} | {r['ratio']:.2f} | {band} |")
    split = ag["per_traj"]["other"]["split"]
    L += ["", "Other, split: " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()),
          f"Raw events stripped: {100 * ag['stripped']:.1f} % (paper {100 * ag['paper_stripped']:.1f} %). "
          f"Files created per trajectory: {ag['files_created_per_traj']:.2f} (paper ≈ {ag['paper_files_per_traj']:.2f})."
          + (f" Workspace input files: {ag['input_files']} (paper {ag['paper_input_files']})."
             if ag.get("input_files") is not None else "")]
    if res.get("realism"):
        L += ["", *markdown_lines(res["realism"])]
    return "\n".join(L) + "\n"


def summary_lines(res: dict[str, Any]) -> list[str]:
    """A short "Behaviour validity" section for ``results/report.md``."""
    lpo = res["lpo"]
    na = sorted({r["na"] for r in lpo.values() if "na" in r})
    rec = " · ".join(f"{d} " + ("n/a" if "na" in lpo[d] else f"{_f(lpo[d].get('session'))}/"
                                                              f"{_f(lpo[d].get('profile'))}") for d in DIMENSIONS)
    if na and all("na" in lpo[d] for d in DIMENSIONS):
        rec = f"n/a ({'; '.join(na)})"
    def flags(kind: str) -> str:
        return " · ".join(f"{d} {_f(res['tau'][kind][d]['precision'])}/{_f(res['tau'][kind][d]['recall'])}"
                          for d in DIMENSIONS)

    return ["## Behaviour validity", "",
            f"- Tier recovery, leave-profiles-out, session/profile: {rec}",
            f"- Perturbations: {res['perturbations']['n']} planned, {res['perturbations']['checked']} checked, "
            f"{res['perturbations']['no_op']} no-op",
            f"- τ-flags precision/recall, memory's own flags: {flags('store')}",
            f"- τ-flags precision/recall, per dimension, task-standardised: {flags('per_dimension_task')}",
            "- Details: [validity.md](validity.md)"]


_SECTION_START, _SECTION_END = "<!-- validity:start -->", "<!-- validity:end -->"


def merge_report(report: str, lines: list[str]) -> str:
    """Replace (or append) the marked validity section of a ``report.md`` text."""
    block = "\n".join([_SECTION_START, *lines, _SECTION_END])
    if _SECTION_START in report and _SECTION_END in report:
        head, rest = report.split(_SECTION_START, 1)
        return head + block + rest.split(_SECTION_END, 1)[1]
    return report.rstrip("\n") + "\n\n" + block + "\n"


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, (np.floating, np.integer)):
        return _clean(obj.item())
    return obj


def _same_run(a: str, b: str) -> bool:
    """Whether two run URIs name the same run: resolved paths (symbolic links, ``..``, ``file://``) for local runs,
    the URIs without a trailing ``/`` otherwise."""
    import os

    from filegram_ray.storage import local_run_path

    pa, pb = local_run_path(a), local_run_path(b)
    if pa is not None and pb is not None:
        return os.path.realpath(pa) == os.path.realpath(pb)
    return str(a).rstrip("/") == str(b).rstrip("/")


#: Share of the smaller run's trajectories that, shared with the other run (same id, byte-equal fingerprint), make
#: ``--cross`` refuse the pair (ours): a copy with a few files changed, or a run regenerated with the same seed and
#: profile set on part of the tasks, holds most of them; two independently generated runs share none.
SHARED_MAX = 0.5


def _shared_sessions(a: Any, b: Any) -> tuple[int, int]:
    """``(shared, n)``: trajectories the two session sets hold alike (the same trajectory id with a byte-equal
    fingerprint: a copied run, or one generated again with the same seed and profile set, same seed, same bytes)
    and the size of the smaller set."""
    def key(ss: Any) -> set[tuple[str, bytes]]:
        return {(s.trajectory_id, s.fp.tobytes()) for s in ss.sessions}

    return len(key(a) & key(b)), min(len(a.sessions), len(b.sessions))


def run_validity(run_uri: str, *, profiles_dir: str | None = None, train_run: str | None = None,
                 train_profiles_dir: str | None = None, tasks_dir: str | None = None,
                 storage_options: dict[str, Any] | None = None, write: bool = True) -> dict[str, Any]:
    """Compute every measure for a run and write ``results/validity.{md,json}`` (and the report.md section).

    Args:
        run_uri: run directory after the generate stage.
        profiles_dir: the run's profile set (default: recorded in run.json).
        train_run / train_profiles_dir: a second, independently generated run for the cross-set figures (recovery
            and single-session separability are fitted there and scored here).
        write: False = compute only.

    Returns: the result dict (also ``results/validity.json``); ``skipped`` / ``train_skipped`` list the
    trajectories of the run / of ``train_run`` left out for an unreadable or malformed file.

    Raises:
        StorageError: missing trajectory index.
        UserError: ``train_run`` is ``run_uri`` itself (the same resolved local path, or the same URI) or holds the
            same trajectories (:func:`_shared_sessions`: at least :data:`SHARED_MAX` of the smaller run's; a copy, or the
            same seed and profile set, on all or part of the tasks); a profile or
            task set recorded in a run's ``run.json`` no longer exists and none was given; a profile missing from
            the set, or a set that contradicts the tiers a run was generated with (:func:`load_sessions`, naming
            ``--profiles-dir`` or ``--train-profiles-dir``); a run with no readable trajectory.
    """
    from filegram_ray.storage import RunDir

    if train_run and _same_run(run_uri, train_run):
        raise UserError(f"--cross must be a second, independently generated run: {train_run} is {run_uri} itself, "
                        "and a set scored against itself inflates the cross-set figures (generate another run, "
                        "e.g. with another seed or profile set)")

    def load(uri: str, pdir: str | None, flag: str, what: str):
        got = load_sessions(uri, pdir, tasks_dir, storage_options, flag=flag)
        if not got.sessions:
            first = f" ({len(got.skipped)} left out, first: {got.skipped[0]['error']})" if got.skipped else ""
            raise UserError(f"{uri}{what}: no finished trajectories in trajectories/index.parquet{first}")
        return got

    # both runs are read before anything is computed: a problem with the training run ends the command at once
    test = load(run_uri, profiles_dir, "--profiles-dir", "")
    train = load(train_run, train_profiles_dir, "--train-profiles-dir", " (--cross)") if train_run else None
    shared, n_min = _shared_sessions(test, train) if train is not None else (0, 0)
    if n_min and shared >= SHARED_MAX * n_min:
        raise UserError(f"--cross must be a second, independently generated run: {train_run} holds the same "
                        f"trajectories as {run_uri} ({shared} of the {n_min} of the smaller run: a copy of it, or a "
                        "run made with the same seed and profile set, on all or part of its tasks), and a set scored "
                        "against itself inflates the cross-set figures (generate another run, e.g. with another seed "
                        "or profile set)")
    lpo = recovery(test)
    res: dict[str, Any] = {"run": str(run_uri), "profiles_dir": test.profiles_dir, "n_sessions": len(test.sessions),
                           "n_profiles": len(test.profiles), "lpo": lpo, "rule": rule_recovery(test),
                           "perturbations": perturbation_effects(test, lpo), "tau": tau_flags(test),
                           "counts": aggregate_counts(test), "targets": TARGETS, "skipped": test.skipped}
    if train is not None:
        res["train_run"] = str(train_run)
        res["train_skipped"] = train.skipped
        res["cross"] = recovery(test, train)
    res["realism"] = realism(test, train, lpo, res.get("cross"), res["perturbations"], res["tau"], run_uri=run_uri,
                             storage_options=storage_options)
    res = _clean(res)
    if write:
        run = RunDir(run_uri, storage_options or {})
        run.write_json("results/validity.json", res)
        run.write_text("results/validity.md", render_markdown(res))
        if run.exists("results/report.md"):
            run.write_text("results/report.md", merge_report(run.read_text("results/report.md"), summary_lines(res)))
    return res


def dumps(res: dict[str, Any]) -> str:
    return json.dumps(res, indent=2, ensure_ascii=False)
