"""The LLM agent: a persona-conditioned think → act → observe loop against any OpenAI-compatible chat server.

One trajectory (reference §1.1)::

    system: the profile as a persona (prompts.system_prompt)      user: the task (+ perturbation block)
    loop  : reply = chat(messages, tools=the 8 tool schemas)       # one iteration
            calls = parse_tool_calls(reply)                        # native tool_calls or JSON in the text
            each call → EngineSession.call(...) → a tool message with its output (or its error)
    stop  : a reply without a tool call once something was written (the finish signal), or a limit:
            max_iterations, max_total_tokens (prompt + completion), max_wall_s

Everything the agent does goes through :class:`~filegram_ray.engine.session.EngineSession` — the same sandbox,
tools, collector and filter as the persona simulator — so ``events_raw.json`` / ``events.json`` have exactly the
simulator's format. The raw events carry ``model_provider`` / ``model_name`` / ``message_id`` as upstream does (a
new ``message_id`` for each user turn the loop injects); the filter strips them (reference §4). ``llm_response``
records the server's token counts and the measured latency (the simulated clock advances by it).

Upstream behaviours kept (reference §1.1): only the 8 behavioural tools; a reply that asks for confirmation gets
a "yes, proceed" user turn, a reply that stops before any file was written gets a "continue, just do it" turn
(at most ``max_nudges`` in all); context compaction prunes old tool outputs when the conversation nears the
context budget (upstream: 128 K budget, prune only if ≥ 20 K tokens are saved, the last 40 K tokens of tool output
protected; ours scales those to ``context_tokens``: prune at 85 %, keep the newest 30 %, only if ≥ 5 % is saved)
and emits ``compaction_triggered``.

Every reply is bounded (:mod:`filegram_ray.llm.replies`): content and each call's arguments are cut at
``16 × max_tokens`` characters and at most 32 tool calls of one reply run; the turn records ``reply_cut`` and the
model sees the cut (a note in the content, a note after the last call's output), so neither the conversation
re-sent each turn nor ``transcript.json`` can grow by more than that per iteration. Token counts never fall below
one per 16 characters received, whatever the server's ``usage`` says. A tool call whose JSON cannot be read
(nested too deeply, cut, not an object) comes back to the model as a tool error and the trajectory goes on.

A trajectory ends ``completed`` (``session_end`` emitted) unless the server rejected a request it could not
recover from or sent only malformed replies to it after the retries (``stop_reason = "llm_error"``, the earlier
turns kept; reference §1.2: an LLM error skips ``session_end``). A server that does not answer at all raises
:class:`LLMServerUnavailable` naming its URL.

Public API: :class:`LLMAgentConfig` (the ``generate.llm`` config section), :class:`ChatEndpoint`,
:func:`run_llm_trajectory`, :func:`probe_endpoint`, :class:`AgentResult`, :data:`AGENT_VERSION`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from filegram_ray.engine.agents.prompts import (
    asks_confirmation,
    continue_prompt,
    system_prompt,
    task_prompt,
    text,
)
from filegram_ray.engine.agents.toolcalls import ToolCall, parse_tool_calls
from filegram_ray.llm.replies import MAX_TOOL_CALLS, REPLY_CHARS_PER_TOKEN

log = logging.getLogger(__name__)

__all__ = ["AGENT_VERSION", "AgentResult", "ChatEndpoint", "ChatReply", "LLMAgentConfig", "LLMMalformedReply",
           "LLMRequestRejected", "LLMServerUnavailable", "ServeConfig", "probe_endpoint", "run_llm_trajectory"]

#: Bumped when prompts or loop rules change (part of a finished unit's fingerprint: a rerun regenerates).
AGENT_VERSION = "llm-agent-1"
#: Marker put in place of a pruned tool output (compaction).
PRUNED = "[older tool output removed to save context]"
#: Characters per token used to estimate the size of text not yet seen by the server (a rough English/code
#: average; the server's own prompt_tokens correct the estimate after every reply).
CHARS_PER_TOKEN = 3.5


class ServeConfig(BaseModel):
    """``generate.llm.serve``: a server the stage starts for itself and stops at the end.

    ``kind: vllm`` runs ``python -m vllm.entrypoints.openai.api_server`` (auto tool choice, ``tool_parser``) as a
    Ray actor on a GPU worker (``num_gpus``), one per replica; ``kind: llama_cpp`` runs llama-cpp-python's server
    (``filegram_ray.llm.server.LlamaCppServer``) on CPU. ``model``: a local path / mounted volume for vLLM (nothing
    is downloaded), a packaged model name (``qwen2.5-coder-0.5b``) or GGUF path for llama.cpp.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["vllm", "llama_cpp"] = "vllm"
    model: str = Field(min_length=1)
    served_model_name: str = "agent"
    replicas: int = Field(1, ge=1)
    num_gpus: float = Field(1.0, ge=0, description="per replica; vllm: ≥ 2 sets --tensor-parallel-size "
                                                      "(unless args does); a fraction packs replicas on one GPU "
                                                      "(then lower --gpu-memory-utilization in args)")
    num_cpus: float = Field(1.0, ge=0, description="per replica")
    port: int | None = Field(None, description="None = a free port")
    tool_parser: str = Field("hermes", description="vLLM --tool-call-parser (hermes fits Qwen2.5)")
    chat_format: str | None = Field(None, description="llama_cpp --chat_format; None = the GGUF's own template")
    n_ctx: int | None = Field(None, description="llama_cpp context window (None = the model's default)")
    args: list[str] = Field(default_factory=list, description="extra server arguments, e.g. --max-model-len 32768")
    runtime_env: dict[str, Any] | None = Field(None, description='e.g. {"pip": ["vllm>=0.8"]} for the replicas')
    startup_timeout_s: float = Field(1200.0, gt=0)


class LLMAgentConfig(BaseModel):
    """The ``generate.llm`` section (used when ``generate.agent: llm``).

    Limits default to our own choices for small-to-mid models; upstream's are temperature 1.0, 8192 output tokens,
    150 iterations, a 128 K context (reference §1.1).
    """

    model_config = ConfigDict(extra="forbid")
    base_url: str | list[str] | None = Field(
        None, description="OpenAI-compatible endpoint(s) ending in /v1; a list spreads sessions over replicas; "
                          "None = start generate.llm.serve")
    model: str | None = Field(None, description="served model name; None = the first one the server lists")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the key ('EMPTY' if unset)")
    provider: str | None = Field(None, description="model_provider recorded in raw events; None = derived")
    serve: ServeConfig | None = None
    temperature: float = Field(0.7, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int = Field(2048, ge=16, description="reply budget per iteration")
    max_iterations: int = Field(60, ge=1)
    max_total_tokens: int = Field(600_000, ge=1, description="prompt + completion tokens per trajectory")
    max_wall_s: float = Field(1800.0, gt=0, description="real seconds per trajectory")
    context_tokens: int = Field(32_768, ge=512, description="context budget used for compaction")
    max_tool_output_chars: int = Field(12_000, ge=200, description="tool output shown to the model, per call")
    max_nudges: int = Field(3, ge=0, description="injected 'continue' / 'proceed' turns per trajectory")
    tool_choice: Literal["auto", "required"] = "auto"
    tool_results_as: Literal["tool", "user"] = Field(
        "tool", description="'user' for chat templates that drop tool messages (llama-cpp-python "
                            "chatml-function-calling)")
    sessions_per_actor: int = Field(16, ge=1, description="trajectories in flight per generate actor (asyncio)")
    shard_size: int | None = Field(None, ge=1, description="trajectories per actor task; None = 4 × sessions")
    request_timeout_s: float = Field(600.0, gt=0)
    retries: int = Field(4, ge=0, description="extra attempts on connection errors, timeouts, 429 and 5xx")
    backoff_s: float = Field(2.0, ge=0, description="first back-off; doubles per attempt, ±25 % jitter, ≤ 60 s")
    probe_timeout_s: float = Field(30.0, gt=0, description="how long the stage waits for the server at start")
    send_seed: bool = Field(True, description="send a per-trajectory sampling seed (vLLM, llama.cpp honour it)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="extra request fields (server-specific)")

    @field_validator("base_url")
    @classmethod
    def _urls(cls, v: Any) -> Any:
        urls = [v] if isinstance(v, str) else (v or [])
        for u in urls:
            if not str(u).startswith(("http://", "https://")):
                raise ValueError(f"base_url {u!r} must start with http:// or https:// (e.g. http://host:8000/v1)")
        return v

    def urls(self) -> list[str]:
        """The configured endpoint URLs (without a trailing slash)."""
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url or [])
        return [u.rstrip("/") for u in urls]

    def behaviour_key(self) -> dict[str, Any]:
        """The settings that shape a trajectory (a finished unit is reused only when they match)."""
        return self.model_dump(include={"model", "temperature", "top_p", "max_tokens", "max_iterations",
                                        "max_total_tokens", "context_tokens", "max_tool_output_chars",
                                        "max_nudges", "tool_choice", "tool_results_as", "extra_body"})


class LLMServerUnavailable(ConnectionError):
    """The chat server did not answer (connection refused, timeouts, 5xx) after all retries; names its URL."""


class LLMRequestRejected(RuntimeError):
    """The server answered a request with a client error (4xx other than 408/429), e.g. a prompt over its context."""

    def __init__(self, url: str, status: int, message: str):
        super().__init__(f"LLM server at {url} rejected the request (HTTP {status}): {message}")
        self.url, self.status, self.message = url, status, message


class LLMMalformedReply(LLMRequestRejected):
    """Every attempt of a request got a reply that is not a usable chat completion (``error.raw``: the start of
    the last body). The trajectory stops with ``llm_error`` and keeps its earlier turns."""

    def __init__(self, url: str, error: Any):
        RuntimeError.__init__(self, f"LLM server at {url} sent no usable reply after {error.attempts} attempts: "
                                    f"{error.message}; raw reply: {error.raw[:300]!r}")
        self.url, self.status, self.message, self.raw = url, error.status or 200, error.message, error.raw


def probe_endpoint(base_url: str, api_key: str = "EMPTY", timeout_s: float = 30.0) -> list[str]:
    """``GET <base_url>/models`` until it answers or ``timeout_s`` passes; returns the served model ids.

    Raises:
        LLMServerUnavailable: no answer within ``timeout_s`` (message names the URL and the last error).
    """
    deadline = time.monotonic() + timeout_s
    last: Exception | str = "no attempt"
    req = urllib.request.Request(f"{base_url.rstrip('/')}/models", headers={"Authorization": f"Bearer {api_key}"})
    while True:
        try:
            with urllib.request.urlopen(req, timeout=min(10.0, max(1.0, timeout_s))) as r:
                data = json.loads(r.read())
            ids = [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
            if ids:
                return ids
            last = "the server lists no model"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise LLMServerUnavailable(f"LLM server at {base_url} is not reachable after {timeout_s:.0f}s: {last}")
        time.sleep(1.0)


@dataclass
class ChatReply:
    """One chat completion: ``message`` (dict with ``content`` / ``tool_calls``), ``finish_reason``, token counts
    from the server's ``usage`` (estimated when absent or implausible; never fewer than one per 16 characters
    received), ``latency_s`` (wall seconds incl. retries), ``url``, ``cut`` (what the per-reply size bound removed,
    :attr:`filegram_ray.llm.replies.Completion.cut`)."""

    message: dict[str, Any]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    url: str
    attempts: int = 1
    cut: dict[str, int] = field(default_factory=dict)


class ChatEndpoint:
    """An async chat client for one OpenAI-compatible endpoint (``httpx``), with retries and back-off; every reply
    is checked by :func:`~filegram_ray.llm.replies.read_completion` (the evaluate stage's reader).

    Retried: connection errors, timeouts, HTTP 408/429/5xx (also as an ``error`` object on HTTP 200) and malformed
    replies — a body that is not JSON (an HTML page, a truncated body), not UTF-8, nested too deeply, without
    usable ``choices``, cut inside its reasoning (``retries`` extra attempts, back-off ``backoff_s`` doubling,
    ±25 % seeded jitter, at most 60 s). Not retried: other 4xx (:class:`LLMRequestRejected`). Each reply is bounded
    to ``max_chars`` characters of content and of each call's arguments (the cut is recorded in
    :attr:`ChatReply.cut`). Create and use it inside one event loop; :meth:`aclose` when done.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str = "EMPTY", timeout_s: float = 600.0,
                 retries: int = 4, backoff_s: float = 2.0, jitter_seed: int = 0):
        import httpx

        self.base_url, self.model = base_url.rstrip("/"), model
        self.retries, self.backoff_s = int(retries), float(backoff_s)
        self._rng = random.Random(jitter_seed)
        self._headers = {"Authorization": f"Bearer {api_key or 'EMPTY'}"}
        self._client = httpx.AsyncClient(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _wait(self, attempt: int) -> float:
        delay = min(60.0, self.backoff_s * (2 ** attempt)) * (0.75 + 0.5 * self._rng.random())
        log.info("LLM request to %s failed; retry %d/%d in %.1fs", self.base_url, attempt + 1, self.retries, delay)
        return delay

    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, max_tokens: int,
                   temperature: float, top_p: float | None = None, seed: int | None = None,
                   tool_choice: str = "auto", extra_body: dict[str, Any] | None = None,
                   down: asyncio.Event | None = None, max_chars: int | None = None) -> ChatReply:
        """One completion. ``down`` (shared by the sessions of one actor): set when this endpoint is declared
        dead, so the other sessions stop at once instead of retrying each on their own. ``max_chars``: the
        per-reply size bound (default :data:`~filegram_ray.llm.replies.REPLY_CHARS_PER_TOKEN` × ``max_tokens``).

        Raises:
            LLMServerUnavailable: the server did not answer after all retries (or ``down`` was set).
            LLMRequestRejected: a 4xx answer other than 408/429.
            LLMMalformedReply: every attempt got a malformed reply (the message keeps the start of the last one).
        """
        from filegram_ray.llm.replies import REPLY_CHARS_PER_TOKEN, ReplyError, exchange_async, post_async

        payload: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                                   "temperature": temperature}
        if tools:
            payload["tools"] = tools
            payload["tool_choice"] = tool_choice
        if top_p is not None:
            payload["top_p"] = top_p
        if seed is not None:
            payload["seed"] = seed
        payload.update(extra_body or {})
        if down is not None and down.is_set():
            raise LLMServerUnavailable(f"LLM server at {self.base_url} is down (another session gave up)")
        t0 = time.perf_counter()
        url = self.base_url + "/chat/completions"
        try:
            comp, attempts = await exchange_async(
                lambda: post_async(self._client, url, payload, self._headers), retries=self.retries,
                wait_s=self._wait, give_up=(lambda: down.is_set()) if down is not None else None,
                max_chars=max_chars or REPLY_CHARS_PER_TOKEN * max_tokens)
        except ReplyError as exc:
            if exc.kind == "malformed":
                raise LLMMalformedReply(self.base_url, exc) from exc
            if exc.kind == "status" and not exc.retryable:
                raise LLMRequestRejected(self.base_url, exc.status or 0, exc.message) from exc
            if down is not None:
                down.set()
            raise LLMServerUnavailable(f"LLM server at {self.base_url} did not answer after {exc.attempts} "
                                       f"attempts: {exc.describe()}") from exc
        msg = comp.message()
        tin, tout = comp.prompt_tokens, comp.completion_tokens
        if tin is None:
            tin = int(sum(len(str(m.get("content") or "")) for m in messages) / CHARS_PER_TOKEN)
        if tout is None:
            tout = int((len(comp.content) + len(json.dumps(comp.tool_calls))) / CHARS_PER_TOKEN)
        # a server's usage may not undercount what it sent: at least one token per REPLY_CHARS_PER_TOKEN characters
        tout = max(int(tout), (len(comp.content) + len(json.dumps(comp.tool_calls))) // REPLY_CHARS_PER_TOKEN)
        return ChatReply(msg, comp.finish_reason or "stop", int(tin), tout, time.perf_counter() - t0,
                         self.base_url, attempts, comp.cut)


@dataclass
class AgentResult:
    """What :func:`run_llm_trajectory` returns: the finished session (write it, then ``close()``), the transcript
    (JSON-able dict) and counts."""

    session: Any
    transcript: dict[str, Any]
    stop_reason: str
    iterations: int
    tool_calls: int
    malformed_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)


def bundle_annotations(bundle_dir: Path | None) -> dict[str, dict[str, str]]:
    """Media annotations of a task bundle (``bundle.json`` ``files[].annotation``), as the simulator reads them."""
    if bundle_dir is None or not (Path(bundle_dir) / "bundle.json").exists():
        return {}
    from filegram_ray.limits import load_json

    path = Path(bundle_dir) / "bundle.json"
    meta = load_json(path.read_bytes(), str(path))
    return {f["path"]: dict(f["annotation"]) for f in meta.get("files", []) if f.get("annotation")}


_STOP = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn", "length": "max_tokens",
         "content_filter": "content_filter"}
_RESERVED_ARGS = frozenset({"tool", "self"})


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        n += len(str(m.get("content") or ""))
        for tc in m.get("tool_calls") or []:
            n += len(json.dumps(tc, ensure_ascii=False))
    return int(n / CHARS_PER_TOKEN) + 4 * len(messages)


def _compact(messages: list[dict[str, Any]], cfg: LLMAgentConfig, known_tokens: int) -> dict[str, int] | None:
    """Prune old tool outputs in place when the conversation nears the context budget (module docstring)."""
    if known_tokens + cfg.max_tokens < 0.85 * cfg.context_tokens:
        return None
    protect = 0.30 * cfg.context_tokens
    outputs = [i for i, m in enumerate(messages) if m.get("_tool_output") and m.get("content") != PRUNED]
    kept, prunable = 0.0, []
    for i in reversed(outputs):
        size = len(str(messages[i]["content"])) / CHARS_PER_TOKEN
        if kept + size <= protect:
            kept += size
        else:
            prunable.append(i)
    saved = int(sum(len(str(messages[i]["content"])) / CHARS_PER_TOKEN for i in prunable))
    if not prunable or saved < 0.05 * cfg.context_tokens:
        return None
    full_before = sum(1 for m in messages if m.get("content") != PRUNED)
    for i in prunable:
        messages[i]["content"] = PRUNED
    return {"messages_before": full_before, "messages_after": full_before - len(prunable), "tokens_saved": saved}


def _wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as sent: our bookkeeping keys (``_…``) dropped."""
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]


def _cap(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + f"\n[… {len(s) - n} more characters not shown]"


async def run_llm_trajectory(profile: Any, task: Any, bundle_dir: Path | str | None, work_root: Path | str, *,
                             seed: int, endpoint: ChatEndpoint, cfg: LLMAgentConfig, perturbation: Any = None,
                             provider: str = "openai-compatible", upstream_quirks: bool = False,
                             down: asyncio.Event | None = None) -> AgentResult:
    """Run the LLM agent on one (profile, task) and return the finished session.

    Args:
        profile / task: a ``Profile`` and a ``Task``.
        bundle_dir: the task's bundle folder (``files/`` + ``bundle.json``), or None for an empty workspace.
        work_root: real folder under which this trajectory's sandbox is created (one per trajectory).
        seed: master seed: the session seed, the start time and the sampling seed derive from it (as the simulator's).
        endpoint: the chat endpoint. cfg: :class:`LLMAgentConfig`. perturbation: None or ``{"dimension", "from",
        "to"}`` (reference §5.7). provider: ``model_provider`` recorded in raw events.
        down: shared "server is dead" flag (see :meth:`ChatEndpoint.chat`).

    Raises:
        LLMServerUnavailable: the server stopped answering (the partial session is closed first).
        ValueError: a malformed perturbation.
    """
    from filegram_ray.engine import EngineSession
    from filegram_ray.engine.simulator.persona import derive_seed
    from filegram_ray.engine.simulator.simulate import session_start_ms
    from filegram_ray.engine.tools import tool_schemas

    lang = "zh" if str(profile.language).lower().startswith(("chinese", "zh")) else "en"
    sys_text = system_prompt(profile, perturbation)
    user_text = task_prompt(task, profile, perturbation)
    files_dir = None
    if bundle_dir is not None and (Path(bundle_dir) / "files").is_dir():
        files_dir = Path(bundle_dir) / "files"
    sess_seed = derive_seed(seed, profile.profile_id, task.task_id, "engine") % (2 ** 31)
    sess = EngineSession(files_dir, Path(work_root), profile.profile_id, task.task_id, seed=sess_seed,
                         start_ms=session_start_ms(seed, profile.profile_id, task.task_id),
                         annotations=bundle_annotations(Path(bundle_dir) if bundle_dir else None),
                         limits=session_limits(cfg), upstream_quirks=upstream_quirks, model_provider=provider,
                         model_name=endpoint.model)
    tools = tool_schemas()
    tool_names = tuple(t["function"]["name"] for t in tools)
    messages: list[dict[str, Any]] = [{"role": "system", "content": sys_text}, {"role": "user", "content": user_text}]
    turns: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    tin_total = tout_total = n_calls = n_bad = nudges = 0
    known_tokens = 0  # the server's prompt_tokens of the last call + what was appended since (estimated)
    stop_reason = "iteration_limit"
    llm_error: str | None = None
    sample_seed = derive_seed(seed, profile.profile_id, task.task_id, "llm") % (2 ** 31) if cfg.send_seed else None
    try:
        sess.start()
        for it in range(1, cfg.max_iterations + 1):
            if time.perf_counter() - t0 >= cfg.max_wall_s:
                stop_reason = "wall_limit"
                break
            if tin_total + tout_total >= cfg.max_total_tokens:
                stop_reason = "token_limit"
                break
            compaction = _compact(messages, cfg, max(known_tokens, _estimate_tokens(messages)))
            try:
                reply = await endpoint.chat(
                    _wire(messages), tools=tools, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                    top_p=cfg.top_p, seed=None if sample_seed is None else (sample_seed + it) % (2 ** 31),
                    tool_choice=cfg.tool_choice, extra_body=cfg.extra_body, down=down)
            except LLMRequestRejected as exc:
                llm_error = str(exc)
                stop_reason = "llm_error"
                turns.append({"iteration": it, "error": llm_error})
                break
            tin_total += reply.prompt_tokens
            tout_total += reply.completion_tokens
            cap = REPLY_CHARS_PER_TOKEN * cfg.max_tokens
            if reply.cut.get("content_chars"):  # the size bound cut the reply: the model and the transcript see it
                reply.message["content"] = (f"{reply.message.get('content') or ''}\n[… {reply.cut['content_chars']} "
                                            f"more characters cut: a reply is bounded to {cap} characters]")
            calls, rest = parse_tool_calls(reply.message, id_prefix=f"call_{it}", tools=tool_names)
            dropped = max(0, len(calls) - MAX_TOOL_CALLS) + reply.cut.get("tool_calls", 0)
            calls = calls[:MAX_TOOL_CALLS]
            reasoning = bool(reply.message.get("reasoning_content") or reply.message.get("reasoning"))
            turn: dict[str, Any] = {
                "iteration": it, "latency_s": round(reply.latency_s, 3), "attempts": reply.attempts,
                "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                "finish_reason": reply.finish_reason, "content": reply.message.get("content") or "",
                "native_tool_calls": reply.message.get("tool_calls") or [], "calls": []}
            if compaction:
                turn["compaction"] = compaction
            if reply.cut or dropped:
                turn["reply_cut"] = {**reply.cut, **({"tool_calls": dropped} if dropped else {}),
                                     "bound_chars": cap, "max_tool_calls": MAX_TOOL_CALLS}
            appended: list[dict[str, Any]] = []
            with sess.iteration(reply.prompt_tokens, reply.completion_tokens,
                                response_time_ms=reply.latency_s * 1000.0,
                                stop_reason=_STOP.get(reply.finish_reason, reply.finish_reason) if not calls
                                else "tool_use", has_reasoning=reasoning, compaction=compaction):
                if calls:
                    appended.append({"role": "assistant", "content": rest if calls[0].source == "content" else
                                     (reply.message.get("content") or ""),
                                     "tool_calls": [c.as_openai() for c in calls]})
                    results = []
                    for c in calls:
                        out, ok = _run_call(sess, c, lang)
                        n_calls += int(c.ok)
                        n_bad += int(not c.ok)
                        turn["calls"].append({"id": c.id, "name": c.name, "arguments": c.arguments,
                                              "source": c.source, "error": c.error, "ok": ok,
                                              "output": _cap(out, 2000)})
                        results.append((c, _cap(out, cfg.max_tool_output_chars)))
                    if dropped:
                        c, out = results[-1]
                        results[-1] = (c, f"{out}\n[{dropped} more tool calls in this reply were not run: at most "
                                          f"{MAX_TOOL_CALLS} per reply]")
                    if cfg.tool_results_as == "tool":
                        appended += [{"role": "tool", "tool_call_id": c.id, "content": out, "_tool_output": True}
                                     for c, out in results]
                    else:
                        body = "\n\n".join(f"{text(lang, 'tool_result', name=c.name or '?')}\n{out}"
                                           for c, out in results)
                        appended.append({"role": "user", "content": body, "_tool_output": True})
            turns.append(turn)
            if not calls:
                appended.append({"role": "assistant", "content": reply.message.get("content") or ""})
                kind = None
                if nudges < cfg.max_nudges:
                    if asks_confirmation(rest):
                        kind = "proceed"
                    elif not sess.output_files():
                        kind = "continue"
                if kind is None:
                    messages += appended
                    stop_reason = "finished" if sess.output_files() or nudges < cfg.max_nudges else "nudge_limit"
                    break
                nudges += 1
                appended.append({"role": "user", "content": continue_prompt(lang, kind)})
                turn["injected"] = kind
                sess.collector.message_id = sess.collector.new_id()  # a new user turn (reference §3.1 message_id)
            messages += appended
            known_tokens = reply.prompt_tokens + reply.completion_tokens + _estimate_tokens(appended[1:])
        sess.finish(completed=stop_reason != "llm_error")
    except BaseException:
        sess.close()
        raise
    wall = time.perf_counter() - t0
    transcript = {
        "trajectory_id": f"{profile.profile_id}/{task.task_id}", "agent_version": AGENT_VERSION,
        "model": endpoint.model, "provider": provider, "base_url": endpoint.base_url, "language": lang,
        "stop_reason": stop_reason, "error": llm_error, "iterations": len(turns), "tool_calls": n_calls,
        "malformed_calls": n_bad, "nudges": nudges, "prompt_tokens": tin_total, "completion_tokens": tout_total,
        "wall_s": round(wall, 3), "settings": cfg.behaviour_key(), "tools": tools,
        "messages": _wire(messages), "turns": turns,
    }
    return AgentResult(sess, transcript, stop_reason, len(turns), n_calls, n_bad, tin_total, tout_total, wall)


def session_limits(cfg: LLMAgentConfig, base: Any = None) -> Any:
    """The sandbox :class:`~filegram_ray.engine.sandbox.Limits` of an LLM trajectory: the session's real-time
    budget (``max_wall_s``, 600 s by default, sized for the simulator) must cover the model's own time — the agent's
    ``max_wall_s`` plus one more request (``request_timeout_s``) and a minute, so the last iteration's tool calls
    still run; the other bounds are unchanged."""
    import dataclasses

    from filegram_ray.engine import Limits

    base = base or Limits()
    wall = max(base.max_wall_s, cfg.max_wall_s + cfg.request_timeout_s + 60.0)
    return dataclasses.replace(base, max_wall_s=wall)


def _run_call(sess: Any, call: ToolCall, lang: str) -> tuple[str, bool]:
    """Run one parsed call through the session; an unusable call becomes the error text the model sees."""
    if not call.ok:
        return text(lang, "bad_call", error=call.error or "unknown problem"), False
    args = dict(call.arguments or {})
    bad = sorted(k for k in args if not isinstance(k, str) or k in _RESERVED_ARGS)
    if bad:
        return text(lang, "bad_call", error=f"{call.name}: unexpected argument(s) {bad}"), False
    res = sess.call(call.name, **args)
    return (res.output if res.ok else f"Error: {res.error or res.output}"), res.ok


def api_key(cfg: LLMAgentConfig) -> str:
    """The API key from ``cfg.api_key_env`` (``"EMPTY"`` when unset: local servers need none)."""
    return os.environ.get(cfg.api_key_env or "", "") or "EMPTY"
