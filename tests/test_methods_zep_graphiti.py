"""Zep's graphiti-core engine on embedded Kùzu: the real library runs end to end with every LLM call going through
``llm_fn``. The stand-in backbone answers each graphiti prompt with the JSON its schema asks for (one entity per
file path named in the episode, no relations), so this checks the plumbing (driver, indices, episodes, LLM and
embedder adapters, read-back), not extraction quality."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from test_methods_core import TinyEmbedder

from filegram_ray.methods import TrajectoryView, make_method

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("graphiti_core") is None or importlib.util.find_spec("kuzu") is None,
    reason="graphiti-core / kuzu not installed (pip install -e '.[methods]')")


def _fill(schema: dict, defs: dict, prompt: str):
    if "$ref" in schema:
        return _fill(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, prompt)
    if "anyOf" in schema:
        return _fill(next(s for s in schema["anyOf"] if s.get("type") != "null"), defs, prompt)
    t = schema.get("type")
    if t == "object":
        return {k: _fill(v, defs, prompt) for k, v in (schema.get("properties") or {}).items()
                if k in (schema.get("required") or [])}
    if t == "array":
        return []
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False}.get(t)


def stand_in_backbone(prompt, system_prompt=None, **kw):
    """Answers with a minimal instance of the JSON schema graphiti appends to its prompt; entity extraction gets
    one entity per file path mentioned."""
    m = re.search(r"Respond with a JSON object in the following format:\s*(\{.*\})\s*$", prompt, re.S)
    if not m:
        return "{}"
    schema = json.loads(m.group(1))
    obj = _fill(schema, schema.get("$defs", {}), prompt)
    if "extracted_entities" in (schema.get("properties") or {}):
        paths = sorted(set(re.findall(r"(?:Create|Read) file: ([\w./-]+)", prompt)))
        obj["extracted_entities"] = [{"name": p, "entity_type_id": 0} for p in paths]
    return json.dumps(obj)


def test_graphiti_engine_runs_on_kuzu_through_the_backbone():
    evs = [{"event_type": "file_read", "timestamp": 1_700_000_000_000.0, "file_path": "src/a.md", "view_count": 1,
            "content_length": 10},
           {"event_type": "file_write", "timestamp": 1_700_000_001_000.0, "file_path": "out/report.md",
            "operation": "create", "content_length": 12, "_resolved_content": "# Report\nok"}]
    calls = []

    def llm_fn(prompt, system_prompt=None, **kw):
        calls.append(prompt)
        return stand_in_backbone(prompt, system_prompt, **kw)

    m = make_method("zep", llm_fn=llm_fn, embedder=TinyEmbedder())
    assert type(m).mode(True).startswith("graphiti-core on embedded Kùzu")
    st = m.ingest([TrajectoryView("Session 1", "T-01", evs)])
    assert st["engine"] == "graphiti" and st["llm_calls"] == len(calls) >= 1
    assert isinstance(st["facts"], list)
    ctx = m.retrieve(st, "report")
    assert ctx.text.startswith("Knowledge graph: ")
