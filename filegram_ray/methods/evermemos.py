"""EverMemOS — MemCells, episodes, trait patterns, clustering and contradiction-aware consolidation
(reference §8.2, EverMemOS row).

Mechanism (reference §8.2):

* **Stage 0, MemCells.** Each trajectory's events arrive in windows of 5 (:data:`WINDOW_EVENTS`) and accumulate
  into the open MemCell. When the open cell holds ≥ 30 events (:data:`FORCE_SPLIT_EVENTS`) it is closed by force;
  otherwise, with an LLM, a boundary check (the cell's history vs. the new window, event content cut to 200
  characters) closes it before the new window when the reply has ``should_end`` and ``confidence`` ≥ 0.6
  (:data:`BOUNDARY_CONFIDENCE`). Without an LLM the boundary is a context switch (reference §8.2 fallback): a
  window that contains a ``context_switch`` event starts a new cell.
* **Stage 1a.** One episode ``{title, content, summary}`` per MemCell (LLM; rule text without one).
* **Stage 1b.** Two trait prompts per MemCell — part 1: consumption, production, organisation, iteration;
  part 2: curation, cross_modal, naming, version (:data:`TRAIT_PARTS`) — each giving ``{dimension, pattern,
  evidence}`` items (rule patterns from the cell's statistics without an LLM).
* **Stage 2.** Online clustering of episode embeddings: an episode joins the most similar cluster when its cosine
  to the centroid is ≥ 0.7 (:data:`CLUSTER_SIM`), the centroid becomes the running mean, renormalised; otherwise
  it opens a cluster.
* **Stage 3.** Per dimension, patterns are grouped by word overlap > 0.4 (:data:`PATTERN_OVERLAP`); the group with
  the most evidence wins, the others are kept as contradictions; confidence high for ≥ 3 evidence items, medium for
  2, low for 1.
* **Query.** All clustered episodes, the consolidated patterns with at most 2 evidence lines each, and the
  contradictions (the same context for every query).

LLM calls per ingest: the boundary checks + 3 per MemCell (episode, two trait parts), through the backbone.

What differs: the ``evermemos`` package on PyPI is a client of the hosted EverMemOS API (no local engine), so the
mechanism is implemented here. The paper embeds with Cohere ``embed-v4.0``; we use the packaged MiniLM. Upstream's
dimension "work_rhythm(curation)" is named ``curation`` here (the project's E dimension is curation). Upstream runs
8 threads; LLM calls here are sequential per ingest (the evaluate stage parallelises across context specs).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import LlmCounter, embed_texts, event_text, llm_json, overlap_ratio
from filegram_ray.methods.trajectory import TrajectoryView, events_to_narrative

__all__ = ["EverMemOS", "cluster_episodes", "consolidate_patterns", "split_memcells"]

#: Stage 0: events per window, forced split size, boundary-check confidence, content shown (reference §8.2).
WINDOW_EVENTS = 5
FORCE_SPLIT_EVENTS = 30
BOUNDARY_CONFIDENCE = 0.6
BOUNDARY_CONTENT_CHARS = 200
#: Stage 2: cosine to join a cluster (reference §8.2).
CLUSTER_SIM = 0.7
#: Stage 3: pattern grouping overlap; evidence lines shown (reference §8.2).
PATTERN_OVERLAP = 0.4
EVIDENCE_SHOWN = 2
#: Stage 1b trait prompts (reference §8.2; "work_rhythm(curation)" → curation).
TRAIT_PARTS = (("consumption", "production", "organisation", "iteration"),
               ("curation", "cross_modal", "naming", "version"))

BoundaryFn = Any  # (history_events, window_events) -> bool


def split_memcells(events: Sequence[dict[str, Any]], boundary=None, window: int = WINDOW_EVENTS,
                   force: int = FORCE_SPLIT_EVENTS) -> list[list[dict[str, Any]]]:
    """Stage 0: cut one trajectory's events into MemCells.

    Args:
        events: the trajectory's kept events, in order.
        boundary: ``boundary(cell_events, window_events) -> bool``: close the open cell before this window (the
            LLM check); ``None`` = the rule fallback (a window holding a ``context_switch`` event starts a cell).
        window / force: window size and the forced split size (reference §8.2: 5 and 30).

    Returns:
        the MemCells (lists of events), none empty, covering ``events`` in order.
    """
    cells: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    for s in range(0, len(events), window):
        win = list(events[s:s + window])
        if cur:
            if boundary is None:
                split = any(e.get("event_type") == "context_switch" for e in win)
            else:
                split = bool(boundary(cur, win))
            if split:
                cells.append(cur)
                cur = []
        cur.extend(win)
        if len(cur) >= force:
            cells.append(cur)
            cur = []
    if cur:
        cells.append(cur)
    return cells


def cluster_episodes(vectors: np.ndarray, threshold: float = CLUSTER_SIM) -> list[int]:
    """Stage 2: online clustering (reference §8.2). Each row joins the cluster with the most similar centroid when
    that cosine is ≥ ``threshold`` (centroid = running mean, renormalised), else opens a new cluster.

    Args:
        vectors: (n, d) unit rows in arrival order.

    Returns:
        the cluster index of each row.
    """
    centroids: list[np.ndarray] = []
    sizes: list[int] = []
    out = []
    for v in vectors:
        if centroids:
            sims = np.array([float(c @ v) for c in centroids])
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                n = sizes[best]
                mean = (centroids[best] * n + v) / (n + 1)
                norm = float(np.linalg.norm(mean))
                centroids[best] = mean / norm if norm > 0 else mean
                sizes[best] = n + 1
                out.append(best)
                continue
        centroids.append(np.asarray(v, dtype=np.float64))
        sizes.append(1)
        out.append(len(centroids) - 1)
    return out


def _level(n: int) -> str:
    return "high" if n >= 3 else "medium" if n == 2 else "low"


def consolidate_patterns(patterns: list[dict[str, Any]], threshold: float = PATTERN_OVERLAP
                         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stage 3 (reference §8.2): per dimension, group patterns whose texts overlap > ``threshold``; the group with
    the most evidence wins (confidence high ≥ 3, medium 2, low 1); the other groups become contradictions.

    Args:
        patterns: ``[{dimension, pattern, evidence}]``.

    Returns:
        ``(consolidated, contradictions)``: consolidated ``{dimension, pattern, evidence: [..], n_evidence,
        confidence}`` (one per dimension) and contradictions ``{dimension, pattern, n_evidence}``.
    """
    dims: dict[str, list[dict[str, Any]]] = {}
    for p in patterns:
        groups = dims.setdefault(p["dimension"], [])
        hit = next((g for g in groups if overlap_ratio(p["pattern"], g["pattern"]) > threshold), None)
        if hit is None:
            groups.append({"dimension": p["dimension"], "pattern": p["pattern"], "evidence": [p["evidence"]]})
        else:
            hit["evidence"].append(p["evidence"])
    consolidated, contradictions = [], []
    for dim, groups in dims.items():
        groups.sort(key=lambda g: -len(g["evidence"]))
        win = groups[0]
        consolidated.append({**win, "n_evidence": len(win["evidence"]), "confidence": _level(len(win["evidence"]))})
        contradictions += [{"dimension": dim, "pattern": g["pattern"], "n_evidence": len(g["evidence"])}
                           for g in groups[1:]]
    return consolidated, contradictions


def _episode_text(episode: dict[str, str]) -> str:
    """What an episode is clustered by: ``"<title>. <summary>"``."""
    return f"{episode['title']}. {episode['summary']}"


def _rule_episode(cell: list[dict[str, Any]], task_id: str) -> dict[str, str]:
    c = Counter(str(e.get("event_type")) for e in cell)
    paths = [str(e.get("file_path")) for e in cell if e.get("file_path")]
    first = paths[0] if paths else "the workspace"
    return {"title": f"Task {task_id}: {c.most_common(1)[0][0].replace('_', ' ')} around {first}",
            "content": events_to_narrative(cell, max_content_chars=120),
            "summary": f"{len(cell)} actions: " + ", ".join(f"{n} {t.replace('_', ' ')}"
                                                            for t, n in sorted(c.items())) + "."}


def _rule_patterns(cell: list[dict[str, Any]], task_id: str) -> list[dict[str, str]]:
    """Trait patterns from one MemCell's statistics (ours; the no-LLM stage 1b)."""
    c = Counter(str(e.get("event_type")) for e in cell)
    ev = f"task {task_id}"
    out = []

    def add(dim, pattern, detail):
        out.append({"dimension": dim, "pattern": pattern, "evidence": f"{ev}: {detail}"})

    if c["file_read"] or c["file_search"] or c["file_browse"]:
        style = ("search-driven reading" if c["file_search"] >= max(1, c["file_read"] // 2) else
                 "sequential reading of sources")
        add("consumption", style, f"{c['file_read']} reads, {c['file_search']} searches, {c['file_browse']} listings")
    creates = [e for e in cell if e.get("event_type") == "file_write" and e.get("operation") != "overwrite"]
    if creates:
        mean = sum(int(e.get("content_length") or 0) for e in creates) // len(creates)
        add("production", "long detailed documents" if mean > 1500 else "short concise outputs",
            f"{len(creates)} files, mean {mean} chars")
        names = [str(e.get("file_path", "")).rsplit("/", 1)[-1] for e in creates]
        style = ("descriptive names with separators" if any(("_" in n or "-" in n) for n in names)
                 else "plain short names")
        add("naming", style, ", ".join(names[:3]))
        exts = Counter(n.rsplit(".", 1)[-1].lower() for n in names if "." in n)
        non_text = sum(v for k, v in exts.items() if k not in ("md", "txt"))
        add("cross_modal", "mixes non-text formats" if non_text else "text-only outputs",
            ", ".join(f"{k}×{v}" for k, v in sorted(exts.items())))
    if c["dir_create"] or c["file_move"] or c["file_rename"]:
        depth = max([int(e.get("depth") or 0) for e in cell if e.get("event_type") == "dir_create"], default=0)
        add("organisation", "deeply nested folders" if depth >= 3 else "shallow folder structure",
            f"{c['dir_create']} folders (depth {depth}), {c['file_move']} moves")
    if c["file_edit"]:
        lines = sum(int(e.get("lines_added") or 0) + int(e.get("lines_deleted") or 0) for e in cell
                    if e.get("event_type") == "file_edit") / c["file_edit"]
        add("iteration", "small incremental edits" if lines <= 5 else "large rewrites",
            f"{c['file_edit']} edits, {lines:.1f} lines each")
    backups = sum(1 for e in cell if e.get("event_type") == "file_copy" and e.get("is_backup"))
    if backups or c["file_delete"]:
        add("curation", "deletes temporary files" if c["file_delete"] > backups else "keeps copies of work",
            f"{c['file_delete']} deletions, {backups} backups")
    if backups or c["file_write"] - len(creates):
        add("version", "keeps backup versions" if backups else "overwrites in place",
            f"{backups} backups, {c['file_write'] - len(creates)} overwrites")
    return out


_SYSTEM = "You analyse logs of a person's file-system actions to build a long-term memory of how they work."
_BOUNDARY_PROMPT = (
    "Current episode so far:\n{history}\n\nNext actions:\n{window}\n\nDo the next actions start a new episode "
    "(a different goal or activity)? Reply with JSON only: {{\"should_end\": true|false, \"confidence\": 0.0-1.0}}")
_EPISODE_PROMPT = (
    "Actions of one episode (task {task}):\n{cell}\n\nWrite this episode as JSON only: {{\"title\": \"...\", "
    "\"content\": \"what the person did, in order\", \"summary\": \"one sentence\"}}")
_TRAIT_PROMPT = (
    "Actions of one episode (task {task}):\n{cell}\n\nFor each of these dimensions of working style: {dims}, "
    "state the pattern this episode shows and the evidence. Reply with JSON only: {{\"traits\": [{{\"dimension\": "
    "\"one of the listed\", \"pattern\": \"short description\", \"evidence\": \"the actions that show it\"}}]}}")


@register("evermemos")
class EverMemOS(MemoryMethod):
    """MemCells (windows of 5, forced split at 30, LLM or context-switch boundaries) → episodes and trait patterns
    → episode clusters (cos ≥ 0.7) and per-dimension consolidated patterns with contradictions (reference §8.2)."""

    name, display = "evermemos", "EverMemOS"
    options_schema = {}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("own code of §8.2: LLM boundaries, episodes and traits" if llm
                else "own code of §8.2, context-switch boundaries and rule episodes/traits (no LLM backbone)")

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def _boundary(self, llm: LlmCounter):
        if not llm:
            return None

        def check(history, window) -> bool:
            fmt = lambda evs: "\n".join(f"- {event_text(e, BOUNDARY_CONTENT_CHARS)}" for e in evs)  # noqa: E731
            obj = llm_json(llm, _BOUNDARY_PROMPT.format(history=fmt(history), window=fmt(window)), _SYSTEM,
                           max_tokens=64)
            if not isinstance(obj, dict):
                return False
            try:
                conf = float(obj.get("confidence", 0.0))
            except (TypeError, ValueError):
                conf = 0.0
            return bool(obj.get("should_end")) and conf >= BOUNDARY_CONFIDENCE

        return check

    def _cell_llm(self, llm: LlmCounter, cell, task_id: str) -> tuple[dict[str, str], list[dict[str, str]]]:
        text = "\n".join(f"- {event_text(e, BOUNDARY_CONTENT_CHARS)}" for e in cell)
        ep = llm_json(llm, _EPISODE_PROMPT.format(task=task_id, cell=text), _SYSTEM)
        rule_ep = _rule_episode(cell, task_id)
        episode = {k: str(ep.get(k) or rule_ep[k]) for k in ("title", "content", "summary")} \
            if isinstance(ep, dict) else rule_ep
        patterns = []
        for dims in TRAIT_PARTS:
            raw = llm_json(llm, _TRAIT_PROMPT.format(task=task_id, cell=text, dims=", ".join(dims)), _SYSTEM,
                           key="traits")
            for r in raw if isinstance(raw, list) else []:
                if isinstance(r, dict) and str(r.get("dimension")) in dims and str(r.get("pattern", "")).strip():
                    patterns.append({"dimension": str(r["dimension"]), "pattern": str(r["pattern"]).strip(),
                                     "evidence": f"task {task_id}: {str(r.get('evidence', '')).strip()[:300]}"})
        return episode, patterns

    def embedding_texts(self, trajectories: Sequence[TrajectoryView]) -> list[str] | None:
        """The rule episodes' texts without an LLM backbone; None with one (its episodes come from the LLM)."""
        if self.llm_fn is not None:
            return None
        return [_episode_text(_rule_episode(cell, v.task_id)) for v in trajectories
                for cell in split_memcells(v.events, None)]

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        llm = LlmCounter(self.llm_fn)
        boundary = self._boundary(llm)
        episodes, patterns, cell_sizes = [], [], []
        for v in trajectories:
            for cell in split_memcells(v.events, boundary):
                cell_sizes.append(len(cell))
                if llm:
                    ep, pats = self._cell_llm(llm, cell, v.task_id)
                else:
                    ep, pats = _rule_episode(cell, v.task_id), _rule_patterns(cell, v.task_id)
                episodes.append({**ep, "task_id": v.task_id, "session": v.label})
                patterns.extend(pats)
        vecs = embed_texts(self._embedder(), [_episode_text(e) for e in episodes])
        clusters = cluster_episodes(vecs)
        consolidated, contradictions = consolidate_patterns(patterns)
        return {"episodes": episodes, "clusters": clusters, "patterns": consolidated,
                "contradictions": contradictions, "cell_sizes": cell_sizes, "llm_calls": llm.calls,
                "mode": "llm" if llm else "rules"}

    def retrieve(self, state: Any, query: str) -> Context:
        lines = ["## Episodes (clustered)"]
        by_cluster: dict[int, list[dict[str, Any]]] = {}
        for ep, c in zip(state["episodes"], state["clusters"]):
            by_cluster.setdefault(c, []).append(ep)
        for c, eps in sorted(by_cluster.items()):
            lines.append(f"### Cluster {c + 1} ({len(eps)} episodes)")
            for ep in eps:
                lines.append(f"- [{ep['session']} | Task {ep['task_id']}] {ep['title']}: {ep['summary']}")
        lines.append("## Behaviour patterns")
        for p in state["patterns"]:
            lines.append(f"- {p['dimension']}: {p['pattern']} (confidence {p['confidence']}, "
                         f"{p['n_evidence']} evidence)")
            lines += [f"    evidence: {e}" for e in p["evidence"][:EVIDENCE_SHOWN]]
        if state["contradictions"]:
            lines.append("## Contradictions")
            lines += [f"- {c['dimension']}: {c['pattern']} ({c['n_evidence']} evidence)"
                      for c in state["contradictions"]]
        text = "\n".join(lines)
        stored = approx_tokens(json.dumps({k: state[k] for k in ("episodes", "patterns", "contradictions")},
                                          ensure_ascii=False))
        return Context(text, stored, approx_tokens(text))
