"""``results/report.md`` and the PNG plots of the evaluate stage.

The table mirrors the paper's main table (reference §8.4, Table 3): one row per method, columns In./Out. (tokens),
one column per sub-task present, the Proc/Sem/Epi channel columns, Avg and Multimodal (accuracy on the multimodal
setting's items, i.e. FileGrd); the validity rows (oracle, random) sit below a separator. A second table,
"Text vs Multimodal" (+ ``text_vs_multimodal.png``), compares each method on the same questions in both settings
(:func:`text_vs_multimodal`). Every number is computed from ``results/results.parquet`` by
:func:`filegram_ray.evaluate.scoring.summarise`; nothing is typed in.
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from filegram_ray.evaluate.scoring import CHANNELS, SUB_TASK_ORDER
from filegram_ray.storage import RunDir

__all__ = ["VALIDITY_METHODS", "markdown_table", "text_vs_multimodal", "twin_markdown_table", "write_report"]

VALIDITY_METHODS = ("oracle", "random")
#: row names of the validity rows (they are not registered methods)
_VALIDITY_NAMES = {"oracle": "Oracle (validity)", "random": "Random (validity)"}


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


def markdown_table(summary: pl.DataFrame, row_names: dict[str, str] | None = None) -> str:
    """The paper-style Markdown table of a :func:`summarise` frame (``row_names``: the run's ``method_rows``, see
    :func:`_name`)."""
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
            cells = [_name(r["method"], row_names),
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
             row_names: dict[str, str] | None = None) -> bytes:
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
        ax.bar(x + (i - (len(methods) - 1) / 2) * width, vals, width, label=_name(m, row_names))
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


def write_report(run: RunDir, results: pl.DataFrame, summary: pl.DataFrame, info: dict[str, Any],
                 plots: bool = True) -> list[str]:
    """Write ``results/report.md`` (+ ``subtasks.png``, ``channels.png``, ``text_vs_multimodal.png`` when FileGrd
    items with text twins were evaluated) and ``results/timings.json``; returns the paths written.

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
    if info.get("sample_per_sub_task"):
        lines += [(f"**Sample:** {info['n_items']} of the bank's {info.get('n_bank')} items — a seeded sample of at "
                   f"most {info['sample_per_sub_task']} per sub-task and setting, plus the text twins of the sampled "
                   "FileGrd items. Full bank: `--set evaluate.sample_per_sub_task=null`."), ""]
    if info.get("earlier_methods"):
        lines += [(f"Methods answered by an earlier evaluate of this run (same items and backbone): "
                   f"{', '.join(_name(m, row_names) for m in info['earlier_methods'])}."), ""]
    if summary.height:
        lines += [markdown_table(summary, row_names), ""]
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
        "(must sit near chance, i.e. the mean of 1/n_choices)."),
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
        run.write_bytes("results/subtasks.png",
                        _bar_png(summary, subs, "Score per sub-task", "score (0–100)", row_names))
        chans = [c for c in CHANNELS if c in summary.columns]
        run.write_bytes("results/channels.png", _bar_png(summary, chans, "Score per memory channel",
                                                         "score (0–100)", row_names))
        written += ["results/subtasks.png", "results/channels.png"]
        lines += ["", "![per sub-task](subtasks.png)", "", "![per channel](channels.png)"]
    text = "\n".join(lines) + "\n"
    if run.exists("results/validity.json"):  # `filegram validity RUN` has run: keep its summary section
        from filegram_ray.validity.core import merge_report, summary_lines

        text = merge_report(text, summary_lines(run.read_json("results/validity.json")))
    run.write_text("results/report.md", text)
    written.append("results/report.md")
    return written
