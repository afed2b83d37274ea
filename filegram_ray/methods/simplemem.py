"""SimpleMem — compact "lossless" memory entries with rule deduplication (reference §8.2, SimpleMem row).

Mechanism (reference §8.2):

* **Windows.** Each trajectory's events in sliding windows of 30 with an overlap of 3 (step 27,
  :data:`WINDOW_EVENTS`, :data:`WINDOW_STEP`).
* **Entries.** Per window 5–12 entries ``{restatement, keywords, topic, entities, confidence}`` with ``topic`` ∈
  :data:`TOPICS`; the LLM sees the last 15 entries (:data:`RECENT_SHOWN`) so that it does not repeat them.
* **Dedup** (once, over all trajectories, when more than 10 entries exist): an entry whose restatement shares
  more than 50 % of its words (shared / smaller set) with a kept entry merges into it — confidence +0.1 (capped at
  1), ``observation_count`` + 1, keywords and entities united (:func:`dedup_entries`).
* **Consolidation.** If more than 60 entries remain, one LLM call keeps 15–40 and prunes those below 0.2, then
  dedup again; finally entries are sorted by confidence and capped at 80.
* **Query.** The top-60 entries with topic / confidence / observations / ≤5 keywords, plus statistics.

LLM calls per ingest: one per window + at most one consolidation (through the backbone; temperature 0).

Without an LLM backbone (documented rule fallback, ours): each window yields one entry per activity present
(reading, searching, writing, editing, organizing, cross-modal, workflow) restating what was done with the files
and queries involved; confidence = 0.5 + 0.05 per event of that activity (≤ 0.9); the consolidation step keeps the
40 most confident entries with confidence ≥ 0.2.

What differs: the real ``simplemem`` package (0.1.0) was tried and not used: it builds memory from dialogues,
needs an LLM for every step (no offline mode), stores in LanceDB and defaults to a Qwen3 embedding model from the
hub. The adapter mechanism above is the paper's (reference §8.2), implemented here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import LlmCounter, event_text, llm_json, overlap_ratio, words
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["TOPICS", "SimpleMem", "dedup_entries", "rule_entries"]

#: Window size and step (30 events, overlap 3 → step 27; reference §8.2 SimpleMem).
WINDOW_EVENTS = 30
WINDOW_STEP = 27
#: Entries shown to the LLM to avoid duplicates; entries per window asked for (reference §8.2).
RECENT_SHOWN = 15
ENTRIES_PER_WINDOW = (5, 12)
#: Dedup: applies above 10 entries; merge when word overlap > 0.5; confidence bonus per merge (reference §8.2).
DEDUP_MIN_ENTRIES = 10
DEDUP_OVERLAP = 0.5
MERGE_BONUS = 0.1
#: Consolidation: above 60 entries, keep 15–40, prune below 0.2; final cap 80; shown 60 (reference §8.2).
CONSOLIDATE_ABOVE = 60
CONSOLIDATE_KEEP = (15, 40)
PRUNE_BELOW = 0.2
FINAL_CAP = 80
SHOWN = 60
SHOWN_KEYWORDS = 5
#: The topic vocabulary (reference §8.2).
TOPICS = ("reading", "writing", "editing", "organizing", "searching", "cross-modal", "workflow")

_TOPIC_OF = {"file_read": "reading", "file_browse": "reading", "file_search": "searching", "file_write": "writing",
             "file_edit": "editing", "dir_create": "organizing", "file_move": "organizing",
             "file_rename": "organizing", "file_copy": "organizing", "file_delete": "organizing",
             "context_switch": "workflow", "cross_file_reference": "cross-modal"}
_NON_TEXT = {"png", "jpg", "jpeg", "gif", "svg", "pdf", "pptx", "xlsx", "csv", "wav", "mp3", "mp4", "docx"}


def _entry(restatement: str, topic: str, keywords, entities, confidence: float, task_id: str) -> dict[str, Any]:
    return {"restatement": str(restatement).strip(), "topic": topic if topic in TOPICS else "workflow",
            "keywords": sorted({str(k) for k in keywords if str(k)}), "entities": sorted({str(e) for e in entities
                                                                                          if str(e)}),
            "confidence": float(min(1.0, max(0.0, confidence))), "observation_count": 1, "task_ids": [task_id]}


def rule_entries(events: Sequence[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    """The no-LLM entries of one window (ours): one per activity present, deterministic. The restatement names
    the behaviour in words (size bucket, formats, depth, backups), not the files or exact counts, so that the same
    habit seen in two windows restates alike and merges while a different habit does not; the files go to
    ``entities``; confidence = 0.5 + 0.05 per event of that activity (≤ 0.9)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        groups.setdefault(_TOPIC_OF.get(str(e.get("event_type")), "workflow"), []).append(e)
    out = []
    for topic in TOPICS:
        evs = groups.get(topic, [])
        if not evs:
            continue
        kinds = Counter(str(e.get("event_type")) for e in evs)
        paths = [str(e.get("file_path") or e.get("dir_path") or e.get("new_path") or e.get("dest_path")
                     or e.get("directory_path") or "") for e in evs]
        paths = [p for p in dict.fromkeys(paths) if p]
        exts = sorted({p.rsplit(".", 1)[-1].lower() for p in paths if "." in p.rsplit("/", 1)[-1]})
        queries = [str(e.get("query")) for e in evs if e.get("query")]
        fmt = f" ({', '.join(exts)})" if exts else ""
        if topic == "reading":
            revisits = sum(1 for e in evs if int(e.get("view_count") or 1) > 1)
            text = (f"Reading: {'many' if len(paths) >= 4 else 'few'} sources{fmt}, "
                    + ("revisits sources" if revisits else "reads each source once")
                    + (", lists folders" if kinds["file_browse"] else ""))
        elif topic == "searching":
            text = f"Searching: looks files up by {'/'.join(sorted({str(e.get('search_type')) for e in evs}))}"
        elif topic == "writing":
            sizes = [int(e.get("content_length") or 0) for e in evs]
            mean = sum(sizes) // max(1, len(sizes))
            size = "short notes" if mean < 300 else "mid-length documents" if mean < 1500 else "long documents"
            tables = any("|---" in (e.get("_resolved_content") or "") for e in evs)
            over = any(e.get("operation") == "overwrite" for e in evs)
            text = (f"Writing: {size}{fmt}" + (" with tables" if tables else "")
                    + (", overwritten in place" if over else ", kept as written"))
        elif topic == "editing":
            lines = sum(int(e.get("lines_added") or 0) + int(e.get("lines_deleted") or 0) for e in evs) / len(evs)
            text = "Editing: " + ("small incremental edits" if lines <= 5 else "large rewrites")
        elif topic == "organizing":
            depth = max([int(e.get("depth") or 0) for e in evs if e.get("event_type") == "dir_create"], default=0)
            backups = sum(1 for e in evs if e.get("event_type") == "file_copy" and e.get("is_backup"))
            parts = ["deeply nested folders" if depth >= 3 else "shallow folders" if depth else "flat layout"]
            if kinds["file_move"] + kinds["file_rename"]:
                parts.append("moves and renames files")
            if backups:
                parts.append("keeps backup copies")
            if kinds["file_delete"]:
                parts.append("deletes temporary files")
            text = "Organizing: " + ", ".join(parts)
        elif topic == "cross-modal":
            text = f"Cross-modal: links files{fmt}"
        else:
            text = "Workflow: switches between files"
        kw = [*kinds, *exts, *(w for q in queries for w in q.split()[:2])]
        if topic in ("writing", "reading") and any(x in _NON_TEXT for x in exts):
            kw.append("cross-modal")
        out.append(_entry(text + ".", topic, kw, paths[:6], min(0.9, 0.5 + 0.05 * len(evs)), task_id))
    return out


def dedup_entries(entries: list[dict[str, Any]], threshold: float = DEDUP_OVERLAP) -> list[dict[str, Any]]:
    """Rule dedup (reference §8.2): in order, an entry whose restatement overlaps a kept one by more than
    ``threshold`` (shared words / smaller set) merges into it: confidence +0.1 (≤ 1), observation counts added,
    keywords, entities and task ids united. Applies only above :data:`DEDUP_MIN_ENTRIES` entries."""
    if len(entries) <= DEDUP_MIN_ENTRIES:
        return entries
    kept: list[dict[str, Any]] = []
    kept_words: list[set[str]] = []
    for e in entries:
        w = words(e["restatement"])
        hit = next((i for i, kw in enumerate(kept_words) if overlap_ratio(w, kw) > threshold), None)
        if hit is None:
            kept.append(dict(e))
            kept_words.append(w)
            continue
        k = kept[hit]
        k["confidence"] = min(1.0, k["confidence"] + MERGE_BONUS)
        k["observation_count"] += int(e.get("observation_count", 1))
        k["keywords"] = sorted(set(k["keywords"]) | set(e["keywords"]))
        k["entities"] = sorted(set(k["entities"]) | set(e["entities"]))
        k["task_ids"] = sorted(set(k["task_ids"]) | set(e.get("task_ids", [])))
    return kept


_SYSTEM = ("You build a compact long-term memory of how a person works with files, from logs of their file-system "
           "actions. Restate behaviour as self-contained facts; do not summarise the subject matter.")
_WINDOW_PROMPT = (
    "New actions (task {task}):\n{window}\n\nEntries already stored (do not repeat them):\n{recent}\n\n"
    "Write {lo}-{hi} new memory entries about how this person reads, searches, writes, edits, organises files, "
    "uses other modalities and paces the work. Reply with JSON only: {{\"entries\": [{{\"restatement\": "
    "\"<one self-contained sentence>\", \"keywords\": [\"...\"], \"topic\": \"one of {topics}\", \"entities\": "
    "[\"file or folder names\"], \"confidence\": 0.0-1.0}}]}}")
_CONSOLIDATE_PROMPT = (
    "These memory entries describe one person's file-work habits:\n{entries}\n\nConsolidate them: merge entries "
    "that say the same thing, drop entries with confidence below {prune}, and keep between {lo} and {hi} of the "
    "most informative. Reply with JSON only: {{\"entries\": [same fields as the input]}}")


@register("simplemem")
class SimpleMem(MemoryMethod):
    """Sliding windows of 30 events (overlap 3) → 5–12 memory entries each; rule dedup (overlap > 0.5); one
    consolidation above 60 entries; top-60 entries by confidence at query time (reference §8.2).

    Options:
        window_events, window_step: override the reference constants.
    """

    name, display = "simplemem", "SimpleMem"
    options_schema = {"window_events": int, "window_step": int}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("own code of §8.2: LLM entries per 30-event window + consolidation" if llm
                else "own code of §8.2, rule entries (no LLM backbone)")

    def _window_entries(self, llm: LlmCounter, events, task_id: str, recent: list[dict[str, Any]]):
        if not llm:
            return rule_entries(events, task_id)
        window = "\n".join(f"- {event_text(e)}" for e in events)
        shown = "\n".join(f"- {r['restatement']}" for r in recent[-RECENT_SHOWN:]) or "(none)"
        raw = llm_json(llm, _WINDOW_PROMPT.format(task=task_id, window=window, recent=shown,
                                                  lo=ENTRIES_PER_WINDOW[0], hi=ENTRIES_PER_WINDOW[1],
                                                  topics="|".join(TOPICS)), _SYSTEM, key="entries")
        if not isinstance(raw, list):
            return rule_entries(events, task_id)  # an unparseable reply: the window keeps its rule entries
        out = []
        for r in raw[:ENTRIES_PER_WINDOW[1]]:
            if isinstance(r, dict) and str(r.get("restatement", "")).strip():
                try:
                    conf = float(r.get("confidence", 0.5))
                except (TypeError, ValueError):
                    conf = 0.5
                out.append(_entry(r["restatement"], str(r.get("topic", "workflow")), r.get("keywords") or [],
                                  r.get("entities") or [], conf, task_id))
        return out or rule_entries(events, task_id)

    def _consolidate(self, llm: LlmCounter, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if llm:
            payload = json.dumps([{k: e[k] for k in ("restatement", "keywords", "topic", "entities", "confidence")}
                                  for e in entries], ensure_ascii=False)
            raw = llm_json(llm, _CONSOLIDATE_PROMPT.format(entries=payload, prune=PRUNE_BELOW,
                                                           lo=CONSOLIDATE_KEEP[0], hi=CONSOLIDATE_KEEP[1]),
                           _SYSTEM, key="entries", max_tokens=4096)
            if isinstance(raw, list) and raw:
                by_text = {e["restatement"]: e for e in entries}
                out = []
                for r in raw[:CONSOLIDATE_KEEP[1]]:
                    if not isinstance(r, dict) or not str(r.get("restatement", "")).strip():
                        continue
                    old = by_text.get(str(r["restatement"]).strip())
                    try:
                        conf = float(r.get("confidence", old["confidence"] if old else 0.5))
                    except (TypeError, ValueError):
                        conf = 0.5
                    e = _entry(r["restatement"], str(r.get("topic", "workflow")), r.get("keywords") or [],
                               r.get("entities") or [], conf, "")
                    e["task_ids"] = old["task_ids"] if old else []
                    e["observation_count"] = old["observation_count"] if old else 1
                    if e["confidence"] >= PRUNE_BELOW:
                        out.append(e)
                if out:
                    return out
        kept = [e for e in entries if e["confidence"] >= PRUNE_BELOW]
        return sorted(kept, key=lambda e: -e["confidence"])[:CONSOLIDATE_KEEP[1]]

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        llm = LlmCounter(self.llm_fn)
        size = int(self.options.get("window_events", WINDOW_EVENTS))
        step = int(self.options.get("window_step", WINDOW_STEP))
        entries: list[dict[str, Any]] = []
        for v in trajectories:
            starts = range(0, max(1, len(v.events) - (size - step)), step) if v.events else []
            for s in starts:
                entries.extend(self._window_entries(llm, v.events[s:s + size], v.task_id, entries))
        n_raw = len(entries)
        entries = dedup_entries(entries)
        if len(entries) > CONSOLIDATE_ABOVE:
            entries = dedup_entries(self._consolidate(llm, entries))
        entries = sorted(entries, key=lambda e: (-e["confidence"], -e["observation_count"]))[:FINAL_CAP]
        return {"entries": entries, "n_raw": n_raw, "llm_calls": llm.calls, "mode": "llm" if llm else "rules"}

    def retrieve(self, state: Any, query: str) -> Context:
        entries = state["entries"]
        topics = Counter(e["topic"] for e in entries)
        lines = [f"Memory entries: {len(entries)} (from {state['n_raw']} raw), topics: "
                 + ", ".join(f"{t} {n}" for t, n in sorted(topics.items()))]
        for e in entries[:SHOWN]:
            kw = ", ".join(e["keywords"][:SHOWN_KEYWORDS])
            lines.append(f"- [{e['topic']}] (confidence {e['confidence']:.2f}, observed {e['observation_count']}×) "
                         f"{e['restatement']}" + (f" (keywords: {kw})" if kw else ""))
        text = "\n".join(lines)
        stored = approx_tokens("\n".join(json.dumps(e, ensure_ascii=False) for e in entries))
        return Context(text, stored, approx_tokens(text))
