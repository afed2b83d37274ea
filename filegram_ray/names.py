"""One rule for names (and text) that are not valid UTF-8 — everything filegram-ray writes is valid UTF-8.

Linux file names are bytes. Python's ``os.fsdecode`` (and every ``os.scandir`` / ``os.listdir`` of a ``str``
path) turns each byte that is not part of valid UTF-8 into a *lone surrogate* U+DC80–U+DCFF ("surrogateescape").
No UTF-8 file can hold such a code point, so one rule applies wherever a name (or a text) enters what we write —
the workspace import, the engine's sandbox copy, every tool listing, events, the media store (case BR-27):

* **Names**: each byte that is not valid UTF-8 is written ``%XX`` (two upper-case hex digits of the byte):
  ``b"caf\\xe9.txt"`` → ``caf%E9.txt`` (:func:`escape_bytes`). When that name is already taken in the same folder
  the first free ``<stem>~2<.ext>``, ``~3`` … is used (:func:`free_name`). The scheme is not reversible on its own
  (a literal ``%E9`` is left alone), so every rename is *recorded* with the original name shown by
  :func:`printable` (``caf\\xe9.txt``): ``renamed_from`` in an imported bundle's file row, ``sandbox.renamed``
  in a trajectory's ``meta.json``.
* **Text** (file contents, extracted document text, arguments an agent typed): bytes are decoded with
  ``errors="replace"`` (U+FFFD) as every text reader here does; a lone surrogate that still reaches a writer is
  written by :func:`escape_bytes` too: U+DC80–U+DCFF as ``%XX`` (the byte it stands for), any other lone
  surrogate (from a ``"\\udXXX"`` JSON escape) as U+FFFD.
* **Readers** of our JSON files refuse a lone surrogate written as a JSON escape
  (:func:`filegram_ray.limits.load_json` names the file and the field) instead of passing it on.

**Characters no name may hold** (cases REL2-SANDBOX-c1-control-names-accepted,
REL2-IMPORT-control-char-names-dropped-by-engine), one rule (:func:`refused_char`) used by every tool argument,
the bash parser, the workspace import and the engine's sandbox copy and listings: Unicode category ``Cc`` (C0
controls incl. tab and newline, DEL, C1 controls such as U+0085 NEL), ``Zl``/``Zp`` (U+2028, U+2029: Python's
``str.splitlines`` breaks at all of these, so such a name could pose as two listing lines) and the bidi
formatting characters of UAX #9 (U+202A–U+202E, U+2066–U+2069, U+061C, U+200E, U+200F: invisible, they reorder
how a name is displayed: "Trojan Source", CVE-2021-42574). A tool argument holding one is refused (:func:`name_problem` says why); a name found on disk
(import, bundle copy, a name planted in a live sandbox) is renamed by :func:`escape_name`: each such character
written as the ``%XX`` of its UTF-8 bytes (``ctl\x07bell.txt`` → ``ctl%07bell.txt``, ``a\u2028b.md`` →
``a%E2%80%A8b.md``), with the rename recorded as for bytes that are not UTF-8.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["BIDI_CONTROLS", "describe_char", "escape_bytes", "escape_name", "escape_strings", "find_lone_surrogate", "free_name",
           "has_lone_surrogate", "name_problem", "printable", "refused_char", "utf8_bytes"]

_LONE = re.compile("[\ud800-\udfff]")
#: the bidirectional formatting characters of Unicode UAX #9 §2: embeddings and overrides (LRE, RLE, PDF, LRO,
#: RLO: U+202A–U+202E), isolates (LRI, RLI, FSI, PDI: U+2066–U+2069) and implicit marks (ALM U+061C, LRM U+200E,
#: RLM U+200F) — invisible, and they reorder how a name is displayed
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: every character no name may hold (module docstring); equal to "category Cc, Zl or Zp, or in BIDI_CONTROLS"
#: over all of Unicode (checked by tests/test_engine_rel2_names.py)
_REFUSED_RX = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def refused_char(text: str) -> str | None:
    """The first character of ``text`` that no name may hold (module docstring: category Cc, Zl, Zp, bidi
    formatting characters), or ``None``. Lone surrogates are not refused here (see :func:`has_lone_surrogate`)."""
    m = _REFUSED_RX.search(text)
    return None if m is None else m.group()


def describe_char(c: str) -> str:
    """``U+2028 (LINE SEPARATOR)``-style label of one character for error messages (``U+0085`` when the
    character has no Unicode name, as controls do)."""
    name = unicodedata.name(c, "")
    return f"U+{ord(c):04X}" + (f" ({name})" if name else "")


def name_problem(name: str) -> str | None:
    """Why ``name`` (a path or one component) cannot be used as typed, or ``None``: ``"is not valid UTF-8"``
    for a lone surrogate; for a character :func:`refused_char` refuses ``"holds a control character U+0085"``,
    ``"holds a line separator U+2028 (LINE SEPARATOR)"`` or ``"holds a bidi formatting character U+202E
    (RIGHT-TO-LEFT OVERRIDE)"``."""
    if has_lone_surrogate(name):
        return "is not valid UTF-8"
    c = refused_char(name)
    if c is None:
        return None
    kind = ("a bidi formatting character" if c in BIDI_CONTROLS else
            "a line separator" if unicodedata.category(c) in ("Zl", "Zp") else "a control character")
    return f"holds {kind} {describe_char(c)}"


def _escape_refused(m: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in m.group().encode("utf-8"))


def escape_name(name: str) -> str:
    """``name`` made a valid name under the one rule: bytes that are not UTF-8 as by :func:`escape_bytes`, each
    character :func:`refused_char` refuses as the ``%XX`` of its UTF-8 bytes. Unchanged (same object) when
    nothing needs escaping."""
    out = escape_bytes(name)
    return _REFUSED_RX.sub(_escape_refused, out) if _REFUSED_RX.search(out) else out


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a code point U+D800–U+DFFF (a Python ``str`` never holds a valid pair)."""
    return _LONE.search(text) is not None


def _escape_one(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"%{c - 0xDC00:02X}" if 0xDC80 <= c <= 0xDCFF else "\ufffd"


def escape_bytes(text: str) -> str:
    """``text`` made encodable as UTF-8: U+DC80–U+DCFF (``os.fsdecode``'s stand-in for byte 0x80–0xFF) →
    ``%XX``; any other lone surrogate → U+FFFD. Text without lone surrogates is returned unchanged (same object)."""
    if _LONE.search(text) is None:
        return text
    return _LONE.sub(_escape_one, text)


def escape_strings(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, numbers) with :func:`escape_bytes` applied to every string, keys
    included; the same object when it holds no lone surrogate (the usual case costs one scan)."""
    if find_lone_surrogate(obj) is None:
        return obj
    if isinstance(obj, str):
        return escape_bytes(obj)
    if isinstance(obj, dict):
        return {escape_strings(k) if isinstance(k, str) else k: escape_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [escape_strings(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(escape_strings(v) for v in obj)
    return obj


def utf8_bytes(text: str) -> bytes:
    """``escape_bytes(text).encode("utf-8")`` — always valid UTF-8."""
    return escape_bytes(text).encode("utf-8")


def printable(name: str) -> str:
    """``name`` for messages and records of renames: the original bytes, undecodable ones shown ``\\xNN``, and
    characters :func:`refused_char` refuses shown as Python escapes (``\\x07``, ``\\n``, ``\\u2028``)."""
    text = os.fsencode(name).decode("utf-8", errors="backslashreplace")
    return _REFUSED_RX.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def free_name(name: str, taken: Callable[[str], bool] | Iterable[str]) -> str:
    """``name`` if it is not ``taken``, else the first free ``<stem>~k<.ext>`` (k = 2, 3, …; ``<name>~k`` without
    an extension), the collision rule of :func:`escape_bytes` renames. ``taken``: a set or a predicate."""
    is_taken = taken if callable(taken) else set(taken).__contains__
    if not is_taken(name):
        return name
    stem, dot, ext = name.rpartition(".")
    k = 2
    while True:
        cand = f"{stem}~{k}.{ext}" if dot and stem else f"{name}~{k}"
        if not is_taken(cand):
            return cand
        k += 1


def find_lone_surrogate(obj: object, path: str = "") -> str | None:
    """JSON path (``[3].file_path``, ``tool_parameters.path``) of the first string (key or value) inside ``obj``
    that holds a lone surrogate, or ``None``. Walks dicts and lists iteratively (no recursion limit)."""
    stack: list[tuple[object, str]] = [(obj, path)]
    while stack:
        cur, where = stack.pop()
        if isinstance(cur, str):
            if _LONE.search(cur) is not None:
                return where.lstrip(".") or "<value>"
        elif isinstance(cur, dict):
            for k in cur:
                if isinstance(k, str) and _LONE.search(k) is not None:
                    return f"{where}.<key {escape_bytes(k)!r}>".lstrip(".")
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(cur.items())))
        elif isinstance(cur, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(cur))))
    return None
