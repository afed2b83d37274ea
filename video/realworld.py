"""The Real-World setting: memory methods ingest events rebuilt from screen recordings.

The caption stage writes, per recording, ``realworld/<recording_id>/events.json`` (engine format, reference §3),
``media/blobs/`` (text seen on screen) and ``video_times.json`` (the recording time of each event). This module
turns those into :class:`~filegram_ray.methods.trajectory.TrajectoryView` objects, through the same media resolution
and path anonymisation as a trajectory (:func:`filegram_ray.methods.trajectory.resolve_media`), so a method cannot
tell a recording from a trajectory except by what the captioner could see.

Context spec of a Real-World item (Visual Grounding, reference §9.1 T4 / §11): ``kind: recording``,
``trajectories: [recording_id]``, ``labels: ["Recording 1"]``, ``held_out: "second half"`` — the method gets the
events of the recording's first half only (``video_t_s`` < half the duration); without ``held_out`` it gets them
all.
"""

from __future__ import annotations

import json
from typing import Any

from filegram_ray.methods.trajectory import KEPT_EVENT_TYPES, TrajectoryView, resolve_media
from filegram_ray.storage import RunDir

__all__ = ["HELD_OUT_SECOND_HALF", "build_recording_views", "cut_time", "load_recording_view"]

#: ``held_out`` value of a context that keeps only the first half of a recording (reference §11: "the first half
#: of a recording is the context").
HELD_OUT_SECOND_HALF = "second half"


def cut_time(run: RunDir, recording_id: str) -> float | None:
    """Half the recording's duration in seconds (``video_times.json``), or None when unknown."""
    rel = f"realworld/{recording_id}/video_times.json"
    if not run.exists(rel):
        return None
    d = run.read_json(rel).get("duration_s")
    return float(d) / 2.0 if d else None


def load_recording_view(run: RunDir, recording_id: str, label: str, *, first_half: bool = False) -> TrajectoryView:
    """The reconstructed events of one recording as a view.

    Args:
        run: the run directory.
        recording_id: ``<profile_id>/<task_id>`` for our recordings, ``ext/…`` for others (only locates the folder).
        label: the opaque label the method sees.
        first_half: keep only events read from the first half of the recording.

    Raises:
        StorageError: ``events.json`` missing (the caption stage has not reconstructed this recording).
        ValueError: ``events.json`` is not a list, or ``video_times.json`` does not match it.
    """
    base = f"realworld/{recording_id}"
    events = run.read_json(f"{base}/events.json")
    if not isinstance(events, list):
        raise ValueError(f"{base}/events.json: top level must be a list of events")  # noqa: TRY004
    times: list[float] = []
    if first_half:
        vt = run.read_json(f"{base}/video_times.json")
        times = [float(t) for t in vt.get("video_t_s") or []]
        if len(times) != len(events):
            raise ValueError(f"{base}/video_times.json: {len(times)} times for {len(events)} events")
        cut = float(vt.get("duration_s") or 0.0) / 2.0
        events = [e for e, t in zip(events, times) if t < cut]
    cache: dict[str, str | None] = {}

    def read_media(rel: str) -> str | None:
        if rel not in cache:
            try:
                cache[rel] = run.read_bytes(f"{base}/media/{rel.lstrip('/')}").decode("utf-8")
            except Exception:  # noqa: BLE001 - missing media: skipped, as for trajectories (reference §7.1)
                cache[rel] = None
        return cache[rel]

    out: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ValueError(f"{base}/events.json: event [{i}] is not an object")  # noqa: TRY004
        if ev.get("event_type") in KEPT_EVENT_TYPES:
            out.append(resolve_media(ev, read_media))
    task = recording_id.rsplit("/", 1)[-1] if not recording_id.startswith("ext/") else ""
    return TrajectoryView(label=label, task_id=task, events=out)


def build_recording_views(run: RunDir, spec: dict[str, Any]) -> list[TrajectoryView]:
    """Views of a ``recording`` context spec (see module doc).

    Raises:
        ValueError: the spec is not a ``recording`` context or names no recording.
    """
    if spec.get("kind") != "recording":
        raise ValueError(f"real-world context: kind must be 'recording', got {spec.get('kind')!r}")
    ids = [str(t) for t in spec.get("trajectories") or []]
    if not ids:
        raise ValueError(f"real-world context {json.dumps(spec, sort_keys=True)[:200]}: no recording")
    labels = list(spec.get("labels") or [])
    if len(labels) != len(ids):
        labels = [f"Recording {i + 1}" for i in range(len(ids))]
    first = spec.get("held_out") == HELD_OUT_SECOND_HALF
    return [load_recording_view(run, rid, lab, first_half=first) for rid, lab in zip(ids, labels)]
