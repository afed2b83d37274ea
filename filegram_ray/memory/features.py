"""Procedural features (FILEGRAM_REFERENCE §7.2), the ordered 17-D fingerprint (§7.3) and the importance score
(§7.7). All deterministic; "creates" are ``file_write`` events with ``operation == "create"``.

Text-structure counts (headings, tables, lists, sentences) run over the resolved content of created files; the
default mode fixes three documented quirks of the original's line rules, ``upstream_quirks`` reproduces them
(:func:`text_structure`; cases under ``tests/fixtures/fid/``).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.memory.constants import (
    FINGERPRINT_FEATURES,
    IMAGE_TYPES,
    MAX_DIVERSITY_ATTRIBUTES,
    PRIMARY_ATTRIBUTES,
    PRIMARY_TYPES,
    SIMULATION_TYPES,
    SMALL_EDIT_LINE_THRESHOLD,
    STRUCTURED_DATA_TYPES,
    STRUCTURED_TYPES,
)
from filegram_ray.memory.normalize import NormalizedEvent

__all__ = ["extract_auxiliary", "extract_procedural", "fingerprint", "importance_score", "text_structure"]

_SENTENCE_SPLIT_RE = re.compile(r"[.!?。！？]\s")
_DATE_PREFIX_RE = re.compile(r"^\d{4}[-_]?\d{2}[-_]?\d{2}")
_NUMERIC_PREFIX_RE = re.compile(r"^\d{1,3}[-_]")
_WORD_SPLIT_RE = re.compile(r"[-_.\s]+")

# Default mode: one Markdown line at a time (lines end at \n, \r\n or \r).
_LINE_END_RE = re.compile(r"\r\n|\r|\n")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:\s|$)")
_TABLE_RE = re.compile(r"^ {0,3}\|.*\|")
_LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+\.)(?:\s|$)")

# upstream_quirks mode: the original's patterns, applied to a whole created text with re.MULTILINE.
_UP_HEADING_RE = re.compile(r"^(#{1,6})\s", re.MULTILINE)
_UP_TABLE_RE = re.compile(r"^\|.*\|", re.MULTILINE)
_UP_BULLET_RE = re.compile(r"^[\s]*[-*+]\s", re.MULTILINE)
_UP_NUMBERED_RE = re.compile(r"^[\s]*\d+\.\s", re.MULTILINE)
_UP_LIST_LINE_RE = re.compile(r"^(?:[-*+]|\d+\.)\s")


def _r(x: float, nd: int) -> float:
    return round(float(x), nd)


def _is_table_row(line: str) -> bool:
    """Default-mode table row (§7.2 markdown_table_rows): ``|`` after at most 3 spaces of indentation and a later
    ``|`` on the same line."""
    return bool(_TABLE_RE.match(line))


def _structure_upstream(text: str) -> tuple[int, int, int, int, int]:
    """(headings, max level, table rows, list items, prose lines) of one text, counted as the original does."""
    heads = _UP_HEADING_RE.findall(text)
    tables = len(_UP_TABLE_RE.findall(text))
    lists = len(_UP_BULLET_RE.findall(text)) + len(_UP_NUMBERED_RE.findall(text))
    prose = 0
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("|") or _UP_LIST_LINE_RE.match(s):
            continue
        if len(s) > 20:
            prose += 1
    return len(heads), max((len(h) for h in heads), default=0), tables, lists, prose


def _structure_default(text: str) -> tuple[int, int, int, int, int]:
    """(headings, max level, table rows, list items, prose lines) of one text, one line at a time."""
    headings = max_level = tables = lists = prose = 0
    for line in _LINE_END_RE.split(text):
        m = _HEADING_RE.match(line)
        if m:
            headings += 1
            max_level = max(max_level, len(m.group(1)))
        elif _is_table_row(line):
            tables += 1
        elif _LIST_RE.match(line):
            lists += 1
        elif len(line.strip()) > 20:
            prose += 1
    return headings, max_level, tables, lists, prose


def text_structure(texts: list[str], *, upstream_quirks: bool = False) -> dict[str, Any]:
    r"""Structure counts over the created texts of a trajectory (§7.2 tone row; table rows = markdown_table_rows).

    Both modes: words = whitespace tokens; sentence pieces = every piece (empty ones included) of splitting each
    text on ``. ! ? 。！？`` followed by one whitespace character (§7.2 "number of pieces"; FID tone_sentence_split).

    Default mode counts Markdown lines (ends: ``\n``, ``\r\n``, ``\r``; never U+2028, U+0085 or form feed, which
    ``str.splitlines`` would also split on — FID table_row_unicode_linesep). Documented quirk fixes:

    * a heading (1–6 ``#`` then whitespace or end of line) or table row (``|`` … ``|``) may be indented up to 3
      spaces, as CommonMark renders them (a table inside a list item); the original counts them only in column 0
      (FID table_row_indented). 4 spaces start a code block: not counted in either mode;
    * a line is prose when it is longer than 20 characters and not a heading, table row or list item; the original
      also drops every other line that begins with ``#`` or ``|`` (``#hashtag …``, ``####### …``, ``|note``)
      from prose (FID tone_line_rules).

    ``upstream_quirks=True`` reproduces the original FileGramOS counts exactly: its patterns run over the whole
    text with ``re.MULTILINE`` (only ``\n`` ends a line; a bare ``##`` or ``-`` line counts because ``\s`` matches
    the newline; headings and table rows only in column 0).

    Returns:
        dict with heading_count, heading_max_depth, table_row_count, list_item_count, avg_sentence_length_words,
        total_words, prose_to_structure_ratio.
    """
    headings = max_level = tables = lists = prose = words = pieces = 0
    count = _structure_upstream if upstream_quirks else _structure_default
    for text in texts:
        if not text:
            continue
        words += len(text.split())
        pieces += len(_SENTENCE_SPLIT_RE.split(text))
        h, lvl, t, li, pr = count(text)
        headings, tables, lists, prose = headings + h, tables + t, lists + li, prose + pr
        max_level = max(max_level, lvl)
    return {
        "heading_count": headings,
        "heading_max_depth": max_level,
        "table_row_count": tables,
        "list_item_count": lists,
        "avg_sentence_length_words": _r(words / max(pieces, 1), 1),
        "total_words": words,
        "prose_to_structure_ratio": _r(prose / max(lists + tables, 1), 3),
    }


def _stem(path: str) -> str:
    return PurePosixPath(path).stem if path else ""


def extract_procedural(events: list[NormalizedEvent], *, upstream_quirks: bool = False
                       ) -> dict[str, dict[str, Any]]:
    """The nine primary procedural attributes of one trajectory (§7.2), keyed attribute → feature → value.

    Args:
        events: normalised events (simulation types are ignored, except the last ``fs_snapshot`` for
            ``final_fs_max_depth``).
        upstream_quirks: count text structure exactly as the original (see :func:`text_structure`).

    Returns:
        ``{reading_strategy: {...}, output_detail: {...}, ..., cross_modal_behavior: {...}}`` (the 9 attributes of
        :data:`~filegram_ray.memory.constants.PRIMARY_ATTRIBUTES`).
    """
    beh = [e for e in events if e.event_type not in SIMULATION_TYPES]
    by: dict[str, list[NormalizedEvent]] = {}
    for e in beh:
        by.setdefault(e.event_type, []).append(e)
    reads = by.get("file_read", [])
    n_reads, n_browse, n_search = len(reads), len(by.get("file_browse", [])), len(by.get("file_search", []))
    explore = max(n_reads + n_browse + n_search, 1)
    read_lengths = [e.content_length for e in reads]
    reading = {
        "total_reads": n_reads,
        "total_browses": n_browse,
        "total_searches": n_search,
        "browse_ratio": _r(n_browse / explore, 3),
        "search_ratio": _r(n_search / explore, 3),
        "read_ratio": _r(n_reads / explore, 3),
        "revisit_ratio": _r(sum(1 for e in reads if e.view_count > 1) / max(n_reads, 1), 3),
        "avg_content_length": _r(statistics.fmean(read_lengths), 1) if read_lengths else 0.0,
        "unique_files_read": len({e.file_path for e in reads}),
        "context_switch_rate": _r(len(by.get("context_switch", [])) / max(n_reads, 1), 3),
    }

    writes = by.get("file_write", [])
    creates = [e for e in writes if e.operation == "create"]
    n_cr = len(creates)
    lengths = [e.content_length for e in creates]
    output_detail = {
        "files_created": n_cr,
        "total_output_chars": int(sum(lengths)),
        "avg_output_length": _r(statistics.fmean(lengths), 1) if lengths else 0.0,
        "max_output_length": int(max(lengths)) if lengths else 0,
        "output_length_std": _r(statistics.stdev(lengths), 1) if n_cr >= 2 else 0.0,
    }

    created_texts = [e.resolved_content for e in creates]
    struct = text_structure(created_texts, upstream_quirks=upstream_quirks)
    table_rows = struct["table_row_count"]
    types = Counter((e.file_type or "unknown") for e in creates)
    output_structure = {
        "file_types_created": dict(sorted(types.items())),
        "has_markdown": "md" in types,
        "markdown_table_rows": table_rows,
        "has_markdown_tables": table_rows > 0,
        "has_structured_data": bool(set(types) & STRUCTURED_DATA_TYPES) or table_rows > 0,
        "distinct_file_types": len(types),
    }

    dirs = by.get("dir_create", [])
    depths = [e.depth for e in dirs]
    snaps = [e for e in events if e.event_type == "fs_snapshot"]
    directory_style = {
        "dirs_created": len(dirs),
        "max_dir_depth": int(max(depths)) if depths else 0,
        "avg_dir_depth": _r(statistics.fmean(depths), 2) if depths else 0.0,
        "final_fs_max_depth": snaps[-1].max_depth if snaps else 0,
        "files_moved": len(by.get("file_move", [])),
    }

    stems = [_stem(e.file_path) for e in creates]
    n_renames = len(by.get("file_rename", []))
    if stems:
        naming = {
            "avg_filename_length": _r(statistics.fmean(len(s) for s in stems), 1),
            "has_date_prefix": any(_DATE_PREFIX_RE.match(s) for s in stems),
            "has_numeric_prefix": any(_NUMERIC_PREFIX_RE.match(s) for s in stems),
            "has_underscores": any("_" in s for s in stems),
            "has_hyphens": any("-" in s for s in stems),
            "avg_word_count": _r(statistics.fmean(len([w for w in _WORD_SPLIT_RE.split(s) if w]) for s in stems),
                                 1),
            "total_renames": n_renames,
        }
    else:
        naming = {"avg_filename_length": 0.0, "has_date_prefix": False, "has_numeric_prefix": False,
                  "has_underscores": False, "has_hyphens": False, "avg_word_count": 0.0,
                  "total_renames": n_renames}

    edits = by.get("file_edit", [])
    changed = [e.lines_added + e.lines_deleted for e in edits]
    n_ed = len(edits)
    edited_paths = {e.file_path for e in edits}
    edit_strategy = {
        "total_edits": n_ed,
        "avg_lines_changed": _r(statistics.fmean(changed), 1) if changed else 0.0,
        "max_lines_changed": int(max(changed)) if changed else 0,
        "edits_per_file": _r(n_ed / len(edited_paths), 2) if edited_paths else 0.0,
        "small_edit_ratio": _r(sum(1 for c in changed if c < SMALL_EDIT_LINE_THRESHOLD) / n_ed, 3) if n_ed else 0.0,
    }

    copies = by.get("file_copy", [])
    backups = sum(1 for e in copies if e.is_backup)
    n_del = len(by.get("file_delete", []))
    version_strategy = {
        "total_copies": len(copies),
        "backup_copies": backups,
        "total_deletes": n_del,
        "total_overwrites": sum(1 for e in writes if e.operation == "overwrite"),
        "has_backup_behavior": backups > 0,
        "delete_to_create_ratio": _r(n_del / max(n_cr, 1), 3),
    }

    tone = dict(struct)
    tone["has_content_analysis"] = any(bool(t) for t in created_texts)

    n_struct = sum(c for t, c in types.items() if t in STRUCTURED_TYPES)
    n_primary = sum(c for t, c in types.items() if t in PRIMARY_TYPES)
    n_image = sum(c for t, c in types.items() if t in IMAGE_TYPES)
    cross_modal = {
        "structured_files_created": n_struct,
        "primary_files_created": n_primary,
        "image_files_created": n_image,
        "supplementary_ratio": _r(n_struct / max(n_cr, 1), 3),
        "total_files_created": n_cr,
        "markdown_table_rows": table_rows,
        "has_tables_or_data": n_struct > 0 or table_rows > 0,
        "has_images": n_image > 0,
    }
    return {
        "reading_strategy": reading,
        "output_detail": output_detail,
        "output_structure": output_structure,
        "directory_style": directory_style,
        "naming": naming,
        "edit_strategy": edit_strategy,
        "version_strategy": version_strategy,
        "tone": tone,
        "cross_modal_behavior": cross_modal,
    }


def extract_auxiliary(events: list[NormalizedEvent], procedural: dict[str, dict[str, Any]]) -> dict[str, dict]:
    """Auxiliary verbosity and work-rhythm features (§7.2 last two rows).

    Work rhythm reads ``iteration_end`` events, which the filter strips, so it is all zeros on filtered
    trajectories (as upstream).
    """
    od = procedural["output_detail"]
    its = [e for e in events if e.event_type == "iteration_end"]
    n_it = len(its)
    return {
        "verbosity": {
            "total_output_chars": od["total_output_chars"],
            "files_created": od["files_created"],
            "avg_chars_per_file": _r(od["total_output_chars"] / max(od["files_created"], 1), 1),
        },
        "work_rhythm": {
            "total_iterations": n_it,
            "avg_tools_per_iteration": _r(sum(e.tools_called for e in its) / n_it, 1) if n_it else 0.0,
            "iteration_error_rate": _r(sum(1 for e in its if e.has_tool_error) / n_it, 3) if n_it else 0.0,
            "total_context_switches": sum(1 for e in events if e.event_type == "context_switch"),
        },
    }


def _num(v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    return 0.0


def fingerprint(procedural: dict[str, dict[str, Any]]) -> list[float]:
    """The ordered 17-D fingerprint (§7.3): floats, booleans → 0/1, missing or non-numeric → 0.0."""
    return [_num(procedural.get(attr, {}).get(key)) for _, attr, key in FINGERPRINT_FEATURES]


def diversity(procedural: dict[str, dict[str, Any]]) -> int:
    """Number of primary attributes with at least one positive number or true flag (§7.7)."""
    n = 0
    for attr in PRIMARY_ATTRIBUTES:
        vals = procedural.get(attr, {}).values()
        if any((v is True) or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0) for v in vals):
            n += 1
    return n


def importance_score(n_behavioral: int, n_events: int, procedural: dict[str, dict[str, Any]]) -> float:
    """Importance = density × (1 + diversity/9), rounded 4 (§7.7); density = behavioural ÷ normalised events."""
    density = n_behavioral / n_events if n_events else 0.0
    return round(density * (1 + diversity(procedural) / MAX_DIVERSITY_ATTRIBUTES), 4)
