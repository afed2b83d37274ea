"""What the simulator noted from its tool results, line by line: the lines, labelled figures and names of each
source read (``read``'s raw content; ``grep``'s ``path:line:text`` hits), in read order. The agent's searches take
their terms from it and its repairs find disagreeing figures in it; what outputs say comes from the statements of
:mod:`.knowledge` (ARCHITECTURE rule 3: content from what the trajectory read). :data:`_LINE_PREFIX` strips a
line-number prefix (``"   12\\t"``, ``"00012| "``, ``"12: "``) where a tool output carries one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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

    def absorb(self, path: str, text: str, offset: int = 1) -> int:
        """Take the lines, figures and names of one read (``text``: the raw lines shown, no line numbers; the read
        tool's ``content``), starting at line ``offset``; returns the number of new lines kept."""
        src = self._src(path)
        src.chars_read += len(text)
        top = text.split("\n", 1)[0]
        if offset == 1 and top.strip() and not src.first_line:
            src.first_line = clean_line(top)
        seen = set(src.lines)
        kept = 0
        for raw in text.splitlines():
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
