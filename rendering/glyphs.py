"""Text that every renderer can carry: fonts that cover it, and per-format removal of what no format can hold.

Fonts (BR-13). Drawn derivatives (PDF, PNG page, PNG chart) pick a font *per character run*, not per section, from
a chain whose files ship inside installed packages (no system fonts, nothing downloaded):

=====================  ==========================================  ===============================================
font                   file (package)                              covers
=====================  ==========================================  ===============================================
DejaVu Sans (+ Bold,   ``matplotlib/mpl-data/fonts/ttf/`` (ships   Latin, Greek, Cyrillic, Hebrew, Arabic, many
Mono)                  with matplotlib)                            symbols, U+FFFD
Noto Sans SC/KR/JP/TC  ``justmytype_intl_cjk/fonts/ofl/`` (the     Han, kana, Hangul, CJK punctuation and full-width
                       ``justmytype-intl-cjk`` wheel, SIL OFL)     forms
=====================  ==========================================  ===============================================

The Noto files are TrueType (glyf) variable fonts, so reportlab can embed a subset of them; reportlab draws the
default instance (weight 100, a light face), Pillow sets weight 400 (:data:`CJK_WEIGHT`). PDFs keep the standard
Helvetica / Courier for characters of Windows-1252 (byte-identical English PDFs, no embedded font) and embed a
subset of the TrueType fonts for every other character.

Removal (BR-15), one rule per family of formats:

* :func:`strip_controls` — every format but Markdown: ANSI escape sequences, C0/C1 control characters other than
  tab / newline / carriage return, lone surrogates and the non-characters U+FFFE / U+FFFF (none of them is allowed in
  XML 1.0, the text of DOCX, PPTX and XLSX; none has a glyph).
* :func:`for_drawing` — PDF and PNG on top of that: tabs and line/paragraph separators become spaces, invisible
  format characters (Unicode category Cf: soft hyphen, joiners, direction marks) are dropped, and any other
  character no font of the chain covers becomes U+FFFD "�" (visible, and recorded — never a silent box).

Every removal is counted; the renderers record the counts in the derivative's metadata (``control_chars_removed``,
``missing_glyphs``) and the metadata ``text`` is the cleaned text, i.e. exactly what the derivative carries.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "CJK_WEIGHT",
    "FontFile",
    "TextStats",
    "clean_object",
    "font_chain",
    "font_for",
    "for_drawing",
    "strip_controls",
]

#: weight Pillow sets on the variable Noto CJK fonts (400 = Regular; their default instance is 100, Thin)
CJK_WEIGHT = 400
#: the replacement drawn for a character no font covers (DejaVu Sans has it)
REPLACEMENT = "\ufffd"

#: ANSI escape sequences: CSI (``ESC [ … final``), OSC (``ESC ] … BEL|ESC \\``) and two-character escapes
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
#: what XML 1.0 forbids (§2.2 Char) plus C1 controls and DEL; tab, newline and carriage return stay
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True)
class FontFile:
    """One font of the chain: reportlab / matplotlib ``name``, file ``path``, ``variable`` (has a wght axis)."""

    name: str
    path: str
    variable: bool = False


@dataclass
class TextStats:
    """What cleaning removed: ``controls`` (characters stripped) and ``missing`` (characters replaced by U+FFFD,
    first occurrence order)."""

    controls: int = 0
    missing: list[str] = dataclasses.field(default_factory=list)
    missing_count: int = 0

    def meta(self) -> dict[str, Any]:
        """The metadata keys a renderer adds (only the non-zero ones)."""
        out: dict[str, Any] = {}
        if self.controls:
            out["control_chars_removed"] = self.controls
        if self.missing_count:
            out["missing_glyphs"] = self.missing_count
            out["missing_glyph_chars"] = [f"U+{ord(c):04X}" for c in self.missing[:20]]
        return out


def _mpl_font(name: str) -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name)


@functools.lru_cache(maxsize=1)
def font_chain() -> tuple[FontFile, ...]:
    """The fonts tried in order for each character (module docstring). The first is DejaVu Sans; the CJK fonts
    follow when ``justmytype-intl-cjk`` is installed (a core dependency) and its files match the models manifest.

    Raises:
        filegram_ray.weights.WeightsError: an installed font file differs from ``filegram_ray/models.yaml``."""
    chain = [FontFile("DejaVuSans", _mpl_font("DejaVuSans.ttf"))]
    from filegram_ray.weights import check_once

    try:
        # the four Noto Sans files against filegram_ray/models.yaml, once per installed copy (WeightsError if changed)
        root = check_once("justmytype-intl-cjk") / "fonts" / "ofl"
    except ImportError:  # pragma: no cover - a core dependency; without it CJK becomes U+FFFD (recorded)
        log.warning("justmytype-intl-cjk is not installed: CJK text in PDFs and images is drawn as U+FFFD")
        return tuple(chain)
    for code in ("SC", "KR", "JP", "TC"):
        path = root / f"notosans{code.lower()}" / f"NotoSans{code}[wght].ttf"
        if path.is_file():
            chain.append(FontFile(f"NotoSans{code}", str(path), variable=True))
    return tuple(chain)


@functools.lru_cache(maxsize=8)
def _cmap(path: str) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    with TTFont(path, lazy=True) as f:
        return frozenset(f.getBestCmap())


@functools.lru_cache(maxsize=65536)
def font_for(ch: str) -> int | None:
    """Index in :func:`font_chain` of the first font with a glyph for ``ch``, or None. The big CJK character maps
    are read only when a character outside DejaVu Sans appears."""
    cp = ord(ch)
    for i, f in enumerate(font_chain()):
        if cp in _cmap(f.path):
            return i
    return None


def strip_controls(text: str, stats: TextStats | None = None) -> str:
    """``text`` without ANSI escapes, control characters (tab, newline, CR kept), surrogates and U+FFFE/U+FFFF."""
    if not text:
        return text
    out = _ANSI_RE.sub("", text) if "\x1b" in text else text
    out = _CONTROL_RE.sub("", out)
    if stats is not None:
        stats.controls += len(text) - len(out)
    return out


def for_drawing(text: str, stats: TextStats | None = None) -> str:
    """:func:`strip_controls`, then tabs / separators → spaces, undrawable format characters dropped, characters no
    font covers → U+FFFD (counted in ``stats.missing``)."""
    text = strip_controls(text, stats)
    if text.isascii():
        return text.replace("\t", " ").replace("\r", " ")
    out = []
    for ch in text:
        if ch in "\t\r\u2028\u2029\x85":
            out.append(" ")
        elif ch == "\n" or ch.isascii():
            out.append(ch)
        elif unicodedata.category(ch) == "Cf":  # invisible format characters (soft hyphen, joiners, marks)
            if stats is not None:
                stats.controls += 1
        elif font_for(ch) is not None:
            out.append(ch)
        else:
            out.append(REPLACEMENT)
            if stats is not None:
                stats.missing_count += 1
                if ch not in stats.missing:
                    stats.missing.append(ch)
    return "".join(out)


def clean_object(obj: Any, fn, stats: TextStats | None = None) -> Any:
    """A copy of a :class:`~rendering.sections.Section` / :class:`~rendering.sections.Document` (or a str, list, tuple
    or dataclass of them) with ``fn(text, stats)`` applied to every string in it. ``stats`` receives the counts of
    every string, duplicates included (a section keeps its text in several fields): renderers count on the text
    they carry instead (:func:`rendering.renderers._clean`)."""
    stats = stats if stats is not None else TextStats()
    if isinstance(obj, str):
        return fn(obj, stats)
    if isinstance(obj, list):
        return [clean_object(x, fn, stats) for x in obj]
    if isinstance(obj, tuple):
        return tuple(clean_object(x, fn, stats) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: clean_object(getattr(obj, f.name), fn, stats) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj
