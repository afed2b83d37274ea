"""Raw event data contract: the 22 emitted FileGram event types (reference §3.1–§3.2).

Every event is one *flat* JSON object: the envelope (§3.1) followed by the type-specific fields (§3.2), exactly as
upstream ``events.json`` stores them. Units: ``timestamp`` is epoch **milliseconds** (float); every ``*_ms`` field
is milliseconds; ``content_length`` is characters; paths are absolute strings under the virtual sandbox root
``/sandbox/<profile_id>_<task_id>/`` in engine output (relative in OS-watcher output, reference §12).

File layout (reference §2.1): a JSON array, pretty-printed with a 2-space indent, non-ASCII kept as UTF-8
(``ensure_ascii=False``, needed for the Chinese-language profiles), keys in declaration order (envelope first),
trailing newline absent. :func:`write_events_json` produces that layout and :func:`read_events_json` reads it
back, so ``write_events_json(read_events_json(b)) == b`` for any file in that layout.

The three leakage fields (``message_id``, ``model_provider``, ``model_name``; reference §4) are declared optional
so the same models read filtered ``events.json`` files, from which the filter removed them. Fields that were
absent in the input stay absent on output (``exclude_unset``).

Errors: :func:`parse_event` raises :class:`EventParseError` (a ``ValueError``) naming the event index, the field
and the reason; :func:`read_events_json` adds the file name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json

#: reference §4 "Kept types (12)" — the atomic behavioural actions that survive the post-execution filter.
KEPT_TYPES: tuple[str, ...] = (
    "file_read", "file_write", "file_edit", "file_search", "file_browse", "file_rename", "file_move",
    "dir_create", "file_delete", "file_copy", "context_switch", "cross_file_reference",
)
#: reference §4 "Stripped types (10)" — simulation metadata removed by the filter.
SIMULATION_TYPES: tuple[str, ...] = (
    "tool_call", "llm_response", "compaction_triggered", "session_start", "session_end", "iteration_start",
    "iteration_end", "error_encounter", "error_response", "fs_snapshot",
)
#: reference §3.1/§4 — per-event fields that identify the generator LLM; dropped by the filter.
LEAKAGE_FIELDS: tuple[str, ...] = ("message_id", "model_provider", "model_name")
#: reference §3.2 — enum placeholders that upstream never emits (todo tools are disabled).
NEVER_EMITTED_TYPES: tuple[str, ...] = ("todo_created", "todo_status_change")


class EventParseError(UserError):
    """A raw event failed validation; the message names the event index, field and reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class MediaRef(_Strict):
    """Reference into a trajectory's ``media/`` store (reference §2.2).

    ``hash`` is the 16-hex SHA-256 prefix; ``path`` is relative to ``media/`` (``blobs/<hash>.blob`` or
    ``diffs/<hash>.diff``).
    """

    type: Literal["blob", "diff"]
    hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    path: str


class EventBase(_Strict):
    """Envelope common to every event (reference §3.1)."""

    event_id: str
    event_type: str
    timestamp: float = Field(description="epoch milliseconds")
    session_id: str
    profile_id: str
    message_id: str | None = Field(None, description="leakage field (§4); '' for session events")
    model_provider: str | None = Field(None, description="leakage field (§4)")
    model_name: str | None = Field(None, description="leakage field (§4)")


# --- 12 kept types (reference §3.2 rows 1-12) -------------------------------------------------------------------

class FileRead(EventBase):
    event_type: Literal["file_read"]
    file_path: str
    file_type: str
    directory_depth: int
    view_count: int = Field(ge=1)
    view_range: list[int] | None = Field(description="[first, last] line shown, 1-based inclusive; watcher null")
    content_length: int = Field(ge=0, description="chars of the formatted tool output (engine)")
    revisit_interval_ms: int | None


class FileWrite(EventBase):
    event_type: Literal["file_write"]
    file_path: str
    file_type: str
    directory_depth: int
    operation: Literal["create", "overwrite"]
    content_length: int = Field(ge=0, description="chars of the written content")
    before_hash: str | None
    after_hash: str | None
    media_ref: MediaRef | str | None = Field(None, description="blob of the written content; str = legacy file")


class FileEdit(EventBase):
    event_type: Literal["file_edit"]
    file_path: str
    file_type: str
    edit_tool: Literal["edit", "multiedit", "apply_patch", "external"]
    lines_added: int = Field(ge=0)
    lines_deleted: int = Field(ge=0)
    lines_modified: int = Field(ge=0)
    diff_summary: str
    before_hash: str | None
    after_hash: str | None
    media_ref_old: MediaRef | None = None
    media_ref_new: MediaRef | None = None
    media_ref_diff: MediaRef | None = None
    diff_media: MediaRef | None = Field(None, description="OS-watcher spelling of media_ref_diff (§12)")


class FileSearch(EventBase):
    event_type: Literal["file_search"]
    search_type: Literal["grep", "glob", "codesearch"]
    query: str
    files_matched: int = Field(ge=0)
    files_opened_after: list[str]


class FileBrowse(EventBase):
    event_type: Literal["file_browse"]
    directory_path: str
    files_listed: int = Field(ge=0)
    depth: int = Field(ge=0)


NamingPatternChange = Literal[
    "snake_to_kebab", "kebab_to_snake", "mixed_to_other", "case_change", "other",
    "extension_change", "added_date_prefix", "removed_date_prefix",
]


class FileRename(EventBase):
    event_type: Literal["file_rename"]
    old_path: str
    new_path: str
    naming_pattern_change: NamingPatternChange


class FileMove(EventBase):
    event_type: Literal["file_move"]
    old_path: str
    new_path: str
    destination_directory_depth: int = Field(ge=0)


class DirCreate(EventBase):
    event_type: Literal["dir_create"]
    dir_path: str
    depth: int = Field(ge=0)
    sibling_count: int = Field(ge=0)


class FileDelete(EventBase):
    event_type: Literal["file_delete"]
    file_path: str
    file_age_ms: int | None
    was_temporary: bool
    file_type: str | None = Field(None, description="OS-watcher extra field (§12)")
    directory_depth: int | None = Field(None, description="OS-watcher extra field (§12)")


class FileCopy(EventBase):
    event_type: Literal["file_copy"]
    source_path: str
    dest_path: str
    is_backup: bool


class ContextSwitch(EventBase):
    event_type: Literal["context_switch"]
    from_file: str | None
    to_file: str
    trigger: Literal["file_read"]
    switch_count: int = Field(ge=1)


class CrossFileReference(EventBase):
    event_type: Literal["cross_file_reference"]
    source_file: str
    target_file: str
    reference_type: Literal["read_then_edit", "sequential_access", "search_then_read", "import"]
    interval_ms: int = Field(ge=0)


# --- 10 simulation types (reference §3.2 rows 13-22) ------------------------------------------------------------

class ToolCall(EventBase):
    event_type: Literal["tool_call"]
    tool_name: str
    tool_parameters: dict[str, Any]
    execution_time_ms: int = Field(ge=0)
    success: bool
    error_type: Literal["tool_error"] | None
    error_message: str | None = Field(description="first 200 chars")
    retry_count: int = 0
    sequence_position: int = Field(ge=1)


class LlmResponse(EventBase):
    event_type: Literal["llm_response"]
    response_time_ms: int = Field(ge=0)
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    has_reasoning: bool
    stop_reason: str


class IterationStart(EventBase):
    event_type: Literal["iteration_start"]
    iteration_number: int = Field(ge=1)


class IterationEnd(EventBase):
    event_type: Literal["iteration_end"]
    iteration_number: int = Field(ge=1)
    duration_ms: int = Field(ge=0)
    tools_called: int = Field(ge=0)
    has_tool_error: bool


class CompactionTriggered(EventBase):
    event_type: Literal["compaction_triggered"]
    reason: Literal["context_overflow"]
    messages_before: int
    messages_after: int
    tokens_saved: int


class SessionStart(EventBase):
    event_type: Literal["session_start"]
    target_directory: str


class SessionEnd(EventBase):
    event_type: Literal["session_end"]
    total_iterations: int = Field(ge=0)
    total_tool_calls: int = Field(ge=0)
    duration_ms: int = Field(ge=0)


class FsSnapshot(EventBase):
    event_type: Literal["fs_snapshot"]
    file_count_by_type: dict[str, int]
    max_depth: int = Field(ge=0)
    total_files: int = Field(ge=0)
    media_ref: MediaRef | None = Field(None, description="engine: blob of the sorted relative path list")
    directory_tree: dict[str, Any] | None = Field(None, description="OS-watcher nested tree (§12)")


class ErrorEncounter(EventBase):
    event_type: Literal["error_encounter"]
    error_type: Literal["tool_error"]
    context: str = Field(description="first 200 chars of the tool output")
    severity: Literal["low", "medium", "high"]
    tool_name: str
    file_path: str | None


class ErrorResponse(EventBase):
    event_type: Literal["error_response"]
    strategy: Literal["retry", "rethink", "skip", "ignore", "fix"]
    latency_ms: int = Field(ge=0)
    error_event_id: str
    resolution_successful: bool


Event = Union[  # noqa: UP007 - a runtime Union whose __args__ build EVENT_MODELS
    FileRead, FileWrite, FileEdit, FileSearch, FileBrowse, FileRename, FileMove, DirCreate, FileDelete, FileCopy,
    ContextSwitch, CrossFileReference, ToolCall, LlmResponse, IterationStart, IterationEnd, CompactionTriggered,
    SessionStart, SessionEnd, FsSnapshot, ErrorEncounter, ErrorResponse,
]

#: event_type -> model, for all 22 emitted types (reference §3.2).
EVENT_MODELS: dict[str, type[EventBase]] = {
    m.model_fields["event_type"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in Event.__args__  # type: ignore[attr-defined]
}
assert set(EVENT_MODELS) == set(KEPT_TYPES) | set(SIMULATION_TYPES)


#: longest value of a path field, in characters (Linux ``PATH_MAX``, 4096 bytes)
MAX_PATH_CHARS = 4096
#: longest value of any other string field of an event, in characters (ours: the longest texts an event holds are
#: 200-character excerpts and edit summaries; resolved file contents of upstream-format events stay far below)
MAX_FIELD_CHARS = 1 << 20
#: most strings, numbers and containers inside one event, counted however deep (ours: an OS-watcher
#: ``directory_tree`` of a large workspace holds a few thousand)
MAX_EVENT_ITEMS = 100_000
_PATH_FIELDS = frozenset({"file_path", "directory_path", "old_path", "new_path", "dir_path", "source_path",
                          "dest_path", "from_file", "to_file", "source_file", "target_file", "target_directory"})


def check_event_size(obj: dict[str, Any], where: str = "event") -> None:
    """Refuse an event with an oversized field (case REL-encode-huge-event-amplification: one 50 MB path was copied
    into five derived files). Raises :class:`EventParseError` naming the field, its size and the limit."""
    for key, value in obj.items():
        if isinstance(value, str):
            limit = MAX_PATH_CHARS if key in _PATH_FIELDS else MAX_FIELD_CHARS
            if len(value) > limit:
                raise EventParseError(f"{where}: field '{key}': too large: {len(value):,} characters "
                                      f"(limit {limit:,})")
        elif isinstance(value, (dict, list)):
            stack, items = [value], 0
            while stack:
                cur = stack.pop()
                vals = cur.values() if isinstance(cur, dict) else cur
                for v in vals:
                    items += 1
                    if isinstance(v, (dict, list)):
                        stack.append(v)
                    elif isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                        raise EventParseError(f"{where}: field '{key}': too large: a string of {len(v):,} "
                                              f"characters (limit {MAX_FIELD_CHARS:,})")
                if items > MAX_EVENT_ITEMS:
                    raise EventParseError(f"{where}: field '{key}': too large: more than {MAX_EVENT_ITEMS:,} "
                                          "values")


def parse_event(obj: dict[str, Any], index: int | None = None) -> EventBase:
    """Validate one raw event dict into its model, chosen by ``event_type``.

    Validation is strict (JSON types as written: ``"5"`` is not a number, ``true`` is not a timestamp; NaN and
    infinities are refused) and sizes are bounded (:func:`check_event_size`).

    Raises :class:`EventParseError` naming ``event[index]``, the offending field and the reason (missing
    ``event_type``, unknown type, wrong type/unit, unexpected field, oversized field).
    """
    where = f"event[{index}]" if index is not None else "event"
    if not isinstance(obj, dict):
        raise EventParseError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    etype = obj.get("event_type")
    if etype is None:
        raise EventParseError(f"{where}: missing field 'event_type'")
    model = EVENT_MODELS.get(etype) if isinstance(etype, str) else None
    if model is None:
        hint = " (enum placeholder never emitted upstream)" if etype in NEVER_EMITTED_TYPES else ""
        raise EventParseError(f"{where}: field 'event_type': unknown event type {etype!r:.80}{hint}; "
                              f"expected one of the 22 emitted types")
    check_event_size(obj, f"{where} ({etype})")
    try:
        return model.model_validate(obj, strict=True)
    except ValidationError as exc:
        errs = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors()[:5]
        )
        raise EventParseError(f"{where} ({etype}): {errs}") from None


def event_to_dict(event: EventBase | dict[str, Any]) -> dict[str, Any]:
    """JSON-ready dict of an event; fields absent in the source stay absent; dicts pass through unchanged."""
    if isinstance(event, dict):
        return event
    return event.model_dump(mode="json", exclude_unset=True)


def dumps_events(events: list[dict[str, Any]]) -> bytes:
    """Serialise event dicts in the upstream ``events.json`` layout (see module docstring)."""
    return json.dumps(events, indent=2, ensure_ascii=False).encode("utf-8")


def read_events_json(src: str | Path | bytes) -> list[EventBase]:
    """Read an ``events.json`` / ``events_raw.json`` (path or raw bytes) into validated models.

    Raises :class:`EventParseError` naming the file (or ``<bytes>``), the event index and the field.
    """
    name = "<bytes>"
    if isinstance(src, (str, Path)):
        name = str(src)
        data = Path(src).read_bytes()
    else:
        data = bytes(src)
    try:
        arr = load_json(data, name)  # names the file; duplicate keys and too deep nesting are errors
    except ValueError as exc:
        raise EventParseError(str(exc)) from None
    if not isinstance(arr, list):
        raise EventParseError(f"{name}: expected a JSON array of events, got {type(arr).__name__}")
    out = []
    for i, obj in enumerate(arr):
        try:
            out.append(parse_event(obj, i))
        except EventParseError as exc:
            raise EventParseError(f"{name}: {exc}") from None
    return out


def write_events_json(events: list[EventBase | dict[str, Any]]) -> bytes:
    """Bytes of an upstream-layout ``events.json`` holding ``events`` (models or dicts), in order."""
    return dumps_events([event_to_dict(e) for e in events])
