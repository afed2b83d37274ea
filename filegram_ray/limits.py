"""Limits and strict readers for files that come from outside: workspaces a user imports, profile / task / config
YAML, events.json, derivatives read back. Every error names the file (and the field or member) and is a
``ValueError``, so the CLI turns it into one ``error: <file>: …`` line (exit 2) and a batch turns it into one error row.

What is checked, and why:

* **Zip containers** (docx / xlsx / pptx are OOXML zips): :func:`check_zip` reads only the central directory and
  refuses a container before any library inflates it when a member or the whole would inflate past
  :data:`ZIP_MAX_MEMBER_BYTES` / :data:`ZIP_MAX_TOTAL_BYTES`, when a large member compresses better than
  :data:`ZIP_MAX_RATIO` (a "zip bomb": 1 GiB of repeated XML in 3.6 MB, case REL-import-docx-zip-bomb), or when it
  holds more than :data:`ZIP_MAX_MEMBERS` members. The declared sizes can be trusted because python-docx,
  python-pptx and openpyxl read through :mod:`zipfile`, which never inflates a member past its declared size
  (it fails the CRC check instead).
* **PDFs**: pypdf bounds each stream (75 MB); :data:`PDF_MAX_PAGES` bounds the page count and
  :data:`MAX_EXTRACTED_CHARS` the text taken from all pages.
* **Plain text files**: :data:`MAX_TEXT_FILE_BYTES` before a file is read into memory.
* **YAML / JSON**: :func:`load_yaml` refuses duplicate mapping keys (PyYAML keeps the last one silently);
  :func:`load_json` refuses duplicate object keys; both refuse lists/mappings nested deeper than
  :data:`MAX_NESTING` (:func:`check_nesting`) and turn the parser's own ``RecursionError`` (Python's JSON decoder
  and PyYAML's pure-Python composer recurse once per level) or libyaml's depth refusal into the same
  "nesting too deep" line; :func:`read_utf8` names the file when its bytes are not UTF-8. Every reader of YAML or
  JSON that comes from outside the process (config files, ``--set`` values, profiles, tasks, events.json, bundles,
  model replies) goes through these two functions.

The numbers are ours, chosen far above anything a FileGram workspace or run holds (generated documents are KBs,
events.json files hundreds of KB) and far below what exhausts a 24 GiB machine.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import yaml

from filegram_ray.errors import UserError
from filegram_ray.names import find_lone_surrogate

__all__ = [
    "MAX_EXTRACTED_CHARS",
    "MAX_NESTING",
    "MAX_TEXT_FILE_BYTES",
    "PDF_MAX_PAGES",
    "ZIP_MAX_MEMBERS",
    "ZIP_MAX_MEMBER_BYTES",
    "ZIP_MAX_RATIO",
    "ZIP_MAX_TOTAL_BYTES",
    "InputLimitError",
    "check_file_size",
    "check_nesting",
    "check_zip",
    "load_json",
    "load_yaml",
    "load_yaml_file",
    "read_utf8",
]

MiB = 1 << 20
#: largest inflated size of one zip member (ours: an OOXML part with embedded media stays well below)
ZIP_MAX_MEMBER_BYTES = 256 * MiB
#: largest inflated size of all members of one zip together (ours)
ZIP_MAX_TOTAL_BYTES = 512 * MiB
#: largest inflated / compressed ratio of a member that inflates past :data:`ZIP_RATIO_MIN_BYTES` (ours: XML
#: deflates 5-30x; the case's bomb is 290x)
ZIP_MAX_RATIO = 200
ZIP_RATIO_MIN_BYTES = 1 * MiB
#: most members in one zip (ours; a large deck has a few hundred)
ZIP_MAX_MEMBERS = 20_000
#: most pages read from one PDF (ours)
PDF_MAX_PAGES = 5_000
#: most characters of text taken from one document (ours: 32 M characters is a few thousand books)
MAX_EXTRACTED_CHARS = 32 * 1_000_000
#: largest plain-text file read into memory (ours)
MAX_TEXT_FILE_BYTES = 64 * MiB
#: deepest list/mapping nesting accepted in YAML or JSON from outside (ours: configs, profiles, events.json and
#: run.json nest at most 8 levels; Python's decoders recurse once per level and stop near 1,000)
MAX_NESTING = 100


class InputLimitError(UserError):
    """An input exceeds one of the limits of this module; the message names the file, what and the limit."""


def _mb(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"


def check_file_size(path: str | os.PathLike, limit: int = MAX_TEXT_FILE_BYTES, what: str = "file") -> int:
    """Size of ``path`` in bytes; raises :class:`InputLimitError` when it is larger than ``limit``."""
    size = os.stat(path).st_size
    if size > limit:
        raise InputLimitError(f"{path}: too large: {what} of {_mb(size)} (limit {_mb(limit)})")
    return size


def check_zip(src: str | os.PathLike | bytes, name: str | None = None) -> None:
    """Refuse a zip container whose members would inflate past the limits (module docstring).

    Args:
        src: a path or the container's bytes.
        name: the file name used in messages (default: the path).

    Raises:
        InputLimitError: too many members, a member or the total too large, a member compressed too well.
        ValueError: not a zip file (names the file).
    """
    label = name or (str(src) if not isinstance(src, (bytes, bytearray)) else "<bytes>")
    try:
        zf = zipfile.ZipFile(io.BytesIO(src) if isinstance(src, (bytes, bytearray)) else src)
    except zipfile.BadZipFile as exc:
        raise UserError(f"{label}: not a valid zip container: {exc}") from exc
    with zf:
        infos = zf.infolist()
        if len(infos) > ZIP_MAX_MEMBERS:
            raise InputLimitError(f"{label}: too large: {len(infos):,} zip members (limit {ZIP_MAX_MEMBERS:,})")
        total = 0
        for info in infos:
            size = info.file_size
            if size > ZIP_MAX_MEMBER_BYTES:
                raise InputLimitError(f"{label}: too large: member {info.filename} inflates to {_mb(size)} "
                                      f"(limit {_mb(ZIP_MAX_MEMBER_BYTES)})")
            if size > ZIP_RATIO_MIN_BYTES and size > ZIP_MAX_RATIO * max(1, info.compress_size):
                raise InputLimitError(f"{label}: too large: member {info.filename} inflates {size / max(1, info.compress_size):,.0f}x "
                                      f"to {_mb(size)} (ratio limit {ZIP_MAX_RATIO}x): a decompression bomb")
            total += size
            if total > ZIP_MAX_TOTAL_BYTES:
                raise InputLimitError(f"{label}: too large: members inflate to more than "
                                      f"{_mb(ZIP_MAX_TOTAL_BYTES)} together")


def read_utf8(path: str | os.PathLike, limit: int = MAX_TEXT_FILE_BYTES) -> str:
    """The text of a UTF-8 file (a BOM is dropped).

    Raises:
        InputLimitError: the file is larger than ``limit`` bytes.
        ValueError: ``<path>: not UTF-8: <reason> at byte <n>``.
        OSError: the file cannot be read.
    """
    check_file_size(path, limit)
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8: {exc.reason} (byte 0x{data[exc.start]:02x} at offset {exc.start})"
                         ) from None


# ------------------------------------------------------------------------------------------------------ YAML
try:  # the libyaml scanner/parser when PyYAML was built with it; the constructor is Python either way
    _BaseLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _BaseLoader = yaml.SafeLoader


class StrictYamlLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # '<<' merge keys: explicit keys may override merged ones (YAML merge-key spec)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first given on line {first + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def check_nesting(obj: Any, source: str, what: str, limit: int = MAX_NESTING) -> Any:
    """``obj`` unchanged when no list/dict in it is nested more than ``limit`` levels deep. Iterative (no
    recursion); a container shared through YAML aliases is walked again only when reached deeper than before, so
    each is walked at most ``limit`` times (an alias "billion laughs" stays linear).

    Raises:
        UserError: ``<source>: <what>: nesting too deep (more than <limit> levels)``.
    """
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (list, dict)) or deepest.get(id(node), 0) >= depth:
            continue
        if depth > limit:
            raise UserError(f"{source}: {what}: nesting too deep (more than {limit} levels)")
        deepest[id(node)] = depth
        stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return obj


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` with :class:`StrictYamlLoader`.

    Raises:
        ValueError: ``<source>: not valid YAML: …`` (syntax, duplicate key), or ``<source>: not valid YAML:
            nesting too deep`` (more than :data:`MAX_NESTING` levels).
    """
    try:
        data = yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem or ""):  # libyaml's own depth limit (1,000 levels)
            raise UserError(f"{source}: not valid YAML: nesting too deep (more than {MAX_NESTING} levels)"
                            ) from None
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = "; ".join(x for x in (exc.context, exc.problem) if x) or "syntax error"
        raise UserError(f"{source}: not valid YAML: {what}{where}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        raise UserError(f"{source}: not valid YAML: nesting too deep (more than {MAX_NESTING} levels)") from None
    return check_nesting(data, source, "not valid YAML")


def load_yaml_file(path: str | os.PathLike) -> Any:
    """:func:`read_utf8` then :func:`load_yaml`; every error names ``path``."""
    return load_yaml(read_utf8(path), str(path))


# ------------------------------------------------------------------------------------------------------ JSON
def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise UserError(f"duplicate key {k!r} in one object")
        out[k] = v
    return out


#: a JSON escape of a UTF-16 surrogate (``\\ud800``–``\\udfff``): only then can a parsed string hold a lone one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def load_json(data: bytes | str, source: str, *, duplicates: bool = False) -> Any:
    """Parse JSON; ``duplicates=False`` refuses an object with a key given twice. A string holding a lone
    surrogate (``"\\udce9"`` not part of a pair: not Unicode text, and nothing we write can hold it) is refused
    too, naming its field (case BR-27; :mod:`filegram_ray.names`).

    Raises:
        ValueError: ``<source>: not UTF-8 …``, ``<source>: invalid JSON at line L col C: …``,
            ``<source>: invalid JSON: duplicate key …``, ``<source>: invalid JSON: nesting too deep`` (more
            than :data:`MAX_NESTING` levels) or
            ``<source>: field '<path>': a lone surrogate escape …``.
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UserError(f"{source}: not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        obj = json.loads(data, object_pairs_hook=None if duplicates else _no_duplicates)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: invalid JSON at line {exc.lineno} col {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise UserError(f"{source}: invalid JSON: nesting too deep (more than {MAX_NESTING} levels)") from None
    except ValueError as exc:  # from _no_duplicates
        raise UserError(f"{source}: invalid JSON: {exc}") from None
    check_nesting(obj, source, "invalid JSON")
    if _SURROGATE_ESCAPE.search(data):
        where = find_lone_surrogate(obj)
        if where is not None:
            raise UserError(f"{source}: field '{where}': a lone surrogate escape (\\ud800-\\udfff not part of a "
                             "pair) is not Unicode text")
    return obj
