"""The MCP server of ``filegram mcp``, on the official ``mcp`` Python SDK (``MCPServer``).

Served, read-only, from a :class:`~filegram_ray.mcp.memory.MemoryService`:

* tools — ``how_does_the_user(aspect)``: the procedural channel for one dimension (tier, evidence features, how many
  sessions support it); ``recall(query, k)``: semantic + episodic retrieval over the person's own sessions, each hit
  naming its session and time; ``recent_sessions(n)``; ``profile()``: all six dimensions with confidence. Every
  tool is annotated read-only, idempotent and closed-world; arguments are checked against the input schema, and a
  malformed call is answered with an MCP error result, never a crash.
* resources — ``filegram://profile``, ``filegram://context`` (the whole FileGramOS context, Markdown),
  ``filegram://sessions/recent``, and the templates ``filegram://dimension/{aspect}`` and
  ``filegram://recall/{query}``.
* the prompt ``work_like_this_user(task)``: how this user works, as instructions for an assistant.

Transports: stdio (the default: the client starts the server), or streamable HTTP bound to 127.0.0.1 only, behind
a bearer token (the SDK's token verification; a request without the token gets HTTP 401) with the SDK's DNS
rebinding protection (Host and Origin must be loopback).

Every request is logged, without its contents, to ``<store>/mcp/requests.jsonl`` (:class:`RequestLog`): time,
transport, method, the tool / prompt / resource *name* (a resource template's pattern, never its filled-in URI;
an unknown name as ``"?"``), the duration and the outcome. Arguments, queries and answers are never written.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from filegram_ray.mcp.memory import ASPECTS, MemoryService

log = logging.getLogger(__name__)

__all__ = ["RequestLog", "build_server", "serve_http", "serve_stdio"]

SERVER_NAME = "filegram"
AspectName = Literal["consumption", "production", "organization", "iteration", "curation", "cross_modal"]
assert set(AspectName.__args__) == set(ASPECTS)  # type: ignore[attr-defined]
#: the largest answer sizes a client may ask for (ours: more hits than this do not fit an assistant's context)
MAX_K, MAX_SESSIONS, MAX_QUERY_CHARS = 50, 100, 2000
#: the request log is rotated (one earlier file kept) above this size (ours)
REQUEST_LOG_MAX_BYTES = 8 * 1024 * 1024

INSTRUCTIONS = (
    "FileGram: the memory of how this user works with files, built on this computer from their own recorded file "
    "activity (redacted; nothing leaves the machine). Use `profile` or the prompt `work_like_this_user` before "
    "doing file work for the user (writing documents, organising folders, editing, cleaning up), "
    "`how_does_the_user` for one aspect, `recall` to find what they did before on a topic, `recent_sessions` for "
    "what they worked on lately. Everything here is read-only.")


# --------------------------------------------------------------------------------------------------------- answers
class Dimension(BaseModel):
    """One behavioural dimension of the user, as the memory classifies it (reference §7.6 rules)."""

    aspect: str = Field(description="dimension name (reference §5.1)")
    dimension: str = Field(description="dimension letter A-F")
    title: str
    tier: Literal["L", "M", "R"]
    classification: str = Field(description="FileGramOS category of the tier (e.g. nested_by_topic)")
    confidence: str = Field(description="HIGH / MODERATE / LOW: distance of the deciding statistic to its threshold")
    sessions_supporting: int = Field(description="sessions that, classified alone, fall in the same tier")
    sessions_total: int
    evidence: dict[str, float] = Field(description="per-session means of the features the rule reads")
    rule: str = Field(description="the statistics the classification was decided on")
    guidance: str = Field(description="what this means for an assistant working for the user")
    patterns: list[str] = Field(description="behavioural pattern lines of this dimension")


class ProfileAnswer(BaseModel):
    status: Literal["ok", "no_memory", "loading"]
    message: str | None = None
    sessions: int = 0
    first_session: str | None = None
    last_session: str | None = None
    updated: str | None = None
    dimensions: list[Dimension] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class DimensionAnswer(BaseModel):
    status: Literal["ok", "no_memory", "loading"]
    message: str | None = None
    dimension: Dimension | None = None
    notes: list[str] = Field(default_factory=list)


class Hit(BaseModel):
    session: str = Field(description="the session (S-<UTC start>-<id>)")
    time: str | None = Field(description="when the session started (ISO 8601, local time)")
    ended: str | None = None
    channel: Literal["episodic", "semantic"] = Field(description="an episode of work, or a piece of file content")
    similarity: float
    title: str
    text: str = Field(description="the episode, or the redacted content snippet the store keeps")
    file: str | None = Field(None, description="the file (path inside the watched folder) of a content snippet")


class RecallAnswer(BaseModel):
    status: Literal["ok", "no_memory", "loading"]
    message: str | None = None
    query_ms: float | None = None
    hits: list[Hit] = Field(default_factory=list)


class Session(BaseModel):
    session: str
    started: str | None
    ended: str | None
    state: Literal["closed", "recording"]
    in_memory: bool
    behavioural_events: int | None = None
    worked_on: list[str] = Field(default_factory=list)
    files_created: list[str] = Field(default_factory=list)
    unusual: bool = Field(False, description="the session deviates from the user's usual behaviour")


class RecentAnswer(BaseModel):
    status: Literal["ok", "no_memory", "loading"]
    message: str | None = None
    total: int = 0
    sessions: list[Session] = Field(default_factory=list)


# ----------------------------------------------------------------------------------------------------- request log
class RequestLog:
    """Append-only JSON lines ``<store>/mcp/requests.jsonl`` (mode 0600), one per request, without contents;
    rotated to ``requests.jsonl.1`` above :data:`REQUEST_LOG_MAX_BYTES`. Thread-safe."""

    def __init__(self, store_path: str | os.PathLike, transport: str):
        self.path = Path(store_path) / "mcp" / "requests.jsonl"
        self.transport = transport
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, **fields: Any) -> None:
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "transport": self.transport, **fields}
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            try:
                if self.path.exists() and self.path.stat().st_size + len(line) > REQUEST_LOG_MAX_BYTES:
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
            except OSError as exc:  # a full disk must not take the server down; the log says so
                log.warning("request log %s: %s", self.path, exc)


_STATIC_RESOURCES = ("filegram://profile", "filegram://context", "filegram://sessions/recent")
_TEMPLATES = ("filegram://dimension/{aspect}", "filegram://recall/{query}")
_TOOLS = ("how_does_the_user", "recall", "recent_sessions", "profile")
_PROMPTS = ("work_like_this_user",)


def _target(method: str, params: Any) -> str | None:
    """The name a request is about — never its arguments: a tool or prompt name the server has (else ``"?"``),
    a static resource URI or the pattern of the template a URI matches."""
    p = params if isinstance(params, dict) else {}
    if method == "tools/call":
        return p.get("name") if p.get("name") in _TOOLS else "?"
    if method == "prompts/get":
        return p.get("name") if p.get("name") in _PROMPTS else "?"
    if method == "resources/read":
        uri = str(p.get("uri", ""))
        if uri in _STATIC_RESOURCES:
            return uri
        for t in _TEMPLATES:
            if uri.startswith(t.split("{", 1)[0]):
                return t
        return "?"
    if method == "initialize":
        ci = p.get("clientInfo") or p.get("client_info") or {}
        if isinstance(ci, dict) and ci.get("name"):
            return f"client {str(ci.get('name'))[:64]} {str(ci.get('version', ''))[:32]}".strip()
    return None


def _logging_middleware(reqlog: RequestLog):
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    async def middleware(ctx, call_next):
        if ctx.request_id is None:  # a notification, not a request
            return await call_next(ctx)
        t0 = time.perf_counter()
        outcome, code = "ok", None
        try:
            result = await call_next(ctx)
            if getattr(result, "is_error", False) or (isinstance(result, dict) and result.get("isError")):
                outcome = "tool_error"
            return result
        except MCPError as exc:
            outcome, code = "error", exc.error.code
            raise
        except ValidationError:
            outcome, code = "error", -32602
            raise
        except BaseException:
            outcome = "internal_error"
            raise
        finally:
            rec: dict[str, Any] = {"method": ctx.method}
            target = _target(ctx.method, ctx.params)
            if target:
                rec["name"] = target
            rec.update({"ms": round((time.perf_counter() - t0) * 1000.0, 2), "outcome": outcome})
            if code is not None:
                rec["code"] = code
            reqlog.write(**rec)

    return middleware


# ---------------------------------------------------------------------------------------------------------- server
class _BearerToken:
    """The SDK's ``TokenVerifier`` for one static token (compared in constant time)."""

    def __init__(self, token: str):
        self._token = token

    async def verify_token(self, token: str):
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode("utf-8"), self._token.encode("utf-8")):
            return AccessToken(token=token, client_id="filegram-local", scopes=[])
        return None


def build_server(service: MemoryService, reqlog: RequestLog, *, token: str | None = None,
                 issuer_url: str = "http://127.0.0.1") -> Any:
    """The ``MCPServer`` serving ``service`` (module docstring). ``token``: require this bearer token (HTTP)."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp_types import ToolAnnotations

    from filegram_ray import __version__

    auth_kw: dict[str, Any] = {}
    if token is not None:
        from mcp.server.auth.settings import AuthSettings

        auth_kw = {"token_verifier": _BearerToken(token),
                   "auth": AuthSettings(issuer_url=issuer_url, resource_server_url=None)}
    srv = MCPServer(SERVER_NAME, title="FileGram memory", version=__version__, instructions=INSTRUCTIONS,
                    log_level="DEBUG" if log.isEnabledFor(logging.DEBUG) else "WARNING", **auth_kw)
    srv.middleware.append(_logging_middleware(reqlog))
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    @srv.tool(title="How does the user …?", annotations=ro)
    def how_does_the_user(aspect: Annotated[AspectName, Field(description=(
            "consumption (reading, looking things up), production (how much they write), organization (folders), "
            "iteration (editing), curation (deleting, cleaning up), cross_modal (tables, images, data files)"))]
                          ) -> DimensionAnswer:
        """How the user handles one aspect of file work: the tier their recorded sessions show, the evidence
        (per-session means of the deciding features), how many sessions support it, and what it means for an
        assistant working for them."""
        return DimensionAnswer.model_validate(service.dimension(aspect))

    @srv.tool(title="Recall the user's past work", annotations=ro)
    def recall(query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                                           description="what to look for, in plain words")],
               k: Annotated[int, Field(ge=1, le=MAX_K, description="number of hits")] = 5) -> RecallAnswer:
        """Search the user's own past sessions: episodes of work (episodic) and pieces of the files they wrote
        (semantic, redacted as stored), best first; each hit names its session and when it happened."""
        return RecallAnswer.model_validate(service.recall(query.strip() or query, k))

    @srv.tool(title="Recent sessions", annotations=ro)
    def recent_sessions(n: Annotated[int, Field(ge=1, le=MAX_SESSIONS, description="how many")] = 10
                        ) -> RecentAnswer:
        """The user's most recent working sessions, newest first: when, what they worked on, files created."""
        return RecentAnswer.model_validate(service.recent_sessions(n))

    @srv.tool(title="The user's working profile", annotations=ro)
    def profile() -> ProfileAnswer:
        """All six dimensions of how the user works with files (reading, writing, organising, editing, cleaning
        up, tables/images), each with its tier, confidence and supporting sessions."""
        return ProfileAnswer.model_validate(service.profile())

    @srv.resource("filegram://profile", name="profile", title="The user's working profile",
                  mime_type="application/json")
    def profile_resource() -> str:
        """All six dimensions (as the ``profile`` tool)."""
        return ProfileAnswer.model_validate(service.profile()).model_dump_json(indent=2)

    @srv.resource("filegram://context", name="context", title="FileGramOS memory context",
                  mime_type="text/markdown")
    def context_resource() -> str:
        """The whole FileGramOS memory context: procedural, semantic and episodic channels."""
        return service.context()

    @srv.resource("filegram://sessions/recent", name="recent_sessions", title="Recent sessions",
                  mime_type="application/json")
    def recent_resource() -> str:
        """The 20 most recent sessions (as the ``recent_sessions`` tool)."""
        return RecentAnswer.model_validate(service.recent_sessions(20)).model_dump_json(indent=2)

    @srv.resource("filegram://dimension/{aspect}", name="dimension", title="One dimension",
                  mime_type="application/json")
    def dimension_resource(aspect: str) -> str:
        """One dimension (as ``how_does_the_user``): aspect is one of consumption, production, organization,
        iteration, curation, cross_modal."""
        if aspect not in ASPECTS:
            raise ResourceNotFoundError(f"unknown aspect {aspect!r}; one of {', '.join(ASPECTS)}")
        return DimensionAnswer.model_validate(service.dimension(aspect)).model_dump_json(indent=2)

    @srv.resource("filegram://recall/{query}", name="recall", title="Recall", mime_type="application/json")
    def recall_resource(query: str) -> str:
        """The 5 best hits for ``query`` (as the ``recall`` tool)."""
        q = query.strip()
        if not q or len(q) > MAX_QUERY_CHARS:
            raise ResourceNotFoundError(f"query must be 1 to {MAX_QUERY_CHARS} characters")
        return RecallAnswer.model_validate(service.recall(q, 5)).model_dump_json(indent=2)

    @srv.prompt(name="work_like_this_user", title="Work like this user")
    def work_like_this_user(task: Annotated[str, Field(description="the file task to do (optional)")] = "") -> str:
        """Instructions for doing file work the way this user does, from their memory."""
        return service.work_like_this_user(task.strip())

    return srv


def serve_stdio(service: MemoryService) -> None:
    """Serve over stdin/stdout until the client closes them."""
    srv = build_server(service, RequestLog(service.store.path, "stdio"))
    srv.run("stdio")


class _HttpRejections:
    """ASGI wrapper: HTTP requests refused before reaching MCP (no or wrong token, a foreign Host or Origin, an
    unknown path) are logged too (method, path, status; never headers or bodies)."""

    def __init__(self, app, reqlog: RequestLog):
        self.app, self.reqlog = app, reqlog

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        status: dict[str, int] = {}

        async def send_(msg):
            if msg.get("type") == "http.response.start":
                status["code"] = int(msg.get("status", 0))
            await send(msg)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_)
        finally:
            code = status.get("code")
            if code is None or code >= 400:
                self.reqlog.write(method=f"HTTP {scope.get('method', '?')}", name=str(scope.get("path", ""))[:64],
                                  ms=round((time.perf_counter() - t0) * 1000.0, 2), outcome="rejected",
                                  code=code)


def serve_http(service: MemoryService, port: int = 8765, token: str | None = None, on_ready=None) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:<port>/mcp`` (loopback only) behind a bearer token.

    Args:
        port: TCP port on 127.0.0.1 (0: a free one). token: the bearer token (None: a new random one).
        on_ready: called with ``(url, token)`` once the socket is bound, before the first request is served.

    Raises:
        UserError: the port is taken.
    """
    import secrets
    import socket

    import anyio
    import uvicorn

    from filegram_ray.errors import UserError

    token = token or secrets.token_urlsafe(32)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", int(port)))
    except OSError as exc:
        sock.close()
        raise UserError(f"filegram mcp --http: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    sock.listen(64)
    host, bound = sock.getsockname()[:2]
    url = f"http://{host}:{bound}/mcp"
    reqlog = RequestLog(service.store.path, "http")
    srv = build_server(service, reqlog, token=token, issuer_url=f"http://{host}:{bound}")
    app = _HttpRejections(srv.streamable_http_app(host="127.0.0.1"), reqlog)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    if on_ready is not None:
        on_ready(url, token)
    try:
        anyio.run(lambda: server.serve(sockets=[sock]))
    finally:
        sock.close()
