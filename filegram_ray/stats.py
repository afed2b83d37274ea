"""How sure a FileGramBench report is: intervals, paired tests, multiple-testing correction and power. Imports
nothing of the project (the results table's sub-task and channel orders are its callers').

Every function here works on plain values or on the per-item results table (``results/results.parquet``: one row per method × item
with ``score`` on 0–100, ``is_open``, ``sub_track``, ``channel``, ``setting`` and ``profile``, the user an item is
about, :func:`~filegram_ray.evaluate.items.item_profile`).

* **Intervals** (:func:`bootstrap_ci`, :func:`cell_intervals`): 95 % percentile intervals by bootstrap *over
  profiles*. The items of one profile share its trajectories and are not independent, so a replicate draws profiles
  with replacement and keeps all their items (cluster bootstrap; Davison & Hinkley 1997, §3.8). 2,000 replicates,
  seeded: the same seed gives the same bytes.
* **Paired tests** (:func:`paired_test`, :func:`paired_table`): a method against a baseline on the *same* items.
  Multiple choice (0/100 scores): exact McNemar test — with b items only the method gets right and c items only the
  baseline gets right, p = two-sided exact binomial test of min(b, c) in b + c trials at ½ (McNemar 1947; exact
  form, Fagerland et al. 2013), via :func:`scipy.stats.binomtest`. Open-ended (0–100 Likert scores): paired
  bootstrap over profiles of the mean per-item difference; p = 2 · min(share of replicates ≤ 0, share ≥ 0).
* **Holm** (:func:`holm`): step-down correction across the methods compared with one baseline (Holm 1979);
  a method is *distinguishable* from the baseline when its Holm-adjusted p < 0.05.
* **Power** (:func:`items_for_difference`, :func:`items_for_paired`, :func:`power_table`): items needed to detect
  a difference with a two-sided test at α = 0.05 and power 0.8 (z = 1.960, 0.842). Per sub-task the report uses the
  two-proportion formula at the observed accuracy p and p ± 10 points (Fleiss, *Statistical Methods for Rates and
  Proportions*, 3rd ed., eq. 4.14 without continuity correction) — an unpaired bound, so paired designs need at most
  this many; for a comparison with observed discordance ψ and difference δ the McNemar formula
  n = (z_α/2 √ψ + z_β √(ψ − δ²))² / δ² (Connor 1987).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

__all__ = [
    "ALPHA",
    "N_BOOT",
    "bootstrap_ci",
    "cell_intervals",
    "holm",
    "items_for_difference",
    "items_for_paired",
    "mcnemar_exact",
    "paired_bootstrap",
    "paired_table",
    "paired_test",
    "power_table",
]

#: Replicates of every bootstrap (percentile interval; 2,000 keeps the 2.5 % tails' Monte-Carlo error < 1 point on
#: cells of ~40 items).
N_BOOT = 2000
#: Two-sided level of every test and of the intervals (95 %).
ALPHA = 0.05
_Z_ALPHA = 1.959964  # Φ⁻¹(1 − α/2), α = 0.05
_Z_BETA = 0.841621  # Φ⁻¹(0.8), power 0.8


def _cluster_matrix(clusters: Sequence[str], n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, weights)``: cluster index per item and an ``n_boot × k`` matrix of how often each of the ``k``
    clusters is drawn in each replicate (k draws with replacement)."""
    uniq, codes = np.unique(np.asarray(list(clusters), dtype=object).astype(str), return_inverse=True)
    k = len(uniq)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_boot, k))
    weights = np.zeros((n_boot, k))
    np.add.at(weights, (np.repeat(np.arange(n_boot), k), draws.ravel()), 1.0)
    return codes, weights


def _boot_means(values: np.ndarray, clusters: Sequence[str], n_boot: int, seed: int) -> np.ndarray:
    codes, w = _cluster_matrix(clusters, n_boot, seed)
    k = w.shape[1]
    sums = np.bincount(codes, weights=values, minlength=k)
    counts = np.bincount(codes, minlength=k).astype(float)
    den = w @ counts
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ sums) / den


def bootstrap_ci(values: Sequence[float], clusters: Sequence[str], *, n_boot: int = N_BOOT, seed: int = 0,
                 level: float = 1 - ALPHA) -> tuple[float | None, float | None, float | None]:
    """``(mean, lo, hi)`` of ``values`` with a percentile interval from a bootstrap over ``clusters``.

    Args:
        values: per-item scores (any unit; the report uses 0–100); ``None``/NaN entries are left out.
        clusters: the cluster (profile) of each value, same length.
        n_boot / seed: replicates and the seed of their generator (same seed → same interval).
        level: coverage (0.95 → the 2.5 % and 97.5 % percentiles).

    Returns ``(None, None, None)`` without values; with one cluster the interval is the mean itself (nothing to
    resample).

    Raises:
        ValueError: ``values`` and ``clusters`` differ in length.
    """
    if len(values) != len(clusters):
        raise ValueError(f"bootstrap_ci: {len(values)} values but {len(clusters)} clusters")
    keep = [(float(v), str(c)) for v, c in zip(values, clusters) if v is not None and not math.isnan(float(v))]
    if not keep:
        return None, None, None
    vals = np.array([v for v, _ in keep])
    mean = float(vals.mean())
    if len({c for _, c in keep}) < 2:
        return mean, mean, mean
    means = _boot_means(vals, [c for _, c in keep], n_boot, seed)
    means = means[~np.isnan(means)]
    q = (1 - level) / 2
    return mean, float(np.quantile(means, q)), float(np.quantile(means, 1 - q))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` vs ``c`` discordant pairs (``binomtest(min(b, c), b + c, ½)``;
    1.0 when there is no discordant pair). Example: b = 10, c = 2 → p = 2 · 79 / 4096 = 0.0386.

    Raises:
        ValueError: a negative count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: negative count (b={b}, c={c})")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue)


def paired_bootstrap(diffs: Sequence[float], clusters: Sequence[str], *, n_boot: int = N_BOOT,
                     seed: int = 0) -> tuple[float | None, float | None, float | None, float | None]:
    """``(mean, lo, hi, p)`` of per-item paired differences: 95 % percentile interval by bootstrap over
    ``clusters`` and the two-sided p = 2 · min(P*(mean ≤ 0), P*(mean ≥ 0)) (capped at 1). All ``None`` without
    differences; with one cluster there is nothing to resample and p is ``None`` (no test)."""
    mean, lo, hi = bootstrap_ci(diffs, clusters, n_boot=n_boot, seed=seed)
    if mean is None:
        return None, None, None, None
    vals = np.array([float(d) for d in diffs if d is not None and not math.isnan(float(d))])
    cl = [str(c) for d, c in zip(diffs, clusters) if d is not None and not math.isnan(float(d))]
    if len(set(cl)) < 2:
        return mean, lo, hi, None
    means = _boot_means(vals, cl, n_boot, seed)
    means = means[~np.isnan(means)]
    p = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    return mean, lo, hi, p


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (Holm 1979), in input order; ``None`` entries stay ``None`` and do not
    count toward the family size."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: pvalues[j])):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        out[i] = running
    return out


def items_for_difference(p: float, delta: float = 0.10, *, alpha: float = ALPHA, power: float = 0.8) -> int:
    """Items per arm to detect accuracy ``p`` vs ``p + delta`` (moved toward 0.5 when it would leave [0, 1]) with a
    two-sided two-proportion test (Fleiss eq. 4.14, no continuity correction; proportions on 0–1).

    Raises:
        ValueError: ``delta`` not in (0, 1) or ``p`` outside [0, 1].
    """
    if not 0 < delta < 1 or not 0 <= p <= 1:
        raise ValueError(f"items_for_difference: p={p}, delta={delta} out of range")
    za, zb = _z(alpha), _zb(power)
    p2 = p + delta if p + delta <= 1 else p - delta
    pbar = (p + p2) / 2
    n = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p * (1 - p) + p2 * (1 - p2))) ** 2 / delta ** 2
    return int(math.ceil(n))


def items_for_paired(discordance: float, delta: float, *, alpha: float = ALPHA, power: float = 0.8) -> int | None:
    """Paired items (McNemar, Connor 1987) to detect a difference ``delta`` (0–1) when a share ``discordance`` of
    items is answered differently by the two sides; ``None`` when ``delta`` is 0. The discordance is raised to
    ``|delta|`` when smaller (a difference of δ needs at least δ discordant)."""
    d = abs(delta)
    if d == 0:
        return None
    psi = max(float(discordance), d + 1e-9)
    n = (_z(alpha) * math.sqrt(psi) + _zb(power) * math.sqrt(max(psi - d * d, 0.0))) ** 2 / (d * d)
    return int(math.ceil(n))


def _z(alpha: float) -> float:
    if alpha == ALPHA:
        return _Z_ALPHA
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / 2))


def _zb(power: float) -> float:
    if power == 0.8:
        return _Z_BETA
    from scipy.stats import norm

    return float(norm.ppf(power))


# ----------------------------------------------------------------------------------------------- tables

def _cell_filters(results: pl.DataFrame, sub_tasks: Sequence[str], channels: Sequence[str]
                  ) -> list[tuple[str, pl.Expr]]:
    """The report table's columns that get an interval, each with the rows of ``results`` it averages: the
    sub-tasks present (in ``sub_tasks`` order, then any other by name), each of ``channels``, and the averages."""
    subs = [s for s in sub_tasks if s in set(results["sub_track"].to_list())]
    subs += sorted(set(results["sub_track"].to_list()) - set(subs))
    out = [(s, pl.col("sub_track") == s) for s in subs]
    out += [(c, pl.col("channel") == c) for c in channels]
    out.append(("avg", ~pl.col("is_open")))
    if "setting" in results.columns:
        out.append(("multimodal", (pl.col("setting") == "multimodal") & ~pl.col("is_open")))
        out.append(("real_world", pl.col("setting") == "real_world"))
    return out


def _profiles(df: pl.DataFrame) -> list[str]:
    if "profile" in df.columns:
        return [str(p) if p else str(q) for p, q in zip(df["profile"].to_list(), df["question_id"].to_list())]
    return [str(q) for q in df["question_id"].to_list()]


def cell_intervals(results: pl.DataFrame, *, sub_tasks: Sequence[str] = (), channels: Sequence[str] = (),
                   n_boot: int = N_BOOT, seed: int = 0) -> pl.DataFrame:
    """One row per (method, cell) of the report table: ``method, cell, n, n_profiles, mean, lo, hi`` (0–100; cells
    = each sub-task present, in ``sub_tasks`` order then by name, each of ``channels``, ``avg`` over the
    multiple-choice items, ``multimodal``, ``real_world``; a cell without scored items is left out). Error rows count
    as 0 for multiple choice, as in the table; open-ended items without a score are left out
    (:mod:`filegram_ray.evaluate.scoring`)."""
    schema = {"method": pl.Utf8, "cell": pl.Utf8, "n": pl.Int64, "n_profiles": pl.Int64, "mean": pl.Float64,
              "lo": pl.Float64, "hi": pl.Float64}
    if not results.height:
        return pl.DataFrame(schema=schema)
    rows = []
    for method in dict.fromkeys(results["method"].to_list()):
        df = results.filter(pl.col("method") == method)
        for cell, expr in _cell_filters(results, sub_tasks, channels):
            sub = df.filter(expr & pl.col("score").is_not_null())
            if not sub.height:
                continue
            prof = _profiles(sub)
            mean, lo, hi = bootstrap_ci(sub["score"].to_list(), prof, n_boot=n_boot, seed=seed)
            rows.append({"method": method, "cell": cell, "n": sub.height, "n_profiles": len(set(prof)),
                         "mean": mean, "lo": lo, "hi": hi})
    return pl.DataFrame(rows, schema=schema)


def paired_test(results: pl.DataFrame, method: str, baseline: str, where: pl.Expr | None = None, *,
                n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """``method`` against ``baseline`` on the items both have a score for (optionally only rows matching
    ``where``). Returns ``{method, baseline, test, n, diff, lo, hi, p, b, c, discordance}``: ``diff`` = mean score
    of method − baseline in points with its 95 % interval (bootstrap over profiles); ``test`` = ``mcnemar`` when
    every paired item is multiple choice (``b``/``c``: items only the method / only the baseline got right), else
    ``bootstrap`` (open-ended or mixed items; b, c = items where the method scores higher / lower); ``p`` two-sided;
    ``discordance`` = share of items the two sides score differently. ``n`` = 0 and ``p`` None when nothing pairs.
    """
    df = results.filter(pl.col("score").is_not_null())
    if where is not None:
        df = df.filter(where)
    a = df.filter(pl.col("method") == method).select("question_id", "is_open", pl.col("score").alias("s_a"),
                                                     *(["profile"] if "profile" in df.columns else []))
    b = df.filter(pl.col("method") == baseline).select("question_id", pl.col("score").alias("s_b"))
    j = a.join(b, on="question_id", how="inner").sort("question_id")
    out: dict[str, Any] = {"method": method, "baseline": baseline, "test": "", "n": j.height, "diff": None,
                           "lo": None, "hi": None, "p": None, "b": 0, "c": 0, "discordance": None}
    if not j.height:
        return out
    sa, sb = np.array(j["s_a"].to_list(), float), np.array(j["s_b"].to_list(), float)
    d = sa - sb
    prof = _profiles(j)
    mean, lo, hi, p_boot = paired_bootstrap(d.tolist(), prof, n_boot=n_boot, seed=seed)
    nb, nc = int((d > 0).sum()), int((d < 0).sum())
    mcq = not any(j["is_open"].to_list())
    out.update(test="mcnemar" if mcq else "bootstrap", diff=mean, lo=lo, hi=hi, b=nb, c=nc,
               p=mcnemar_exact(nb, nc) if mcq else p_boot, discordance=(nb + nc) / j.height)
    return out


def paired_table(results: pl.DataFrame, methods: Sequence[str], baselines: Sequence[str], *,
                 n_boot: int = N_BOOT, seed: int = 0) -> pl.DataFrame:
    """Every method against each baseline present, on the multiple-choice items (``scope`` = ``avg``, McNemar) and
    on the open-ended items (``scope`` = ``open``, paired bootstrap), Holm-corrected across the methods of one
    (baseline, scope) family. Each pair is tested once: a baseline is not compared again with an earlier baseline
    of ``baselines`` (FileGramOS vs No Context sits in No Context's family, not also as No Context vs FileGramOS
    in FileGramOS's). Columns: scope, baseline, method, test, n, diff, lo, hi, p, p_holm, b, c, discordance,
    distinguishable (p_holm < 0.05)."""
    schema = {"scope": pl.Utf8, "baseline": pl.Utf8, "method": pl.Utf8, "test": pl.Utf8, "n": pl.Int64,
              "diff": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "p": pl.Float64, "p_holm": pl.Float64,
              "b": pl.Int64, "c": pl.Int64, "discordance": pl.Float64, "distinguishable": pl.Boolean}
    have = set(results["method"].to_list()) if results.height else set()
    rows: list[dict[str, Any]] = []
    bases = [b for b in baselines if b in have]
    for k, base in enumerate(bases):
        for scope, expr in (("avg", ~pl.col("is_open")), ("open", pl.col("is_open"))):
            fam = [paired_test(results, m, base, expr, n_boot=n_boot, seed=seed) for m in methods
                   if m != base and m in have and m not in bases[:k]]
            fam = [r for r in fam if r["n"]]
            for r, ph in zip(fam, holm([r["p"] for r in fam])):
                rows.append({"scope": scope, **r, "p_holm": ph,
                             "distinguishable": ph is not None and ph < ALPHA})
    return pl.DataFrame(rows, schema=schema).select(list(schema))


def power_table(results: pl.DataFrame, methods: Sequence[str], delta: float = 0.10, *,
                sub_tasks: Sequence[str] = ()) -> pl.DataFrame:
    """Per sub-task (in ``sub_tasks`` order, then any other by name): ``sub_task, n_items, accuracy`` (mean over
    ``methods`` on 0–100), ``items_needed`` (per
    method, to detect ``delta`` = 10 points at that accuracy, :func:`items_for_difference`; for open-ended
    sub-tasks the 0–100 score is read as a proportion, an approximation) and ``enough`` (n_items ≥ items_needed)."""
    schema = {"sub_task": pl.Utf8, "n_items": pl.Int64, "accuracy": pl.Float64, "items_needed": pl.Int64,
              "enough": pl.Boolean}
    df = results.filter(pl.col("method").is_in(list(methods)) & pl.col("score").is_not_null()) \
        if results.height else results
    rows = []
    if df.height:
        subs = [s for s in sub_tasks if s in set(df["sub_track"].to_list())]
        subs += sorted(set(df["sub_track"].to_list()) - set(subs))
        for s in subs:
            sub = df.filter(pl.col("sub_track") == s)
            acc = float(sub["score"].mean())
            n_items = int(sub["question_id"].n_unique())
            need = items_for_difference(min(max(acc / 100, 0.0), 1.0), delta)
            rows.append({"sub_task": s, "n_items": n_items, "accuracy": acc, "items_needed": need,
                         "enough": n_items >= need})
    return pl.DataFrame(rows, schema=schema)
