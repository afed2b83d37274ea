"""Mem0 — the real ``mem0ai`` library, configured fully locally (reference §8.2, Mem0 row).

Mechanism (reference §8.2): events become pseudo-chat messages — reads, searches and listings as ``user``
messages, writes, edits and folder operations as ``assistant`` messages (write content ≤ 1,000 characters,
:data:`WRITE_CONTENT_CHARS`) — added to a Mem0 ``Memory`` in batches of 20 (:data:`BATCH_MESSAGES`) under
``user_id="default_user"`` in the collection ``filegram_mem0``. A query runs ``search(limit=10)`` for the item's
question and then for a fixed set of behaviour keyword queries (:data:`TOPIC_QUERIES`, upstream's per-attribute
fan-out), deduplicates, and shows at most 150 memories (100 in raw-message mode, :data:`MAX_SHOWN`).

Two modes; the report names the one that ran (:meth:`Mem0.mode`):

* **LLM backbone configured**: ``add(..., infer=True)`` — mem0's own fact-extraction pipeline; every mem0 LLM call
  goes through the backbone (``llm_fn``, i.e. the backbone's OpenAI-compatible base URL).
* **No LLM backbone**: ``add(..., infer=False)`` — mem0's raw-message mode (upstream's "simulated" mode): every
  message is stored verbatim with its embedding; no LLM is called.

Local configuration: vector store = mem0's FAISS store (in memory: the index, docstore and id map are serialised
into the cached state after ingest and loaded back for queries), embedder = the packaged all-MiniLM-L6-v2 from its
local path (our :class:`~filegram_ray.memory.embed.Embedder`, plugged in as mem0's embedding model so its vector
cache is shared), history database in memory, telemetry off (``MEM0_TELEMETRY=False``), ``MEM0_DIR`` in a
temporary folder. Nothing leaves the machine.

What differs: upstream used Azure OpenAI gpt-4.1 as mem0's LLM, Cohere ``embed-v4.0`` (1,536-D) and an in-memory
Qdrant (**reference ⚠ CODE≠PAPER**: the paper says Gemini 2.5 Flash); here the backbone, MiniLM (384-D) and FAISS.
Upstream's edit messages carry no diff (they read an unset field, a quirk); ours carry the diff (≤ 1,000 chars).
Needs the ``methods`` extra (``mem0ai``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import event_text
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["Mem0", "to_messages"]

#: Messages per ``add`` call, write content cap, search limit, memories shown (reference §8.2 Mem0).
BATCH_MESSAGES = 20
WRITE_CONTENT_CHARS = 1_000
SEARCH_LIMIT = 10
MAX_SHOWN = {"llm": 150, "raw": 100}
USER_ID = "default_user"
COLLECTION = "filegram_mem0"
#: Behaviour keyword queries run after the item's own query (ours; upstream's per-attribute keyword strings are
#: not published in full, reference §8.2).
TOPIC_QUERIES = (
    "read order browsing search files sources", "writing documents length structure tables",
    "folders directories nesting mkdir organisation", "edit revise changes small edits rewrite",
    "backup copies versions delete cleanup", "file names naming", "images charts slides spreadsheets formats",
    "tone language style of writing")

_USER_EVENTS = {"file_read", "file_search", "file_browse", "context_switch", "cross_file_reference"}


def to_messages(views: Sequence[TrajectoryView]) -> list[dict[str, str]]:
    """Pseudo-chat messages of the views (reference §8.2): ``user`` for reads/searches/listings (and context
    switches / references), ``assistant`` for writes, edits and folder operations; content ≤ 1,000 chars."""
    out = []
    for v in views:
        for ev in v.events:
            role = "user" if ev.get("event_type") in _USER_EVENTS else "assistant"
            out.append({"role": role, "content": f"[Task {v.task_id}] {event_text(ev, WRITE_CONTENT_CHARS)}"})
    return out


def _import_mem0():
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), f"filegram-mem0-{os.getpid()}"))
    import logging

    for name in ("mem0", "mem0.memory.main", "mem0.vector_stores.faiss"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from mem0 import Memory
    except ImportError as exc:
        raise ImportError("method mem0 needs the mem0ai library: pip install 'filegram-ray[methods]'") from exc
    return Memory


def _adapters(embedder, llm_fn):
    from mem0.embeddings.base import EmbeddingBase
    from mem0.llms.base import LLMBase

    class _Embedding(EmbeddingBase):
        def __init__(self):
            self.config = None

        def embed(self, text, memory_action=None):
            return embedder.encode([text if isinstance(text, str) else str(text)])[0].astype(float).tolist()

        def embed_batch(self, texts, memory_action=None):
            return [v.astype(float).tolist() for v in embedder.encode([str(t) for t in texts])]

    class _BackboneLLM(LLMBase):
        def __init__(self):
            self.config = None

        def generate_response(self, messages, response_format=None, tools=None, tool_choice="auto", **kwargs):
            system = "\n".join(m["content"] for m in messages if m.get("role") == "system") or None
            prompt = "\n\n".join(m["content"] for m in messages if m.get("role") != "system")
            if response_format and "json" in str(response_format):
                prompt += "\n\nReply with one JSON object only."
            return llm_fn(prompt, system, temperature=0.0, max_tokens=2048)

    return _Embedding(), (_BackboneLLM() if llm_fn is not None else None)


@register("mem0")
class Mem0(MemoryMethod):
    """The real mem0ai ``Memory`` (FAISS, packaged MiniLM, backbone LLM): events as pseudo-chat messages in
    batches of 20; ``search(limit=10)`` per query plus behaviour keyword queries, ≤150 memories (≤100 raw)."""

    name, display = "mem0", "Mem0"
    options_schema = {}

    @classmethod
    def mode(cls, llm: bool) -> str:
        return ("mem0ai, LLM fact extraction through the backbone (infer=True)" if llm
                else "mem0ai, raw-message mode (infer=False; no LLM backbone)")

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def _memory(self, dim: int):
        Memory = _import_mem0()
        tmp = tempfile.mkdtemp(prefix="filegram-mem0-")
        cfg = {"vector_store": {"provider": "faiss", "config": {
                   "collection_name": COLLECTION, "path": os.path.join(tmp, "faiss"), "embedding_model_dims": dim,
                   "distance_strategy": "inner_product"}},
               # placeholder provider (builds a client object, loads no model); replaced just below by the
               # packaged MiniLM (our Embedder, with its vector cache)
               "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": dim,
                                                             "openai_base_url": "http://127.0.0.1:9/v1"}},
               "llm": {"provider": "openai", "config": {"model": "backbone", "api_key": "unused",
                                                         "openai_base_url": "http://127.0.0.1:9/v1"}},
               "history_db_path": ":memory:"}
        m = Memory.from_config(cfg)
        emb, llm = _adapters(self._embedder(), self.llm_fn)
        m.embedding_model = emb
        if llm is not None:
            m.llm = llm
        m.vector_store.path = None  # in memory: no rewrite of the whole index after every insert
        return m

    def _dim(self) -> int:
        emb = self._embedder()
        dim = getattr(emb, "dim", None)
        return int(dim) if dim else int(emb.encode(["dimension probe"]).shape[1])

    def embedding_texts(self, trajectories: Sequence[TrajectoryView]) -> list[str] | None:
        """The messages' contents in raw-message mode (mem0 embeds each message as it stores it); None with an
        LLM backbone (mem0 embeds the facts its LLM extracts, unknown before ingest)."""
        if self.llm_fn is not None:
            return None
        return [m["content"] for m in to_messages(trajectories)]

    def query_embedding_texts(self, query: str) -> list[str]:
        """The item's query, the topic queries, and the entities mem0 extracts from the query (its entity boost
        embeds them; none without a spaCy model)."""
        from mem0.utils.entity_extraction import extract_entities

        qs = [q.strip() for q in (query or "", *TOPIC_QUERIES) if q and q.strip()]  # mem0 strips a query
        return qs + [text for q in qs for _, text in extract_entities(q)]

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        import faiss

        msgs = to_messages(trajectories)
        infer = self.llm_fn is not None
        if not infer and msgs:
            self._embedder().encode([m["content"] for m in msgs])  # one batched pass warms the vector cache
        m = self._memory(self._dim())
        for s in range(0, len(msgs), BATCH_MESSAGES):
            m.add(msgs[s:s + BATCH_MESSAGES], user_id=USER_ID, infer=infer)
        vs = m.vector_store
        stores = {"memories": (faiss.serialize_index(vs.index).tobytes() if vs.index is not None else b"",
                               dict(vs.docstore), dict(vs.index_to_id))}
        ent = getattr(m, "_entity_store", None)
        if ent is not None and getattr(ent, "index", None) is not None:
            stores["entities"] = (faiss.serialize_index(ent.index).tobytes(), dict(ent.docstore),
                                  dict(ent.index_to_id))
        texts = [d.get("data", "") for d in vs.docstore.values()]
        return {"stores": stores, "mode": "llm" if infer else "raw", "n_messages": len(msgs),
                "memory_tokens": sum(approx_tokens(t) for t in texts), "n_memories": len(texts)}

    def _restored(self, state):
        """A Memory holding the state's stores, kept for the state object's lifetime (many queries per state)."""
        import faiss
        import numpy as np

        key = id(state)
        cache = self.__dict__.setdefault("_restored_cache", {})
        if key in cache and cache[key][0] is state:
            return cache[key][1]
        m = self._memory(self._dim())
        for name, store in (("memories", m.vector_store),
                            ("entities", m.entity_store if "entities" in state["stores"] else None)):
            if store is None or name not in state["stores"]:
                continue
            raw, docstore, index_to_id = state["stores"][name]
            if raw:
                store.index = faiss.deserialize_index(np.frombuffer(raw, dtype=np.uint8))
            store.docstore, store.index_to_id = dict(docstore), dict(index_to_id)
            store.path = None
        cache.clear()  # one restored memory at a time: a unit answers the items of one state
        cache[key] = (state, m)
        return m

    def retrieve(self, state: Any, query: str) -> Context:
        if not state["n_memories"]:
            return Context("", 0, 0)
        m = self._restored(state)
        cap = MAX_SHOWN[state["mode"]]
        seen: dict[str, str] = {}
        for q in (query or "", *TOPIC_QUERIES):
            if not q:
                continue
            hits = m.search(q, filters={"user_id": USER_ID}, top_k=SEARCH_LIMIT, threshold=0.0)
            for h in hits.get("results", []):
                seen.setdefault(h["id"], h["memory"])
                if len(seen) >= cap:
                    break
            if len(seen) >= cap:
                break
        text = "\n".join(f"- {t}" for t in seen.values())
        return Context(text, int(state["memory_tokens"]), approx_tokens(text))
