"""Zep — a temporal knowledge graph of the user's file work (reference §8.2, Zep row).

Two engines; the report names the one that ran (:meth:`Zep.mode`):

* **graphiti-core on Kùzu** (when an LLM backbone is configured and ``graphiti-core`` + ``kuzu`` are installed,
  the ``methods`` extra): the real temporal-graph library behind Zep. Each narrative slice of 30,000 characters
  (:data:`SLICE_CHARS`) is added as one episode (``add_episode``, episode type text, reference time = the slice's
  first event time) to an embedded Kùzu database in a temporary folder; graphiti extracts entities and facts
  through our backbone (every LLM call goes through the backbone's ``llm_fn``) and
  embeds them with the packaged MiniLM; graphiti's reranker slot gets MiniLM cosine (no cross-encoder model is
  packaged). After ingest every edge (fact, endpoints,
  validity) is read back from the graph, so the cached state is plain data; a query is answered by cosine over
  the facts.
* **Local graph in networkx** (upstream's "Graphiti-like" adapter, reference §8.2): with an LLM, one call per
  30,000-character slice extracts 10–20 triples ``{subject, relation, object, properties.pattern, task_id}`` into
  a ``networkx.MultiDiGraph``; without an LLM, rule-based facts from the events (who read / searched / created /
  edited / moved / copied / deleted what, which file lies in which folder), identical facts merged with a count, at
  most 150 (:data:`RULE_FACTS_CAP`).

Query (both engines, reference §8.2): at most 200 edges (:data:`EDGES_SHOWN`) as ``(u) -[rel]-> (v) [task:…]
{pattern: …}`` plus node / edge / relation counts and the top-10 nodes by degree. The networkx engine shows its
edges in storage order (the same context for every query, as upstream); the graphiti engine shows the edges most
similar to the query first.

What differs: upstream's adapter is not the Zep service either (a local "Graphiti-like" graph); the paper's
numbers come from it. Upstream runs 4 threads over slices; ours is sequential per ingest. graphiti-core needs a
model that follows its JSON schemas; with a small local model many extractions come back empty.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import LlmCounter, llm_json, narrative_slices
from filegram_ray.methods.trajectory import TrajectoryView, anonymize_path

__all__ = ["Zep", "rule_facts"]

#: Narrative characters per extraction call / graphiti episode; triples asked per call (reference §8.2 Zep).
SLICE_CHARS = 30_000
TRIPLES_PER_CALL = (10, 20)
#: Rule-fallback fact cap; edges shown; top nodes by degree (reference §8.2 Zep).
RULE_FACTS_CAP = 150
EDGES_SHOWN = 200
TOP_NODES = 10


def _subject(ev: dict[str, Any]) -> str:
    return str(ev.get("stream") or "user")


def rule_facts(views: Sequence[TrajectoryView]) -> list[dict[str, Any]]:
    """Rule-based facts (the no-LLM fallback; rules ours): one triple per file action, identical triples merged
    with ``count`` and the tasks they came from, most frequent first, at most :data:`RULE_FACTS_CAP`."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(u, rel, v, task, pattern=""):
        if not u or not v:
            return
        key = (str(u), rel, str(v))
        f = seen.get(key)
        if f is None:
            seen[key] = {"subject": key[0], "relation": rel, "object": key[2], "pattern": pattern, "tasks": [task],
                         "count": 1}
        else:
            f["count"] += 1
            if task not in f["tasks"]:
                f["tasks"].append(task)

    for v in views:
        for ev in v.events:
            t, who, p = ev.get("event_type"), _subject(ev), anonymize_path(ev.get("file_path", ""))
            if t == "file_read":
                add(who, "read", p, v.task_id, f"view #{ev.get('view_count', 1)}")
            elif t == "file_search":
                add(who, "searched_for", repr(str(ev.get("query", ""))), v.task_id, str(ev.get("search_type", "")))
            elif t == "file_browse":
                add(who, "listed", anonymize_path(ev.get("directory_path", "")) or ".", v.task_id)
            elif t == "file_write":
                add(who, "overwrote" if ev.get("operation") == "overwrite" else "created", p, v.task_id,
                    f"{ev.get('content_length', 0)} chars")
                if "/" in p:
                    add(p, "located_in", p.rsplit("/", 1)[0], v.task_id)
            elif t == "file_edit":
                add(who, "edited", p, v.task_id, f"+{ev.get('lines_added', 0)}/-{ev.get('lines_deleted', 0)} lines")
            elif t == "dir_create":
                add(who, "created_folder", anonymize_path(ev.get("dir_path", "")), v.task_id,
                    f"depth {ev.get('depth', 0)}")
            elif t in ("file_move", "file_rename"):
                add(anonymize_path(ev.get("old_path", "")), "moved_to" if t == "file_move" else "renamed_to",
                    anonymize_path(ev.get("new_path", "")), v.task_id)
            elif t == "file_copy":
                add(anonymize_path(ev.get("source_path", "")), "backed_up_as" if ev.get("is_backup") else "copied_to",
                    anonymize_path(ev.get("dest_path", "")), v.task_id)
            elif t == "file_delete":
                add(who, "deleted", p, v.task_id)
            elif t == "context_switch":
                add(anonymize_path(ev.get("from_file") or "") or "start", "switched_to",
                    anonymize_path(ev.get("to_file", "")), v.task_id)
            elif t == "cross_file_reference":
                add(anonymize_path(ev.get("source_file", "")), "references", anonymize_path(ev.get("target_file", "")),
                    v.task_id, str(ev.get("reference_type", "")))
    facts = sorted(seen.values(), key=lambda f: -f["count"])  # stable: ties keep first-seen order
    return facts[:RULE_FACTS_CAP]


def _graph(facts: list[dict[str, Any]]):
    import networkx as nx

    g = nx.MultiDiGraph()
    for f in facts:
        g.add_edge(f["subject"], f["object"], relation=f["relation"], pattern=f.get("pattern", ""),
                   tasks=list(f.get("tasks", [])), count=int(f.get("count", 1)))
    return g


def _render(g, edges: list[tuple[str, str, dict[str, Any]]]) -> str:
    rels = Counter(d["relation"] for _, _, d in g.edges(data=True))
    top = sorted(g.degree, key=lambda x: (-x[1], str(x[0])))[:TOP_NODES]
    lines = [f"Knowledge graph: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, {len(rels)} relation "
             f"types ({', '.join(f'{r} {n}' for r, n in rels.most_common(12))})",
             "Most connected: " + ", ".join(f"{n} ({d})" for n, d in top), "Facts:"]
    for u, v, d in edges[:EDGES_SHOWN]:
        extra = f" {{pattern: {d['pattern']}}}" if d.get("pattern") else ""
        seen = f" ×{d['count']}" if int(d.get("count", 1)) > 1 else ""
        lines.append(f"({u}) -[{d['relation']}]-> ({v}) [task:{','.join(d.get('tasks') or [])}]{extra}{seen}")
    return "\n".join(lines)


_SYSTEM = "You extract a knowledge graph of how a person works with files from logs of their file-system actions."
_PROMPT = (
    "Actions (task {task}):\n{slice}\n\nExtract {lo}-{hi} knowledge-graph triples about this person's working "
    "habits and the files they handle. Reply with JSON only: {{\"triples\": [{{\"subject\": \"...\", \"relation\": "
    "\"...\", \"object\": \"...\", \"properties\": {{\"pattern\": \"the habit this shows\"}}}}]}}")


@register("zep")
class Zep(MemoryMethod):
    """A knowledge graph of the user's file work: graphiti-core on embedded Kùzu with an LLM backbone, else the
    upstream-style networkx graph of rule-based facts; the context lists ≤200 edges + graph statistics
    (reference §8.2).

    Options:
        engine: ``auto`` (graphiti when an LLM backbone is configured and graphiti-core is installed),
            ``graphiti`` or ``networkx``.
    """

    name, display = "zep", "Zep"
    options_schema = {"engine": str}

    @classmethod
    def mode(cls, llm: bool) -> str:
        if llm and _graphiti_available():
            return "graphiti-core on embedded Kùzu (LLM through the backbone)"
        if llm:
            return "networkx graph of LLM-extracted triples (graphiti-core not installed)"
        return "networkx graph of rule-based facts (no LLM backbone)"

    def _engine(self) -> str:
        engine = str(self.options.get("engine", "auto"))
        if engine not in ("auto", "graphiti", "networkx"):
            raise ValueError(f"zep: engine={engine!r}; expected auto, graphiti or networkx")
        if engine == "auto":
            engine = "graphiti" if self.llm_fn is not None and _graphiti_available() else "networkx"
        if engine == "graphiti" and self.llm_fn is None:
            raise ValueError("zep: engine=graphiti needs an LLM backbone (--backbone-url)")
        return engine

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        engine = self._engine()
        llm = LlmCounter(self.llm_fn)
        if engine == "graphiti":
            from filegram_ray.methods.zep_graphiti import graphiti_ingest

            facts = graphiti_ingest(trajectories, llm, self._embedder(), SLICE_CHARS)
            return {"facts": facts, "engine": "graphiti", "llm_calls": llm.calls,
                    "vectors": self._embed_facts(facts)}
        if llm:
            facts = []
            for task_id, text in narrative_slices(trajectories, SLICE_CHARS):
                raw = llm_json(llm, _PROMPT.format(task=task_id, slice=text, lo=TRIPLES_PER_CALL[0],
                                                   hi=TRIPLES_PER_CALL[1]), _SYSTEM, key="triples", max_tokens=2048)
                for r in (raw if isinstance(raw, list) else [])[:TRIPLES_PER_CALL[1]]:
                    if isinstance(r, dict) and all(str(r.get(k, "")).strip() for k in ("subject", "relation", "object")):
                        props = r.get("properties") if isinstance(r.get("properties"), dict) else {}
                        facts.append({"subject": str(r["subject"]).strip(), "relation": str(r["relation"]).strip(),
                                      "object": str(r["object"]).strip(), "pattern": str(props.get("pattern", "")),
                                      "tasks": [task_id], "count": 1})
            if not facts:  # no parseable triple at all: the rule facts stand in
                facts = rule_facts(trajectories)
        else:
            facts = rule_facts(trajectories)
        return {"facts": facts, "engine": "networkx", "llm_calls": llm.calls}

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def _embed_facts(self, facts):
        from filegram_ray.methods.common import embed_texts

        return embed_texts(self._embedder(), [f"{f['subject']} {f['relation']} {f['object']}. {f.get('pattern', '')}"
                                              for f in facts])

    def retrieve(self, state: Any, query: str) -> Context:
        facts = state["facts"]
        g = _graph(facts)
        edges = [(f["subject"], f["object"], f) for f in facts]
        if state.get("engine") == "graphiti" and facts:
            import numpy as np

            from filegram_ray.methods.common import embed_texts

            q = embed_texts(self._embedder(), [query or ""])
            order = np.argsort(-(state["vectors"] @ q[0]), kind="stable")
            edges = [edges[i] for i in order]
        text = _render(g, edges)
        stored = approx_tokens(json.dumps(facts, ensure_ascii=False))
        return Context(text, stored, approx_tokens(text))


def _graphiti_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("graphiti_core") is not None and importlib.util.find_spec("kuzu") is not None
