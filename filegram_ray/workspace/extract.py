"""Plain-text extraction for workspace files, and extension-based file kinds.

``extract_text(path) -> str`` turns every document kind a FileGram workspace holds into UTF-8 text so that
the engine's ``read`` tool, the import path and the memory methods see the same words a person would read:

* pdf  — pypdf, page texts joined with a blank line
* docx — python-docx, paragraphs in order then every table as tab-separated rows
* xlsx — openpyxl (read-only, cached values), every sheet as ``# sheet: <name>`` then tab-separated rows
* pptx — python-pptx, ``## Slide N: <title>`` then every text frame / table cell of the slide
* eml  — stdlib ``email``: From/To/Cc/Date/Subject headers, then the text/plain body (html parts stripped of tags)
* ics  — SUMMARY / DTSTART / DTEND / LOCATION / DESCRIPTION lines of every VEVENT
* csv, txt, md, json, and other text kinds — decoded as UTF-8 (BOM stripped; invalid bytes replaced)

Media kinds (images, audio, video) have no text; ``extract_text`` raises ``ExtractionError`` for them
(their content reaches the agent through annotations, ref §1.1).

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
from pathlib import Path

from filegram_ray.limits import (
    MAX_EXTRACTED_CHARS,
    MAX_TEXT_FILE_BYTES,
    PDF_MAX_PAGES,
    InputLimitError,
    check_file_size,
    check_zip,
)

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


class ExtractionError(ValueError):
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


def _pdf(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(str(path))  # pypdf bounds every decoded stream (75 MB)
    n = len(reader.pages)
    if n > PDF_MAX_PAGES:
        raise InputLimitError(f"{path}: too large: {n:,} pages (limit {PDF_MAX_PAGES:,})")
    budget = _TextBudget(path)
    return "\n\n".join(budget.take((page.extract_text() or "").strip()) for page in reader.pages).strip()


def _docx(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        parts.append("")
        for row in table.rows:
            parts.append("\t".join(cell.text.strip() for cell in row.cells))
    return "\n".join(parts).strip()


def _fmt_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


#: our own bound on the spreadsheet cells one extraction visits (padding of sparse rows included)
XLSX_MAX_CELLS = 2_000_000


def _xlsx(path: Path) -> str:
    import openpyxl

    wb = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    chars = _TextBudget(path)  # characters of text taken (MAX_EXTRACTED_CHARS)
    try:
        out: list[str] = []
        cells_left = XLSX_MAX_CELLS  # cells visited (XLSX_MAX_CELLS)
        for ws in wb.worksheets:
            out.append(f"# sheet: {ws.title}")
            # The declared dimension (or one formatted cell at XFD1048576) would pad every row to 16,384 columns
            # and emit every empty row up to it (BR-28): iterate the cells actually stored instead.
            ws.reset_dimensions()
            for row in ws.iter_rows(values_only=True):
                cells_left -= len(row)
                if cells_left < 0:
                    out.append(f"[cut: more than {XLSX_MAX_CELLS} cells]")
                    break
                cells = [_fmt_cell(v) for v in row]
                while cells and cells[-1] == "":
                    cells.pop()
                if cells:
                    out.append(chars.take("\t".join(cells)))
            out.append("")
        return "\n".join(out).strip()
    finally:
        wb.close()


def _pptx(path: Path) -> str:
    from pptx import Presentation

    prs = Presentation(str(path))
    out: list[str] = []
    for i, slide in enumerate(prs.slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        out.append(f"## Slide {i}: {title}".rstrip())
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame:
                text = shape.text_frame.text.strip()
                if text:
                    out.append(text)
            if getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    out.append("\t".join(cell.text.strip() for cell in row.cells))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                out.append(f"[notes] {notes}")
        out.append("")
    return "\n".join(out).strip()


_TAG = re.compile(r"<[^>]+>")


def _eml(path: Path) -> str:
    msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    if not msg.keys():
        raise ValueError("no email headers")
    out = []
    for header in ("From", "To", "Cc", "Date", "Subject"):
        if msg[header] is not None:
            out.append(f"{header}: {msg[header]}")
    body = msg.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        text = body.get_content()
        if body.get_content_type() == "text/html":
            text = _TAG.sub("", text)
    attachments = [part.get_filename() for part in msg.iter_attachments() if part.get_filename()]
    out.append("")
    out.append(text.strip())
    if attachments:
        out.append("")
        out.append("Attachments: " + ", ".join(attachments))
    return "\n".join(out).strip()


_ICS_KEYS = ("SUMMARY", "DTSTART", "DTEND", "LOCATION", "DESCRIPTION")


def _ics(path: Path) -> str:
    raw = _decode(path.read_bytes()).replace("\r\n", "\n")
    # RFC 5545 line unfolding: a line starting with a space or tab continues the previous one.
    raw = re.sub(r"\n[ \t]", "", raw)
    if "BEGIN:VCALENDAR" not in raw:
        raise ValueError("missing BEGIN:VCALENDAR")
    out: list[str] = []
    in_event = False
    for line in raw.split("\n"):
        if line.startswith("BEGIN:VEVENT"):
            in_event = True
            continue
        if line.startswith("END:VEVENT"):
            in_event = False
            out.append("")
            continue
        if not in_event or ":" not in line:
            continue
        key, value = line.split(":", 1)
        key = key.split(";", 1)[0].upper()
        if key in _ICS_KEYS:
            value = value.replace("\\n", "\n").replace("\\,", ",").replace("\\;", ";")
            out.append(f"{key.lower()}: {value}")
    return "\n".join(out).strip()


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

    Returns: str (may be empty for an empty text file).
    Raises: ``ExtractionError`` naming the file when it is missing, corrupt, a media kind, or an unknown
    binary kind.
    """
    p = Path(path)
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
