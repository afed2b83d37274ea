"""Context baselines (reference §8.2 "context" group): No Context, Full Context, Naive RAG, Eager Summarisation.

All of them read only :class:`~filegram_ray.methods.trajectory.TrajectoryView` objects (kept events with resolved
content, opaque session labels) and serialise events with the default narrative (reference §8.1).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.trajectory import TrajectoryView, events_to_narrative, truncate_content

__all__ = [
    "FULL_CONTEXT_CAP_CHARS",
    "RAG_CHUNK_EVENTS",
    "RAG_DISPLAY_CHARS",
    "RAG_TOP_K",
    "EagerSummarization",
    "FullContext",
    "NaiveRAG",
    "NoContext",
    "extractive_summary",
]

#: Full Context prompt cap in characters (reference §8.2, Full Context row).
FULL_CONTEXT_CAP_CHARS = 160_000
#: Naive RAG: events per chunk, chunks returned, characters shown per chunk (reference §8.2, Naive RAG row).
RAG_CHUNK_EVENTS = 20
RAG_TOP_K = 5
RAG_DISPLAY_CHARS = 500
#: Eager Summarisation LLM settings (reference §8.2: harness temp 0.3, max 1024 tokens) and the narrative cap of
#: one summarisation prompt (ours: keeps a prompt inside a small local model's window).
SUMMARY_TEMPERATURE = 0.3
SUMMARY_MAX_TOKENS = 1024
SUMMARY_PROMPT_CAP_CHARS = 24_000


def _block_header(v: TrajectoryView) -> str:
    return f"=== {v.label} | Task: {v.task_id} ({len(v.events)} events) ==="


@register("no_context")
class NoContext(MemoryMethod):
    """Stores nothing; every query gets an empty context (reference §8.2: "question only")."""

    name, display = "no_context", "No Context"
    options_schema = {}

    def mode(self, llm: bool) -> str:  # noqa: ARG002 - the same with and without an LLM
        return "no memory: the backbone sees the question only"

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        return {"n": len(trajectories)}

    def retrieve(self, state: Any, query: str) -> Context:
        return Context("", 0, 0)


@register("full_context")
class FullContext(MemoryMethod):
    """Whole trajectories as narrative blocks, in order, capped at ``cap_chars`` (last block truncated).

    Options:
        cap_chars: prompt cap (default :data:`FULL_CONTEXT_CAP_CHARS`, reference §8.2).
    """

    name, display = "full_context", "Full Context"
    options_schema = {"cap_chars": int}

    def mode(self, llm: bool) -> str:  # noqa: ARG002 - the same with and without an LLM
        return f"every session as narrative, cut at {int(self.options.get('cap_chars', FULL_CONTEXT_CAP_CHARS)):,} chars"

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        blocks = [f"{_block_header(v)}\n{events_to_narrative(v.events)}" for v in trajectories]
        return {"blocks": blocks}

    def retrieve(self, state: Any, query: str) -> Context:
        cap = int(self.options.get("cap_chars", FULL_CONTEXT_CAP_CHARS))
        out, used = [], 0
        for block in state["blocks"]:
            room = cap - used
            if room <= 0:
                break
            if len(block) > room:
                out.append(truncate_content(block, room))
                break
            out.append(block)
            used += len(block) + 2
        text = "\n\n".join(out)
        return Context(text, approx_tokens("\n\n".join(state["blocks"])), approx_tokens(text))


@dataclass
class _RagState:
    chunks: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None
    #: one record per vector row: ``{"chunk": i}``, plus ``_of`` for the windows of a chunk longer than the
    #: embedder's window (memory.index.window_rows); None: one row per chunk (a state cached before windows)
    rows: list[dict] | None = None


@register("naive_rag")
class NaiveRAG(MemoryMethod):
    """Chunks of 20 events as narrative, embedded; per query the top-5 chunks by inner product (FAISS
    ``IndexFlatIP`` over unit vectors = cosine), each shown as its first 500 characters (reference §8.2). A chunk
    longer than the embedder's window (a 20-event chunk often is) is indexed by its windows and ranked by its best
    one, so the events in its tail can be found (case BR2-18).

    Options:
        chunk_events, top_k, display_chars: override the reference constants.
    """

    name, display = "naive_rag", "Naive RAG"
    options_schema = {"chunk_events": int, "top_k": int, "display_chars": int}

    def mode(self, llm: bool) -> str:  # noqa: ARG002 - the same with and without an LLM
        return (f"{int(self.options.get('chunk_events', RAG_CHUNK_EVENTS))}-event chunks, MiniLM, FAISS inner product, "
                f"top {int(self.options.get('top_k', RAG_TOP_K))}")

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        size = int(self.options.get("chunk_events", RAG_CHUNK_EVENTS))
        chunks = []
        for v in trajectories:
            for k, start in enumerate(range(0, len(v.events), size)):
                body = events_to_narrative(v.events[start:start + size], start=start + 1)
                chunks.append(f"[{v.label} | Task {v.task_id} | chunk {k + 1}]\n{body}")
        if not chunks:
            return _RagState(chunks, np.zeros((0, 384), dtype=np.float32), [])
        from filegram_ray.memory.index import window_rows

        vecs, rows = window_rows(self._embedder(), chunks, [{"chunk": i} for i in range(len(chunks))])
        return _RagState(chunks, vecs, rows)

    def retrieve(self, state: Any, query: str) -> Context:
        from filegram_ray.memory.index import build_index

        stored = sum(approx_tokens(c) for c in state.chunks)
        if not state.chunks:
            return Context("", stored, 0)
        k = min(int(self.options.get("top_k", RAG_TOP_K)), len(state.chunks))
        show = int(self.options.get("display_chars", RAG_DISPLAY_CHARS))
        rows = state.rows if getattr(state, "rows", None) is not None else [{"chunk": i} for i in
                                                                            range(len(state.chunks))]
        index = build_index(state.vectors, rows)
        q = np.ascontiguousarray(self._embedder().encode([query or ""]), dtype=np.float32)
        parts = [state.chunks[rec["chunk"]][:show] for _, rec in index.search(q, k)]
        text = "\n\n".join(parts)
        return Context(text, stored, approx_tokens(text))


# ------------------------------------------------------------------------------------------- summarisation

_SENT = re.compile(r"(?<=[.!?。！？])\s+")


def _first_sentences(text: str, n: int = 2, cap: int = 240) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    heading = next((ln.lstrip("# ").strip() for ln in lines if ln.startswith("#")), "")
    prose = " ".join(ln for ln in lines if not ln.startswith(("#", "|", "!", "-", "*", "```")))
    sents = [s for s in _SENT.split(prose) if len(s) > 20][:n]
    out = (f"'{heading}': " if heading else "") + " ".join(sents)
    return out[:cap]


def extractive_summary(view: TrajectoryView, max_files: int = 3) -> str:
    """Deterministic behavioural summary of one trajectory (the no-LLM Eager Summarisation fallback; ours).

    Statistics sentences over the kept events — reading (reads, distinct files, revisits, searches, browses),
    production (files created, types, mean size, overwrites, tables/images in created content), organisation
    (directories, depth, moves, renames), iteration (edits, lines per edit), curation (deletions, copies/backups)
    and context switches — plus, for up to ``max_files`` created files, the first heading and first sentences of
    their content (the "top sentences").
    """
    evs = view.events
    c = Counter(e.get("event_type") for e in evs)
    reads = [e for e in evs if e.get("event_type") == "file_read"]
    distinct = len({e.get("file_path") for e in reads})
    revisits = sum(1 for e in reads if int(e.get("view_count") or 1) > 1)
    searches = [e for e in evs if e.get("event_type") == "file_search"]
    creates = [e for e in evs if e.get("event_type") == "file_write" and e.get("operation") != "overwrite"]
    overwrites = c["file_write"] - len(creates)
    edits = [e for e in evs if e.get("event_type") == "file_edit"]
    dirs = [e for e in evs if e.get("event_type") == "dir_create"]
    copies = [e for e in evs if e.get("event_type") == "file_copy"]
    types = Counter(str(e.get("file_type") or "?") for e in creates)
    sizes = [int(e.get("content_length") or 0) for e in creates]
    contents = [e.get("_resolved_content", "") or "" for e in creates]
    with_tables = sum(1 for t in contents if re.search(r"^\s*\|.*\|\s*$", t, re.MULTILINE))
    with_images = sum(1 for t in contents if "![" in t or re.search(r"\.(png|jpe?g|svg)\b", t, re.IGNORECASE))
    lines_per_edit = (sum(int(e.get("lines_added") or 0) + int(e.get("lines_deleted") or 0) for e in edits)
                      / len(edits)) if edits else 0.0
    sents = [
        f"{len(evs)} file-system events.",
        (f"Reading: {len(reads)} reads of {distinct} distinct files ({revisits} revisits), {len(searches)} searches "
        f"({', '.join(sorted({str(e.get('search_type')) for e in searches})) or 'none'}), "
        f"{c['file_browse']} directory listings."),
        f"Production: {len(creates)} files created"
        + (f" ({', '.join(f'{k}×{v}' for k, v in sorted(types.items()))}), mean {int(np.mean(sizes))} chars"
           if creates else "")
        + f"; {overwrites} overwrites; tables in {with_tables}, image references in {with_images} created files.",
        (f"Organisation: {len(dirs)} directories created (max depth "
        f"{max([int(e.get('depth') or 0) for e in dirs], default=0)}), {c['file_move']} moves, "
        f"{c['file_rename']} renames."),
        f"Iteration: {len(edits)} edits, {lines_per_edit:.1f} changed lines per edit.",
        (f"Curation: {c['file_delete']} deletions, {len(copies)} copies "
        f"({sum(1 for e in copies if e.get('is_backup'))} backups)."),
        f"Context switches: {c['context_switch']}.",
    ]
    names = [str(e.get("file_path", "")) for e in creates][:8]
    if names:
        sents.append("Created: " + ", ".join(names) + ".")
    for e, text in list(zip(creates, contents))[:max_files]:
        snippet = _first_sentences(text)
        if snippet:
            sents.append(f"{e.get('file_path', '')} opens with {snippet}")
    return " ".join(sents)


_SUMMARY_SYSTEM = ("You summarise how a person works with files, from a log of their file-system actions. "
                   "Describe behaviour, not the task's subject matter.")
_SUMMARY_PROMPT = (
    "Write a 200-400 word behavioural summary of this session. Cover: how they explore and read sources; how "
    "they produce output (length, structure, formats); how they organise files and folders; how they edit and "
    "revise; whether they keep versions or backups and clean up; whether they use tables, images or other "
    "modalities; and the rhythm of the work.\n\n{narrative}")


@register("eager_summarization")
class EagerSummarization(MemoryMethod):
    """One behavioural summary per trajectory at ingest; every query gets all summaries (reference §8.2).

    With an ``llm_fn`` the summary is an LLM call (temperature 0.3, ≤1024 tokens, narrative cut to
    :data:`SUMMARY_PROMPT_CAP_CHARS`); without one it is :func:`extractive_summary` (deterministic).
    """

    name, display = "eager_summarization", "Eager Summ."
    options_schema = {}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("one LLM summary per trajectory through the backbone (temperature 0.3, ≤ 1,024 tokens)" if llm
                else "extractive summary per trajectory (no LLM backbone): counts, files made and their opening lines")

    def _summarise(self, v: TrajectoryView) -> str:
        if self.llm_fn is None:
            return extractive_summary(v)
        narrative = truncate_content(events_to_narrative(v.events, max_content_chars=400), SUMMARY_PROMPT_CAP_CHARS)
        return self.llm_fn(_SUMMARY_PROMPT.format(narrative=narrative), _SUMMARY_SYSTEM,
                           temperature=SUMMARY_TEMPERATURE, max_tokens=SUMMARY_MAX_TOKENS).strip()

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        return {"summaries": [(v.label, v.task_id, self._summarise(v)) for v in trajectories],
                "mode": "llm" if self.llm_fn else "extractive"}

    def retrieve(self, state: Any, query: str) -> Context:
        text = "\n\n".join(f"=== {label} | Task: {task} ===\n{s}" for label, task, s in state["summaries"])
        return Context(text, approx_tokens(text), approx_tokens(text))
