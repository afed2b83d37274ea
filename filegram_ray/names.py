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
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["escape_bytes", "escape_strings", "find_lone_surrogate", "free_name", "has_lone_surrogate", "printable", "utf8_bytes"]

_LONE = re.compile("[\ud800-\udfff]")


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
    """``name`` for messages and records of renames: the original bytes, undecodable ones shown ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")


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
