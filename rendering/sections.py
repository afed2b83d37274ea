"""Decomposition of an agent's text output (Markdown or plain text) into semantically coherent sections.

The paper segments each output into sections before rendering them into other modalities (FILEGRAM_REFERENCE §10,
⚠ CODE≠PAPER: upstream delegates this to one LLM call; we do it deterministically). The rules:

1. Parse the Markdown into top-level blocks with ``markdown-it-py`` (CommonMark + GFM tables): heading, paragraph,
   list, table, code, quote, rule, html.
2. A document with headings is cut before every heading of the *split level*: the shallowest heading level, or the
   next one down when the shallowest occurs only once (a lone ``# Title`` is the document title, not a section).
   Deeper headings stay inside their section. Text before the first heading is its own section.
3. Size balancing on the plain-text length (characters; one CJK character counts as one): a section shorter than
   ``min_chars`` is merged into the following one (the last into the previous one); a section longer than
   ``max_chars`` is split at block boundaries into parts of at most ``max_chars`` (a single oversized block is split
   at sentence ends). Parts after the first are titled ``"<title> (n)"``.
4. A document without headings is packed greedily by blocks (paragraphs) into parts of about ``target_chars``.

The result is a pure function of the text and the three sizes: same input, same sections.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from markdown_it import MarkdownIt

__all__ = [
    "Block",
    "Document",
    "Section",
    "SectionParams",
    "Table",
    "detect_language",
    "is_cjk",
    "load_document",
    "parse_blocks",
    "split_sections",
]

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
_SENT_END_RE = re.compile(r"(?<=[.!?。！？；;])\s*")
_NUM_RE = re.compile(r"^[\s$€£¥]*[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?\s*%?\s*$")


def is_cjk(text: str) -> bool:
    """True if ``text`` contains at least one CJK (Han, kana, Hangul) character."""
    return bool(_CJK_RE.search(text))


def detect_language(text: str) -> str:
    """``"zh"`` if CJK characters are at least 10 % of the letters of ``text``, else ``"en"``.

    The two languages of the FileGram profiles (FILEGRAM_REFERENCE §0: 10 Chinese-language, 10 English-language);
    upstream's converter likewise tags ``lang = zh`` when CJK is present (§10). The 10 % threshold is ours: it keeps
    an English report quoting one Chinese name English.
    """
    cjk = len(_CJK_RE.findall(text))
    letters = sum(1 for ch in text if ch.isalpha())
    return "zh" if letters and cjk / letters >= 0.10 else "en"


def parse_number(cell: str) -> float | None:
    """A table cell as a number (``"1,234"``, ``"12.5%"``, ``"$40"``), or ``None`` if it is not numeric."""
    if not _NUM_RE.match(cell or ""):
        return None
    try:
        return float(re.sub(r"[^\d.+-]", "", cell))
    except ValueError:
        return None


@dataclass
class Table:
    """A GFM table: ``header`` (column names) and ``rows`` (lists of cell strings, padded to the header width)."""

    header: list[str]
    rows: list[list[str]]

    def numeric_columns(self) -> list[int]:
        """Indices of columns (other than the first, the label column) whose every non-empty cell is a number."""
        cols = []
        for j in range(1, len(self.header)):
            cells = [r[j] for r in self.rows if j < len(r) and r[j].strip()]
            if cells and all(parse_number(c) is not None for c in cells):
                cols.append(j)
        return cols

    def is_numeric(self) -> bool:
        """At least two data rows and one numeric column: enough for a chart."""
        return len(self.rows) >= 2 and bool(self.numeric_columns())


@dataclass
class Block:
    """One top-level Markdown block.

    Attributes:
        kind: ``heading`` | ``paragraph`` | ``list`` | ``table`` | ``code`` | ``quote`` | ``rule`` | ``html``.
        source: the block's Markdown source lines.
        plain: its text without Markdown syntax (list items one per line; table rows tab-separated).
        level: heading level 1–6 (0 for other blocks).
        items: list items (``list`` only).
        table: the parsed table (``table`` only).
    """

    kind: str
    source: str
    plain: str
    level: int = 0
    items: list[str] = field(default_factory=list)
    table: Table | None = None

    @property
    def size(self) -> int:
        return len(self.plain)


@dataclass
class Section:
    """A semantically coherent part of an output.

    Attributes:
        index: 0-based position in the document.
        title: heading text (or, without a heading, the document title / the first words).
        level: heading level that opened the section (0 if none).
        blocks: its blocks in order (the opening heading included).
        language: ``zh`` or ``en`` (:func:`detect_language` of the section text).
        doc_title: title of the whole document.
    """

    index: int
    title: str
    level: int
    blocks: list[Block]
    language: str = "en"
    doc_title: str = ""

    @property
    def markdown(self) -> str:
        return "\n\n".join(b.source.strip("\n") for b in self.blocks) + "\n"

    @property
    def plain_text(self) -> str:
        return "\n".join(b.plain for b in self.blocks if b.plain)

    @property
    def body_blocks(self) -> list[Block]:
        """Blocks after the opening heading."""
        if self.blocks and self.blocks[0].kind == "heading" and self.level:
            return self.blocks[1:]
        return self.blocks

    @property
    def tables(self) -> list[Table]:
        return [b.table for b in self.blocks if b.table is not None]

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Section:
        blocks = []
        for b in d["blocks"]:
            b = dict(b)
            if b.get("table"):
                b["table"] = Table(**b["table"])
            blocks.append(Block(**b))
        return cls(index=d["index"], title=d["title"], level=d["level"], blocks=blocks,
                   language=d.get("language", "en"), doc_title=d.get("doc_title", ""))


@dataclass
class Document:
    """A decomposed output: its ``title``, ``language`` and ``sections``."""

    title: str
    language: str
    sections: list[Section]


@dataclass(frozen=True)
class SectionParams:
    """Size balancing, in plain-text characters.

    Defaults (ours): agent outputs are mostly 1,000–3,000 characters (the "balanced" output-detail value of
    FILEGRAM_REFERENCE §9.4), so a ~900-character target gives 2–4 sections per output, which is what >10 K
    derivatives from ≈2.5 K outputs needs (§0); ``max_chars`` 1,800 keeps a section within about two ≤800-character
    slide bodies of §10's PPTX rule; ``min_chars`` 150 avoids one-line sections.
    """

    min_chars: int = 150
    target_chars: int = 900
    max_chars: int = 1800


_MD = MarkdownIt("commonmark").enable("table")


def _inline_plain(tok) -> str:
    out = []
    for ch in tok.children or []:
        if ch.type in ("text", "code_inline", "html_inline"):
            out.append(ch.content)
        elif ch.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif ch.type == "image":
            out.append(ch.content or "")
    return "".join(out).strip()


def parse_blocks(text: str) -> list[Block]:
    """Split Markdown ``text`` into top-level :class:`Block` s (order kept)."""
    lines = text.splitlines()
    tokens = _MD.parse(text)
    blocks: list[Block] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.level != 0 or tok.map is None:
            i += 1
            continue
        start, end = tok.map
        source = "\n".join(lines[start:end])
        if tok.type.endswith("_open"):
            close = tok.type[:-5] + "_close"
            depth, j = 0, i
            while j < n:  # find the matching close token at level 0
                if tokens[j].type == tok.type:
                    depth += 1
                elif tokens[j].type == close:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            inner = tokens[i + 1:j]
        else:
            j, inner = i, []
        kind = tok.type.replace("_open", "")
        if kind == "heading":
            blocks.append(Block("heading", source, _inline_plain(inner[0]) if inner else "", level=int(tok.tag[1:])))
        elif kind == "paragraph":
            blocks.append(Block("paragraph", source, _inline_plain(inner[0]) if inner else ""))
        elif kind in ("bullet_list", "ordered_list"):
            items: list[str] = []
            cur: list[str] = []
            depth = 0
            for t in inner:
                if t.type == "list_item_open":
                    depth += 1
                    if depth == 1:
                        cur = []
                elif t.type == "list_item_close":
                    depth -= 1
                    if depth == 0:
                        items.append(" ".join(x for x in cur if x))
                elif t.type == "inline":
                    cur.append(_inline_plain(t))
            blocks.append(Block("list", source, "\n".join(items), items=items))
        elif kind == "table":
            header: list[str] = []
            rows: list[list[str]] = []
            row: list[str] = []
            in_head = False
            for t in inner:
                if t.type == "thead_open":
                    in_head = True
                elif t.type == "thead_close":
                    in_head = False
                elif t.type == "tr_open":
                    row = []
                elif t.type == "inline":
                    row.append(_inline_plain(t))
                elif t.type == "tr_close":
                    if in_head:
                        header = row
                    else:
                        rows.append((row + [""] * len(header))[:max(len(header), len(row))])
            table = Table(header, rows)
            plain = "\n".join("\t".join(r) for r in [header, *rows])
            blocks.append(Block("table", source, plain, table=table))
        elif kind in ("fence", "code_block"):
            blocks.append(Block("code", source, tok.content.rstrip("\n")))
        elif kind == "blockquote":
            plain = " ".join(_inline_plain(t) for t in inner if t.type == "inline")
            blocks.append(Block("quote", source, plain))
        elif kind == "hr":
            blocks.append(Block("rule", source, ""))
        elif kind == "html_block":
            blocks.append(Block("html", source, re.sub(r"<[^>]+>", " ", tok.content).strip()))
        i = j + 1
    return blocks


def _split_block(block: Block, max_chars: int) -> list[Block]:
    """Split one oversized paragraph-like block at sentence ends (lists at items) into pieces ≤ ``max_chars``."""
    if block.kind == "list":
        units = block.items
        joiner = "\n"
    else:
        units = [s for s in _SENT_END_RE.split(block.plain) if s]
        joiner = " " if not is_cjk(block.plain) else ""
    pieces: list[list[str]] = [[]]
    size = 0
    for u in units:
        if pieces[-1] and size + len(u) > max_chars:
            pieces.append([])
            size = 0
        pieces[-1].append(u)
        size += len(u) + 1
    out = []
    for p in pieces:
        plain = joiner.join(p)
        if block.kind == "list":
            out.append(Block("list", "\n".join(f"- {x}" for x in p), plain, items=list(p)))
        else:
            out.append(Block("paragraph", plain, plain))
    return out


def _pack(blocks: list[Block], limit: int) -> list[list[Block]]:
    """Greedy packing of blocks into groups whose size stays ≤ ``limit`` (a group holds at least one block)."""
    groups: list[list[Block]] = [[]]
    size = 0
    for b in blocks:
        if groups[-1] and size + b.size > limit:
            groups.append([])
            size = 0
        groups[-1].append(b)
        size += b.size
    return [g for g in groups if g]


def _first_words(text: str, n: int = 8) -> str:
    text = " ".join(text.split())
    if is_cjk(text):
        return text[:16]
    words = text.split(" ")
    return " ".join(words[:n]) + (" …" if len(words) > n else "")


def split_sections(text: str, params: SectionParams | None = None, doc_title: str = "") -> Document:
    """Decompose Markdown/plain ``text`` into a :class:`Document` of balanced :class:`Section` s.

    Args:
        text: the output's text (UTF-8 decoded).
        params: size balancing (defaults: :class:`SectionParams`).
        doc_title: fallback document title (e.g. the file stem) when the text has no heading.

    Returns:
        A document with at least one section (an empty text gives one empty section).
    """
    p = params or SectionParams()
    blocks = [b for b in parse_blocks(text) if b.kind != "rule"]
    # oversized single blocks are split first, so every later step works on blocks ≤ max_chars
    flat: list[Block] = []
    for b in blocks:
        if b.size > p.max_chars and b.kind in ("paragraph", "list", "quote"):
            flat.extend(_split_block(b, p.max_chars))
        else:
            flat.append(b)
    headings = [b for b in flat if b.kind == "heading"]
    title = doc_title
    if headings:
        top = min(h.level for h in headings)
        tops = [h for h in headings if h.level == top]
        title = tops[0].plain or doc_title
        split_level = top + 1 if len(tops) == 1 and any(h.level == top + 1 for h in headings) else top
        raw: list[tuple[str, int, list[Block]]] = []
        for b in flat:
            if b.kind == "heading" and b.level <= split_level:
                raw.append((b.plain, b.level, [b]))
            elif raw:
                raw[-1][2].append(b)
            else:
                raw.append(("", 0, [b]))
        # merge tiny sections forward (a heading-only title section joins the first real one)
        merged: list[tuple[str, int, list[Block]]] = []
        pending: tuple[str, int, list[Block]] | None = None
        for sec in raw:
            if pending is not None:
                # a heading-only remnant (e.g. the document title) takes the next section's name
                if all(b.kind == "heading" for b in pending[2]) or not pending[0]:
                    sec = (sec[0], sec[1], pending[2] + sec[2])
                else:
                    sec = (pending[0], pending[1], pending[2] + sec[2])
                pending = None
            if sum(b.size for b in sec[2]) < p.min_chars:
                pending = sec
            else:
                merged.append(sec)
        if pending is not None:
            if merged:
                last = merged[-1]
                merged[-1] = (last[0], last[1], last[2] + pending[2])
            else:
                merged.append(pending)
        parts: list[tuple[str, int, list[Block]]] = []
        for name, level, blks in merged:
            groups = _pack(blks, p.max_chars) if sum(b.size for b in blks) > p.max_chars else [blks]
            for k, g in enumerate(groups):
                parts.append((name if k == 0 else f"{name} ({k + 1})", level if k == 0 else 0, g))
    else:
        groups = _pack(flat, p.target_chars) if flat else [[]]
        # a too-small tail joins the previous group
        if len(groups) > 1 and sum(b.size for b in groups[-1]) < p.min_chars:
            tail = groups.pop()
            groups[-1] = groups[-1] + tail
        parts = [("", 0, g) for g in groups]
    lang_doc = detect_language(text)
    sections = []
    for i, (name, level, blks) in enumerate(parts):
        plain = "\n".join(b.plain for b in blks)
        name = name or (title if i == 0 and title else _first_words(plain) or title or f"Part {i + 1}")
        sections.append(Section(index=i, title=name, level=level, blocks=blks,
                                language=detect_language(plain) if plain.strip() else lang_doc,
                                doc_title=title or name))
    return Document(title=title or (sections[0].title if sections else ""), language=lang_doc, sections=sections)


def load_document(data: bytes, name: str, params: SectionParams | None = None) -> Document:
    """Decode an output file's bytes and decompose it.

    Args:
        data: the file's bytes (UTF-8, a BOM is accepted).
        name: the file's path (for error messages and the fallback title = its stem).

    Raises:
        ValueError: the bytes are not UTF-8 text, or contain NUL bytes (a binary file), naming ``name``.
    """
    if b"\x00" in data[:8192]:
        raise ValueError(f"{name}: not a text file (NUL bytes found)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return split_sections(text, params, doc_title=stem)
