"""Stage 1 of FileGramOS: one :class:`Engram` per trajectory (FILEGRAM_REFERENCE §7.1–§7.3, §7.7, §7.8, §7.10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.limits import InputLimitError, load_json
from filegram_ray.memory.episodes import LLMFn, segment_episodes
from filegram_ray.memory.features import extract_auxiliary, extract_procedural, fingerprint, importance_score
from filegram_ray.memory.normalize import behavioral, normalize_events
from filegram_ray.memory.semantic import llm_descriptor, rule_descriptor, semantic_unit
from filegram_ray.memory.sequence import sequence_features
from filegram_ray.schema.events import MAX_FIELD_CHARS, EventParseError, parse_event

__all__ = ["ENGRAM_VERSION", "Engram", "check_events", "encode_engram", "load_events", "parse_events"]

#: Bumped whenever the Engram layout or a feature rule changes (kept in every Engram).
ENGRAM_VERSION = 1


class Engram(BaseModel):
    """The encoded memory of one trajectory (§7.7 "Engram record").

    Attributes:
        trajectory_id: caller-given id (the encode stage uses ``<profile_id>/<task_id>``; methods may use the task
            id alone). Never printed by the retriever.
        task_id: task id (printed by the retriever).
        procedural: attribute → feature → value (§7.2, 9 attributes).
        auxiliary: verbosity and work_rhythm (§7.2).
        semantic: created_files, edit_chains, cross_file_refs, created_filenames, dir_structure_diff,
            llm_encoding (descriptor dict or None) (§7.7).
        episodes: episode records (§7.10).
        fingerprint: the 17 floats of §7.3, in order.
        sequence_features: §7.8.
        event_count / behavioral_event_count: normalised events / the 12 behavioural types among them.
        importance_score: §7.7.
        upstream_quirks: whether the upstream quirks were reproduced while encoding.
    """

    model_config = ConfigDict(extra="forbid")
    version: int = ENGRAM_VERSION
    trajectory_id: str
    task_id: str
    procedural: dict[str, dict[str, Any]]
    auxiliary: dict[str, dict[str, Any]]
    semantic: dict[str, Any]
    episodes: list[dict[str, Any]] = Field(default_factory=list)
    fingerprint: list[float]
    sequence_features: dict[str, Any]
    event_count: int
    behavioral_event_count: int
    importance_score: float
    upstream_quirks: bool = False

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Engram:
        return cls.model_validate_json(text)


def encode_engram(events: list[dict[str, Any]], trajectory_id: str, task_id: str, media_dir: Path | None = None,
                  *, upstream_quirks: bool = False, llm_fn: LLMFn | None = None, source: str | None = None
                  ) -> Engram:
    """Encode one trajectory's filtered events into an :class:`Engram`.

    Args:
        events: the JSON array of events.json (flat dicts, upstream field names).
        trajectory_id, task_id: identifiers stored in the Engram.
        media_dir: the trajectory's ``media/`` folder for content resolution (None: only ``_resolved_*`` fields).
        upstream_quirks: reproduce upstream's edit-diff quirk in the semantic unit (§13).
        llm_fn: optional ``llm_fn(prompt, system=None) -> str``: LLM descriptor and LLM episode segmentation; the
            default is fully deterministic.
        source: name for error messages (default ``trajectory_id``).

    Raises:
        ValueError: malformed events (message names the source, event index and field).
    """
    src = source or trajectory_id
    normed = normalize_events(events, media_dir, source=src)
    beh = behavioral(normed)
    procedural = extract_procedural(normed, upstream_quirks=upstream_quirks)
    seq = sequence_features(beh)
    unit = semantic_unit(beh, normed, upstream_quirks=upstream_quirks)
    desc = llm_descriptor(unit, procedural, llm_fn) if llm_fn is not None else None
    unit["llm_encoding"] = desc or rule_descriptor(unit, procedural, seq)
    return Engram(
        trajectory_id=trajectory_id,
        task_id=task_id,
        procedural=procedural,
        auxiliary=extract_auxiliary(normed, procedural),
        semantic=unit,
        episodes=segment_episodes(beh, trajectory_id, task_id, llm_fn=llm_fn),
        fingerprint=fingerprint(procedural),
        sequence_features=seq,
        event_count=len(normed),
        behavioral_event_count=len(beh),
        importance_score=importance_score(len(beh), len(normed), procedural),
        upstream_quirks=upstream_quirks,
    )


#: largest events.json read, in bytes (ours: generated files are hundreds of KB; upstream's largest a few MB)
MAX_EVENTS_FILE_BYTES = 256 << 20
#: fields a caller may add to an event: media content already resolved (§7.1 "media resolution")
RESOLVED_FIELDS = ("_resolved_content", "_resolved_diff", "_resolved_content_old", "_resolved_content_new")


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """Read an events.json file.

    Raises:
        ValueError: the file is too large, not valid JSON or not an array (names the file, line and column).
        FileNotFoundError: the file is missing.
    """
    path = Path(path)
    return parse_events(path.read_bytes(), str(path))


def parse_events(data: bytes, source: str) -> list[dict[str, Any]]:
    """Parse the bytes of an events.json; ``source`` names it in errors.

    Raises:
        ValueError: larger than :data:`MAX_EVENTS_FILE_BYTES`, not UTF-8, not valid JSON (a key given twice in one
            event and too deep nesting included), or not an array (names the source, line and column).
    """
    if len(data) > MAX_EVENTS_FILE_BYTES:
        raise InputLimitError(f"{source}: too large: {len(data):,} bytes (limit {MAX_EVENTS_FILE_BYTES:,})")
    events = load_json(data, source)
    if not isinstance(events, list):
        raise ValueError(f"{source}: expected a JSON array of events, got {type(events).__name__}")  # noqa: TRY004
    return events


def check_events(events: list[Any], source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Validate every event of an events.json as ``filegram engine filter`` does (the event schema of
    :mod:`filegram_ray.schema.events`, strict types, bounded field sizes) and drop the invalid ones.

    An event that fails is skipped, never the trajectory (the original FileGramOS loader skips an event without
    ``event_type`` too: case FID/missing_event_type). ``_resolved_*`` content fields (§7.1) are accepted on top of the
    schema, within :data:`~filegram_ray.schema.events.MAX_FIELD_CHARS`.

    Returns:
        ``(valid_events, problems)``: the valid event dicts unchanged and in order, and one message per skipped
        event naming ``source``, its index and the field.
    Raises:
        ValueError: ``events`` is not a list, or it holds events and none of them is valid (names ``source``).
    """
    if not isinstance(events, list):
        raise ValueError(f"{source}: expected a JSON array of events, got {type(events).__name__}")  # noqa: TRY004
    kept: list[dict[str, Any]] = []
    problems: list[str] = []
    for i, ev in enumerate(events):
        try:
            core = ev
            if isinstance(ev, dict) and any(k in ev for k in RESOLVED_FIELDS):
                core = {k: v for k, v in ev.items() if k not in RESOLVED_FIELDS}
                for k in RESOLVED_FIELDS:
                    v = ev.get(k)
                    if v is not None and not isinstance(v, str):
                        raise EventParseError(f"event[{i}]: field '{k}': expected a string, got {type(v).__name__}")
                    if isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                        raise EventParseError(f"event[{i}]: field '{k}': too large: {len(v):,} characters "
                                              f"(limit {MAX_FIELD_CHARS:,})")
            parse_event(core, i)
        except EventParseError as exc:
            problems.append(f"{source}: {exc}")
            continue
        kept.append(ev)
    if problems and not kept:
        raise ValueError(f"{source}: no valid event: all {len(events)} events fail validation "
                         f"(first: {problems[0].removeprefix(source + ': ')})")
    return kept, problems
