"""What the simulator learned from its tool results: lines, figures and names pulled from ``read``/``grep``
outputs. Every piece of content the simulator writes is built from a :class:`Notebook`, so outputs quote what the
trajectory actually read (ARCHITECTURE rule 3).

Read outputs are line-numbered (engine ``read`` tool, ref §1.1: window offset/limit, numbered lines); the number
prefix is stripped with :data:`_LINE_PREFIX`, which accepts the common ``"   12\\t"``, ``"00012| "`` and
``"12: "`` shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_LINE_PREFIX = re.compile(r"^\s*(\d{1,6})(?:\t|\|\s?|:\s|→)")
#: Markdown block marks and list glyphs of extracted documents (•, ▪, ◦, ●, ‣, –: PDF and DOCX bullets)
_MD_MARK = re.compile(r"^\s*(?:#{1,6}\s+|[-*+>–]\s+|[•▪◦●‣]\s*|\d{1,3}[.)]\s+|\|)")
_FIGURE = re.compile(
    r"([A-Za-z\u4e00-\u9fff][A-Za-z\u4e00-\u9fff /&().'-]{1,40}?)\s*[:：=]?\s*(?:is|was|of|为|是|达)?\s*"
    r"(?:US)?[$¥€£]?\s?(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)\s?(%|percent|million|billion|[MBKk万亿元])?")
_NAME = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+){1,2})\b")
_STOP_NAMES = {"The", "This", "That", "These", "Please", "Total", "Dear", "Best", "Thanks", "Regards"}


def strip_line_numbers(output: str) -> list[str]:
    """Lines of a read/grep output without their line-number prefixes."""
    return [_LINE_PREFIX.sub("", ln, count=1) for ln in output.splitlines()]


def clean_line(line: str) -> str:
    s = _MD_MARK.sub("", line).strip()
    s = s.replace("**", "").replace("`", "").strip(" |")
    s = re.sub(r"\s*[|\t]\s*", " · ", s)  # table cells (Markdown pipes, a DOCX table's tab-separated row)
    return re.sub(r"\s+", " ", s)


@dataclass
class Figure:
    """A number found in a source: ``label`` (words before it), ``value`` (float), ``raw`` text, ``source``."""

    label: str
    value: float
    raw: str
    source: str


@dataclass
class Fact:
    """One statement from a source: ``source`` (workspace path), ``text`` (whole sentence or table row),
    ``kind`` (date | figure | name | text), ``row`` (header, cells) for a table row."""

    source: str
    text: str
    kind: str
    row: tuple[list[str], list[str]] | None = None


_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])|(?<=[。！？；])")
_DATE = re.compile(r"\b(?:19|20)\d\d-\d\d(?:-\d\d)?\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d"
                   r"|\d{1,2}月|\d{4}年")


def _is_fact(sent: str) -> bool:
    cjk = len(re.findall(r"[\u4e00-\u9fff]", sent))
    if cjk >= 10:
        return bool(re.search(r"[。！？.!?]$", sent)) or cjk >= 20
    # a whole sentence: long enough and closed by its own full stop (a wrapped fragment is not a fact)
    return len(sent) >= 30 and len(sent.split()) >= 6 and "…" not in sent and bool(re.search(r"[.!?)]$", sent)) \
        and bool(re.match(r"[A-Z0-9\"'(]", sent))


_CELL_SEP = " · "  # what clean_line makes of a table's cell boundary
_COLUMN = re.compile(r"[a-z][a-z_]*")
_NAMED_COLUMN = re.compile(r"[A-Za-z\u4e00-\u9fff][A-Za-z\u4e00-\u9fff _/()%&.-]{0,39}")


def _cells(line: str) -> list[str]:
    """A notes line as table cells: split at the cell boundaries clean_line marked, else at whitespace."""
    return [c.strip() for c in line.split(_CELL_SEP)] if _CELL_SEP in line else line.split()


def _column_header(line: str) -> bool:
    """A table's header line: ≥ 2 marked cells that are all names (no digits: ``Client · Responsible · Status``),
    or ≥ 3 whitespace-separated lower-case column names with ``_`` in one at least (``quarter company
    revenue_musd``, a table a text export shows without cell marks)."""
    cells = _cells(line)
    if _CELL_SEP in line:
        return len(cells) >= 2 and all(_NAMED_COLUMN.fullmatch(c) for c in cells)
    return len(cells) >= 3 and all(_COLUMN.fullmatch(c) for c in cells) and any("_" in c for c in cells)


def _row_fact(source: str, header: list[str], cells: list[str]) -> Fact:
    """A table row as a statement, its cells named by the header: ``"NVDA: quarter Q3, revenue_musd 1,234"``."""
    pairs = ", ".join(f"{h} {c}" for h, c in zip(header[1:], cells[1:]) if c)
    return Fact(source, f"{cells[0]}: {pairs}", "figure", row=(header, cells))


def _kind(sent: str) -> str:
    if _DATE.search(sent):
        return "date"
    if re.search(r"\d", sent):
        return "figure"
    if _NAME.search(sent):
        return "name"
    return "text"


@dataclass
class SourceNotes:
    path: str
    title: str = ""
    lines: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    chars_read: int = 0
    #: the file's first line, when a read started there (a table's header; a grep hit or a window read from the
    #: middle of the file does not show it)
    first_line: str = ""


class Notebook:
    """Accumulates notes per source path (workspace-relative) in read order."""

    def __init__(self) -> None:
        self.sources: dict[str, SourceNotes] = {}
        self.order: list[str] = []

    def _src(self, path: str) -> SourceNotes:
        if path not in self.sources:
            self.sources[path] = SourceNotes(path=path)
            self.order.append(path)
        return self.sources[path]

    def absorb(self, path: str, output: str) -> int:
        """Take the lines, figures and names of one read output; returns the number of new lines kept."""
        src = self._src(path)
        src.chars_read += len(output)
        top = output.split("\n", 1)[0]
        first = _LINE_PREFIX.match(top)
        if first and int(first.group(1)) == 1 and not src.first_line:
            src.first_line = clean_line(top[first.end():])
        seen = set(src.lines)
        kept = 0
        for raw in strip_line_numbers(output):
            if not src.title and raw.strip().startswith("#"):
                src.title = clean_line(raw)[:80]
            line = clean_line(raw)
            if len(line) < 12 or len(line) > 400 or line in seen:
                continue
            if sum(ch.isalnum() for ch in line) < 0.5 * len(line):
                continue
            if line.startswith(("[", "<", "{", "(skipped", "Skipped")) and len(line) < 40:
                continue
            if line.startswith("[") and line.endswith("]"):  # the read tool's own note ("[… continue with offset]")
                continue
            seen.add(line)
            if len(src.lines) < 80:
                src.lines.append(line)
                kept += 1
            for m in _FIGURE.finditer(line):
                # the label is the words of the same sentence before the number, at most 6 whole words
                label = re.split(r"[.!?;:。；：]\s*", clean_line(m.group(1)))[-1]
                label = " ".join(label.split()[-6:]).strip(" :-=")
                try:
                    val = float(m.group(2).replace(",", ""))
                except ValueError:
                    continue
                if len(label) >= 2 and len(src.figures) < 30 and not label.isdigit():
                    raw_txt = (m.group(2) + (m.group(3) or "")).strip()
                    src.figures.append(Figure(label=label, value=val, raw=raw_txt, source=path))
            for m in _NAME.finditer(line):
                nm = m.group(1)
                if nm.split()[0] not in _STOP_NAMES and nm not in src.names and len(src.names) < 12:
                    src.names.append(nm)
        if not src.title and src.lines:
            src.title = src.lines[0][:80]
        return kept

    def absorb_grep(self, output: str) -> list[tuple[str, int]]:
        """Hits ``(path, line)`` of a grep output (``path:line:text`` lines); their text goes into the notes."""
        hits: list[tuple[str, int]] = []
        for ln in output.splitlines():
            m = re.match(r"^(.+?):(\d+):(.*)$", ln.strip())
            if not m:
                continue
            path, no, text = m.group(1), int(m.group(2)), m.group(3)
            hits.append((path, no))
            text = clean_line(text)
            if len(text) >= 12:
                src = self._src(path)
                if text not in src.lines and len(src.lines) < 80:
                    src.lines.append(text)
        return hits

    # ---- views used by the writer ------------------------------------------------------------------------
    @property
    def n_sources(self) -> int:
        return len(self.order)

    def figures(self) -> list[Figure]:
        out: list[Figure] = []
        seen: set[tuple[str, str]] = set()
        for p in self.order:
            for f in self.sources[p].figures:
                key = (f.label.lower(), f.raw)
                if key not in seen:
                    seen.add(key)
                    out.append(f)
        return out

    def facts(self) -> list[Fact]:
        """Statements taken from what was read (issue #28 item 3), round-robin over sources in read order.

        A table source (``.csv``/``.tsv``, or a first line of ≥ 2 commas and no digit) gives one statement per
        row, its cells named by the header (``"NVDA: quarter Q3, revenue_musd 1,234"``; the header is the file's first
        line, so a table read only from its middle gives no rows). Any other source gives the rows of the tables it
        holds (a DOCX table's tab-separated rows, a Markdown table, whitespace-separated cells under lower-case
        column names; the header line: :func:`_column_header`) and its sentences: a line is split at sentence ends
        and a sentence is kept whole when it has ≥ 6 words and ≥ 30 characters and ends with its full stop
        (English) or has ≥ 10 CJK characters; lines wrapped by the extraction are joined back first; the source's
        title line and headings are not facts.
        Nothing is cut: a sentence is used whole or not at all. Kinds: ``"date"`` (a date or month name),
        ``"figure"`` (a number), ``"name"`` (a person's name), else ``"text"``.
        """
        per: list[list[Fact]] = []
        for p in self.order:
            src = self.sources[p]
            out: list[Fact] = []
            lines = src.lines
            tabular = PurePosixPath(p).suffix.lower() in (".csv", ".tsv") or bool(
                lines and lines[0].count(",") >= 2 and not re.search(r"\d", lines[0]))
            # the header is the file's first line as read; a table whose first line was never seen (a window or
            # grep hit from its middle) gives no rows, since its columns cannot be named
            head_line = src.first_line if src.first_line.count(",") >= 1 else ""
            if tabular and head_line:
                header = [h.strip() for h in head_line.split(",")]
                for ln in lines:
                    if ln == head_line:
                        continue
                    cells = [c.strip() for c in ln.split(",")]
                    if len(cells) == len(header) >= 2 and cells[0]:
                        out.append(_row_fact(p, header, cells))
            else:
                prose: list[str] = []
                header: list[str] | None = None
                for ln in lines:  # a table inside a document (DOCX, Markdown): a header of column names, then rows
                    cells = _cells(ln)
                    marked = _CELL_SEP in ln
                    if (header is None or not marked) and _column_header(ln):
                        header = cells
                    elif header and len(cells) == len(header) and (marked or re.search(r"\d", ln)):
                        out.append(_row_fact(p, header, cells))
                    elif header and marked:
                        continue  # a row of another width (a merged cell): left out, the table goes on
                    else:
                        header = None
                        prose.append(ln)
                joined: list[str] = []
                for ln in prose:  # a sentence wrapped over lines (PDF, DOCX extraction) is joined back first
                    if joined and joined[-1] != src.title and len(joined[-1]) >= 45 and \
                            not re.search(r"[.!?。！？:：]$", joined[-1]):
                        joined[-1] += " " + ln
                    else:
                        joined.append(ln)
                for ln in joined:
                    if ln == src.title or ln.endswith(":"):
                        continue
                    for sent in _SENT_END.split(ln):
                        sent = sent.strip()
                        if _is_fact(sent):
                            out.append(Fact(p, sent, _kind(sent)))
            per.append(out)
        facts: list[Fact] = []
        seen: set[str] = set()
        for i in range(max((len(x) for x in per), default=0)):
            for x in per:
                key = re.sub(r"\W+", " ", x[i].text).strip().lower() if i < len(x) else ""
                if key and key not in seen:  # the same sentence in two files is stated once
                    seen.add(key)
                    facts.append(x[i])
        return facts

    def figures_all(self) -> list[Figure]:
        """Every figure of every source, in read order (no de-duplication: used to find disagreements)."""
        return [f for p in self.order for f in self.sources[p].figures]

    def names(self) -> list[str]:
        out: list[str] = []
        for p in self.order:
            for n in self.sources[p].names:
                if n not in out:
                    out.append(n)
        return out

    def richest(self, k: int) -> list[str]:
        """The k sources with the most kept lines (ties in read order): the 'key files' to revisit."""
        ranked = sorted(self.order, key=lambda p: (-len(self.sources[p].lines), self.order.index(p)))
        return ranked[:k]
