"""The one line model of the tool layer (case BR2-12): a line ends at ``\\n`` and nowhere else.

``read`` numbers lines, ``grep`` reports line numbers, a read's ``view_range`` counts lines, the recorded diff
(:func:`filegram_ray.engine.media.unified_diff`) and the edit's line counts all split text the same way — the
model of ``wc -l``, ``grep -n``, ``diff``/``patch``/``git apply`` and editors. Python's ``str.splitlines`` is
not used: it also breaks at a lone ``\\r`` (progress bars), ``\\v``, ``\\f`` (page breaks), ``\\x1c``–``\\x1e``,
U+0085, U+2028 and U+2029, so its line numbers disagree with every one of those tools.

* :func:`split_lines` — lines keeping their ``\\n`` (the last may lack one): what diffs compare.
* :func:`view_lines` — the same lines as ``read`` shows and ``grep`` searches them: without the ``\\n``, and
  without a ``\\r`` right before it (a CRLF line ending is an ending, so ``$`` matches at the end of a CRLF line
  and no line is shown with a stray ``\\r``). Every other character, a lone ``\\r`` or a form feed included, stays
  inside its line. ``len(view_lines(t)) == len(split_lines(t))`` for every text.

Matching is blind to Unicode normalisation (case BR3-13): text that *looks* the same matches the same. macOS
stores names — and text copied from them, and many PDFs — in decomposed form (NFD: ``e`` + U+0301), while keyboards,
clipboards and language models type composed text (NFC: ``é``). ``grep`` matches the NFC form of the pattern
against the NFC form of each line and shows the line as ``read`` shows it; ``edit`` finds ``old_string`` in the
NFC form of the file and replaces the matching stretch of the file's own characters, so the rest of the file keeps
its bytes on disk (:func:`match_key`, :func:`nfc_spans`). Paths are NFC inside the sandbox already.

* :func:`match_key` — the NFC form of a line (ASCII returned as is: the common case costs nothing).
* :func:`nfc_spans` — where a string occurs in a text, compared in NFC, as spans of the original text.
"""

from __future__ import annotations

import unicodedata

__all__ = ["match_key", "nfc_spans", "split_lines", "view_lines"]


def match_key(text: str) -> str:
    """``text`` in Unicode NFC, the form every search compares (``text`` itself when it is ASCII or already NFC)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text)


def _nfc_chunks(text: str) -> list[tuple[int, int, str]]:
    """``text`` cut where NFC never joins two characters: ``(start, end, NFC of text[start:end])`` in order, the
    NFC forms concatenated being the NFC of ``text``. A cut falls before a character that does not combine
    with what precedes it (canonical combining class 0 and no canonical composition with the preceding chunk's
    last NFC character: Hangul jamo V and T compose although their class is 0)."""
    out: list[tuple[int, int, str]] = []
    start, cur = 0, ""
    for i, c in enumerate(text):
        if i and not unicodedata.combining(c) and \
                unicodedata.normalize("NFC", cur[-1] + c) == cur[-1] + unicodedata.normalize("NFC", c):
            out.append((start, i, cur))
            start = i
        cur = unicodedata.normalize("NFC", text[start:i + 1])
    if text:
        out.append((start, len(text), cur))
    return out


def nfc_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Non-overlapping occurrences of ``needle`` in ``text`` compared in NFC, as ``(start, end)`` spans of
    ``text`` (left to right). A match must begin and end where NFC does not join characters (no half of a
    composed character is matched). ``[]`` for an empty needle."""
    key = match_key(needle)
    if not key:
        return []
    chunks = _nfc_chunks(text)
    norm = "".join(c[2] for c in chunks)
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    pos = 0
    for a, b, s in chunks:
        starts[pos] = a
        pos += len(s)
        ends[pos] = b
    out: list[tuple[int, int]] = []
    i = norm.find(key)
    while i >= 0:
        j = i + len(key)
        if i in starts and j in ends:
            out.append((starts[i], ends[j]))
            i = norm.find(key, j)
        else:
            i = norm.find(key, i + 1)
    return out


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` split at ``\\n`` only, each keeping its ``\\n`` (the last one may lack it): the line
    model of ``patch`` and ``git apply``. ``\\r`` stays part of a line (CRLF files diff as CRLF lines); other
    characters Python's ``splitlines`` breaks at (form feed, U+2028, ...) are not line ends. ``""`` → ``[]``."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def view_lines(text: str) -> list[str]:
    """The lines of :func:`split_lines` without their ending (``\\n`` or ``\\r\\n``): line ``k`` here is line
    ``k`` of the diff, of ``wc -l`` and of ``grep -n``. ``""`` → ``[]``; ``"a\\n"`` → ``["a"]``;
    ``"a\\rb\\n"`` → ``["a\\rb"]``."""
    parts = text.split("\n")
    tail = parts.pop()  # what follows the last \n ("" when the text ends with one): no ending to take off
    lines = [p[:-1] if p.endswith("\r") else p for p in parts]
    if tail:
        lines.append(tail)
    return lines
