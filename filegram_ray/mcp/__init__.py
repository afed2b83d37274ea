"""``filegram mcp``: a person's FileGramOS memory of how they work with files, served to their AI assistants over
the Model Context Protocol — locally, read-only, from the watcher's redacted store (docs/mcp.md).

* :mod:`filegram_ray.mcp.memory` — what is served: the store's memory, kept up to date in a background thread, with
  the ``--forget`` rules applied (:class:`MemoryService`);
* :mod:`filegram_ray.mcp.server` — the MCP server on the official ``mcp`` SDK (tools, resources, the prompt, the
  request log, stdio and loopback HTTP with a bearer token);
* :mod:`filegram_ray.mcp.cli` — the ``filegram mcp`` subcommand.
"""
