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

from filegram_ray.engine.simulator.notebook import Fact, Figure, Notebook

_CJK = re.compile(r"[\u4e00-\u9fff]")

#: Sections of a deliverable and the kind of fact each collects (issue #28 item 3: organised by what the facts
#: are about); ``None`` = any fact. The last one, "Evidence by Source", is where a long document lists every
#: source's facts once more, source by source (B-L reports, TIER_TARGETS §2.2 "every claim cites evidence").
SECTIONS = {
    "en": [("Key Findings", "text"), ("Figures and Data", "figure"), ("People and Parties", "name"),
           ("Timeline and Deadlines", "date"), ("Further Points", None)],
    "zh": [("主要发现", "text"), ("数据与指标", "figure"), ("相关人员与机构", "name"), ("时间线与截止日期", "date"),
           ("其他要点", None)],
}
BY_SOURCE = {"en": "Evidence by Source", "zh": "分来源证据"}
FIGURE_SUB = {"en": "Figures", "zh": "数据"}

FRAMES = {
    ("en", "professional"): ["{x} ({s}).", "{s} records: {x}.", "{x} (source: {s})."],
    ("en", "friendly"): ["You'll find in {s}: {x}.", "Good to know: {x} ({s}).", "{s} tells us: {x}."],
    ("en", "casual"): ["{x} (per {s})", "{s}: {x}", "{x} ({s})"],
    ("zh", "professional"): ["据{s}记载：{x}。", "{s}显示：{x}。", "来源{s}：{x}。"],
    ("zh", "friendly"): ["你可以在{s}里看到：{x}。", "值得留意（见{s}）：{x}。", "{s}提到：{x}。"],
    ("zh", "casual"): ["{s}里写着：{x}。", "顺便说下（{s}）：{x}。", "{s}：{x}。"],
}
INTRO = {
    ("en", "professional"): "Sources read for {t}: {names}.",
    ("en", "friendly"): "Hi! For {t} I went through these files: {names}.",
    ("en", "casual"): "Read for {t}: {names}.",
    ("zh", "professional"): "本文档“{t}”依据以下资料整理：{names}。",
    ("zh", "friendly"): "你好！关于“{t}”，我看了这些资料：{names}。",
    ("zh", "casual"): "“{t}”，看了这些：{names}。",
}
#: Only the friendly tone closes with a line to the reader (TIER_TARGETS §4); other tones end on the last fact.
CLOSING = {
    ("en", "friendly"): "Hope this helps. Let me know if you want me to dig deeper into any part!",
    ("zh", "friendly"): "希望这些整理对你有帮助，有问题随时找我！",
}


@dataclass
class DocSpec:
    """Shape of one text document.

    Attributes:
        title: heading text.  lines: target line count (blank lines included); a document ends earlier when
        the facts read run out.  max_depth: deepest heading level.
        structure: hierarchical | flat_list | narrative.  table_rows: data rows of one Markdown table (0 = none).
        figure_refs: ``(number, relpath)`` visuals to reference ("Figure 1" / "图1").  lang / tone: §4.
        max_line_chars: kept for callers (sentences are never cut, issue #28).  numbered: numbered section titles.
        topic: what the document is about (used in the intro).  closing: add the tone's closing line.
        sections: explicit section titles (any fact in each) instead of :data:`SECTIONS`.
        max_chars: character budget of the facts, headings and intro (None = no budget): the document stops
        taking facts once it would pass it, so its size follows the B band rather than how much was read
        (TT §2.2 char bands, §3 "output volume comes from the B tier alone"). A table and figure references
        are still written (they are F's, §2.6), so a document may pass the budget by their size.
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
    max_chars: int | None = None


def cjk_ratio(text: str) -> float:
    """Share of CJK characters among letters (TIER_TARGETS §4 language signature)."""
    letters = [c for c in text if c.isalpha()]
    return sum(bool(_CJK.match(c)) for c in letters) / max(len(letters), 1)


def source_name(path: str) -> str:
    """How a source is named in a document: its whole file name (issue #28: no truncated stems)."""
    return PurePosixPath(path).name


class FactStream:
    """Hands out the facts read in the session (:meth:`Notebook.facts`), each once, phrased in the persona's
    language and tone with its source named; a fact of the asked kind (and source) first, else any unused fact.
    With ``repeat`` (long documents) the facts may be listed once more, source by source (:meth:`by_source`).
    Returns None when nothing is left: documents end there rather than pad."""

    def __init__(self, nb: Notebook, lang: str, tone: str, fallback: list[str]):
        self.facts = nb.facts() or [Fact("task", t, "text") for t in fallback if t]
        self.used: set[int] = set()
        self.lang, self.tone = lang, tone
        self.frames = FRAMES[(lang, tone if (lang, tone) in FRAMES else "professional")]
        self.n = 0

    @property
    def left(self) -> int:
        return len(self.facts) - len(self.used)

    def sources(self, kind: str | None = None) -> list[str]:
        """Sources with unused facts (of ``kind``), in read order."""
        return list(dict.fromkeys(f.source for i, f in enumerate(self.facts)
                                  if i not in self.used and (kind is None or f.kind == kind)))

    def next(self, kind: str | None = None, source: str | None = None, strict: bool = False) -> str | None:
        pick = None
        for i, f in enumerate(self.facts):
            if i in self.used:
                continue
            if (kind is None or f.kind == kind) and (source is None or f.source == source):
                pick = i
                break
        if pick is None and not strict:
            pick = next((i for i in range(len(self.facts)) if i not in self.used), None)
        if pick is None:
            return None
        self.used.add(pick)
        return self.phrase(self.facts[pick])

    def phrase(self, f: Fact) -> str:
        x = f.text.rstrip(" .。")
        if f.source == "task":
            return x + ("." if self.lang == "en" else "。")
        frame = self.frames[self.n % len(self.frames)]
        self.n += 1
        return frame.format(s=source_name(f.source), x=x)

    def by_source(self) -> list[tuple[str, list[str]]]:
        """Every fact once more, grouped by source (read order): ``[(source name, [fact texts])]``."""
        out: dict[str, list[str]] = {}
        for f in self.facts:
            if f.source != "task":
                out.setdefault(source_name(f.source), []).append(f.text.rstrip(" .。")
                                                                 + ("." if self.lang == "en" else "。"))
        return list(out.items())


def compose(spec: DocSpec, nb: Notebook, rng: random.Random, fallback: list[str] | None = None) -> str:
    """A Markdown document of at most about ``spec.lines`` lines built from the facts read (module docstring;
    issue #28 item 3): an intro naming the sources, thematic sections (:data:`SECTIONS`) whose bullets (or
    paragraphs, ``narrative``) are whole sentences and table rows from the inputs with their source named,
    per-source subsections at depth ≥ 3, a figures subsection at depth 4, one Markdown table of real rows, and,
    when lines remain, the evidence listed source by source. Ends early when the facts run out or the character
    budget (``spec.max_chars``) is spent; never pads. Deterministic given ``rng``."""
    lang, tone = spec.lang, spec.tone
    fs = FactStream(nb, lang, tone, fallback or [])
    depth = max(1, spec.max_depth)
    out: list[str] = [f"# {spec.title}", ""]
    names = [source_name(p) for p in nb.order]
    shown = ", ".join(names[:6]) + ((f" and {len(names) - 6} more" if lang == "en" else f"等{len(names)}份")
                                    if len(names) > 6 else "")
    if names:
        intro = INTRO.get((lang, tone), INTRO[(lang, "professional")])
        out += [intro.format(t=spec.topic or spec.title, names=shown), ""]
    secs: list[tuple[str, str | None]] = ([(s, None) for s in spec.sections] if spec.sections
                                          else list(SECTIONS[lang]))
    closing = [CLOSING[(lang, tone)]] if spec.closing and (lang, tone) in CLOSING else []
    budget = spec.lines - len(closing)
    fig_refs = list(spec.figure_refs)
    table_done = spec.table_rows <= 0
    char_cap = spec.max_chars if spec.max_chars else 10**9
    size = [sum(len(x) + 1 for x in out)]  # characters taken so far (facts, headings, intro)

    def room(text: str) -> bool:
        """Take ``text`` if it fits the character budget."""
        if size[0] + len(text) + 1 > char_cap:
            return False
        size[0] += len(text) + 1
        return True

    def body(k: int, kind: str | None, source: str | None = None, strict: bool = False) -> list[str]:
        lines: list[str] = []
        if spec.structure == "narrative":
            for _ in range(max(1, k // 2)):
                if size[0] >= char_cap:
                    break
                pair = [t for t in (fs.next(kind, source, strict), fs.next(kind, source, strict)) if t]
                if pair and not room(pair[0]):
                    break
                if len(pair) == 2 and not room(pair[1]):
                    pair = pair[:1]
                if pair:
                    lines += [(" " if lang == "en" else "").join(pair), ""]
        else:
            for j in range(k):
                if size[0] >= char_cap:
                    break
                txt = fs.next(kind, source, strict)
                if txt is None or not room(txt):
                    break
                lines.append(f"  - {txt}" if spec.structure == "hierarchical" and j % 3 == 2 else f"- {txt}")
            if lines:
                lines.append("")
        return lines

    sec = 0
    for name, kind in secs:
        if len(out) >= budget or fs.left == 0 or size[0] >= char_cap:
            break
        sec += 1
        num = f"{sec}. " if spec.numbered else ""
        block: list[str] = []
        if depth >= 3 and not spec.sections:
            for j, src in enumerate(fs.sources(kind)[: (2 if depth >= 4 else rng.choice((1, 2)))]):
                sub = body(rng.randint(3, 5), kind, src, strict=True)
                if not sub:
                    continue
                block += [f"### {sec}.{j + 1} {source_name(src)}" if spec.numbered
                          else f"### {source_name(src)}", ""] + sub
                if depth >= 4 and j == 0:
                    figs = body(rng.randint(2, 4), "figure", src, strict=True)
                    if figs:
                        block += [f"#### {FIGURE_SUB[lang]}: {source_name(src)}", ""] + figs
        else:
            block = body(rng.randint(3, 6), kind)
        if not block and table_done and not fig_refs:
            sec -= 1
            continue
        size[0] += sum(len(x) + 1 for x in block if x.startswith("#"))  # subsection headings count too
        if depth >= 2:
            out += [f"## {num}{name}", ""]
            size[0] += len(name) + 5
        if not table_done and sec >= 2:
            out += table(nb, spec.table_rows, lang) + [""]
            table_done = True
        if fig_refs and sec >= 2:
            n, rel = fig_refs.pop(0)
            cap = (f"Figure {n}: the figures read, charted in `{rel}` (data in the matching CSV)." if lang == "en"
                   else f"图{n}：所读数据的图表，见 `{rel}`（数据见对应的 CSV 文件）。")
            out += [cap, ""]
        out += block
    if not table_done:
        out += table(nb, spec.table_rows, lang) + [""]
    for n, rel in fig_refs:
        out += [f"Figure {n}: see `{rel}`." if lang == "en" else f"图{n}：见 `{rel}`。", ""]
    if len(out) < budget - 6 and depth >= 2 and not spec.sections and spec.lines >= 70 and size[0] < char_cap:
        # A longer (B-L, B-M) report lists its evidence source by source, each fact once more (TT §2.2).
        num = f"{sec + 1}. " if spec.numbered else ""
        out += [f"## {num}{BY_SOURCE[lang]}", ""]
        for src, texts in fs.by_source():
            if len(out) >= budget - 3:
                break
            taken = []
            for t in texts[: max(1, budget - len(out) - 2)]:
                if not room(t):
                    break
                taken.append(f"- {t}")
            if not taken:
                break
            out += [f"### {src}", ""] + taken + [""]
            size[0] += len(src) + 5
    out = out[: max(budget, 4)]
    while out and (out[-1] == "" or out[-1].startswith("#")):
        out.pop()
    if closing:
        out += [""] + closing
    return "\n".join(out) + "\n"


def _good_label(label: str) -> bool:
    words = re.findall(r"[A-Za-z\u4e00-\u9fff]{3,}", label)
    return len(words) >= 2 or bool(re.search(r"[\u4e00-\u9fff]{2,}", label))


def table(nb: Notebook, rows: int, lang: str) -> list[str]:
    """A Markdown table with up to ``rows`` data rows of real data (header and separator on top, TIER_TARGETS §1
    'table rows'): the rows of a table file that was read (first four columns, its own header), else the
    labelled figures found in the text (source file, label, value). No data → no table."""
    tab = [f for f in nb.facts() if f.row is not None]
    if tab:
        header = tab[0].row[0][:4]
        same = [f for f in tab if f.row[0][:4] == header][:rows]
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(c.replace("|", "/") for c in f.row[1][:4]) + " |" for f in same]
        return out
    figs = [f for f in nb.figures() if _good_label(f.label) and not re.fullmatch(r"(19|20)\d\d", f.raw)][:rows]
    if not figs:
        return []
    head = ("| Source | Item | Value |" if lang == "en" else "| 来源 | 指标 | 数值 |")
    return [head, "|---|---|---|"] + [f"| {source_name(f.source)} | {f.label} | {f.raw} |" for f in figs]


def chart_figures(nb: Notebook, k: int = 6) -> list[Figure]:
    """Up to ``k`` figures for a chart, falling back to per-source line counts when no numbers were read."""
    figs = [f for f in nb.figures() if abs(f.value) < 1e12 and _good_label(f.label)][:k]
    if len(figs) >= 2:
        return figs
    return [Figure(label=source_name(p), value=float(len(nb.sources[p].lines)), raw=str(len(nb.sources[p].lines)),
                   source=p) for p in nb.order[:k]] or [Figure("none", 0.0, "0", "task")]


def csv_text(figs: list[Figure]) -> str:
    """A small CSV (TIER_TARGETS §2.6: 150–600 chars) of ``source,item,value``."""
    import csv

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "item", "value"])
    for f in figs[:8]:
        w.writerow([source_name(f.source), f.label, f"{f.value:g}"])
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
