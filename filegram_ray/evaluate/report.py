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

from filegram_ray.evaluate.scoring import CHANNELS, SUB_TASK_ORDER
from filegram_ray.storage import RunDir

__all__ = ["VALIDITY_METHODS", "markdown_table", "text_vs_multimodal", "twin_markdown_table", "write_report"]

#: rows that check the benchmark and the reader, never methods (:mod:`filegram_ray.evaluate.reader_validity`)
VALIDITY_METHODS = ("oracle", "random", "empty", "gold", "wrong_user", "order")
#: row names of the validity rows (they are not registered methods)
_VALIDITY_NAMES = {"oracle": "Oracle (validity)", "random": "Random (validity)", "empty": "Empty memory (validity)",
                   "gold": "Gold evidence (validity)", "wrong_user": "Wrong user (validity)",
                   "order": "Option order (validity)"}


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


def markdown_table(summary: pl.DataFrame, row_names: dict[str, str] | None = None,
                   marks: dict[str, str] | None = None) -> str:
    """The paper-style Markdown table of a :func:`summarise` frame (``row_names``: the run's ``method_rows``, see
    :func:`_name`; ``marks``: a suffix per method, e.g. the "distinguishable from No Context" marker)."""
    subs = [s for s in SUB_TASK_ORDER if s in summary.columns]
    subs += [c for c in summary.columns if c not in subs and c not in {
        "method", "n", "n_errors", "avg", "tokens_in", "tokens_out", "multimodal", "real_world", *CHANNELS}]
    mm = ["multimodal"] if "multimodal" in summary.columns else []
    if "real_world" in summary.columns and summary["real_world"].is_not_null().any():  # only with such items
        mm.append("real_world")
    names = {"multimodal": "Multimodal", "real_world": "Real-World"}
    head = ["Method", "In.", "Out.", *subs, "Proc", "Sem", "Epi", "Avg", *[names[c] for c in mm], "n", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = summary.to_dicts()
    main = [r for r in rows if r["method"] not in VALIDITY_METHODS]
    valid = [r for r in rows if r["method"] in VALIDITY_METHODS]
    for block, is_valid in ((main, False), (valid, True)):
        if is_valid and block:
            lines.append("| " + " | ".join(["*validity*"] + [""] * (len(head) - 1)) + " |")
        for r in block:
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
    the method has a row for both items count; open-ended items are left out. Empty frame when no pair exists.

    Columns: method, n_pairs, text, multimodal, delta (floats on 0–100).
    """
    schema = {"method": pl.Utf8, "n_pairs": pl.Int64, "text": pl.Float64, "multimodal": pl.Float64,
              "delta": pl.Float64}
    if not results.height or "text_twin" not in results.columns:
        return pl.DataFrame(schema=schema)
    mm = (results.filter((pl.col("setting") == "multimodal") & (pl.col("text_twin") != "") & ~pl.col("is_open"))
          .select("method", "question_id", "text_twin", pl.col("score").fill_null(0.0).alias("mm_score")))
    txt = results.select("method", pl.col("question_id").alias("text_twin"),
                         pl.col("score").fill_null(0.0).alias("text_score"))
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


#: marker of a method distinguishable from No Context (Holm-corrected exact McNemar on the multiple-choice items)
DISTINCT_MARK = " ◆"
#: headroom (gold evidence − No Context, points) below which the report says the reader cannot rank methods
MIN_HEADROOM = 20.0
#: profiles below which a bootstrap over profiles has too few distinct replicates for its interval to mean much
#: (2 profiles give 3 distinct resamples); the same floor as leave-profiles-out recovery (validity.core)
MIN_INTERVAL_PROFILES = 5


def report_statistics(results: pl.DataFrame, seed: int = 0) -> dict[str, Any]:
    """Everything the report says about how sure it is (:mod:`filegram_ray.stats`), from the results table.

    Returns ``{intervals, paired, power, findings, reader, methods}``: ``intervals`` per (method or validity row,
    cell) with 95 % profile-bootstrap bounds; ``paired`` every method against No Context and FileGramOS (McNemar /
    paired bootstrap, Holm); ``power`` items per sub-task to detect 10 points; ``findings`` F1–F6
    (:func:`filegram_ray.evaluate.findings.decide_findings`); ``reader`` the headroom and validity checks
    (:func:`reader_summary`); ``methods`` the rows that count as methods (validity rows never do).
    """
    from filegram_ray.evaluate.findings import decide_findings
    from filegram_ray.stats import cell_intervals, paired_table, power_table

    methods = [m for m in dict.fromkeys(results["method"].to_list()) if m not in VALIDITY_METHODS] \
        if results.height else []
    intervals = cell_intervals(results, sub_tasks=SUB_TASK_ORDER, channels=CHANNELS, seed=seed)
    paired = paired_table(results, methods, ["no_context", "filegramos"], seed=seed)
    power = power_table(results, methods, sub_tasks=SUB_TASK_ORDER)
    findings = decide_findings(results, methods, seed=seed)
    return {"intervals": intervals, "paired": paired, "power": power, "findings": findings, "methods": methods,
            "reader": reader_summary(results, intervals, paired, methods)}


def _ci(intervals: pl.DataFrame, method: str, cell: str = "avg") -> dict[str, Any] | None:
    rows = intervals.filter((pl.col("method") == method) & (pl.col("cell") == cell)).to_dicts() \
        if intervals.height else []
    return rows[0] if rows else None


def reader_summary(results: pl.DataFrame, intervals: pl.DataFrame, paired: pl.DataFrame,
                   methods: list[str]) -> dict[str, Any]:
    """The reader's checks on the multiple-choice Avg: ``floor`` (No Context's row, else the empty-memory row),
    ``ceiling`` (gold evidence), ``headroom`` = ceiling − floor in points (None without either), ``can_rank`` (False
    when the headroom is under :data:`MIN_HEADROOM`, the floor's interval rests on fewer than
    :data:`MIN_INTERVAL_PROFILES` profiles, or no method is told apart from the floor), ``clear`` (methods whose Avg
    interval lies above the floor's and whose paired test against it is distinguishable, when ``paired`` holds
    one), ``below`` (the same, below it: the reader tells them apart too, but as worse than no memory),
    ``interval_only`` (intervals apart but the paired test not distinguishable: not counted), ``wrong_user`` (its
    interval and whether its mean falls inside the floor's interval), ``order``
    (:func:`~filegram_ray.evaluate.reader_validity.order_stats`)."""
    from filegram_ray.evaluate.reader_validity import memory_method, order_stats

    have = set(results["method"].to_list()) if results.height else set()
    floor_id = "no_context" if "no_context" in have else "empty"
    floor, ceil = _ci(intervals, floor_id), _ci(intervals, "gold")
    out: dict[str, Any] = {"floor_row": floor_id, "floor": floor, "ceiling": ceil, "headroom": None,
                           "can_rank": None, "clear": [], "below": [], "interval_only": [], "why": "",
                           "wrong_user": None, "order": {}}
    others = [m for m in methods if m != floor_id]
    tested = {r["method"]: bool(r["distinguishable"]) for r in paired.filter(
        (pl.col("scope") == "avg") & (pl.col("baseline") == floor_id)).iter_rows(named=True)} \
        if paired.height and {"scope", "baseline", "method", "distinguishable"} <= set(paired.columns) else {}
    if floor is not None:
        for m in others:
            c = _ci(intervals, m)
            side = "clear" if c is not None and c["lo"] > floor["hi"] else \
                "below" if c is not None and c["hi"] < floor["lo"] else None
            if side is not None:
                out[side if tested.get(m, True) else "interval_only"].append(m)
    n_prof = (floor or {}).get("n_profiles")
    if floor is not None and ceil is not None:
        h = ceil["mean"] - floor["mean"]
        out["headroom"] = h
        if h < MIN_HEADROOM:
            out.update(can_rank=False, why=f"headroom {h:.1f} < {MIN_HEADROOM:.0f} points")
        elif n_prof is not None and n_prof < MIN_INTERVAL_PROFILES:
            out.update(can_rank=False, why=f"the intervals are bootstrapped over {n_prof} profile(s); fewer than "
                                           f"{MIN_INTERVAL_PROFILES} give too few distinct resamples to mean much")
        elif others and not out["clear"] and not out["below"]:
            out.update(can_rank=False, why="no method is told apart from No Context (its interval overlaps, or "
                                           "the paired test does not distinguish it)")
        else:
            out.update(can_rank=True)
    wu = _ci(intervals, "wrong_user")
    if wu is not None and floor is not None:
        from filegram_ray.stats import paired_test

        t = paired_test(results, "wrong_user", floor_id, ~pl.col("is_open"))
        overlap = wu["lo"] <= floor["hi"] and floor["lo"] <= wu["hi"]
        out["wrong_user"] = {**wu, "p": t["p"], "diff": t["diff"], "n_paired": t["n"],
                             "falls_to_floor": overlap and (t["p"] is None or t["p"] >= 0.05)}
    out["order"] = order_stats(results, memory_method(methods))
    return out


def _p(p: float | None) -> str:
    """A p-value for the report; "–" when there is no test (e.g. all items from one profile)."""
    return "–" if p is None else f"{p:.3g}"


def _iv(c: dict[str, Any] | None) -> str:
    return "–" if c is None else f"{c['mean']:.1f} [{c['lo']:.1f}, {c['hi']:.1f}]"


def headroom_lines(reader: dict[str, Any], row_names: dict[str, str] | None = None) -> list[str]:
    """The report's opening paragraph: the reader's headroom and, in words, whether it can rank methods."""
    floor_name = "No Context" if reader["floor_row"] == "no_context" else "an empty memory"
    if reader["headroom"] is None:
        return ["**Reader headroom: not measured** (no gold-evidence or No Context row; `evaluate.validity` adds "
                "them). Without it nothing says whether this reader can rank memory methods.", ""]
    lines = [(f"**Reader headroom: {reader['headroom']:.1f} points** — with gold evidence (the ground truth each "
              f"item asks about, written as memory) the reader scores {_iv(reader['ceiling'])}, with "
              f"{floor_name} {_iv(reader['floor'])} (multiple-choice Avg, 95 % intervals bootstrapped over "
              "profiles).")]
    if reader["can_rank"] is False:
        lines.append(f"**This reader cannot rank the memory methods** ({reader['why']}): differences between "
                     "methods below reflect the reader as much as the memory.")
    else:
        above, below = reader["clear"], reader.get("below", [])
        low = (f"{len(below)} lie below it, worse than no memory "
               f"({', '.join(_name(m, row_names) for m in below)})" if below else "")
        if above:
            lines.append(f"The reader can tell memory from none: {len(above)} method(s) lie above {floor_name}'s "
                         f"interval ({', '.join(_name(m, row_names) for m in above)})" + (f"; {low}" if low else "")
                         + "; the paired tests below give each difference.")
        else:
            lines.append(f"No method lies above {floor_name}'s interval; {low}. The reader tells these apart from "
                         "no memory, but no memory method beats it here.")
    return [" ".join(lines), ""]


def intervals_table(intervals: pl.DataFrame, order: list[str], row_names: dict[str, str] | None = None) -> str:
    """Markdown table of the 95 % intervals: one row per method / validity row, one ``lo–hi`` cell per table
    column, plus the number of items and profiles behind Avg."""
    if not intervals.height:
        return ""
    cells = list(dict.fromkeys(intervals["cell"].to_list()))
    names = {"avg": "Avg", "multimodal": "Multimodal", "real_world": "Real-World", "procedural": "Proc",
             "semantic": "Sem", "episodic": "Epi"}
    lines = ["| Method | " + " | ".join(names.get(c, c) for c in cells) + " | Avg n (profiles) |",
             "|" + "---|" * (len(cells) + 2)]
    by = {(r["method"], r["cell"]): r for r in intervals.to_dicts()}
    for m in order:
        row = [f"{by[(m, c)]['lo']:.0f}–{by[(m, c)]['hi']:.0f}" if (m, c) in by else "–" for c in cells]
        a = by.get((m, "avg"))
        lines.append(f"| {_name(m, row_names)} | " + " | ".join(row) + " | "
                     + (f"{a['n']} ({a['n_profiles']})" if a else "–") + " |")
    return "\n".join(lines)


def paired_lines(paired: pl.DataFrame, row_names: dict[str, str] | None = None) -> list[str]:
    """The "Paired tests" section: each method − baseline on the same items, interval, raw and Holm p."""
    if not paired.height:
        return []
    out = ["", "## Paired tests", "",
           ("Each method against No Context and against FileGramOS on the same items: difference in points with "
            "its 95 % interval (bootstrap over profiles), exact McNemar p on the multiple-choice items (b = items "
            "only the method got right, c = only the baseline), paired-bootstrap p on the open-ended scores, "
            f"Holm-corrected across the methods compared with one baseline. {DISTINCT_MARK.strip()} = "
            "distinguishable (Holm p < 0.05)."), "",
           "| Method | vs | items | test | Δ | 95 % interval | b / c | p | p Holm | |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in paired.sort("scope", "baseline", descending=[False, True], maintain_order=True).to_dicts():
        scope = "" if r["scope"] == "avg" else " (open-ended)"
        out.append(f"| {_name(r['method'], row_names)} | {_name(r['baseline'], row_names)}{scope} | {r['n']} | "
                   f"{r['test']} | {r['diff']:+.1f} | [{r['lo']:.1f}, {r['hi']:.1f}] | {r['b']} / {r['c']} | "
                   f"{_p(r['p'])} | {_p(r['p_holm'])} | {DISTINCT_MARK.strip() if r['distinguishable'] else ''} |")
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
        out += ["", (f"- Wrong user: Avg {_iv(wu)} ({test}); "
                     + ("falls to No Context (intervals overlap, not distinguishable), as it must."
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
                                                        "methods": stats["methods"]}, indent=1, default=str))
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
    lines = ["# FileGramBench results", "",
             (f"Items: {info.get('n_items')} · backbone: `{info.get('backbone', {}).get('name')}` · "
             f"open-ended judge: `{info.get('judge')}` · error rows: {info.get('n_error_rows')} "
             "(wall time: `timings.json`)"), ""]
    run.write_json("results/timings.json", {"evaluate_seconds": info.get("seconds"),
                                            "n_units": info.get("n_units")})
    written.append("results/timings.json")
    stats = report_statistics(results, int(info.get("seed") or 0)) if results.height else None
    if stats is not None:  # the report opens with the reader's headroom (issue #30)
        written += write_statistics(run, stats)
        lines += headroom_lines(stats["reader"], row_names)
    if info.get("sample_per_sub_task"):
        lines += [(f"**Sample:** {info['n_items']} of the bank's {info.get('n_bank')} items — a seeded sample of at "
                   f"most {info['sample_per_sub_task']} per sub-task and setting, plus the text twins of the sampled "
                   "FileGrd items. Full bank: `--set evaluate.sample_per_sub_task=null`."), ""]
    if info.get("earlier_methods"):
        lines += [(f"Methods answered by an earlier evaluate of this run (same items and backbone): "
                   f"{', '.join(_name(m, row_names) for m in info['earlier_methods'])}."), ""]
    if summary.height:
        marks = {} if stats is None else {r["method"]: DISTINCT_MARK for r in stats["paired"].to_dicts()
                                          if r["scope"] == "avg" and r["baseline"] == "no_context"
                                          and r["distinguishable"]}
        lines += [markdown_table(summary, row_names, marks), ""]
        if stats is not None and stats["paired"].height:
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
        ("- Scores are accuracy % for multiple-choice sub-tasks (unanswerable or failed items count as wrong) and, "
        "for open-ended sub-tasks (ProfRec, VisGrd), the per-attribute Likert score 1–5 rescaled as (s−1)/4·100 — "
        "our choice; the paper does not publish the rescaling rule."),
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
    if results.height:
        mcq = results.filter(~pl.col("is_open"))
        if mcq.height:
            chance = float((1.0 / mcq.filter(pl.col("method") == mcq["method"][0])["n_choices"]
                            .cast(pl.Float64)).mean() * 100)
            lines.append(f"- Chance level of these multiple-choice items: {chance:.1f}.")
    if stats is not None:
        lines += ["", "## Intervals", "",
                  ("95 % intervals (low–high, points) of every cell above, by bootstrap over profiles: a replicate "
                   "draws profiles with replacement and keeps all their items, because the items of one profile "
                   "share its trajectories."), "",
                  intervals_table(stats["intervals"], list(dict.fromkeys(results["method"].to_list())), row_names)]
        lines += paired_lines(stats["paired"], row_names)
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
    errs = results.filter(pl.col("status") != "ok") if results.height else results
    if errs.height:
        lines += ["", "## Errors (first 10)", ""]
        for r in errs.head(10).iter_rows(named=True):
            lines.append(f"- `{r['method']}` `{r['question_id']}`: {r['error'][:300]}")
    if plots and summary.height:
        subs = [s for s in SUB_TASK_ORDER if s in summary.columns]
        iv = stats["intervals"] if stats is not None else None
        run.write_bytes("results/subtasks.png",
                        _bar_png(summary, subs, "Score per sub-task (95 % intervals)", "score (0–100)", row_names,
                                 iv))
        chans = [c for c in CHANNELS if c in summary.columns]
        run.write_bytes("results/channels.png", _bar_png(summary, chans, "Score per memory channel (95 % intervals)",
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
