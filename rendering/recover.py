"""Text recovery from derivatives: what a memory method sees in the Multimodal setting instead of source Markdown.

``recover_text(path)`` reads a derivative with its format's standard reader:

* ``.pdf``  → pypdf ``extract_text`` of every page;
* ``.docx`` → python-docx paragraphs, then table rows (cells joined by `` | ``);
* ``.pptx`` → python-pptx text frames of every slide, one ``[Slide]`` block per slide (§10's ground-truth form);
* ``.xlsx`` → openpyxl cell values, tab-separated rows, one block per sheet;
* ``.png``  → the caption / alt text the renderer stored in the PNG ``iTXt``/``tEXt`` chunk ``Description`` (the
  same text as the ``caption`` column of ``derivatives/index.parquet``). No OCR: rapidocr is not installed;
* ``.wav``  → the narration script stored in the RIFF ``LIST/INFO/ICMT`` chunk (the ``transcript`` column);
* ``.md`` / ``.txt`` → the file's text.

Raises ``ValueError`` naming the file for an unknown extension, an image/audio file without stored text (pass
``caption=`` / ``transcript=`` from the index then), or a container past the limits of :mod:`filegram_ray.limits`
(an OOXML zip bomb, a PDF of too many pages).
"""

from __future__ import annotations

import io
import os
import re
import struct
from pathlib import Path

from filegram_ray.errors import UserError
from filegram_ray.limits import PDF_MAX_PAGES, InputLimitError, check_zip

__all__ = ["recover_bytes", "recover_text"]


def _pdf(data: bytes, name: str = "<bytes>") -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))  # pypdf bounds every decoded stream (75 MB)
    if len(reader.pages) > PDF_MAX_PAGES:
        raise InputLimitError(f"{name}: too large: {len(reader.pages):,} pages (limit {PDF_MAX_PAGES:,})")
    return "\n".join((p.extract_text() or "") for p in reader.pages).strip()


def _docx(data: bytes) -> str:
    import docx

    d = docx.Document(io.BytesIO(data))
    lines = [p.text for p in d.paragraphs if p.text.strip()]
    for t in d.tables:
        for row in t.rows:
            lines.append(" | ".join(c.text for c in row.cells))
    return "\n".join(lines)


def _pptx(data: bytes) -> str:
    from pptx import Presentation

    blocks = []
    for slide in Presentation(io.BytesIO(data)).slides:
        texts = [sh.text_frame.text for sh in slide.shapes if sh.has_text_frame and sh.text_frame.text.strip()]
        blocks.append("[Slide] " + "\n".join(texts))
    return "\n".join(blocks)


def _xlsx(data: bytes) -> str:
    from openpyxl import load_workbook

    wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    blocks = []
    for ws in wb.worksheets:
        rows = ["\t".join(_cell_text(c) for c in row) for row in ws.iter_rows()]
        blocks.append(f"[Sheet] {ws.title}\n" + "\n".join(rows))
    wb.close()
    return "\n\n".join(blocks)


_NUMBER_FORMAT_RE = re.compile(r"(#,##)?0(\.0+)?")


def _cell_text(cell) -> str:
    """A cell as a person reads it: a number in a ``0.00`` / ``#,##0`` / ``#,##0.00`` format is shown with it (so
    ``1,200`` written by the xlsx renderer reads back as ``1,200``), every other value as ``str``."""
    v = getattr(cell, "value", None)
    if v is None:
        return ""
    fmt = getattr(cell, "number_format", "General") or "General"
    m = _NUMBER_FORMAT_RE.fullmatch(fmt)
    if m and isinstance(v, (int, float)) and not isinstance(v, bool):
        decimals = len(m.group(2)) - 1 if m.group(2) else 0
        return f"{v:{',' if m.group(1) else ''}.{decimals}f}"
    return str(v)


def _png(data: bytes) -> str | None:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im.load()
        text = im.text.get("Description") if hasattr(im, "text") else None
    return str(text) if text is not None else None  # an empty caption is a caption (an empty page)


def _wav(data: bytes) -> str | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF WAVE file")
    pos = 12
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"LIST" and body[:4] == b"INFO":
            sub = 4
            while sub + 8 <= len(body):
                sid, ssize = body[sub:sub + 4], struct.unpack("<I", body[sub + 4:sub + 8])[0]
                if sid == b"ICMT":
                    return body[sub + 8:sub + 8 + ssize].rstrip(b"\x00").decode("utf-8")
                sub += 8 + ssize + (ssize % 2)
        pos += 8 + size + (size % 2)
    return None


def recover_bytes(data: bytes, ext: str, name: str = "<bytes>", caption: str | None = None,
                  transcript: str | None = None) -> str:
    """:func:`recover_text` on bytes already in memory; ``ext`` without the dot (``pdf``, ``png`` …)."""
    ext = ext.lower().lstrip(".")
    if ext in ("docx", "pptx", "xlsx"):
        check_zip(data, name)  # a decompression bomb is refused before the library inflates it (names the file)
    try:
        if ext == "pdf":
            return _pdf(data, name)
        if ext == "docx":
            return _docx(data)
        if ext == "pptx":
            return _pptx(data)
        if ext == "xlsx":
            return _xlsx(data)
        if ext in ("md", "markdown", "txt"):
            return data.decode("utf-8-sig")
        if ext == "png":
            text = caption or _png(data)
            if text is None:
                raise ValueError("no stored caption (iTXt 'Description'); pass caption= from the index")
            return text
        if ext == "wav":
            text = transcript or _wav(data)
            if text is None:
                raise ValueError("no stored transcript (LIST/INFO/ICMT); pass transcript= from the index")
            return text
    except InputLimitError:
        raise
    except ValueError as exc:
        raise UserError(f"{name}: {exc}") from exc
    except Exception as exc:  # the format's reader failed on a corrupt file: a bad input, named, not a crash
        raise UserError(f"{name}: not a readable .{ext} file ({type(exc).__name__}: {exc})") from exc
    raise UserError(f"{name}: cannot recover text from a .{ext} file")


def recover_text(path: str | os.PathLike, caption: str | None = None, transcript: str | None = None) -> str:
    """The text a derivative carries, read back with its format's reader (see the module doc).

    Args:
        path: a local derivative file.
        caption: alt text for an image (overrides the stored chunk), e.g. the index's ``caption`` column.
        transcript: narration for audio (overrides the stored chunk), e.g. the index's ``transcript`` column.

    Raises:
        FileNotFoundError: ``path`` does not exist. ValueError: ``path`` is empty or a directory, an unsupported
            extension, or no stored text.
    """
    p = Path(path)
    if not str(path) or p.is_dir():
        raise UserError(f"{str(path)!r} is not a derivative file (give the path of a pdf, docx, pptx, xlsx, png, wav "
                         "or md file)")
    if not p.exists():
        raise FileNotFoundError(f"no such derivative file: {p}")
    return recover_bytes(p.read_bytes(), p.suffix, str(p), caption, transcript)
