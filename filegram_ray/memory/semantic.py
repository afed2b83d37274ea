"""The per-trajectory semantic unit (FILEGRAM_REFERENCE §7.7) and its behavioural descriptor.

The content "parser" is honest: text types pass through unchanged; multimodal types (png, pdf, docx, …) are *not*
parsed — the preview says so and names the type (upstream ships the same stub, §13 item 5).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.memory.constants import (
    LLM_ENCODE_EDIT_CHARS,
    LLM_ENCODE_FILE_CHARS,
    LLM_ENCODE_MAX_EDITS,
    LLM_ENCODE_MAX_FILES,
    MULTIMODAL_TYPES,
    PREVIEW_DIFF_CHARS,
    PREVIEW_FILE_CHARS,
    PRIMARY_ATTRIBUTES,
)
from filegram_ray.memory.episodes import LLMFn, parse_json_object
from filegram_ray.memory.normalize import NormalizedEvent

__all__ = ["cjk_ratio", "file_type_of", "llm_descriptor", "parse_content", "rule_descriptor", "semantic_unit"]

_SPACE_RE = re.compile(r"\s+")
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def cjk_ratio(text: str) -> float:
    """Share of non-space characters that are CJK (Chinese/Japanese/Korean)."""
    n = len(_SPACE_RE.sub("", text))
    return len(_CJK_RE.findall(text)) / n if n else 0.0


def file_type_of(path: str) -> str:
    """Extension of a path, lower-case, without the dot; ``"unknown"`` if none (§7.7 created_files.file_type)."""
    suf = PurePosixPath(path).suffix.lower().lstrip(".")
    return suf or "unknown"


def parse_content(text: str, file_type: str) -> str:
    """Text of a created file as the semantic channel sees it.

    Text types (and unknown types) are returned unchanged; for multimodal types a fixed note is returned that
    names the upper-cased type and states that multimodal content is not parsed here (§7.7).
    """
    if file_type.lower() in MULTIMODAL_TYPES:
        return (f"[{file_type.upper()} file: multimodal content is not parsed by this memory; "
                f"{len(text)} characters were recorded]")
    return text


def _tree_entries(tree: Any) -> list[str]:
    if isinstance(tree, list):
        return [str(x) for x in tree]
    if isinstance(tree, dict):
        return sorted(str(k) for k in tree)
    if isinstance(tree, str):
        return [ln for ln in tree.splitlines() if ln.strip()]
    return []


def semantic_unit(events: list[NormalizedEvent], all_events: list[NormalizedEvent] | None = None, *,
                  upstream_quirks: bool = False) -> dict[str, Any]:
    """created_files, edit_chains, cross_file_refs, created_filenames, dir_structure_diff (§7.7).

    Args:
        events: behavioural events.
        all_events: every normalised event (for fs_snapshot trees); default ``events``.
        upstream_quirks: take an edit's text from ``resolved_content`` as upstream does (always empty, so edit
            diffs never reach the semantic channel, §7.7 quirk); default reads the unified diff.
    """
    created = []
    edits = []
    refs = []
    for e in events:
        if e.event_type == "file_write" and e.operation == "create":
            ft = file_type_of(e.file_path)
            full = e.resolved_content
            created.append({
                "path": e.file_path, "content_length": e.content_length, "sample_type": "create",
                "file_type": ft, "content_preview": parse_content(full[:PREVIEW_FILE_CHARS], ft),
                "full_content": full,
            })
        elif e.event_type == "file_edit":
            diff = e.resolved_content if upstream_quirks else e.resolved_diff
            edits.append({
                "path": e.file_path, "lines_added": e.lines_added, "lines_deleted": e.lines_deleted,
                "diff_preview": diff[:PREVIEW_DIFF_CHARS], "full_diff": diff,
            })
        elif e.event_type == "cross_file_reference":
            refs.append([e.source_file, e.target_file, e.reference_type])
    snaps = [e for e in (all_events or events) if e.event_type == "fs_snapshot"]
    diff_entries: list[str] = []
    if len(snaps) >= 2:
        first = set(_tree_entries(snaps[0].directory_tree))
        diff_entries = [x for x in _tree_entries(snaps[-1].directory_tree) if x not in first]
    return {
        "created_files": created,
        "edit_chains": edits,
        "cross_file_refs": refs,
        "created_filenames": [PurePosixPath(c["path"]).name for c in created],
        "dir_structure_diff": diff_entries,
    }


def _has_evidence(unit: dict[str, Any]) -> bool:
    return any(c["content_preview"] for c in unit["created_files"]) or any(
        e["diff_preview"] for e in unit["edit_chains"])


def rule_descriptor(unit: dict[str, Any], procedural: dict[str, dict[str, Any]],
                    seq: dict[str, Any]) -> dict[str, Any] | None:
    """A deterministic behavioural descriptor with the fields of the §7.7 LLM descriptor (*ours*).

    Returns None when there is no created file or edit with a non-empty preview (upstream's precondition).
    ``detail_level``: comprehensive if total output ≥ 8,000 chars or (avg ≥ 3,000 and ≥ 3 files), minimal if total
    ≤ 3,000, else moderate — the B thresholds of the §7.6 rule classifier.
    """
    if not _has_evidence(unit):
        return None
    tone = procedural["tone"]
    od = procedural["output_detail"]
    text = " ".join(c["full_content"] for c in unit["created_files"] if c["file_type"] not in MULTIMODAL_TYPES)
    r = cjk_ratio(text)
    lang = "Chinese" if r > 0.6 else ("mixed Chinese/English" if r > 0.2 else "English")
    style = (f"Writes in {lang}; sentences average {tone['avg_sentence_length_words']} words over "
             f"{tone['total_words']} words of created text.")
    structure = (f"{tone['heading_count']} headings (deepest H{tone['heading_max_depth']}), "
                 f"{tone['table_row_count']} table rows, {tone['list_item_count']} list items; "
                 f"prose-to-structure ratio {tone['prose_to_structure_ratio']}.")
    tot, avg, n = od["total_output_chars"], od["avg_output_length"], od["files_created"]
    if tot >= 8000 or (avg >= 3000 and n >= 3):
        level = "comprehensive"
    elif tot <= 3000:
        level = "minimal"
    else:
        level = "moderate"
    detail = f"{level} ({n} file(s) created, {tot:,} chars in total, {avg:,.0f} chars on average)"
    approach = (f"Work phases: {seq.get('phase_pattern') or 'none'}; most frequent step: "
                f"{seq.get('dominant_transition') or 'none'}.")
    habits = []
    ds, es, vs = procedural["directory_style"], procedural["edit_strategy"], procedural["version_strategy"]
    nm, cm = procedural["naming"], procedural["cross_modal_behavior"]
    if ds["dirs_created"]:
        habits.append(f"creates directories ({ds['dirs_created']}, depth up to {ds['max_dir_depth']})")
    if es["total_edits"]:
        habits.append(f"revises with {es['total_edits']} edit(s) of {es['avg_lines_changed']} lines on average")
    if vs["backup_copies"]:
        habits.append(f"makes backup copies ({vs['backup_copies']})")
    if vs["total_deletes"]:
        habits.append(f"deletes files ({vs['total_deletes']})")
    if nm["has_date_prefix"]:
        habits.append("uses date-prefixed file names")
    if cm["structured_files_created"] or cm["image_files_created"]:
        habits.append(f"produces {cm['structured_files_created']} data file(s) and {cm['image_files_created']} "
                      "image(s)")
    if not habits:
        habits.append(f"produces {n} file(s) without reorganising the workspace")
    return {"writing_style": style, "content_structure": structure, "detail_level": detail,
            "work_approach": approach, "notable_habits": habits[:4], "source": "rules"}


def _operation_summary(procedural: dict[str, dict[str, Any]]) -> str:
    lines = []
    for attr in PRIMARY_ATTRIBUTES[:8]:
        pos = [f"{k}={v}" for k, v in procedural.get(attr, {}).items()
               if (v is True) or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)][:4]
        if pos:
            lines.append(f"- {attr}: " + ", ".join(pos))
    return "\n".join(lines)


def llm_descriptor(unit: dict[str, Any], procedural: dict[str, dict[str, Any]], llm_fn: LLMFn
                   ) -> dict[str, Any] | None:
    """The §7.7 LLM descriptor: evidence = ≤ 4 created files (600 chars) + ≤ 3 edits (400 chars) + an operation
    summary; returns the parsed JSON (plus ``source: "llm"``) or None on any failure."""
    if not _has_evidence(unit):
        return None
    parts = ["Created files:"]
    for c in unit["created_files"][:LLM_ENCODE_MAX_FILES]:
        parts.append(f"--- {c['path']} ({c['content_length']} chars, {c['file_type']})\n"
                     f"{parse_content(c['full_content'][:LLM_ENCODE_FILE_CHARS], c['file_type'])}")
    if unit["edit_chains"]:
        parts.append("Edits:")
        for e in unit["edit_chains"][:LLM_ENCODE_MAX_EDITS]:
            parts.append(f"--- {e['path']} (+{e['lines_added']}/-{e['lines_deleted']})\n"
                         f"{e['full_diff'][:LLM_ENCODE_EDIT_CHARS]}")
    parts.append("Operation summary:\n" + _operation_summary(procedural))
    parts.append('Return JSON only with keys "writing_style" (1-2 sentences: tone, formality, language), '
                 '"content_structure" (headings/tables/lists), "detail_level" (comprehensive | moderate | minimal '
                 'with a reason), "work_approach" (1-2 sentences), "notable_habits" (2-4 strings). Be specific and '
                 'cite the evidence.')
    try:
        obj = parse_json_object(llm_fn("\n\n".join(parts), system="You describe a user's working style."))
    except Exception:  # noqa: BLE001 - an LLM failure falls back to the rules
        return None
    if not obj or not isinstance(obj.get("writing_style"), str):
        return None
    obj["source"] = "llm"
    return obj
