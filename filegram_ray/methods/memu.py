"""MemU — resources → memory items → categories (reference §8.2, MemU row).

Mechanism (reference §8.2):

* **Resources.** One per kept event, with an importance (:func:`importance`): read 0.3 + 0.1·min(view_count, 5);
  write 0.7 (content cut to 1,500 characters); edit 0.6; dir_create / rename / move 0.5; copy 0.6; delete 0.4;
  search 0.4; browse 0.3 (others 0.3).
* **Items.** One LLM call per batch of 50 resources (:data:`BATCH_RESOURCES`) returns 5–15 items ``{type,
  content, importance, source indices}``.
* **Categories.** One LLM call groups all items into :data:`CATEGORIES` (reading_behavior, writing_style,
  organization_habits, iteration_patterns, workflow_rhythm, cross_modal_usage) with a confidence and a summary.
* **Query.** The categories (name, confidence, summary), then all items, then counts (the same context for every
  query).

LLM calls per ingest: ⌈resources / 50⌉ + 1 (through the backbone).

Without an LLM backbone (ours, documented): per batch, one item per event type present (its count, the files
involved, the mean importance of those resources); categories by the event-type → category map
:data:`_CATEGORY_OF`, confidence = the category's share of the items' importance mass, summary = its items'
contents joined.

What differs: the paper counts MemU among the methods with native non-text ingestion (VLM captioning, ‡); the
released adapter is text-only and so is ours (**reference ⚠ CODE≠PAPER**). The ``memu-py`` package was tried and
not used: the newest release needs Python ≥ 3.13 and the one pip picks here (0.1.8) is a client/server framework
whose memory agent needs an LLM for every step and would downgrade httpx; the adapter mechanism above is the
paper's, implemented here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import LlmCounter, event_text, llm_json
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["CATEGORIES", "MemU", "importance", "resources_of"]

#: Resources per item-extraction call; items asked per call; write content cap (reference §8.2 MemU).
BATCH_RESOURCES = 50
ITEMS_PER_BATCH = (5, 15)
WRITE_CONTENT_CHARS = 1_500
#: The category vocabulary (reference §8.2 MemU).
CATEGORIES = ("reading_behavior", "writing_style", "organization_habits", "iteration_patterns",
              "workflow_rhythm", "cross_modal_usage")
#: Importance per event type (reference §8.2 MemU); reads add 0.1 per view up to 5.
_IMPORTANCE = {"file_write": 0.7, "file_edit": 0.6, "dir_create": 0.5, "file_rename": 0.5, "file_move": 0.5,
               "file_copy": 0.6, "file_delete": 0.4, "file_search": 0.4, "file_browse": 0.3}
_CATEGORY_OF = {"file_read": "reading_behavior", "file_search": "reading_behavior", "file_browse": "reading_behavior",
                "file_write": "writing_style", "file_edit": "iteration_patterns", "dir_create": "organization_habits",
                "file_move": "organization_habits", "file_rename": "organization_habits",
                "file_copy": "organization_habits", "file_delete": "organization_habits",
                "context_switch": "workflow_rhythm", "cross_file_reference": "cross_modal_usage"}


def importance(ev: dict[str, Any]) -> float:
    """Importance of one event's resource (reference §8.2 MemU)."""
    t = ev.get("event_type")
    if t == "file_read":
        return round(0.3 + 0.1 * min(int(ev.get("view_count") or 1), 5), 2)
    return _IMPORTANCE.get(str(t), 0.3)


def resources_of(views: Sequence[TrajectoryView]) -> list[dict[str, Any]]:
    """One resource per event: ``{index, task_id, event_type, text, importance}`` (write content ≤1,500 chars,
    other content ≤200)."""
    out = []
    for v in views:
        for ev in v.events:
            cap = WRITE_CONTENT_CHARS if ev.get("event_type") == "file_write" else 200
            out.append({"index": len(out), "task_id": v.task_id, "event_type": str(ev.get("event_type")),
                        "text": event_text(ev, cap), "importance": importance(ev),
                        "path": str(ev.get("file_path") or ev.get("dir_path") or ev.get("new_path") or "")})
    return out


def _rule_items(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in batch:
        groups.setdefault(r["event_type"], []).append(r)
    items = []
    for t, rs in sorted(groups.items()):
        paths = [p for p in dict.fromkeys(r["path"] for r in rs) if p]
        tasks = sorted({r["task_id"] for r in rs})
        content = (f"{len(rs)} × {t.replace('_', ' ')} in task(s) {', '.join(tasks)}"
                   + (f" on {', '.join(paths[:4])}" + (" …" if len(paths) > 4 else "") if paths else ""))
        items.append({"type": t, "content": content, "importance": round(sum(r["importance"] for r in rs) / len(rs), 2),
                      "sources": [r["index"] for r in rs]})
    return items


def _rule_categories(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    mass: Counter = Counter()
    members: dict[str, list[str]] = {}
    for it in items:
        cat = _CATEGORY_OF.get(it["type"], "workflow_rhythm")
        mass[cat] += float(it["importance"])
        members.setdefault(cat, []).append(it["content"])
    total = sum(mass.values()) or 1.0
    return [{"name": c, "confidence": round(mass[c] / total, 2), "summary": "; ".join(members[c][:6])}
            for c in CATEGORIES if c in members]


_SYSTEM = "You are a memory agent. You organise a person's file-system activity into memory items and categories."
_ITEMS_PROMPT = (
    "Resources (index: action):\n{resources}\n\nExtract {lo}-{hi} memory items about how this person works. "
    "Reply with JSON only: {{\"items\": [{{\"type\": \"habit|preference|fact\", \"content\": \"...\", "
    "\"importance\": 0.0-1.0, \"sources\": [resource indices]}}]}}")
_CATEGORY_PROMPT = (
    "Memory items:\n{items}\n\nGroup them into these categories: {cats}. Reply with JSON only: "
    "{{\"categories\": [{{\"name\": \"one of the listed\", \"confidence\": 0.0-1.0, \"summary\": \"...\", "
    "\"items\": [item numbers]}}]}}")


@register("memu")
class MemU(MemoryMethod):
    """One resource per event with an importance → items per 50 resources → six behaviour categories; the
    context lists categories, all items and counts (reference §8.2)."""

    name, display = "memu", "MemU"
    options_schema = {}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("own code of §8.2: LLM items per 50 resources + 1 category call; text only" if llm
                else "own code of §8.2, rule items/categories (no LLM backbone); text only")

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        llm = LlmCounter(self.llm_fn)
        res = resources_of(trajectories)
        items: list[dict[str, Any]] = []
        for s in range(0, len(res), BATCH_RESOURCES):
            batch = res[s:s + BATCH_RESOURCES]
            got = None
            if llm:
                listing = "\n".join(f"{r['index']}: (importance {r['importance']}) {r['text']}" for r in batch)
                got = llm_json(llm, _ITEMS_PROMPT.format(resources=listing, lo=ITEMS_PER_BATCH[0],
                                                         hi=ITEMS_PER_BATCH[1]), _SYSTEM, key="items")
                got = [{"type": str(i.get("type", "habit")), "content": str(i["content"]).strip(),
                        "importance": _float(i.get("importance"), 0.5),
                        "sources": [int(x) for x in i.get("sources") or [] if str(x).isdigit()]}
                       for i in (got if isinstance(got, list) else []) if isinstance(i, dict)
                       and str(i.get("content", "")).strip()][:ITEMS_PER_BATCH[1]]
            items.extend(got or _rule_items(batch))
        categories = None
        if llm and items:
            listing = "\n".join(f"{k}: {it['content']}" for k, it in enumerate(items))
            raw = llm_json(llm, _CATEGORY_PROMPT.format(items=listing, cats=", ".join(CATEGORIES)), _SYSTEM,
                           key="categories", max_tokens=2048)
            categories = [{"name": str(c["name"]), "confidence": _float(c.get("confidence"), 0.5),
                           "summary": str(c.get("summary", "")).strip()}
                          for c in (raw if isinstance(raw, list) else [])
                          if isinstance(c, dict) and str(c.get("name")) in CATEGORIES]
        if not categories:
            categories = _rule_categories(items)
        return {"categories": categories, "items": items, "n_resources": len(res), "llm_calls": llm.calls,
                "resource_tokens": sum(approx_tokens(r["text"]) for r in res), "mode": "llm" if llm else "rules"}

    def retrieve(self, state: Any, query: str) -> Context:
        lines = ["## Categories"]
        lines += [f"- {c['name']} (confidence {c['confidence']:.2f}): {c['summary']}" for c in state["categories"]]
        lines.append("## Memory items")
        lines += [f"- [{it['type']}, importance {it['importance']:.2f}] {it['content']}" for it in state["items"]]
        lines.append(f"## Counts\n{state['n_resources']} resources, {len(state['items'])} items, "
                     f"{len(state['categories'])} categories")
        text = "\n".join(lines)
        # In. = the stored resources (event texts) + items + categories: MemU keeps all three layers
        stored = state.get("resource_tokens", 0) + approx_tokens(
            json.dumps({k: state[k] for k in ("categories", "items")}, ensure_ascii=False))
        return Context(text, stored, approx_tokens(text))


def _float(x: Any, default: float) -> float:
    try:
        return float(min(1.0, max(0.0, float(x))))
    except (TypeError, ValueError):
        return default
