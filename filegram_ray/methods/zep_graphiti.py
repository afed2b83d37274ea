"""The graphiti-core engine of :mod:`filegram_ray.methods.zep`: the real temporal-graph library on embedded Kùzu.

Needs the ``methods`` extra (``graphiti-core``, ``kuzu``). Every LLM call of graphiti goes through the
backbone's ``llm_fn`` (:class:`_BackboneLLMClient`: graphiti appends its response JSON schema to the prompt; the
reply's first JSON object is returned); embeddings come from the packaged MiniLM (:class:`_MiniLMEmbedder`);
passages are ranked by MiniLM cosine (:class:`_CosineRanker`, no cross-encoder model is packaged). Telemetry is
switched off. The Kùzu database lives in a temporary folder removed after ingest; the facts are read back as plain
dicts (the cached state).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from filegram_ray.methods.common import narrative_slices
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["graphiti_ingest"]


def _clients(llm_fn, embedder):
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.llm_client.config import LLMConfig

    from filegram_ray.llm.parsing import parse_json_object

    class _BackboneLLMClient(LLMClient):
        async def _generate_response(self, messages, response_model=None, max_tokens=1024, model_size=None,
                                     model=None):
            system = "\n".join(m.content for m in messages if m.role == "system") or None
            prompt = "\n\n".join(m.content for m in messages if m.role != "system")
            reply = await asyncio.to_thread(llm_fn, prompt, system, temperature=0.0, max_tokens=int(max_tokens))
            obj = parse_json_object(reply or "")
            if obj is None:
                raise ValueError(f"graphiti: the backbone reply holds no JSON object: {str(reply)[:200]!r}")
            return obj

    class _MiniLMEmbedder(EmbedderClient):
        async def create(self, input_data):
            text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            return embedder.encode([text])[0].astype(float).tolist()

        async def create_batch(self, input_data_list):
            return [v.astype(float).tolist() for v in embedder.encode(list(input_data_list))]

    class _CosineRanker(CrossEncoderClient):
        async def rank(self, query, passages):
            if not passages:
                return []
            vecs = embedder.encode([query, *passages])
            sims = vecs[1:] @ vecs[0]
            order = np.argsort(-sims, kind="stable")
            return [(passages[i], float(sims[i])) for i in order]

    return (_BackboneLLMClient(LLMConfig(api_key="unused", model="backbone", small_model="backbone")),
            _MiniLMEmbedder(), _CosineRanker())


async def _all(coro) -> list:
    """Await a graphiti ``get_by_group_ids``; an empty graph (graphiti raises ``GroupsEdgesNotFoundError`` /
    ``GroupsNodesNotFoundError`` for it) gives []."""
    from graphiti_core.errors import GroupsEdgesNotFoundError

    try:
        return list(await coro)
    except GroupsEdgesNotFoundError:
        return []
    except Exception as exc:  # noqa: BLE001 - only graphiti's "not found" errors mean "empty"
        if type(exc).__name__.startswith("Groups") and "NotFound" in type(exc).__name__:
            return []
        raise


async def _run(views: Sequence[TrajectoryView], llm_fn, embedder, slice_chars: int, db_dir: str
               ) -> list[dict[str, Any]]:
    from graphiti_core import Graphiti
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.helpers import get_default_group_id
    from graphiti_core.nodes import EntityNode, EpisodeType

    llm_client, emb, ranker = _clients(llm_fn, embedder)
    g = Graphiti(graph_driver=KuzuDriver(db=os.path.join(db_dir, "graph.kuzu")), llm_client=llm_client,
                 embedder=emb, cross_encoder=ranker, max_coroutines=1)
    try:
        await g.build_indices_and_constraints()
        starts = {v.task_id: float(v.events[0].get("timestamp") or 0.0) for v in views if v.events}
        for k, (task_id, text) in enumerate(narrative_slices(views, slice_chars)):
            ts = starts.get(task_id, 0.0)
            ts = ts / 1000.0 if ts > 1e11 else ts  # event timestamps are ms (engine) or s
            await g.add_episode(name=f"Task {task_id} part {k + 1}", episode_body=text,
                                source_description="file-system activity log", source=EpisodeType.text,
                                reference_time=datetime.fromtimestamp(ts, tz=timezone.utc))
        # the provider's default group (graphiti 0.31 fails on Kùzu with an explicit group_id: KuzuDriver has no
        # ``_database``); the database is private to this ingest anyway
        group = get_default_group_id(g.driver.provider)
        nodes = {n.uuid: n.name for n in await _all(EntityNode.get_by_group_ids(g.driver, [group]))}
        edges = await _all(EntityEdge.get_by_group_ids(g.driver, [group]))
    finally:
        await g.close()
    facts = []
    for e in edges:
        facts.append({"subject": nodes.get(e.source_node_uuid, "?"), "relation": e.name,
                      "object": nodes.get(e.target_node_uuid, "?"), "pattern": e.fact,
                      "tasks": [], "count": 1,
                      "valid_at": e.valid_at.isoformat() if e.valid_at else None,
                      "invalid_at": e.invalid_at.isoformat() if e.invalid_at else None})
    facts.sort(key=lambda f: (f["valid_at"] or "", f["subject"], f["relation"], f["object"]))
    return facts


def graphiti_ingest(views: Sequence[TrajectoryView], llm_fn, embedder, slice_chars: int) -> list[dict[str, Any]]:
    """Build a graphiti temporal graph of ``views`` on a fresh embedded Kùzu database and return its facts.

    Args:
        llm_fn: ``llm_fn(prompt, system_prompt, temperature=, max_tokens=) -> str`` (the backbone).
        embedder: ``encode(texts) -> (n, d)`` unit rows (the packaged MiniLM).
        slice_chars: narrative characters per graphiti episode.

    Returns:
        ``[{subject, relation, object, pattern (graphiti's fact sentence), valid_at, invalid_at, …}]``.

    Raises:
        ImportError: graphiti-core or kuzu is not installed (``pip install 'filegram-ray[methods]'``).
    """
    os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
    db_dir = tempfile.mkdtemp(prefix="filegram-zep-")
    try:
        return asyncio.run(_run(views, llm_fn, embedder, slice_chars, db_dir))
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)
