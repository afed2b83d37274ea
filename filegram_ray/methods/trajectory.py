"""What a memory method may see of a trajectory, and how it is loaded and serialised.

A :class:`TrajectoryView` carries an opaque session label (``"Session 3"``), the task id and the kept events with
resolved content. It is built by :func:`load_view` from ``events.json`` and ``media/`` ONLY: ``meta.json``,
``summary.json`` and ``events_raw.json`` are never opened, and the profile id never appears in a view (the
trajectory id is used to locate the folder and then dropped).

Content resolution follows reference §7.1: ``media_ref`` → ``_resolved_content``, ``media_ref_diff`` →
``_resolved_diff``, ``media_ref_old`` → ``_resolved_content_old``, ``media_ref_new`` → ``_resolved_content_new``;
a missing or undecodable media file is skipped silently (as upstream does).

The narrative serialisation (:func:`events_to_narrative`) is the default text form used by the context baselines
(reference §8.1, "Default narrative serialisation"): one numbered line per kept event with anonymised paths, plus a
content block for writes and a diff block for edits.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.storage import RunDir

__all__ = [
    "KEPT_EVENT_TYPES",
    "LEAKAGE_FIELDS",
    "ContentOverride",
    "TrajectoryView",
    "anonymize_path",
    "build_views",
    "event_line",
    "events_to_narrative",
    "load_view",
    "resolve_media",
    "strip_content_override",
    "truncate_content",
]

#: The 12 behavioural event types kept by the post-execution filter (reference §4).
KEPT_EVENT_TYPES = frozenset({
    "file_read", "file_write", "file_edit", "file_search", "file_browse", "file_rename", "file_move",
    "dir_create", "file_delete", "file_copy", "context_switch", "cross_file_reference",
})

#: Envelope fields that identify the user or the generator (reference §3.1, §4); dropped defensively even though
#: events.json is already filtered. ``profile_id`` is ground truth and must never reach a method.
LEAKAGE_FIELDS = frozenset({"profile_id", "session_id", "message_id", "model_provider", "model_name",
                            "is_perturbed", "perturbation"})

#: Media reference field → resolved field (reference §7.1).
MEDIA_FIELDS = {
    "media_ref": "_resolved_content",
    "media_ref_diff": "_resolved_diff",
    "media_ref_old": "_resolved_content_old",
    "media_ref_new": "_resolved_content_new",
}

#: Envelope fields not shown in the generic "anything else" narrative line (reference §8.1).
_ENVELOPE = {"event_id", "event_type", "timestamp", *LEAKAGE_FIELDS, *MEDIA_FIELDS, *MEDIA_FIELDS.values(),
             "stream"}

#: ``content_override(trajectory_id, event) -> str | None``: replacement text for a created/edited file's content,
#: e.g. text recovered from rendered derivatives in the Multimodal setting; ``None`` keeps the original. It runs on
#: the evaluator's side of the loader (it may use the trajectory id to find derivatives); the method only ever sees
#: the resulting view.
ContentOverride = Callable[[str, dict[str, Any]], "str | None"]


@dataclass
class TrajectoryView:
    """One trajectory as a memory method sees it.

    Attributes:
        label: opaque session label (``"Session 3"``, ``"Session T-12"``); never contains a profile id.
        task_id: the task id (``"T-12"``); tasks are public, users are not.
        events: kept events (12 types, reference §4) in order, with ``_resolved_*`` content fields; paths are the
            anonymised relative paths written by the filter. An interleaved pair (Trace Disentanglement) carries a
            ``stream`` field (the label of the user each event came from) on each event.
    """

    label: str
    task_id: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.events, list):
            raise TypeError(f"TrajectoryView {self.label!r}: events must be a list, got {type(self.events).__name__}")


def anonymize_path(path: Any) -> str:
    """Reference §4 rule: after ``/sandbox/<dir>/`` keep the rest (``"."`` if empty); else keep only the basename.

    Relative paths (already anonymised by the filter) are returned unchanged.
    """
    if not isinstance(path, str) or not path:
        return "" if path is None else str(path)
    marker = "/sandbox/"
    if marker in path:
        rest = path.split(marker, 1)[1]
        parts = rest.split("/", 1)
        return parts[1] if len(parts) > 1 and parts[1] else "."
    if path.startswith("/"):
        return posixpath.basename(path.rstrip("/")) or "."
    return path


def truncate_content(text: str, n: int) -> str:
    """Keep the first ``n`` characters and append ``... [truncated, <len> chars total]`` (reference §8.1)."""
    if n < 0 or len(text) <= n:
        return text
    return f"{text[:n]}... [truncated, {len(text)} chars total]"


def resolve_media(event: dict[str, Any], read_media: Callable[[str], str | None]) -> dict[str, Any]:
    """Return a copy of ``event`` with ``_resolved_*`` fields filled from its media references (reference §7.1).

    Args:
        event: one kept event.
        read_media: ``rel_path_under_media -> text | None``.
    """
    ev = {k: v for k, v in event.items() if k not in LEAKAGE_FIELDS}
    for ref_field, out_field in MEDIA_FIELDS.items():
        ref = ev.get(ref_field)
        if out_field in ev or not ref:
            continue
        rel = ref.get("path") if isinstance(ref, dict) else ref if isinstance(ref, str) else None
        if not rel:
            continue
        text = read_media(str(rel))
        if text is not None:
            ev[out_field] = text
    for key in ("file_path", "old_path", "new_path", "dir_path", "directory_path", "source_path", "dest_path",
                "from_file", "to_file", "source_file", "target_file"):
        if isinstance(ev.get(key), str):
            ev[key] = anonymize_path(ev[key])
    return ev


def strip_content_override(trajectory_id: str, event: dict[str, Any]) -> str | None:
    """Content override that removes created-file text (upstream ``strip-content`` switch, reference §8.3): the
    fallback simulation of the Multimodal setting when no rendered derivatives are available."""
    return ""


def _apply_override(trajectory_id: str, ev: dict[str, Any], override: ContentOverride | None) -> dict[str, Any]:
    if override is None or ev.get("event_type") not in ("file_write", "file_edit"):
        return ev
    new = override(trajectory_id, ev)
    if new is None:
        return ev
    for key in ("_resolved_content", "_resolved_content_new", "_resolved_diff", "_resolved_content_old"):
        if key in ev:
            ev[key] = new if key in ("_resolved_content", "_resolved_content_new") else ""
    if "_resolved_content" not in ev and "_resolved_content_new" not in ev:
        ev["_resolved_content"] = new
    return ev


def load_view(run: RunDir, trajectory_id: str, label: str, *,
              content_override: ContentOverride | None = None) -> TrajectoryView:
    """Load one trajectory as a :class:`TrajectoryView` from ``trajectories/<trajectory_id>/events.json`` + media.

    Args:
        run: the run directory.
        trajectory_id: ``"<profile_id>/<task_id>"`` (used only to find the folder; not kept).
        label: the opaque session label the method will see.
        content_override: optional replacement of created/edited file content (Multimodal setting hook).

    Raises:
        StorageError: events.json is missing or not JSON (the message names the file).
        ValueError: events.json is not a list of objects (names the file and the first bad index).
    """
    if "/" not in trajectory_id:
        raise ValueError(f"trajectory id {trajectory_id!r} must look like '<profile_id>/<task_id>'")
    task_id = trajectory_id.rsplit("/", 1)[1]
    base = f"trajectories/{trajectory_id}"
    events = run.read_json(f"{base}/events.json")
    if not isinstance(events, list):
        raise ValueError(f"{base}/events.json: top level must be a list of events, got {type(events).__name__}")  # noqa: TRY004 - bad file content
    cache: dict[str, str | None] = {}

    def read_media(rel: str) -> str | None:
        if rel not in cache:
            try:
                cache[rel] = run.read_bytes(f"{base}/media/{rel.lstrip('/')}").decode("utf-8")
            except Exception:  # noqa: BLE001 - missing or undecodable media: skipped silently (reference §7.1)
                cache[rel] = None
        return cache[rel]

    out = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ValueError(f"{base}/events.json: event [{i}] is not an object")  # noqa: TRY004
        if ev.get("event_type") not in KEPT_EVENT_TYPES:
            continue
        out.append(_apply_override(trajectory_id, resolve_media(ev, read_media), content_override))
    return TrajectoryView(label=label, task_id=task_id, events=out)


def _labels(spec: dict[str, Any], trajectories: Sequence[str]) -> list[str]:
    labels = spec.get("labels")
    if isinstance(labels, dict):
        return [str(labels.get(t) or f"Session {i + 1}") for i, t in enumerate(trajectories)]
    if isinstance(labels, list) and len(labels) == len(trajectories):
        return [str(x) for x in labels]
    return [f"Session {i + 1}" for i in range(len(trajectories))]


def build_views(run: RunDir, spec: dict[str, Any], *,
                content_override: ContentOverride | None = None) -> list[TrajectoryView]:
    """Turn an item's context spec into the views a method ingests.

    Args:
        spec: ``{kind, trajectories: [trajectory ids], labels?, held_out?}``; ``kind`` ∈ all_trajectories,
            single_trajectory, held_out, sessions_with_impostor, baseline_plus_session (one view per trajectory, in
            the listed order) or interleaved_pair (ONE view whose events are the two trajectories merged by
            timestamp, each event tagged ``stream`` = its trajectory's label, e.g. ``"User 1"`` — reference §9.1
            TraceDis). ``recording`` (Visual Grounding) has no event log and is rejected.
            ``held_out`` (a task id, or a trajectory id) is removed from the list if present.

    Raises:
        ValueError: unknown kind, empty trajectory list, or an interleaved pair without exactly two trajectories.
    """
    kind = spec.get("kind")
    trajs = [str(t) for t in (spec.get("trajectories") or [])]
    held = spec.get("held_out")
    held_set = set(held if isinstance(held, list) else [held] if held else [])
    if held_set:
        keep = [i for i, t in enumerate(trajs) if t not in held_set and t.rsplit("/", 1)[-1] not in held_set]
        labels_all = _labels(spec, trajs)
        trajs, labels = [trajs[i] for i in keep], [labels_all[i] for i in keep]
    else:
        labels = _labels(spec, trajs)
    if not trajs:
        raise ValueError(f"context spec {json.dumps(spec, sort_keys=True)[:200]}: no trajectories")
    if kind == "interleaved_pair":
        if len(trajs) != 2:
            raise ValueError(f"interleaved_pair context needs exactly 2 trajectories, got {len(trajs)}")
        views = [load_view(run, t, lab, content_override=content_override) for t, lab in zip(trajs, labels)]
        merged = []
        for tag, v in zip(labels, views):
            for j, ev in enumerate(v.events):
                merged.append((float(ev.get("timestamp") or 0.0), tag, j, {**ev, "stream": tag}))
        merged.sort(key=lambda x: (x[0], x[1], x[2]))
        return [TrajectoryView(label=f"Interleaved session ({' + '.join(labels)})", task_id=views[0].task_id,
                               events=[m[3] for m in merged])]
    if kind == "recording":
        raise ValueError("context kind 'recording' (Visual Grounding) has no event log; text methods cannot "
                         "ingest it")
    if kind not in ("all_trajectories", "single_trajectory", "held_out", "sessions_with_impostor",
                    "baseline_plus_session", None):
        raise ValueError(f"context spec: unknown kind {kind!r}")
    return [load_view(run, t, lab, content_override=content_override) for t, lab in zip(trajs, labels)]


# ---------------------------------------------------------------------------------------------- narrative


def _content_block(text: str, tag: str, max_content_chars: int) -> list[str]:
    if max_content_chars == 0 or not text:
        return []
    return [f"--- {tag} ---", truncate_content(text, max_content_chars), "--- end ---"]


def event_line(ev: dict[str, Any], max_content_chars: int = -1) -> list[str]:
    """Render one kept event as narrative lines (reference §8.1 default serialisation).

    Args:
        max_content_chars: −1 full resolved content, 0 none, >0 truncate with :func:`truncate_content`.
    """
    t = ev.get("event_type", "unknown")
    p = anonymize_path(ev.get("file_path", ""))
    prefix = f"[{ev['stream']}] " if ev.get("stream") else ""
    if t == "file_read":
        vr = ev.get("view_range")
        rng = f"lines {list(vr)}, " if vr else ""
        lines = [f"Read file: {p} ({rng}view #{ev.get('view_count', 1)}, {ev.get('content_length', 0)} chars)"]
    elif t == "file_write":
        op = "Overwrite" if ev.get("operation") == "overwrite" else "Create"
        lines = [f"{op} file: {p} ({ev.get('content_length', 0)} chars)"]
        lines += _content_block(ev.get("_resolved_content", ""), "content", max_content_chars)
    elif t == "file_edit":
        lines = [(f"Edit file: {p} (+{ev.get('lines_added', 0)}/-{ev.get('lines_deleted', 0)} lines, "
                 f"tool: {ev.get('edit_tool', 'edit')})")]
        diff = ev.get("_resolved_diff") or ev.get("_resolved_content_new") or ev.get("_resolved_content", "")
        lines += _content_block(diff, "diff", max_content_chars)
    elif t == "file_search":
        lines = [(f"Search ({ev.get('search_type', 'grep')}): query='{ev.get('query', '')}', "
                 f"{ev.get('files_matched', 0)} matches")]
    elif t == "file_browse":
        lines = [(f"Browse directory: {anonymize_path(ev.get('directory_path', ''))} "
                 f"({ev.get('files_listed', 0)} files, depth={ev.get('depth', 0)})")]
    elif t in ("file_rename", "file_move"):
        verb = "Rename" if t == "file_rename" else "Move"
        lines = [f"{verb}: {anonymize_path(ev.get('old_path', ''))} -> {anonymize_path(ev.get('new_path', ''))}"]
    elif t == "dir_create":
        lines = [f"Create directory: {anonymize_path(ev.get('dir_path', ''))} (depth={ev.get('depth', 0)})"]
    elif t == "file_delete":
        lines = [f"Delete file: {p}"]
    elif t == "file_copy":
        lines = [(f"Copy: {anonymize_path(ev.get('source_path', ''))} -> {anonymize_path(ev.get('dest_path', ''))} "
                 f"(backup={bool(ev.get('is_backup', False))})")]
    elif t == "context_switch":
        lines = [(f"Context switch: {anonymize_path(ev.get('from_file') or '')} -> "
                 f"{anonymize_path(ev.get('to_file', ''))} (trigger: {ev.get('trigger', 'file_read')})")]
    elif t == "cross_file_reference":
        lines = [(f"Cross-file reference: {anonymize_path(ev.get('source_file', ''))} -> "
                 f"{anonymize_path(ev.get('target_file', ''))} ({ev.get('reference_type', '')})")]
    else:
        rest = {k: v for k, v in ev.items() if k not in _ENVELOPE}
        lines = [f"{t}: {json.dumps(rest, sort_keys=True, ensure_ascii=False, default=str)}"]
    lines[0] = prefix + lines[0]
    return lines


def events_to_narrative(events: Iterable[dict[str, Any]], max_content_chars: int = -1, start: int = 1) -> str:
    """Numbered narrative of events, one ``"<n>. <line>"`` per event (reference §8.1)."""
    out = []
    for n, ev in enumerate(events, start=start):
        lines = event_line(ev, max_content_chars)
        out.append(f"{n}. {lines[0]}")
        out.extend(lines[1:])
    return "\n".join(out)
