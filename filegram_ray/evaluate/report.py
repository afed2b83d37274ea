"""``results/report.md`` and the PNG plots of the evaluate stage.

The table mirrors the paper's main table (reference §8.4, Table 3): one row per method, columns In./Out. (tokens),
one column per sub-task present, the Proc/Sem/Epi channel columns, Avg and Multimodal (accuracy on the multimodal
setting's items, i.e. FileGrd); the validity rows (oracle, random and the reader checks of
:mod:`filegram_ray.evaluate.reader_validity`) sit below a separator. How sure each number is —
profile-bootstrap intervals, paired tests against No Context and FileGramOS, power, the paper's findings — comes
from :mod:`filegram_ray.stats` (:func:`report_statistics`); ``docs/results.md`` explains how to read it.
A second table, "Text vs Multimodal" (+ ``text_vs_multimodal.png``), compares each method on the same questions in
both settings (:func:`text_vs_multimodal`). Every number is computed from ``results/results.parquet`` by
:func:`filegram_ray.evaluate.scoring.summarise`; nothing is typed in.
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from filegram_ray.evaluate.reader_validity import MIN_HEADROOM, MIN_INTERVAL_PROFILES
from filegram_ray.evaluate.scoring import CHANNELS, SUB_TASK_ORDER
from filegram_ray.storage import RunDir

__all__ = ["MIN_HEADROOM", "MIN_INTERVAL_PROFILES", "VALIDITY_METHODS", "format_interval", "markdown_table", "text_vs_multimodal",
           "twin_markdown_table", "write_report"]

#: rows that check the benchmark and the reader, never methods (:mod:`filegram_ray.evaluate.reader_validity`)
VALIDITY_METHODS = ("oracle", "random", "empty", "gold", "wrong_user", "order", "masked")
#: row names of the validity rows (they are not registered methods)
_VALIDITY_NAMES = {"oracle": "Oracle (validity)", "random": "Random (validity)", "empty": "Empty memory (validity)",
                   "gold": "Gold evidence (validity)", "wrong_user": "Wrong user (validity)",
                   "order": "Option order (validity)", "masked": "Masked format (validity)"}


def _name(method: str, row_names: dict[str, str] | None = None) -> str:
    """Row name of ``method``: the run's ``method_rows`` (each method instance's
    :meth:`~filegram_ray.methods.base.MemoryMethod.row_name` with the run's options, recorded by the evaluate
    stage), else the validity rows' names, else the registered method's ``display``, else the id."""
    if row_names and row_names.get(method):
        return str(row_names[method])
    if method in _VALIDITY_NAMES:
        return _VALIDITY_NAMES[method]
    try:
        from filegram_ray.methods.base import METHODS

        return str(getattr(METHODS.get(method), "display", "") or method)
    except Exception:  # noqa: BLE001 - a row name never fails the report
        return method


def _fmt(x: Any, tokens: bool = False) -> str:
    if x is None:
        return "–"
    if tokens:
        return f"{x / 1000:.1f}K" if x >= 1000 else f"{x:.0f}"
    return f"{x:.1f}"


#: a column resting on fewer items than this is marked (†) in the report's table: a few items move it by tens of
#: points (our bound, the same order as the gold-evidence items a sub-task needs in the reader gate)
FEW_ITEMS = 10


def column_counts(results: pl.DataFrame) -> dict[str, int]:
    """Items behind each column of :func:`markdown_table` (one method's items, the first that is not a validity
    row): per sub-task, per channel, ``avg`` (multiple-choice), ``multimodal`` and ``real_world``."""
    if not results.height:
        return {}
    methods = [m for m in dict.fromkeys(results["method"].to_list()) if m not in VALIDITY_METHODS]
    df = results.filter(pl.col("method") == (methods or results["method"].to_list())[0])
    out = {s: n for s, n in df.group_by("sub_track").len().iter_rows()}
    if "channel" in df.columns:
        out.update({c: n for c, n in df.group_by("channel").len().iter_rows() if c in CHANNELS})
    out["avg"] = df.filter(~pl.col("is_open")).height
    if "setting" in df.columns:
        out["multimodal"] = df.filter((pl.col("setting") == "multimodal") & ~pl.col("is_open")).height
        out["real_world"] = df.filter(pl.col("setting") == "real_world").height
    return out


def markdown_table(summary: pl.DataFrame, row_names: dict[str, str] | None = None,
                   marks: dict[str, str] | None = None, counts: dict[str, int] | None = None) -> str:
    """The paper-style Markdown table of a :func:`summarise` frame (``row_names``: the run's ``method_rows``, see
    :func:`_name`; ``marks``: a suffix per method, e.g. the "distinguishable from No Context" marker). A row whose
    ``failed`` is set (most of its items failed: no result) shows "–" in every score cell. ``counts``
    (:func:`column_counts`) adds an *items* row under the header; a column on fewer than :data:`FEW_ITEMS` items
    carries †."""
    subs = [s for s in SUB_TASK_ORDER if s in summary.columns]
    subs += [c for c in summary.columns if c not in subs and c not in {
        "method", "n", "n_errors", "n_scored", "failed", "avg", "tokens_in", "tokens_out", "multimodal",
        "real_world", *CHANNELS}]
    mm = ["multimodal"] if "multimodal" in summary.columns else []
    if "real_world" in summary.columns and summary["real_world"].is_not_null().any():  # only with such items
        mm.append("real_world")
    names = {"multimodal": "Multimodal", "real_world": "Real-World"}
    head = ["Method", "In.", "Out.", *subs, "Proc", "Sem", "Epi", "Avg", *[names[c] for c in mm], "n", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    if counts:
        def n_of(c: str) -> str:
            n = counts.get(c)
            return "" if n is None else f"{n}†" if n < FEW_ITEMS else str(n)

        lines.append("| " + " | ".join(["*items*", "", "", *[n_of(s) for s in subs], *[n_of(c) for c in CHANNELS],
                                        n_of("avg"), *[n_of(c) for c in mm], "", ""]) + " |")
    rows = summary.to_dicts()
    main = [r for r in rows if r["method"] not in VALIDITY_METHODS]
    valid = [r for r in rows if r["method"] in VALIDITY_METHODS]
    for block, is_valid in ((main, False), (valid, True)):
        if is_valid and block:
            lines.append("| " + " | ".join(["*validity*"] + [""] * (len(head) - 1)) + " |")
        for r in block:
            if r.get("failed"):  # no result: the few items that happened to be answered are not the method's score
                r = {k: (None if k in (*subs, *CHANNELS, *mm, "avg", "tokens_in", "tokens_out") else v)
                     for k, v in r.items()}
            cells = [_name(r["method"], row_names) + (marks or {}).get(r["method"], ""),
                     "–" if is_valid else _fmt(r.get("tokens_in"), True),
                     "–" if is_valid else _fmt(r.get("tokens_out"), True),
                     *[_fmt(r.get(s)) for s in subs], *[_fmt(r.get(c)) for c in CHANNELS], _fmt(r.get("avg")),
                     *[_fmt(r.get(c)) for c in mm], str(r.get("n", 0)), str(r.get("n_errors", 0))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_vs_multimodal(results: pl.DataFrame) -> pl.DataFrame:
    """Per method, the same questions in both settings: ``text`` = mean score of the text items that have a
    multimodal twin (``text_twin`` column, see :func:`filegram_ray.evaluate.multimodal.text_twins`), ``multimodal``
    = mean score of those twins, ``delta`` = multimodal − text (percentage points), ``n_pairs``. Only pairs where
    the method has a score for both items count (a failed item leaves its pair out); open-ended items are left out. Empty frame when no pair exists.

    Columns: method, n_pairs, text, multimodal, delta (floats on 0–100).
    """
    schema = {"method": pl.Utf8, "n_pairs": pl.Int64, "text": pl.Float64, "multimodal": pl.Float64,
              "delta": pl.Float64}
    if not results.height or "text_twin" not in results.columns:
        return pl.DataFrame(schema=schema)
    scored = results.filter(pl.col("score").is_not_null())  # a failed item has no score: its pair is left out
    mm = (scored.filter((pl.col("setting") == "multimodal") & (pl.col("text_twin") != "") & ~pl.col("is_open"))
          .select("method", "question_id", "text_twin", pl.col("score").alias("mm_score")))
    txt = scored.select("method", pl.col("question_id").alias("text_twin"), pl.col("score").alias("text_score"))
    pairs = mm.join(txt, on=["method", "text_twin"], how="inner")
    if not pairs.height:
        return pl.DataFrame(schema=schema)
    order = list(dict.fromkeys(results["method"].to_list()))
    agg = (pairs.group_by("method")
           .agg(pl.len().cast(pl.Int64).alias("n_pairs"), pl.col("text_score").mean().alias("text"),
                pl.col("mm_score").mean().alias("multimodal"))
           .with_columns((pl.col("multimodal") - pl.col("text")).alias("delta")))
    rank = {m: i for i, m in enumerate(order)}
    return agg.sort(pl.col("method").replace_strict(rank, default=len(rank))).select(list(schema))


def twin_markdown_table(twins: pl.DataFrame, row_names: dict[str, str] | None = None) -> str:
    """The "Text vs Multimodal" Markdown table of a :func:`text_vs_multimodal` frame."""
    lines = ["| Method | Text | Multimodal | Δ | pairs |", "|---|---|---|---|---|"]
    for r in twins.to_dicts():
        lines.append(f"| {_name(r['method'], row_names)} | {_fmt(r['text'])} | {_fmt(r['multimodal'])} | "
                     f"{r['delta']:+.1f} | {r['n_pairs']} |")
    return "\n".join(lines)


def _twin_png(twins: pl.DataFrame, row_names: dict[str, str] | None = None) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = twins.to_dicts()
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 3), 4.2), dpi=110)
    ax.bar(x - 0.2, [r["text"] for r in rows], 0.4, label="Text", color="#4C72B0")
    ax.bar(x + 0.2, [r["multimodal"] for r in rows], 0.4, label="Multimodal", color="#DD8452")
    for i, r in enumerate(rows):
        ax.text(i, max(r["text"], r["multimodal"]) + 2, f"{r['delta']:+.1f}", ha="center", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels([_name(r["method"], row_names) for r in rows], rotation=25, ha="right",
                       fontsize=8)
    ax.set_ylim(0, 112)
    ax.set_ylabel("accuracy on the same questions (%)")
    ax.set_title("Text → Multimodal (FileGrd items and their text twins)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _recovery_section(run: RunDir) -> list[str]:
    """"Real-World setting" section: how well the events were read back from the recordings (per event type,
    summed over recordings; ``realworld/recovery.parquet`` of the caption stage). Empty without that table."""
    rel = "realworld/recovery.parquet"
    if not run.exists(rel):
        return []
    rec = run.read_table(rel)
    if not rec.height:
        return []
    agg = (rec.group_by("event_type").agg(pl.col("true").sum(), pl.col("recovered").sum(), pl.col("matched").sum())
           .sort(pl.col("event_type") == "all", "event_type"))
    n = rec["recording_id"].n_unique()
    out = ["", "## Real-World setting: events read back from recordings", "",
           (f"{n} recordings captioned with `{rec['captioner'][0]}`; per event type, recovered events matched to the "
            "true ones (same type, same paths up to OCR slips). Methods in the Real-World setting ingest these "
            "recovered events."), "", "| event type | true | recovered | matched | precision | recall |",
           "|---|---|---|---|---|---|"]
    for r in agg.to_dicts():
        p = f"{100 * r['matched'] / r['recovered']:.1f}" if r["recovered"] else "–"
        q = f"{100 * r['matched'] / r['true']:.1f}" if r["true"] else "–"
        out.append(f"| {r['event_type']} | {r['true']} | {r['recovered']} | {r['matched']} | {p} | {q} |")
    return out


def _bar_png(summary: pl.DataFrame, cols: list[str], title: str, ylabel: str,
             row_names: dict[str, str] | None = None, intervals: pl.DataFrame | None = None) -> bytes:
    """Grouped bars, one group per column, one bar per row of ``summary``; with ``intervals``
    (:func:`~filegram_ray.stats.cell_intervals`) each bar gets its 95 % interval as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    methods = summary["method"].to_list()
    x = np.arange(len(cols))
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(cols) + 2), 4.2), dpi=110)
    for i, m in enumerate(methods):
        row = summary.filter(pl.col("method") == m).to_dicts()[0]
        vals = [row.get(c) if row.get(c) is not None else 0.0 for c in cols]
        err = None
        if intervals is not None and intervals.height:
            by = {r["cell"]: r for r in intervals.filter(pl.col("method") == m).to_dicts()}
            err = np.array([[max(0.0, v - by[c]["lo"]) if c in by else 0.0 for c, v in zip(cols, vals)],
                            [max(0.0, by[c]["hi"] - v) if c in by else 0.0 for c, v in zip(cols, vals)]])
        ax.bar(x + (i - (len(methods) - 1) / 2) * width, vals, width, label=_name(m, row_names), yerr=err,
               error_kw={"elinewidth": 0.6, "capsize": 1.5, "ecolor": "#333333"})
    ax.set_xticks(x)
    ax.set_xticklabels(cols)
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


#: marker of a method distinguishable from No Context (Holm-corrected exact McNemar on the multiple-choice items),
#: shown only when the reader reads (:func:`~filegram_ray.evaluate.reader_validity.reader_gate`)
DISTINCT_MARK = " ◆"


def report_statistics(results: pl.DataFrame, seed: int = 0, budget_chars: int | None = None) -> dict[str, Any]:
    """Everything the report says about how sure it is (:mod:`filegram_ray.stats`), from the results table.

    Returns ``{intervals, paired, power, findings, reader, methods, failures}``: ``intervals`` per (method or
    validity row, cell) with 95 % profile-bootstrap bounds over the scored items; ``paired`` every method with a
    result against No Context and FileGramOS (McNemar / paired bootstrap, Holm), with ``mark`` = distinguishable
    *and* the reader reads; ``power`` items per sub-task to detect 10 points; ``findings`` F1–F6
    (:func:`filegram_ray.evaluate.findings.decide_findings`, "not tested" unless the reader reads); ``reader`` the
    headroom, validity checks and the gate (:func:`reader_summary`); ``methods`` the rows that count as methods
    (validity rows never do, nor a method with no result); ``failures`` the error rows per method and cause
    (:func:`~filegram_ray.evaluate.failures.failure_summary`; ``budget_chars``: ``evaluate.max_context_chars``).
    """
    from filegram_ray.evaluate.failures import failure_summary
    from filegram_ray.evaluate.findings import decide_findings
    from filegram_ray.stats import cell_intervals, paired_table, power_table

    failures = failure_summary(results, budget_chars)
    failed = set(failures["failed"])
    methods = [m for m in dict.fromkeys(results["method"].to_list()) if m not in VALIDITY_METHODS
               and m not in failed] if results.height else []
    intervals = cell_intervals(results, sub_tasks=SUB_TASK_ORDER, channels=CHANNELS, seed=seed)
    paired = paired_table(results, methods, ["no_context", "filegramos"], seed=seed)
    power = power_table(results, methods, sub_tasks=SUB_TASK_ORDER)
    reader = reader_summary(results, intervals, paired, methods)
    paired = paired.with_columns(mark=pl.col("distinguishable") & pl.lit(bool(reader["can_rank"])))
    findings = decide_findings(results, methods, seed=seed, failed=sorted(failed),
                               reader_reads=bool(reader["can_rank"]))
    return {"intervals": intervals, "paired": paired, "power": power, "findings": findings, "methods": methods,
            "reader": reader, "failures": failures}


def _ci(intervals: pl.DataFrame, method: str, cell: str = "avg") -> dict[str, Any] | None:
    rows = intervals.filter((pl.col("method") == method) & (pl.col("cell") == cell)).to_dicts() \
        if intervals.height else []
    return rows[0] if rows else None


def _gold_sub_tasks(results: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """``{sub_task: {mean, n}}`` of the gold-evidence row on the scored multiple-choice items."""
    need = {"method", "sub_track", "is_open", "score"}
    if not results.height or not need <= set(results.columns):
        return {}
    gold = results.filter((pl.col("method") == "gold") & ~pl.col("is_open") & pl.col("score").is_not_null())
    return {r["sub_track"]: {"mean": r["mean"], "n": r["n"]} for r in gold.group_by("sub_track").agg(
        pl.col("score").mean().alias("mean"), pl.len().alias("n")).sort("sub_track").to_dicts()}


def reader_summary(results: pl.DataFrame, intervals: pl.DataFrame, paired: pl.DataFrame,
                   methods: list[str]) -> dict[str, Any]:
    """The reader's checks on the multiple-choice Avg: ``floor`` (No Context's row, else the empty-memory row),
    ``ceiling`` (gold evidence), ``headroom`` = ceiling − floor in points (None without either),
    ``gold_sub_tasks`` (the gold row per multiple-choice sub-task), ``wrong_user`` (its interval and whether it
    falls to the floor: intervals overlap and its paired test against the floor is not significant), ``order``
    (:func:`~filegram_ray.evaluate.reader_validity.order_stats`), ``gate`` (:func:`~filegram_ray.evaluate
    .reader_validity.reader_gate` of these rows), ``can_rank`` = the gate's ``reads`` and ``why`` its reasons.
    Beside the gate: ``open_apart`` (methods whose paired test on the open-ended scores tells them from the floor:
    ``{method, diff, lo, hi}``), ``clear`` (methods whose Avg interval lies above the floor's and whose paired test against it
    is distinguishable, when ``paired`` holds one), ``below`` (the same, below it: worse than no memory),
    ``interval_only`` (intervals apart but the paired test not distinguishable: not counted), ``sub_tasks`` (per
    multiple-choice sub-task: ``{sub_task, gold, floor, headroom}`` in points) and ``masked`` (the masked-format row:
    its Avg interval, the memory method's mean on the same items, the paired difference masked − memory method and
    masked − floor)."""
    from filegram_ray.evaluate.reader_validity import memory_method, order_stats, reader_gate

    have = set(results["method"].to_list()) if results.height else set()
    floor_id = "no_context" if "no_context" in have else "empty"
    floor, ceil = _ci(intervals, floor_id), _ci(intervals, "gold")
    out: dict[str, Any] = {"floor_row": floor_id, "floor": floor, "ceiling": ceil, "headroom": None,
                           "can_rank": None, "clear": [], "below": [], "interval_only": [], "why": "",
                           "wrong_user": None, "order": {}, "gold_sub_tasks": _gold_sub_tasks(results),
                           "sub_tasks": [], "masked": None}
    others = [m for m in methods if m != floor_id]
    # the paired tests against the floor, by scope (``avg`` / ``open``); none when the table holds none
    vs_floor = paired.filter(pl.col("baseline") == floor_id) \
        if paired.height and {"scope", "baseline", "method", "distinguishable"} <= set(paired.columns) else None
    tested = {r["method"]: bool(r["distinguishable"]) for r in vs_floor.filter(pl.col("scope") == "avg")
              .iter_rows(named=True)} if vs_floor is not None else {}
    if floor is not None:
        for m in others:
            c = _ci(intervals, m)
            side = "clear" if c is not None and c["lo"] > floor["hi"] else \
                "below" if c is not None and c["hi"] < floor["lo"] else None
            if side is not None:
                out[side if tested.get(m, True) else "interval_only"].append(m)
    if floor is not None and ceil is not None:
        out["headroom"] = ceil["mean"] - floor["mean"]
    out["open_apart"] = [
        {"method": r["method"], "diff": r["diff"], "lo": r["lo"], "hi": r["hi"]}
        for r in vs_floor.filter((pl.col("scope") == "open") & pl.col("distinguishable")).iter_rows(named=True)
        if r["method"] in others
    ] if vs_floor is not None else []
    wu = _ci(intervals, "wrong_user")
    if wu is not None and floor is not None:
        from filegram_ray.stats import paired_test

        t = paired_test(results, "wrong_user", floor_id, ~pl.col("is_open"))
        overlap = wu["lo"] <= floor["hi"] and floor["lo"] <= wu["hi"]
        few = (wu.get("n_profiles") or 0) < MIN_INTERVAL_PROFILES  # intervals too wide to mean "falls": undecided
        out["wrong_user"] = {**wu, "p": t["p"], "diff": t["diff"], "n_paired": t["n"],
                             "falls_to_floor": None if few else overlap and (t["p"] is None or t["p"] >= 0.05)}
    mm = memory_method(methods)
    out["order"] = order_stats(results, mm)
    if floor is not None and ceil is not None:
        open_cells = set(results.filter(pl.col("is_open"))["sub_track"].to_list()) \
            if "sub_track" in results.columns else set()
        for cell in dict.fromkeys(intervals["cell"].to_list()):
            g, f = _ci(intervals, "gold", cell), _ci(intervals, floor_id, cell)
            if cell in SUB_TASK_ORDER and cell not in open_cells and g is not None and f is not None:
                out["sub_tasks"].append({"sub_task": cell, "gold": g["mean"], "floor": f["mean"],
                                         "headroom": g["mean"] - f["mean"]})
    mk = _ci(intervals, "masked")
    if mk is not None and mm is not None:
        from filegram_ray.stats import paired_test

        own = paired_test(results, "masked", mm, ~pl.col("is_open"))
        low = paired_test(results, "masked", floor_id, ~pl.col("is_open")) if floor is not None else None
        out["masked"] = {**mk, "method": mm, "vs_method": own, "vs_floor": low}
    out["gate"] = reader_gate(out)
    out.update(can_rank=out["gate"]["reads"], why=out["gate"]["why"])
    return out


def _p(p: float | None) -> str:
    """A p-value for the report; "–" when there is no test (e.g. all items from one profile)."""
    return "–" if p is None else f"{p:.3g}"


def format_interval(c: dict[str, Any] | None) -> str:
    """``mean [lo, hi]`` of an interval row (``mean``, ``lo``, ``hi``, ``n_profiles``; points); the mean alone, with
    the count, when the interval rests on fewer than 5 profiles (``MIN_INTERVAL_PROFILES``); ``–`` for None."""
    if c is None:
        return "–"
    if c.get("n_profiles") is not None and c["n_profiles"] < MIN_INTERVAL_PROFILES:
        return f"{c['mean']:.1f} (no interval: {c['n_profiles']} profile(s))"
    return f"{c['mean']:.1f} [{c['lo']:.1f}, {c['hi']:.1f}]"


def mcq_chance(results: pl.DataFrame) -> float | None:
    """The chance level (0–100) of the multiple-choice items of ``results`` (mean of 1 / choices over one
    method's items); None without such items."""
    mcq = results.filter(~pl.col("is_open")) if results.height and "is_open" in results.columns else results[:0]
    if not mcq.height:
        return None
    return float((1.0 / mcq.filter(pl.col("method") == mcq["method"][0])["n_choices"].cast(pl.Float64)).mean() * 100)


def headroom_lines(reader: dict[str, Any], row_names: dict[str, str] | None = None,
                   chance: float | None = None) -> list[str]:
    """The report's opening paragraph: the reader's headroom and, in words, whether it reads
    (:func:`~filegram_ray.evaluate.reader_validity.reader_gate`) and so may decide findings and mark methods;
    ``chance``: the multiple-choice items' chance level, said beside the floor (a floor below it on few items is
    sampling, not a reader that avoids the key)."""
    floor_name = "No Context" if reader["floor_row"] == "no_context" else "an empty memory"
    if reader["headroom"] is None:
        lines = ["**Reader headroom: not measured** (no gold-evidence or No Context row; `evaluate.validity` adds "
                 "them). Without it nothing says whether this reader can rank memory methods."]
    else:
        lines = [(f"**Reader headroom: {reader['headroom']:.1f} points** — with gold evidence (the ground truth "
                  f"each item asks about, written as memory) the reader scores {format_interval(reader['ceiling'])}, with "
                  f"{floor_name} {format_interval(reader['floor'])} (multiple-choice Avg, 95 % intervals bootstrapped over "
                  "profiles" + (f"; chance on these items {chance:.1f}" if chance is not None else "") + ").")]
        subs = reader.get("sub_tasks") or []
        if subs:
            lo = min(subs, key=lambda r: r["headroom"])
            lines.append("Per multiple-choice sub-task (gold − " + floor_name + "): "
                         + ", ".join(f"{r['sub_task']} {r['headroom']:+.1f}" for r in subs)
                         + f"; the smallest is {lo['sub_task']}'s.")
    if not reader["can_rank"]:
        why = f" ({reader['why']})" if reader.get("why") and reader["headroom"] is not None else ""
        lines.append(f"**This reader cannot rank the memory methods**{why}: the paper's findings below are **not "
                     f"tested** and no method carries {DISTINCT_MARK.strip()}; the figures are shown, not read as "
                     "verdicts — differences between methods reflect the reader as much as the memory.")
    else:
        above, below = reader["clear"], reader.get("below", [])
        low = (f"{len(below)} lie below it, worse than no memory "
               f"({', '.join(_name(m, row_names) for m in below)})" if below else "")
        lines.append("The reader reads: every validity check passes (section Reader validity).")
        if above:
            lines.append(f"It tells memory from none: on the multiple-choice Avg {len(above)} method(s) lie above "
                         f"{floor_name}'s interval ({', '.join(_name(m, row_names) for m in above)})"
                         + (f"; {low}" if low else "") + "; the paired tests below give each difference.")
        elif below:
            lines.append(f"On the multiple-choice Avg no method lies above {floor_name}'s interval; {low}. The reader "
                         "tells these apart from no memory, but no memory method beats it here.")
        else:
            lines.append(f"On the multiple-choice Avg no method is told apart from {floor_name} (its interval "
                         "overlaps, or the paired test does not distinguish it).")
        apart = reader.get("open_apart") or []
        if apart:
            lines.append("On the open-ended scores (ProfRec, VisGrd) the paired tests tell "
                         + ", ".join(f"{_name(r['method'], row_names)} ({r['diff']:+.1f} [{r['lo']:.1f}, "
                                     f"{r['hi']:.1f}])" for r in apart)
                         + f" apart from {floor_name}, whose open answers are empty: read them with the open-ended "
                         "columns' scale (Likert 1–5 rescaled to 0–100).")
    return [" ".join(lines), ""]


def intervals_table(intervals: pl.DataFrame, order: list[str], row_names: dict[str, str] | None = None) -> str:
    """Markdown table of the 95 % intervals: one row per method / validity row, one ``lo–hi`` cell per table
    column, plus the number of items and profiles behind Avg. A cell bootstrapped over fewer than
    :data:`MIN_INTERVAL_PROFILES` profiles reads ``n/a (k profiles)``: too few distinct resamples to mean much."""
    if not intervals.height:
        return ""
    cells = list(dict.fromkeys(intervals["cell"].to_list()))
    names = {"avg": "Avg", "multimodal": "Multimodal", "real_world": "Real-World", "procedural": "Proc",
             "semantic": "Sem", "episodic": "Epi"}
    lines = ["| Method | " + " | ".join(names.get(c, c) for c in cells) + " | Avg n (profiles) |",
             "|" + "---|" * (len(cells) + 2)]
    by = {(r["method"], r["cell"]): r for r in intervals.to_dicts()}
    for m in order:
        row = [("–" if (m, c) not in by else
                f"n/a ({by[(m, c)]['n_profiles']} profiles)" if (by[(m, c)]["n_profiles"] or 0) < MIN_INTERVAL_PROFILES
                else f"{by[(m, c)]['lo']:.0f}–{by[(m, c)]['hi']:.0f}") for c in cells]
        a = by.get((m, "avg"))
        lines.append(f"| {_name(m, row_names)} | " + " | ".join(row) + " | "
                     + (f"{a['n']} ({a['n_profiles']})" if a else "–") + " |")
    return "\n".join(lines)


def paired_lines(paired: pl.DataFrame, row_names: dict[str, str] | None = None,
                 reads: bool = True, n_profiles: int | None = None) -> list[str]:
    """The "Paired tests" section: each method − baseline on the same items, interval, raw and Holm p; the marker
    only where the row's ``mark`` is set (distinguishable, and ``reads``: the reader passes its gate). With fewer
    than :data:`MIN_INTERVAL_PROFILES` profiles (``n_profiles``) the interval reads ``n/a`` (a bootstrap over
    profiles) and the section says the p values treat items of one person as independent."""
    if not paired.height:
        return []
    mark = "mark" if "mark" in paired.columns else "distinguishable"
    out = ["", "## Paired tests", "",
           ("Each method with a result against No Context and against FileGramOS on the items both answered: "
            "difference in points with its 95 % interval (bootstrap over profiles), exact McNemar p on the "
            "multiple-choice items (b = items only the method got right, c = only the baseline), paired-bootstrap "
            "p on the open-ended scores, Holm-corrected across the methods compared with one baseline. "
            + (f"{DISTINCT_MARK.strip()} = distinguishable (Holm p < 0.05)." if reads else
               f"No {DISTINCT_MARK.strip()}: this reader cannot rank the memory methods (section Reader validity), "
               "so no difference here is read as a result.")
            + (f" With {n_profiles} profile(s) no interval is shown (a bootstrap over fewer than "
               f"{MIN_INTERVAL_PROFILES} profiles has too few distinct resamples), and McNemar's p treats the items "
               "of one person as independent: read them as a check of the machinery, not as evidence."
               if n_profiles is not None and n_profiles < MIN_INTERVAL_PROFILES else "")), "",
           "| Method | vs | items | test | Δ | 95 % interval | b / c | p | p Holm | |", "|---|---|---|---|---|---|---|---|---|---|"]
    few = n_profiles is not None and n_profiles < MIN_INTERVAL_PROFILES
    for r in paired.sort("scope", "baseline", descending=[False, True], maintain_order=True).to_dicts():
        scope = "" if r["scope"] == "avg" else " (open-ended)"
        out.append(f"| {_name(r['method'], row_names)} | {_name(r['baseline'], row_names)}{scope} | {r['n']} | "
                   f"{r['test']} | {r['diff']:+.1f} | "
                   + ("n/a" if few else f"[{r['lo']:.1f}, {r['hi']:.1f}]") + f" | {r['b']} / {r['c']} | "
                   f"{_p(r['p'])} | {_p(r['p_holm'])} | {DISTINCT_MARK.strip() if r[mark] else ''} |")
    return out


def power_lines(power: pl.DataFrame) -> list[str]:
    """The "Power" section: items per sub-task needed to detect a 10-point difference."""
    if not power.height:
        return []
    out = ["", "## Power: items needed per sub-task", "",
           ("Items per method needed to detect a 10-point difference at the sub-task's observed mean score (two-sided "
            "5 % test, power 0.8, two-proportion formula; paired tests need at most this many). Items of one "
            "profile are correlated, so count this as a lower bound when few profiles stand behind the items."), "",
           "| sub-task | items here | mean score | items needed | enough |", "|---|---|---|---|---|"]
    for r in power.to_dicts():
        out.append(f"| {r['sub_task']} | {r['n_items']} | {r['accuracy']:.1f} | {r['items_needed']} | "
                   f"{'yes' if r['enough'] else 'no'} |")
    return out


def reader_lines(reader: dict[str, Any], row_names: dict[str, str] | None = None) -> list[str]:
    """The "Reader validity" section: what each validity row is and whether the reader passes."""
    out = ["", "## Reader validity", "",
           ("Rows that check the reader (the answering backbone), never counted as methods: **gold evidence** = "
            "the ground truth each item asks about written as plain memory text (AttrRec, BehavInf, ProfRec, "
            "VisGrd: the user's attribute or behaviour description; BehavFP: the true author's behaviour; "
            "TraceDis: the true difference between the two users; AnomDet: which session is not the user's; "
            "ShiftAna: which habit changed; FileGrd: as the text sub-task it re-issues); **wrong user** = a "
            "method's memory of another profile, asked the item's question; **option order** = every "
            "multiple-choice item asked again with its options rotated.")]
    wu = reader.get("wrong_user")
    if wu is not None:
        test = (f"paired with No Context on {wu['n_paired']} items: Δ {wu['diff']:+.1f}, exact McNemar p "
                f"{_p(wu['p'])}" if wu["n_paired"] else "no paired items")
        out += ["", (f"- Wrong user: Avg {format_interval(wu)} ({test}); "
                     + (f"undecided: {wu.get('n_profiles')} profile(s) give no interval to fall into."
                        if wu["falls_to_floor"] is None else
                        "falls to No Context (intervals overlap, not distinguishable), as it must."
                        if wu["falls_to_floor"] else
                        "**does not fall to No Context's interval**: the reader scores memory of the wrong person "
                        "differently from no memory (it reads the options' words, not the user).") )]
    order = reader.get("order") or {}
    if order:
        out += [(f"- Option order ({_name(order['method'], row_names)}'s memory, options rotated): the same option "
                 f"chosen for {order['consistency']:.1f} % of {order['n']} items."),
                "- Position bias: share of each letter among the answers vs among the keys — original order: "
                + ", ".join(f"{b['letter']} {b['answers']:.0f} % vs {b['keys']:.0f} %"
                            for b in order.get("bias_original", []))
                + "; rotated asking (letters as shown): "
                + ", ".join(f"{b['letter']} {b['answers']:.0f} % vs {b['keys']:.0f} %" for b in order["bias"])
                + "."]
    elif wu is None:
        out += ["", "- Wrong user and option order: not measured (no method with a memory was evaluated)."]
    mk = reader.get("masked")
    if mk is not None:
        own, low = mk["vs_method"], mk.get("vs_floor") or {}
        out.append(f"- Masked format ({_name(mk['method'], row_names)}'s context with the tier words of its procedural "
                   f"channel masked, every figure kept): Avg {format_interval(mk)}"
                   + (f"; against {_name(mk['method'], row_names)} on the same {own['n']} items Δ {own['diff']:+.1f} "
                      f"[{own['lo']:.1f}, {own['hi']:.1f}] (McNemar p {_p(own['p'])})" if own.get("n") else "")
                   + (f", against the floor Δ {low['diff']:+.1f} (p {_p(low['p'])})" if low.get("n") else "")
                   + ". The drop is how much of that method's score rests on its labels' words rather than on the "
                     "evidence.")
    gate = reader.get("gate")
    if gate:
        names = {"headroom": "gold-evidence headroom", "gold_per_sub_task": "gold evidence per sub-task",
                 "headroom_per_sub_task": "gold − floor per sub-task", "wrong_user": "wrong user", "order": "option order",
                 "letter_skew": "letter share − key share", "profiles": "profiles behind the intervals"}
        out += ["", ("The gate: the reader decides findings and marks methods only when every check passes "
                     f"(a check not measured does not pass). This reader **{'reads' if gate['reads'] else 'cannot rank'}"
                     "**."), "", "| check | measured | needs | passes |", "|---|---|---|---|"]
        for c in gate["checks"]:
            v = c["value"]
            if isinstance(v, dict):
                shown = ", ".join(f"{k} {'–' if x is None else f'{x:.1f}'}" for k, x in sorted(v.items())) or "–"
            else:
                shown = "–" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)
            out.append(f"| {names.get(c['check'], c['check'])} | {shown} | {c['bound']} | "
                       f"{'yes' if c['ok'] else '**no**'} |")
    return out


def _judge_validity_lines(info: dict[str, Any]) -> list[str]:
    """The "Judge validity" section (rows of :func:`filegram_ray.evaluate.scoring.judge_validity`) and the
    language-model answering throughput, when present."""
    out: list[str] = []
    ans = info.get("answering") or {}
    if ans.get("n_requests"):
        per = ans["answer_s"] / ans["n_requests"]
        out += ["", (f"Answering: {ans['n_requests']} prompts through the `ray.data.llm` processor in "
                     f"{ans['answer_s']:.0f} s ({per:.2f} s per item; prompts built in {ans['prompt_s']:.0f} s); "
                     f"judging {info.get('judge_s', 0):.0f} s."
                     + (f" Every method's context is cut to one budget: {ans['context_budget_chars']} characters "
                        f"(≈ {ans['context_budget_tokens']} tokens at 4 characters per token)."
                        if ans.get("context_budget_chars") else " Contexts are not cut (no token budget).")
                     + (f" {ans['n_context_cut']} contexts were cut to `evaluate.max_context_chars`."
                        if ans.get("n_context_cut") else ""))]
    rows = info.get("judge_validity") or []
    if rows:
        expect = {"true_value": "≥ 90", "wrong_value": "between", "empty": "≤ 10"}
        out += ["", "## Judge validity", "",
                (f"The open-ended judge `{rows[0]['judge']}` scoring synthetic answers to the evaluated open-ended "
                 "items: the reference value itself, another value of the attribute, and an empty answer."), "",
                "| answer | n | mean score | expected | ok |", "|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {r['case']} | {r['n']} | {_fmt(r['mean'])} | {expect.get(r['case'], '')} | "
                       f"{'yes' if r['ok'] else '**no**'} |")
    return out


def write_statistics(run: RunDir, stats: dict[str, Any]) -> list[str]:
    """``results/intervals.parquet``, ``paired.parquet``, ``power.parquet`` and ``findings.json`` (verdicts and the
    reader's headroom) of :func:`report_statistics`; returns the paths."""
    import json

    run.write_table("results/intervals.parquet", stats["intervals"])
    run.write_table("results/paired.parquet", stats["paired"])
    run.write_table("results/power.parquet", stats["power"])
    run.write_text("results/findings.json", json.dumps({"findings": stats["findings"], "reader": stats["reader"],
                                                        "methods": stats["methods"],
                                                        "failures": stats.get("failures") or {}},
                                                       indent=1, default=str))
    return ["results/intervals.parquet", "results/paired.parquet", "results/power.parquet", "results/findings.json"]


def write_report(run: RunDir, results: pl.DataFrame, summary: pl.DataFrame, info: dict[str, Any],
                 plots: bool = True) -> list[str]:
    """Write ``results/report.md`` (+ ``subtasks.png``, ``channels.png`` with 95 % error bars,
    ``text_vs_multimodal.png`` when FileGrd items with text twins were evaluated), ``results/timings.json`` and the
    statistics tables of :func:`write_statistics` (seeded with ``info["seed"]``); returns the paths written. The
    report opens with the reader's headroom (:func:`headroom_lines`) and carries the sections Intervals, Paired
    tests, Reader validity, Power and the paper's findings (:mod:`filegram_ray.evaluate.findings`).

    Wall-clock figures (``info["seconds"]``) go to ``results/timings.json`` only, so ``report.md`` and the plots are
    byte-identical across runs with the same seed (REL-report-timing-bytes-differ)."""
    written = []
    modes = {m: d for m, d in (info.get("method_modes") or {}).items() if d}
    row_names = dict(info.get("method_rows") or {})
    bb = info.get("backbone") or {}
    reads = ([f"passages read by {bb['embedder']}"] if bb.get("embedder") else []) + (
        [f"{bb['preselect']} passages per option clause pre-selected"] if bb.get("preselect") else [])
    lines = ["# FileGramBench results", "",
             (f"Items: {info.get('n_items')} · backbone: `{bb.get('name')}`"
              f"{' (' + ', '.join(reads) + ')' if reads else ''} · "
             f"open-ended judge: `{info.get('judge')}` · error rows: {info.get('n_error_rows')} "
             "(wall time: `timings.json`)"), ""]
    run.write_json("results/timings.json", {"evaluate_seconds": info.get("seconds"),
                                            "n_units": info.get("n_units")})
    written.append("results/timings.json")
    budget = (info.get("answering") or {}).get("context_budget_chars")
    stats = report_statistics(results, int(info.get("seed") or 0), budget) if results.height else None
    if stats is not None:  # the report opens with the reader's headroom (can it rank methods?)
        written += write_statistics(run, stats)
        lines += headroom_lines(stats["reader"], row_names, mcq_chance(results))
    if info.get("sample_per_sub_task"):
        lines += [(f"**Sample:** {info['n_items']} of the bank's {info.get('n_bank')} items — a seeded sample of at "
                   f"most {info['sample_per_sub_task']} per sub-task and setting, plus the text twins of the sampled "
                   "FileGrd items. Full bank: `--set evaluate.sample_per_sub_task=null`."), ""]
    if info.get("earlier_methods"):
        lines += [(f"Methods answered by an earlier evaluate of this run (same items and backbone): "
                   f"{', '.join(_name(m, row_names) for m in info['earlier_methods'])}."), ""]
    if summary.height:
        marks = {} if stats is None else {r["method"]: DISTINCT_MARK for r in stats["paired"].to_dicts()
                                          if r["scope"] == "avg" and r["baseline"] == "no_context" and r["mark"]}
        failures = stats["failures"]["methods"] if stats is not None else {}
        for m, e in failures.items():
            if e["failed"]:
                marks[m] = f" — **failed: {e['n_failed']} of {e['n']} items, no result** (section Failed items)"
        counts = column_counts(results)
        lines += [markdown_table(summary, row_names, marks, counts), ""]
        if any(n < FEW_ITEMS for n in counts.values()):
            lines += [f"† fewer than {FEW_ITEMS} items behind the column: one item moves it by "
                      f"{100 // FEW_ITEMS} points or more; read it as an example, not a figure.", ""]
        if marks and any(v == DISTINCT_MARK for v in marks.values()):
            lines += [f"{DISTINCT_MARK.strip()} = distinguishable from No Context on the multiple-choice items "
                      "(exact McNemar, Holm-corrected across methods, p < 0.05; section Paired tests).", ""]
    else:
        lines += ["No items were evaluated.", ""]
    if modes:
        lines += ["Which mechanism ran for each method (with this backbone):", ""]
        lines += [f"- {_name(m, row_names)}: {d}" for m, d in modes.items()]
        lines.append("")
    lines += [
        "How to read this table:",
        ("- Scores are accuracy % for multiple-choice sub-tasks and, for open-ended sub-tasks (ProfRec, VisGrd), "
         "the per-attribute Likert score 1–5 rescaled as (s−1)/4·100 — our choice; the paper does not publish the "
         "rescaling rule. Failed items (errors: no usable reply, a reply stating no single option, a failed "
         "ingest) have no score and are left out of every number; `errors` counts them, section Failed items "
         "says why, and a method with more than half its items failed has no result."),
        ("- Proc/Sem/Epi average over the items labelled with that channel; Avg is the question-count-weighted "
        "accuracy over the multiple-choice items (reference §8.4 note); Multimodal is the accuracy over the items of "
        "the Multimodal setting (FileGrd: the outputs shown as rendered files, reference §9.1 T4)."),
        ("- Real-World is the mean score over the items of the Real-World setting (VisGrd: methods ingest the file "
         "operations read back from the first half of a screen recording, reference §9.1 T4 / §11)."),
        "- In. = stored memory tokens per ingest, Out. = retrieved context tokens per query, both len(text)//4.",
        ("- Validity rows: the oracle answers from the key (must be 100); random picks uniformly with a seed "
        "(must sit near chance, i.e. the mean of 1/n_choices); gold evidence, wrong user, empty memory and option "
        "order check the reader (section Reader validity). Validity rows are never methods."),
        ("- Every score has a 95 % interval (section Intervals: bootstrap over profiles, 2,000 seeded replicates; "
         "`results/intervals.parquet`)."),
    ]
    if info.get("backbone", {}).get("name") == "lexical":
        lines.append("- Backbone `lexical` is the no-LLM CPU default: it picks the option whose words occur in "
                     "the context. It cannot reason; these numbers test the plumbing, not the methods' quality.")
    chance = mcq_chance(results)
    if chance is not None:
        lines.append(f"- Chance level of these multiple-choice items: {chance:.1f}.")
    if stats is not None:
        lines += ["", "## Intervals", "",
                  ("95 % intervals (low–high, points) of every cell above, by bootstrap over profiles: a replicate "
                   "draws profiles with replacement and keeps all their items, because the items of one profile "
                   "share its trajectories."), "",
                  intervals_table(stats["intervals"], list(dict.fromkeys(results["method"].to_list())), row_names)]
        lines += paired_lines(stats["paired"], row_names, bool(stats["reader"]["can_rank"]),
                              (stats["reader"].get("floor") or {}).get("n_profiles"))
        lines += reader_lines(stats["reader"], row_names)
        lines += power_lines(stats["power"])
        from filegram_ray.evaluate.findings import findings_lines

        lines += [""] + findings_lines(stats["findings"])
    lines += _judge_validity_lines(info)
    twins = text_vs_multimodal(results)
    if twins.height:
        lines += ["", "## Text vs Multimodal", "",
                  ("The same questions in both settings: each FileGrd item re-issues a T1–T3 item with the outputs "
                   "shown as rendered files (reference §9.1 T4). Text = accuracy on those text items, Multimodal = "
                   "on their FileGrd twins, Δ = Multimodal − Text in points (paper §8.4: text-only methods drop "
                   f"toward the No Context baseline, FileGramOS least). Multimodal content: "
                   f"`{info.get('multimodal_content', '?')}`."), "",
                  twin_markdown_table(twins, row_names)]
        if plots:
            run.write_bytes("results/text_vs_multimodal.png", _twin_png(twins, row_names))
            written.append("results/text_vs_multimodal.png")
            lines += ["", "![text vs multimodal](text_vs_multimodal.png)"]
    lines += _recovery_section(run)
    if stats is not None:
        from filegram_ray.evaluate.failures import failure_lines

        lines += failure_lines(stats["failures"], lambda m: _name(m, row_names))
    if plots and summary.height:
        subs = [s for s in SUB_TASK_ORDER if s in summary.columns]
        iv = stats["intervals"] if stats is not None else None
        shown = summary.filter(~pl.col("failed")) if "failed" in summary.columns else summary  # no bar of 0 for
        # a method with no result
        run.write_bytes("results/subtasks.png",
                        _bar_png(shown, subs, "Score per sub-task (95 % intervals)", "score (0–100)", row_names, iv))
        chans = [c for c in CHANNELS if c in summary.columns]
        run.write_bytes("results/channels.png", _bar_png(shown, chans, "Score per memory channel (95 % intervals)",
                                                         "score (0–100)", row_names, iv))
        written += ["results/subtasks.png", "results/channels.png"]
        lines += ["", "![per sub-task](subtasks.png)", "", "![per channel](channels.png)"]
    text = "\n".join(lines) + "\n"
    if run.exists("results/validity.json"):  # `filegram validity RUN` has run: keep its summary section
        from filegram_ray.validity.report import merge_report, summary_lines

        text = merge_report(text, summary_lines(run.read_json("results/validity.json")))
    run.write_text("results/report.md", text)
    written.append("results/report.md")
    return written
