"""Plain-text extraction for workspace files, and extension-based file kinds.

``extract_text(path) -> str`` turns every document kind a FileGram workspace holds into UTF-8 text so that
the engine's ``read`` tool, the import path and the memory methods see the same words a person would read:

* pdf  — pypdf, page texts joined with a blank line (a WinAnsi bullet code that pypdf returns as DEL is shown as
  ``•``); then comments (``[comment p.N, author]``: annotations with
  text, sticky notes and typed-on text boxes), filled form fields (``[form] name: value``) and attached files'
  names (``[attachments]``)
* docx — python-docx, paragraphs in order (tracked insertions included, deletions left out) then every table as
  tab-separated rows (a table nested in a cell after its row); then, tagged, content controls, ``[text box]``,
  ``[header]`` / ``[footer]`` (each distinct one once), ``[footnote N]`` / ``[endnote N]``, ``[comment, author]``
  and pictures' alt text (``[picture]``)
* xlsx — openpyxl (read-only, cached values, shared strings resolved), every sheet (hidden ones marked
  ``(hidden)``) as ``# sheet: <name>`` then tab-separated rows, then its cell comments ``[comment B2, author]``;
  the workbook's chart titles ``[chart] <title>`` at the end
* pptx — python-pptx, ``## Slide N: <title>`` then every shape in order: text frames, table cells, groups
  recursively (nested groups too, case BR2-01), ``[chart] <title>``, ``[picture] <alt text>``; then ``[notes]``
  and the slide's review comments ``[comment]``
* eml  — stdlib ``email``: From/To/Cc/Date/Subject headers **as written** (unfolded, encoded words decoded, never
  parsed and re-formatted: :func:`header_as_written`), then the body (text/plain preferred; an HTML-only body as
  the text a browser shows: no tags, scripts or styles, entities decoded), further inline text parts, forwarded
  messages (``[forwarded message]`` headers, then their body) and ``Attachments:`` names (an unnamed one as its
  type); the normalised date goes beside the view (:func:`normalise_mail_date`, the import's ``bundle.json``),
  never into it

What a reader sees but has no text — a picture without alt text, chart data, a chart sheet, SmartArt or an embedded
object, a PDF page without a text layer — is named in the view's closing line ``[not extracted: …]`` (counts as
``×N``), so a view never drops content silently.
* ics  — SUMMARY / DTSTART / DTEND / DURATION / RRULE / … / DESCRIPTION lines of every VEVENT, values as written,
  parameters such as ``TZID`` kept in parentheses
* csv, txt, md, json, and other text kinds — decoded as UTF-8 (BOM stripped; invalid bytes replaced)

Media kinds (images, audio, video) have no text; ``extract_text`` raises ``ExtractionError`` for them
(their content reaches the agent through annotations, ref §1.1; an imported folder's media are described on import
by :mod:`filegram_ray.workspace.describe`).

This text is *the* view of a document: the engine's ``read`` and ``grep`` both number its lines, and the import
writes it to ``extracted/<path>.txt`` (one view per file, case R2-eml-grep-line-numbers-differ-from-read).

Hostile inputs are refused before a library parses them (:mod:`filegram_ray.limits`): an OOXML zip whose members
would inflate past the zip limits (a decompression bomb), a PDF of more than ``PDF_MAX_PAGES`` pages, a text file
larger than ``MAX_TEXT_FILE_BYTES``, and any document whose text exceeds ``MAX_EXTRACTED_CHARS``.

Errors: ``ExtractionError`` (a ``ValueError``) naming the file whenever a container is corrupt, unreadable or too
large; ``reason`` starts with ``"too large: "`` for a limit.
"""

from __future__ import annotations

import csv
import email
import email.policy
import io
import json
import re
import threading
from pathlib import Path

from filegram_ray.errors import UserError
from filegram_ray.limits import (
    MAX_EXTRACTED_CHARS,
    MAX_TEXT_FILE_BYTES,
    PDF_MAX_PAGES,
    InputLimitError,
    check_file_size,
    check_zip,
)
from filegram_ray.names import escape_bytes

__all__ = [
    "DOCUMENT_KINDS",
    "KIND_BY_EXT",
    "MEDIA_KINDS",
    "TEXT_KINDS",
    "ExtractionError",
    "extract_text",
    "is_media",
    "kind_of",
]


class ExtractionError(UserError):
    """A file could not be read as its kind; the message names the file and the reason."""

    def __init__(self, path: Path | str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: cannot extract text: {reason}")


#: Extension (lower case, no dot) -> kind. Kinds are the extension itself except for aliases
#: (jpeg->jpg, htm->html, markdown->md, yml->yaml, tif->tiff). Unknown extensions map to "bin".
KIND_BY_EXT: dict[str, str] = {
    "md": "md", "markdown": "md", "txt": "txt", "text": "txt", "log": "txt",
    "pdf": "pdf", "docx": "docx", "xlsx": "xlsx", "csv": "csv", "tsv": "csv", "pptx": "pptx",
    "eml": "eml", "ics": "ics", "json": "json", "yaml": "yaml", "yml": "yaml", "html": "html", "htm": "html",
    "xml": "xml", "py": "py",
    "png": "png", "jpg": "jpg", "jpeg": "jpg", "gif": "gif", "bmp": "bmp", "webp": "webp", "tif": "tiff",
    "tiff": "tiff", "svg": "svg",
    "mp3": "mp3", "wav": "wav", "m4a": "m4a", "flac": "flac", "ogg": "ogg",
    "mp4": "mp4", "mov": "mov", "avi": "avi", "mkv": "mkv", "webm": "webm",
    "tmp": "tmp", "bak": "bak", "zip": "zip",
}

IMAGE_KINDS = frozenset({"png", "jpg", "gif", "bmp", "webp", "tiff"})
AUDIO_KINDS = frozenset({"mp3", "wav", "m4a", "flac", "ogg"})
VIDEO_KINDS = frozenset({"mp4", "mov", "avi", "mkv", "webm"})
#: Kinds with no text content; read through annotations (ref §1.1 "Multimodal workspace files").
MEDIA_KINDS = IMAGE_KINDS | AUDIO_KINDS | VIDEO_KINDS
#: Kinds stored as plain UTF-8 text.
TEXT_KINDS = frozenset({"md", "txt", "csv", "json", "yaml", "html", "xml", "py", "svg", "tmp", "bak"})
#: Binary container kinds with a dedicated extractor.
DOCUMENT_KINDS = frozenset({"pdf", "docx", "xlsx", "pptx", "eml", "ics"})


def kind_of(path: Path | str) -> str:
    """Kind of ``path`` from its extension (see ``KIND_BY_EXT``).

    Backup/temp spellings resolve to the underlying kind where one exists: ``report.docx.bak`` -> "bak",
    ``~$report.docx`` -> "docx", ``notes.md~`` -> "md". Unknown or missing extension -> "bin".
    """
    name = Path(path).name
    if name.endswith("~"):
        name = name.rstrip("~")
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return KIND_BY_EXT.get(ext, "bin")


def is_media(kind: str) -> bool:
    """True for image, audio and video kinds (content reaches the agent only via an annotation)."""
    return kind in MEDIA_KINDS


def media_class(kind: str) -> str | None:
    """"image" | "audio" | "video" for media kinds, else None (the annotation ``modality`` value)."""
    if kind in IMAGE_KINDS:
        return "image"
    if kind in AUDIO_KINDS:
        return "audio"
    if kind in VIDEO_KINDS:
        return "video"
    return None


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


class _TextBudget:
    """Counts the characters taken from one document; raises :class:`InputLimitError` past ``limit``."""

    def __init__(self, path: Path, limit: int = MAX_EXTRACTED_CHARS):
        self.path, self.limit, self.used = path, limit, 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.used > self.limit:
            raise InputLimitError(f"{self.path}: too large: more than {self.limit:,} characters of text")
        return text


#: PDF 32000-1:2008 Annex D.2, WinAnsiEncoding note: every unused code above octal 40 shows the bullet. reportlab
#: writes ``&bull;`` in the standard fonts as code 0o177, which pypdf hands back as the control character DEL.
_WINANSI_BULLET = "\x7f"


def _pdf(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(str(path))  # pypdf bounds every decoded stream (75 MB)
    n = len(reader.pages)
    if n > PDF_MAX_PAGES:
        raise InputLimitError(f"{path}: too large: {n:,} pages (limit {PDF_MAX_PAGES:,})")
    budget = _TextBudget(path)
    texts = [budget.take((page.extract_text() or "").strip().replace(_WINANSI_BULLET, "•")) for page in reader.pages]
    extra: list[str] = []
    notes: list[str] = []
    for k, page in enumerate(reader.pages, start=1):
        try:
            res = page.get("/Resources")
            res = res.get_object() if res is not None else {}
            if not texts[k - 1] and "/XObject" in res:
                notes.append(f"page {k}: no text layer (a scanned image?)")
            annots = page.get("/Annots")
            annots = annots.get_object() if annots is not None else []
            for ref in annots or []:
                annot = ref.get_object()
                if str(annot.get("/Subtype", "")) in ("/Link", "/Widget", "/Popup"):
                    continue  # links are the page's own text; form widgets are listed with the form
                contents = str(annot.get("/Contents") or "").strip()
                if contents:
                    author = str(annot.get("/T") or "").strip()
                    extra.append(budget.take(f"[comment p.{k}{', ' + author if author else ''}] {contents}"))
        except InputLimitError:
            raise
        except Exception:  # noqa: BLE001 - a malformed annotation does not cost the page texts
            notes.append(f"page {k}: unreadable annotations")
    try:
        for name, field in (reader.get_fields() or {}).items():
            value = field.get("/V")
            if isinstance(value, str) and value.startswith("/") and field.get("/FT") in ("/Btn", None):
                if value == "/Off":  # an unticked box or radio button shows nothing
                    continue
                value = f"checked ({value[1:]})"  # a ticked one: its export name
            if value not in (None, "") and str(value).strip():
                extra.append(budget.take(f"[form] {name}: {str(value).strip()}"))
    except InputLimitError:
        raise
    except Exception:  # noqa: BLE001 - a malformed form tree: the pages are still the document
        notes.append("unreadable form fields")
    try:
        attached = list(reader.attachments)
    except Exception:  # noqa: BLE001 - a malformed name tree: the pages are still the document
        attached = []
        notes.append("unreadable attachment list")
    if attached:
        extra.append("[attachments] " + ", ".join(attached))
    out = "\n\n".join(texts).strip()
    if extra:
        out += "\n\n" + "\n".join(extra)
    return _not_extracted(out, notes)


#: OOXML namespaces the extractors look up by hand (ECMA-376 part 1, §8; the markup-compatibility namespace: part 3)
_NS = {"w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
       "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006",
       "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
       "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
       "pic": "http://schemas.openxmlformats.org/drawingml/2006/picture",
       "s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
       "pr": "http://schemas.openxmlformats.org/package/2006/relationships"}


def _not_extracted(text: str, notes: list[str]) -> str:
    """``text`` stripped, closed by a line naming what a reader sees but the view does not hold (nothing added when
    ``notes`` is empty): ``[not extracted: chart data; picture (no text) ×2]`` after a blank line."""
    counts: dict[str, int] = {}
    for n in notes:
        counts[n] = counts.get(n, 0) + 1
    text = text.strip()
    if not counts:
        return text
    line = "[not extracted: " + "; ".join(f"{k} ×{c}" if c > 1 else k for k, c in counts.items()) + "]"
    return f"{text}\n\n{line}" if text else line


def _xp(expr: str):
    """A compiled XPath over :data:`_NS` (python-docx's elements override ``xpath`` with their own namespaces)."""
    from lxml import etree

    cache = _XPATHS.__dict__.setdefault("compiled", {})  # per thread: one compiled XPath is not shared by threads
    got = cache.get(expr)
    if got is None:
        got = cache[expr] = etree.XPath(expr, namespaces=_NS)
    return got


_XPATHS = threading.local()


def _safe_xml(blob: bytes):
    """Parse an OOXML part with lxml, entities unresolved and no network (what python-docx's own parser does)."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_blank_text=False)
    return etree.fromstring(blob, parser)


def _w_text(p) -> str:
    """A ``w:p``'s visible text: its runs, those inside hyperlinks, tracked insertions, fields, smart tags and
    inline content controls included; deleted text and the paragraphs of text boxes anchored in it left out (the
    text boxes are listed on their own)."""
    from docx.oxml.text.run import CT_R

    out = []
    for r in p.iterfind(".//w:r", _NS):
        up = r.getparent()
        while up is not None and up is not p and up.tag not in _W_HIDDEN:
            up = up.getparent()
        if up is p:  # nothing between the paragraph and the run hides it or belongs to a text box
            out.append(r.text if isinstance(r, CT_R) else "".join(r.itertext()))
    return "".join(out)


#: elements whose runs are not the enclosing paragraph's visible text (deleted, a text box's, a fallback copy)
_W_HIDDEN = frozenset({f"{{{_NS['w']}}}del", f"{{{_NS['w']}}}txbxContent", f"{{{_NS['mc']}}}Fallback"})


def _docx_table_lines(table, depth: int = 0) -> list[str]:
    lines = []
    for row in table.rows:
        lines.append("\t".join(cell.text.strip() for cell in row.cells))
        for cell in row.cells:
            for inner in cell.tables:  # a table nested in a cell (cell.text holds only the cell's paragraphs)
                if depth < 8:
                    lines += _docx_table_lines(inner, depth + 1)
    return lines


def _docx(path: Path) -> str:
    """Body paragraphs, then every table (nested tables after their row), then what sits outside the body's flow:
    content controls, text boxes, headers and footers, footnotes and endnotes, comments, each line tagged; pictures
    and embedded objects are named in a closing ``[not extracted: …]`` line (their alt text is kept)."""
    import docx

    document = docx.Document(str(path))
    body = document.element.body
    budget = _TextBudget(path)
    parts = [budget.take(_w_text(p._p)) for p in document.paragraphs]
    for table in document.tables:
        parts.append("")
        parts += [budget.take(line) for line in _docx_table_lines(table)]
    extra: list[str] = []
    for sdt in body.iterfind("w:sdt", _NS):  # block content controls (cover pages, tables of contents)
        extra += [f"[content control] {t}" for t in (_w_text(p).strip() for p in sdt.iterfind(".//w:p", _NS)
                                                     if not _xp("ancestor::w:txbxContent")(p)) if t]
    for box in _xp(".//w:txbxContent[not(ancestor::mc:Fallback)]")(body):
        text = "\n".join(t for t in (_w_text(p).strip() for p in box.iterfind("w:p", _NS)) if t)
        if text:
            extra.append(f"[text box] {text}")
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for section in document.sections:
        for label, part in (("header", section.first_page_header), ("header", section.header),
                            ("header", section.even_page_header), ("footer", section.first_page_footer),
                            ("footer", section.footer), ("footer", section.even_page_footer)):
            if part.is_linked_to_previous:
                continue
            lines = [t for t in (_w_text(p._p).strip() for p in part.paragraphs) if t]
            for table in part.tables:
                lines += [ln for ln in _docx_table_lines(table) if ln.strip()]
            text = "\n".join(lines)
            if text and (label, text) not in seen:
                seen.add((label, text))
                extra.append(f"[{label}] {text}")
    for rel in document.part.rels.values():
        kind = rel.reltype.rsplit("/", 1)[-1]
        if kind not in ("footnotes", "endnotes") or rel.is_external:
            continue
        tag = "footnote" if kind == "footnotes" else "endnote"
        try:
            root = _safe_xml(rel.target_part.blob)
        except Exception:  # noqa: BLE001 - a malformed notes part does not cost the body
            notes.append(f"unreadable {kind}")
            continue
        for note in root.iterfind(f"w:{tag}", _NS):
            if note.get(f"{{{_NS['w']}}}type") in ("separator", "continuationSeparator", "continuationNotice"):
                continue
            text = " ".join(t for t in (_w_text(p).strip() for p in note.iterfind(".//w:p", _NS)) if t)
            if text:
                extra.append(f"[{tag} {note.get(chr(123) + _NS['w'] + '}id')}] {text}")
    try:
        comments = list(document.comments)
    except Exception:  # noqa: BLE001 - a document without a comments part
        comments = []
    for c in comments:
        text = "\n".join(t for t in (_w_text(p._p).strip() for p in c.paragraphs) if t)
        if text:
            extra.append(f"[comment{', ' + c.author if c.author else ''}] {text}")
    for pic in body.iterfind(".//pic:pic", _NS):
        if _xp("ancestor::mc:Fallback")(pic):
            continue
        frame = _xp("ancestor::wp:inline[1] | ancestor::wp:anchor[1]")(pic)
        descr = frame[0].find("wp:docPr", _NS).get("descr", "").strip() if frame and frame[0].find(
            "wp:docPr", _NS) is not None else ""
        if descr:
            extra.append(f"[picture] {descr}")
        else:
            notes.append("picture (no text)")
    notes += ["embedded object"] * len(_xp(".//w:object[not(ancestor::mc:Fallback)]")(body))
    notes += ["chart"] * len(_xp(".//a:graphicData[@uri='http://schemas.openxmlformats.org/drawingml/2006/"
                                        "chart'][not(ancestor::mc:Fallback)]")(body))
    if extra:
        parts += ["", *(budget.take(e) for e in extra)]
    return _not_extracted("\n".join(parts), notes)


def _fmt_cell(value) -> str:
    """A cell's cached value as text: whole floats without ``.0``; a date-time at midnight as its date (a date
    cell stores no time; openpyxl reads every date as a datetime)."""
    import datetime as dt

    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time(0) and value.tzinfo is None:
        return value.date().isoformat()
    return str(value)


#: our own bound on the spreadsheet cells one extraction visits (padding of sparse rows included)
XLSX_MAX_CELLS = 2_000_000


def _formula_text(value) -> str | None:
    """The formula of a cell read with ``data_only=False`` (``=B2+C2``; an array formula's text), else None."""
    text = getattr(value, "text", value)  # openpyxl's ArrayFormula / DataTableFormula carry it in .text
    if isinstance(text, str) and text.startswith("="):
        return text
    return None


def _xlsx(path: Path) -> str:
    """The text of a workbook: per sheet, each row's cells tab-separated as the spreadsheet program last showed
    them (the value it saved with the file), the cell comments, chart titles; a closing ``[not extracted: …]``
    line. A formula cell saved without a value — a workbook written by a library (openpyxl, xlsxwriter) and
    never opened in a spreadsheet program, which is what computes and stores the values — is shown as its
    formula (``=SUM(B2:C2)``) and counted in a note line, never as an empty cell (case BR2-03). A workbook that
    asks to be recalculated when opened (``<calcPr fullCalcOnLoad="1">``: XlsxWriter saves every formula with
    the value 0 and this flag) shows every formula cell as its formula: its saved values are not what a
    spreadsheet program would show."""
    import openpyxl

    stale = _recalculated_on_load(path)
    wb = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    formulas_wb = openpyxl.load_workbook(str(path), read_only=True, data_only=False)
    chars = _TextBudget(path)  # characters of text taken (MAX_EXTRACTED_CHARS)
    try:
        out: list[str] = []
        cells_left = XLSX_MAX_CELLS  # cells visited (XLSX_MAX_CELLS)
        try:
            comments = _xlsx_comments(path)
            unread: list[str] = []
        except Exception:  # noqa: BLE001 - malformed comment parts do not cost the cells
            comments, unread = {}, ["unreadable cell comments"]
        unsaved = 0  # formula cells without a saved value, shown as their formula
        for ws, fws in zip(wb.worksheets, formulas_wb.worksheets):
            out.append(f"# sheet: {ws.title}" + (" (hidden)" if ws.sheet_state != "visible" else ""))
            # The declared dimension (or one formatted cell at XFD1048576) would pad every row to 16,384 columns
            # and emit every empty row up to it (BR-28): iterate the cells actually stored instead.
            ws.reset_dimensions()
            fws.reset_dimensions()
            sheet_unsaved = 0
            for row, frow in zip(ws.iter_rows(values_only=True), fws.iter_rows(values_only=True)):
                cells_left -= len(row)
                if cells_left < 0:
                    out.append(f"[cut: more than {XLSX_MAX_CELLS} cells]")
                    break
                cells = [_fmt_cell(v) for v in row]
                for i, f in enumerate(frow):
                    formula = _formula_text(f) if stale or i >= len(row) or row[i] is None else None
                    if formula is not None:
                        cells += [""] * (i + 1 - len(cells))
                        cells[i] = formula
                        sheet_unsaved += 1
                while cells and cells[-1] == "":
                    cells.pop()
                if cells:
                    out.append(chars.take("\t".join(cells)))
            if sheet_unsaved:
                why = ("the file asks to be recalculated when opened (written by a library, not saved by a "
                       "spreadsheet program): saved values, if any, are placeholders" if stale
                       else "no saved value (the file was not last saved by a spreadsheet program)")
                out.append(f"[{sheet_unsaved} formula cell(s) of this sheet: {why}: shown as their formula]")
                unsaved += sheet_unsaved
            for ref, author, text in comments.get(ws.title, []):
                out.append(chars.take(f"[comment {ref}{', ' + author if author else ''}] {text}"))
            out.append("")
        notes = unread + ["chart sheet " + repr(cs.title) for cs in wb.chartsheets]
        try:
            titles, pictures = _xlsx_drawings(path)
        except Exception:  # noqa: BLE001 - a malformed chart part does not cost the cells
            titles, pictures = [], 0
            notes.append("unreadable charts")
        out += [chars.take(f"[chart] {t}") for t in titles]
        notes += ["chart data"] * len(titles) + ["picture (no text)"] * pictures
        notes += ["formula value (not saved in the file)"] * unsaved
        return _not_extracted("\n".join(out), notes)
    finally:
        wb.close()
        formulas_wb.close()


def _recalculated_on_load(path: Path) -> bool:
    """Whether a workbook's ``xl/workbook.xml`` asks the program opening it to recalculate every formula
    (``calcPr fullCalcOnLoad``, ECMA-376 Part 1 §18.2.2): its saved formula values are then placeholders."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            calc = _safe_xml(zf.read("xl/workbook.xml")).find("s:calcPr", _NS)
    except Exception:  # noqa: BLE001 - openpyxl reports an unreadable workbook itself
        return False
    return calc is not None and calc.get("fullCalcOnLoad", "").lower() in ("1", "true")


def _xlsx_drawings(path: Path) -> tuple[list[str], int]:
    """(titles of the workbook's charts — ``""`` for an untitled one — in part order, number of pictures) from
    its ``xl/charts/*.xml`` and ``xl/media/*`` parts (openpyxl's read-only mode loads neither)."""
    import zipfile

    titles: list[str] = []
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist(), key=lambda n: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", n)])
        for name in names:
            if re.fullmatch(r"xl/charts/chart\d+\.xml", name):
                root = _safe_xml(zf.read(name))
                title = root.find(".//{http://schemas.openxmlformats.org/drawingml/2006/chart}title")
                titles.append("".join(t.text or "" for t in title.iter(f"{{{_NS['a']}}}t")).strip()
                              if title is not None else "")
        pictures = sum(1 for n in names if n.startswith("xl/media/"))
    return [t or "(untitled)" for t in titles], pictures


def _xlsx_comments(path: Path) -> dict[str, list[tuple[str, str, str]]]:
    """``{sheet name: [(cell, author, text), …]}`` of the cell comments (notes) of a workbook, read from its XML
    parts (openpyxl's read-only mode, the one that bounds memory, does not load comments)."""
    import posixpath
    import zipfile

    out: dict[str, list[tuple[str, str, str]]] = {}
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if not any(n.startswith("xl/comments") for n in names):
            return out

        def rels(part: str) -> dict[str, str]:
            d, base = posixpath.split(part)
            rel_name = posixpath.join(d, "_rels", base + ".rels")
            if rel_name not in names:
                return {}
            got = {}
            for r in _safe_xml(zf.read(rel_name)).iterfind("pr:Relationship", _NS):
                target = r.get("Target", "")
                if r.get("TargetMode") != "External":  # a target is relative to the part's folder or, with "/", absolute
                    full = target.lstrip("/") if target.startswith("/") else posixpath.join(d, target)
                    got[r.get("Id")] = (r.get("Type", ""), posixpath.normpath(full))
            return got

        wb_rels = rels("xl/workbook.xml")
        for sheet in _safe_xml(zf.read("xl/workbook.xml")).iterfind("s:sheets/s:sheet", _NS):
            target = wb_rels.get(sheet.get(f"{{{_NS['r']}}}id"), ("", ""))[1]
            for rtype, comments_part in rels(target).values() if target in names else []:
                if not rtype.endswith("/comments") or comments_part not in names:
                    continue
                root = _safe_xml(zf.read(comments_part))
                authors = [a.text or "" for a in root.iterfind("s:authors/s:author", _NS)]
                for c in root.iterfind("s:commentList/s:comment", _NS):
                    text = "".join(t.text or "" for t in c.iterfind(".//s:t", _NS)).strip()
                    aid = c.get("authorId")
                    author = authors[int(aid)] if aid and aid.isdigit() and int(aid) < len(authors) else ""
                    if text:
                        out.setdefault(sheet.get("name", ""), []).append((c.get("ref", ""), author, text))
    return out


#: deepest group-in-group nesting of a slide the pptx view walks (ours; PowerPoint itself has no limit)
PPTX_MAX_GROUP_DEPTH = 64


def _pptx_shape(shape, out: list[str], notes: list[str], depth: int = 0) -> None:
    """The lines of one shape: a group's shapes in order, recursively (case BR2-01: text in grouped shapes was
    dropped), text frames, table cells, a chart's title, a picture's alt text; what has no text goes to
    ``notes``."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.picture import Picture

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        if depth >= PPTX_MAX_GROUP_DEPTH:
            notes.append(f"shapes nested deeper than {PPTX_MAX_GROUP_DEPTH} groups")
            return
        for inner in shape.shapes:
            _pptx_shape(inner, out, notes, depth + 1)
        return
    if shape.has_text_frame:
        text = shape.text_frame.text.strip()
        if text:
            out.append(text)
    if getattr(shape, "has_table", False) and shape.has_table:
        for row in shape.table.rows:
            out.append("\t".join(cell.text.strip() for cell in row.cells))
    elif getattr(shape, "has_chart", False) and shape.has_chart:
        chart = shape.chart
        title = chart.chart_title.text_frame.text.strip() if chart.has_title and chart.chart_title.has_text_frame \
            else ""
        if title:
            out.append(f"[chart] {title}")
        notes.append("chart data")
    elif isinstance(shape, Picture):
        descr = (shape._element.xpath("./p:nvPicPr/p:cNvPr/@descr") or [""])[0].strip()
        if descr:
            out.append(f"[picture] {descr}")
        else:
            notes.append("picture (no text)")
    elif isinstance(shape, GraphicFrame):  # SmartArt, an embedded or linked object
        notes.append("SmartArt or embedded object")


#: relationship types of a slide's review comments: legacy (ECMA-376) and modern (PowerPoint 365, MS-PPTX)
_PPTX_COMMENT_RELS = ("http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments",
                      "http://schemas.microsoft.com/office/2018/10/relationships/comments")


def _pptx_comments(slide, notes: list[str]) -> list[str]:
    """The texts of a slide's review comments (the comments pane), legacy ``p:cm/p:text`` and modern threads'
    ``a:t`` runs; python-pptx has no API for them, so the parts are read as XML."""
    texts: list[str] = []
    for rel in slide.part.rels.values():
        if rel.reltype not in _PPTX_COMMENT_RELS or rel.is_external:
            continue
        try:
            root = _safe_xml(rel.target_part.blob)
        except Exception:  # noqa: BLE001 - a malformed comments part does not cost the slide
            notes.append("unreadable slide comments")
            continue
        for cm in root:
            if not isinstance(cm.tag, str) or cm.tag.rsplit("}", 1)[-1] != "cm":
                continue
            legacy = [t.text or "" for t in cm if isinstance(t.tag, str) and t.tag.rsplit("}", 1)[-1] == "text"]
            modern = [t.text or "" for t in cm.iter(f"{{{_NS['a']}}}t")]
            text = " ".join(x.strip() for x in (legacy or modern) if x.strip())
            if text:
                texts.append(text)
    return texts


def _pptx(path: Path) -> str:
    """Per slide ``## Slide N: <title>``, then every shape in order — groups recursively, text frames, table
    cells, chart titles, pictures' alt text — then the speaker notes; a closing ``[not extracted: …]`` line names
    pictures without alt text, chart data, SmartArt and embedded objects."""
    from pptx import Presentation

    prs = Presentation(str(path))
    out: list[str] = []
    notes: list[str] = []
    budget = _TextBudget(path)
    for i, slide in enumerate(prs.slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        out.append(f"## Slide {i}: {title}".rstrip())
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            lines: list[str] = []
            _pptx_shape(shape, lines, notes)
            out += [budget.take(ln) for ln in lines]
        if slide.has_notes_slide:
            text = slide.notes_slide.notes_text_frame.text.strip()
            if text:
                out.append(budget.take(f"[notes] {text}"))
        out += [budget.take(f"[comment] {c}") for c in _pptx_comments(slide, notes)]
        out.append("")
    return _not_extracted("\n".join(out), notes)


_TAG = re.compile(r"<[^>]+>")
#: RFC 5322 §2.2.3 folding: a line break followed by white space inside a header value
_FOLD = re.compile(r"[ \t]*\r?\n[ \t]+")
#: headers of the mail view, in this order (what a mail client shows above a message)
EML_HEADERS = ("From", "To", "Cc", "Date", "Subject")


def header_as_written(raw: str) -> str:
    """A header value as the file writes it: folding removed (each line break + indent becomes one space),
    RFC 2047 encoded words decoded (``=?utf-8?q?...?=`` is shown as the text it encodes); nothing parsed or
    re-formatted, so a date, an address list or a zone comment such as ``(PST)`` keeps its spelling
    (case R2-eml-date-year-0001-rewritten). Bytes that are not UTF-8 are shown as U+FFFD."""
    import email.header

    value = _FOLD.sub(" ", raw).strip()
    value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if "=?" in value:
        try:
            value = str(email.header.make_header(email.header.decode_header(value)))
        except (ValueError, LookupError, UnicodeError):
            pass  # a malformed encoded word is shown as written
    return value


def eml_headers(data: bytes) -> dict[str, str]:
    """``{name: value as written}`` of the :data:`EML_HEADERS` present in a message (first occurrence each).

    Raises: ValueError when the bytes have no header at all."""
    import email.parser
    import email.policy

    msg = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(data)
    if not msg.keys():
        raise ValueError("no email headers")
    out = {}
    for name in EML_HEADERS:
        raw = msg.get(name)
        if raw is not None:
            out[name] = header_as_written(raw if isinstance(raw, str) else str(raw))
    return out


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def normalise_mail_date(written: str) -> dict[str, str | None]:
    """The ``Date`` header as written, plus its normalised form **beside** it (never instead of it).

    Returns ``{"written", "iso", "note"}``: ``iso`` is ISO 8601 with the offset (``None`` when the value is not an
    RFC 5322 date); the year is the one written — the stdlib parser turns a written ``0001`` into 2001 (its
    two-digit-year rule), which is not what the file says, so the written year is kept; ``note`` says what is odd
    (a weekday that does not match the date, a year before 1900, no parse), else ``None``.
    """
    import datetime as dt
    import email.utils

    parsed = email.utils.parsedate_tz(written)
    if parsed is None:
        return {"written": written, "iso": None, "note": "not an RFC 5322 date"}
    m = re.search(r"\b(\d{1,2})\s+([A-Za-z]{3})\s+(\d{4})\b", written)
    year = int(m.group(3)) if m else parsed[0]
    notes = []
    try:
        tz = dt.timezone(dt.timedelta(seconds=parsed[9] or 0))
        when = dt.datetime(year, parsed[1], parsed[2], parsed[3], parsed[4], parsed[5], tzinfo=tz)
    except (ValueError, OverflowError) as exc:
        return {"written": written, "iso": None, "note": f"not a calendar date ({exc})"}
    if year < 1900:
        notes.append(f"year {year:04d} as written (a mail system's clock error, not normalised)")
    wd = re.match(r"\s*([A-Za-z]{3}),", written)
    if wd and wd.group(1).title() in _WEEKDAYS and wd.group(1).title() != _WEEKDAYS[when.weekday()]:
        notes.append(f"weekday {wd.group(1)} written; {when.date().isoformat()} is a {_WEEKDAYS[when.weekday()]}")
    return {"written": written, "iso": when.isoformat(), "note": "; ".join(notes) or None}


def _html_text(html: str) -> str:
    """What a browser shows of an HTML mail part: tags dropped, ``<script>``/``<style>`` content left out, entities
    (``&amp;``, ``&nbsp;``) decoded, ``<br>``/block ends as line breaks."""
    from html.parser import HTMLParser

    class _Text(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.hidden = 0

        def handle_starttag(self, tag, attrs):
            if tag in ("script", "style", "head", "title"):
                self.hidden += 1
            elif tag in ("br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6"):
                self.parts.append("\n")

        def handle_endtag(self, tag):
            if tag in ("script", "style", "head", "title"):
                self.hidden = max(0, self.hidden - 1)
            elif tag in ("td", "th"):
                self.parts.append("\t")

        def handle_data(self, data):
            if not self.hidden:
                self.parts.append(data)

    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r"[ \u00a0]+", " ", ln).strip(" ").rstrip("\t") for ln in "".join(parser.parts).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _part_text(part) -> str:
    text = part.get_content()
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")  # RFC 5322 line ends are transport, not text
    return _html_text(text) if part.get_content_type() == "text/html" else text


def _eml(path: Path) -> str:
    """Headers as written, then the body a mail client shows (text/plain preferred; an HTML-only body as its
    text), then further inline text parts (a multipart/mixed of several texts), forwarded messages (their headers
    and body, tagged), and the attachments' names; an attachment without a name is named by its type."""
    data = path.read_bytes()
    headers = eml_headers(data)
    msg = email.message_from_bytes(data, policy=email.policy.default)
    out = [f"{name}: {value}" for name, value in headers.items()]
    body = msg.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        text = _part_text(body)
        if not text.strip() and body.get_content_type() == "text/plain":  # an empty plain twin of an HTML body
            html = msg.get_body(preferencelist=("html",))
            text = _part_text(html) if html is not None else text
    out.append("")
    out.append(text.strip())
    extra: list[str] = []
    attachments: list[str] = []
    parts = list(msg.walk()) if msg.is_multipart() else []
    # the other renderings of the body (the HTML twin of a plain body) and the parts of forwarded messages (shown
    # with their message below) are not further text
    skip = {id(twin) for p in parts if p.get_content_type() == "multipart/alternative" for twin in p.iter_parts()}
    skip |= {id(p) for p in _inside_rfc822(msg)}
    for part in parts:
        ctype = part.get_content_type()
        if ctype == "message/rfc822":  # forwarded (nested ones too): its headers here, its body below
            inner = part.get_payload()[0] if isinstance(part.get_payload(), list) and part.get_payload() else None
            if inner is not None:
                extra.append("[forwarded message] " + "; ".join(
                    f"{k}: {header_as_written(str(inner.get(k)))}" for k in EML_HEADERS if inner.get(k)))
            continue
        if part is body or part.is_multipart() or id(part) in skip:
            continue
        name = part.get_filename()
        if name:
            attachments.append(name)
        elif part.get_content_maintype() == "text" and part.get_content_disposition() != "attachment":
            more = _part_text(part).strip()
            if more:
                extra.append(more)
        else:
            attachments.append(f"(unnamed {ctype})")
    for inner in _forwarded(msg):
        fwd = inner.get_body(preferencelist=("plain", "html"))
        if fwd is not None:
            t = _part_text(fwd).strip()
            if t:
                extra.append(t)
    if extra:
        out += ["", *extra]
    if attachments:
        out.append("")
        out.append("Attachments: " + ", ".join(attachments))
    return "\n".join(out).strip()


def _forwarded(msg) -> list:
    """The messages attached as ``message/rfc822`` parts, outermost first."""
    found = []
    for part in msg.walk() if msg.is_multipart() else []:
        if part.get_content_type() == "message/rfc822":
            payload = part.get_payload()
            if isinstance(payload, list) and payload:
                found.append(payload[0])
    return found


def _inside_rfc822(msg) -> list:
    """Every part that belongs to a forwarded message (its own parts are shown with it)."""
    inside = []
    for inner in _forwarded(msg):
        inside += list(inner.walk())
    return inside


#: calendar properties of the view, in the order an event lists them (RFC 5545 §3.8)
_ICS_KEYS = ("SUMMARY", "DTSTART", "DTEND", "DURATION", "RRULE", "RDATE", "EXDATE", "LOCATION", "ORGANIZER",
             "ATTENDEE", "STATUS", "DESCRIPTION")


def _ics(path: Path) -> str:
    """Every VEVENT as ``key: value`` lines in file order, values as written; a property's parameters (a
    ``TZID``, an attendee's ``CN``) follow in parentheses so no time zone is dropped."""
    raw = _decode(path.read_bytes()).replace("\r\n", "\n")
    # RFC 5545 line unfolding: a line starting with a space or tab continues the previous one.
    raw = re.sub(r"\n[ \t]", "", raw)
    if "BEGIN:VCALENDAR" not in raw:
        raise ValueError("missing BEGIN:VCALENDAR")
    out: list[str] = []
    depth = 0  # nesting inside the current VEVENT (a VALARM is not the event's own property)
    for line in raw.split("\n"):
        if line.startswith("BEGIN:VEVENT"):
            depth = 1
            continue
        if depth and line.startswith("BEGIN:"):
            depth += 1
            continue
        if depth and line.startswith("END:"):
            depth -= 1
            if depth == 0:
                out.append("")
            continue
        if depth != 1 or ":" not in line:
            continue
        name, value = _ics_split(line)
        key, _, params = name.partition(";")
        if key.upper() in _ICS_KEYS:
            value = value.replace("\\n", "\n").replace("\\N", "\n").replace("\\,", ",").replace("\\;", ";")
            out.append(f"{key.lower()}: {value}" + (f" ({params})" if params else ""))
    return "\n".join(out).strip()


def _ics_split(line: str) -> tuple[str, str]:
    """(name with parameters, value) of a content line; a ``:`` inside a quoted parameter does not split."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == ":" and not quoted:
            return line[:i], line[i + 1:]
    return line, ""


def _csv(path: Path) -> str:
    text = _decode(path.read_bytes())
    # Validate it parses; return the text itself (already human-readable).
    for _ in csv.reader(io.StringIO(text)):
        pass
    return text


def _json(path: Path) -> str:
    text = _decode(path.read_bytes())
    json.loads(text)
    return text


def extract_text(path: Path | str) -> str:
    """Readable text of ``path`` according to its kind (see module docstring).

    Returns: str (may be empty for an empty text file), always encodable as UTF-8: a lone surrogate a parser
    leaves (the email parser keeps undecodable header bytes that way; a JSON ``"\\udce9"`` escape) is written by
    the rule of :mod:`filegram_ray.names` (``%XX`` / U+FFFD; case BR-27).
    Raises: ``ExtractionError`` naming the file when it is missing, corrupt, a media kind, or an unknown
    binary kind.
    """
    return escape_bytes(_extract_text(Path(path)))


def _extract_text(p: Path) -> str:
    kind = kind_of(p)
    if is_media(kind):
        raise ExtractionError(p, f"media kind {kind!r} has no text (use its annotation)")
    try:
        if kind in ("docx", "xlsx", "pptx"):
            check_zip(p)  # before python-docx / openpyxl / python-pptx inflate anything
        elif kind != "pdf":  # every other kind is read into memory whole
            check_file_size(p, MAX_TEXT_FILE_BYTES)
        if kind == "pdf":
            return _pdf(p)
        if kind == "docx":
            return _docx(p)
        if kind == "xlsx":
            return _xlsx(p)
        if kind == "pptx":
            return _pptx(p)
        if kind == "eml":
            return _eml(p)
        if kind == "ics":
            return _ics(p)
        if kind == "csv":
            return _csv(p)
        if kind == "json":
            return _json(p)
        data = p.read_bytes()
        if kind in TEXT_KINDS:
            return _decode(data)
        if b"\x00" in data[:4096]:
            raise ValueError(f"binary content of unknown kind {kind!r}")
        return _decode(data)
    except ExtractionError:
        raise
    except InputLimitError as exc:
        raise ExtractionError(p, str(exc).removeprefix(f"{p}: ")) from None
    except FileNotFoundError as exc:
        raise ExtractionError(p, "file not found") from exc
    except RecursionError:
        raise ExtractionError(p, "nesting too deep") from None
    except Exception as exc:  # library-specific corrupt-file errors vary (zipfile, lxml, pypdf, ...)
        raise ExtractionError(p, f"{type(exc).__name__}: {exc}") from exc
