"""Input preparation for FileGramOS (FILEGRAM_REFERENCE §7.1): media resolution, path anonymisation and the
event normaliser.

An *event* is a flat dict with upstream field names (§3). A *media reference* is ``{type, hash, path}`` with
``path`` relative to the trajectory's ``media/`` folder (§2.2).
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filegram_ray.memory.constants import CONSUMER_TYPES, SIMULATION_TYPES

log = logging.getLogger(__name__)

__all__ = ["MediaResolver", "NormalizedEvent", "anonymize_path", "normalize_events", "resolve_media"]

_SANDBOX_RE = re.compile(r"/sandbox/[^/]+/?")


def anonymize_path(path: str | None) -> str:
    """Anonymise a path (§4, last bullets).

    ``/sandbox/<dir>/a/b.md`` → ``a/b.md`` (``"."`` if nothing follows); any other *absolute* path → its basename;
    a relative path (events.json is already anonymised) is kept as is. ``None``/empty → ``""``.
    """
    if not path:
        return ""
    p = str(path)
    if "/sandbox/" not in p and not p.startswith("/") and ":" not in p:
        return p  # already relative (the common case for filtered events.json)
    m = _SANDBOX_RE.search(p)
    if m:
        rest = p[m.end():].strip("/")
        return rest or "."
    if p.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", p):
        return p.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return p


class MediaResolver:
    """Reads media texts of one trajectory (``media/blobs/<hash>.blob``, ``media/diffs/<hash>.diff``).

    A missing or undecodable file, or a reference that is not a ``{path: ...}`` object (the legacy string form of
    §2.2), resolves to ``""`` — as upstream, silently (§7.1). Reads are cached per path.
    """

    def __init__(self, media_dir: str | Path | None):
        self.media_dir = Path(media_dir) if media_dir else None
        self._cache: dict[str, str] = {}

    def __call__(self, ref: Any) -> str:
        if self.media_dir is None or not isinstance(ref, dict):
            return ""
        rel = ref.get("path")
        if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/"):
            return ""
        if rel in self._cache:
            return self._cache[rel]
        try:
            text = (self.media_dir / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        self._cache[rel] = text
        return text


def resolve_media(events: list[dict[str, Any]], media_dir: str | Path | None) -> list[dict[str, Any]]:
    """Return copies of ``events`` with ``_resolved_content`` / ``_resolved_diff`` / ``_resolved_content_old`` /
    ``_resolved_content_new`` filled from ``media_ref`` / ``media_ref_diff`` / ``media_ref_old`` / ``media_ref_new``
    (§7.1). Already-resolved fields are kept."""
    resolver = MediaResolver(media_dir)
    out = []
    for ev in events:
        ev = dict(ev)
        for ref_key, res_key in (("media_ref", "_resolved_content"), ("media_ref_diff", "_resolved_diff"),
                                 ("media_ref_old", "_resolved_content_old"),
                                 ("media_ref_new", "_resolved_content_new")):
            if ref_key in ev and not ev.get(res_key):
                text = resolver(ev[ref_key])
                if text:
                    ev[res_key] = text
        out.append(ev)
    return out


@dataclass(slots=True)
class NormalizedEvent:
    """A typed event record with the defaults of §7.1's normaliser table.

    Paths are anonymised. ``old_path``/``new_path``/``dir_path``/``directory_path`` are *ours* (upstream leaves
    them out; episodes and narratives need them) — ``file_path`` keeps upstream semantics (``file_path`` only).
    """

    index: int
    event_type: str
    timestamp: float = 0.0
    file_path: str = ""
    file_type: str = ""
    content_length: int = 0
    view_count: int = 1
    operation: str = ""
    lines_added: int = 0
    lines_deleted: int = 0
    depth: int = 0
    max_depth: int = 0
    directory_tree: Any = None
    is_backup: bool = False
    source_file: str = ""
    target_file: str = ""
    reference_type: str = ""
    tools_called: int = 0
    has_tool_error: bool = False
    resolved_content: str = ""
    resolved_diff: str = ""
    resolved_content_new: str = ""
    old_path: str = ""
    new_path: str = ""
    dir_path: str = ""
    directory_path: str = ""
    search_type: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(ev: dict[str, Any], key: str, default: int, where: str) -> int:
    v = ev.get(key)
    if v is None:
        return default
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return int(v)
    try:
        return int(float(v))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: field {key!r} must be a number, got {v!r}") from exc


def normalize_events(events: list[dict[str, Any]], media_dir: str | Path | None = None, *,
                     source: str = "events") -> list[NormalizedEvent]:
    """Normalise raw events (§7.1).

    Keeps the 14 consumer types (unknown types are dropped, as upstream), resolves media when ``media_dir`` is
    given and the event has no ``_resolved_*`` field yet, and fills defaults.

    Args:
        events: list of flat event dicts.
        media_dir: the trajectory's ``media/`` folder, or None.
        source: name used in error messages (e.g. the events.json path).

    Raises:
        ValueError: ``events`` is not a list of objects, or a numeric field holds a non-number — the message names
            ``source``, the event index and the field. An event without ``event_type`` is skipped with a warning
            naming ``source`` and its index (as the original loader skips it).
    """
    if not isinstance(events, list):
        raise ValueError(f"{source}: expected a JSON array of events, got {type(events).__name__}")  # noqa: TRY004
    resolver = MediaResolver(media_dir)
    out: list[NormalizedEvent] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ValueError(f"{source}: event #{i} is not an object")  # noqa: TRY004
        et = ev.get("event_type")
        if not isinstance(et, str):
            # skipped, as the original FileGramOS loader does (case FID/missing_event_type); never the trajectory
            log.warning("%s: event #%d: missing field 'event_type': event skipped", source, i)
            continue
        if et not in CONSUMER_TYPES:
            continue
        where = f"{source}: event #{i} ({et})"
        content = ev.get("_resolved_content") or ""
        if not content and "media_ref" in ev:
            content = resolver(ev.get("media_ref"))
        diff = ev.get("_resolved_diff") or ""
        if not diff and "media_ref_diff" in ev:
            diff = resolver(ev.get("media_ref_diff"))
        new = ev.get("_resolved_content_new") or ""
        if not new and "media_ref_new" in ev:
            new = resolver(ev.get("media_ref_new"))
        ts = ev.get("timestamp")
        out.append(NormalizedEvent(
            index=len(out),
            event_type=et,
            timestamp=float(ts) if isinstance(ts, (int, float)) else 0.0,
            file_path=anonymize_path(ev.get("file_path")),
            file_type=str(ev.get("file_type") or ""),
            content_length=_int(ev, "content_length", 0, where),
            view_count=_int(ev, "view_count", 1, where),
            operation=str(ev.get("operation") or ""),
            lines_added=_int(ev, "lines_added", 0, where),
            lines_deleted=_int(ev, "lines_deleted", 0, where),
            depth=_int(ev, "depth", 0, where),
            max_depth=_int(ev, "max_depth", 0, where),
            directory_tree=ev.get("directory_tree"),
            is_backup=bool(ev.get("is_backup") or False),
            source_file=anonymize_path(ev.get("source_file") or ev.get("source_path")),
            target_file=anonymize_path(ev.get("target_file") or ev.get("dest_path")),
            reference_type=str(ev.get("reference_type") or ""),
            tools_called=_int(ev, "tools_called", 0, where),
            has_tool_error=bool(ev.get("has_tool_error") or False),
            resolved_content=content if isinstance(content, str) else "",
            resolved_diff=diff if isinstance(diff, str) else "",
            resolved_content_new=new if isinstance(new, str) else "",
            old_path=anonymize_path(ev.get("old_path")),
            new_path=anonymize_path(ev.get("new_path")),
            dir_path=anonymize_path(ev.get("dir_path")),
            directory_path=anonymize_path(ev.get("directory_path")),
            search_type=str(ev.get("search_type") or ""),
        ))
    return out


def behavioral(events: list[NormalizedEvent]) -> list[NormalizedEvent]:
    """The behavioural events (the 12 kept types), in order (§7.1 last bullet)."""
    return [e for e in events if e.event_type not in SIMULATION_TYPES]
