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
"""

from __future__ import annotations

__all__ = ["split_lines", "view_lines"]


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
