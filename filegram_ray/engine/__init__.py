"""FileGramEngine rebuilt: sandbox, tools, event collector, media store and post-execution filter.

Public API (the agents code against it)::

    from filegram_ray.engine import EngineSession, Limits, ToolResult, tool_schemas
"""

from filegram_ray._lazy import lazy_exports

# imported on first use, so `filegram engine --help` does not load the engine (start-up under 0.5 s)
__getattr__, __dir__ = lazy_exports(__name__, {
    "Limits": "filegram_ray.engine.sandbox", "EngineSession": "filegram_ray.engine.session",
    "ToolResult": "filegram_ray.engine.tools", "tool_schemas": "filegram_ray.engine.tools"})

__all__ = ["EngineSession", "Limits", "ToolResult", "tool_schemas"]
