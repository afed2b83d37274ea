"""FileGramEngine rebuilt: sandbox, tools, event collector, media store and post-execution filter.

Public API (the agents code against it)::

    from filegram_ray.engine import EngineSession, Limits, ToolResult, tool_schemas
"""

from filegram_ray.engine.sandbox import Limits
from filegram_ray.engine.session import EngineSession
from filegram_ray.engine.tools import ToolResult, tool_schemas

__all__ = ["EngineSession", "Limits", "ToolResult", "tool_schemas"]
