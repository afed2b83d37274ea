"""The other direction: an MCP server's tools and prompt offered to the project's own LLM agent
(:func:`~filegram_ray.engine.agents.llm_agent.run_llm_trajectory`), through the official SDK's client.

:func:`agent_tools` turns every tool a connected ``mcp.Client`` lists into an
:class:`~filegram_ray.engine.agents.llm_agent.ExtraTool` (the OpenAI function schema from the tool's name,
description and input JSON Schema; a call goes to the server with ``tools/call`` and its text content — or its
error — comes back to the model). :func:`prompt_text` reads a prompt's text (``prompts/get``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["agent_tools", "prompt_text"]

#: a tool answer shown to the model is cut here (ours: an MCP answer is JSON; the agent's own tool outputs are
#: bounded by ``max_tool_output_chars`` as well)
MAX_ANSWER_CHARS = 6000


def _text_of(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in (getattr(result, "content", None) or [])]
    return "\n".join(p for p in parts if p)


async def agent_tools(client: Any, names: list[str] | None = None, max_chars: int = MAX_ANSWER_CHARS) -> list[Any]:
    """The tools of a connected ``mcp.Client`` as agent :class:`ExtraTool` s (``names``: only these, in this
    order; default all)."""
    from filegram_ray.engine.agents.llm_agent import ExtraTool

    listed = {t.name: t for t in (await client.list_tools()).tools}
    out = []
    for name in names or list(listed):
        t = listed[name]
        schema = {"type": "function", "function": {
            "name": t.name, "description": (t.description or t.title or t.name).strip(),
            "parameters": dict(t.input_schema or {"type": "object", "properties": {}})}}

        def call(arguments: dict[str, Any], _name: str = t.name):
            async def run() -> str:
                r = await client.call_tool(_name, arguments)
                text = _text_of(r)
                if r.is_error:
                    raise ValueError(text[:500] or "the server refused the call")
                return text if len(text) <= max_chars else text[:max_chars] + "\n[… answer cut]"
            return run()

        out.append(ExtraTool(schema, call))
    return out


async def prompt_text(client: Any, name: str, arguments: dict[str, str] | None = None) -> str:
    """The text of prompt ``name`` of a connected ``mcp.Client`` (its messages' text, joined)."""
    r = await client.get_prompt(name, arguments or {})
    return "\n\n".join(getattr(m.content, "text", "") for m in r.messages if getattr(m.content, "text", ""))
