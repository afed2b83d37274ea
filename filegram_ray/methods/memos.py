"""MemOS — typed memory cells with overlap consolidation (reference §8.2, MemOS row).

Mechanism (reference §8.2):

* **Cells.** The narrative of every trajectory is cut into slices of at most 3,000 characters
  (:data:`SLICE_CHARS`), processed in order; one LLM call per slice returns 8–15 typed cells
  ``{type ∈ fact | preference | behavioral_pattern, content, confidence 0–1, related_memories, task_id}``.
* **Consolidation.** A new cell with the same type as a stored cell and a word overlap (shared / smaller set)
  above 0.4 (:data:`MERGE_OVERLAP`) is merged: the higher-confidence text is kept and the other is recorded in
  ``consolidated_from``.
* **Query.** Cells grouped by type, sorted by confidence, at most 50 per type (:data:`PER_TYPE_SHOWN`), plus
  statistics (counts and mean confidence per type). The context is the same for every query.

LLM calls per ingest: ⌈narrative / 3,000 chars⌉ (sequential, temperature 0, through the backbone).

Without an LLM backbone (reference §8.2 fallback): rule cells of level ``episodic`` (what happened in each
session), ``semantic`` (what each created file is about: its first heading and sentence) and ``procedural``
(reading, organising, editing and curation statistics of each session), at most 120 (:data:`RULE_CAP`);
consolidation then runs on them the same way.

What differs: the real MemOS package (``MemoryOS`` 2.0 on PyPI) was tried and not used: installing it would
downgrade transformers (5.24 → 4.57) and huggingface-hub and it brings a server stack (FastAPI, Redis, MySQL
clients); installed with ``--no-deps`` it does not import (``from memos.mem_os.main import MOS`` fails in its
logging setup, which needs ``concurrent_log_handler``). The mechanism above is the paper's adapter
(reference §8.2), implemented here; narrative content is cut to 200 characters per event to keep slices dense.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import LlmCounter, llm_json, narrative_slices, overlap_ratio, words
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["CELL_TYPES", "MemOS", "consolidate_cells", "rule_cells"]

#: Narrative slice per LLM call, cells asked per call (reference §8.2 MemOS).
SLICE_CHARS = 3_000
CELLS_PER_CALL = (8, 15)
#: Same type and word overlap above this → merged (reference §8.2 MemOS).
MERGE_OVERLAP = 0.4
#: Cells shown per type; rule-fallback cap (reference §8.2 MemOS).
PER_TYPE_SHOWN = 50
RULE_CAP = 120
#: Cell types with an LLM, and the fallback's levels (reference §8.2 MemOS).
CELL_TYPES = ("fact", "preference", "behavioral_pattern")
RULE_LEVELS = ("episodic", "semantic", "procedural")


def _cell(kind: str, content: str, confidence: float, task_id: str, related=()) -> dict[str, Any]:
    return {"type": kind, "content": str(content).strip(), "confidence": float(min(1.0, max(0.0, confidence))),
            "related_memories": [str(r) for r in related][:5], "task_id": task_id, "consolidated_from": []}


def rule_cells(view: TrajectoryView) -> list[dict[str, Any]]:
    """The no-LLM cells of one trajectory (reference §8.2 fallback levels; wording and confidences ours)."""
    from filegram_ray.methods.baselines import _first_sentences

    evs = view.events
    c = Counter(str(e.get("event_type")) for e in evs)
    creates = [e for e in evs if e.get("event_type") == "file_write" and e.get("operation") != "overwrite"]
    reads = [e for e in evs if e.get("event_type") == "file_read"]
    dirs = [e for e in evs if e.get("event_type") == "dir_create"]
    edits = [e for e in evs if e.get("event_type") == "file_edit"]
    touched = [str(e.get("file_path") or e.get("dir_path") or "") for e in evs]
    touched = [p for p in dict.fromkeys(touched) if p]
    cells = [_cell("episodic", f"{view.label}, task {view.task_id}: " + ", ".join(f"{t}×{n}" for t, n in sorted(
        c.items())) + (f"; files {', '.join(touched[:8])}" if touched else "") + ".", 0.9, view.task_id)]
    for e in creates[:3]:
        snippet = _first_sentences(e.get("_resolved_content", "") or "")
        cells.append(_cell("semantic", f"Created {e.get('file_path', '')} ({e.get('content_length', 0)} chars)"
                           + (f", opening with {snippet}" if snippet else "") + ".", 0.7, view.task_id))
    if reads:
        distinct = len({e.get("file_path") for e in reads})
        revisits = sum(1 for e in reads if int(e.get("view_count") or 1) > 1)
        cells.append(_cell("procedural", f"Reads {len(reads)} times over {distinct} files with {revisits} revisits "
                           f"and {c['file_search']} searches before writing.", 0.6, view.task_id))
    if dirs or c["file_move"] or c["file_rename"]:
        depth = max([int(e.get("depth") or 0) for e in dirs], default=0)
        cells.append(_cell("procedural", f"Organises output into {len(dirs)} new folders (depth up to {depth}) with "
                           f"{c['file_move']} moves and {c['file_rename']} renames.", 0.6, view.task_id))
    if edits:
        lines = sum(int(e.get("lines_added") or 0) + int(e.get("lines_deleted") or 0) for e in edits)
        cells.append(_cell("procedural", f"Revises with {len(edits)} edits of about {lines / len(edits):.1f} changed "
                           "lines each.", 0.6, view.task_id))
    backups = sum(1 for e in evs if e.get("event_type") == "file_copy" and e.get("is_backup"))
    if backups or c["file_delete"]:
        cells.append(_cell("procedural", f"Curates files: {backups} backup copies and {c['file_delete']} deletions.",
                           0.6, view.task_id))
    return cells


def consolidate_cells(cells: list[dict[str, Any]], threshold: float = MERGE_OVERLAP) -> list[dict[str, Any]]:
    """Merge cells of the same type whose contents overlap above ``threshold`` (reference §8.2): the
    higher-confidence content stays; the other content is appended to ``consolidated_from``."""
    kept: list[dict[str, Any]] = []
    kept_words: list[set[str]] = []
    for cell in cells:
        w = words(cell["content"])
        hit = next((i for i, k in enumerate(kept) if k["type"] == cell["type"]
                    and overlap_ratio(w, kept_words[i]) > threshold), None)
        if hit is None:
            kept.append(dict(cell, consolidated_from=list(cell.get("consolidated_from", []))))
            kept_words.append(w)
            continue
        k = kept[hit]
        if cell["confidence"] > k["confidence"]:
            k["consolidated_from"].append(k["content"])
            k.update(content=cell["content"], confidence=cell["confidence"], task_id=cell["task_id"])
            kept_words[hit] = w
        else:
            k["consolidated_from"].append(cell["content"])
    return kept


_SYSTEM = ("You are the memory manager of a memory operating system. You turn logs of a person's file-system "
           "actions into typed memory cells about how that person works.")
_PROMPT = (
    "Actions (task {task}):\n{slice}\n\nExtract {lo}-{hi} memory cells about this person's working habits. Types: "
    "fact (something they did), preference (what they prefer or avoid), behavioral_pattern (a recurring way of "
    "working). Reply with JSON only: {{\"cells\": [{{\"type\": \"fact|preference|behavioral_pattern\", "
    "\"content\": \"...\", \"confidence\": 0.0-1.0, \"related_memories\": [\"...\"]}}]}}")


@register("memos")
class MemOS(MemoryMethod):
    """Typed memory cells (fact / preference / behavioral_pattern) from 3,000-char narrative slices, merged by
    type and word overlap > 0.4; the context lists ≤50 cells per type by confidence (reference §8.2)."""

    name, display = "memos", "MemOS"
    options_schema = {"slice_chars": int}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("own code of §8.2: LLM cells per 3,000-char slice" if llm
                else "own code of §8.2, rule cells (no LLM backbone)")

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        llm = LlmCounter(self.llm_fn)
        cells: list[dict[str, Any]] = []
        if llm:
            for task_id, text in narrative_slices(trajectories, int(self.options.get("slice_chars", SLICE_CHARS))):
                raw = llm_json(llm, _PROMPT.format(task=task_id, slice=text, lo=CELLS_PER_CALL[0],
                                                   hi=CELLS_PER_CALL[1]), _SYSTEM, key="cells")
                new = []
                for r in (raw if isinstance(raw, list) else [])[:CELLS_PER_CALL[1]]:
                    if not isinstance(r, dict) or not str(r.get("content", "")).strip():
                        continue
                    kind = str(r.get("type", "fact"))
                    try:
                        conf = float(r.get("confidence", 0.5))
                    except (TypeError, ValueError):
                        conf = 0.5
                    new.append(_cell(kind if kind in CELL_TYPES else "fact", r["content"], conf, task_id,
                                     r.get("related_memories") or []))
                cells = consolidate_cells([*cells, *new])  # each slice's cells merge into the store in order
        else:
            for v in trajectories:
                cells.extend(rule_cells(v))
            cells = consolidate_cells(cells[:RULE_CAP])
        return {"cells": cells, "llm_calls": llm.calls, "mode": "llm" if llm else "rules"}

    def retrieve(self, state: Any, query: str) -> Context:
        cells = state["cells"]
        kinds = [k for k in (*CELL_TYPES, *RULE_LEVELS) if any(c["type"] == k for c in cells)]
        lines = []
        for k in kinds:
            group = sorted((c for c in cells if c["type"] == k), key=lambda c: -c["confidence"])
            mean = sum(c["confidence"] for c in group) / len(group)
            lines.append(f"## {k} ({len(group)} cells, mean confidence {mean:.2f})")
            for c in group[:PER_TYPE_SHOWN]:
                merged = f" [consolidated from {len(c['consolidated_from'])}]" if c["consolidated_from"] else ""
                lines.append(f"- ({c['confidence']:.2f}, task {c['task_id']}) {c['content']}{merged}")
        text = "\n".join(lines)
        stored = approx_tokens("\n".join(c["content"] + " ".join(c["consolidated_from"]) for c in cells))
        return Context(text, stored, approx_tokens(text))
