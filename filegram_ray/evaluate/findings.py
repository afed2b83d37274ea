"""The paper's qualitative findings (reference §8.4, last paragraph) decided on a run's results.

Each finding is a set of *claims*; each claim is decided from the paired tests or the profile-bootstrap intervals of
:mod:`filegram_ray.stats` at the 5 % level:

* **F1** FileGramOS's Avg > EverMemOS's > each of Mem0, Zep, MemOS, SimpleMem (multiple-choice items; exact McNemar
  per pair, Holm across the finding's pairs).
* **F2** AnomDet: EverMemOS and FileGramOS ≥ 70 (interval's lower end ≥ 70 holds, upper end < 70 fails) while Mem0 and
  SimpleMem sit near chance (upper end ≤ chance + 15 holds, lower end > chance + 15 fails; the 15-point band is our
  reading of "near chance").
* **F3** Full Context within 5 points of FileGramOS on TraceDis (equivalence: the paired difference's interval inside
  [−5, 5] holds, entirely outside fails).
* **F4** VisRAG leads the Semantic channel: VisRAG > every other evaluated method on the semantic-channel items
  (McNemar, Holm).
* **F5** From Text to Multimodal, text-only methods (every method with a memory except FileGramOS and its
  ablations, VisRAG and MMA; No Context has no memory to lose) drop more than FileGramOS: per text/multimodal twin pair, d = mean drop of the text-only methods − FileGramOS's
  drop; paired bootstrap over profiles, interval above 0 holds, below 0 fails.
* **F6** Removing FileGramOS's procedural channel costs more than removing either other channel: FileGramOS without
  semantic > without procedural, and without episodic > without procedural (McNemar, Holm).

A claim holds when its test is significant in the claimed direction, fails when significant against it (or, for
thresholds, when the interval is entirely on the wrong side), and is otherwise undecided. A finding holds when
every claim holds, fails when any claim fails, else is undecided; a finding whose methods were not evaluated is
undecided and says which are missing. Two things leave a finding **not tested**, its figures computed but read as
no verdict: a reader that does not pass its validity gate
(:func:`~filegram_ray.evaluate.reader_validity.reader_gate`: "the reader cannot rank"), and a method the finding
needs that has no result (most of its items failed, :mod:`filegram_ray.evaluate.failures`). A claim's ``items`` = the items it would need to be decided, either way, at
the observed effect, and ``toward`` the way it leans (:func:`~filegram_ray.stats.items_for_paired` for
paired claims, the normal-approximation n times the design effect of resampling profiles for threshold claims, the
interval's half-width scaled as 1/√n for F3 and F5); None when the observed effect is 0. An undecided finding
would fail once its cheapest claim leaning against it is decided, and hold once all its claims are decided for it
(:func:`_items_to_decide`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from filegram_ray.stats import (
    ALPHA,
    N_BOOT,
    bootstrap_ci,
    holm,
    items_for_paired,
    paired_bootstrap,
    paired_test,
)

__all__ = ["FINDINGS", "decide_findings", "findings_lines"]

#: finding id → its statement (after reference §8.4, last paragraph)
FINDINGS = {
    "F1": "FileGramOS Avg > EverMemOS > each of Mem0, Zep, MemOS, SimpleMem",
    "F2": "AnomDet: EverMemOS and FileGramOS ≥ 70 while Mem0 and SimpleMem sit near chance",
    "F3": "Full Context within 5 points of FileGramOS on TraceDis",
    "F4": "VisRAG leads the Semantic channel",
    "F5": "From Text to Multimodal, text-only methods drop more than FileGramOS",
    "F6": "Removing FileGramOS's procedural channel costs more than removing either other channel",
}
_Z = 1.959964
_NEAR_CHANCE = 15.0  # points above chance that still count as "near chance" (F2; our reading)
_MULTIMODAL_METHODS = {"visrag", "mma"}


def _verdict(parts: Sequence[str]) -> str:
    if any(p == "fails" for p in parts):
        return "fails"
    if parts and all(p == "holds" for p in parts):
        return "holds"
    return "undecided"


def _greater(results: pl.DataFrame, a: str, b: str, where: pl.Expr | None, seed: int) -> dict[str, Any]:
    t = paired_test(results, a, b, where, seed=seed)
    t["claim"] = f"{a} > {b}"
    return t


def _decide_greater(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Holm across ``tests`` (each ``method > baseline``), then a verdict and the items needed per test."""
    for t, ph in zip(tests, holm([t["p"] for t in tests])):
        t["p_holm"] = ph
        if not t["n"]:
            t.update(verdict="undecided", items=None, toward=None, why="no paired items")
            continue
        sig = ph is not None and ph < ALPHA
        t["verdict"] = ("holds" if t["diff"] > 0 else "fails") if sig else "undecided"
        t["items"], t["toward"] = None, None
        if t["verdict"] == "undecided" and t["diff"]:
            t["items"] = items_for_paired(t["discordance"] or 0.0, t["diff"] / 100, alpha=ALPHA / max(1, len(tests)))
            t["toward"] = "holds" if t["diff"] > 0 else "fails"
        t["why"] = (f"diff {t['diff']:+.1f} [{t['lo']:.1f}, {t['hi']:.1f}], {t['test']} p_holm "
                    f"{'–' if ph is None else f'{ph:.3g}'}, n {t['n']}")
    return tests


def _design_effect(values: list[float], clusters: list[str]) -> float:
    """Variance of the profile-bootstrap mean over the item-level binomial variance (≥ 1)."""
    import numpy as np

    if len(set(clusters)) < 2 or len(values) < 2:
        return 1.0
    v = np.array(values) / 100
    p = float(v.mean())
    var_iid = p * (1 - p) / len(v) if 0 < p < 1 else 0.0
    by: dict[str, list[float]] = {}
    for x, c in zip(v, clusters):
        by.setdefault(c, []).append(float(x))
    k = len(by)
    tot = np.array([sum(xs) for xs in by.values()])
    cnt = np.array([len(xs) for xs in by.values()], float)
    var_cl = float(((tot - p * cnt) ** 2).sum()) / (cnt.sum() ** 2) * k / max(k - 1, 1)
    return max(1.0, var_cl / var_iid) if var_iid > 0 else 1.0


def _threshold(results: pl.DataFrame, method: str, sub: str, *, at_least: float | None = None,
               at_most: float | None = None, seed: int) -> dict[str, Any]:
    """``method``'s mean on ``sub`` vs a threshold (``≥ at_least`` or ``≤ at_most``), from its interval."""
    df = results.filter((pl.col("method") == method) & (pl.col("sub_track") == sub) & pl.col("score").is_not_null())
    bound = at_least if at_least is not None else at_most
    claim = f"{method} {sub} {'≥' if at_least is not None else '≤'} {bound:.1f}"
    out: dict[str, Any] = {"claim": claim, "method": method, "n": df.height, "p": None, "p_holm": None,
                           "items": None, "toward": None}
    if not df.height:
        out.update(verdict="undecided", why="no items", diff=None, lo=None, hi=None)
        return out
    prof = [str(p) for p in (df["profile"] if "profile" in df.columns else df["question_id"]).to_list()]
    scores = df["score"].to_list()
    mean, lo, hi = bootstrap_ci(scores, prof, n_boot=N_BOOT, seed=seed)
    if at_least is not None:
        verdict = "holds" if lo >= at_least else "fails" if hi < at_least else "undecided"
        gap = mean - at_least
    else:
        verdict = "holds" if hi <= at_most else "fails" if lo > at_most else "undecided"
        gap = at_most - mean
    if verdict == "undecided" and gap != 0:  # the interval's half-width must shrink below |gap|
        p = min(max(mean / 100, 0.01), 0.99)
        out["items"] = int(math.ceil(_Z ** 2 * p * (1 - p) / (gap / 100) ** 2 * _design_effect(scores, prof)))
        out["toward"] = "holds" if gap > 0 else "fails"
    out.update(verdict=verdict, diff=mean, lo=lo, hi=hi, why=f"mean {mean:.1f} [{lo:.1f}, {hi:.1f}], n {df.height}")
    return out


def _f3(results: pl.DataFrame, seed: int) -> dict[str, Any]:
    t = paired_test(results, "full_context", "filegramos", pl.col("sub_track") == "TraceDis", seed=seed)
    t.update(claim="|full_context − filegramos| on TraceDis ≤ 5", p_holm=None, items=None, toward=None)
    if not t["n"]:
        t.update(verdict="undecided", why="no paired TraceDis items")
        return t
    lo, hi, d = t["lo"], t["hi"], t["diff"]
    t["verdict"] = "holds" if -5 <= lo and hi <= 5 else "fails" if lo > 5 or hi < -5 else "undecided"
    half = (hi - lo) / 2
    if t["verdict"] == "undecided" and abs(d) != 5 and half > 0:  # half-width below the distance to ±5
        t["items"] = int(math.ceil(t["n"] * (half / abs(5 - abs(d))) ** 2))
        t["toward"] = "holds" if abs(d) < 5 else "fails"
    t["why"] = f"diff {d:+.1f} [{lo:.1f}, {hi:.1f}], n {t['n']}"
    return t


def _f5(results: pl.DataFrame, methods: Sequence[str], seed: int) -> dict[str, Any]:
    text_only = [m for m in methods if not m.startswith("filegramos") and m not in _MULTIMODAL_METHODS
                 and m != "no_context"]
    claim = "text-only methods' Text→Multimodal drop > FileGramOS's"
    out: dict[str, Any] = {"claim": claim, "n": 0, "p": None, "p_holm": None, "items": None, "toward": None,
                           "diff": None,
                           "lo": None, "hi": None}
    if "text_twin" not in results.columns or not text_only:
        out.update(verdict="undecided", why="no text-only method or no twin pairs")
        return out
    scored = results.filter(pl.col("score").is_not_null())  # a failed item has no score: its pair is left out
    mm = scored.filter((pl.col("setting") == "multimodal") & (pl.col("text_twin") != "") & ~pl.col("is_open"))
    txt = scored.select("method", pl.col("question_id").alias("text_twin"), pl.col("score").alias("t"))
    pairs = mm.select("method", "question_id", "text_twin", "profile", pl.col("score").alias("m")).join(
        txt, on=["method", "text_twin"], how="inner").with_columns(drop=pl.col("t") - pl.col("m"))
    fos = pairs.filter(pl.col("method") == "filegramos").select("question_id", pl.col("drop").alias("f"))
    oth = (pairs.filter(pl.col("method").is_in(text_only)).group_by("question_id")
           .agg(pl.col("drop").mean().alias("o"), pl.col("profile").first()))
    j = oth.join(fos, on="question_id", how="inner").sort("question_id")
    if not j.height:
        out.update(verdict="undecided", why="no twin pair answered by FileGramOS and a text-only method")
        return out
    d = (j["o"] - j["f"]).to_list()
    mean, lo, hi, p = paired_bootstrap(d, [str(x) for x in j["profile"].to_list()], seed=seed)
    verdict = "holds" if lo > 0 else "fails" if hi < 0 else "undecided"
    out.update(n=j.height, diff=mean, lo=lo, hi=hi, p=p, verdict=verdict,
               why=f"drop difference {mean:+.1f} [{lo:.1f}, {hi:.1f}] points, {j.height} pairs")
    if verdict == "undecided" and mean and hi > lo:
        out["items"] = int(math.ceil(j.height * ((hi - lo) / 2 / abs(mean)) ** 2))
        out["toward"] = "holds" if mean > 0 else "fails"
    return out


def _items_to_decide(claims: list[dict[str, Any]], verdict: str) -> dict[str, Any]:
    """``{items, toward}`` of an undecided finding: it fails as soon as one claim leaning against it is decided
    (the fewest items of those), and holds once every claim is decided for it (the most items of those, when every
    undecided claim leans that way); None when some undecided claim has no effect to detect."""
    if verdict != "undecided":
        return {"items": None, "toward": None}
    open_ = [c for c in claims if c["verdict"] == "undecided"]
    against = [c["items"] for c in open_ if c.get("toward") == "fails" and c.get("items")]
    if against:
        return {"items": min(against), "toward": "fails"}
    if open_ and all(c.get("toward") == "holds" and c.get("items") for c in open_):
        return {"items": max(c["items"] for c in open_), "toward": "holds"}
    return {"items": None, "toward": None}


#: verdict of a finding (and its claims) that is computed but not read: the reader cannot rank, or a method it
#: needs has no result
NOT_TESTED = "not tested"


def decide_findings(results: pl.DataFrame, methods: Sequence[str], *, seed: int = 0,
                    failed: Sequence[str] = (), reader_reads: bool | None = None) -> list[dict[str, Any]]:
    """Decide F1–F6 on ``results`` (validity rows are ignored: only ``methods`` count).

    Args:
        results / methods / seed: the results table, the rows that count as methods, the bootstrap seed.
        failed: methods with no result (most items failed); a finding that needs one is not tested, and a failed
            method never enters another finding's comparisons.
        reader_reads: the reader's gate (:func:`~filegram_ray.evaluate.reader_validity.reader_gate`); False: every
            finding is *not tested* ("the reader cannot rank"; the report's reader section says why), its claims'
            figures kept.
            None: no gate given (the statistics alone; tests of the statistics).

    Returns one dict per finding: ``{id, statement, verdict, items, toward, missing, failed, not_tested, claims}``
    — ``verdict`` holds / fails / undecided / not tested; ``items`` / ``toward``: for an undecided finding, about
    how many items would decide it at the observed effects and which way (:func:`_items_to_decide`; None when no
    effect points anywhere); ``missing`` the methods the finding needs that were not evaluated; ``failed`` those
    that have no result; ``not_tested`` why it is not tested ("" otherwise); ``claims`` the per-claim dicts (claim,
    verdict, diff, lo, hi, p, p_holm, n, items, toward, why).
    """
    failed = set(failed)
    have = [m for m in methods if results.height and m in set(results["method"].to_list()) and m not in failed]
    res = results.filter(pl.col("method").is_in(have)) if results.height else results
    out = []

    def finding(fid: str, needs: Sequence[str], claims_fn) -> None:
        no_result = [m for m in needs if m in failed]
        missing = [m for m in needs if m not in have and m not in failed]
        claims = [] if missing or no_result else claims_fn()
        verdict = "undecided" if missing else _verdict([c["verdict"] for c in claims])
        why = (f"no result for {', '.join(no_result)} (most items failed)" if no_result else
               "the reader cannot rank" if reader_reads is False else "")
        if why:
            verdict = NOT_TESTED
            for c in claims:  # the figures stay; no claim is read as a verdict either
                c.update(verdict=NOT_TESTED, items=None, toward=None)
        out.append({"id": fid, "statement": FINDINGS[fid], "verdict": verdict,
                    **_items_to_decide(claims, verdict), "missing": missing, "failed": no_result,
                    "not_tested": why, "claims": claims})

    mcq = ~pl.col("is_open")
    f1_low = [m for m in ("mem0", "zep", "memos", "simplemem") if m in have]
    finding("F1", ["filegramos", "evermemos"], lambda: _decide_greater(
        [_greater(res, "filegramos", "evermemos", mcq, seed)]
        + [_greater(res, "evermemos", m, mcq, seed) for m in f1_low]))

    def f2() -> list[dict[str, Any]]:
        anom = res.filter((pl.col("sub_track") == "AnomDet") & mcq)
        if not anom.height:
            return [{"claim": "AnomDet items evaluated", "verdict": "undecided", "why": "no AnomDet item in this run",
                     "n": 0, "p": None, "p_holm": None, "items": None, "toward": None, "diff": None, "lo": None,
                     "hi": None}]
        chance = float((100.0 / anom["n_choices"].cast(pl.Float64)).mean())
        parts = [_threshold(res, m, "AnomDet", at_least=70.0, seed=seed) for m in ("evermemos", "filegramos")]
        parts += [_threshold(res, m, "AnomDet", at_most=chance + _NEAR_CHANCE, seed=seed)
                  for m in ("mem0", "simplemem") if m in have]
        return parts

    finding("F2", ["evermemos", "filegramos"], f2)
    finding("F3", ["full_context", "filegramos"], lambda: [_f3(res, seed)])
    sem = pl.col("channel") == "semantic"
    finding("F4", ["visrag"], lambda: _decide_greater(
        [_greater(res, "visrag", m, sem & mcq, seed) for m in have if m != "visrag"]))
    finding("F5", ["filegramos"], lambda: [_f5(res, have, seed)])
    finding("F6", ["filegramos_no_procedural", "filegramos_no_semantic", "filegramos_no_episodic"],
            lambda: _decide_greater([_greater(res, "filegramos_no_semantic", "filegramos_no_procedural", mcq, seed),
                                     _greater(res, "filegramos_no_episodic", "filegramos_no_procedural", mcq,
                                              seed)]))
    return out


def findings_lines(findings: list[dict[str, Any]]) -> list[str]:
    """The "Findings" Markdown section of a :func:`decide_findings` list (shared by ``report.md`` and
    ``filegram findings``)."""
    lines = ["## The paper's findings, tested", "",
             ("Each finding of the paper (reference §8.4) decided on this run: paired tests of the same items (exact "
              "McNemar, Holm across a finding's comparisons) or 95 % intervals bootstrapped over profiles. *items to "
              "decide* = about how many items (per method, same design) would decide an undecided finding at the "
              "observed effects, and which way it would go (– : some claim shows no effect, or nothing was "
              "measured)."), "",
             "| finding | verdict | items to decide | evidence |", "|---|---|---|---|"]
    for f in findings:
        if f.get("failed"):
            ev = f"no result: {', '.join(f['failed'])} failed on most items (section Failed items)"
        elif f["missing"]:
            ev = f"not evaluated: {', '.join(f['missing'])}"
        else:
            ev = "; ".join(f"{c['claim']}: " + (f"({c['why']})" if c["verdict"] == NOT_TESTED else
                                                f"**{c['verdict']}** ({c['why']})") for c in f["claims"]) or "–"
        items = f"{f['items']:,} ({f['toward']})" if f["items"] else "–"
        verdict = f"**{f['verdict']}**" + (f": {f['not_tested']}" if f.get("not_tested") else "")
        lines.append(f"| {f['id']} {f['statement']} | {verdict} | {items} | {ev} |")
    return lines
