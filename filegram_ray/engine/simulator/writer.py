"""Data files and charts of the persona simulator (F tier, TIER_TARGETS §2.6): the figures a session read
(:func:`chart_figures`, from its :class:`~.knowledge.Knowledge`), written as a small CSV (:func:`csv_text`), an SVG
bar chart (:func:`svg_chart`) or a PNG one (:func:`png_chart`). Text documents are written by :mod:`.genres`."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from filegram_ray.engine.simulator.genres import DocSpec, cjk_ratio, source_name
from filegram_ray.engine.simulator.knowledge import Knowledge

__all__ = ["DocSpec", "Figure", "chart_figures", "cjk_ratio", "csv_text", "png_chart", "source_name", "svg_chart"]


@dataclass
class Figure:
    """A number read: ``label`` (what it measures), ``value`` (float), ``raw`` text, ``source`` path."""

    label: str
    value: float
    raw: str
    source: str


_NUM = re.compile(r"-?\$?(\d[\d,]*(?:\.\d+)?)\s?([MBK]|bn)?")
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9}


def _value(raw: str) -> float | None:
    m = _NUM.fullmatch(raw.strip().rstrip("%"))
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:
        return None


#: The value slot charted per statement key, and the words that say what it measures.
_CHARTED = {"revenue": ("amt", "revenue"), "budget": ("amt", "budget"), "csat": ("pct", "satisfaction %"),
            "margin": ("pct", "gross margin %"), "target": ("price", "target price"), "legal_aid": ("amt", "legal aid"),
            "weight": ("kg", "weight kg"), "target_met": ("n", "accounts signed"), "heart": ("n", "resting HR"),
            "runtime": ("n", "minutes"), "capex": ("amt", "capex"), "fcf": ("amt", "free cash flow")}


def chart_figures(kn: Knowledge, k: int = 6) -> list[Figure]:
    """Up to ``k`` figures read in the session (a chart's last values, table rows' first numeric column, and the
    main number of statements that carry one), falling back to the number of facts per source."""
    out: list[Figure] = []
    seen: set[str] = set()
    for s in kn.statements:
        if len(out) >= k:
            break
        if s.key == "series":
            label, raw = f"{s.subject} {s.slots['last_at']}", s.slots["last"]
        elif s.key == "row":
            num = next(((h, v) for h, v in s.slots.items() if not h.startswith("_") and _value(v) is not None
                        and not re.fullmatch(r"\d{4}(-\d\d){0,2}", v)), None)
            if num is None:
                continue
            label, raw = f"{s.subject} {num[0]}", num[1]
        elif s.key in _CHARTED and s.slots.get(_CHARTED[s.key][0]):
            label, raw = f"{s.subject or source_name(s.source)} {_CHARTED[s.key][1]}", s.slots[_CHARTED[s.key][0]]
        else:
            continue
        v = _value(raw)
        if v is None or label in seen or abs(v) >= 1e12:
            continue
        seen.add(label)
        out.append(Figure(label.strip(), v, raw, s.source))
    if len(out) >= 2:
        return out
    by: dict[str, int] = {}
    for s in kn.statements:
        by[source_name(s.source)] = by.get(source_name(s.source), 0) + 1
    return [Figure(n, float(c), str(c), n) for n, c in list(by.items())[:k]] or [Figure("none", 0.0, "0", "task")]


def csv_text(figs: list[Figure]) -> str:
    """A small CSV (TIER_TARGETS §2.6: 150–600 chars) of ``item,value,source``."""
    import csv

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item", "value", "source"])
    for f in figs[:8]:
        w.writerow([f.label, f"{f.value:g}", source_name(f.source)])
    return buf.getvalue()


def svg_chart(figs: list[Figure], title: str) -> str:
    """A compact, valid SVG bar chart (TIER_TARGETS §2.6: 600–1,500 chars)."""
    figs = figs[:5]
    vmax = max((abs(f.value) for f in figs), default=1.0) or 1.0
    bars = []
    for i, f in enumerate(figs):
        h = int(80 * abs(f.value) / vmax) + 1
        x = 20 + i * 44
        bars.append(f'<rect x="{x}" y="{100 - h}" width="30" height="{h}" fill="#4a7"/>'
                    f'<text x="{x}" y="114" font-size="7">{_xml(f.label[:9])}</text>')
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="250" height="120">'
            f'<text x="4" y="10" font-size="8">{_xml(title[:40])}</text>' + "".join(bars) + "</svg>\n")


def png_chart(figs: list[Figure], title: str) -> bytes:
    """A small PNG bar chart rendered with matplotlib's Agg backend (2×1.4 in at 60 dpi)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(2.0, 1.4), dpi=60)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(figs[:5])), [f.value for f in figs[:5]], color="#4a7")
    ax.set_xticks(range(len(figs[:5])), [f.label[:6] for f in figs[:5]], fontsize=5)
    ax.tick_params(labelsize=5)
    ax.set_title(title[:30], fontsize=6)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _xml(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "'")
