"""Document composition for the persona simulator: Markdown deliverables, auxiliaries, scratch notes, CSV data files
and SVG/PNG charts, all built from a :class:`~filegram_ray.engine.simulator.notebook.Notebook`.

The shape of a document comes from a :class:`DocSpec` whose numbers are set by the agent from TIER_TARGETS:
line counts (§2.2 B table: B-L main 200–350, B-M 80–150 / English 80–100, B-R 20–60), heading depth (B-L 4,
B-M 3, B-R ≤ 2; flat_list caps at 2, §4), table rows (F-L/F-M 6–30, F-R 0, §2.6) and figure references (F-L).
Language and tone follow §4 (Chinese profiles write Chinese, ≥ 50 % CJK letters; friendly = reader address and
warm closings; casual = short sentences and fragments).
"""

from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from filegram_ray.engine.simulator.notebook import Figure, Notebook

_CJK = re.compile(r"[\u4e00-\u9fff]")

SECTIONS = {
    "en": ["Overview", "Key Findings", "Evidence by Source", "Figures and Data", "People and Parties",
           "Timeline and Deadlines", "Risks and Open Issues", "Recommendations", "Next Steps", "Cross-checks",
           "Method Notes", "Remaining Questions"],
    "zh": ["概述", "主要发现", "分来源证据", "数据与指标", "相关人员与机构", "时间线与截止日期", "风险与待解决问题",
           "建议", "后续步骤", "交叉核对", "方法说明", "遗留问题"],
}
SUBSECTIONS = {"en": ["Context", "Details", "Implications", "Supporting Notes"],
               "zh": ["背景", "细节", "影响", "补充说明"]}

FRAMES = {
    ("en", "professional"): ["{x} ({s}).", "According to {s}, {x}.", "{s} records that {x}.",
                             "Evidence from {s}: {x}."],
    ("en", "friendly"): ["You'll find in {s} that {x}.", "Good to know: {x} ({s}).", "Worth a look: {x} ({s}).",
                         "{s} tells us {x}."],
    ("en", "casual"): ["{x} (per {s})", "FYI: {x}", "{s}: {x}", "Quick note, {x}"],
    ("zh", "professional"): ["根据{s}，{x}。", "{s}显示：{x}。", "资料{s}指出，{x}。", "证据来自{s}：{x}。"],
    ("zh", "friendly"): ["你可以在{s}里看到：{x}。", "值得留意：{x}（见{s}）。", "{s}提到了{x}，供你参考。"],
    ("zh", "casual"): ["{s}里写着：{x}，挺关键的。", "顺便说下，{x}（{s}）。", "{x}，见{s}哈。"],
}
ZH_COMMENT = {
    "professional": ["该信息需要在后续工作中重点跟进", "这一点与其他资料可以相互印证", "建议将其作为决策依据之一",
                     "相关数据仍需进一步核实", "此项对整体判断影响较大"],
    "friendly": ["这一点你可以多留意一下", "希望这条信息对你有帮助", "有需要的话我们可以再一起看看"],
    "casual": ["先记一下，回头再看", "这个挺重要的", "大概就是这样"],
}
INTRO = {
    ("en", "professional"): "This document covers {t}. It draws on {n} source files reviewed for this task.",
    ("en", "friendly"): "Hi! Here is what I put together on {t}. I went through {n} files so you don't have to.",
    ("en", "casual"): "Quick rundown on {t}. Went through {n} files.",
    ("zh", "professional"): "本文档围绕“{t}”展开，依据本次任务中查阅的{n}份资料整理而成。",
    ("zh", "friendly"): "你好！这是关于“{t}”的整理结果，我看了{n}份资料，希望对你有帮助。",
    ("zh", "casual"): "关于“{t}”的简单梳理，翻了{n}个文件。",
}
CLOSING = {
    ("en", "professional"): "End of document.",
    ("en", "friendly"): "Hope this helps. Let me know if you want me to dig deeper into any part!",
    ("en", "casual"): "That's it for now.",
    ("zh", "professional"): "以上为本文档全部内容。",
    ("zh", "friendly"): "希望这些整理对你有帮助，有问题随时找我！",
    ("zh", "casual"): "先这样，有事再说。",
}


@dataclass
class DocSpec:
    """Shape of one text document.

    Attributes:
        title: heading text.  lines: target line count (blank lines included).  max_depth: deepest heading level.
        structure: hierarchical | flat_list | narrative.  table_rows: data rows of one Markdown table (0 = none).
        figure_refs: ``(number, relpath)`` visuals to reference ("Figure 1" / "图1").  lang / tone: §4.
        max_line_chars: cap on one content line (controls the char bands).  numbered: numbered section titles.
        topic: what the document is about (used in the intro).  closing: add the tone's closing line.
    """

    title: str
    lines: int
    max_depth: int = 3
    structure: str = "hierarchical"
    table_rows: int = 0
    figure_refs: list[tuple[int, str]] = field(default_factory=list)
    lang: str = "en"
    tone: str = "professional"
    max_line_chars: int = 90
    numbered: bool = False
    topic: str = ""
    closing: bool = True
    sections: list[str] | None = None


def cjk_ratio(text: str) -> float:
    """Share of CJK characters among letters (TIER_TARGETS §4 language signature)."""
    letters = [c for c in text if c.isalpha()]
    return sum(bool(_CJK.match(c)) for c in letters) / max(len(letters), 1)


def short_src(path: str) -> str:
    stem = PurePosixPath(path).stem
    return stem[:28]


def _cut(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    cut = text[:n]
    sp = cut.rfind(" ")
    if sp > n * 0.6:
        cut = cut[:sp]
    return cut.rstrip(" ,;:·-") + "…"


class FactStream:
    """Cycles through the notebook's lines (round-robin over sources), phrasing each one in the persona's
    language and tone; after one full pass it restates facts as cross-checks so long documents stay grounded."""

    def __init__(self, nb: Notebook, rng: random.Random, lang: str, tone: str, fallback: list[str]):
        self.items = nb.all_lines() or [("task", t) for t in fallback if t]
        if not self.items:
            self.items = [("task", "no input material was available")]
        self.rng, self.lang, self.tone = rng, lang, tone
        self.i = 0

    def next(self, max_chars: int) -> tuple[str, str]:
        src, line = self.items[self.i % len(self.items)]
        rnd = self.i // len(self.items)
        self.i += 1
        frames = FRAMES[(self.lang, self.tone if (self.lang, self.tone) in FRAMES else "professional")]
        frame = frames[(self.i + rnd) % len(frames)]
        s = short_src(src)
        if self.lang == "zh":
            s = s[:14]
            x = _cut(line, max(14, max_chars // 3 if not _CJK.search(line) else max_chars // 2))
            text = frame.format(s=s, x=x)
            if cjk_ratio(text) < 0.55:
                pool = ZH_COMMENT.get(self.tone, ZH_COMMENT["professional"])
                text = text.rstrip("。") + "，" + pool[self.i % len(pool)] + "。"
                if cjk_ratio(text) < 0.5:
                    text += pool[(self.i + 1) % len(pool)] + "。"
        else:
            x = _cut(line, max(20, max_chars - 18))
            if rnd:
                x = ("cross-check: " if self.tone != "casual" else "again: ") + x
            text = frame.format(s=s, x=x[0].lower() + x[1:] if frame.startswith(("According", "{s}")) else x)
        return src, text


def compose(spec: DocSpec, nb: Notebook, rng: random.Random, fallback: list[str] | None = None) -> str:
    """A Markdown document of about ``spec.lines`` lines (module docstring). Deterministic given ``rng``."""
    lang, tone = spec.lang, spec.tone
    fs = FactStream(nb, rng, lang, tone, fallback or [])
    depth = max(1, spec.max_depth)
    out: list[str] = [f"# {spec.title}", ""]
    intro = INTRO.get((lang, tone), INTRO[(lang, "professional")])
    out += [intro.format(t=spec.topic or spec.title, n=max(nb.n_sources, 1)), ""]
    sec_names = list(spec.sections or SECTIONS[lang])
    closing = [CLOSING.get((lang, tone), CLOSING[(lang, "professional")])] if spec.closing else []
    budget = spec.lines - len(closing)
    fig_refs = list(spec.figure_refs)
    table_done = spec.table_rows <= 0
    sec = 0

    def body(k: int) -> list[str]:
        lines: list[str] = []
        if spec.structure == "narrative":
            for _ in range(max(1, k // 2)):
                a = fs.next(spec.max_line_chars)[1]
                b = fs.next(spec.max_line_chars)[1]
                lines += [a + " " + b if lang == "en" else a + b, ""]
        else:
            for j in range(k):
                txt = fs.next(spec.max_line_chars)[1]
                if spec.structure == "hierarchical" and j % 3 == 2:
                    lines.append(f"  - {txt}")
                else:
                    lines.append(f"- {txt}")
            lines.append("")
        return lines

    while len(out) < budget:
        name = sec_names[sec % len(sec_names)]
        if sec >= len(sec_names):
            name += f" ({sec // len(sec_names) + 1})"
        sec += 1
        num = f"{sec}. " if spec.numbered else ""
        if depth >= 2:
            out += [f"## {num}{name}", ""]
        if not table_done and sec >= 2:
            out += table(nb, spec.table_rows, lang) + [""]
            table_done = True
        if fig_refs and sec >= 2:
            n, rel = fig_refs.pop(0)
            cap = (f"Figure {n}: chart of the key figures, see `{rel}` (data in the matching CSV)." if lang == "en"
                   else f"图{n}：关键数据图表，见 `{rel}`（数据见对应的 CSV 文件）。")
            out += [cap, ""]
        if depth >= 3:
            subs = SUBSECTIONS[lang]
            for j in range(2 if depth >= 4 else rng.choice((1, 2))):
                sub = subs[(sec + j) % len(subs)]
                out += [f"### {num}{sec}.{j + 1} {sub}" if spec.numbered else f"### {sub}", ""]
                out += body(rng.randint(3, 5))
                if depth >= 4 and j == 0:
                    src = nb.order[sec % len(nb.order)] if nb.order else "task"
                    label = ("Source: " if lang == "en" else "来源：") + short_src(src)
                    out += [f"#### {label}", ""] + body(rng.randint(2, 4))
        else:
            out += body(rng.randint(3, 6))
    if not table_done:
        out += table(nb, spec.table_rows, lang) + [""]
    for n, rel in fig_refs:
        out += [f"Figure {n}: see `{rel}`." if lang == "en" else f"图{n}：见 `{rel}`。", ""]
    out = out[: max(budget, 4)]
    while out and out[-1] == "":
        out.pop()
    # A heading left dangling by the cut gets one body line.
    if out and out[-1].startswith("#"):
        out += ["", fs.next(spec.max_line_chars)[1]]
    if closing:
        out += [""] + closing
    return "\n".join(out) + "\n"


def table(nb: Notebook, rows: int, lang: str) -> list[str]:
    """A Markdown table with ``rows`` data rows (header and separator come on top, TIER_TARGETS §1 'table rows')."""
    figs = nb.figures()
    head = ("| Source | Item | Value |" if lang == "en" else "| 来源 | 指标 | 数值 |")
    out = [head, "|---|---|---|"]
    if figs:
        for f in (figs * (rows // max(len(figs), 1) + 1))[:rows]:
            out.append(f"| {short_src(f.source)} | {f.label[:28]} | {f.raw} |")
    else:
        srcs = nb.order or ["task"]
        for i in range(rows):
            p = srcs[i % len(srcs)]
            lines = nb.sources[p].lines if p in nb.sources else []
            point = _cut(lines[i // len(srcs) % len(lines)], 40) if lines else "-"
            out.append(f"| {short_src(p)} | {'point' if lang == 'en' else '要点'} {i // len(srcs) + 1} | "
                       f"{point.replace('|', '/')} |")
    return out


def chart_figures(nb: Notebook, k: int = 6) -> list[Figure]:
    """Up to ``k`` figures for a chart, falling back to per-source line counts when no numbers were read."""
    figs = [f for f in nb.figures() if abs(f.value) < 1e12][:k]
    if len(figs) >= 2:
        return figs
    return [Figure(label=short_src(p)[:16], value=float(len(nb.sources[p].lines)), raw=str(len(nb.sources[p].lines)),
                   source=p) for p in nb.order[:k]] or [Figure("none", 0.0, "0", "task")]


def csv_text(figs: list[Figure]) -> str:
    """A small CSV (TIER_TARGETS §2.6: 150–600 chars) of ``source,item,value``."""
    import csv

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "item", "value"])
    for f in figs[:8]:
        w.writerow([short_src(f.source)[:24], f.label[:24], f"{f.value:g}"])
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
