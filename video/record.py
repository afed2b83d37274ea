"""Guidance videos: one trajectory → its GUI operation sequence → an H.264 MP4 (reference §11).

:class:`TrajectorySource` reads what a recording needs from a trajectory folder: the kept events
(``events.json``), the workspace listing before the first event (the first ``fs_snapshot`` of
``events_raw.json``, else the workspace folder), previews of workspace files (text extraction of
:mod:`filegram_ray.workspace.extract`; media through their ``bundle.json`` annotations) and written content
(the media store, reference §2.2). :func:`record` builds the timeline (:mod:`video.timeline`), draws each distinct
screen once (:mod:`video.frames`) and pipes the frames to ffmpeg (:mod:`video.encode`).

Same events and options → same bytes (deterministic drawing, bit-exact single-thread x264).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json
from filegram_ray.storage import RunDir
from video.timeline import Timeline, TimingParams, build_timeline, timeline_json

log = logging.getLogger(__name__)

__all__ = ["RecordOptions", "RecordResult", "TrajectorySource", "record", "record_to_file"]


class RecordOptions(BaseModel):
    """How a guidance video looks and plays (the ``record:`` section's rendering keys).

    Defaults: 1280 × 720 at 15 fps (the paper's recorder used 1920 × 1080 at 30 fps, reference §11: set
    ``width: 1920, height: 1080, fps: 30`` to match it).
    """

    model_config = ConfigDict(extra="forbid")
    width: int = Field(1280, description="frame width in pixels (even)")
    height: int = Field(720, description="frame height in pixels (even)")
    fps: int = Field(15, ge=1, le=120, description="frames per second")
    speed: float = Field(4.0, gt=0, description="playback speed factor (reference §11; 1.0 = real time)")
    min_gesture_s: float = Field(1.4, gt=0, description="shortest gesture, seconds of video")
    max_gesture_s: float = Field(4.0, gt=0, description="longest gesture, seconds of video")
    font: str = Field("sans", description="OpenCV built-in face ('sans': CJK through its Unicode fallback) or a "
                                          "font file path")
    font_px: int = Field(15, ge=8, le=40, description="text size in pixels at 720 p (scaled with the height)")
    preset: str = Field("ultrafast", description="x264 preset")
    qp: int = Field(20, ge=0, le=51, description="x264 constant quantiser (lower = sharper text, larger files)")
    crf: int | None = Field(None, ge=0, le=51, description="x264 constant quality instead of qp, when set")

    def timing(self) -> TimingParams:
        return TimingParams(speed=self.speed, min_gesture_s=self.min_gesture_s, max_gesture_s=self.max_gesture_s)

    def key(self) -> str:
        """12-hex digest of the options and :data:`~video.timeline.TIMELINE_VERSION`: a recording made with other
        options, or by another version of the timeline, is made again."""
        from video.timeline import TIMELINE_VERSION

        data = {**self.model_dump(mode="json"), "timeline_version": TIMELINE_VERSION}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


class TrajectorySource:
    """Read access to one trajectory folder (and, optionally, its task's workspace).

    Args:
        traj: the trajectory folder (``events.json``, ``events_raw.json``, ``media/``).
        workspace: the workspace bundle folder (``files/`` + ``bundle.json``), or None.
        title: window title shown in the video.

    Raises:
        ValueError: ``events.json`` is missing, not JSON, or not a list (names the file).
    """

    def __init__(self, traj: RunDir, workspace: RunDir | None = None, title: str = "Workspace"):
        self.traj, self.ws, self.title = traj, workspace, title
        try:
            raw = traj.read_bytes("events.json")
        except Exception as exc:
            raise UserError(f"{traj.uri}/events.json: cannot read: {exc}") from exc
        from filegram_ray.memory.engram import parse_events

        self.events: list[dict[str, Any]] = parse_events(raw, f"{traj.uri}/events.json")
        for i, ev in enumerate(self.events):
            if not isinstance(ev, dict) or "event_type" not in ev:
                raise UserError(f"{traj.uri}/events.json: event [{i}] has no field 'event_type'")
        self._ann: dict[str, str] | None = None

    @classmethod
    def from_run(cls, run: RunDir, trajectory_id: str) -> TrajectorySource:
        """The trajectory ``<profile_id>/<task_id>`` of a run directory, with its task's workspace."""
        task = trajectory_id.rsplit("/", 1)[-1]
        ws = RunDir(run.url(f"workspaces/{task}"), run.storage_options) if run.exists(f"workspaces/{task}") \
            else None
        return cls(RunDir(run.url(f"trajectories/{trajectory_id}"), run.storage_options), ws,
                   title=f"Workspace {task}")

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, workspace: str | os.PathLike | None = None) -> TrajectorySource:
        """A trajectory folder on disk; its workspace is ``workspace`` or, inside a run directory, found at
        ``<run>/workspaces/<task>`` (the folder being ``<run>/trajectories/<profile>/<task>``)."""
        p = Path(folder).resolve()
        if not (p / "events.json").exists():
            raise FileNotFoundError(f"{p}: no events.json (not a trajectory folder)")
        ws = Path(workspace).resolve() if workspace else p.parent.parent.parent / "workspaces" / p.name
        return cls(RunDir(str(p)), RunDir(str(ws)) if ws.exists() else None, title=f"Workspace {p.name}")

    # ---------------------------------------------------------------- what the timeline needs
    def initial_files(self) -> list[str]:
        """Relative paths present before the first event: the first ``fs_snapshot`` listing of ``events_raw.json``
        (reference §2.2), else the workspace's ``files/`` folder, else none."""
        if self.traj.exists("events_raw.json"):
            try:
                for ev in load_json(self.traj.read_bytes("events_raw.json"), f"{self.traj.uri}/events_raw.json"):
                    if isinstance(ev, dict) and ev.get("event_type") == "fs_snapshot":
                        ref = ev.get("media_ref") or {}
                        listing = self.media_of(ref)
                        if listing is not None:
                            files = load_json(listing, f"{self.traj.uri}/media/{ref.get('path')}")
                            if isinstance(files, list):
                                return [str(f) for f in files]
                        tree = ev.get("directory_tree")
                        if isinstance(tree, list):
                            return [str(f) for f in tree]
                        break
            except (ValueError, TypeError) as exc:
                log.warning("%s: events_raw.json unusable for the initial listing: %s", self.traj.uri, exc)
        if self.ws is not None:
            return [posixpath.relpath(p, "files") for p in self.ws.walk_files("files")]
        return []

    def media_of(self, ref: Any) -> str | None:
        """Text of a media reference (object ``{type, hash, path}`` or a legacy file name), None if unreadable."""
        rel = ref.get("path") if isinstance(ref, dict) else ref if isinstance(ref, str) else None
        if not rel:
            return None
        try:
            return self.traj.read_bytes(f"media/{rel.lstrip('/')}").decode("utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - a missing blob shows as "(content not stored)"
            return None

    def _annotations(self) -> dict[str, str]:
        if self._ann is None:
            self._ann = {}
            if self.ws is not None and self.ws.exists("bundle.json"):
                try:
                    for f in self.ws.read_json("bundle.json").get("files") or []:
                        ann = f.get("annotation") if isinstance(f, dict) else None
                        if isinstance(ann, dict) and ann.get("content"):
                            self._ann[str(f.get("path"))] = f"[{ann.get('modality', 'media')}] {ann['content']}"
                except Exception as exc:  # noqa: BLE001 - previews only
                    log.warning("%s: bundle.json unreadable: %s", self.ws.uri, exc)
        return self._ann

    def text_of(self, path: str) -> str | None:
        """Preview text of a workspace file: its extracted text (reference §1.1: documents as text, media as their
        annotation), or None."""
        if path in self._annotations():
            return self._annotations()[path]
        if self.ws is None or not self.ws.exists(f"files/{path}"):
            return None
        from filegram_ray.workspace.extract import extract_text, is_media, kind_of

        if is_media(kind_of(path)):
            return None
        data = self.ws.read_bytes(f"files/{path}")
        suffix = "." + path.rsplit(".", 1)[-1] if "." in posixpath.basename(path) else ""
        with tempfile.TemporaryDirectory(prefix="fgvid-") as tmp:
            local = Path(tmp) / f"file{suffix}"
            local.write_bytes(data)
            return extract_text(local)


@dataclass
class RecordResult:
    """One recording: the timeline and what was written."""

    timeline: Timeline
    frames: int
    drawn: int
    duration_s: float
    render_s: float
    mp4: bytes


def record(source: TrajectorySource, opts: RecordOptions | None = None) -> RecordResult:
    """Render the guidance video of one trajectory.

    Args:
        source: the trajectory.
        opts: :class:`RecordOptions`.

    Returns:
        :class:`RecordResult` with the MP4 bytes.

    Raises:
        ValueError: bad options or unreadable events. RuntimeError: ffmpeg failed.
    """
    from video.encode import EncodeParams, Mp4Writer
    from video.frames import FrameRenderer, layout

    opts = opts or RecordOptions()
    if opts.min_gesture_s > opts.max_gesture_s:
        raise UserError(f"record: min_gesture_s {opts.min_gesture_s} > max_gesture_s {opts.max_gesture_s}")
    t0 = time.perf_counter()
    L = layout(opts.width, opts.height, opts.font_px)
    tl = build_timeline(source.events, initial_files=source.initial_files(), text_of=source.text_of,
                        media_of=source.media_of, title=source.title, fps=opts.fps, timing=opts.timing(),
                        visible_lines=L.visible_lines, tree_rows=L.tree_rows)
    renderer = FrameRenderer(opts.width, opts.height, opts.font, opts.font_px)
    with tempfile.TemporaryDirectory(prefix="fgvid-") as tmp:
        out = Path(tmp) / "video.mp4"
        with Mp4Writer(out, opts.width, opts.height, opts.fps, EncodeParams(preset=opts.preset, qp=opts.qp, crf=opts.crf)) as w:
            for step in tl.steps:
                w.write(renderer.render(step.screen), step.frames)
        data = out.read_bytes()
    return RecordResult(timeline=tl, frames=tl.frames, drawn=renderer.drawn, duration_s=tl.duration_s,
                        render_s=time.perf_counter() - t0, mp4=data)


def record_to_file(folder: str | os.PathLike, out: str | os.PathLike, opts: RecordOptions | None = None,
                   workspace: str | os.PathLike | None = None) -> dict[str, Any]:
    """``filegram video record``: a trajectory folder → ``out`` (MP4) + ``out`` with ``.timeline.json``.

    Returns:
        A summary: path, frames, duration_s, bytes, sha256, gestures, seconds.
    """
    from filegram_ray.storage import atomic_write_local
    from video.encode import probe

    res = record(TrajectorySource.from_folder(folder, workspace), opts)
    out = Path(out)
    atomic_write_local(out, res.mp4)
    atomic_write_local(out.with_suffix(".timeline.json"), timeline_json(res.timeline).encode("utf-8"))
    info = probe(out)
    return {"path": str(out), "frames": info.frames, "duration_s": round(info.duration_s, 3),
            "size": f"{info.width}x{info.height}", "bytes": len(res.mp4),
            "sha256": hashlib.sha256(res.mp4).hexdigest(), "gestures": len(res.timeline.gestures),
            "distinct_frames": res.drawn, "seconds": round(res.render_s, 2)}
