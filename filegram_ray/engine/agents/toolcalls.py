"""Tool calls out of a chat reply, robustly: native ``tool_calls`` first, else JSON written in the reply's text.

Small local models rarely return clean OpenAI tool calls (ENVIRONMENT_FACTS §4): Qwen2.5-Coder under llama.cpp's
own template writes ``{"name": …, "arguments": {…}}`` in ``content``, often inside a fenced block or
``<tool_call>…</tool_call>`` tags; llama-cpp-python's ``chatml-function-calling`` format can leave a bare
``functions.<name>:`` prefix. :func:`parse_tool_calls` accepts, in this order:

1. ``message["tool_calls"]`` (``function.arguments`` a JSON string or an object);
2. in ``content``: ``<tool_call>`` blocks, fenced blocks (```` ```json ````, ```` ``` ````), then bare JSON objects
   or arrays of objects, and ``functions.<name>:`` followed by a JSON object — an object counts as a call when it
   names a tool (``name`` / ``tool`` / ``tool_name`` / ``function`` as a string or ``{name, arguments}``) with its
   arguments under ``arguments`` / ``parameters`` / ``args`` / ``input`` (an object or a JSON string); an object
   whose ``name`` is not one of the offered tools and that has no arguments key is content, not a call.

JSON is read leniently: raw newlines inside strings (``strict=False``), trailing commas. A call that cannot be
used — arguments that are not JSON or not an object, a ``name`` that is not a string, text that plainly tries a call
but does not parse, JSON nested deeper than :data:`~filegram_ray.llm.replies.MAX_JSON_DEPTH` levels (Python's
decoder would raise RecursionError near 1000: ``REL2-LLM-agent-nested-json-recursion``) — comes back as a
:class:`ToolCall` with ``error`` set; the agent shows that error to the model instead of running anything. Nothing
here raises on model output.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.llm.replies import MAX_JSON_DEPTH, json_depth

__all__ = ["ToolCall", "parse_tool_calls"]

_DECODER = json.JSONDecoder(strict=False)
_TAG_RX = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE_RX = re.compile(r"```[ \t]*(?:json|JSON|tool_call|javascript|js)?[ \t]*\n?(.*?)```", re.DOTALL)
_FUNCTIONS_RX = re.compile(r"functions\.([A-Za-z_][A-Za-z0-9_]*)\s*:")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
#: the 8 behavioural-mode tools (reference §1.1; ``engine.tools.TOOLS``)
TOOL_NAMES: tuple[str, ...] = ("read", "write", "edit", "multiedit", "grep", "glob", "list", "bash")
#: most JSON candidates tried in one reply (bounds the work on a long, brace-heavy text)
MAX_CANDIDATES = 200
#: marks a JSON value too deeply nested to read (:func:`_json_values`)
_TOO_DEEP = object()


@dataclass
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id: the server's call id, or ``call_<n>`` for calls found in text.
        name: tool name (None when none could be read).
        arguments: keyword arguments (None when unusable).
        error: why the call cannot be run (None = runnable).
        source: ``"native"`` (``tool_calls``) or ``"content"`` (parsed from the text).
        raw: the text the call was read from (arguments string, or the JSON found in the content).
    """

    id: str
    name: str | None
    arguments: dict[str, Any] | None
    error: str | None = None
    source: str = "native"
    raw: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.name is not None and self.arguments is not None

    def as_openai(self) -> dict[str, Any]:
        """The call as an assistant-message ``tool_calls`` entry (arguments re-serialised as JSON text)."""
        args = self.arguments if self.arguments is not None else {}
        return {"id": self.id, "type": "function",
                "function": {"name": self.name or "invalid", "arguments": json.dumps(args, ensure_ascii=False)}}


class _TooDeep(json.JSONDecodeError):
    """JSON nested deeper than MAX_JSON_DEPTH (a decode error like any other: the call is malformed)."""

    def __init__(self, text: str, pos: int = 0):
        super().__init__(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", text, pos)


def _decode(text: str, start: int = 0) -> tuple[Any, int]:
    """``raw_decode`` that refuses JSON nested deeper than MAX_JSON_DEPTH (checked on the text before decoding,
    and a RecursionError of the decoder itself is turned into the same refusal)."""
    if json_depth(text[start:start + 4 * MAX_JSON_DEPTH + 4096]) > MAX_JSON_DEPTH:
        raise _TooDeep(text, start)
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        raise _TooDeep(text, start) from None


def _loads(text: str) -> Any:
    text = text.strip()
    try:
        obj, end = _decode(text)
    except _TooDeep:
        raise
    except json.JSONDecodeError:
        text = _TRAILING_COMMA.sub(r"\1", text)
        obj, end = _decode(text)
    if text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


def _arguments(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if value is None:
        return {}, None
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        try:
            obj = _loads(value)
        except json.JSONDecodeError as exc:
            return None, f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
        if isinstance(obj, dict):
            return obj, None
        return None, f"arguments must be a JSON object, got {type(obj).__name__}"
    return None, f"arguments must be a JSON object, got {type(value).__name__}"


def _call_from_object(obj: dict[str, Any], cid: str, raw: str, tools: frozenset[str]) -> ToolCall | None:
    """A call when ``obj`` names one of ``tools``, or names anything and carries an arguments key; None when it is
    some other JSON object (e.g. ``{"name": "Q3 report", "sections": [...]}`` written as content)."""
    name: Any = None
    args: Any = None
    has_args = False
    for k in _NAME_KEYS:
        if k in obj:
            name = obj[k]
            break
    else:
        return None
    if isinstance(name, dict):  # {"function": {"name": ..., "arguments": ...}} (an OpenAI tool_calls entry)
        has_args = "arguments" in name or "parameters" in name
        args = name.get("arguments", name.get("parameters"))
        name = name.get("name")
    else:
        for k in _ARG_KEYS:
            if k in obj:
                args, has_args = obj[k], True
                break
    known = isinstance(name, str) and name.strip() in tools
    if not known and not has_args:
        return None
    if not isinstance(name, str) or not name.strip():
        return ToolCall(cid, None, None, f"the tool name must be a string, got {name!r}"[:200], "content", raw)
    arguments, err = _arguments(args)
    return ToolCall(cid, name.strip(), arguments, err, "content", raw)


def _json_values(text: str) -> list[tuple[Any, str]]:
    """Every top-level JSON object/array in ``text`` (left to right, non-overlapping) with its source text."""
    out: list[tuple[Any, str]] = []
    i, tries = 0, 0
    while tries < MAX_CANDIDATES:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j != -1]
        if not starts:
            break
        j = min(starts)
        tries += 1
        try:
            obj, end = _decode(text, j)
        except _TooDeep:
            out.append((_TOO_DEEP, text[j:j + 2000]))
            break
        except json.JSONDecodeError:
            try:  # trailing commas: retry on the repaired tail
                fixed = _TRAILING_COMMA.sub(r"\1", text[j:])
                obj, end = _decode(fixed, 0)
                out.append((obj, fixed[:end]))
                break  # offsets of the repaired text no longer map onto the original: stop here
            except _TooDeep:
                out.append((_TOO_DEEP, text[j:j + 2000]))
                break
            except json.JSONDecodeError:
                i = j + 1
                continue
        out.append((obj, text[j:end]))
        i = end
    return out


def _calls_in_text(text: str, next_id, tools: frozenset[str]) -> tuple[list[ToolCall], list[tuple[int, int]]]:
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []

    def from_values(segment: str) -> list[ToolCall]:
        found = []
        for obj, raw in _json_values(segment):
            if obj is _TOO_DEEP:
                found.append(ToolCall(next_id(), None, None, f"the tool call is JSON nested deeper than "
                                      f"{MAX_JSON_DEPTH} levels", "content", raw))
                continue
            items = obj if isinstance(obj, list) else [obj]
            for it in items:
                if isinstance(it, dict):
                    c = _call_from_object(it, next_id(), raw, tools)
                    if c is not None:
                        found.append(c)
        return found

    tagged = list(_TAG_RX.finditer(text))
    for m in tagged:
        got = from_values(m.group(1))
        if not got:
            got = [ToolCall(next_id(), None, None, "no JSON object in <tool_call>", "content", m.group(1)[:500])]
        calls += got
        spans.append(m.span())
    if calls:
        return calls, spans
    for m in _FENCE_RX.finditer(text):
        got = from_values(m.group(1))
        if got:
            calls += got
            spans.append(m.span())
    if calls:
        return calls, spans
    fn = list(_FUNCTIONS_RX.finditer(text))
    if fn:
        for k, m in enumerate(fn):
            end = fn[k + 1].start() if k + 1 < len(fn) else len(text)
            body = text[m.end():end].strip()
            if not body:
                calls.append(ToolCall(next_id(), m.group(1), None, "the call has no arguments (expected a JSON "
                                      "object after the tool name)", "content", m.group(0)))
            else:
                args, err = _arguments(body)
                calls.append(ToolCall(next_id(), m.group(1), args, err, "content", body[:2000]))
            spans.append((m.start(), end))
        return calls, spans
    calls = from_values(text)
    if calls:
        spans.append((0, len(text)))
        return calls, spans
    # Plainly an attempted call that did not parse (e.g. cut by the token limit): tell the model.
    if re.search(r'"(?:name|tool)"\s*:', text) and re.search(r'"(?:arguments|parameters|args)"\s*:', text):
        return [ToolCall(next_id(), None, None, "the tool call is not valid JSON (cut off or malformed)",
                         "content", text[:2000])], [(0, len(text))]
    return [], []


def parse_tool_calls(message: dict[str, Any], id_prefix: str = "call",
                     tools: tuple[str, ...] | frozenset[str] = TOOL_NAMES) -> tuple[list[ToolCall], str]:
    """Tool calls of one assistant message (module docstring) and the message's remaining text.

    Args:
        message: the ``choices[0].message`` object as a dict (``content``, ``tool_calls``).
        id_prefix: prefix of the ids given to calls found in text (``<prefix>_<n>``).
        tools: the tool names offered; a JSON object in the text counts as a call when it names one of them, or
            names anything together with an arguments key (then the session answers "unknown tool").

    Returns:
        ``(calls, text)``: the calls in order (possibly with ``error`` set) and the content without the parts
        that held calls (stripped).
    """
    content = message.get("content") or ""
    if not isinstance(content, str):  # a list of content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    counter = [0]

    def next_id() -> str:
        counter[0] += 1
        return f"{id_prefix}_{counter[0]}"

    native = message.get("tool_calls") or []
    calls: list[ToolCall] = []
    for tc in native:
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") or {}
        name = fn.get("name") if isinstance(fn, dict) else None
        cid = str(tc.get("id") or next_id())
        raw = fn.get("arguments") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name.strip():
            calls.append(ToolCall(cid, None, None, f"the tool name must be a string, got {name!r}"[:200],
                                  "native", str(raw)[:2000]))
            continue
        args, err = _arguments(raw)
        calls.append(ToolCall(cid, name.strip(), args, err, "native", str(raw)[:2000] if raw is not None else ""))
    if calls:
        return calls, content.strip()
    calls, spans = _calls_in_text(content, next_id, frozenset(tools))
    rest = content
    for a, b in sorted(spans, reverse=True):
        rest = rest[:a] + rest[b:]
    return calls, rest.strip()
