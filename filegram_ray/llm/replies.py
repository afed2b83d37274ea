"""One reader of chat-completion replies for every path that talks to a model server.

The evaluate stage's ``ray.data.llm`` HTTP processor (:mod:`filegram_ray.llm.processors`), the one-off
:class:`~filegram_ray.llm.backbones.OpenAIBackbone` (start-up probe, ingest-time completions) and the LLM agent's
:class:`~filegram_ray.engine.agents.llm_agent.ChatEndpoint` all send a request, read the body (at most
:data:`MAX_BODY_BYTES`) and hand status and bytes to :func:`read_completion`. It either returns a
:class:`Completion` or raises :class:`ReplyError` that says whether the request is worth sending again
(``retryable``) and keeps the start of the raw body (:data:`RAW_KEEP` characters) for the error row.

What counts as a malformed reply (``ReplyError.kind == "malformed"``, retried): a body that is not UTF-8, not JSON
(an HTML error page on HTTP 200, a truncated body), JSON nested too deeply, not an object; ``choices`` missing,
``null``, empty or not a list; a first choice or ``message`` that is not an object; ``content`` / ``tool_calls`` of
the wrong type; an unterminated ``<think>`` block (the reply was cut inside its reasoning); a reply holding only
reasoning (``reasoning_content`` with empty content); and, where the caller asks for it (``allow_empty`` /
``allow_length`` false: the evaluate stage's answers), an empty reply or one cut at ``max_tokens``
(``finish_reason: length``). A closed ``<think>…</think>`` block is moved out of ``content`` into
:attr:`Completion.reasoning`, so reasoning is never parsed as the answer.

HTTP statuses (:func:`retryable_status`): 408, 429 and every 5xx are retried; any other 4xx is not (the request
itself is wrong: a prompt over the context, an unknown model). An ``error`` object on HTTP 200 (OpenRouter's
``choices: null`` shape) is judged by its ``code`` the same way.

Public API: :class:`Completion`, :class:`ReplyError`, :func:`read_completion`, :func:`retryable_status`,
:func:`backoff_s`, :func:`constraint_fields`, :func:`read_letter`, :data:`CONSTRAIN_MODES`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONSTRAIN_MODES",
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_TOOL_CALLS",
    "RAW_KEEP",
    "REPLY_CHARS_PER_TOKEN",
    "Completion",
    "ReplyError",
    "backoff_s",
    "check_content",
    "constraint_fields",
    "exchange_async",
    "exchange_sync",
    "json_depth",
    "letter_grammar",
    "post_aiohttp",
    "post_async",
    "post_sync",
    "raw_text",
    "read_completion",
    "read_letter",
    "retryable_status",
]

#: Largest reply body read into memory (bytes). A chat completion of a few thousand tokens is a few KB; 64 MiB
#: leaves room for logprobs and many tool calls while keeping one hostile reply from filling a worker's memory.
MAX_BODY_BYTES = 64 << 20
#: Characters of a raw body kept on an error row (the first 2 KB: enough to see what the server sent).
RAW_KEEP = 2000
#: Deepest JSON nesting read from a reply or a tool call's arguments. Python's decoder recurses per level and
#: raises RecursionError near 1000; the 8 tools' arguments are at most 3 levels deep.
MAX_JSON_DEPTH = 64
#: Most tool calls kept from one reply; the rest are dropped with a note (the agent runs calls one by one).
MAX_TOOL_CALLS = 32
#: Characters allowed per reply token for the per-reply size bound (``max_chars = 16 × max_tokens``). An honest
#: reply averages 3–4 characters per token in English or code (ENVIRONMENT_FACTS §4 measurements), so 16 never
#: cuts an honest reply; a server that sends megabytes while claiming a few tokens is cut.
REPLY_CHARS_PER_TOKEN = 16
#: Ways to ask a server for one option letter: ``grammar`` (llama.cpp GBNF), ``json_schema`` (OpenAI-style
#: ``response_format``, an enum of the letters), ``choice`` (vLLM structured outputs ``{choice: [...]}``), ``none``.
CONSTRAIN_MODES = ("grammar", "json_schema", "choice", "none")

_RETRY_STATUS = frozenset({408, 429})
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def retryable_status(status: int) -> bool:
    """True for HTTP statuses worth retrying: 408, 429 and 5xx (a busy or restarting server); other 4xx are not."""
    return status in _RETRY_STATUS or status >= 500


def backoff_s(attempt: int, base_s: float) -> float:
    """Wait before retry ``attempt`` (0-based): ``base_s × 2^attempt``, at most 30 s."""
    return min(30.0, float(base_s) * (2 ** attempt))


def raw_text(body: bytes | str | None, limit: int = RAW_KEEP) -> str:
    """The first ``limit`` characters of a body, undecodable bytes shown as ``\\xNN``."""
    if body is None:
        return ""
    if isinstance(body, str):
        return body[:limit]
    return body[:limit * 4].decode("utf-8", errors="backslashreplace")[:limit]


class ReplyError(Exception):
    """A request that gave no usable reply.

    Attributes:
        kind: ``"transport"`` (connection refused or reset, timeout), ``"status"`` (an HTTP error status or an
            ``error`` object), ``"malformed"`` (a body that is not a usable chat completion, module docstring).
        retryable: worth sending again (transport, 408/429/5xx, malformed); False for other 4xx.
        status: the HTTP status (None for transport failures).
        raw: the start of the raw body (:data:`RAW_KEEP` characters).
        attempts: requests sent before giving up (set by the retry loops).
    """

    def __init__(self, kind: str, message: str, *, retryable: bool, status: int | None = None, raw: str = ""):
        super().__init__(message)
        self.kind, self.message, self.retryable, self.status, self.raw = kind, message, retryable, status, raw
        self.attempts = 1

    def describe(self) -> str:
        """One line: what went wrong and after how many requests."""
        where = f"HTTP {self.status}: " if self.status is not None and self.kind == "status" else ""
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.kind} reply: {where}{self.message}{tries}"


@dataclass
class Completion:
    """A usable chat completion.

    Attributes:
        content: the reply text (``<think>`` blocks removed), cut to ``max_chars`` when one was given.
        reasoning: reasoning text (``reasoning_content`` / ``reasoning`` fields and ``<think>`` blocks).
        tool_calls: the message's ``tool_calls`` (dict entries, at most :data:`MAX_TOOL_CALLS`; arguments strings
            cut to ``max_chars``).
        finish_reason: as sent (``""`` when absent).
        prompt_tokens / completion_tokens: the server's ``usage`` when it is a plausible count (an int from 0 to
            10⁹), else None.
        cut: what the size bound removed: ``{"content_chars": n, "argument_chars": n, "tool_calls": n}`` (empty
            when nothing was cut).
    """

    content: str
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cut: dict[str, int] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        """The assistant message as an OpenAI-style dict (``content`` a string; ``tool_calls`` /
        ``reasoning_content`` only when present)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        return msg


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """Deepest ``[``/``{`` nesting of the first JSON value in ``text`` (strings skipped; counting stops at
    ``limit + 1`` and where that value closes)."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > best:
                best = depth
                if best > limit:
                    return best
        elif ch in "]}":
            depth -= 1
            if depth <= 0:
                return best
    return best


def _malformed(message: str, body: Any) -> ReplyError:
    return ReplyError("malformed", message, retryable=True, status=200, raw=raw_text(body))


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10 ** 9:
        return None
    return value


def _error_object(data: Mapping[str, Any], body: bytes, status: int) -> ReplyError:
    err = data.get("error")
    code: Any = None
    msg: Any = err
    if isinstance(err, Mapping):
        code, msg = err.get("code"), err.get("message") or err
    try:
        code_i = int(code) if code is not None and not isinstance(code, bool) else None
    except (TypeError, ValueError):
        code_i = None
    retry = True if code_i is None else retryable_status(code_i)
    text = f"error object{f' (code {code_i})' if code_i is not None else ''}: {str(msg)[:300]}"
    return ReplyError("status", text, retryable=retry, status=code_i if code_i is not None else status,
                      raw=raw_text(body))


def _split_think(content: str) -> tuple[str, str, bool]:
    """``(answer, reasoning, cut)``: closed ``<think>`` blocks moved out; ``cut`` when one never closes."""
    reasoning = []
    while True:
        m = _THINK_OPEN.search(content)
        if m is None:
            break
        end = _THINK_CLOSE.search(content, m.end())
        if end is None:
            reasoning.append(content[m.end():])
            return content[:m.start()], "\n".join(reasoning).strip(), True
        reasoning.append(content[m.end():end.start()])
        content = content[:m.start()] + content[end.end():]
    close = list(_THINK_CLOSE.finditer(content))
    if close:  # the template opened the block in the prompt: everything before the last </think> is reasoning
        reasoning.append(content[:close[-1].start()])
        content = content[close[-1].end():]
    return content, "\n".join(r.strip() for r in reasoning if r.strip()), False


def read_completion(status: int, body: bytes | None, *, allow_empty: bool = True, allow_length: bool = True,
                    max_chars: int | None = None) -> Completion:
    """Validate one chat-completion reply (module docstring).

    Args:
        status: the HTTP status.
        body: the raw body, at most :data:`MAX_BODY_BYTES` (+1 to show it was longer).
        allow_empty: accept a reply with empty content and no tool call (the agent nudges the model); False for
            answers, which must say something.
        allow_length: accept ``finish_reason: length`` (a reply cut at ``max_tokens``); False for answers (a cut
            answer is unanswered, not a letter).
        max_chars: per-reply size bound: content and each tool call's arguments longer than this are cut and the
            cut recorded in :attr:`Completion.cut` (None = no bound).

    Raises:
        ReplyError: an HTTP error status, an ``error`` object, or a malformed body.
    """
    body = body or b""
    if not 200 <= status < 300:
        try:
            data = json.loads(body) if json_depth(raw_text(body, 20_000)) <= MAX_JSON_DEPTH else None
        except (ValueError, RecursionError):
            data = None
        detail = ""
        if isinstance(data, Mapping):
            err = data.get("error", data.get("detail", data))
            detail = str(err.get("message") if isinstance(err, Mapping) and err.get("message") else err)
        raise ReplyError("status", (detail or raw_text(body, 300) or "no body")[:300],
                         retryable=retryable_status(status), status=status, raw=raw_text(body))
    if len(body) > MAX_BODY_BYTES:
        raise _malformed(f"reply body over {MAX_BODY_BYTES} bytes", body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _malformed(f"reply body is not UTF-8 (byte 0x{body[exc.start]:02x} at offset {exc.start})",
                         body) from None
    if json_depth(text) > MAX_JSON_DEPTH:
        raise _malformed(f"reply body is JSON nested deeper than {MAX_JSON_DEPTH} levels", body)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "an HTML page" if text.lstrip()[:1] == "<" else "not valid JSON"
        raise _malformed(f"reply body is {what} ({exc.msg} at char {exc.pos})", body) from None
    if not isinstance(data, dict):
        raise _malformed(f"reply body is a JSON {type(data).__name__}, not an object", body)
    choices = data.get("choices")
    if data.get("error") and not choices:
        raise _error_object(data, body, status)
    if not isinstance(choices, list):
        raise _malformed(f"'choices' is {type(choices).__name__ if choices is not None else 'null'}, not a list",
                         body)
    if not choices:
        raise _malformed("'choices' is empty", body)
    first = choices[0]
    if not isinstance(first, dict):
        raise _malformed(f"choices[0] is a {type(first).__name__}, not an object", body)
    msg = first.get("message")
    if msg is None and isinstance(first.get("text"), str):  # a completions-API choice
        msg = {"content": first["text"]}
    if not isinstance(msg, dict):
        raise _malformed(f"choices[0].message is {type(msg).__name__}, not an object", body)
    content = msg.get("content")
    if isinstance(content, list):  # content parts
        if not all(isinstance(p, dict) for p in content):
            raise _malformed("choices[0].message.content parts are not objects", body)
        content = "".join(str(p.get("text") or "") for p in content)
    if content is not None and not isinstance(content, str):
        raise _malformed(f"choices[0].message.content is a {type(content).__name__}, not text", body)
    tool_calls = msg.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise _malformed(f"choices[0].message.tool_calls is a {type(tool_calls).__name__}, not a list", body)
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    if not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning, ensure_ascii=False, default=str)
    finish = first.get("finish_reason")
    finish = finish if isinstance(finish, str) else ""
    calls = [c for c in (tool_calls or []) if c is not None]
    answer, reasoning = check_content(content or "", reasoning=reasoning, finish_reason=finish,
                                      has_tool_calls=bool(calls), allow_empty=allow_empty,
                                      allow_length=allow_length, raw=body)
    cut: dict[str, int] = {}
    if max_chars is not None and len(answer) > max_chars:
        cut["content_chars"] = len(answer) - max_chars
        answer = answer[:max_chars]
    if len(calls) > MAX_TOOL_CALLS:
        cut["tool_calls"] = len(calls) - MAX_TOOL_CALLS
        calls = calls[:MAX_TOOL_CALLS]
    if max_chars is not None:
        calls = [_cut_call(c, max_chars, cut) for c in calls]
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(answer, reasoning, calls, finish, _count(usage.get("prompt_tokens")),
                      _count(usage.get("completion_tokens")), cut)


def check_content(content: str, *, reasoning: str = "", finish_reason: str = "", has_tool_calls: bool = False,
                  allow_empty: bool = True, allow_length: bool = True, raw: Any = None) -> tuple[str, str]:
    """The content-level checks of :func:`read_completion` (``<think>`` blocks, reasoning-only, empty, cut at
    ``max_tokens``), also used where a reply comes as text rather than a body (a vLLM engine's
    ``generated_text``). Returns ``(answer, reasoning)``.

    Raises:
        ReplyError: ``kind="malformed"``, ``raw`` = the start of ``raw`` (or of the content).
    """
    raw = content if raw is None else raw
    answer, think, think_cut = _split_think(content or "")
    reasoning = "\n".join(x for x in ((reasoning or "").strip(), think) if x)
    finish = finish_reason or "absent"
    if think_cut:
        raise _malformed(f"reply cut off inside its reasoning (<think> never closed; finish_reason {finish})", raw)
    if not answer.strip() and not has_tool_calls:
        if reasoning:
            raise _malformed(f"reply holds only reasoning, no answer (finish_reason {finish})", raw)
        if not allow_empty:
            raise _malformed(f"empty reply (finish_reason {finish})", raw)
    if finish_reason == "length" and not allow_length:
        raise _malformed("reply cut off at max_tokens (finish_reason length) before a final answer", raw)
    return answer, reasoning


def _cut_call(call: Any, max_chars: int, cut: dict[str, int]) -> Any:
    """A tool call with its arguments string cut to ``max_chars`` (the cut call no longer parses: the agent sends
    the model a malformed-call error for it)."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    args = call["function"].get("arguments")
    if isinstance(args, (dict, list)):
        args = json.dumps(args, ensure_ascii=False)
    if isinstance(args, str) and len(args) > max_chars:
        cut["argument_chars"] = cut.get("argument_chars", 0) + len(args) - max_chars
        return {**call, "function": {**call["function"], "arguments": args[:max_chars]}}
    return call


# ------------------------------------------------------------------------------------------- transports


def _transport(exc: BaseException, url: str) -> ReplyError:
    return ReplyError("transport", f"{type(exc).__name__} talking to {url}: {str(exc)[:300] or 'no detail'}",
                      retryable=True)


def post_sync(client: Any, url: str, payload: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[int, bytes]:
    """POST ``payload`` as JSON with an ``httpx.Client``; ``(status, body)`` with the body read up to
    :data:`MAX_BODY_BYTES` + 1 bytes.

    Raises:
        ReplyError: ``kind="transport"`` for connection failures and timeouts.
    """
    import httpx

    try:
        with client.stream("POST", url, json=dict(payload), headers=dict(headers)) as resp:
            buf = bytearray()
            for chunk in resp.iter_bytes():
                buf += chunk
                if len(buf) > MAX_BODY_BYTES:
                    break
            return resp.status_code, bytes(buf)
    except httpx.HTTPError as exc:
        raise _transport(exc, url) from exc


async def post_async(client: Any, url: str, payload: Mapping[str, Any],
                     headers: Mapping[str, str]) -> tuple[int, bytes]:
    """:func:`post_sync` for an ``httpx.AsyncClient``."""
    import httpx

    try:
        async with client.stream("POST", url, json=dict(payload), headers=dict(headers)) as resp:
            buf = bytearray()
            async for chunk in resp.aiter_bytes():
                buf += chunk
                if len(buf) > MAX_BODY_BYTES:
                    break
            return resp.status_code, bytes(buf)
    except httpx.HTTPError as exc:
        raise _transport(exc, url) from exc


async def post_aiohttp(session: Any, url: str, data: Any, headers: Mapping[str, str] | None) -> tuple[int, bytes]:
    """:func:`post_sync` for an ``aiohttp.ClientSession`` (the session Ray's HTTP stage is given); ``data`` is
    the already-serialised body."""
    import asyncio

    import aiohttp

    try:
        async with session.post(url, data=data, headers=headers) as resp:
            buf = bytearray()
            async for chunk in resp.content.iter_chunked(1 << 16):
                buf += chunk
                if len(buf) > MAX_BODY_BYTES:
                    break
            return resp.status, bytes(buf)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise _transport(exc, url) from exc


def exchange_sync(send: Callable[[], tuple[int, bytes]], *, retries: int, wait_s: Callable[[int], float],
                  **read: Any) -> tuple[Completion, int]:
    """Send until a usable reply comes (``send`` once, then up to ``retries`` more times while the failure is
    retryable, waiting ``wait_s(attempt)`` between); returns ``(completion, attempts)``. ``read``: the keyword
    arguments of :func:`read_completion`.

    Raises:
        ReplyError: the last failure, with ``attempts`` set.
    """
    import time

    attempt = 0
    while True:
        try:
            return read_completion(*send(), **read), attempt + 1
        except ReplyError as exc:
            exc.attempts = attempt + 1
            if not exc.retryable or attempt >= retries:
                raise
        time.sleep(wait_s(attempt))
        attempt += 1


async def exchange_async(send: Callable[[], Awaitable[tuple[int, bytes]]], *, retries: int,
                         wait_s: Callable[[int], float], give_up: Callable[[], bool] | None = None,
                         **read: Any) -> tuple[Completion, int]:
    """:func:`exchange_sync` for a coroutine ``send``; ``give_up()`` true before an attempt stops the loop with
    the last failure (another session declared the server dead)."""
    import asyncio

    attempt = 0
    while True:
        try:
            return read_completion(*(await send()), **read), attempt + 1
        except ReplyError as exc:
            exc.attempts = attempt + 1
            if not exc.retryable or attempt >= retries:
                raise
            last = exc
        await asyncio.sleep(wait_s(attempt))
        attempt += 1
        if give_up is not None and give_up():
            raise last


# ------------------------------------------------------------------------------------- constrained letters


def letter_grammar(letters: Sequence[str]) -> str:
    """GBNF (llama.cpp) that admits exactly one of ``letters``: ``root ::= "A" | "B" | "C"``."""
    return "root ::= " + " | ".join(f'"{x}"' for x in letters)


def is_constrained(payload: Any) -> bool:
    """Whether a chat request constrains its reply to option letters (:func:`constraint_fields`). Such a reply may
    stop at ``max_tokens`` (``finish_reason: length`` — llama.cpp reports it when ``max_tokens`` is 1, the grammar's
    whole answer): it is read strictly as a letter afterwards, so a cut-off one still becomes an error row."""
    return isinstance(payload, Mapping) and any(k in payload for k in ("grammar", "response_format",
                                                                        "structured_outputs"))


def constraint_fields(mode: str, letters: Sequence[str]) -> dict[str, Any]:
    """Request fields that make a server answer with exactly one of ``letters`` (``{}`` for ``none`` or no
    letters).

    ``grammar``: llama.cpp's ``grammar`` (GBNF, :func:`letter_grammar`; llama-cpp-python and the native
    llama-server). ``json_schema``: OpenAI-style ``response_format`` with a JSON schema ``{"answer": enum}``
    (OpenAI, vLLM, the native llama-server; llama-cpp-python 0.3 answers it with HTTP 500, ENVIRONMENT_FACTS §4).
    ``choice``: vLLM structured outputs ``{"structured_outputs": {"choice": letters}}`` (vLLM's OpenAI server and
    ``vllm.SamplingParams``, the field Ray 2.60's vLLM stage turns into ``StructuredOutputsParams``).

    Raises:
        ValueError: an unknown mode.
    """
    letters = [str(x) for x in letters]
    if mode not in CONSTRAIN_MODES:
        raise ValueError(f"unknown constrain mode {mode!r} (one of {', '.join(CONSTRAIN_MODES)})")
    if mode == "none" or not letters:
        return {}
    if mode == "grammar":
        return {"grammar": letter_grammar(letters)}
    if mode == "json_schema":
        schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": letters}},
                  "required": ["answer"], "additionalProperties": False}
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "answer", "strict": True, "schema": schema}}}
    return {"structured_outputs": {"choice": letters}}


def read_letter(content: str, mode: str, letters: Sequence[str]) -> str | None:
    """The option letter of a constrained reply, read strictly (no free-text parsing): the whole reply is one of
    ``letters`` (``grammar``, ``choice``) or the object ``{"answer": <letter>}`` (``json_schema``); else None."""
    text = (content or "").strip()
    if mode == "json_schema":
        try:
            obj = json.loads(text) if json_depth(text) <= MAX_JSON_DEPTH else None
        except (ValueError, RecursionError):
            return None
        text = str(obj.get("answer", "")).strip() if isinstance(obj, dict) else ""
    return text if text in set(map(str, letters)) else None
